//! Identifiers: threads, inputs, tool calls and outbox effects.
//!
//! Every id is a short ASCII string of letters, digits, `_` and `-`, so it can be used as an SQS
//! `MessageGroupId`, a DynamoDB key and a file name without escaping.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The string was empty.
    #[error("{kind} must not be empty")]
    Empty {
        /// Which kind of id.
        kind: &'static str,
    },
    /// The string was longer than [`MAX_ID_LEN`].
    #[error("{kind} `{value}` is longer than {MAX_ID_LEN} characters")]
    TooLong {
        /// Which kind of id.
        kind: &'static str,
        /// The offending value.
        value: String,
    },
    /// The string held a character outside `[A-Za-z0-9_-]`.
    #[error("{kind} `{value}` may hold only ASCII letters, digits, `_` and `-`")]
    BadCharacter {
        /// Which kind of id.
        kind: &'static str,
        /// The offending value.
        value: String,
    },
}

/// The longest id we accept (SQS group and deduplication ids allow 128 characters).
pub const MAX_ID_LEN: usize = 128;

fn validate(kind: &'static str, value: &str) -> Result<(), IdError> {
    if value.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if value.len() > MAX_ID_LEN {
        return Err(IdError::TooLong {
            kind,
            value: value.chars().take(40).collect::<String>() + "...",
        });
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(IdError::BadCharacter {
            kind,
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// A fresh random id: `prefix` followed by 20 lowercase hex digits.
fn fresh(prefix: &str) -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("{prefix}{}", &hex[..20])
}

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Checks `value` and wraps it.
            pub fn new(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                validate($kind, &value)?;
                Ok(Self(value))
            }

            /// A new random id.
            pub fn generate() -> Self {
                Self(fresh($prefix))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(value: String) -> Result<Self, IdError> {
                Self::new(value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::new(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:?}", self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_id!(
    /// A thread's id. On the RAP wire it is called `group_id`; on SQS it is the `MessageGroupId`.
    ThreadId,
    "thread id",
    "t-"
);
string_id!(
    /// The id of one input message; the deduplication key of the slice engine.
    InputId,
    "input id",
    "in-"
);
string_id!(
    /// The id of one tool call issued by a model (or synthesized by the runtime).
    CallId,
    "call id",
    "call-"
);
string_id!(
    /// The id of one outbox effect.
    EffectId,
    "effect id",
    "fx-"
);

/// `base` and `suffix` joined by `-`, kept within the id alphabet and length.
fn derived_string(base: &str, suffix: &str) -> String {
    let mut s = format!("{base}-{suffix}");
    s.retain(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if s.len() > MAX_ID_LEN {
        // Keep the (distinguishing) suffix; drop the start of the base.
        s = s[s.len() - MAX_ID_LEN..].to_owned();
    }
    s
}

impl ThreadId {
    /// A deterministic thread id derived from another id and a suffix.
    pub fn derived(base: &str, suffix: &str) -> Self {
        Self(derived_string(base, suffix))
    }
}

impl InputId {
    /// A deterministic id derived from another id and a suffix, so that a retried step produces
    /// the same id (and the receiver deduplicates it).
    pub fn derived(base: &str, suffix: &str) -> Self {
        Self(derived_string(base, suffix))
    }
}

impl CallId {
    /// A deterministic call id derived from another id and a suffix.
    pub fn derived_from(base: &str, suffix: &str) -> Self {
        Self(derived_string(base, suffix))
    }

    /// Wraps a call id produced by a model provider. Providers use ids such as `toolu_01...` or
    /// `call_abc`; anything outside our alphabet is replaced so the id stays storable.
    pub fn from_provider(raw: &str) -> Self {
        let mut s: String = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        s.truncate(MAX_ID_LEN);
        if s.is_empty() {
            return Self::generate();
        }
        Self(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_alphabet() {
        assert!(ThreadId::new("main_thread-01").is_ok());
    }

    #[test]
    fn rejects_bad_ids_with_a_reason() {
        let err = ThreadId::new("a b").unwrap_err();
        assert!(err.to_string().contains("`a b`"), "{err}");
        assert!(matches!(ThreadId::new(""), Err(IdError::Empty { .. })));
        assert!(matches!(
            ThreadId::new("x".repeat(129)),
            Err(IdError::TooLong { .. })
        ));
    }

    #[test]
    fn generated_ids_are_valid_and_distinct() {
        let a = ThreadId::generate();
        let b = ThreadId::generate();
        assert_ne!(a, b);
        assert!(ThreadId::new(a.as_str()).is_ok());
    }

    #[test]
    fn deserialization_validates() {
        let err = serde_json::from_str::<ThreadId>("\"no/slash\"").unwrap_err();
        assert!(err.to_string().contains("no/slash"));
    }

    #[test]
    fn provider_call_ids_are_sanitized() {
        assert_eq!(CallId::from_provider("call:1.2").as_str(), "call_1_2");
    }
}
