//! Adapters pointed at a test server, and conversations to send them.

use std::sync::Arc;
use std::time::Duration;

use infinity_agent_core::history::{HistoryEntry, HistoryView, Item, ToolCall};
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::model::Usage;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelProvider, ToolSpec,
};
use infinity_models::anthropic::{AnthropicConfig, AnthropicModel};
use infinity_models::openai::{OpenAiConfig, OpenAiModel};
use infinity_models::transport::RequestPolicy;
use infinity_retry::RetryPolicy;
use serde_json::{json, Value};

use crate::replay::server::Server;

/// The key the adapters send; it must never show up in an error.
pub const API_KEY: &str = "sk-replay-test-7f3a9c2e51d04b68";

/// The system prompt of every conversation.
pub const SYSTEM: &str = "You are a helpful weather assistant.";

/// Up to `max_retries` retries, 10 ms apart, 5 s per attempt.
pub fn quick_retries(max_retries: u32) -> RequestPolicy {
    RequestPolicy {
        retry: RetryPolicy::new(
            max_retries + 1,
            Duration::from_millis(10),
            Duration::from_millis(50),
        )
        .jittered(),
        timeout: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
    }
}

/// `claude-sonnet-4-5` on the test server.
pub fn anthropic(server: &Server, retry: RequestPolicy) -> AnthropicModel {
    let config = AnthropicConfig {
        base_url: server.url.clone(),
        api_key: API_KEY.to_owned(),
        request: retry,
    };
    AnthropicModel::new("claude-sonnet-4-5", config)
}

/// `gpt-4.1-mini` on the test server (its base URL includes `/v1`, as OpenAI's does).
pub fn openai(server: &Server, retry: RequestPolicy) -> OpenAiModel {
    let config = OpenAiConfig {
        base_url: format!("{}/v1", server.url),
        api_key: Some(API_KEY.to_owned()),
        request: retry,
    };
    OpenAiModel::new("gpt-4.1-mini", config)
}

/// Everything a `CompletionRequest` borrows.
#[derive(Debug)]
pub struct Conversation {
    thread: ThreadId,
    stack: Vec<ThreadId>,
    tools: Vec<ToolSpec>,
    history: Vec<Arc<HistoryEntry>>,
}

impl Conversation {
    /// These items as a root thread's history, with the weather and search tools.
    pub fn new(items: Vec<Item>) -> Self {
        let history = items
            .into_iter()
            .enumerate()
            .map(|(seq, item)| {
                Arc::new(HistoryEntry {
                    seq: seq as u64,
                    at: jiff::Timestamp::UNIX_EPOCH,
                    input_id: None,
                    item,
                })
            })
            .collect();
        let thread = ThreadId::new("t").unwrap();
        Self {
            stack: vec![thread.clone()],
            thread,
            tools: vec![weather_tool(), search_tool()],
            history,
        }
    }

    /// The same history, offering `tools` instead.
    pub fn with_tools(mut self, tools: Vec<ToolSpec>) -> Self {
        self.tools = tools;
        self
    }

    /// One user message.
    pub fn hello() -> Self {
        Self::new(vec![Item::user("What's the weather in Paris?")])
    }

    /// The request for the next completion.
    pub fn request(&self) -> CompletionRequest<'_> {
        CompletionRequest {
            thread_id: &self.thread,
            is_root: true,
            lineage: &self.stack,
            system: SYSTEM,
            tools: &self.tools,
            history: HistoryView::from_slice(&self.history),
        }
    }
}

/// Runs one completion of `conversation`.
pub async fn complete(
    model: &dyn ModelProvider,
    conversation: &Conversation,
) -> Result<Completion, ModelError> {
    model.complete(conversation.request()).await
}

pub fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "The current weather in a city.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]
        }),
    }
}

pub fn search_tool() -> ToolSpec {
    ToolSpec {
        name: "search".into(),
        description: "Searches the web.".into(),
        input_schema: json!({"type": "object", "properties": {"query": {"type": "string"}}}),
    }
}

/// A tool call in our history.
pub fn call(id: &str, name: &str, args: Value) -> ToolCall {
    ToolCall {
        id: CallId::new(id).unwrap(),
        name: name.into(),
        args,
    }
}

/// A model turn in our history.
pub fn assistant(text: Option<&str>, tool_calls: Vec<ToolCall>) -> Item {
    Item::Assistant {
        text: text.map(str::to_owned),
        tool_calls,
        synthetic: false,
    }
}

/// A tool result in our history.
pub fn tool_result(call_id: &str, name: &str, text: &str, is_error: bool) -> Item {
    Item::ToolResult {
        call_id: CallId::new(call_id).unwrap(),
        name: name.into(),
        text: text.into(),
        is_error,
        images: Vec::new(),
        display_as: Vec::new(),
    }
}

/// Usage as an adapter reports it (the runtime counts completions itself).
pub fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        completions: 0,
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        ..Usage::default()
    }
}
