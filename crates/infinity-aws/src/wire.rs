//! Inputs on the wire: SQS message bodies, and the relay queue's envelope.
//!
//! A user message sent with `aws sqs send-message` looks like
//! `{"type": "user_message", "thread_id": "t1", "text": "hello"}` with `MessageGroupId` = the
//! thread id. The optional `"id"` is the input id, the deduplication key for good (not only for
//! SQS's five-minute window); without it the message's SQS deduplication id is used.
//!
//! An input too big for a message (a queue's limit, or a schedule's) is kept in the table and
//! the message carries `{"stored_input": {"thread_id": "t1", "id": "..."}}` instead (see
//! [`StoredInput`]).

use infinity_agent_core::ids::{InputId, ThreadId};
use infinity_agent_core::input::Input;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// Why a message body is not an input. Terminal: retrying the same bytes cannot help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Not a JSON object.
    #[error("body is not a JSON object: {0}")]
    NotJson(String),
    /// A JSON object, but not a valid input.
    #[error("body is not a valid input: {0}")]
    Invalid(String),
    /// No `id` in the body and no deduplication id on the message.
    #[error("body has no \"id\" and the message has no deduplication id")]
    NoId,
    /// The message refers to a stored input that is not in the table (and was not processed).
    #[error("the message refers to stored input {id} of thread {thread_id}, which the table does not have")]
    StoredInputMissing {
        /// The thread.
        thread_id: ThreadId,
        /// The input.
        id: InputId,
    },
    /// The body's thread is not the message group.
    #[error("body's thread_id `{body}` disagrees with the message group `{group}`")]
    GroupMismatch {
        /// The body's thread id.
        body: String,
        /// The group.
        group: String,
    },
}

/// An input kept in the table because it is too big for the message that carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredInput {
    /// The input's thread.
    pub thread_id: ThreadId,
    /// The input.
    pub id: InputId,
}

/// What a message carries: an input, or a reference to one kept in the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // one per message, moved rarely: boxing would buy nothing
pub enum Carried {
    /// The input itself.
    Input(Input),
    /// A reference to a stored input.
    StoredInput(StoredInput),
}

impl Carried {
    /// The input's thread.
    pub fn thread_id(&self) -> &ThreadId {
        match self {
            Carried::Input(input) => &input.thread_id,
            Carried::StoredInput(stored) => &stored.thread_id,
        }
    }

    /// The input's id.
    pub fn input_id(&self) -> &InputId {
        match self {
            Carried::Input(input) => &input.id,
            Carried::StoredInput(stored) => &stored.id,
        }
    }

    /// The input-queue message body: the input's JSON, or `{"stored_input": {...}}`.
    pub fn body(&self) -> Result<String, serde_json::Error> {
        match self {
            Carried::Input(input) => serde_json::to_string(input),
            Carried::StoredInput(_) => serde_json::to_string(self),
        }
    }
}

/// Parses an input-queue message. `group_id` and `dedup_id` are the message's
/// `MessageGroupId` and `MessageDeduplicationId` attributes, when it has them.
pub fn parse_input(
    body: &str,
    group_id: Option<&str>,
    dedup_id: Option<&str>,
) -> Result<Carried, WireError> {
    let mut value: serde_json::Value =
        serde_json::from_str(body).map_err(|e| WireError::NotJson(e.to_string()))?;
    let Some(object) = value.as_object_mut() else {
        return Err(WireError::NotJson(
            "the body is JSON but not an object".into(),
        ));
    };
    let carried = if object.contains_key("stored_input") {
        serde_json::from_value::<Carried>(value).map_err(|e| WireError::Invalid(e.to_string()))?
    } else {
        if !object.contains_key("id") {
            let id = dedup_id.ok_or(WireError::NoId)?;
            // Content-based deduplication ids are 64 hex digits: valid input ids as they are.
            let id = InputId::new(id).map_err(|e| WireError::Invalid(e.to_string()))?;
            object.insert("id".into(), serde_json::Value::String(id.to_string()));
        }
        Carried::Input(
            serde_json::from_value(value).map_err(|e| WireError::Invalid(e.to_string()))?,
        )
    };
    if let Some(group) = group_id {
        if carried.thread_id().as_str() != group {
            return Err(WireError::GroupMismatch {
                body: carried.thread_id().to_string(),
                group: group.to_owned(),
            });
        }
    }
    Ok(carried)
}

/// A timer on its way through the relay queue (and EventBridge Scheduler):
/// `{"due": ..., "input": {...}}`, or `{"due": ..., "stored_input": {...}}` for a big input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayEnvelope {
    /// When the input is due on the input queue.
    pub due: Timestamp,
    /// The input, or where it is stored.
    #[serde(flatten)]
    pub carried: Carried,
}

#[cfg(test)]
mod tests {
    use super::*;
    use infinity_agent_core::input::InputBody;

    fn inline(carried: Carried) -> Input {
        match carried {
            Carried::Input(input) => input,
            Carried::StoredInput(s) => panic!("a reference to {s:?}, not an input"),
        }
    }

    #[test]
    fn a_user_message_with_and_without_id() {
        let i = inline(
            parse_input(
                r#"{"type":"user_message","thread_id":"t1","text":"hi","id":"m1"}"#,
                Some("t1"),
                None,
            )
            .unwrap(),
        );
        assert_eq!(i.id.as_str(), "m1");
        assert!(
            matches!(&i.body, InputBody::UserMessage { text, agent: None, .. } if text == "hi")
        );
        let i = inline(
            parse_input(
                r#"{"type":"user_message","thread_id":"t1","text":"hi"}"#,
                Some("t1"),
                Some("abc123"),
            )
            .unwrap(),
        );
        assert_eq!(i.id.as_str(), "abc123");
    }

    #[test]
    fn a_client_tools_result_on_the_queue_has_the_apis_shape() {
        // `{"text", "is_error"}` as `POST /threads/{id}/tool_results/{call}` takes, with the
        // call and the thread; the id the API would give it makes it one input with any other
        // answer to the call.
        let i = inline(
            parse_input(
                r#"{"type":"tool_result","thread_id":"t1","call_id":"call-1","text":"teal","is_error":true,"id":"call-1-client-result"}"#,
                Some("t1"),
                None,
            )
            .unwrap(),
        );
        let api = infinity_agent_core::runtime::client_result(
            &ThreadId::new("t1").unwrap(),
            &infinity_agent_core::ids::CallId::new("call-1").unwrap(),
            "teal".to_owned(),
            true,
        );
        assert_eq!(i, api);
        let refused = parse_input(
            r#"{"type":"tool_result","thread_id":"t1","text":"teal"}"#,
            Some("t1"),
            Some("abc123"),
        )
        .unwrap_err();
        assert!(refused.to_string().contains("call_id"), "{refused}");
    }

    #[test]
    fn a_user_message_on_the_queue_says_what_it_does_while_the_thread_is_busy() {
        use infinity_agent_core::state::WhileBusy;
        let i = inline(
            parse_input(
                r#"{"type":"user_message","thread_id":"t1","text":"hi","while_busy":"queue"}"#,
                Some("t1"),
                Some("abc123"),
            )
            .unwrap(),
        );
        assert!(matches!(
            &i.body,
            InputBody::UserMessage {
                while_busy: Some(WhileBusy::Queue),
                ..
            }
        ));
        let refused = parse_input(
            r#"{"type":"user_message","thread_id":"t1","text":"hi","while_busy":"later"}"#,
            Some("t1"),
            Some("abc123"),
        );
        assert!(
            refused.is_err(),
            "an unknown policy is refused, not ignored"
        );
    }

    #[test]
    fn a_stored_input_is_a_reference_for_its_group() {
        let body = Carried::StoredInput(StoredInput {
            thread_id: ThreadId::new("t1").unwrap(),
            id: InputId::new("big-1").unwrap(),
        })
        .body()
        .unwrap();
        assert_eq!(body, r#"{"stored_input":{"thread_id":"t1","id":"big-1"}}"#);
        let parsed = parse_input(&body, Some("t1"), None).unwrap();
        assert_eq!(parsed.input_id().as_str(), "big-1");
        assert!(matches!(
            parse_input(&body, Some("t2"), None),
            Err(WireError::GroupMismatch { .. })
        ));
        let err =
            parse_input(r#"{"stored_input":{"thread_id":"t1"}}"#, Some("t1"), None).unwrap_err();
        assert!(err.to_string().contains("id"), "{err}");
    }

    #[test]
    fn relay_envelopes_carry_an_input_or_a_reference() {
        let input = Input::user_message(ThreadId::new("t1").unwrap(), "hi");
        let due: Timestamp = "2026-03-07T17:00:00Z".parse().unwrap();
        for carried in [
            Carried::Input(input.clone()),
            Carried::StoredInput(StoredInput {
                thread_id: input.thread_id.clone(),
                id: input.id.clone(),
            }),
        ] {
            let envelope = RelayEnvelope { due, carried };
            let json = serde_json::to_string(&envelope).unwrap();
            let back: RelayEnvelope = serde_json::from_str(&json).unwrap();
            assert_eq!(back, envelope, "{json}");
        }
        // The form relay messages had before stored inputs existed still reads.
        let old = r#"{"due":"2026-03-07T17:00:00Z","input":{"type":"user_message","thread_id":"t1","text":"hi","id":"m1"}}"#;
        let envelope: RelayEnvelope = serde_json::from_str(old).unwrap();
        assert_eq!(envelope.carried.input_id().as_str(), "m1");
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        assert!(matches!(
            parse_input("hello", None, None),
            Err(WireError::NotJson(_))
        ));
        assert!(matches!(
            parse_input("[1]", None, None),
            Err(WireError::NotJson(_))
        ));
        let err = parse_input(
            r#"{"type":"user_message","thread_id":"t1"}"#,
            Some("t1"),
            Some("d"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("text"), "{err}");
        let err = parse_input(
            r#"{"type":"user_message","thread_id":"t1","text":"x"}"#,
            Some("t2"),
            Some("d"),
        )
        .unwrap_err();
        assert_eq!(
            err,
            WireError::GroupMismatch {
                body: "t1".into(),
                group: "t2".into()
            }
        );
        assert_eq!(
            parse_input(
                r#"{"type":"user_message","thread_id":"t1","text":"x"}"#,
                Some("t1"),
                None
            )
            .unwrap_err(),
            WireError::NoId
        );
        let err = parse_input(
            r#"{"type":"launch_rockets","thread_id":"t1","id":"x"}"#,
            None,
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("launch_rockets"), "{err}");
    }
}

#[cfg(test)]
mod fuzz {
    //! Input-queue bodies, damaged and arbitrary: parsed or refused with a reason, never a
    //! panic; a body that parses is for the group it came in (or names no group).
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use infinity_agent_core::testing::{cases, mutated, noise};
    use proptest::prelude::*;

    const BODIES: &[&str] = &[
        r#"{"type":"user_message","thread_id":"t1","text":"hi","id":"m1"}"#,
        r#"{"type":"timer_wake_up","thread_id":"t1","call_id":"c-1","id":"c-1-wake"}"#,
        r#"{"type":"tool_result","thread_id":"t1","id":"r","call_id":"c","text":"x","subscription":true}"#,
        r#"{"due":"2026-03-07T17:00:00Z","input":{"type":"user_message","thread_id":"t1","text":"hi","id":"m1"}}"#,
        r#"{"stored_input":{"thread_id":"t1","id":"big-1"}}"#,
        r#"{"due":"2026-03-07T17:00:00Z","stored_input":{"thread_id":"t1","id":"big-1"}}"#,
    ];

    proptest! {
        #![proptest_config(cases(2000))]

        #[test]
        fn bodies(bytes in prop_oneof![mutated(BODIES), noise(300)], dedup in any::<bool>()) {
            let body = String::from_utf8_lossy(&bytes);
            match parse_input(&body, Some("t1"), dedup.then_some("dedup-1")) {
                Ok(carried) => prop_assert_eq!(carried.thread_id().as_str(), "t1"),
                Err(err) => prop_assert!(!err.to_string().is_empty()),
            }
            let _ = serde_json::from_str::<RelayEnvelope>(&body);
        }
    }
}
