//! What would wake a thread, read from its record: the timers it set, the calls it waits on (and
//! since when), its subscriptions, the questions it put to people, its children still running,
//! its recurring schedules, an hourly limit it reached. One [`Waits`] per thread;
//! [`Waits::stuck`] flags a thread that waits on nothing that can wake it.
//!
//! `infinity status THREAD`, the HTTP API's `GET /threads/{id}/waiting` and the web app's panel
//! show the same, for a thread and the open threads below it.

use jiff::Timestamp;
use serde::Serialize;

use super::{PendingKind, ThreadRecord, ThreadStatus};
use crate::ids::{CallId, ThreadId};

/// What would wake one thread.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Waits {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its agent (`NAME` or `NAME@VERSION`).
    pub agent: String,
    /// True when it is closed: nothing wakes it, and nothing needs to.
    pub closed: bool,
    /// Timers: a sleep ends (or a wait gives up) at `due`.
    pub timers: Vec<TimerWait>,
    /// Calls whose results it waits for (tool servers, delegated agents, remotes), since when.
    pub calls: Vec<CallWait>,
    /// Subscriptions: events from these calls wake it.
    pub subscriptions: Vec<CallRef>,
    /// Questions put to people, waiting for an answer.
    pub questions: Vec<Question>,
    /// Children still running (each reports to it when it ends).
    pub children: Vec<ThreadId>,
    /// Recurring schedules: each occurrence sends it a message.
    pub schedules: Vec<String>,
    /// Paused at an hourly limit (until a person writes to it) or at its conversation's budget
    /// (until a person raises it, [`Waits::budget`]): why.
    pub paused: Option<String>,
    /// True when [`Waits::paused`] is the conversation's budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget: bool,
    /// For a conversation (a root) with a dollar budget whose completions had no prices: what
    /// the budget does not count (it never stops them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpriced: Option<String>,
    /// Effects it committed and has still to perform (the host's outbox).
    pub outbox: usize,
    /// People's messages waiting for its turn to end (`while_busy: queue`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued: usize,
    /// Why it is stuck, when it waits on nothing that can wake it: see [`Waits::of`].
    pub stuck: Option<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A timer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct TimerWait {
    /// The call that set it.
    pub call_id: CallId,
    /// Its tool (`sleep`, `sleep_until`, ...).
    pub tool: String,
    /// When it fires.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub due: Timestamp,
    /// True when a message cut the wait short: the timer still fires, and its result comes as
    /// an event.
    pub moved_on: bool,
}

/// A call whose result the thread waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CallWait {
    /// The call.
    pub call_id: CallId,
    /// Its tool.
    pub tool: String,
    /// When it was made.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub since: Timestamp,
    /// True when the conversation went on without it (its result comes later, as an event).
    pub moved_on: bool,
    /// True while its tool server waits for a person to authorize it.
    pub authorizing: bool,
    /// True for a client tool's call: the application that runs it answers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client: bool,
    /// True while it waits for a person's approval to run (its question is among
    /// [`Waits::questions`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
}

/// A call, by id and tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct CallRef {
    /// The call.
    pub call_id: CallId,
    /// Its tool.
    pub tool: String,
}

/// A question put to people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Question {
    /// The call that asks.
    pub call_id: CallId,
    /// What it asks.
    pub prompt: String,
}

impl Waits {
    /// What would wake `record`'s thread (its outbox count is the host's to add).
    ///
    /// A thread is **stuck** when it is open, was started by another thread (a child or a
    /// delegated copy), and waits on none of the above: only a message could wake it, so the
    /// thread that waits for its report may wait for ever. A top-level thread with nothing to
    /// wait on is idle, not stuck: it waits for a person's message, as it should.
    pub fn of(record: &ThreadRecord) -> Self {
        let closed = record.status == ThreadStatus::Closed;
        let mut waits = Self {
            thread_id: record.id.clone(),
            agent: record.agent.clone(),
            closed,
            timers: Vec::new(),
            calls: Vec::new(),
            subscriptions: Vec::new(),
            questions: Vec::new(),
            children: Vec::new(),
            schedules: Vec::new(),
            paused: None,
            budget: false,
            unpriced: None,
            outbox: 0,
            queued: record.queued.len(),
            stuck: None,
        };
        if closed {
            return waits;
        }
        for call in &record.pending_calls {
            match (call.kind, call.due) {
                (PendingKind::Passive, Some(due)) => waits.timers.push(TimerWait {
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    due,
                    moved_on: call.moved_on,
                }),
                // A wait for input or an event (`sleep_until_event_or_input`): whatever comes.
                (PendingKind::Passive, None) => {}
                (PendingKind::Dispatched, _) => waits.calls.push(CallWait {
                    call_id: call.call_id.clone(),
                    tool: call.tool.clone(),
                    since: call.issued_at,
                    moved_on: call.moved_on,
                    authorizing: call.authorizing,
                    client: call.client.is_some(),
                    approval: call.approval.is_some(),
                }),
            }
        }
        waits.subscriptions = record
            .subscriptions
            .iter()
            .map(|s| CallRef {
                call_id: s.call_id.clone(),
                tool: s.tool.clone(),
            })
            .collect();
        waits.questions = record
            .open_choices
            .iter()
            .map(|q| Question {
                call_id: q.call_id.clone(),
                prompt: q.prompt.clone(),
            })
            .collect();
        waits.children = record
            .children
            .iter()
            .filter(|c| !c.closed)
            .map(|c| c.thread_id.clone())
            .collect();
        waits.schedules = record.schedules.iter().map(|s| s.id.clone()).collect();
        waits.paused = record.suspended.as_ref().map(|s| s.reason.clone());
        waits.budget = record.suspended.as_ref().is_some_and(|s| s.budget);
        let usage = &record.conversation.total;
        if let (true, Some(usd), 1..) = (
            record.is_root(),
            record.conversation.budget.usd,
            usage.unpriced,
        ) {
            waits.unpriced = Some(format!(
                "the budget of {usd} does not count {} of its {} completion(s): its model has no \
                 prices (give them as `prices:` in the agent file), so they never reach it",
                usage.unpriced, usage.completions
            ));
        }
        let started_by_another = record.parent.is_some() || record.delegated_by.is_some();
        let waits_on_something = !waits.timers.is_empty()
            || waits.calls.iter().any(|c| !c.moved_on)
            || !waits.subscriptions.is_empty()
            || !waits.questions.is_empty()
            || !waits.children.is_empty()
            || !waits.schedules.is_empty()
            || waits.paused.is_some()
            || record
                .pending_calls
                .iter()
                .any(|c| c.kind == PendingKind::Passive);
        if started_by_another && !waits_on_something {
            waits.stuck = Some(
                "open, started by another thread, and waiting on nothing that can wake it: it \
                 will not report unless it gets a message"
                    .to_owned(),
            );
        }
        waits
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::state::{ChildLink, OpenChoice, ParentLink, PendingCall};

    fn call(id: &str, tool: &str, kind: PendingKind, due: Option<&str>) -> PendingCall {
        PendingCall {
            call_id: CallId::new(id).unwrap(),
            tool: tool.to_owned(),
            args: json!({}),
            kind,
            issued_at: "2026-12-03T12:00:00Z".parse().unwrap(),
            moved_on: false,
            due: due.map(|d| d.parse().unwrap()),
            authorizing: false,
            delegated: false,
            trace: None,
            client: None,
            approval: None,
        }
    }

    fn record(id: &str) -> ThreadRecord {
        ThreadRecord::new(ThreadId::new(id).unwrap(), "a", None, Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn what_would_wake_a_thread_and_when_it_is_stuck() {
        let mut root = record("root");
        root.pending_calls = vec![
            call(
                "c1",
                "sleep",
                PendingKind::Passive,
                Some("2026-12-03T13:00:00Z"),
            ),
            call("c2", "lookup", PendingKind::Dispatched, None),
        ];
        root.children.push(ChildLink {
            thread_id: ThreadId::new("kid").unwrap(),
            call_id: CallId::new("c0").unwrap(),
            tool: "spawn_thread".to_owned(),
            args: json!({}),
            closed: false,
        });
        root.open_choices.push(OpenChoice {
            call_id: CallId::new("c3").unwrap(),
            prompt: "Go?".to_owned(),
            choices: vec!["yes".to_owned()],
            default: 0,
            response_url: String::new(),
        });
        let waits = Waits::of(&root);
        assert_eq!(waits.timers[0].tool, "sleep");
        assert_eq!(waits.calls[0].tool, "lookup");
        assert_eq!(waits.children[0].as_str(), "kid");
        assert_eq!(waits.questions[0].prompt, "Go?");
        assert_eq!(waits.stuck, None);

        // A top-level thread with nothing to wait on is idle; a child is stuck.
        assert_eq!(Waits::of(&record("idle")).stuck, None);
        let mut kid = record("kid");
        kid.parent = Some(ParentLink {
            thread_id: ThreadId::new("root").unwrap(),
            call_id: CallId::new("c0").unwrap(),
            tool: "spawn_thread".to_owned(),
            args: json!({}),
            fork_at: 0,
            summary: None,
        });
        assert!(Waits::of(&kid).stuck.is_some());
        // A call the conversation went on without does not count as something to wake it.
        kid.pending_calls = vec![call("k1", "lookup", PendingKind::Dispatched, None)];
        kid.pending_calls[0].moved_on = true;
        assert!(Waits::of(&kid).stuck.is_some());
        // A wait for an event or input does.
        kid.pending_calls = vec![call(
            "k2",
            "sleep_until_event_or_input",
            PendingKind::Passive,
            None,
        )];
        assert_eq!(Waits::of(&kid).stuck, None);
        // Closed: nothing to wake, and not stuck.
        kid.status = ThreadStatus::Closed;
        let closed = Waits::of(&kid);
        assert!(closed.closed && closed.stuck.is_none() && closed.timers.is_empty());
    }
}
