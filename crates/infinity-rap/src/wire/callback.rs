//! Callbacks: what tools POST to the `callback_url` of an invocation, and the runtime's answer
//! to a `user_choice`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{is_absolute_url, ContentItem, DisplaySegment, Nullable, WireError, WireMessage};

/// A message a tool POSTs to a `callback_url`, tagged by its `type` field.
///
/// Every callback carries the invocation's `group_id`. A call completes with a `tool_result`;
/// `oauth` and `user_choice` defer it (a `tool_result` still follows); `subscription_event` and
/// `view_update` never complete a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Callback {
    /// `"type": "tool_result"`: the outcome of a call, success or error.
    #[serde(rename = "tool_result")]
    ToolResult(ToolResult),
    /// `"type": "subscription_event"`: one event of a subscription a call started.
    #[serde(rename = "subscription_event")]
    SubscriptionEvent(SubscriptionEvent),
    /// `"type": "oauth"`: the user must authorize the tool before the call can proceed.
    #[serde(rename = "oauth")]
    OAuth(OAuthRequest),
    /// `"type": "user_choice"`: the user must pick an option before the call can proceed.
    #[serde(rename = "user_choice")]
    UserChoice(UserChoiceRequest),
    /// `"type": "view_update"`: new content for a named view of the thread.
    #[serde(rename = "view_update")]
    ViewUpdate(ViewUpdate),
}

impl Callback {
    /// The `type` tags of the callbacks, in the spec's order.
    pub const TYPES: [&'static str; 5] = [
        "tool_result",
        "subscription_event",
        "oauth",
        "user_choice",
        "view_update",
    ];

    /// The callback's `type` tag.
    pub fn type_name(&self) -> &'static str {
        match self {
            Callback::ToolResult(_) => "tool_result",
            Callback::SubscriptionEvent(_) => "subscription_event",
            Callback::OAuth(_) => "oauth",
            Callback::UserChoice(_) => "user_choice",
            Callback::ViewUpdate(_) => "view_update",
        }
    }

    /// The thread the callback is for (`group_id` on the wire).
    pub fn group_id(&self) -> &str {
        match self {
            Callback::ToolResult(m) => &m.group_id,
            Callback::SubscriptionEvent(m) => &m.group_id,
            Callback::OAuth(m) => &m.group_id,
            Callback::UserChoice(m) => &m.group_id,
            Callback::ViewUpdate(m) => &m.group_id,
        }
    }

    /// The invocation `id` the callback refers to: `id`, or `tool_call_id` for a subscription
    /// event; `None` for a view update, which belongs to the thread only.
    pub fn tool_call_id(&self) -> Option<&str> {
        match self {
            Callback::ToolResult(m) => Some(&m.id),
            Callback::SubscriptionEvent(m) => Some(&m.tool_call_id),
            Callback::OAuth(m) => Some(&m.id),
            Callback::UserChoice(m) => Some(&m.id),
            Callback::ViewUpdate(_) => None,
        }
    }
}

impl WireMessage for Callback {
    const NAME: &'static str = "callback";

    fn validate(&self) -> Result<(), WireError> {
        match self {
            Callback::ToolResult(m) => m.validate(),
            Callback::OAuth(m) => m.validate(),
            Callback::UserChoice(m) => m.validate(),
            Callback::SubscriptionEvent(_) | Callback::ViewUpdate(_) => Ok(()),
        }
    }
}

/// The outcome of a call. Errors are ordinary results whose text says so (by convention it
/// starts with `Error: `).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The invocation's `group_id`.
    pub group_id: String,
    /// The invocation's `id`.
    pub id: String,
    /// The invocation's `call_id`, echoed when it had one.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub call_id: Nullable<String>,
    /// The result as text (plain, or JSON-encoded data). A result has `text`, `content` or both.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The result as text and image items; when present it supersedes `text` for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<ContentItem>>,
    /// What people see instead of the result, in order of preference; never shown to the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_as: Option<Vec<DisplaySegment>>,
    /// `true` when the call started a subscription; absent means `false`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<bool>,
}

impl ToolResult {
    /// True when the call started a subscription, so the runtime records it on the thread.
    pub fn starts_subscription(&self) -> bool {
        self.subscription.unwrap_or(false)
    }

    /// Checks that the result carries `text` or `content`.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.text.is_none() && self.content.is_none() {
            return Err(WireError::invalid(
                "tool_result",
                "it must carry `text` or `content`, and has neither",
            ));
        }
        Ok(())
    }
}

/// One event of an active subscription.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionEvent {
    /// The subscribing invocation's `group_id`.
    pub group_id: String,
    /// The `id` of the invocation that started the subscription.
    pub tool_call_id: String,
    /// The event, JSON-encoded when it is structured.
    pub text: String,
    /// `true`: add the event to the subscribing thread itself; absent or `false`: handle it in a
    /// child thread of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associative: Option<bool>,
    /// `true` on the last event of the subscription (`final` on the wire); absent means `false`.
    #[serde(rename = "final", skip_serializing_if = "Option::is_none")]
    pub final_event: Option<bool>,
}

impl SubscriptionEvent {
    /// True when the event goes into the subscribing thread rather than a child thread.
    pub fn is_associative(&self) -> bool {
        self.associative.unwrap_or(false)
    }

    /// True when this is the subscription's last event.
    pub fn is_final(&self) -> bool {
        self.final_event.unwrap_or(false)
    }
}

/// A request to send the user through an OAuth authorization; the call stays pending until the
/// tool sends its `tool_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthRequest {
    /// The invocation's `group_id`.
    pub group_id: String,
    /// The invocation's `id`.
    pub id: String,
    /// The invocation's `call_id`, echoed when it had one.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub call_id: Nullable<String>,
    /// The authorization URL the user visits; HTTPS.
    pub auth_url: String,
}

impl OAuthRequest {
    /// Checks that `auth_url` is an HTTPS URL, as the spec requires.
    pub fn validate(&self) -> Result<(), WireError> {
        if !is_absolute_url(&self.auth_url, &["https"]) {
            return Err(WireError::invalid(
                "oauth",
                format!("`auth_url` must be an https URL, got `{}`", self.auth_url),
            ));
        }
        Ok(())
    }
}

/// A request for the user to pick one of several options; the runtime POSTs the pick to
/// `response_url` as a [`UserChoiceResponse`], and the call stays pending until the tool sends
/// its `tool_result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserChoiceRequest {
    /// The invocation's `group_id`.
    pub group_id: String,
    /// The invocation's `id`.
    pub id: String,
    /// The invocation's `call_id`, echoed when it had one.
    #[serde(default, skip_serializing_if = "Nullable::is_absent")]
    pub call_id: Nullable<String>,
    /// What the user is asked.
    pub prompt: String,
    /// The options' labels; at least one.
    pub choices: Vec<String>,
    /// The index into `choices` sent when the user dismisses the prompt (`default` on the wire;
    /// the first option when absent, as the reference runtime takes it).
    #[serde(rename = "default", default)]
    pub default_choice: usize,
    /// Where the runtime POSTs the [`UserChoiceResponse`]; an endpoint of the tool.
    pub response_url: String,
}

impl UserChoiceRequest {
    /// Checks that there is at least one choice and that `default` is one of them.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.choices.is_empty() {
            return Err(WireError::invalid(
                "user_choice",
                "`choices` must hold at least one option",
            ));
        }
        if self.default_choice >= self.choices.len() {
            return Err(WireError::invalid(
                "user_choice",
                format!(
                    "`default` must index `choices` (0 to {}), is {}",
                    self.choices.len() - 1,
                    self.default_choice
                ),
            ));
        }
        Ok(())
    }
}

/// The user's pick, POSTed by the runtime to a [`UserChoiceRequest`]'s `response_url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserChoiceResponse {
    /// The `id` of the `user_choice` (the invocation's `id`).
    pub id: String,
    /// The index into `choices` the user picked, or the `default` if they dismissed the prompt.
    pub selected: usize,
}

impl WireMessage for UserChoiceResponse {
    const NAME: &'static str = "user choice response";
}

/// New content for a named view of a thread (e.g. the current diff of a sandbox). The runtime
/// keeps the latest per thread and `view_type` and forwards it to clients without reading it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewUpdate {
    /// The thread the view belongs to.
    pub group_id: String,
    /// Which view, e.g. `diff`; clients pick a renderer by it.
    pub view_type: String,
    /// The view's content, opaque to the runtime; `{}` clears the view.
    pub content: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn type_names_match_the_serde_tags() {
        let bodies = [
            json!({"type": "tool_result", "group_id": "g", "id": "i", "text": "t"}),
            json!({"type": "subscription_event", "group_id": "g", "tool_call_id": "i", "text": "t"}),
            json!({"type": "oauth", "group_id": "g", "id": "i", "auth_url": "https://a"}),
            json!({"type": "user_choice", "group_id": "g", "id": "i", "prompt": "p",
                   "choices": ["a"], "default": 0, "response_url": "http://t"}),
            json!({"type": "view_update", "group_id": "g", "view_type": "v", "content": {}}),
        ];
        for (body, expected) in bodies.into_iter().zip(Callback::TYPES) {
            let callback: Callback = serde_json::from_value(body).unwrap();
            assert_eq!(callback.type_name(), expected);
            assert_eq!(serde_json::to_value(&callback).unwrap()["type"], expected);
        }
    }
}
