//! A tiny MCP server for tests (feature `test-util`): the `tiny-mcp-server` binary serves it
//! over stdio, and tests may serve it in-process over any rmcp transport.
//!
//! Its name is `tiny test server` (toolset `tiny-test-server`); its instructions end with the
//! value of [`NOTE_VARIABLE`] when that is set. It lists its tools two per
//! page, so clients must follow pagination:
//!
//! - `add(a: number, b: number)`: the sum as text; an MCP protocol error (invalid params) when
//!   `a` or `b` is not a number;
//! - `fail()`: an `isError` result with the text `the tool failed on purpose` (and an empty
//!   description);
//! - `picture()`: a text item and a 1x1 PNG image item;
//! - `slow()`: waits a minute, or until the client cancels the request;
//! - `files.read()`: a name RAP does not accept.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{json, Value};
use tokio::sync::Notify;

/// The server's name in its `initialize` result.
pub const SERVER_NAME: &str = "tiny test server";

/// An environment variable whose value, when set, ends the server's instructions (to check
/// that a client passed it on).
pub const NOTE_VARIABLE: &str = "TINY_SERVER_NOTE";

/// The text of `fail`'s error result.
pub const FAILURE_TEXT: &str = "the tool failed on purpose";

/// The text item `picture` sends before its image.
pub const PICTURE_TEXT: &str = "A red pixel.";

/// The image `picture` sends: a 1x1 PNG, base64-encoded.
pub const PICTURE_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// How many tools one `tools/list` page holds.
const PAGE_SIZE: usize = 2;

/// How long `slow` waits when nobody cancels it.
const SLOW_CALL: Duration = Duration::from_secs(60);

/// The tiny MCP server. Clones share the [`SlowCalls`] probe.
#[derive(Debug, Clone, Default)]
pub struct TinyServer {
    slow_calls: Arc<SlowCalls>,
}

/// What happened to calls of `slow`, for tests that serve the server in-process. Each event
/// leaves a permit, so a test may wait for it after it happened.
#[derive(Debug, Default)]
pub struct SlowCalls {
    /// Notified when a call of `slow` starts.
    pub started: Notify,
    /// Notified when the client cancels a call of `slow`.
    pub cancelled: Notify,
}

impl TinyServer {
    /// What happened to the calls of `slow`.
    pub fn slow_calls(&self) -> Arc<SlowCalls> {
        Arc::clone(&self.slow_calls)
    }

    async fn slow(&self, context: &RequestContext<RoleServer>) -> CallToolResult {
        self.slow_calls.started.notify_one();
        tokio::select! {
            () = context.ct.cancelled() => {
                self.slow_calls.cancelled.notify_one();
                CallToolResult::error(vec![ContentBlock::text("cancelled")])
            }
            () = tokio::time::sleep(SLOW_CALL) => {
                CallToolResult::success(vec![ContentBlock::text("done")])
            }
        }
    }
}

/// Every tool, in the order `tools/list` gives them.
fn all_tools() -> Vec<Tool> {
    let numbers = json!({
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "The first number"},
            "b": {"type": "number", "description": "The second number"}
        },
        "required": ["a", "b"]
    });
    let no_arguments = json!({"type": "object", "additionalProperties": false});
    vec![
        Tool::new("add", "Adds two numbers", schema(numbers)),
        Tool::new("fail", "", schema(no_arguments.clone())),
        Tool::new(
            "picture",
            "Returns a picture of a red pixel",
            schema(no_arguments.clone()),
        ),
        Tool::new(
            "slow",
            "Waits a minute unless cancelled",
            schema(no_arguments.clone()),
        ),
        Tool::new(
            "files.read",
            "A name RAP does not accept",
            schema(no_arguments),
        ),
    ]
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The number argument `name` of `add`.
fn number(arguments: Option<&JsonObject>, name: &str) -> Result<f64, ErrorData> {
    arguments
        .and_then(|arguments| arguments.get(name))
        .and_then(Value::as_f64)
        .ok_or_else(|| ErrorData::invalid_params(format!("`{name}` must be a number"), None))
}

impl ServerHandler for TinyServer {
    fn get_info(&self) -> ServerConfig {
        let mut instructions = "Arithmetic, failures and pictures, for tests.".to_owned();
        if let Ok(note) = std::env::var(NOTE_VARIABLE) {
            instructions.push(' ');
            instructions.push_str(&note);
        }
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(SERVER_NAME, "0.1.0"))
            .with_instructions(instructions)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let start = match request.and_then(|request| request.cursor) {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .map_err(|_| ErrorData::invalid_params("unknown cursor", None))?,
        };
        let tools = all_tools();
        let end = (start + PAGE_SIZE).min(tools.len());
        let mut page =
            ListToolsResult::with_all_items(tools.get(start..end).unwrap_or_default().to_vec());
        page.next_cursor = (end < tools.len()).then(|| end.to_string());
        Ok(page)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.as_ref();
        let result = match request.name.as_ref() {
            "add" => {
                let sum = number(arguments, "a")? + number(arguments, "b")?;
                CallToolResult::success(vec![ContentBlock::text(sum.to_string())])
            }
            "fail" => CallToolResult::error(vec![ContentBlock::text(FAILURE_TEXT)]),
            "picture" => CallToolResult::success(vec![
                ContentBlock::text(PICTURE_TEXT),
                ContentBlock::image(PICTURE_PNG, "image/png"),
            ]),
            "slow" => self.slow(&context).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool named `{other}`"),
                    None,
                ))
            }
        };
        Ok(result.into())
    }
}
