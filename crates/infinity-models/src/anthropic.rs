//! The Anthropic Messages API adapter, streaming, with prompt caching.
//!
//! Our history converts at the edge: user-role messages and tool results become `user` turns
//! (tool results first, as the API requires), model turns become `assistant` turns with `text`
//! and `tool_use` blocks; consecutive entries of one role merge into one turn. Cache breakpoints
//! (`cache_control: ephemeral`) go on the system prompt (caching tools and system, the stable
//! prefix) and on the last block of the conversation, so the next slice reads everything up to
//! here from the cache.

mod request;

use async_trait::async_trait;
use infinity_agent_core::model::Usage;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelErrorKind, ModelProvider, ModelToolCall,
    StopReason, TextSink,
};
use reqwest::header::CONTENT_TYPE;
use serde_json::{json, Map, Value};

use crate::model_info;
use crate::names::restore_tool_names;
use crate::transport::{read_sse, with_retries, Attempt, LiveText, RequestPolicy};

/// The API version header value.
pub const API_VERSION: &str = "2023-06-01";

/// Where and how to reach the API.
#[derive(Debug, Clone)]
pub struct AnthropicConfig {
    /// Base URL, default `https://api.anthropic.com` (`ANTHROPIC_BASE_URL`).
    pub base_url: String,
    /// The key (`ANTHROPIC_API_KEY`); never logged.
    pub api_key: String,
    /// Retries and timeouts.
    pub request: RequestPolicy,
}

impl AnthropicConfig {
    /// The base URL from `ANTHROPIC_BASE_URL` (or the default) with `api_key`.
    pub fn from_env_or_key(api_key: &str) -> Self {
        Self {
            base_url: std::env::var("ANTHROPIC_BASE_URL")
                .ok()
                .filter(|u| !u.trim().is_empty())
                .unwrap_or_else(|| "https://api.anthropic.com".to_owned()),
            api_key: api_key.to_owned(),
            request: RequestPolicy::default(),
        }
    }

    /// From `ANTHROPIC_BASE_URL` and `ANTHROPIC_API_KEY`, as the official SDKs read them.
    pub fn from_env() -> Result<Self, crate::ResolveError> {
        let api_key = std::env::var("ANTHROPIC_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty())
            .ok_or(crate::ResolveError::MissingKey(
                "ANTHROPIC_API_KEY is not set",
            ))?;
        Ok(Self {
            base_url: std::env::var("ANTHROPIC_BASE_URL")
                .ok()
                .filter(|u| !u.trim().is_empty())
                .unwrap_or_else(|| "https://api.anthropic.com".to_owned()),
            api_key,
            request: RequestPolicy::default(),
        })
    }
}

/// A Claude model behind the Messages API.
pub struct AnthropicModel {
    name: String,
    model: String,
    max_tokens: u32,
    context_window: u32,
    prices: Option<infinity_agent_core::cost::Prices>,
    images: bool,
    config: AnthropicConfig,
    http: reqwest::Client,
}

impl std::fmt::Debug for AnthropicModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicModel")
            .field("model", &self.model)
            .field("base_url", &self.config.base_url)
            .finish_non_exhaustive()
    }
}

impl AnthropicModel {
    /// A model by id (e.g. `claude-sonnet-4-5`).
    pub fn new(model: &str, config: AnthropicConfig) -> Self {
        let info = model_info::lookup("anthropic", model);
        Self {
            name: format!("anthropic:{model}"),
            model: model.to_owned(),
            max_tokens: info.max_output_tokens,
            context_window: info.context_window,
            prices: info.prices,
            images: info.images,
            config,
            http: reqwest::Client::new(),
        }
    }

    /// The request body for a completion, as the adapter sends it (public for tests and the
    /// request benchmark).
    pub fn request_body(&self, request: &CompletionRequest<'_>) -> Vec<u8> {
        let settings = request::Settings {
            model: &self.model,
            max_tokens: self.max_tokens,
            images: self.images,
        };
        request::body(settings, request)
    }
}

/// Assembles a streamed response.
#[derive(Debug, Default)]
struct Assembly {
    text: String,
    calls: Vec<(String, String, String)>, // id, name, partial json
    blocks: Map<String, Value>,           // index -> "text" | "tool"
    stop: Option<String>,
    usage: Usage,
}

impl Assembly {
    fn event(&mut self, data: &str, live: &LiveText<'_>) -> Result<(), Attempt> {
        let v: Value = serde_json::from_str(data).map_err(|e| {
            Attempt::Retry(
                ModelErrorKind::BadAnswer,
                format!("anthropic: malformed stream event: {e}"),
                None,
            )
        })?;
        match v["type"].as_str().unwrap_or("") {
            "message_start" => {
                let u = &v["message"]["usage"];
                self.usage.input_tokens = u["input_tokens"].as_u64().unwrap_or(0);
                self.usage.cache_read_tokens = u["cache_read_input_tokens"].as_u64().unwrap_or(0);
                self.usage.cache_write_tokens =
                    u["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = u["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let index = v["index"].to_string();
                let block = &v["content_block"];
                match block["type"].as_str() {
                    Some("tool_use") => {
                        self.blocks.insert(index, json!(self.calls.len()));
                        self.calls.push((
                            block["id"].as_str().unwrap_or("").to_owned(),
                            block["name"].as_str().unwrap_or("").to_owned(),
                            String::new(),
                        ));
                    }
                    _ => {
                        if let Some(t) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            live.text(t);
                            self.text.push_str(t);
                        }
                    }
                }
            }
            "content_block_delta" => {
                let delta = &v["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        let t = delta["text"].as_str().unwrap_or("");
                        live.text(t);
                        self.text.push_str(t);
                    }
                    Some("input_json_delta") => {
                        let index = v["index"].to_string();
                        if let Some(i) = self.blocks.get(&index).and_then(Value::as_u64) {
                            if let Some(call) = self.calls.get_mut(i as usize) {
                                call.2
                                    .push_str(delta["partial_json"].as_str().unwrap_or(""));
                            }
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(stop) = v["delta"]["stop_reason"].as_str() {
                    self.stop = Some(stop.to_owned());
                }
                // The usage here is cumulative, and may restate the input counts of
                // `message_start` (which then held estimates): the last value of each counts.
                let u = &v["usage"];
                let counts = [
                    ("input_tokens", &mut self.usage.input_tokens),
                    ("cache_read_input_tokens", &mut self.usage.cache_read_tokens),
                    (
                        "cache_creation_input_tokens",
                        &mut self.usage.cache_write_tokens,
                    ),
                    ("output_tokens", &mut self.usage.output_tokens),
                ];
                for (key, count) in counts {
                    if let Some(n) = u[key].as_u64() {
                        *count = n;
                    }
                }
            }
            "error" => {
                let kind = v["error"]["type"].as_str().unwrap_or("error");
                let message = v["error"]["message"].as_str().unwrap_or("");
                let why = format!("anthropic: {kind}: {message}");
                return Err(match kind {
                    "rate_limit_error" => Attempt::Retry(ModelErrorKind::RateLimited, why, None),
                    "overloaded_error" | "api_error" => {
                        Attempt::Retry(ModelErrorKind::Unavailable, why, None)
                    }
                    "authentication_error" | "permission_error" => {
                        Attempt::Fail(ModelError::terminal(ModelErrorKind::Credentials, why))
                    }
                    _ => Attempt::Fail(ModelError::terminal(ModelErrorKind::Refused, why)),
                });
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(self) -> Result<Completion, Attempt> {
        let Some(stop) = self.stop else {
            return Err(Attempt::Retry(
                ModelErrorKind::Network,
                "anthropic: the stream ended before the message did".into(),
                None,
            ));
        };
        let mut tool_calls = Vec::new();
        for (id, name, json) in self.calls {
            let args = if json.trim().is_empty() {
                json!({})
            } else {
                serde_json::from_str(&json).unwrap_or_else(|_| json!({"_unparsed_arguments": json}))
            };
            tool_calls.push(ModelToolCall {
                id: Some(id),
                name,
                args,
            });
        }
        let stop_reason = match stop.as_str() {
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            _ => StopReason::EndTurn,
        };
        Ok(Completion {
            text: Some(self.text).filter(|t| !t.is_empty()),
            tool_calls,
            stop_reason,
            usage: self.usage,
        })
    }
}

#[async_trait]
impl ModelProvider for AnthropicModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.context_window
    }

    fn prices(&self) -> Option<infinity_agent_core::cost::Prices> {
        self.prices
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        self.run(request, &|_| {}).await
    }

    async fn complete_streaming(
        &self,
        request: CompletionRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<Completion, ModelError> {
        self.run(request, on_text).await
    }
}

impl AnthropicModel {
    async fn run(
        &self,
        request: CompletionRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<Completion, ModelError> {
        let body = bytes::Bytes::from(self.request_body(&request));
        let live = LiveText::new(on_text);
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        with_retries(
            "anthropic",
            &self.config.request,
            || {
                self.http
                    .post(&url)
                    .header("x-api-key", &self.config.api_key)
                    .header("anthropic-version", API_VERSION)
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone())
            },
            |response| async {
                live.attempt();
                let mut assembly = Assembly::default();
                read_sse("anthropic", &self.config.request, response, |data| {
                    assembly.event(data, &live)
                })
                .await?;
                assembly.finish()
            },
        )
        .await
        .map(|mut completion| {
            restore_tool_names(&request, &mut completion.tool_calls);
            completion
        })
    }
}
