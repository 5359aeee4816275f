//! Conformance with the RAP spec (`docs/docs/rap/spec/` in hydro-project/infinity).
//!
//! Every example JSON document of the spec parses into its typed value, keeps its key fields, and
//! serializes back to the same JSON value. Then the rejections the spec requires: missing required
//! fields, unknown callback types, a `tool_result` without a result, invalid manifests.
//!
//! The examples are copied from the spec pages named in each module (newest revision).

use infinity_rap::wire::{
    parse, parse_callback, parse_invocation, parse_manifest, Callback, CancelToolCall, CloseThread,
    ContentItem, DiffContent, DisplaySegment, ImageData, Invocation, Manifest, MigrateRequest,
    Nullable, ToolCallStatusRequest, ToolCallStatusResponse, ToolDefinition, ToolResult,
    UserChoiceResponse, WireError, WireMessage,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

/// Serializes `typed` and checks it is the same JSON value as `original`.
fn assert_round_trip<T: Serialize>(typed: &T, original: &str) {
    let original: Value = serde_json::from_str(original).expect("the example is JSON");
    let serialized = serde_json::to_value(typed).expect("serializes");
    assert_eq!(serialized, original, "round trip changed the document");
}

/// Parses a callback example, checks its round trip, and returns it.
fn callback(example: &str) -> Callback {
    let parsed = parse_callback(example.as_bytes()).expect("the spec example parses");
    assert_round_trip(&parsed, example);
    parsed
}

/// Parses a `tool_result` example (with its round trip) and returns the result.
fn tool_result(example: &str) -> ToolResult {
    match callback(example) {
        Callback::ToolResult(result) => result,
        other => panic!("expected a tool_result, got {other:?}"),
    }
}

/// Parses any other message example with [`parse`] (with its round trip).
fn message<M: WireMessage + Serialize>(example: &str) -> M {
    let parsed: M = parse(example.as_bytes()).expect("the spec example parses");
    assert_round_trip(&parsed, example);
    parsed
}

/// Parses a standalone piece of a message (a segment, a tool) with serde (with its round trip).
fn piece<T: DeserializeOwned + Serialize>(example: &str) -> T {
    let parsed: T = serde_json::from_str(example).expect("the spec example parses");
    assert_round_trip(&parsed, example);
    parsed
}

/// The example with `field` removed, as bytes.
fn without(example: &str, field: &str) -> Vec<u8> {
    let mut value: Value = serde_json::from_str(example).unwrap();
    let removed = value.as_object_mut().unwrap().remove(field);
    assert!(removed.is_some(), "the example has no `{field}`");
    serde_json::to_vec(&value).unwrap()
}

/// The example with `field` set to `replacement`, as bytes.
fn with(example: &str, field: &str, replacement: Value) -> Vec<u8> {
    let mut value: Value = serde_json::from_str(example).unwrap();
    value
        .as_object_mut()
        .unwrap()
        .insert(field.to_owned(), replacement);
    serde_json::to_vec(&value).unwrap()
}

/// Checks that `error` is a shape error that names `field`.
fn assert_names_missing(error: &WireError, field: &str) {
    assert!(
        matches!(error, WireError::Malformed { .. }),
        "expected Malformed, got {error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains(&format!("missing field `{field}`")),
        "`{field}` not named in: {text}"
    );
}

/// Checks that `error` is a rule violation whose message contains every part of `expected`.
fn assert_invalid(error: &WireError, expected: &[&str]) {
    assert!(
        matches!(error, WireError::Invalid { .. }),
        "expected Invalid, got {error:?}"
    );
    let text = error.to_string();
    for part in expected {
        assert!(text.contains(part), "`{part}` not in: {text}");
    }
}

/// basic/tool-invocation.md
mod tool_invocation {
    use super::*;

    pub const INVOCATION: &str = r#"{
      "operation": "subscribe_github_events",
      "arguments": {
        "owner": "acme",
        "repo": "api",
        "event_type": "pull_request"
      },
      "id": "call_abc123",
      "call_id": null,
      "callback_url": "https://agent.example.com/callback",
      "group_id": "thread_xyz",
      "thread_ancestors": ["thread_root", "thread_parent"],
      "user_id": "user_42"
    }"#;

    #[test]
    fn invocation() {
        let invocation: Invocation = message(INVOCATION);
        assert_eq!(invocation.operation, "subscribe_github_events");
        assert_eq!(invocation.arguments["event_type"], "pull_request");
        assert_eq!(invocation.id, "call_abc123");
        assert_eq!(invocation.call_id, Nullable::Null);
        assert_eq!(
            invocation.callback_url,
            "https://agent.example.com/callback"
        );
        assert_eq!(invocation.group_id, "thread_xyz");
        assert_eq!(
            invocation.thread_ancestors.as_option().map(Vec::as_slice),
            Some(["thread_root".to_owned(), "thread_parent".to_owned()].as_slice())
        );
        assert_eq!(invocation.user_id.as_deref(), Some("user_42"));
    }

    #[test]
    fn a_root_thread_invocation_leaves_the_optional_fields_out() {
        let minimal = r#"{"operation": "get_current_time", "arguments": {}, "id": "call_1",
            "callback_url": "https://agent.example.com/callback", "group_id": "thread_root"}"#;
        let invocation = parse_invocation(minimal.as_bytes()).unwrap();
        assert!(invocation.call_id.is_absent());
        assert!(invocation.thread_ancestors.is_absent());
        assert!(invocation.user_id.is_absent());
        assert_round_trip(&invocation, minimal);
    }
}

/// basic/tool-result.md
mod tool_result {
    use super::*;

    pub const REQUEST: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "call_id": null,
      "text": "Deployment completed successfully. Instance i-0abc123 is running.",
      "display_as": [
        { "type": "text", "content": "Deployed instance i-0abc123" }
      ]
    }"#;

    const STRUCTURED: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "text": "{\"instances\": [{\"id\": \"i-0abc123\", \"state\": \"running\"}], \"count\": 1}"
    }"#;

    pub const MULTIMODAL: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "content": [
        { "type": "text", "text": "Read image file \"logo.png\" (image/png, 4096 bytes). The image is attached." },
        { "type": "image", "data": "iVBORw0KGgo…", "mediaType": "image/png" }
      ]
    }"#;

    const SEGMENT_TEXT: &str = r#"{ "type": "text", "content": "Deployed instance i-0abc123" }"#;

    const SEGMENT_DIFF: &str = r#"{
      "type": "diff",
      "content": {
        "path": "src/main.rs",
        "patch": "--- src/main.rs\n+++ src/main.rs\n@@ -1,3 +1,4 @@\n fn main() {\n+    println!(\"hello\");\n }"
      }
    }"#;

    const SEGMENT_IMAGE: &str = r#"{
      "type": "image",
      "content": { "data": "iVBORw0KGgo…", "mediaType": "image/png" }
    }"#;

    const TEXT_DISPLAY: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "text": "Replaced text in src/main.rs",
      "display_as": [
        { "type": "text", "content": "edit_file src/main.rs: 1 insertion" }
      ]
    }"#;

    const DIFF_DISPLAY: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "text": "Replaced text in src/main.rs",
      "display_as": [
        {
          "type": "diff",
          "content": {
            "path": "src/main.rs",
            "patch": "--- src/main.rs\n+++ src/main.rs\n@@ -1,3 +1,4 @@\n fn main() {\n+    println!(\"hello\");\n }"
          }
        },
        { "type": "text", "content": "edit_file src/main.rs: 1 insertion" }
      ]
    }"#;

    const ERROR: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "text": "Error: API rate limit exceeded. Retry after 60 seconds."
    }"#;

    const PATCH: &str = "--- src/main.rs\n+++ src/main.rs\n@@ -1,3 +1,4 @@\n fn main() {\n+    println!(\"hello\");\n }";

    #[test]
    fn request() {
        let result = tool_result(REQUEST);
        assert_eq!(result.group_id, "thread_xyz");
        assert_eq!(result.id, "call_abc123");
        assert_eq!(result.call_id, Nullable::Null);
        assert_eq!(
            result.text.as_deref(),
            Some("Deployment completed successfully. Instance i-0abc123 is running.")
        );
        assert_eq!(
            result.display_as,
            Some(vec![DisplaySegment::Text(
                "Deployed instance i-0abc123".into()
            )])
        );
        assert_eq!(result.subscription, None);
        assert!(!result.starts_subscription());
    }

    #[test]
    fn structured_result() {
        let result = tool_result(STRUCTURED);
        let data: Value = serde_json::from_str(result.text.as_deref().unwrap()).unwrap();
        assert_eq!(data["count"], 1);
        assert!(result.call_id.is_absent());
        assert_eq!(result.content, None);
    }

    #[test]
    fn multimodal_content() {
        let result = tool_result(MULTIMODAL);
        assert_eq!(result.text, None);
        let content = result.content.unwrap();
        assert_eq!(content.len(), 2);
        assert!(
            matches!(&content[0], ContentItem::Text { text } if text.starts_with("Read image file \"logo.png\""))
        );
        assert_eq!(
            content[1],
            ContentItem::Image(ImageData {
                data: "iVBORw0KGgo…".into(),
                media_type: "image/png".into(),
            })
        );
    }

    #[test]
    fn text_segment() {
        let segment: DisplaySegment = piece(SEGMENT_TEXT);
        assert_eq!(
            segment,
            DisplaySegment::Text("Deployed instance i-0abc123".into())
        );
    }

    #[test]
    fn diff_segment() {
        let segment: DisplaySegment = piece(SEGMENT_DIFF);
        assert_eq!(
            segment,
            DisplaySegment::Diff(DiffContent {
                path: "src/main.rs".into(),
                patch: PATCH.into(),
            })
        );
    }

    #[test]
    fn image_segment() {
        let segment: DisplaySegment = piece(SEGMENT_IMAGE);
        assert_eq!(
            segment,
            DisplaySegment::Image(ImageData {
                data: "iVBORw0KGgo…".into(),
                media_type: "image/png".into(),
            })
        );
        assert_eq!(segment.type_name(), "image");
    }

    #[test]
    fn text_only_display() {
        let result = tool_result(TEXT_DISPLAY);
        assert_eq!(result.text.as_deref(), Some("Replaced text in src/main.rs"));
        assert_eq!(
            result.display_as,
            Some(vec![DisplaySegment::Text(
                "edit_file src/main.rs: 1 insertion".into()
            )])
        );
    }

    #[test]
    fn diff_display_with_text_fallback() {
        let result = tool_result(DIFF_DISPLAY);
        let segments = result.display_as.unwrap();
        assert_eq!(
            segments
                .iter()
                .map(DisplaySegment::type_name)
                .collect::<Vec<_>>(),
            ["diff", "text"]
        );
        assert!(matches!(&segments[0], DisplaySegment::Diff(diff) if diff.patch == PATCH));
    }

    #[test]
    fn error_result() {
        let result = tool_result(ERROR);
        assert!(result.text.unwrap().starts_with("Error: "));
    }
}

/// basic/toolsets.md and basic/migration.md
mod toolsets {
    use super::*;

    const GET_PULL_REQUEST: &str = r#"{
      "name": "get_pull_request",
      "description": "Get details of a specific pull request",
      "inputSchema": {
        "type": "object",
        "properties": {
          "owner": { "type": "string", "description": "Repository owner" },
          "repo": { "type": "string", "description": "Repository name" },
          "number": { "type": "integer", "description": "Pull request number" }
        },
        "required": ["owner", "repo", "number"]
      },
      "displayScript": "\"PR #\" + args.number + \" on \" + args.owner + \"/\" + args.repo"
    }"#;

    const GET_CURRENT_TIME: &str = r#"{
      "name": "get_current_time",
      "description": "Returns the current server time in ISO 8601 format",
      "inputSchema": { "type": "object", "additionalProperties": false }
    }"#;

    const DISPLAY_SCRIPT: &str = r#"{
      "name": "get_pull_request",
      "description": "Get details of a specific pull request",
      "inputSchema": { "..." : "..." },
      "displayScript": "\"PR #\" + args.number + \" on \" + args.owner + \"/\" + args.repo"
    }"#;

    /// The spec's manifests write `"tools": [...]`, which is not JSON. This is the toolset
    /// definition example with that placeholder filled by the page's two tool examples.
    pub const GITHUB_TOOLS: &str = r#"{
      "name": "github-tools",
      "description": "GitHub repository management and event subscription tools",
      "endpoint": "https://tool.example.com/invoke",
      "tools": [
        {
          "name": "get_pull_request",
          "description": "Get details of a specific pull request",
          "inputSchema": {
            "type": "object",
            "properties": {
              "owner": { "type": "string", "description": "Repository owner" },
              "repo": { "type": "string", "description": "Repository name" },
              "number": { "type": "integer", "description": "Pull request number" }
            },
            "required": ["owner", "repo", "number"]
          },
          "displayScript": "\"PR #\" + args.number + \" on \" + args.owner + \"/\" + args.repo"
        },
        {
          "name": "get_current_time",
          "description": "Returns the current server time in ISO 8601 format",
          "inputSchema": { "type": "object", "additionalProperties": false }
        }
      ]
    }"#;

    /// The discovery response example, `[...]` filled with one tool.
    const DISCOVERY_RESPONSE: &str = r#"{
      "name": "github-tools",
      "endpoint": "https://tool.example.com/invoke",
      "tools": [
        {
          "name": "get_current_time",
          "description": "Returns the current server time in ISO 8601 format",
          "inputSchema": { "type": "object", "additionalProperties": false }
        }
      ]
    }"#;

    /// basic/migration.md's manifest, `[...]` filled with one tool.
    const SANDBOX_TOOLS: &str = r#"{
      "name": "sandbox-tools",
      "endpoint": "https://tool.example.com/invoke",
      "needsMigration": true,
      "tools": [
        {
          "name": "get_current_time",
          "description": "Returns the current server time in ISO 8601 format",
          "inputSchema": { "type": "object", "additionalProperties": false }
        }
      ]
    }"#;

    fn manifest(example: &str) -> Manifest {
        let parsed = parse_manifest(example.as_bytes()).expect("the spec example parses");
        assert_round_trip(&parsed, example);
        parsed
    }

    fn tool(example: &str) -> ToolDefinition {
        let parsed: ToolDefinition = piece(example);
        parsed.validate().expect("the spec example is valid");
        parsed
    }

    #[test]
    fn tool_definition() {
        let tool = tool(GET_PULL_REQUEST);
        assert_eq!(tool.name, "get_pull_request");
        assert_eq!(tool.description, "Get details of a specific pull request");
        assert_eq!(
            tool.input_schema["required"],
            json!(["owner", "repo", "number"])
        );
        assert_eq!(
            tool.display_script.as_deref(),
            Some(r#""PR #" + args.number + " on " + args.owner + "/" + args.repo"#)
        );
        assert_eq!(tool.annotations, None);
    }

    #[test]
    fn tool_without_parameters() {
        let tool = tool(GET_CURRENT_TIME);
        assert_eq!(tool.name, "get_current_time");
        assert_eq!(tool.input_schema["additionalProperties"], false);
        assert_eq!(tool.display_script, None);
    }

    #[test]
    fn display_script() {
        let tool = tool(DISPLAY_SCRIPT);
        assert_eq!(tool.input_schema, json!({"...": "..."}));
        assert!(tool.display_script.unwrap().starts_with("\"PR #\""));
    }

    #[test]
    fn toolset_definition() {
        let manifest = manifest(GITHUB_TOOLS);
        assert_eq!(manifest.name, "github-tools");
        assert_eq!(
            manifest.description.as_deref(),
            Some("GitHub repository management and event subscription tools")
        );
        assert_eq!(manifest.endpoint, "https://tool.example.com/invoke");
        assert_eq!(manifest.tools.len(), 2);
        assert!(manifest.tool("get_current_time").is_some());
        assert!(
            manifest.tool("Get_Current_Time").is_none(),
            "names are case-sensitive"
        );
        assert_eq!(manifest.needs_migration, None);
        assert!(!manifest.needs_migration());
    }

    #[test]
    fn discovery_response() {
        let manifest = manifest(DISCOVERY_RESPONSE);
        assert_eq!(manifest.description, None);
        assert_eq!(manifest.tools[0].name, "get_current_time");
    }

    #[test]
    fn migration_manifest() {
        let manifest = manifest(SANDBOX_TOOLS);
        assert_eq!(manifest.name, "sandbox-tools");
        assert_eq!(manifest.needs_migration, Some(true));
        assert!(manifest.needs_migration());
    }

    #[test]
    fn opaque_annotations_are_kept() {
        let annotated = with(
            GET_CURRENT_TIME,
            "annotations",
            json!({"readOnly": true, "x-mycompany-priority": 3}),
        );
        let tool: ToolDefinition = serde_json::from_slice(&annotated).unwrap();
        assert_eq!(
            tool.annotations.as_ref().unwrap()["x-mycompany-priority"],
            3
        );
        assert_round_trip(&tool, std::str::from_utf8(&annotated).unwrap());
    }
}

/// server/subscription-events.md
mod subscription_events {
    use super::*;

    pub const EVENT: &str = r#"{
      "type": "subscription_event",
      "group_id": "thread_xyz",
      "tool_call_id": "call_abc123",
      "text": "{\"event_type\": \"pull_request\", \"action\": \"opened\", \"number\": 42}"
    }"#;

    const ASSOCIATIVE_FINAL: &str = r#"{
      "type": "subscription_event",
      "group_id": "thread_xyz",
      "tool_call_id": "call_abc123",
      "text": "build output line 1\nbuild output line 2\n[exit code: 0]",
      "associative": true,
      "final": true
    }"#;

    #[test]
    fn event() {
        let Callback::SubscriptionEvent(event) = callback(EVENT) else {
            panic!("expected a subscription_event");
        };
        assert_eq!(event.group_id, "thread_xyz");
        assert_eq!(event.tool_call_id, "call_abc123");
        assert!(event.text.contains("\"action\": \"opened\""));
        assert_eq!((event.associative, event.final_event), (None, None));
        assert!(!event.is_associative() && !event.is_final());
    }

    #[test]
    fn associative_final_event() {
        let parsed = callback(ASSOCIATIVE_FINAL);
        assert_eq!(parsed.tool_call_id(), Some("call_abc123"));
        let Callback::SubscriptionEvent(event) = parsed else {
            panic!("expected a subscription_event");
        };
        assert_eq!(event.associative, Some(true));
        assert_eq!(event.final_event, Some(true));
        assert!(event.is_associative() && event.is_final());
        assert!(event.text.ends_with("[exit code: 0]"));
    }

    #[test]
    fn a_subscription_starts_with_a_tool_result_marked_subscription() {
        let confirmation = r#"{"type": "tool_result", "group_id": "thread_xyz",
            "id": "call_abc123", "subscription": true,
            "text": "Subscribed to pull_request events. Subscription ID: sub_abc"}"#;
        let result = tool_result(confirmation);
        assert_eq!(result.subscription, Some(true));
        assert!(result.starts_subscription());
    }
}

/// server/oauth.md
mod oauth {
    use super::*;

    pub const OAUTH: &str = r#"{
      "type": "oauth",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "call_id": null,
      "auth_url": "https://github.com/login/oauth/authorize?client_id=abc&redirect_uri=..."
    }"#;

    const DENIED: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "text": "Error: GitHub authorization was denied by the user. Please try again and grant the requested permissions."
    }"#;

    #[test]
    fn oauth_message() {
        let Callback::OAuth(request) = callback(OAUTH) else {
            panic!("expected an oauth message");
        };
        assert_eq!(request.group_id, "thread_xyz");
        assert_eq!(request.id, "call_abc123");
        assert_eq!(request.call_id, Nullable::Null);
        assert!(request
            .auth_url
            .starts_with("https://github.com/login/oauth/authorize?"));
    }

    #[test]
    fn denied_authorization() {
        let result = tool_result(DENIED);
        assert!(result
            .text
            .unwrap()
            .starts_with("Error: GitHub authorization was denied"));
    }
}

/// server/user-choice.md
mod user_choice {
    use super::*;

    pub const USER_CHOICE: &str = r#"{
      "type": "user_choice",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "call_id": null,
      "prompt": "Allow writing to the original directory?",
      "choices": ["Yes for session", "Yes once", "No"],
      "default": 2,
      "response_url": "http://tool-server:PORT/user_choice_response"
    }"#;

    const RESPONSE: &str = r#"{
      "id": "call_abc123",
      "selected": 0
    }"#;

    const FAILED: &str = r#"{
      "type": "tool_result",
      "group_id": "thread_xyz",
      "id": "call_abc123",
      "text": "Error: User choice flow failed. Please try again."
    }"#;

    #[test]
    fn user_choice_message() {
        let Callback::UserChoice(request) = callback(USER_CHOICE) else {
            panic!("expected a user_choice message");
        };
        assert_eq!(request.group_id, "thread_xyz");
        assert_eq!(request.id, "call_abc123");
        assert_eq!(request.call_id, Nullable::Null);
        assert_eq!(request.prompt, "Allow writing to the original directory?");
        assert_eq!(request.choices, ["Yes for session", "Yes once", "No"]);
        assert_eq!(request.default_choice, 2);
        assert_eq!(
            request.response_url,
            "http://tool-server:PORT/user_choice_response"
        );
    }

    #[test]
    fn user_choice_response() {
        let response: UserChoiceResponse = message(RESPONSE);
        assert_eq!(response.id, "call_abc123");
        assert_eq!(response.selected, 0);
    }

    #[test]
    fn failed_flow() {
        let result = tool_result(FAILED);
        assert_eq!(
            result.text.as_deref(),
            Some("Error: User choice flow failed. Please try again.")
        );
    }
}

/// server/view-updates.md
mod view_updates {
    use super::*;

    pub const VIEW_UPDATE: &str = r#"{
      "type": "view_update",
      "group_id": "thread_xyz",
      "view_type": "diff",
      "content": {
        "patch": "diff --git a/src/main.rs b/src/main.rs\n..."
      }
    }"#;

    const DIFF_VIEW: &str = r#"{
      "type": "view_update",
      "group_id": "thread_xyz",
      "view_type": "diff",
      "content": {
        "patch": "diff --git a/src/main.rs b/src/main.rs\nindex abc..def 100644\n--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1,3 +1,4 @@\n fn main() {\n+    println!(\"hello\");\n }"
      }
    }"#;

    #[test]
    fn view_update_message() {
        let parsed = callback(VIEW_UPDATE);
        assert_eq!(parsed.group_id(), "thread_xyz");
        assert_eq!(parsed.tool_call_id(), None);
        let Callback::ViewUpdate(update) = parsed else {
            panic!("expected a view_update");
        };
        assert_eq!(update.view_type, "diff");
        assert_eq!(
            update.content["patch"],
            "diff --git a/src/main.rs b/src/main.rs\n..."
        );
    }

    #[test]
    fn diff_view() {
        let Callback::ViewUpdate(update) = callback(DIFF_VIEW) else {
            panic!("expected a view_update");
        };
        assert!(update.content["patch"]
            .as_str()
            .unwrap()
            .contains("index abc..def 100644"));
    }

    #[test]
    fn empty_content_clears_a_view() {
        let Callback::ViewUpdate(update) = callback(
            r#"{"type": "view_update", "group_id": "t", "view_type": "diff", "content": {}}"#,
        ) else {
            panic!("expected a view_update");
        };
        assert!(update.content.is_empty());
    }
}

/// basic/thread-closure.md, basic/lifecycle.md, basic/tool-cancellation.md,
/// basic/tool-call-status.md and basic/migration.md
mod notifications {
    use super::*;

    pub const CLOSE_THREAD: &str = r#"{
      "thread_id": "thread_xyz"
    }"#;

    pub const CANCEL: &str = r#"{
      "thread_id": "thread_xyz",
      "tool_call_id": "call_abc123"
    }"#;

    #[test]
    fn close_thread() {
        let close: CloseThread = message(CLOSE_THREAD);
        assert_eq!(close.thread_id, "thread_xyz");
    }

    #[test]
    fn close_thread_in_the_lifecycle_page() {
        let close: CloseThread = message(r#"{"thread_id": "..."}"#);
        assert_eq!(close.thread_id, "...");
    }

    #[test]
    fn cancel_tool_call() {
        let cancel: CancelToolCall = message(CANCEL);
        assert_eq!(cancel.thread_id, "thread_xyz");
        assert_eq!(cancel.tool_call_id, "call_abc123");
    }

    #[test]
    fn cancel_tool_call_in_the_sequence_diagrams() {
        let cancel: CancelToolCall =
            message(r#"{"tool_call_id": "call_abc123", "thread_id": "thread_xyz"}"#);
        assert_eq!(cancel.tool_call_id, "call_abc123");
    }

    #[test]
    fn tool_call_status_request() {
        let request: ToolCallStatusRequest = message(
            r#"{
              "thread_id": "thread_xyz",
              "tool_call_id": "call_abc123"
            }"#,
        );
        assert_eq!(request.thread_id, "thread_xyz");
        assert_eq!(request.tool_call_id, "call_abc123");
    }

    #[test]
    fn tool_call_status_responses() {
        let alive: ToolCallStatusResponse = message(
            r#"{
              "alive": true
            }"#,
        );
        assert!(alive.alive);
        let dead: ToolCallStatusResponse = message(r#"{"alive": false}"#);
        assert!(!dead.alive);
    }

    #[test]
    fn migrate_request() {
        let request: MigrateRequest = message(
            r#"{
              "session_id": "abc-123",
              "destination_url": "http://127.0.0.1:9123"
            }"#,
        );
        assert_eq!(request.session_id, "abc-123");
        assert_eq!(request.destination_url, "http://127.0.0.1:9123");
    }
}

/// What the spec requires receivers to reject, and what they must tolerate.
mod rejections {
    use super::*;
    use crate::conformance::notifications::{CANCEL, CLOSE_THREAD};
    use crate::conformance::oauth::OAUTH;
    use crate::conformance::subscription_events::EVENT;
    use crate::conformance::tool_invocation::INVOCATION;
    use crate::conformance::tool_result::{MULTIMODAL, REQUEST};
    use crate::conformance::toolsets::GITHUB_TOOLS;
    use crate::conformance::user_choice::USER_CHOICE;
    use crate::conformance::view_updates::VIEW_UPDATE;

    #[test]
    fn unknown_fields_are_tolerated() {
        let result = parse_callback(&with(REQUEST, "x-trace-id", json!("abc"))).unwrap();
        assert_eq!(result.tool_call_id(), Some("call_abc123"));

        let mut nested: Value = serde_json::from_str(MULTIMODAL).unwrap();
        nested["content"][1]["alt"] = json!("the logo");
        assert!(parse_callback(&serde_json::to_vec(&nested).unwrap()).is_ok());

        let invocation = parse_invocation(&with(INVOCATION, "toolset_version", json!("v2")));
        assert_eq!(invocation.unwrap().operation, "subscribe_github_events");

        let mut manifest: Value = serde_json::from_str(GITHUB_TOOLS).unwrap();
        manifest["x-vendor"] = json!({"tier": 1});
        manifest["tools"][0]["outputSchema"] = json!({"type": "object"});
        assert!(parse_manifest(&serde_json::to_vec(&manifest).unwrap()).is_ok());

        let close = parse::<CloseThread>(&with(CLOSE_THREAD, "reason", json!("done")));
        assert_eq!(close.unwrap().thread_id, "thread_xyz");
    }

    #[test]
    fn every_required_callback_field_is_named_when_missing() {
        let cases: [(&str, &[&str]); 5] = [
            (REQUEST, &["type", "group_id", "id"]),
            (EVENT, &["type", "group_id", "tool_call_id", "text"]),
            (OAUTH, &["type", "group_id", "id", "auth_url"]),
            (
                USER_CHOICE,
                &[
                    "type",
                    "group_id",
                    "id",
                    "prompt",
                    "choices",
                    "response_url",
                ],
            ),
            (VIEW_UPDATE, &["type", "group_id", "view_type", "content"]),
        ];
        for (example, required) in cases {
            for field in required {
                let error = parse_callback(&without(example, field)).unwrap_err();
                assert_names_missing(&error, field);
            }
        }
    }

    #[test]
    fn a_user_choice_without_default_defaults_to_the_first_choice() {
        // As the reference runtime reads it; refusing it would leave the call waiting, since a
        // tool does not resend a callback answered with 4xx.
        match parse_callback(&without(USER_CHOICE, "default")).unwrap() {
            Callback::UserChoice(choice) => assert_eq!(choice.default_choice, 0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_error_names_the_message_that_misses_a_field() {
        let error = parse_callback(&without(OAUTH, "auth_url")).unwrap_err();
        assert!(error.to_string().starts_with("malformed oauth:"), "{error}");
    }

    #[test]
    fn every_required_invocation_field_is_named_when_missing() {
        for field in ["operation", "arguments", "id", "callback_url", "group_id"] {
            let error = parse_invocation(&without(INVOCATION, field)).unwrap_err();
            assert_names_missing(&error, field);
        }
    }

    #[test]
    fn every_required_manifest_field_is_named_when_missing() {
        for field in ["name", "endpoint", "tools"] {
            let error = parse_manifest(&without(GITHUB_TOOLS, field)).unwrap_err();
            assert_names_missing(&error, field);
        }
        for field in ["name", "description", "inputSchema"] {
            let mut manifest: Value = serde_json::from_str(GITHUB_TOOLS).unwrap();
            manifest["tools"][1].as_object_mut().unwrap().remove(field);
            let error = parse_manifest(&serde_json::to_vec(&manifest).unwrap()).unwrap_err();
            assert_names_missing(&error, field);
        }
    }

    #[test]
    fn every_required_notification_field_is_named_when_missing() {
        let error = parse::<CloseThread>(&without(CLOSE_THREAD, "thread_id")).unwrap_err();
        assert_names_missing(&error, "thread_id");
        for field in ["thread_id", "tool_call_id"] {
            let error = parse::<CancelToolCall>(&without(CANCEL, field)).unwrap_err();
            assert_names_missing(&error, field);
            let error = parse::<ToolCallStatusRequest>(&without(CANCEL, field)).unwrap_err();
            assert_names_missing(&error, field);
        }
        let error = parse::<ToolCallStatusResponse>(b"{}").unwrap_err();
        assert_names_missing(&error, "alive");
    }

    #[test]
    fn an_unknown_callback_type_is_rejected_by_name() {
        let error = parse_callback(&with(REQUEST, "type", json!("tool_progress"))).unwrap_err();
        assert!(
            matches!(&error, WireError::UnknownCallbackType { type_name } if type_name == "tool_progress"),
            "{error:?}"
        );
        assert!(error.to_string().contains("`tool_progress`"), "{error}");
    }

    #[test]
    fn a_callback_type_that_is_not_a_string_is_rejected() {
        let error = parse_callback(&with(REQUEST, "type", json!(7))).unwrap_err();
        assert!(matches!(error, WireError::Malformed { .. }), "{error:?}");
    }

    #[test]
    fn a_body_that_is_not_json_is_rejected() {
        let error = parse_callback(b"type=tool_result").unwrap_err();
        assert!(matches!(error, WireError::Malformed { .. }), "{error:?}");
    }

    #[test]
    fn a_tool_result_without_text_or_content_is_rejected() {
        let error = parse_callback(&without(REQUEST, "text")).unwrap_err();
        assert_invalid(&error, &["tool_result", "`text`", "`content`"]);
    }

    #[test]
    fn a_tool_result_with_both_text_and_content_is_accepted() {
        let both = with(MULTIMODAL, "text", json!("Read image file \"logo.png\""));
        assert!(parse_callback(&both).is_ok());
    }

    #[test]
    fn an_unknown_content_item_type_is_rejected_by_name() {
        let mut audio: Value = serde_json::from_str(MULTIMODAL).unwrap();
        audio["content"][1] = json!({"type": "audio", "data": "UklGR", "mediaType": "audio/wav"});
        let error = parse_callback(&serde_json::to_vec(&audio).unwrap()).unwrap_err();
        assert!(error.to_string().contains("`audio`"), "{error}");
    }

    #[test]
    fn an_unknown_display_segment_type_is_kept() {
        let chart = json!([{"type": "chart", "content": {"points": [1, 2]}},
                           {"type": "text", "content": "2 points"}]);
        let bytes = with(REQUEST, "display_as", chart.clone());
        let Callback::ToolResult(result) = parse_callback(&bytes).unwrap() else {
            panic!("expected a tool_result");
        };
        let segments = result.display_as.as_ref().unwrap();
        assert!(matches!(&segments[0], DisplaySegment::Unknown(raw) if raw["type"] == "chart"));
        assert_eq!(serde_json::to_value(&result).unwrap()["display_as"], chart);
    }

    #[test]
    fn a_manifest_with_a_duplicate_tool_name_is_rejected() {
        let mut manifest: Value = serde_json::from_str(GITHUB_TOOLS).unwrap();
        manifest["tools"][1]["name"] = json!("get_pull_request");
        let error = parse_manifest(&serde_json::to_vec(&manifest).unwrap()).unwrap_err();
        assert_invalid(
            &error,
            &["manifest", "`get_pull_request`", "more than once"],
        );
    }

    #[test]
    fn a_manifest_without_tools_is_rejected() {
        let error = parse_manifest(&with(GITHUB_TOOLS, "tools", json!([]))).unwrap_err();
        assert_invalid(&error, &["`tools`", "at least one"]);
    }

    #[test]
    fn a_manifest_name_must_be_1_to_128_characters() {
        for name in [String::new(), "x".repeat(129)] {
            let error = parse_manifest(&with(GITHUB_TOOLS, "name", json!(name))).unwrap_err();
            assert_invalid(&error, &["`name`", "1 to 128"]);
        }
        assert!(parse_manifest(&with(GITHUB_TOOLS, "name", json!("x".repeat(128)))).is_ok());
    }

    #[test]
    fn a_manifest_endpoint_must_be_a_url() {
        let error = parse_manifest(&with(GITHUB_TOOLS, "endpoint", json!("/invoke"))).unwrap_err();
        assert_invalid(&error, &["`endpoint`", "/invoke"]);
    }

    #[test]
    fn a_tool_name_with_a_space_is_rejected() {
        let mut manifest: Value = serde_json::from_str(GITHUB_TOOLS).unwrap();
        manifest["tools"][0]["name"] = json!("get pull request");
        let error = parse_manifest(&serde_json::to_vec(&manifest).unwrap()).unwrap_err();
        assert_invalid(&error, &["`get pull request`", "' '"]);
    }

    #[test]
    fn an_input_schema_that_is_not_an_object_is_rejected() {
        let mut manifest: Value = serde_json::from_str(GITHUB_TOOLS).unwrap();
        manifest["tools"][1]["inputSchema"] = json!(true);
        let error = parse_manifest(&serde_json::to_vec(&manifest).unwrap()).unwrap_err();
        assert_invalid(
            &error,
            &["`get_current_time`", "`inputSchema`", "a boolean"],
        );
    }

    #[test]
    fn a_user_choice_default_must_index_the_choices() {
        let error = parse_callback(&with(USER_CHOICE, "default", json!(3))).unwrap_err();
        assert_invalid(
            &error,
            &[
                "user_choice",
                "`default` must index `choices` (0 to 2), is 3",
            ],
        );
        let error = parse_callback(&with(USER_CHOICE, "choices", json!([]))).unwrap_err();
        assert_invalid(&error, &["`choices`", "at least one"]);
        let error = parse_callback(&with(USER_CHOICE, "default", json!(-1))).unwrap_err();
        assert!(matches!(error, WireError::Malformed { .. }), "{error:?}");
    }

    #[test]
    fn an_oauth_auth_url_must_be_https() {
        let plain = json!("http://github.com/login/oauth/authorize?client_id=abc");
        let error = parse_callback(&with(OAUTH, "auth_url", plain)).unwrap_err();
        assert_invalid(&error, &["oauth", "`auth_url`", "https"]);
    }

    #[test]
    fn arguments_and_view_content_must_be_objects() {
        let error = parse_invocation(&with(INVOCATION, "arguments", json!("owner=acme")));
        assert!(matches!(error, Err(WireError::Malformed { .. })));
        let error = parse_callback(&with(VIEW_UPDATE, "content", json!("patch")));
        assert!(matches!(error, Err(WireError::Malformed { .. })));
    }
}
