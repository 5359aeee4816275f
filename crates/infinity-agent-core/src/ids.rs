//! Identifiers: threads, inputs, tool calls and outbox effects, and the [`IdSource`] fresh ones
//! come from.
//!
//! Every id is a short ASCII string of letters, digits, `_` and `-`, so it can be used as an SQS
//! `MessageGroupId`, a DynamoDB key and a file name without escaping.
//!
//! The slice engine never mints an id at random: it takes fresh ones from the [`IdSource`] its
//! host passes in ([`RandomIds`] in production, [`SeededIds`] in tests and the simulator), so a
//! seeded run replays exactly. Ids that must come out the same when a step is retried are
//! *derived* from the id of what caused them (`InputId::derived`).

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

/// `prefix` followed by the low 80 bits of `bits` as 20 lowercase hex digits.
fn fresh(prefix: &str, bits: u128) -> String {
    format!("{prefix}{:020x}", bits & ((1u128 << 80) - 1))
}

/// Where fresh ids come from. The engine draws every id it mints from one of these, so the host
/// decides whether a run is random ([`RandomIds`]) or replayable ([`SeededIds`]).
pub trait IdSource: Send + fmt::Debug {
    /// 80 or more fresh bits.
    fn next_bits(&mut self) -> u128;

    /// A fresh thread id.
    fn thread_id(&mut self) -> ThreadId {
        ThreadId(fresh("t-", self.next_bits()))
    }

    /// A fresh input id.
    fn input_id(&mut self) -> InputId {
        InputId(fresh("in-", self.next_bits()))
    }

    /// A fresh call id (for a model that gave its tool call none).
    fn call_id(&mut self) -> CallId {
        CallId(fresh("call-", self.next_bits()))
    }

    /// A fresh outbox effect id.
    fn effect_id(&mut self) -> EffectId {
        EffectId(fresh("fx-", self.next_bits()))
    }
}

/// Random ids (UUID v4 bits), for production.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn next_bits(&mut self) -> u128 {
        uuid::Uuid::new_v4().as_u128()
    }
}

/// Ids from a seed (SplitMix64), for tests and the simulator: the same seed gives the same ids in
/// the same order.
#[derive(Debug, Clone)]
pub struct SeededIds {
    state: u64,
}

impl SeededIds {
    /// A source that starts from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl IdSource for SeededIds {
    fn next_bits(&mut self) -> u128 {
        (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64())
    }
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

            /// A new random id (for hosts and applications; the engine takes its ids from an
            /// [`IdSource`]).
            pub fn generate() -> Self {
                Self(fresh($prefix, RandomIds.next_bits()))
            }

            /// A deterministic id derived from another id and a suffix, so that a retried step
            /// produces the same id (and the receiver deduplicates it).
            pub fn derived(base: &str, suffix: &str) -> Self {
                Self(derived_string(base, suffix))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl schemars::JsonSchema for $name {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_ID_LEN,
                    "pattern": "^[A-Za-z0-9_-]+$",
                    "description": concat!("The ", $kind, " (letters, digits, `_` and `-`)."),
                })
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
    ///
    /// Ids are checked when made: letters, digits, `_` and `-`, so they fit every place they go
    /// (a DynamoDB key, a queue's group, a URL path).
    ///
    /// ```
    /// use infinity_agent_core::ids::ThreadId;
    ///
    /// let thread = ThreadId::new("support-42").unwrap();
    /// assert_eq!(thread.as_str(), "support-42");
    /// let error = ThreadId::new("a/b").unwrap_err();
    /// assert!(error.to_string().contains("a/b"), "{error}");
    /// assert!(ThreadId::generate().as_str().starts_with("t-"));
    /// ```
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
    fn seeded_ids_replay_and_random_ids_differ() {
        let (mut a, mut b) = (SeededIds::new(7), SeededIds::new(7));
        let first: Vec<ThreadId> = (0..3).map(|_| a.thread_id()).collect();
        let again: Vec<ThreadId> = (0..3).map(|_| b.thread_id()).collect();
        assert_eq!(first, again);
        assert_ne!(first[0], first[1]);
        assert_ne!(SeededIds::new(8).thread_id(), first[0]);
        assert!(ThreadId::new(first[0].as_str()).is_ok());
        assert_eq!(first[0].as_str().len(), "t-".len() + 20);
        assert_ne!(RandomIds.effect_id(), RandomIds.effect_id());
    }
}
