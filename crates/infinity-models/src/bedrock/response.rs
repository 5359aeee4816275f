//! What Converse answers: a completion, or an error that names its type.

use infinity_agent_core::model::{
    Completion, ModelError, ModelErrorKind, ModelToolCall, StopReason, Usage,
};
use serde::Deserialize;
use serde_json::Value;

use infinity_retry::model_status_is_transient;

use crate::transport::{Attempt, ErrorResponse};

/// A Converse response, as far as we read it; what else it holds (metrics, trace) is skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConverseResponse {
    #[serde(default)]
    output: Output,
    #[serde(default)]
    stop_reason: String,
    #[serde(default)]
    usage: TokenUsage,
}

#[derive(Default, Deserialize)]
struct Output {
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Vec<ContentBlock>,
}

/// A block of the reply; kinds we do not read (reasoning, citations) leave both fields empty.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContentBlock {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<ToolUse>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ToolUse {
    tool_use_id: String,
    name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct TokenUsage {
    input_tokens: u64,
    output_tokens: u64,
    cache_read_input_tokens: u64,
    cache_write_input_tokens: u64,
}

/// The completion a successful response's body holds.
pub(super) fn completion(body: &[u8]) -> Result<Completion, String> {
    let response: ConverseResponse = serde_json::from_slice(body)
        .map_err(|e| format!("bedrock: the response is not a Converse reply: {e}"))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in response.output.message.into_iter().flat_map(|m| m.content) {
        if let Some(t) = block.text {
            text.push_str(&t);
        }
        if let Some(call) = block.tool_use {
            tool_calls.push(ModelToolCall {
                id: Some(call.tool_use_id),
                name: call.name,
                args: call.input,
            });
        }
    }
    let stop_reason = match response.stop_reason.as_str() {
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        _ => StopReason::EndTurn,
    };
    let usage = response.usage;
    Ok(Completion {
        text: Some(text).filter(|t| !t.is_empty()),
        tool_calls,
        stop_reason,
        usage: Usage {
            completions: 0,
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            cache_read_tokens: usage.cache_read_input_tokens,
            cache_write_tokens: usage.cache_write_input_tokens,
            ..Usage::default()
        },
    })
}

/// Errors a retry may get past: Bedrock busy, throttled, or the model not loaded yet.
const RETRYABLE_ERRORS: [&str; 5] = [
    "ThrottlingException",
    "ServiceUnavailableException",
    "InternalServerException",
    "ModelNotReadyException",
    "ModelTimeoutException",
];

/// What an error response means: retried when its type is one a retry may get past, or its
/// status is 429 or 5xx; given up on otherwise. The error reads `bedrock: TYPE: message`.
pub(super) fn failure(response: ErrorResponse) -> Attempt {
    let body: Option<Value> = serde_json::from_str(&response.body).ok();
    let field = |names: &[&str]| {
        let body = body.as_ref()?;
        names.iter().find_map(|name| body.get(name)?.as_str())
    };
    let error_type = response
        .headers
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .or_else(|| field(&["code", "__type"]))
        .map(error_type_name)
        .filter(|t| !t.is_empty());
    let message = field(&["message", "Message", "errorMessage"]);
    let why = match (error_type, message) {
        (Some(kind), Some(message)) => format!("bedrock: {kind}: {message}"),
        (Some(kind), None) => format!("bedrock: {kind} (HTTP {})", response.status),
        (None, _) => format!(
            "bedrock: HTTP {}: {}",
            response.status,
            crate::transport::error_message(&response.body)
        ),
    };
    let kind = match error_type {
        Some("ThrottlingException") => ModelErrorKind::RateLimited,
        Some("AccessDeniedException" | "UnrecognizedClientException") => {
            ModelErrorKind::Credentials
        }
        Some("ModelTimeoutException") => ModelErrorKind::TimedOut,
        _ => crate::transport::status_kind(response.status),
    };
    if error_type.is_some_and(|t| RETRYABLE_ERRORS.contains(&t))
        || model_status_is_transient(response.status)
    {
        Attempt::Retry(kind, why, response.retry_after)
    } else {
        Attempt::Fail(ModelError::terminal(kind, why))
    }
}

/// The bare name of an error type as AWS writes it, which may carry a namespace before a `#`
/// (`com.amazon.coral.service#ValidationException`) or a URL after a `:`.
fn error_type_name(raw: &str) -> &str {
    let raw = raw.split(':').next().unwrap_or(raw);
    raw.rsplit('#').next().unwrap_or(raw).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};
    use reqwest::StatusCode;

    fn error(status: u16, error_type: Option<&str>, body: &str) -> Attempt {
        let mut headers = HeaderMap::new();
        if let Some(t) = error_type {
            headers.insert("x-amzn-errortype", HeaderValue::from_str(t).unwrap());
        }
        failure(ErrorResponse {
            status: StatusCode::from_u16(status).unwrap(),
            headers,
            body: body.to_owned(),
            retry_after: None,
        })
    }

    #[test]
    fn error_types_are_read_from_the_header_or_the_body() {
        let header = error(
            400,
            Some("ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            r#"{"message":"bad schema"}"#,
        );
        assert!(
            matches!(&header, Attempt::Fail(ModelError::Terminal { kind: ModelErrorKind::Refused, text: why }) if why == "bedrock: ValidationException: bad schema"),
            "{header:?}"
        );
        let body = error(
            400,
            None,
            r#"{"__type":"com.amazon.coral.validate#AccessDeniedException","Message":"no"}"#,
        );
        assert!(
            matches!(&body, Attempt::Fail(ModelError::Terminal { kind: ModelErrorKind::Credentials, text: why }) if why == "bedrock: AccessDeniedException: no"),
            "{body:?}"
        );
    }

    #[test]
    fn what_a_retry_may_get_past_is_retried() {
        // A model timing out is 408, which no status rule retries.
        for (status, kind) in [
            (429, "ThrottlingException"),
            (408, "ModelTimeoutException"),
            (429, "ModelNotReadyException"),
            (503, "ServiceUnavailableException"),
            (500, "InternalServerException"),
        ] {
            let attempt = error(status, Some(kind), r#"{"message":"later"}"#);
            assert!(
                matches!(&attempt, Attempt::Retry(_, why, _) if why.contains(kind)),
                "{attempt:?}"
            );
            let Attempt::Retry(failed, ..) = attempt else {
                unreachable!()
            };
            let expected = match kind {
                "ThrottlingException" => ModelErrorKind::RateLimited,
                "ModelTimeoutException" => ModelErrorKind::TimedOut,
                _ => ModelErrorKind::Unavailable,
            };
            assert!(
                failed == expected
                    || (kind == "ModelNotReadyException" && failed == ModelErrorKind::RateLimited),
                "{attempt:?}"
            );
        }
        // A gateway's error names no type: its status decides.
        let gateway = error(502, None, "<html>Bad Gateway</html>");
        assert!(
            matches!(&gateway, Attempt::Retry(_, why, _) if why.contains("502")),
            "{gateway:?}"
        );
        for (status, kind) in [
            (400, "ValidationException"),
            (403, "AccessDeniedException"),
            (424, "ModelErrorException"),
        ] {
            let attempt = error(status, Some(kind), r#"{"message":"no"}"#);
            assert!(
                matches!(attempt, Attempt::Fail(ModelError::Terminal { text: _, .. })),
                "{kind}"
            );
        }
    }

    #[test]
    fn a_reply_with_blocks_we_do_not_read_and_no_usage() {
        let body = br#"{
            "output": {"message": {"role": "assistant", "content": [
                {"reasoningContent": {"reasoningText": {"text": "hmm"}}},
                {"text": "a"}, {"text": "b"}
            ]}},
            "stopReason": "end_turn"
        }"#;
        let completion = completion(body).unwrap();
        assert_eq!(completion.text.as_deref(), Some("ab"));
        assert_eq!(completion.stop_reason, StopReason::EndTurn);
        assert_eq!(completion.usage.input_tokens, 0);
    }
}
