//! The OpenAI-compatible Chat Completions adapter, streaming. Serves OpenAI and servers that
//! speak the same API (Ollama, vLLM, llama.cpp) through `OPENAI_BASE_URL`.

mod request;

use async_trait::async_trait;
use infinity_agent_core::model::Usage;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelErrorKind, ModelProvider, ModelToolCall,
    StopReason, TextSink,
};
use reqwest::header::CONTENT_TYPE;
use serde_json::{json, Value};

use crate::model_info;
use crate::names::restore_tool_names;
use crate::transport::{read_sse, with_retries, Attempt, LiveText, RequestPolicy};

/// Where and how to reach the API.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// Base URL including `/v1`, default `https://api.openai.com/v1` (`OPENAI_BASE_URL`).
    pub base_url: String,
    /// The key (`OPENAI_API_KEY`); optional for local servers; never logged.
    pub api_key: Option<String>,
    /// Retries and timeouts.
    pub request: RequestPolicy,
}

impl OpenAiConfig {
    /// OpenAI's endpoint, no key yet.
    pub fn default_endpoint() -> Self {
        Self {
            base_url: "https://api.openai.com/v1".to_owned(),
            api_key: None,
            request: RequestPolicy::default(),
        }
    }

    /// From `OPENAI_BASE_URL` and `OPENAI_API_KEY`, as the official SDKs read them. A key is
    /// required for the default (OpenAI's) endpoint only.
    pub fn from_env() -> Result<Self, crate::ResolveError> {
        let base_url = std::env::var("OPENAI_BASE_URL")
            .ok()
            .filter(|u| !u.trim().is_empty());
        let api_key = std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty());
        if base_url.is_none() && api_key.is_none() {
            return Err(crate::ResolveError::MissingKey(
                "OPENAI_API_KEY is not set (or set OPENAI_BASE_URL for a local server)",
            ));
        }
        Ok(Self {
            base_url: base_url.unwrap_or_else(|| "https://api.openai.com/v1".to_owned()),
            api_key,
            request: RequestPolicy::default(),
        })
    }
}

/// A model behind an OpenAI-compatible chat completions endpoint.
pub struct OpenAiModel {
    name: String,
    model: String,
    max_tokens: u32,
    context_window: u32,
    prices: Option<infinity_agent_core::cost::Prices>,
    config: OpenAiConfig,
    http: reqwest::Client,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("model", &self.model)
            .field("base_url", &self.config.base_url)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    /// A model by id (e.g. `gpt-4.1`, or whatever the server calls its model).
    pub fn new(model: &str, config: OpenAiConfig) -> Self {
        let info = model_info::lookup("openai", model);
        Self {
            name: format!("openai:{model}"),
            model: model.to_owned(),
            max_tokens: info.max_output_tokens,
            context_window: info.context_window,
            prices: info.prices,
            config,
            http: reqwest::Client::new(),
        }
    }

    /// The request body for a completion, as the adapter sends it (public for tests and the
    /// request benchmark).
    pub fn request_body(&self, request: &CompletionRequest<'_>) -> Vec<u8> {
        request::body(&self.model, self.max_tokens, request)
    }
}

#[derive(Debug, Default)]
struct Assembly {
    text: String,
    calls: Vec<(String, String, String)>,
    finish: Option<String>,
    usage: Usage,
}

impl Assembly {
    fn chunk(&mut self, data: &str, live: &LiveText<'_>) -> Result<(), Attempt> {
        if data.trim() == "[DONE]" {
            return Ok(());
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            Attempt::Retry(
                ModelErrorKind::BadAnswer,
                format!("openai: malformed stream chunk: {e}"),
                None,
            )
        })?;
        if let Some(err) = v.get("error") {
            let message = err["message"].as_str().unwrap_or("error");
            let kind = err["type"].as_str().or(err["code"].as_str()).unwrap_or("");
            let why = format!("openai: {kind}: {message}");
            // Server-side trouble mid-stream is worth another try; anything else is not.
            return Err(match kind {
                "rate_limit_exceeded" => Attempt::Retry(ModelErrorKind::RateLimited, why, None),
                "server_error" | "overloaded" => {
                    Attempt::Retry(ModelErrorKind::Unavailable, why, None)
                }
                _ => Attempt::Fail(ModelError::terminal(ModelErrorKind::Refused, why)),
            });
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            let prompt = usage["prompt_tokens"].as_u64().unwrap_or(0);
            let cached = usage["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
            self.usage.input_tokens = prompt.saturating_sub(cached);
            self.usage.cache_read_tokens = cached;
            self.usage.output_tokens = usage["completion_tokens"].as_u64().unwrap_or(0);
        }
        for choice in v["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            if let Some(t) = delta["content"].as_str() {
                live.text(t);
                self.text.push_str(t);
            }
            for call in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = call["index"].as_u64().unwrap_or(self.calls.len() as u64) as usize;
                while self.calls.len() <= index {
                    self.calls.push(Default::default());
                }
                let slot = &mut self.calls[index];
                if let Some(id) = call["id"].as_str() {
                    slot.0 = id.to_owned();
                }
                if let Some(name) = call["function"]["name"].as_str() {
                    slot.1.push_str(name);
                }
                if let Some(args) = call["function"]["arguments"].as_str() {
                    slot.2.push_str(args);
                }
            }
            if let Some(reason) = choice["finish_reason"].as_str() {
                self.finish = Some(reason.to_owned());
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Completion, Attempt> {
        let Some(finish) = self.finish else {
            return Err(Attempt::Retry(
                ModelErrorKind::Network,
                "openai: the stream ended before the completion did".into(),
                None,
            ));
        };
        let tool_calls = self
            .calls
            .into_iter()
            .filter(|(_, name, _)| !name.is_empty())
            .map(|(id, name, args)| ModelToolCall {
                id: Some(id).filter(|i| !i.is_empty()),
                name,
                args: if args.trim().is_empty() {
                    json!({})
                } else {
                    serde_json::from_str(&args)
                        .unwrap_or_else(|_| json!({"_unparsed_arguments": args}))
                },
            })
            .collect::<Vec<_>>();
        let stop_reason = match finish.as_str() {
            "length" => StopReason::MaxTokens,
            "tool_calls" => StopReason::ToolUse,
            _ if !tool_calls.is_empty() => StopReason::ToolUse,
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
impl ModelProvider for OpenAiModel {
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

impl OpenAiModel {
    async fn run(
        &self,
        request: CompletionRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<Completion, ModelError> {
        let body = bytes::Bytes::from(self.request_body(&request));
        let live = LiveText::new(on_text);
        let url = format!(
            "{}/chat/completions",
            self.config.base_url.trim_end_matches('/')
        );
        with_retries(
            "openai",
            &self.config.request,
            || {
                let builder = self
                    .http
                    .post(&url)
                    .header(CONTENT_TYPE, "application/json")
                    .body(body.clone());
                match &self.config.api_key {
                    Some(key) => builder.bearer_auth(key),
                    None => builder,
                }
            },
            |response| async {
                live.attempt();
                let mut assembly = Assembly::default();
                read_sse("openai", &self.config.request, response, |data| {
                    assembly.chunk(data, &live)
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
