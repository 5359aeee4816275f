//! RAP messages as they travel: serde types that follow the spec to the letter.
//!
//! Field names are the spec's, including its camelCase ones (`inputSchema`, `mediaType`,
//! `needsMigration`) and `group_id` for the thread id. Optional fields are `Option` (or
//! [`Nullable`] where the spec allows `null`) and are left out when absent, so a message parsed
//! and serialized again is the same JSON. Unknown fields are accepted and dropped; required fields
//! that are missing are errors naming the field.
//!
//! | Message | Direction | Type |
//! |---|---|---|
//! | `GET /.well-known/rap-toolset` | tool -> runtime | [`Manifest`] with [`ToolDefinition`]s |
//! | invocation, POST to the manifest `endpoint` | runtime -> tool | [`Invocation`] |
//! | callback, POST to `callback_url` | tool -> runtime | [`Callback`] |
//! | POST to a `user_choice`'s `response_url` | runtime -> tool | [`UserChoiceResponse`] |
//! | `POST /close_thread` | runtime -> tool | [`CloseThread`] |
//! | `POST /cancel_tool_call` | runtime -> tool | [`CancelToolCall`] |
//! | `POST /tool_call_status` | runtime -> tool | [`ToolCallStatusRequest`], [`ToolCallStatusResponse`] |
//! | `POST /migrate` | runtime -> tool | [`MigrateRequest`] |
//!
//! Receive with [`parse_callback`], [`parse_manifest`] or [`parse`]: they run serde and then the
//! checks the spec asks for beyond types (the `validate` methods).

mod callback;
mod content;
mod error;
mod invocation;
mod manifest;
mod notification;
mod nullable;

use serde::de::DeserializeOwned;
use serde::Deserialize;

pub use callback::{
    Callback, OAuthRequest, SubscriptionEvent, ToolResult, UserChoiceRequest, UserChoiceResponse,
    ViewUpdate,
};
pub use content::{ContentItem, DiffContent, DisplaySegment, ImageData};
pub use error::WireError;
pub use invocation::Invocation;
pub use manifest::{Manifest, ToolDefinition};
pub use notification::{
    CancelToolCall, CloseThread, MigrateRequest, ToolCallStatusRequest, ToolCallStatusResponse,
};
pub use nullable::Nullable;

/// The discovery path, relative to a tool server's base URL; answers a [`Manifest`].
pub const DISCOVERY_PATH: &str = "/.well-known/rap-toolset";
/// The thread closure path, relative to a tool server's base URL; takes a [`CloseThread`].
pub const CLOSE_THREAD_PATH: &str = "/close_thread";
/// The cancellation path, relative to a tool server's base URL; takes a [`CancelToolCall`].
pub const CANCEL_TOOL_CALL_PATH: &str = "/cancel_tool_call";
/// The status check path, relative to a tool server's base URL; takes a
/// [`ToolCallStatusRequest`].
pub const TOOL_CALL_STATUS_PATH: &str = "/tool_call_status";
/// The migration path, relative to a tool server's base URL; takes a [`MigrateRequest`].
pub const MIGRATE_PATH: &str = "/migrate";

/// A RAP message that [`parse`] can read: its name for errors, and its checks beyond serde.
pub trait WireMessage: DeserializeOwned {
    /// What the message is called in error messages, e.g. `"manifest"`.
    const NAME: &'static str;

    /// Checks the rules of the spec that the types alone do not enforce.
    fn validate(&self) -> Result<(), WireError> {
        Ok(())
    }
}

/// Parses and validates any RAP message from a request or response body.
pub fn parse<M: WireMessage>(bytes: &[u8]) -> Result<M, WireError> {
    let message: M = from_json(bytes, M::NAME)?;
    message.validate()?;
    Ok(message)
}

/// Parses a body POSTed to a `callback_url`.
///
/// A `type` outside the five the spec defines is [`WireError::UnknownCallbackType`]; a missing
/// required field is [`WireError::Malformed`] naming it; a broken rule (a `tool_result` without
/// `text` or `content`, say) is [`WireError::Invalid`].
pub fn parse_callback(bytes: &[u8]) -> Result<Callback, WireError> {
    /// Reads only the tag, so an unknown type is reported as such before the full parse.
    #[derive(Deserialize)]
    struct TypeProbe {
        #[serde(rename = "type")]
        kind: Option<String>,
    }

    let probe: TypeProbe = from_json(bytes, Callback::NAME)?;
    let name = match probe.kind {
        None => Callback::NAME,
        Some(kind) => match Callback::TYPES.iter().find(|known| **known == kind) {
            Some(known) => known,
            None => return Err(WireError::UnknownCallbackType { type_name: kind }),
        },
    };
    let callback: Callback = from_json(bytes, name)?;
    callback.validate()?;
    Ok(callback)
}

/// Parses the body of `GET /.well-known/rap-toolset` and checks it the way a runtime must
/// before exposing any of its tools.
pub fn parse_manifest(bytes: &[u8]) -> Result<Manifest, WireError> {
    parse(bytes)
}

/// Parses the body of an invocation, as a tool server receives it.
pub fn parse_invocation(bytes: &[u8]) -> Result<Invocation, WireError> {
    parse(bytes)
}

fn from_json<T: DeserializeOwned>(bytes: &[u8], message: &'static str) -> Result<T, WireError> {
    serde_json::from_slice(bytes).map_err(|source| WireError::Malformed { message, source })
}

/// True when `url` is an absolute URL with one of `schemes` and a non-empty host part.
///
/// The spec asks for "a valid URL" without saying more; this catches relative paths, typos in the
/// scheme and stray whitespace without pulling in a URL parser.
fn is_absolute_url(url: &str, schemes: &[&str]) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    schemes.iter().any(|s| s.eq_ignore_ascii_case(scheme))
        && !host.is_empty()
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_urls_need_a_known_scheme_and_a_host() {
        let web = ["http", "https"];
        assert!(is_absolute_url("https://tool.example.com/invoke", &web));
        assert!(is_absolute_url("HTTP://127.0.0.1:9123", &web));
        assert!(is_absolute_url("http://tool-server:8080?x=1", &web));
        assert!(!is_absolute_url("/invoke", &web));
        assert!(!is_absolute_url("https:///invoke", &web));
        assert!(!is_absolute_url("ftp://tool.example.com", &web));
        assert!(!is_absolute_url("https://tool.example.com/in voke", &web));
        assert!(!is_absolute_url("http://tool.example.com", &["https"]));
    }
}
