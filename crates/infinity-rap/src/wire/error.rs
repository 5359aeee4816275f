//! Why bytes are not a valid RAP message.

/// Why a body is not a valid RAP message.
///
/// Always terminal: the same bytes fail the same way, so retrying cannot help. A receiver answers
/// with a 4xx status, which tells a well-behaved sender to stop retrying.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Not JSON, or JSON without the message's shape: a required field missing, a field of the
    /// wrong type, an unknown tag in a closed set. The serde message names the field or tag.
    #[error("malformed {message}: {source}")]
    Malformed {
        /// The message being parsed, e.g. `"tool_result"` or `"manifest"`.
        message: &'static str,
        /// What serde found wrong, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// A callback whose `type` is none of those the spec defines.
    #[error(
        "unknown callback type `{type_name}`: expected one of tool_result, subscription_event, \
         oauth, user_choice, view_update"
    )]
    UnknownCallbackType {
        /// The `type` the callback carried.
        type_name: String,
    },
    /// Well-formed, but against a rule of the spec (e.g. a `tool_result` with neither `text`
    /// nor `content`, two tools of one name in a manifest).
    #[error("invalid {message}: {reason}")]
    Invalid {
        /// The message being checked.
        message: &'static str,
        /// The rule broken, naming the field.
        reason: String,
    },
}

impl WireError {
    pub(crate) fn invalid(message: &'static str, reason: impl Into<String>) -> Self {
        WireError::Invalid {
            message,
            reason: reason.into(),
        }
    }
}
