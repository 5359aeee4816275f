//! The slice engine: a synchronous state machine that a host drives (sans-IO).
//!
//! A slice takes one thread's new inputs, runs model completions (looping back inline for
//! synchronous tools) and ends with what to commit. The engine does no IO of its own: it reads no
//! clock (`now` comes with the request), mints no random id (they come from the request's
//! [`IdSource`]) and never awaits. The host starts a [`Slice`], then polls it:
//!
//! - [`Step::Output`]: show this event now (only when the request asked for live output;
//!   otherwise output events become `output` effects, performed after the commit);
//! - [`Step::Complete`]: run this completion and hand the result to [`Slice::on_completion`]
//!   (polling again before that hands out the same request, so a host may retry it);
//! - [`Step::Done`]: the slice is over; commit [`SliceOutcome::commit`] atomically, then
//!   perform its effects;
//! - [`Step::Failed`]: nothing may be committed; run the same inputs again later if the error
//!   is retryable.
//!
//! ```
//! use std::collections::{HashMap, HashSet};
//! use std::sync::Arc;
//! use infinity_agent_core::agent::{Agent, AgentLookup};
//! use infinity_agent_core::engine::{Slice, SliceRequest, Step};
//! use infinity_agent_core::ids::{SeededIds, ThreadId};
//! use infinity_agent_core::input::Input;
//! use infinity_agent_core::model::{Completion, StopReason, Usage};
//! use infinity_agent_core::scripted::ScriptedModel;
//! use infinity_agent_core::tools::ToolRegistry;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::parse("rules: [{reply: {text: unused}}]", "s.yaml".as_ref())?;
//! let agent = Agent::new("helper", "Be brief.", Arc::new(model), ToolRegistry::with_builtins());
//! let agents: HashMap<String, Arc<Agent>> = [("helper".to_owned(), Arc::new(agent))].into();
//! let thread = ThreadId::new("main")?;
//! let mut ids = SeededIds::new(1);
//! let mut slice = Slice::start(SliceRequest {
//!     inputs: vec![Input::user_message(thread.clone(), "hi")],
//!     default_agent: Some("helper"),
//!     ..SliceRequest::new(thread, None, &[], &agents, "2026-01-01T00:00:00Z".parse()?, &mut ids)
//! });
//! let outcome = loop {
//!     match slice.poll() {
//!         Step::Output(event) => println!("{event:?}"),
//!         // The host would call the model here; this example answers by hand.
//!         Step::Complete(_request) => slice.on_completion(Ok(Completion {
//!             text: Some("Hello!".into()),
//!             tool_calls: vec![],
//!             stop_reason: StopReason::EndTurn,
//!             usage: Usage::default(),
//!         })),
//!         Step::Done(outcome) => break outcome,
//!         Step::Failed(err) => return Err(err.into()),
//!     }
//! };
//! let commit = outcome.commit.expect("a new thread to commit");
//! assert_eq!(commit.new_entries.len(), 2); // the message and the reply
//! # Ok(())
//! # }
//! ```
//!
//! The work is split by job, a file each: `admit` (deduplication, thread creation), `inputs` (one
//! function per input kind), `messages` (people's and parents' messages, while the thread is
//! busy too), `approvals` (calls that wait for a person's yes, and every question's answer),
//! `schedules` (a recurring schedule's occurrences), `filters` (a subscription's `wake_if`),
//! `limits` (the limits that hold across slices), `draft` (the `Draft`, the thread as the slice
//! changes it: its state in parts, and what it commits), `timeline` (appending entries, holding
//! and injecting events), `compaction`, and `calls` (the completion loop and tool calls);
//! `tests` (and `tests/`) feed it canned completions.

mod admit;
mod approvals;
pub(crate) use admit::held_inputs;
mod calls;
mod compaction;
mod draft;
mod filters;
mod inputs;
mod limits;
mod messages;
mod schedules;
mod timeline;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use jiff::Timestamp;

use crate::agent::AgentLookup;
use crate::commit::Commit;
use crate::effect::{OutputEvent, PendingEffect};
use crate::history::HistoryEntry;
use crate::ids::{IdSource, InputId, ThreadId};
use crate::input::Input;
use crate::model::{Completion, CompletionRequest, ModelError};
use crate::state::{Conversation, Toolset};

use draft::Draft;
pub use inputs::DropReason;

/// Everything a slice starts from.
pub struct SliceRequest<'a> {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its record, or `None` if the thread does not exist yet.
    pub record: Option<crate::state::ThreadRecord>,
    /// Its history view: inherited entries, then its own. For a thread that does not exist yet
    /// and whose inputs hold a child seed, the parent's history up to the fork point. Borrowed:
    /// the engine reads it and keeps its own additions apart, so a slice costs the same at any
    /// history length.
    pub view: &'a [Arc<HistoryEntry>],
    /// The index in the whole history of `view`'s first entry: a compacted thread's slice needs
    /// nothing older than its newest summary's cut ([`crate::state::ThreadRecord::view_start`]),
    /// so the host may load only the entries from there. 0: the view is the whole history.
    pub view_start: u64,
    /// New inputs, in queue order.
    pub inputs: Vec<Input>,
    /// Which of these inputs' ids the thread has already processed (from the store).
    pub already_processed: HashSet<InputId>,
    /// Inputs that answer a call another answer stands for (the host asked its store: see
    /// [`crate::input::Answer`]), with that answer: dropped, marked processed.
    pub overruled: HashMap<InputId, String>,
    /// Agents by name.
    pub agents: &'a dyn AgentLookup,
    /// The agent for a root thread created by a first user message.
    pub default_agent: Option<&'a str>,
    /// The slice's clock.
    pub now: Timestamp,
    /// Where the slice's fresh ids come from.
    pub ids: &'a mut dyn IdSource,
    /// For a child thread: what the conversation's threads share, as the root thread holds it
    /// (the host reads it from the root's record). Ignored for a root thread, which holds its own.
    pub conversation: Option<Conversation>,
    /// For a slice that starts a conversation (creates a root thread): the tools its agent's
    /// tool servers offer, discovered by the host. Ignored otherwise.
    pub discovered_toolset: Option<Toolset>,
    /// True: output events are handed out as [`Step::Output`] as they happen. False: they
    /// become `output` effects, performed after the commit.
    pub live_output: bool,
    /// The host's library (knowledge), for the tools that read it; `None`: it keeps none.
    pub library: Option<&'a crate::library::Library>,
}

impl<'a> SliceRequest<'a> {
    /// A request with no inputs, no default agent, nothing shared, and output as effects.
    pub fn new(
        thread_id: ThreadId,
        record: Option<crate::state::ThreadRecord>,
        view: &'a [Arc<HistoryEntry>],
        agents: &'a dyn AgentLookup,
        now: Timestamp,
        ids: &'a mut dyn IdSource,
    ) -> Self {
        Self {
            thread_id,
            record,
            view,
            view_start: 0,
            inputs: Vec::new(),
            already_processed: HashSet::new(),
            overruled: HashMap::new(),
            agents,
            default_agent: None,
            now,
            ids,
            conversation: None,
            discovered_toolset: None,
            live_output: false,
            library: None,
        }
    }
}

impl std::fmt::Debug for SliceRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SliceRequest")
            .field("thread_id", &self.thread_id)
            .field("inputs", &self.inputs.len())
            .finish_non_exhaustive()
    }
}

/// An input the slice did not act on, and why. Dropping is not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedInput {
    /// The input.
    pub input_id: InputId,
    /// Its kind.
    pub kind: &'static str,
    /// Why it was dropped.
    pub reason: DropReason,
}

/// The result of a slice.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceOutcome {
    /// What to commit; `None` when no input was fresh (every one a duplicate, or for a thread
    /// that does not exist). A commit may change nothing but the processed markers.
    pub commit: Option<Commit>,
    /// Inputs that were dropped.
    pub dropped: Vec<DroppedInput>,
    /// Completions the slice ran.
    pub completions: u32,
}

/// Why a slice could not finish. Nothing of it may be committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SliceError {
    /// The model is temporarily unavailable; run the slice again later with the same inputs.
    #[error("retry later: {0}")]
    Retryable(String),
    /// The thread's agent is not known to this host.
    #[error("thread {thread_id} runs agent `{agent}`, which this host does not have")]
    UnknownAgent {
        /// The thread.
        thread_id: ThreadId,
        /// The agent.
        agent: String,
    },
    /// The thread's agent is stored but cannot run (see [`crate::agent::PrepareError::Broken`]).
    #[error("thread {thread_id} runs agent `{agent}`, which cannot run here: {reason}")]
    AgentBroken {
        /// The thread.
        thread_id: ThreadId,
        /// The agent.
        agent: String,
        /// Why.
        reason: String,
    },
    /// The slice was polled after it ended (a bug in the host).
    #[error("the slice already ended")]
    AlreadyEnded,
    /// The host's deadline left no time for the slice's first completion (a Lambda invocation
    /// about to end, `infinity run --timeout`): nothing happened, and the same inputs run later.
    #[error("no time was left before the host's deadline for a completion; the inputs wait")]
    OutOfTime,
}

impl SliceError {
    /// True when running the same slice again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, SliceError::Retryable(_) | SliceError::OutOfTime)
    }
}

/// What the host does next for a slice.
// `Done` is the large one and comes once per slice; boxing it would cost an allocation per slice
// to save a few hundred bytes of stack.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Step<'s> {
    /// Show this event now.
    Output(OutputEvent),
    /// Run this completion and hand its result to [`Slice::on_completion`].
    Complete(CompletionRequest<'s>),
    /// The slice is over: commit, then perform the effects.
    Done(SliceOutcome),
    /// The slice failed; nothing may be committed.
    Failed(SliceError),
}

/// What a completion the slice asked for is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// The model's next turn.
    Turn,
    /// A summary of the older history (compaction).
    Summary,
}

/// Where the slice is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Deciding what comes next.
    Run,
    /// A completion is owed.
    Owe(Purpose),
}

/// One slice of one thread. See the module docs.
pub struct Slice<'a> {
    /// The thread as the slice changes it; `None` when the slice never began or has ended.
    draft: Option<Draft<'a>>,
    phase: Phase,
    /// Output events to hand out before anything else.
    outputs: VecDeque<OutputEvent>,
    dropped: Vec<DroppedInput>,
    /// How the slice ended, handed out once the outputs before it are.
    end: Option<Result<SliceOutcome, SliceError>>,
}

impl std::fmt::Debug for Slice<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slice")
            .field("phase", &self.phase)
            .field("outputs", &self.outputs.len())
            .field("ended", &self.draft.is_none())
            .finish_non_exhaustive()
    }
}

impl<'a> Slice<'a> {
    /// Admits the request's inputs (deduplicated; the thread created if they create it) and
    /// applies them. Nothing is asked of the model yet.
    pub fn start(request: SliceRequest<'a>) -> Self {
        let mut slice = Self {
            draft: None,
            phase: Phase::Run,
            outputs: VecDeque::new(),
            dropped: Vec::new(),
            end: None,
        };
        match admit::admit(request, &mut slice.dropped) {
            Ok(admit::Admitted::Run(mut draft, inputs, overruled)) => {
                draft.apply_all(inputs, &overruled, &mut slice.dropped);
                slice.draft = Some(draft);
            }
            Ok(admit::Admitted::Nothing) => {
                slice.end = Some(Ok(SliceOutcome {
                    commit: None,
                    dropped: std::mem::take(&mut slice.dropped),
                    completions: 0,
                }));
            }
            Ok(admit::Admitted::Refused(commit)) => {
                slice.end = Some(Ok(SliceOutcome {
                    commit: Some(*commit),
                    dropped: std::mem::take(&mut slice.dropped),
                    completions: 0,
                }));
            }
            Err(err) => slice.end = Some(Err(err)),
        }
        slice
    }

    /// What the host does next.
    pub fn poll(&mut self) -> Step<'_> {
        let purpose = loop {
            if let Some(event) = self.next_output() {
                return Step::Output(event);
            }
            if let Some(end) = self.end.take() {
                return match end {
                    Ok(outcome) => Step::Done(outcome),
                    Err(err) => Step::Failed(err),
                };
            }
            let Some(draft) = self.draft.as_mut() else {
                return Step::Failed(SliceError::AlreadyEnded);
            };
            match self.phase {
                Phase::Owe(purpose) => break purpose,
                Phase::Run => match draft.next() {
                    Some(purpose) => self.phase = Phase::Owe(purpose),
                    None => self.finish(),
                },
            }
        };
        match &self.draft {
            Some(draft) => Step::Complete(draft.request(purpose)),
            None => Step::Failed(SliceError::AlreadyEnded),
        }
    }

    /// Ends the slice before the completion it owes, because the host has no time left for it
    /// (a Lambda invocation near its deadline): what the slice did is committed, with a
    /// `continue` input to the thread itself among its effects, and the next slice asks the
    /// model. Does nothing unless a completion is owed.
    pub fn hand_off(&mut self) {
        let (Phase::Owe(_), Some(draft)) = (self.phase, self.draft.as_mut()) else {
            return;
        };
        self.phase = Phase::Run;
        draft.hand_off();
        self.finish();
    }

    /// The model that answers this slice's completions (`None` when the slice never began).
    pub fn model(&self) -> Option<Arc<dyn crate::model::ModelProvider>> {
        self.draft.as_ref().map(|d| Arc::clone(d.equipment.model()))
    }

    /// Hands the slice the result of the completion it asked for. A retryable model error ends
    /// the slice with [`SliceError::Retryable`] (the host retries the completion first, if it
    /// wants to, by polling again instead); a terminal one is recorded on the thread.
    pub fn on_completion(&mut self, result: Result<Completion, ModelError>) {
        let (Phase::Owe(purpose), Some(draft)) = (self.phase, self.draft.as_mut()) else {
            tracing::warn!("a completion arrived that the slice did not ask for; ignored");
            return;
        };
        self.phase = Phase::Run;
        match (purpose, result) {
            (_, Err(ModelError::Retryable { text: why, .. })) => {
                self.draft = None;
                self.outputs.clear();
                self.end = Some(Err(SliceError::Retryable(why)));
            }
            (Purpose::Summary, result) => draft.on_summary(result),
            (Purpose::Turn, Ok(completion)) => draft.on_turn(completion),
            (Purpose::Turn, Err(ModelError::Terminal { text: why, .. })) => {
                draft.on_model_error(&why)
            }
        }
    }

    fn next_output(&mut self) -> Option<OutputEvent> {
        if let Some(draft) = self.draft.as_mut() {
            self.outputs.extend(draft.outbox.take_live());
        }
        self.outputs.pop_front()
    }

    /// Ends the slice: what to commit, if anything changed.
    fn finish(&mut self) {
        let Some(draft) = self.draft.take() else {
            return;
        };
        let (commit, completions, outputs) = draft.into_commit();
        self.outputs.extend(outputs);
        self.end = Some(Ok(SliceOutcome {
            commit,
            dropped: std::mem::take(&mut self.dropped),
            completions,
        }));
    }
}

/// Gives each effect its outbox id, in order.
fn with_ids(effects: Vec<crate::effect::Effect>, ids: &mut dyn IdSource) -> Vec<PendingEffect> {
    effects
        .into_iter()
        .map(|effect| PendingEffect {
            id: ids.effect_id(),
            effect,
        })
        .collect()
}
