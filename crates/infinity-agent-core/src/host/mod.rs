//! The host side of a slice, shared by the embedded runtime and the Lambda handler: the small
//! traits through which a host carries inputs and reaches tool servers, the one loop that drives
//! the engine ([`run_slice`]), and the one place effects are performed ([`perform_effects`]).

mod answers;
mod effects;
mod plan;
mod spans;

use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use tracing::Instrument;

pub use effects::{
    perform_effects, EffectFailure, EffectPerformer, EffectRef, Handoff, OutputError, PerformError,
};

use crate::agent::{AgentLookup, PrepareError};
use crate::effect::{LiveOutput, Notification, OutputEvent, OutputKind, ToolInvocation};
use crate::engine::{Slice, SliceError, SliceOutcome, SliceRequest, Step};
use crate::ids::{IdSource, InputId, ThreadId};
use crate::input::Input;
use crate::model::{ModelError, ModelErrorKind, ModelProvider, Streamed};
use crate::state::{Conversation, ThreadRecord};
use crate::store::{load_view_prefix, Entries, SliceState, StoreError, ThreadStore};
use crate::telemetry;
use crate::tools::servers::{apply_deadlines, assemble, Discovered, DiscoveryError, ToolDiscovery};

use plan::SlicePlan;
use spans::{slice_span, traced};

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
    /// Enqueues `message` for its thread: a queue groups it by its thread (`thread_id`, in
    /// order) and deduplicates it by its id.
    async fn send_to_input_queue(&self, message: &Input) -> Result<(), SendError>;
}

/// Delivers inputs later.
#[async_trait]
pub trait Timers: Send + Sync {
    /// Arranges for `input` to reach its thread's input queue at `due` (at once if it is past).
    async fn schedule(&self, input: Input, due: Timestamp) -> Result<(), SendError>;
}

/// Why a call could not be handed to its tool server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispatchError {
    /// The host has no way to run this tool.
    #[error("no tool server is configured to run `{0}`")]
    NoServer(String),
    /// The server refused the call, or could not be reached after retries.
    #[error("{0}")]
    Refused(String),
}

/// Runs tool calls that leave the process (tool servers) and delivers notifications to them.
#[async_trait]
pub trait ToolDispatcher: Send + Sync + std::fmt::Debug {
    /// Sends the invocation; the result comes back later as a `tool_result` input. An `Err`
    /// means it could not be delivered; the call then gets an error result.
    async fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), DispatchError>;

    /// Delivers a notification, best effort.
    async fn notify(&self, notification: &Notification);

    /// POSTs `input` (as JSON) to `url`, the forwarding URL of a thread that moved to another
    /// host. `Ok` once that host took it.
    async fn forward(&self, url: &str, input: &Input) -> Result<(), DispatchError> {
        let _ = (url, input);
        Err(DispatchError::NoServer("forwarding".to_owned()))
    }
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

pub use infinity_retry::RetryPolicy;

/// How often the embedded host asks the model again when it is temporarily unavailable, within
/// one slice (the slice is not rerun, so nothing it showed is shown twice): four attempts,
/// waiting 0.4, 0.8 and 1.6 s in between.
pub const MODEL_RETRY: RetryPolicy =
    RetryPolicy::new(4, Duration::from_millis(400), Duration::from_secs(10));

/// The time a host gives a slice (a Lambda invocation's: its deadline), and the time one
/// completion may take. Before each completion after the slice's first, the host checks that
/// the completion fits in what is left (less `reserve`, kept for the commit and the effects);
/// when it does not, the slice commits what it has and hands itself on to a next slice (a
/// `continue` input, see [`Slice::hand_off`]). Every completion's request is given the time
/// it may take: `completion`, or what is left when that is less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceBudget {
    /// When the slice must have committed and performed its effects.
    pub deadline: tokio::time::Instant,
    /// The longest one completion may take (its whole request, the stream included).
    pub completion: Duration,
    /// Kept back before the deadline for the commit and the effects.
    pub reserve: Duration,
}

impl SliceBudget {
    /// The time a completion starting now may take, `None` when none is left.
    fn completion_time(&self) -> Option<Duration> {
        let left = self
            .deadline
            .checked_duration_since(tokio::time::Instant::now())?
            .checked_sub(self.reserve)?;
        (!left.is_zero()).then(|| left.min(self.completion))
    }

    /// True when a whole completion still fits before the deadline.
    fn fits_a_completion(&self) -> bool {
        self.completion_time() == Some(self.completion)
    }
}

/// What a host brings to every slice.
#[derive(Clone, Copy)]
pub struct HostContext<'a> {
    /// Where threads live.
    pub store: &'a dyn ThreadStore,
    /// The agents, by name.
    pub agents: &'a dyn AgentLookup,
    /// The agent of a root thread a first user message creates.
    pub default_agent: Option<&'a str>,
    /// Fetches tool servers' toolsets when a conversation starts (`None`: a host without a
    /// tool server client; an agent's servers then contribute no tool, and say so).
    pub discovery: Option<&'a dyn ToolDiscovery>,
    /// Performs the committed effects.
    pub effects: &'a dyn EffectPerformer,
    /// Shows output events as the slice runs, the model's text as it streams included (`None`:
    /// output events are `output` effects, performed after the commit).
    pub live: Option<&'a LiveOutput<'a>>,
    /// Retries of a temporarily unavailable model.
    pub model_retry: RetryPolicy,
    /// The time the slice has (`None`: as long as it takes, each completion with no timeout of
    /// the host's; the model adapters keep their own).
    pub budget: Option<SliceBudget>,
    /// The host's library (knowledge), loaded before a slice whose agent has the `knowledge`
    /// category on.
    pub library: Option<&'a crate::library::Library>,
}

impl std::fmt::Debug for HostContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostContext")
            .field("default_agent", &self.default_agent)
            .field("discovery", &self.discovery.is_some())
            .field("live", &self.live.is_some())
            .field("model_retry", &self.model_retry)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// A slice that ran and committed, and how performing its effects went.
#[derive(Debug)]
pub struct SliceReport {
    /// What the engine decided (already committed).
    pub outcome: SliceOutcome,
    /// `Err` when some effect could not be performed; it stays in the outbox and is performed
    /// again later (the next slice of the thread on Lambda, the next start when embedded).
    pub effects: Result<(), PerformError>,
}

/// What every host does for one batch of a thread's inputs: load the thread (its record, its
/// history view, or for a new child its parent's history up to the fork), look up which inputs
/// were already processed, discover the tool servers' tools when the batch starts a
/// conversation, drive the engine (calling the model, streaming its text, retrying it), commit,
/// and perform the committed effects.
pub async fn run_slice(
    host: &HostContext<'_>,
    thread_id: &ThreadId,
    inputs: Vec<Input>,
    now: Timestamp,
    ids: &mut dyn IdSource,
) -> Result<SliceReport, SliceFailure> {
    let input_ids: Vec<InputId> = inputs.iter().map(|i| i.id.clone()).collect();
    let state = host.store.load_slice(thread_id, &input_ids, false).await?;
    run_loaded_slice(host, thread_id, inputs, state, now, ids).await
}

/// [`run_slice`] over what the host read already with [`ThreadStore::load_slice`] (a host that
/// performs a thread's leftover outbox first reads it in the same requests).
pub async fn run_loaded_slice(
    host: &HostContext<'_>,
    thread_id: &ThreadId,
    inputs: Vec<Input>,
    state: SliceState,
    now: Timestamp,
    ids: &mut dyn IdSource,
) -> Result<SliceReport, SliceFailure> {
    let store = host.store;
    let SliceState {
        record,
        view,
        view_start,
        processed: already_processed,
        outbox: _,
    } = state;
    // An answer that lost to another is overruled; the one that stands is applied.
    let answers::Held { inputs, overruled } =
        answers::standing_answers(store, record.as_ref(), inputs, &already_processed, now).await?;
    let plan = SlicePlan::of(record.as_ref(), &inputs, host.default_agent);
    let settled = make_ready(host, thread_id, &plan, record.as_ref()).await?;
    let discovered_toolset = match settled.discovers {
        Some(name) => discover(host, name, settled.moved_to.is_some()).await,
        None => None,
    };
    let view: Entries = match (&record, plan.fork) {
        (Some(_), _) => view,
        (None, Some(p)) => load_view_prefix(store, &p.thread_id, p.fork_at)
            .await?
            .into(),
        (None, None) => Entries::default(),
    };
    // A child reads what its conversation shares from the root.
    let conversation = match plan.root {
        Some(root) => store
            .load_record(root)
            .await?
            .map(|r| Conversation::of_root(&r)),
        None => None,
    };
    let span = slice_span(host, thread_id, settled.agent, &record, &inputs);
    let finish = async move {
        let request = SliceRequest {
            inputs,
            already_processed,
            overruled,
            default_agent: host.default_agent,
            conversation,
            discovered_toolset,
            live_output: host.live.is_some(),
            view_start,
            library: host.library,
            ..SliceRequest::new(thread_id.clone(), record, &view, host.agents, now, ids)
        };
        let outcome = match drive(host, Slice::start(request), thread_id, now).await {
            Ok(outcome) => outcome,
            Err(err) => {
                telemetry::set_error(&tracing::Span::current(), &err.to_string());
                return Err(err.into());
            }
        };
        // The view goes before the commit: a store that shares its list with it then appends
        // in place instead of on a copy.
        drop(view);
        commit_and_perform(host, thread_id, outcome).await
    };
    finish.instrument(span).await
}

/// Makes ready what the slice's plan names: the agent's version (and the one a person moves the
/// thread to), its library's shelves and the models a person chose; says which agent runs.
async fn make_ready<'a>(
    host: &HostContext<'_>,
    thread_id: &ThreadId,
    plan: &SlicePlan<'a>,
    record: Option<&ThreadRecord>,
) -> Result<plan::Settled<'a>, SliceFailure> {
    // A stored agent is read and built before the engine, which cannot wait, looks it up.
    if let Some(name) = plan.agent {
        match host.agents.prepare(name).await {
            Ok(()) => {}
            Err(PrepareError::Unavailable(why)) => return Err(SliceError::Retryable(why).into()),
            // A task delegated to it is refused by the engine, so its caller hears of it.
            Err(PrepareError::Broken(reason)) if plan.delegated => {
                tracing::warn!(thread = %thread_id, agent = name, %reason, "the delegated task's agent cannot run");
            }
            Err(PrepareError::Broken(reason)) => {
                return Err(SliceError::AgentBroken {
                    thread_id: thread_id.clone(),
                    agent: name.to_owned(),
                    reason,
                }
                .into())
            }
        }
    }
    // A person's move to another version of the agent: that version is made ready too.
    if let Some(target) = plan.move_to {
        match host.agents.prepare(target).await {
            Ok(()) => {}
            Err(PrepareError::Unavailable(why)) => return Err(SliceError::Retryable(why).into()),
            // The engine refuses the move, with a notice on the thread.
            Err(PrepareError::Broken(reason)) => {
                tracing::warn!(thread = %thread_id, agent = target, %reason, "the version a thread is moved to cannot run");
            }
        }
    }
    let settled = plan.settle(record, |target| host.agents.agent(target).is_some());
    if let (Some(library), Some(agent)) = (
        host.library,
        settled.agent.and_then(|n| host.agents.agent(n)),
    ) {
        // Tools work on the copies the host has (or say there are none); the slice goes on.
        for (category, why) in library.prepare_for(|c| agent.tools.has_category(c)).await {
            tracing::warn!(thread = %thread_id, category, %why, "a category's shelf could not be loaded");
        }
    }
    // The model a person switched the thread to (or is switching it to) is made ready too.
    if let Some(library) = host.library {
        for spec in &plan.models {
            if let Err(why) = library.prepare_model(spec).await {
                tracing::warn!(thread = %thread_id, model = spec, %why, "a thread's model cannot be made here");
            }
        }
    }
    Ok(settled)
}

/// The tools a conversation of the agent `name` takes from its tool servers (`None`: it has
/// none, and keeps what it had); a root `moved` to a version without servers has none left.
async fn discover(
    host: &HostContext<'_>,
    name: &str,
    moved: bool,
) -> Option<crate::state::Toolset> {
    let agent = host.agents.agent(name)?;
    if agent.tool_servers.is_empty() {
        return moved.then(crate::state::Toolset::default);
    }
    let discovered = match host.discovery {
        Some(d) => d.discover(&agent.tool_servers).await,
        None => agent
            .tool_servers
            .iter()
            .map(|s| Discovered {
                server: s.url.clone(),
                result: Err(DiscoveryError::NoClient),
                about: None,
            })
            .collect(),
    };
    let mut toolset = assemble(&agent.tools, discovered);
    apply_deadlines(&mut toolset, &agent.tool_servers);
    Some(toolset)
}

/// Commits what a slice decided and performs the committed effects.
async fn commit_and_perform(
    host: &HostContext<'_>,
    thread_id: &ThreadId,
    outcome: SliceOutcome,
) -> Result<SliceReport, SliceFailure> {
    let store = host.store;
    let effects = match &outcome.commit {
        Some(commit) => {
            telemetry::set(
                &tracing::Span::current(),
                "infinity.thread.version",
                i64::try_from(commit.record.version).unwrap_or(i64::MAX),
            );
            if let Err(failed) = store.commit(commit).await {
                telemetry::set_error(&tracing::Span::current(), &failed.to_string());
                return Err(failed.into());
            }
            perform_effects(
                host.effects,
                store,
                thread_id,
                &commit.effects,
                Some(commit.record.version),
            )
            .await
        }
        None => Ok(()),
    };
    if let Err(failed) = &effects {
        telemetry::set_error(&tracing::Span::current(), &failed.to_string());
    }
    Ok(SliceReport { outcome, effects })
}

/// Polls the slice to its end: shows output, runs completions (retrying a temporarily
/// unavailable model as `host.model_retry` allows, each within the time `host.budget` leaves),
/// and hands the slice on when the next completion would not fit before the deadline.
async fn drive(
    host: &HostContext<'_>,
    mut slice: Slice<'_>,
    thread_id: &ThreadId,
    now: Timestamp,
) -> Result<SliceOutcome, SliceError> {
    let model = slice.model();
    let mut attempt = 0u32;
    // Completions the model answered in this slice. A slice hands itself on only when it has
    // some to keep: one that answered none would hand on nothing, and hand on again (a loop);
    // it asks the model within the time left instead, and fails when none is.
    let mut answered = 0u32;
    loop {
        let step = slice.poll();
        let time = match (&step, host.budget) {
            (Step::Complete(_), Some(budget)) => {
                if answered > 0 && !budget.fits_a_completion() {
                    tracing::info!(thread = %thread_id, completions = answered, "the next completion does not fit before the deadline; the slice hands itself on");
                    drop(step);
                    slice.hand_off();
                    continue;
                }
                budget.completion_time()
            }
            _ => None,
        };
        // Past the deadline, asking again is no use: the slice gives up at once.
        let out_of_time = matches!(
            (&step, time, host.budget),
            (Step::Complete(_), None, Some(_))
        );
        // Not even one completion fits: nothing was done, and nothing is lost.
        if out_of_time && answered == 0 {
            return Err(SliceError::OutOfTime);
        }
        let result = match step {
            Step::Output(event) => {
                if let Some(live) = host.live {
                    live(event);
                }
                continue;
            }
            Step::Done(outcome) => return Ok(outcome),
            Step::Failed(err) => return Err(err),
            Step::Complete(request) => {
                match (&model, time, host.budget) {
                    (None, _, _) => Err(ModelError::terminal(
                        ModelErrorKind::Other,
                        "the slice has no model",
                    )),
                    // Past the deadline already: the slice's inputs come again.
                    (Some(_), None, Some(_)) => Err(ModelError::retryable(
                        ModelErrorKind::TimedOut,
                        "no time was left before the deadline for a completion",
                    )),
                    (Some(model), time, _) => {
                        let completion =
                            complete(model.as_ref(), request, host.live, thread_id, now);
                        let timed = async {
                            match time {
                                None => completion.await,
                                Some(time) => tokio::time::timeout(time, completion)
                                    .await
                                    .unwrap_or_else(|_| {
                                        Err(ModelError::retryable(
                                            ModelErrorKind::TimedOut,
                                            format!(
                                                "the model did not answer within {}s",
                                                time.as_secs_f64().round()
                                            ),
                                        ))
                                    }),
                            }
                        };
                        traced(model.as_ref(), timed).await
                    }
                }
            }
        };
        match result {
            Err(ModelError::Retryable { text: why, .. })
                if host.model_retry.allows_another(attempt + 1) && !out_of_time =>
            {
                attempt += 1;
                let delay = host.model_retry.delay(attempt, None);
                tracing::warn!(thread = %thread_id, %why, attempt, "model unavailable; asking again");
                tokio::time::sleep(delay).await;
            }
            // With a deadline, what the slice's earlier completions did is kept: the slice
            // hands itself on, and the next one asks the model again (from a fresh invocation
            // on Lambda; it fails there if the model is still away, and SQS retries later).
            Err(ModelError::Retryable { text: why, .. })
                if host.budget.is_some() && answered > 0 =>
            {
                if out_of_time {
                    tracing::info!(thread = %thread_id, completions = answered, "no time is left before the deadline; the slice commits its completions and hands itself on");
                } else {
                    tracing::warn!(thread = %thread_id, %why, "model unavailable after earlier completions; the slice commits them and hands itself on");
                }
                attempt = 0;
                slice.hand_off();
            }
            result => {
                attempt = 0;
                answered += u32::from(result.is_ok());
                slice.on_completion(result);
            }
        }
    }
}

/// Runs one completion; with live output, the model's text is shown as it streams. A completion
/// that fails after streaming some text withdraws it (`assistant_restarted`), so that what a
/// later attempt streams adds up to its text alone.
async fn complete(
    model: &dyn ModelProvider,
    request: crate::model::CompletionRequest<'_>,
    live: Option<&LiveOutput<'_>>,
    thread_id: &ThreadId,
    now: Timestamp,
) -> Result<crate::model::Completion, ModelError> {
    let Some(live) = live else {
        return model.complete(request).await;
    };
    let show = |kind| live(OutputEvent::new(thread_id.clone(), now, kind));
    let streamed = std::sync::atomic::AtomicBool::new(false);
    let sink = |piece: Streamed<'_>| match piece {
        Streamed::Text(text) => {
            streamed.store(true, std::sync::atomic::Ordering::Relaxed);
            show(OutputKind::AssistantDelta {
                text: text.to_owned(),
            });
        }
        Streamed::Restarted => {
            streamed.store(false, std::sync::atomic::Ordering::Relaxed);
            show(OutputKind::AssistantRestarted {});
        }
    };
    let result = model.complete_streaming(request, &sink).await;
    if result.is_err() && streamed.load(std::sync::atomic::Ordering::Relaxed) {
        show(OutputKind::AssistantRestarted {});
    }
    result
}
