//! The embedded runtime: the same engine, on tokio, in one process.
//!
//! Each thread with queued input gets a worker task that drains its queue in batches, runs one
//! slice per batch, commits, and performs the effects. A worker exits as soon as its queue is
//! empty, so an idle or sleeping thread holds no task; sleeping threads are entries in one timer
//! wheel ([`TokioTimers`]).
//!
//! **Delivery is at least once, processing exactly once.** An effect that sends an input stays in
//! the sender's outbox until the receiving thread has committed (or deliberately dropped) that
//! input; after a restart every outbox is performed again and receivers deduplicate by input id.
//! With a [`crate::store::FileStore`] this carries threads, children and pending timers across a
//! restart; a timer that fell due while the process was stopped fires on start.
//!
//! ```
//! use std::sync::Arc;
//! use infinity_agent_core::ids::ThreadId;
//! use infinity_agent_core::agent::AgentSpec;
//! use infinity_agent_core::runtime::{AgentSystemBuilder, WaitOutcome};
//! use infinity_agent_core::scripted::ScriptedModel;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::parse(
//!     "rules:\n  - reply: {text: 'Hello!'}\n",
//!     std::path::Path::new("hello.yaml"),
//! )?;
//! let system = AgentSystemBuilder::new()
//!     .with_agent(AgentSpec::new("greeter", "Greet people.", Arc::new(model)))
//!     .with_tokio_sleep_tools()
//!     .build()
//!     .await?;
//! let mut events = system.subscribe();
//! let thread = ThreadId::new("main")?;
//! system.send_user_message(&thread, "hi").await?;
//! assert!(matches!(system.wait_idle(None).await, WaitOutcome::Idle { .. }));
//! let mut texts = Vec::new();
//! while let Ok(event) = events.try_recv() {
//!     if let infinity_agent_core::effect::OutputKind::AssistantText { text } = event.kind {
//!         texts.push(text);
//!     }
//! }
//! assert_eq!(texts, ["Hello!"]);
//! # Ok(())
//! # }
//! ```

mod answers;
mod builder;
mod clock;
mod people;

pub use answers::{give_answer, give_tool_result, poster, PostInput};
pub use people::{check_client_call, check_schedule, client_result, Front};
mod shown;
pub use shown::{Following, Live};
mod timers;

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use tokio::sync::{mpsc, Notify};

pub use builder::{AgentSystemBuilder, BuildError};
pub use clock::Clock;
use timers::Deliver;
pub use timers::TokioTimers;

use crate::agent::AgentLookup;
use crate::catalog::AgentCatalog;
use crate::effect::{OutputEvent, OutputKind, PendingEffect};
use crate::engine::SliceError;
use crate::history::HistoryEntry;
use crate::host::{
    perform_effects, run_slice, EffectPerformer, EffectRef, Handoff, HostContext, InputSender,
    OutputError, RetryPolicy, SendError, SliceBudget, SliceFailure, Timers, ToolDispatcher,
};
use crate::ids::{EffectId, InputId, RandomIds, ThreadId};
use crate::input::Input;
use crate::library::Library;
use crate::state::ThreadRecord;
use crate::store::{load_view, StoreError, ThreadStore};
use crate::tools::servers::ToolDiscovery;

/// Why a message was not sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostError {
    /// The thread is closed; it takes no more messages.
    #[error("thread {0} is closed; it takes no more messages")]
    Closed(ThreadId),
    /// No thread has this id.
    #[error("no thread {0}")]
    Unknown(ThreadId),
    /// The message has no text (empty, or only whitespace): a model is never asked to answer
    /// nothing, and providers refuse an empty text block.
    #[error("the message to thread {0} is empty (or only whitespace); write some text")]
    EmptyMessage(ThreadId),
    /// Closing the thread would close open children the caller did not ask to close.
    #[error("thread {thread} has open children ({}); closing it closes them too: ask for the whole tree (tree: true, --tree)", children.iter().map(ThreadId::as_str).collect::<Vec<_>>().join(", "))]
    OpenChildren {
        /// The thread.
        thread: ThreadId,
        /// Its open children.
        children: Vec<ThreadId>,
    },
    /// A schedule could not be created: what is wrong with it.
    #[error("{0}")]
    BadSchedule(String),
    /// The thread has no schedule by this id.
    #[error("thread {thread} has no schedule {schedule}")]
    NoSchedule {
        /// The thread.
        thread: ThreadId,
        /// The schedule asked for.
        schedule: String,
    },
    /// A move to another agent version names something that is not an agent: what.
    #[error("{0}")]
    BadAgent(#[from] crate::catalog::AgentRefError),
    /// A thread keeps its agent: a conversation started on a thread that exists, or a move to
    /// another agent's version (what it runs, and what to do instead).
    #[error("{0}")]
    KeepsAgent(String),
    /// A move to an agent version this host does not have.
    #[error("{0}")]
    NoAgent(String),
    /// A model a thread cannot switch to: not listed, or one this host cannot make (an unknown
    /// provider, a missing key); `why` says which.
    #[error("{}", bad_model(spec, why))]
    BadModel {
        /// The model asked for (`PROVIDER:MODEL`).
        spec: String,
        /// Why it cannot be used.
        why: crate::library::ModelSourceError,
    },
    /// A budget that sets nothing, or a zero.
    #[error("{0}")]
    BadBudget(#[from] crate::cost::BudgetError),
    /// The thread is busy (a call it made has no result yet) and the message's policy, or its
    /// agent's `while_busy:`, is `reject`.
    #[error("thread {0} is busy (a call it made has no result yet) and refuses messages until it is done (while_busy: reject); send it again later, or with another policy (move_on, queue, interrupt)")]
    Busy(ThreadId),
    /// A client tool's result for a call that does not wait for one from the application: why
    /// (`reason`), and the same for a person (`text`, naming the call).
    #[error("{text}")]
    NoClientCall {
        /// Why the call takes no result from the application.
        reason: ClientCallRefusal,
        /// What a person reads.
        text: String,
    },
    /// The call was answered already: the first answer stands (`same`: it says the same as
    /// this one), and this one was not taken.
    #[error("{standing}{}", if *same { " (the same answer as this one, which stands)" } else { "; this answer was not taken" })]
    Answered {
        /// The answer that stands.
        standing: Box<crate::input::Answer>,
        /// Whether it says the same as the refused one.
        same: bool,
    },
    /// An answer its recipient (a tool server's `response_url`) did not take: why. It was not
    /// kept, and the call may be answered again.
    #[error("{0}")]
    Undelivered(String),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The input could not be handed to its thread's queue (it was not sent): why.
    #[error("the input could not be queued: {0}")]
    Unavailable(String),
}

/// Why a client tool's result was refused ([`PostError::NoClientCall`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientCallRefusal {
    /// The call waits for a person's approval and has not run yet.
    AwaitsApproval,
    /// The call is not a client tool's: its result comes from whoever runs that tool.
    NotClientTool,
    /// No such call waits for a result: answered, cancelled, past its deadline, or never was.
    NotWaiting,
}

/// A refused model in words: the list's refusal names the spec already.
fn bad_model(spec: &str, why: &crate::library::ModelSourceError) -> String {
    match why {
        crate::library::ModelSourceError::NotAllowed(text) => text.clone(),
        other => format!("cannot use the model `{spec}`: {other}"),
    }
}

/// How [`AgentSystem::wait_idle`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Nothing is queued or running, and no timer falls due before the deadline.
    Idle {
        /// The next timer, if any (due after the deadline).
        next_timer: Option<Timestamp>,
    },
    /// The deadline passed with work still queued, running, or due.
    TimedOut,
}

/// A running embedded runtime. Cheap to clone.
#[derive(Clone)]
pub struct AgentSystem {
    inner: Arc<Inner>,
}

impl fmt::Debug for AgentSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentSystem")
            .field("store", &self.inner.store)
            .field("in_flight", &self.inner.in_flight.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

impl AgentSystem {
    /// Puts an input on its thread's queue as it is, without keeping it in the store's inbox:
    /// for inputs whose sender keeps them until their thread has handled them (an outbox, a
    /// test). An input from outside (a person, a tool server, a remote machine) goes through
    /// [`AgentSystem::accept`], which makes it durable first.
    pub fn send(&self, input: Input) {
        self.inner.route(input);
    }

    /// Makes `input` durable in the store's inbox, then puts it on its thread's queue: once this
    /// returns, a crash before the thread commits the input loses nothing (the inbox is replayed
    /// when the runtime starts again, and the thread's markers drop an input it had committed).
    /// Every front door acknowledges an input only after this returned.
    pub async fn accept(&self, input: Input) -> Result<InputId, PostError> {
        let id = input.id.clone();
        self.inner.store.accept(&input).await?;
        self.inner.route(input);
        Ok(id)
    }

    /// Sends a user message to `thread_id` (creating the thread with the default agent if it
    /// does not exist) and returns the input's id once the message is durable (see
    /// [`AgentSystem::accept`]).
    pub async fn send_user_message(
        &self,
        thread_id: &ThreadId,
        text: impl Into<String>,
    ) -> Result<InputId, PostError> {
        let text = text.into();
        if crate::text::is_blank(&text) {
            return Err(PostError::EmptyMessage(thread_id.clone()));
        }
        self.accept(Input::user_message(thread_id.clone(), text))
            .await
    }

    /// The threads whose inputs found no time left before the runtime's deadline (see
    /// [`AgentSystemBuilder::with_deadline`]), each with those inputs: nothing of them ran, and
    /// a store that keeps an inbox has them for the next start.
    pub fn out_of_time(&self) -> Vec<(ThreadId, Vec<InputId>)> {
        let mut stopped: Vec<_> = lock(&self.inner.out_of_time)
            .iter()
            .map(|(thread, inputs)| (thread.clone(), inputs.clone()))
            .collect();
        stopped.sort();
        stopped
    }

    /// A stream of every output event from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<OutputEvent> {
        lock(&self.inner.outlet).subscribe()
    }

    /// Every output event from now on, and what `thread_id`'s running slice showed before (its
    /// events not committed yet, the reply it is streaming): with the store's
    /// [`events_after`](crate::store::ThreadStore::events_after), a client attaching now
    /// misses nothing.
    pub fn follow(&self, thread_id: &ThreadId) -> Following {
        lock(&self.inner.outlet).follow(thread_id)
    }

    /// Waits until nothing is queued or running and no timer is due before `deadline` (a tokio
    /// instant; `None` waits for every timer).
    pub async fn wait_idle(&self, deadline: Option<tokio::time::Instant>) -> WaitOutcome {
        let inner = &self.inner;
        loop {
            let notified = inner.activity.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let in_flight = || inner.in_flight.load(Ordering::SeqCst) > 0;
            let (busy, next_timer) = match &inner.tokio_timers {
                Some(timers) => timers.idle_snapshot(in_flight),
                None => (in_flight(), None),
            };
            let next_at = next_timer.map(|due| inner.clock.instant_at(due));
            if !busy {
                match (next_at, deadline) {
                    (None, _) => return WaitOutcome::Idle { next_timer: None },
                    (Some(at), Some(d)) if at > d => return WaitOutcome::Idle { next_timer },
                    _ => {}
                }
            }
            let far = tokio::time::Instant::now() + Duration::from_secs(86_400 * 365);
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline.unwrap_or(far)) => return WaitOutcome::TimedOut,
                _ = tokio::time::sleep_until(next_at.unwrap_or(far)) => {}
            }
        }
    }

    /// A thread's record.
    pub async fn record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        self.inner.store.load_record(thread_id).await
    }

    /// A thread's history as its model sees it (inherited entries, then its own).
    pub async fn view(&self, thread_id: &ThreadId) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        match self.inner.store.load_record(thread_id).await? {
            Some(record) => load_view(self.inner.store.as_ref(), &record).await,
            None => Ok(Vec::new()),
        }
    }

    /// True when the system runs an agent by this name: a registered one, or a stored version
    /// it has read already.
    pub fn has_agent(&self, name: &str) -> bool {
        self.inner.agents.agent(name).is_some()
    }

    /// The catalog of stored agents, when the system has one (see
    /// [`AgentSystemBuilder::with_catalog`]).
    pub fn catalog(&self) -> Option<&Arc<dyn AgentCatalog>> {
        self.inner.catalog.as_ref()
    }

    /// The library (knowledge), when the system keeps one.
    pub fn library(&self) -> Option<&Arc<Library>> {
        self.inner.library.as_ref()
    }

    /// The agent of root threads a first user message creates.
    pub fn default_agent(&self) -> &str {
        &self.inner.default_agent
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn ThreadStore> {
        &self.inner.store
    }

    /// The runtime's clock.
    pub fn clock(&self) -> Clock {
        self.inner.clock
    }

    /// Performs effects committed outside a slice (a conversation's move commits forwarded inputs,
    /// timers armed again and nudges): as after a slice, those not performed stay in the outbox.
    /// `commit_version`: the commit's version when `effects` are all of its effects.
    pub async fn perform(
        &self,
        thread_id: &ThreadId,
        effects: &[PendingEffect],
        commit_version: Option<u64>,
    ) -> Result<(), crate::host::PerformError> {
        perform_effects(
            self.inner.as_ref(),
            self.inner.store.as_ref(),
            thread_id,
            effects,
            commit_version,
        )
        .await
    }

    /// The tokio timers, when the system uses them.
    pub fn timers(&self) -> Option<&Arc<TokioTimers>> {
        self.inner.tokio_timers.as_ref()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Inner {
    this: Weak<Inner>,
    /// Workers are spawned here, so inputs may be sent from any thread.
    runtime: tokio::runtime::Handle,
    store: Arc<dyn ThreadStore>,
    agents: Arc<dyn AgentLookup>,
    catalog: Option<Arc<dyn AgentCatalog>>,
    library: Option<Arc<Library>>,
    default_agent: String,
    timers: Arc<dyn Timers>,
    tokio_timers: Option<Arc<TokioTimers>>,
    dispatcher: Option<Arc<dyn ToolDispatcher>>,
    discovery: Option<Arc<dyn ToolDiscovery>>,
    clock: Clock,
    /// The time slices have (a run's deadline), if any.
    budget: Option<SliceBudget>,
    /// The queue of each thread that has a worker.
    workers: Mutex<HashMap<ThreadId, mpsc::UnboundedSender<Input>>>,
    /// Inputs sent by an outbox effect, to be marked done once the receiver handled them.
    acks: Mutex<HashMap<InputId, (ThreadId, EffectId)>>,
    outlet: Mutex<shown::Outlet>,
    /// Inputs queued or being processed.
    in_flight: AtomicUsize,
    activity: Notify,
    /// The inputs of slices that found no time left before the deadline, by thread.
    out_of_time: Mutex<HashMap<ThreadId, Vec<InputId>>>,
}

/// How often a slice is tried when the store asks for a retry (a conflict, an outage): five
/// attempts, waiting 0.4, 0.8, 1.6 and 3.2 s in between.
const SLICE_RETRY: RetryPolicy =
    RetryPolicy::new(5, Duration::from_millis(400), Duration::from_secs(10));

/// The embedded runtime as an input queue, for code outside it that delivers inputs (the RAP
/// callback receiver): each input is made durable before the call returns
/// ([`AgentSystem::accept`]).
#[async_trait]
impl InputSender for AgentSystem {
    async fn send_to_input_queue(&self, message: &Input) -> Result<(), SendError> {
        let refused = |reason: String| SendError {
            input_id: message.id.clone(),
            thread_id: message.thread_id.clone(),
            reason,
        };
        self.accept(message.clone())
            .await
            .map(|_| ())
            .map_err(|e| refused(e.to_string()))
    }
}

impl Deliver for Inner {
    fn deliver(&self, input: Input, ack: Option<(ThreadId, EffectId)>) {
        if let Some(ack) = ack {
            lock(&self.acks).insert(input.id.clone(), ack);
        }
        self.route(input);
    }
}

impl Inner {
    fn route(&self, input: Input) {
        let Some(this) = self.this.upgrade() else {
            return;
        };
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let mut workers = lock(&self.workers);
        let input = match workers.get(&input.thread_id) {
            Some(tx) => match tx.send(input) {
                Ok(()) => return,
                Err(mpsc::error::SendError(input)) => input,
            },
            None => input,
        };
        let thread_id = input.thread_id.clone();
        let (tx, rx) = mpsc::unbounded_channel();
        // The receiver is alive: it is moved into the worker below.
        let _ = tx.send(input);
        workers.insert(thread_id.clone(), tx);
        self.runtime
            .spawn(async move { this.worker(thread_id, rx).await });
    }

    async fn worker(self: Arc<Self>, thread_id: ThreadId, mut rx: mpsc::UnboundedReceiver<Input>) {
        loop {
            let mut batch = Vec::new();
            while let Ok(input) = rx.try_recv() {
                batch.push(input);
            }
            if batch.is_empty() {
                let mut workers = lock(&self.workers);
                match rx.try_recv() {
                    Ok(input) => batch.push(input),
                    Err(_) => {
                        workers.remove(&thread_id);
                        return;
                    }
                }
            }
            let n = batch.len();
            self.run_batch(&thread_id, batch).await;
            self.in_flight.fetch_sub(n, Ordering::SeqCst);
            self.activity.notify_waiters();
            // A thread that keeps itself busy (its own results, a tight loop of sends) must not
            // hold a runtime thread for ever: a memory store never makes a slice wait, so without
            // this the other threads, the timers and `run --timeout` could starve. (Only then: a
            // worker with nothing left exits at once, releasing what it holds.)
            if !rx.is_empty() {
                tokio::task::yield_now().await;
            }
        }
    }

    async fn run_batch(self: &Arc<Self>, thread_id: &ThreadId, inputs: Vec<Input>) {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self.slice(thread_id, inputs.clone()).await;
            self.slice_ended(thread_id, result.is_ok());
            match result {
                Ok(()) => return,
                // The model was already asked again within the slice; a store conflict or
                // outage is worth running the slice again.
                Err(SliceFailure::Store(err))
                    if err.is_retryable() && SLICE_RETRY.allows_another(attempt) =>
                {
                    let backoff = SLICE_RETRY.delay(attempt, None);
                    tracing::warn!(thread = %thread_id, %err, attempt, "slice failed; retrying");
                    tokio::time::sleep(backoff).await;
                }
                // Past the deadline (`run --timeout`): nothing ran, and the inputs stay in the
                // store's inbox for the next start.
                Err(SliceFailure::Slice(SliceError::OutOfTime)) => {
                    tracing::info!(thread = %thread_id, "no time left before the deadline; the inputs wait for the next start");
                    lock(&self.out_of_time)
                        .entry(thread_id.clone())
                        .or_default()
                        .extend(inputs.into_iter().map(|i| i.id));
                    return;
                }
                Err(err) => {
                    let ids: Vec<&str> = inputs.iter().map(|i| i.id.as_str()).collect();
                    let text = format!(
                        "slice failed after {attempt} attempt(s): {err}; inputs [{}] were not \
                         processed",
                        ids.join(", ")
                    );
                    tracing::error!(thread = %thread_id, %text);
                    self.publish(OutputEvent::new(
                        thread_id.clone(),
                        self.clock.now(),
                        OutputKind::Error { text },
                    ));
                    return;
                }
            }
        }
    }

    async fn slice(
        self: &Arc<Self>,
        thread_id: &ThreadId,
        inputs: Vec<Input>,
    ) -> Result<(), SliceFailure> {
        let ids: Vec<InputId> = inputs.iter().map(|i| i.id.clone()).collect();
        // Output is shown as the slice runs (streamed text included), not after the commit.
        let live = |event: OutputEvent| self.publish(event);
        let host = HostContext {
            store: self.store.as_ref(),
            agents: self.agents.as_ref(),
            default_agent: Some(&self.default_agent),
            discovery: self.discovery.as_deref(),
            effects: self.as_ref(),
            live: Some(&live),
            model_retry: crate::host::MODEL_RETRY,
            budget: self.budget,
            library: self.library.as_deref(),
        };
        // Boxed: the slice's state machine is large, and a worker's future is allocated when the
        // worker is spawned, long before it runs; inline, a thousand queued workers held a
        // thousand of them and fragmented the heap (twice the resident memory per idle thread).
        let mut fresh_ids = RandomIds;
        let slice = run_slice(&host, thread_id, inputs, self.clock.now(), &mut fresh_ids);
        let report = Box::pin(slice).await?;
        self.ack(&ids).await;
        // Handled (committed, or dropped with a reason): the inbox need not keep them. Should
        // this fail, they are replayed at the next start and dropped there as processed.
        if let Err(err) = self.store.release(&ids).await {
            tracing::warn!(thread = %thread_id, %err, "could not release handled inputs from the inbox");
        }
        if let Err(err) = report.effects {
            tracing::warn!(%err, "effects not all performed; they stay in the outbox");
        }
        Ok(())
    }

    /// Marks done the outbox effects that sent these (now handled) inputs.
    async fn ack(&self, ids: &[InputId]) {
        let done: Vec<(ThreadId, EffectId)> = {
            let mut acks = lock(&self.acks);
            ids.iter().filter_map(|id| acks.remove(id)).collect()
        };
        for (thread_id, effect_id) in done {
            if let Err(err) = self.store.complete_effects(&thread_id, &[effect_id]).await {
                tracing::warn!(thread = %thread_id, %err, "could not mark an effect done; it will be performed again");
            }
        }
    }

    /// Marks `from` done once the receiving thread has committed `input`.
    fn await_ack(&self, input: &Input, from: &EffectRef) {
        lock(&self.acks).insert(
            input.id.clone(),
            (from.thread_id.clone(), from.effect_id.clone()),
        );
    }

    fn publish(&self, event: OutputEvent) {
        lock(&self.outlet).publish(event);
    }

    /// The thread's slice ended, `committed` or not: what it showed is the store's now, or is
    /// withdrawn.
    fn slice_ended(&self, thread_id: &ThreadId, committed: bool) {
        let withdrawn = lock(&self.outlet).slice_ended(thread_id, committed, self.clock.now());
        if let Some(event) = withdrawn {
            self.publish(event);
        }
    }
}

/// Effects on tokio: inputs go to the threads' in-memory queues and timers, and stay in the
/// sender's outbox until the receiver has committed them.
#[async_trait]
impl EffectPerformer for Inner {
    async fn send(&self, input: &Input, from: &EffectRef) -> Result<Handoff, SendError> {
        self.await_ack(input, from);
        self.route(input.clone());
        Ok(Handoff::AwaitsReceiver)
    }

    async fn send_at(
        &self,
        input: &Input,
        due: Timestamp,
        from: &EffectRef,
    ) -> Result<Handoff, SendError> {
        if let Some(timers) = &self.tokio_timers {
            // The wheel keeps the effect to mark done with the input, and hands both over when
            // it is due: a sleeping thread costs its timer entry only.
            let ack = (from.thread_id.clone(), from.effect_id.clone());
            timers.schedule_acked(input.clone(), due, Some(ack))?;
            return Ok(Handoff::AwaitsReceiver);
        }
        self.await_ack(input, from);
        self.timers.schedule(input.clone(), due).await?;
        Ok(Handoff::AwaitsReceiver)
    }

    fn tool_dispatcher(&self) -> Option<&dyn ToolDispatcher> {
        self.dispatcher.as_deref()
    }

    fn library(&self) -> Option<&Library> {
        self.library.as_deref()
    }

    async fn output(&self, events: &[&OutputEvent]) -> Result<(), OutputError> {
        let mut outlet = lock(&self.outlet);
        for event in events {
            outlet.publish_committed((*event).clone());
        }
        Ok(())
    }
}
