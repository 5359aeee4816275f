//! The simulated world: queues, timers and a tool server as values, a host that performs the
//! engine's effects into them (and crashes on cue), and a store that injects conflicts and
//! remembers every input it ever marked processed.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::{
    Notification, OutputEvent, OutputKind, PendingEffect, ToolInvocation,
};
use infinity_agent_core::history::HistoryEntry;
use infinity_agent_core::host::{
    DispatchError, EffectPerformer, EffectRef, Handoff, OutputError, SendError,
};
use infinity_agent_core::ids::{CallId, EffectId, InputId, ThreadId};
use infinity_agent_core::input::Answer as StandingAnswer;
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{MemoryStore, StoreError, ThreadStore};
use jiff::{SignedDuration, Timestamp};

use crate::simulation::rng::Rng;

/// How a tool server treats a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// One result.
    Once,
    /// The same callback delivered twice (a retry after a lost acknowledgement).
    Twice,
    /// A second, different result for the same call (a confused server).
    TwiceDifferent,
    /// A subscription: a result, then events.
    Subscribe { associative: bool, events: u32 },
    /// An authorization detour first, then the result.
    Oauth,
    /// Never.
    Never,
}

/// A call the tool server holds.
#[derive(Debug, Clone)]
pub struct ServerCall {
    pub thread_id: ThreadId,
    pub call_id: CallId,
    pub answer: Answer,
    pub due: Timestamp,
    /// For `Oauth`: the authorization request went out.
    pub authorized: bool,
}

/// A subscription the tool server feeds.
#[derive(Debug, Clone)]
pub struct ServerSub {
    pub thread_id: ThreadId,
    pub call_id: CallId,
    pub associative: bool,
    pub events_left: u32,
    pub sent: u32,
}

/// Fault rates, in per mille.
#[derive(Debug, Clone, Copy)]
pub struct NetFaults {
    /// A sent input is delivered twice.
    pub duplicate: u64,
    /// A tool server refuses a dispatch.
    pub refuse_dispatch: u64,
    /// A commit fails with a version conflict (another writer won).
    pub conflict: u64,
}

impl NetFaults {
    pub const NONE: NetFaults = NetFaults {
        duplicate: 0,
        refuse_dispatch: 0,
        conflict: 0,
    };
}

/// Everything outside the engine: what is in flight and what happened.
#[derive(Debug)]
pub struct Net {
    pub rng: Rng,
    pub now: Timestamp,
    /// Each thread's FIFO queue.
    pub queues: BTreeMap<ThreadId, VecDeque<Input>>,
    pub timers: Vec<(Timestamp, Input)>,
    pub server: Vec<ServerCall>,
    pub subs: Vec<ServerSub>,
    /// Every input ever sent to each thread.
    pub sent: BTreeMap<ThreadId, BTreeSet<InputId>>,
    /// Every input the store marked processed, per thread.
    pub applied: BTreeMap<ThreadId, BTreeSet<InputId>>,
    /// Inputs a slice dropped, with why.
    pub dropped: BTreeMap<(ThreadId, InputId), String>,
    /// Effects that may still succeed before the host "crashes" (`None`: it does not).
    pub effects_left: Option<u32>,
    pub crashed: bool,
    pub faults: NetFaults,
    pub violations: Vec<String>,
    pub trace: Vec<String>,
    pub outputs: usize,
    /// Output events cut to fit [`OUTPUT_LIMIT`].
    pub outputs_truncated: usize,
    /// Authorization links shown to the user.
    pub authorizations_shown: usize,
    /// Approval questions shown to people.
    pub approvals_asked: usize,
    /// Client tools' calls shown to their application.
    pub client_calls_shown: usize,
    pub notifications: usize,
}

/// The largest output event the simulated transport carries (a queue's message limit, scaled
/// down with the simulation's payloads).
pub const OUTPUT_LIMIT: usize = 8 * 1024;

impl Net {
    pub fn new(seed: u64, start: Timestamp, faults: NetFaults) -> Self {
        Self {
            rng: Rng::new(seed),
            now: start,
            queues: BTreeMap::new(),
            timers: Vec::new(),
            server: Vec::new(),
            subs: Vec::new(),
            sent: BTreeMap::new(),
            applied: BTreeMap::new(),
            dropped: BTreeMap::new(),
            effects_left: None,
            crashed: false,
            faults,
            violations: Vec::new(),
            trace: Vec::new(),
            outputs: 0,
            outputs_truncated: 0,
            authorizations_shown: 0,
            approvals_asked: 0,
            client_calls_shown: 0,
            notifications: 0,
        }
    }

    /// Puts an input on its thread's queue (sometimes twice), and records it as sent.
    pub fn deliver(&mut self, input: Input) {
        self.sent
            .entry(input.thread_id.clone())
            .or_default()
            .insert(input.id.clone());
        let twice = self.rng.chance(self.faults.duplicate);
        let queue = self.queues.entry(input.thread_id.clone()).or_default();
        if twice {
            queue.push_back(input.clone());
        }
        queue.push_back(input);
    }

    /// Puts an input on the timers, due at `due` (people and applications answer later), and
    /// records it as sent.
    pub fn later(&mut self, due: Timestamp, input: Input) {
        self.sent
            .entry(input.thread_id.clone())
            .or_default()
            .insert(input.id.clone());
        self.timers.push((due, input));
    }

    /// Someone outside answers what an event asks, some time later: a person an approval
    /// (run it, or not; sometimes twice, or never, when its deadline answers), an application
    /// a client tool's call (once, twice, twice differently, or never, past its deadline).
    /// Shown again after a crash, an event is answered again.
    fn answer_later(&mut self, event: &OutputEvent) {
        let after = |net: &mut Net| {
            let delay = SignedDuration::from_secs(1 + net.rng.below(1_800) as i64);
            net.now + delay
        };
        let thread = &event.thread_id;
        match &event.kind {
            OutputKind::ChoiceRequested { call_id, .. } => {
                self.approvals_asked += 1;
                let answer = |suffix: &str, selected: usize| {
                    server_input(
                        thread,
                        call_id,
                        suffix,
                        InputBody::UserChoiceAnswered {
                            call_id: call_id.clone(),
                            selected,
                            unattended: false,
                        },
                    )
                };
                let roll = self.rng.below(100);
                let selected = (roll % 2) as usize;
                if roll < 60 {
                    let due = after(self);
                    self.later(due, answer("answered", selected));
                }
                if roll < 15 {
                    let due = after(self);
                    self.later(due, answer("answered-again", 1 - selected));
                }
            }
            OutputKind::ClientToolCall { call_id, .. } => {
                self.client_calls_shown += 1;
                let result = |suffix: &str, text: String| {
                    server_input(
                        thread,
                        call_id,
                        suffix,
                        InputBody::tool_result(call_id.clone(), text),
                    )
                };
                let roll = self.rng.below(100);
                if roll < 75 {
                    let due = after(self);
                    self.later(
                        due,
                        result("client-result", format!("picked for {call_id}")),
                    );
                }
                if roll < 25 {
                    let due = after(self);
                    self.later(
                        due,
                        result("client-result-again", format!("picked again for {call_id}")),
                    );
                }
            }
            _ => {}
        }
    }

    /// False once the host has "crashed"; counts down to the crash otherwise.
    fn survives_effect(&mut self) -> bool {
        if self.crashed {
            return false;
        }
        match self.effects_left {
            Some(0) => {
                self.crashed = true;
                false
            }
            Some(n) => {
                self.effects_left = Some(n - 1);
                true
            }
            None => true,
        }
    }
}

/// A handle on the world shared by the host, the store and the scheduler.
#[derive(Debug, Clone)]
pub struct Shared(Arc<Mutex<Net>>);

impl Shared {
    pub fn new(net: Net) -> Self {
        Self(Arc::new(Mutex::new(net)))
    }

    pub fn lock(&self) -> MutexGuard<'_, Net> {
        self.0.lock().unwrap()
    }
}

fn died(input: &Input) -> SendError {
    SendError {
        input_id: input.id.clone(),
        thread_id: input.thread_id.clone(),
        reason: "the host crashed".into(),
    }
}

/// The host's effects, performed into the simulated network (durable, like SQS).
#[async_trait]
impl EffectPerformer for Shared {
    async fn send(&self, input: &Input, _: &EffectRef) -> Result<Handoff, SendError> {
        let mut net = self.lock();
        if !net.survives_effect() {
            return Err(died(input));
        }
        net.deliver(input.clone());
        Ok(Handoff::Delivered)
    }

    async fn send_at(
        &self,
        input: &Input,
        due: Timestamp,
        _: &EffectRef,
    ) -> Result<Handoff, SendError> {
        let mut net = self.lock();
        if !net.survives_effect() {
            return Err(died(input));
        }
        net.sent
            .entry(input.thread_id.clone())
            .or_default()
            .insert(input.id.clone());
        net.timers.push((due, input.clone()));
        Ok(Handoff::Delivered)
    }

    async fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), DispatchError> {
        let mut net = self.lock();
        if !net.survives_effect() {
            return Err(DispatchError::Refused("the host crashed".into()));
        }
        let refuse = net.faults.refuse_dispatch;
        if net.rng.chance(refuse) {
            return Err(DispatchError::Refused("HTTP 400: simulated refusal".into()));
        }
        // A retried dispatch of the same call reaches the server again; it keeps one.
        if net
            .server
            .iter()
            .any(|c| c.call_id == invocation.call_id && c.thread_id == invocation.thread_id)
        {
            return Ok(());
        }
        let answer = match net.rng.below(100) {
            0..=59 => Answer::Once,
            60..=69 => Answer::Twice,
            70..=74 => Answer::TwiceDifferent,
            75..=84 => Answer::Subscribe {
                associative: net.rng.chance(500),
                events: 1 + net.rng.below(3) as u32,
            },
            85..=92 => Answer::Oauth,
            _ => Answer::Never,
        };
        let delay = 1 + net.rng.below(600) as i64;
        let due = net.now + jiff::SignedDuration::from_secs(delay);
        net.server.push(ServerCall {
            thread_id: invocation.thread_id.clone(),
            call_id: invocation.call_id.clone(),
            answer,
            due,
            authorized: false,
        });
        Ok(())
    }

    async fn notify(&self, notification: &Notification) {
        let mut net = self.lock();
        net.notifications += 1;
        match notification {
            Notification::CancelToolCall {
                thread_id, call_id, ..
            } => net
                .subs
                .retain(|s| !(&s.thread_id == thread_id && &s.call_id == call_id)),
            Notification::CloseThread { thread_id, .. } => {
                net.subs.retain(|s| &s.thread_id != thread_id)
            }
        }
    }

    async fn output(&self, events: &[&OutputEvent]) -> Result<(), OutputError> {
        let mut net = self.lock();
        if !net.survives_effect() {
            return Err(OutputError {
                count: events.len(),
                reason: "the host crashed".into(),
            });
        }
        // Through a transport with a message limit, as the AWS host's output queue is.
        for event in events {
            let json = event.to_json_within(OUTPUT_LIMIT).unwrap();
            let truncated = json.contains("\"truncated\":true");
            let fits = json.len() <= OUTPUT_LIMIT;
            let readable = !truncated
                || serde_json::from_str::<OutputEvent>(&json).is_ok_and(|e| {
                    e.thread_id == event.thread_id && e.kind.kind() == event.kind.kind()
                });
            if !fits || !readable {
                net.violations.push(format!(
                    "a {} event of {} came out as {} bytes (limit {OUTPUT_LIMIT}), readable: {readable}",
                    event.kind.kind(),
                    event.thread_id,
                    json.len()
                ));
            }
            if truncated {
                net.outputs_truncated += 1;
            }
            if matches!(event.kind, OutputKind::AuthorizationRequested { .. }) {
                net.authorizations_shown += 1;
            }
            net.answer_later(event);
        }
        net.outputs += events.len();
        Ok(())
    }
}

/// A [`MemoryStore`] that lets another slice in between its reads (so two slices of one
/// thread can race), fails commits with a conflict on cue, refuses writes while the host is
/// "crashed", and checks that no input is ever marked processed twice.
#[derive(Debug, Clone)]
pub struct SimStore {
    pub inner: MemoryStore,
    pub net: Shared,
}

#[async_trait]
impl ThreadStore for SimStore {
    async fn load_record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        tokio::task::yield_now().await;
        self.inner.load_record(thread_id).await
    }

    async fn load_entries(
        &self,
        thread_id: &ThreadId,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        self.inner.load_entries(thread_id, upto).await
    }

    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError> {
        self.inner.processed(thread_id, input_ids).await
    }

    async fn list_threads(
        &self,
        query: &infinity_agent_core::state::ThreadQuery,
    ) -> Result<infinity_agent_core::state::ThreadPage, StoreError> {
        self.inner.list_threads(query).await
    }

    async fn events_after(
        &self,
        thread_id: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<infinity_agent_core::effect::OutputEvent>, StoreError> {
        self.inner.events_after(thread_id, after, limit).await
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        tokio::task::yield_now().await;
        {
            let mut net = self.net.lock();
            if net.crashed {
                return Err(StoreError::Unavailable("the host crashed".into()));
            }
            let conflict = net.faults.conflict;
            if net.rng.chance(conflict) {
                return Err(StoreError::Conflict {
                    thread_id: commit.thread_id.clone(),
                    expected: commit.expected_version,
                    found: commit.expected_version.map(|v| v + 1),
                });
            }
        }
        self.inner.commit(commit).await?;
        let mut net = self.net.lock();
        let applied = net.applied.entry(commit.thread_id.clone()).or_default();
        let mut twice = Vec::new();
        for id in &commit.processed_inputs {
            if !applied.insert(id.clone()) {
                twice.push(id.to_string());
            }
        }
        for id in twice {
            net.violations.push(format!(
                "input {id} was applied twice to thread {}",
                commit.thread_id
            ));
        }
        Ok(())
    }

    async fn complete_effects(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        if self.net.lock().crashed {
            return Err(StoreError::Unavailable("the host crashed".into()));
        }
        self.inner.complete_effects(thread_id, effect_ids).await
    }

    async fn outbox(&self) -> Result<Vec<(ThreadId, PendingEffect)>, StoreError> {
        self.inner.outbox().await
    }

    async fn thread_ids(&self) -> Result<Vec<ThreadId>, StoreError> {
        self.inner.thread_ids().await
    }

    async fn claim_answer(
        &self,
        thread_id: &ThreadId,
        answer: &StandingAnswer,
    ) -> Result<Option<StandingAnswer>, StoreError> {
        tokio::task::yield_now().await;
        if self.net.lock().crashed {
            return Err(StoreError::Unavailable("the host crashed".into()));
        }
        self.inner.claim_answer(thread_id, answer).await
    }

    async fn standing_answer(
        &self,
        thread_id: &ThreadId,
        call_id: &CallId,
        to: infinity_agent_core::input::AnswerTo,
    ) -> Result<Option<StandingAnswer>, StoreError> {
        self.inner.standing_answer(thread_id, call_id, to).await
    }

    async fn withdraw_answer(
        &self,
        thread_id: &ThreadId,
        answer: &StandingAnswer,
    ) -> Result<(), StoreError> {
        self.inner.withdraw_answer(thread_id, answer).await
    }
}

/// The input a tool server's callback becomes (ids derived from the call, as the RAP receiver
/// derives them).
pub fn server_input(
    thread_id: &ThreadId,
    call_id: &CallId,
    suffix: &str,
    body: InputBody,
) -> Input {
    Input {
        id: InputId::derived(call_id.as_str(), suffix),
        thread_id: thread_id.clone(),
        body,
    }
}
