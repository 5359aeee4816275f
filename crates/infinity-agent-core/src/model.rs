//! The model interface. Adapters for real providers live in their own crates and convert our
//! history into their wire format at the edge.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::cost::{Prices, Usd};
use crate::history::HistoryView;
use crate::ids::ThreadId;

/// Receives a completion's text as the model writes it.
pub type TextSink<'a> = dyn Fn(Streamed<'_>) + Send + Sync + 'a;

/// A piece of a completion as it streams, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Streamed<'a> {
    /// More of the text.
    Text(&'a str),
    /// The text streamed so far is withdrawn: the stream broke off and the model is asked
    /// again, so the text starts over. What follows adds up to the completion's text.
    Restarted,
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub input_schema: serde_json::Value,
}

impl ToolSpec {
    /// A tool named `name` that does `description`, with arguments matching `input_schema`.
    pub fn new(name: &str, description: &str, input_schema: serde_json::Value) -> Self {
        Self {
            name: name.to_owned(),
            description: description.to_owned(),
            input_schema,
        }
    }
}

/// What a completion is asked.
#[derive(Debug, Clone, Copy)]
pub struct CompletionRequest<'a> {
    /// The thread asking.
    pub thread_id: &'a ThreadId,
    /// True for a root thread, false for children.
    pub is_root: bool,
    /// The thread's lineage: root first, the thread itself last.
    pub lineage: &'a [ThreadId],
    /// The system prompt (the agent's, followed by a line telling the model its thread ID and
    /// stack, which `spawn_thread` and `close_thread` need).
    pub system: &'a str,
    /// The tools on offer.
    pub tools: &'a [ToolSpec],
    /// The conversation: inherited entries, then the thread's own.
    pub history: HistoryView<'a>,
}

/// A tool call as the model wrote it. The runtime records it under an id of its own (see
/// [`crate::engine`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelToolCall {
    /// The provider's id for the call, if it gave one (kept for logs; the runtime uses its own).
    pub id: Option<String>,
    /// The tool.
    pub name: String,
    /// The arguments.
    pub args: serde_json::Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants tool results.
    ToolUse,
    /// It ran out of output tokens.
    MaxTokens,
}

/// One completion.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The text it wrote.
    pub text: Option<String>,
    /// The tools it called.
    pub tool_calls: Vec<ModelToolCall>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    pub usage: Usage,
}

/// Why a completion failed: whether asking again later may help, a kind to match on, and the
/// text a person reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// Worth retrying later (rate limit, overload, network).
    #[error("model temporarily unavailable: {text}")]
    Retryable {
        /// What failed.
        kind: ModelErrorKind,
        /// What the provider or the adapter said.
        text: String,
    },
    /// Retrying will not help (bad request, no script rule matched).
    #[error("{text}")]
    Terminal {
        /// What failed.
        kind: ModelErrorKind,
        /// What the provider or the adapter said.
        text: String,
    },
}

/// What kind of failure a model call met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ModelErrorKind {
    /// The provider asked for fewer requests (HTTP 429, a throttling error).
    RateLimited,
    /// The provider is overloaded or failing (5xx, an overloaded error in the stream).
    Unavailable,
    /// No answer within the time allowed (the first byte, a pause in the stream, the whole).
    TimedOut,
    /// The connection failed or broke off.
    Network,
    /// The request was refused as it is (400, 404, 413, 422: a schema, a prompt too long, a
    /// model that does not exist).
    Refused,
    /// The credentials are missing, cannot be read, or are refused (401, 403).
    Credentials,
    /// The answer could not be read (a malformed body or event stream).
    BadAnswer,
    /// Anything else: a scripted model with no rule that matches, a slice with no model.
    Other,
}

impl ModelError {
    /// A failure worth retrying later.
    pub fn retryable(kind: ModelErrorKind, text: impl Into<String>) -> Self {
        Self::Retryable {
            kind,
            text: text.into(),
        }
    }

    /// A failure that retrying will not mend.
    pub fn terminal(kind: ModelErrorKind, text: impl Into<String>) -> Self {
        Self::Terminal {
            kind,
            text: text.into(),
        }
    }

    /// What failed.
    pub fn kind(&self) -> ModelErrorKind {
        match self {
            Self::Retryable { kind, .. } | Self::Terminal { kind, .. } => *kind,
        }
    }

    /// What was said, without whether it may be retried.
    pub fn text(&self) -> &str {
        match self {
            Self::Retryable { text, .. } | Self::Terminal { text, .. } => text,
        }
    }

    /// True when asking again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Retryable { .. })
    }
}

/// A language model (or a script standing in for one). Implement it to bring a provider of your
/// own; with an agent file, register it with `infinity_models::CustomProviders`.
///
/// ```
/// use std::sync::Arc;
///
/// use async_trait::async_trait;
/// use infinity_agent_core::agent::AgentSpec;
/// use infinity_agent_core::history::Item;
/// use infinity_agent_core::ids::ThreadId;
/// use infinity_agent_core::model::{
///     Completion, CompletionRequest, ModelError, ModelProvider, StopReason, Usage,
/// };
/// use infinity_agent_core::runtime::{AgentSystemBuilder, Front};
///
/// /// Repeats the last message (a real provider calls its API here).
/// #[derive(Debug)]
/// struct Echo;
///
/// #[async_trait]
/// impl ModelProvider for Echo {
///     fn name(&self) -> &str {
///         "echo"
///     }
///
///     async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
///         let last = request.history.iter().rev().find_map(|entry| match &entry.item {
///             Item::Message { text, .. } => Some(text.clone()),
///             _ => None,
///         });
///         Ok(Completion {
///             text: last,
///             tool_calls: Vec::new(),
///             stop_reason: StopReason::EndTurn,
///             usage: Usage::default(),
///         })
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let system = AgentSystemBuilder::new()
///     .with_agent(AgentSpec::new("parrot", "Repeat.", Arc::new(Echo)))
///     .with_tokio_sleep_tools()
///     .build()
///     .await?;
/// let thread = ThreadId::new("p")?;
/// system.post_user_message(&thread, "polly".into()).await?;
/// system.wait_idle(None).await;
/// let history = system.view(&thread).await?;
/// assert!(matches!(&history.last().unwrap().item,
///     Item::Assistant { text: Some(text), .. } if text == "polly"));
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait ModelProvider: Send + Sync + std::fmt::Debug {
    /// A name for logs, e.g. `script:demo.yaml` or `anthropic:claude-sonnet-4-5`.
    fn name(&self) -> &str;

    /// The model's context window in tokens (compaction keeps prompts under a share of it).
    fn context_window(&self) -> u32 {
        128_000
    }

    /// What the model charges, when known: the runtime prices each completion's usage with it
    /// (a completion without prices counts as unpriced). An agent file's `prices:` overrides
    /// it ([`Priced`]).
    fn prices(&self) -> Option<Prices> {
        None
    }

    /// Runs one completion.
    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError>;

    /// Runs one completion, handing text to `on_text` as it arrives (for display only; the
    /// returned completion holds all of it). Providers that do not stream call `complete`.
    async fn complete_streaming(
        &self,
        request: CompletionRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<Completion, ModelError> {
        let _ = on_text;
        self.complete(request).await
    }
}

/// Token usage, and what it cost, of one completion or accumulated over many (a thread's, a
/// conversation's). Providers report the tokens; the runtime prices them
/// ([`Usage::priced`]).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Usage {
    /// Completions run.
    pub completions: u64,
    /// Input tokens (not counting cache reads and writes).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// What the priced completions cost.
    #[serde(default)]
    pub cost: Usd,
    /// Completions of models without known prices (not in [`Usage::cost`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unpriced: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Usage) {
        self.completions = self.completions.saturating_add(other.completions);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.cost = self.cost.saturating_add(other.cost);
        self.unpriced = self.unpriced.saturating_add(other.unpriced);
    }

    /// What was used since `before` (an earlier reading of the same totals).
    #[must_use]
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            completions: self.completions.saturating_sub(before.completions),
            input_tokens: self.input_tokens.saturating_sub(before.input_tokens),
            output_tokens: self.output_tokens.saturating_sub(before.output_tokens),
            cache_read_tokens: self
                .cache_read_tokens
                .saturating_sub(before.cache_read_tokens),
            cache_write_tokens: self
                .cache_write_tokens
                .saturating_sub(before.cache_write_tokens),
            cost: Usd::from_nanos(self.cost.nanos().saturating_sub(before.cost.nanos())),
            unpriced: self.unpriced.saturating_sub(before.unpriced),
        }
    }

    /// Every token counted: input, cache reads and writes, output.
    pub fn tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
            .saturating_add(self.output_tokens)
    }

    /// One completion's usage with its cost at `prices` (unpriced without them).
    #[must_use]
    pub fn priced(mut self, prices: Option<&Prices>) -> Self {
        self.completions = 1;
        match prices {
            Some(prices) => {
                self.cost = prices.cost(
                    self.input_tokens,
                    self.output_tokens,
                    self.cache_read_tokens,
                    self.cache_write_tokens,
                );
                self.unpriced = 0;
            }
            None => {
                self.cost = Usd::ZERO;
                self.unpriced = 1;
            }
        }
        self
    }

    /// The cost in words: `$0.0123`, with `+ N unpriced` when some completions had no prices,
    /// or `unpriced` when none had.
    pub fn cost_text(&self) -> String {
        match (self.unpriced, self.completions) {
            (0, _) => self.cost.to_string(),
            (n, all) if n >= all => "unpriced".to_owned(),
            (n, _) => format!("{} + {n} unpriced completion(s)", self.cost),
        }
    }
}

/// A model with prices given by whoever set it up (an agent file's `prices:`), in place of the
/// ones its provider knows.
#[derive(Debug)]
pub struct Priced {
    model: std::sync::Arc<dyn ModelProvider>,
    prices: Prices,
}

impl Priced {
    /// `model`, charging `prices`.
    pub fn new(model: std::sync::Arc<dyn ModelProvider>, prices: Prices) -> Self {
        Self { model, prices }
    }
}

#[async_trait]
impl ModelProvider for Priced {
    fn name(&self) -> &str {
        self.model.name()
    }

    fn context_window(&self) -> u32 {
        self.model.context_window()
    }

    fn prices(&self) -> Option<Prices> {
        Some(self.prices)
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        self.model.complete(request).await
    }

    async fn complete_streaming(
        &self,
        request: CompletionRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<Completion, ModelError> {
        self.model.complete_streaming(request, on_text).await
    }
}
