//! DynamoDB items, the one set of helpers every table user here shares (the store, the agent
//! catalog, the knowledge registry, the remote hub): attribute values made and read, and what an
//! SDK error says.

use std::collections::HashMap;

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::types::AttributeValue;

/// One item: attribute names to values.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// A string attribute.
pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute.
pub(crate) fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The string at `key`, empty when it is missing or not a string.
pub(crate) fn text<'a>(item: &'a Item, key: &str) -> &'a str {
    item.get(key)
        .and_then(|v| v.as_s().ok())
        .map_or("", String::as_str)
}

/// The integer at `key`, 0 when it is missing or not an integer.
pub(crate) fn number(item: &Item, key: &str) -> i64 {
    item.get(key)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or_default()
}

/// The boolean at `key`, false when it is missing or not a boolean.
pub(crate) fn flag(item: &Item, key: &str) -> bool {
    item.get(key)
        .and_then(|v| v.as_bool().ok())
        .copied()
        .unwrap_or_default()
}

/// What an AWS service (DynamoDB, SQS, ...) said of a failed request: its error code and message,
/// or the SDK's error.
pub(crate) fn sdk_detail<E: ProvideErrorMetadata + std::fmt::Debug>(err: &SdkError<E>) -> String {
    match err.as_service_error() {
        Some(service) => format!(
            "{}: {}",
            service.code().unwrap_or("error"),
            service.message().unwrap_or("")
        ),
        None => format!("{err}"),
    }
}

/// True when a request failed on its condition (`ConditionalCheckFailedException`).
pub(crate) fn is_condition_failure<E: ProvideErrorMetadata + std::fmt::Debug>(
    err: &SdkError<E>,
) -> bool {
    err.as_service_error()
        .and_then(ProvideErrorMetadata::code)
        .is_some_and(|code| code == "ConditionalCheckFailedException")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_and_missing_or_wrong_ones_are_empty() {
        let item: Item = [
            ("name".to_owned(), s("kiln")),
            ("seen".to_owned(), n(1_767_225_600_123_i64)),
            ("online".to_owned(), AttributeValue::Bool(true)),
            ("odd".to_owned(), n("not a number")),
        ]
        .into();
        assert_eq!(text(&item, "name"), "kiln");
        assert_eq!(number(&item, "seen"), 1_767_225_600_123);
        assert!(flag(&item, "online"));
        assert_eq!(text(&item, "seen"), "", "a number is not a string");
        assert_eq!(number(&item, "odd"), 0);
        assert_eq!(number(&item, "missing"), 0);
        assert!(!flag(&item, "name"));
    }
}
