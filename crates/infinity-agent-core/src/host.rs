//! The small traits a host implements to carry inputs: the input queue and timers.
//!
//! The embedded runtime implements both with tokio; the AWS host with SQS (FIFO input queue,
//! relay queue) and EventBridge Scheduler.

use async_trait::async_trait;
use jiff::Timestamp;
use tracing::Instrument;

use crate::agent::AgentLookup;
use crate::engine::{run_slice, SliceError, SliceOutcome, SliceRequest};
use crate::ids::{InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::store::{load_view, load_view_prefix, StoreError, ThreadStore};
use crate::tools::remote::{assemble, Discovered, ToolDiscovery};

/// Why an input could not be handed to the queue or the timers.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot send input {input_id} to thread {thread_id}: {reason}")]
pub struct SendError {
    /// The input.
    pub input_id: InputId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Why.
    pub reason: String,
}

/// Puts inputs on a thread's input queue.
#[async_trait]
pub trait InputSender: Send + Sync {
    /// Enqueues `message` in the queue group `group_id` (the thread id) with deduplication key
    /// `dedup_id` (the input id).
    async fn send_to_input_queue(
        &self,
        message: &Input,
        group_id: &ThreadId,
        dedup_id: &InputId,
    ) -> Result<(), SendError>;
}

/// Delivers inputs later.
#[async_trait]
pub trait Timers: Send + Sync {
    /// Arranges for `input` to reach its thread's input queue at `due` (at once if it is past).
    async fn schedule(&self, input: Input, due: Timestamp) -> Result<(), SendError>;
}

/// Why a host could not run and commit a slice.
#[derive(Debug, thiserror::Error)]
pub enum SliceFailure {
    /// The store failed (or another writer committed first).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine failed (the model is unavailable, the agent is unknown).
    #[error(transparent)]
    Slice(#[from] SliceError),
}

impl SliceFailure {
    /// True when running the same inputs again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            SliceFailure::Store(e) => e.is_retryable(),
            SliceFailure::Slice(e) => e.is_retryable(),
        }
    }
}

/// What a host brings to every slice: its store, its agents, and how it discovers tool
/// servers' tools.
#[derive(Clone, Copy)]
pub struct HostContext<'a> {
    /// Where threads live.
    pub store: &'a dyn ThreadStore,
    /// The agents, by name.
    pub agents: &'a dyn AgentLookup,
    /// The agent of a root thread a first user message creates.
    pub default_agent: Option<&'a str>,
    /// Fetches tool servers' toolsets when a session starts (`None`: a host without a tool
    /// server client; an agent's servers then contribute no tool, and say so).
    pub discovery: Option<&'a dyn ToolDiscovery>,
}

impl std::fmt::Debug for HostContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostContext")
            .field("default_agent", &self.default_agent)
            .field("discovery", &self.discovery.is_some())
            .finish_non_exhaustive()
    }
}

/// The agent of the session these inputs start, if they create a root thread (a first user
/// message, or a delegated task).
fn starts_session<'a>(inputs: &'a [Input], default_agent: Option<&'a str>) -> Option<&'a str> {
    inputs.iter().find_map(|i| match &i.body {
        InputBody::UserMessage { .. } => default_agent.map(Some),
        InputBody::DelegatedTask { agent, .. } => Some(Some(agent.as_str())),
        InputBody::ChildSeed { .. } => Some(None),
        _ => None,
    })?
}

/// What every host does for one batch of a thread's inputs: load the thread (its record, its
/// history view, or for a new child its parent's history up to the fork), look up which inputs
/// were already processed, discover the tool servers' tools when the batch starts a session,
/// run the engine, and commit. The caller performs the committed effects
/// (`outcome.commit.effects`) and marks them done.
pub async fn run_committed_slice(
    host: &HostContext<'_>,
    thread_id: &ThreadId,
    inputs: Vec<Input>,
    now: Timestamp,
    live: Option<&crate::effect::LiveOutput<'_>>,
) -> Result<SliceOutcome, SliceFailure> {
    let HostContext {
        store,
        agents,
        default_agent,
        discovery,
    } = *host;
    let record = store.load_record(thread_id).await?;
    let session_toolset = match (&record, starts_session(&inputs, default_agent)) {
        (None, Some(name)) => match agents.agent(name) {
            Some(agent) if !agent.tool_servers.is_empty() => {
                let discovered = match discovery {
                    Some(d) => d.discover(&agent.tool_servers).await,
                    None => agent
                        .tool_servers
                        .iter()
                        .map(|s| Discovered {
                            server: s.url.clone(),
                            result: Err("this host has no tool server client".to_owned()),
                        })
                        .collect(),
                };
                Some(assemble(&agent.tools, discovered))
            }
            _ => None,
        },
        _ => None,
    };
    let view = match &record {
        Some(record) => load_view(store, record).await?,
        None => {
            let seed_parent = inputs.iter().find_map(|i| match &i.body {
                InputBody::ChildSeed { parent, .. } => Some(parent),
                _ => None,
            });
            match seed_parent {
                Some(p) => load_view_prefix(store, &p.thread_id, p.fork_at).await?,
                None => Vec::new(),
            }
        }
    };
    let ids: Vec<InputId> = inputs.iter().map(|i| i.id.clone()).collect();
    let already_processed = store.processed(thread_id, &ids).await?;
    // A child reads the conversation's notes from its root.
    let root = match &record {
        Some(r) if !r.is_root() => r.stack.first().cloned(),
        Some(_) => None,
        None => inputs.iter().find_map(|i| match &i.body {
            InputBody::ChildSeed { parent_stack, .. } => parent_stack.first().cloned(),
            _ => None,
        }),
    };
    let conversation = match root {
        Some(root) => store
            .load_record(&root)
            .await?
            .map(|r| crate::tools::internal::Conversation::of_root(&r)),
        None => None,
    };
    let span = tracing::info_span!("slice", thread = %thread_id, inputs = ?ids);
    let outcome = run_slice(SliceRequest {
        thread_id: thread_id.clone(),
        record,
        view: &view,
        inputs,
        already_processed,
        agents,
        default_agent,
        now,
        conversation,
        session_toolset,
        live,
    })
    .instrument(span)
    .await?;
    if let Some(commit) = &outcome.commit {
        store.commit(commit).await?;
    }
    Ok(outcome)
}
