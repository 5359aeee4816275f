//! What must hold after every step of a simulation, and what must hold once it has settled.

use std::collections::{BTreeMap, BTreeSet};

use infinity_agent_core::effect::Effect;
use infinity_agent_core::history::{is_interruption_notice, Item};
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::input::{Answer as StandingAnswer, AnswerTo, Answered, InputBody};
use infinity_agent_core::state::{PendingKind, ThreadRecord, ThreadStatus};
use infinity_agent_core::store::{load_view, ThreadStore};

use crate::simulation::world::{Answer, Net, SimStore};

/// Inputs in flight for each thread: queued, on a timer, or in an outbox.
struct InFlight<'a> {
    bodies: BTreeMap<&'a ThreadId, Vec<&'a InputBody>>,
}

impl<'a> InFlight<'a> {
    fn new(
        net: &'a Net,
        outbox: &'a [(ThreadId, infinity_agent_core::effect::PendingEffect)],
    ) -> Self {
        let mut bodies: BTreeMap<&ThreadId, Vec<&InputBody>> = BTreeMap::new();
        for (thread, queue) in &net.queues {
            bodies
                .entry(thread)
                .or_default()
                .extend(queue.iter().map(|i| &i.body));
        }
        for (_, input) in &net.timers {
            bodies
                .entry(&input.thread_id)
                .or_default()
                .push(&input.body);
        }
        for (_, effect) in outbox {
            match &effect.effect {
                Effect::Send { input } | Effect::SendAt { input, .. } => bodies
                    .entry(&input.thread_id)
                    .or_default()
                    .push(&input.body),
                _ => {}
            }
        }
        Self { bodies }
    }

    fn any(&self, thread: &ThreadId, pred: impl Fn(&InputBody) -> bool) -> bool {
        self.bodies
            .get(thread)
            .is_some_and(|b| b.iter().any(|body| pred(body)))
    }
}

/// Every thread in short: status, pending calls, children, and its history's last entries.
pub async fn describe(store: &SimStore) -> String {
    let inner = &store.inner;
    let mut out = String::new();
    for id in inner.thread_ids().await.unwrap_or_default() {
        let Ok(Some(r)) = inner.load_record(&id).await else {
            continue;
        };
        let pending: Vec<String> = r
            .pending_calls
            .iter()
            .map(|p| {
                format!(
                    "{}:{}{}",
                    p.tool,
                    p.call_id,
                    if p.moved_on { "(moved on)" } else { "" }
                )
            })
            .collect();
        let children: Vec<String> = r
            .children
            .iter()
            .map(|c| format!("{}{}", c.thread_id, if c.closed { "(closed)" } else { "" }))
            .collect();
        out.push_str(&format!(
            "{id} {:?} v{} pending [{}] children [{}] deferred {} delegated_by {:?}\n",
            r.status,
            r.version,
            pending.join(", "),
            children.join(", "),
            r.deferred.len(),
            r.delegated_by.as_ref().map(|d| (&d.thread_id, d.returned)),
        ));
        let view = load_view(inner, &r).await.unwrap_or_default();
        for e in view.iter().rev().take(6).rev() {
            let line = format!("{:?}", e.item);
            out.push_str(&format!(
                "    {}\n",
                line.chars().take(160).collect::<String>()
            ));
        }
    }
    out
}

/// What the store holds, read once per check.
pub struct Snapshot {
    records: BTreeMap<ThreadId, ThreadRecord>,
    views: BTreeMap<ThreadId, Vec<std::sync::Arc<infinity_agent_core::history::HistoryEntry>>>,
    outbox: Vec<(ThreadId, infinity_agent_core::effect::PendingEffect)>,
    /// The answers that stand for the calls whose results the threads hold, by thread, call
    /// and what of the call they answer.
    answers: BTreeMap<(ThreadId, CallId, &'static str), StandingAnswer>,
}

impl Snapshot {
    pub async fn load(store: &SimStore) -> Result<Self, String> {
        let inner = &store.inner;
        let outbox = inner.outbox().await.map_err(|e| e.to_string())?;
        let mut records = BTreeMap::new();
        let mut views = BTreeMap::new();
        let mut answers = BTreeMap::new();
        for id in inner.thread_ids().await.map_err(|e| e.to_string())? {
            let record = inner
                .load_record(&id)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("thread {id} is listed but has no record"))?;
            let view = load_view(inner, &record)
                .await
                .map_err(|e| format!("{id}: the view does not load: {e}"))?;
            for entry in &view[view.len() - record.history_len as usize..] {
                let Item::ToolResult { call_id, .. } = &entry.item else {
                    continue;
                };
                for to in [AnswerTo::Question, AnswerTo::Result] {
                    let standing = inner
                        .standing_answer(&id, call_id, to)
                        .await
                        .map_err(|e| e.to_string())?;
                    if let Some(standing) = standing {
                        answers.insert((id.clone(), call_id.clone(), to.as_str()), standing);
                    }
                }
            }
            views.insert(id.clone(), view);
            records.insert(id, record);
        }
        Ok(Self {
            records,
            views,
            outbox,
            answers,
        })
    }

    /// A call's result says what the answer that stands said: an approval declined only when
    /// "Do not run it" stands (a person's or its deadline's), a client tool's result the one
    /// kept first.
    fn check_answers(&self) -> Result<(), String> {
        for (id, record) in &self.records {
            let own = self
                .views
                .get(id)
                .map_or(&[][..], |v| &v[v.len() - record.history_len as usize..]);
            // The model's own calls (a late result injected as an event gets a call of its own).
            let made: BTreeSet<&CallId> = own
                .iter()
                .filter_map(|e| match &e.item {
                    Item::Assistant {
                        tool_calls,
                        synthetic: false,
                        ..
                    } => Some(tool_calls.iter().map(|c| &c.id)),
                    _ => None,
                })
                .flatten()
                .collect();
            for entry in own {
                let Item::ToolResult { call_id, text, .. } = &entry.item else {
                    continue;
                };
                if !made.contains(call_id) {
                    continue;
                }
                let standing =
                    |to: &'static str| self.answers.get(&(id.clone(), call_id.clone(), to));
                if text.starts_with("Not run: ") && !text.contains("arguments") {
                    let declined = match standing("question").map(|a| &a.what) {
                        Some(Answered::Choice { selected, .. }) => *selected == 1,
                        Some(Answered::Deadline { choice, .. }) => {
                            choice.as_deref() == Some("Do not run it")
                        }
                        _ => false,
                    };
                    if !declined {
                        return Err(format!(
                            "{id}: call {call_id} was declined ({text}), but what stands is {:?}",
                            standing("question")
                        ));
                    }
                }
                if let Some(Answered::Choice { selected: 0, .. }) =
                    standing("question").map(|a| &a.what)
                {
                    if text.starts_with("Not run: ") {
                        return Err(format!("{id}: call {call_id} was approved, yet not run"));
                    }
                }
                if text.starts_with("picked ") {
                    let kept = standing("result")
                        .and_then(|a| a.input.as_ref())
                        .map(|i| &i.body);
                    let same =
                        matches!(kept, Some(InputBody::ToolResult { text: t, .. }) if t == text);
                    if !same {
                        return Err(format!(
                            "{id}: call {call_id} took `{text}`, but what stands is {kept:?}"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// What the run exercised, counted from the threads' histories.
    pub fn coverage(&self) -> BTreeMap<&'static str, usize> {
        let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
        for (id, record) in &self.records {
            let own = self
                .views
                .get(id)
                .map_or(&[][..], |v| &v[v.len() - record.history_len as usize..]);
            let mut note = |what: &'static str| *seen.entry(what).or_default() += 1;
            note("threads");
            if record.parent.is_some() {
                note("child threads");
            }
            if record.delegated_by.is_some() {
                note("delegated threads");
            }
            if record.status == ThreadStatus::Closed {
                note("closed threads");
            }
            for entry in own {
                match &entry.item {
                    Item::Notice { text, .. } if text.starts_with("Stopped: ") => {
                        note("suspensions")
                    }
                    Item::Notice { text, .. } if text.starts_with("Model error") => {
                        note("model errors recorded")
                    }
                    Item::Summary { .. } => note("compactions"),
                    Item::ToolResult { text, .. } if text.contains("as many threads this hour") => {
                        note("thread starts refused")
                    }
                    Item::ToolResult { text, .. } if text.starts_with("Sleep interrupted") => {
                        note("sleeps interrupted")
                    }
                    Item::ToolResult { text, .. } if text.starts_with("Still running") => {
                        note("calls still running at a message")
                    }
                    Item::Notice { text, .. } if is_interruption_notice(text) => {
                        note("interruptions")
                    }
                    Item::ToolResult { text, .. } if text.contains("could not be delivered") => {
                        note("undeliverable calls")
                    }
                    Item::ToolResult { text, .. }
                        if text.starts_with("No result: the thread was closed") =>
                    {
                        note("calls cut by a close")
                    }
                    Item::ToolResult { text, .. } if text.starts_with("Not run: ") => {
                        note("approvals declined")
                    }
                    Item::ToolResult { text, .. }
                        if text.starts_with("Error: the application that runs this tool") =>
                    {
                        note("client calls past their deadline")
                    }
                    Item::Message { text, .. } if text.starts_with("[widget]") => {}
                    Item::Assistant {
                        synthetic: true, ..
                    } => note("events injected"),
                    _ => {}
                }
            }
        }
        seen
    }

    /// Checks the invariants. `settled`: nothing is in flight any more (the end of a run).
    pub fn check(&self, net: &Net, settled: bool) -> Result<(), String> {
        if let Some(v) = net.violations.first() {
            return Err(v.clone());
        }
        self.check_answers()?;
        for ((thread, input), why) in &net.dropped {
            // (An interruption of a thread not created yet has nothing to interrupt.)
            if why.starts_with("unknown thread") && !input.as_str().starts_with("interrupt") {
                return Err(format!("input {input} to {thread} was dropped: {why}"));
            }
        }
        let in_flight = InFlight::new(net, &self.outbox);
        for record in self.records.values() {
            let view = self.views.get(&record.id).map(Vec::as_slice).unwrap_or(&[]);
            check_thread(
                net,
                &in_flight,
                &self.outbox,
                &self.records,
                record,
                view,
                settled,
            )?;
        }
        if settled {
            check_settled(net, &self.outbox, &self.records)?;
        }
        Ok(())
    }
}

/// The most of a call's arguments a record may copy (its preview and the note on what was cut).
const ARGS_COPY_LIMIT: usize = infinity_agent_core::state::ARGS_PREVIEW_BYTES + 200;

fn check_thread(
    net: &Net,
    in_flight: &InFlight<'_>,
    outbox: &[(ThreadId, infinity_agent_core::effect::PendingEffect)],
    records: &BTreeMap<ThreadId, ThreadRecord>,
    record: &ThreadRecord,
    view: &[std::sync::Arc<infinity_agent_core::history::HistoryEntry>],
    settled: bool,
) -> Result<(), String> {
    let t = &record.id;

    // The record is rewritten on every commit: it must not grow with what the model writes
    // (the history keeps that). Where it copies a call's arguments, it keeps a preview; a
    // `finish` result has its own bound.
    let copies = record
        .pending_calls
        .iter()
        .map(|p| (&p.call_id, &p.args))
        .chain(record.children.iter().map(|c| (&c.call_id, &c.args)))
        .chain(record.subscriptions.iter().map(|s| (&s.call_id, &s.args)))
        .chain(record.parent.iter().map(|p| (&p.call_id, &p.args)));
    for (call, args) in copies {
        let size = infinity_agent_core::json::json_len(args);
        if size > ARGS_COPY_LIMIT {
            return Err(format!(
                "{t}: the record keeps {size} bytes of call {call}'s arguments"
            ));
        }
    }
    // What a call holds whole until someone outside answers it is bounded.
    for pending in &record.pending_calls {
        let held = pending
            .approval
            .as_ref()
            .map(|a| &a.args)
            .into_iter()
            .chain(pending.client.as_ref().map(|c| &c.args));
        for args in held {
            let size = infinity_agent_core::json::json_len(args);
            if size > infinity_agent_core::state::MAX_HELD_ARGS_BYTES {
                return Err(format!(
                    "{t}: call {} holds {size} bytes of arguments",
                    pending.call_id
                ));
            }
        }
    }
    if let Some(output) = &record.output {
        let result = infinity_agent_core::json::json_len(&output.result);
        if result > infinity_agent_core::tools::internal::MAX_FINISH_RESULT_BYTES {
            return Err(format!("{t}: finish recorded a result of {result} bytes"));
        }
    }

    // Every call answered at most once, after it, and before the conversation goes on.
    let mut calls: BTreeMap<&CallId, usize> = BTreeMap::new();
    let mut answered: BTreeMap<&CallId, usize> = BTreeMap::new();
    let mut open_turn: Option<(usize, BTreeSet<&CallId>)> = None;
    for (i, entry) in view.iter().enumerate() {
        match &entry.item {
            Item::ToolResult { call_id, .. } => {
                if !calls.contains_key(call_id) {
                    return Err(format!(
                        "{t}: entry {i} answers call {call_id}, which no earlier turn made"
                    ));
                }
                if answered.insert(call_id, i).is_some() {
                    return Err(format!(
                        "{t}: call {call_id} is answered twice (again at entry {i})"
                    ));
                }
                if let Some((_, open)) = &mut open_turn {
                    open.remove(call_id);
                }
            }
            Item::Notice { .. } => {}
            other => {
                if let Some((turn, open)) = &open_turn {
                    if !open.is_empty() {
                        return Err(format!(
                            "{t}: the turn at entry {turn} still has calls {open:?} unanswered when entry {i} ({}) follows",
                            kind(other)
                        ));
                    }
                }
                open_turn = None;
                for call in other.tool_calls() {
                    if calls.insert(&call.id, i).is_some() {
                        return Err(format!("{t}: call id {} is used twice", call.id));
                    }
                }
                if !other.tool_calls().is_empty() {
                    open_turn = Some((i, other.tool_calls().iter().map(|c| &c.id).collect()));
                }
            }
        }
    }
    // A call with no result is one the thread waits for.
    for (call, at) in &calls {
        if answered.contains_key(call) {
            continue;
        }
        let waiting = record
            .pending_calls
            .iter()
            .any(|p| &&p.call_id == call && !p.moved_on);
        if !waiting {
            return Err(format!(
                "{t}: call {call} (entry {at}) has no result and the thread does not wait for it"
            ));
        }
    }
    for pending in &record.pending_calls {
        let has_result = answered.contains_key(&pending.call_id);
        if pending.moved_on != has_result {
            return Err(format!(
                "{t}: pending call {} is {} but {} in the view",
                pending.call_id,
                if pending.moved_on {
                    "moved on"
                } else {
                    "awaited"
                },
                if has_result {
                    "has a result"
                } else {
                    "has none"
                }
            ));
        }
        // No timer lost.
        if pending.due.is_some() {
            let call = &pending.call_id;
            let armed = in_flight.any(
                t,
                |b| matches!(b, InputBody::TimerWakeUp { call_id } if call_id == call),
            );
            if !armed {
                return Err(format!("{t}: the timer of sleep {call} is lost"));
            }
        }
        let call = &pending.call_id;
        // An approval waits on its question, and on its deadline (every rule here has one).
        if pending.approval.is_some() {
            let asked = record.open_choices.iter().any(|c| &c.call_id == call);
            let timed = in_flight.any(
                t,
                |b| matches!(b, InputBody::ApprovalDeadline { call_id, .. } if call_id == call),
            );
            if !(asked && timed) {
                return Err(format!(
                    "{t}: the approval of call {call} is lost (question open: {asked}, deadline armed: {timed})"
                ));
            }
            continue;
        }
        // A client tool's call waits on its application, and on its deadline.
        if pending.client.is_some() {
            let timed = in_flight.any(
                t,
                |b| matches!(b, InputBody::CallDeadline { call_id, .. } if call_id == call),
            );
            if !timed {
                return Err(format!("{t}: the deadline of client call {call} is lost"));
            }
            continue;
        }
        // No tool server call lost.
        if pending.kind == PendingKind::Dispatched && pending.tool == "lookup" {
            let call = &pending.call_id;
            let held = net
                .server
                .iter()
                .any(|c| &c.thread_id == t && &c.call_id == call);
            let coming = in_flight.any(
                t,
                |b| matches!(b, InputBody::ToolResult { call_id, .. } if call_id == call),
            );
            let dispatching = outbox.iter().any(|(_, e)| {
                matches!(&e.effect, Effect::Dispatch { invocation } if &invocation.call_id == call)
            });
            if !(held || coming || dispatching) {
                return Err(format!("{t}: tool server call {call} is lost"));
            }
        }
    }

    // Children and parents agree.
    if let Some(parent) = &record.parent {
        let listed = records.get(&parent.thread_id).is_some_and(|p| {
            p.children
                .iter()
                .any(|c| &c.thread_id == t && c.call_id == parent.call_id)
        });
        if !listed {
            return Err(format!(
                "{t}: its parent {} does not list it",
                parent.thread_id
            ));
        }
    }
    for child in &record.children {
        if records.contains_key(&child.thread_id) {
            continue;
        }
        let seeding = in_flight.any(&child.thread_id, |b| {
            matches!(b, InputBody::ChildSeed { .. })
        });
        if !seeding {
            return Err(format!(
                "{t}: child {} neither exists nor is being created",
                child.thread_id
            ));
        }
    }

    if settled && record.status == ThreadStatus::Open {
        let waits = record
            .pending_calls
            .iter()
            .any(|p| p.kind == PendingKind::Dispatched && !p.moved_on);
        if !waits {
            if !record.deferred.is_empty() {
                return Err(format!("{t}: input is held back, but no call is awaited"));
            }
            // A message must be answered, unless an error recorded after it stopped the
            // thread (it then waits for new input, by design).
            let own = view.len() - record.history_len as usize;
            if let Some(Item::Message { text, .. }) = view[own..].last().map(|e| &e.item) {
                return Err(format!("{t}: the message {text:?} was never answered"));
            }
        }
    }
    Ok(())
}

fn check_settled(
    net: &Net,
    outbox: &[(ThreadId, infinity_agent_core::effect::PendingEffect)],
    records: &BTreeMap<ThreadId, ThreadRecord>,
) -> Result<(), String> {
    if let Some((t, e)) = outbox.first() {
        return Err(format!("{t}: the outbox still holds {:?}", e.effect));
    }
    // No input lost: each was processed or deliberately dropped.
    for (t, ids) in &net.sent {
        let applied = net.applied.get(t);
        for id in ids {
            let done = applied.is_some_and(|a| a.contains(id))
                || net.dropped.contains_key(&(t.clone(), id.clone()));
            if !done {
                return Err(format!("{t}: input {id} was sent but never processed"));
            }
        }
    }
    for record in records.values() {
        let t = &record.id;
        for pending in &record.pending_calls {
            if pending.kind == PendingKind::Dispatched
                && !may_wait_for_ever(net, records, t, &pending.call_id)
            {
                return Err(format!(
                    "{t}: {} call {} still waits for a result after everything settled",
                    pending.tool, pending.call_id
                ));
            }
        }
        for child in &record.children {
            let Some(c) = records.get(&child.thread_id) else {
                return Err(format!("{t}: child {} was never created", child.thread_id));
            };
            let closed = c.status == ThreadStatus::Closed;
            if child.closed != closed {
                return Err(format!(
                    "{t}: child {} is {} but its parent thinks it {}",
                    child.thread_id,
                    if closed { "closed" } else { "open" },
                    if child.closed { "closed" } else { "open" }
                ));
            }
            if record.status == ThreadStatus::Closed && !closed {
                return Err(format!(
                    "{t} is closed but its child {} is open",
                    child.thread_id
                ));
            }
        }
    }
    Ok(())
}

/// True when a call may rightly still wait after everything settled: a tool server that
/// never answers it, or for an `agent` call, a delegated thread still open and itself waiting
/// for something (its children may never report: that is the model's choice). A delegated
/// thread that is closed, or open and waiting for nothing, should have returned.
fn may_wait_for_ever(
    net: &Net,
    records: &BTreeMap<ThreadId, ThreadRecord>,
    thread: &ThreadId,
    call: &CallId,
) -> bool {
    if net
        .server
        .iter()
        .any(|c| &c.thread_id == thread && &c.call_id == call && c.answer == Answer::Never)
    {
        return true;
    }
    let delegated =
        infinity_agent_core::tools::internal::delegation::delegated_thread_id(thread, call);
    records
        .get(&delegated)
        .is_some_and(|d| d.status == ThreadStatus::Open && !d.pending_calls.is_empty())
}

fn kind(item: &Item) -> &'static str {
    match item {
        Item::Message { .. } => "a message",
        Item::Assistant {
            synthetic: true, ..
        } => "an injected event",
        Item::Assistant { .. } => "a model turn",
        Item::ToolResult { .. } => "a result",
        Item::Summary { .. } => "a summary",
        Item::Notice { .. } => "a notice",
    }
}
