//! What a thread is doing, in words, from its record (`infinity threads`, chat's `/threads`).
//!
//! The words and the rules are the core's ([`Activity::of`], in its `Phrase`s); the web app is
//! served the same words and says them by the same rules. It also knows when the model is at
//! work (from the event stream, "running"); a record alone does not say, so the CLI never does.

use infinity_agent_core::model::Usage;
use infinity_agent_core::state::{Activity, ThreadRecord};

/// The thread's state in a few words (see [`Activity::of`]).
pub(crate) fn describe(record: &ThreadRecord) -> String {
    Activity::of(record).text
}

/// What a thread used and cost, in a line: `3 completions, 1234 tokens, $0.0123`.
pub(crate) fn spent(usage: &Usage) -> String {
    format!(
        "{} completions, {} tokens, {}",
        usage.completions,
        usage.tokens(),
        usage.cost_text()
    )
}

/// For a conversation's root: what all its threads spent, and its budget (`None` for others).
pub(crate) fn conversation_spent(record: &ThreadRecord) -> Option<String> {
    if !record.is_root() {
        return None;
    }
    let total = &record.conversation.total;
    let budget = &record.conversation.budget;
    let mut limits = Vec::new();
    if let Some(usd) = budget.usd {
        limits.push(format!("{usd}"));
    }
    if let Some(tokens) = budget.tokens {
        limits.push(format!("{tokens} tokens"));
    }
    let budget = match limits.is_empty() {
        true => "no budget".to_owned(),
        false => {
            let by = match record.conversation.budget_set.is_empty() {
                true => "the agent's",
                false => "set by a person",
            };
            format!("budget {} ({by})", limits.join(" and "))
        }
    };
    Some(format!("{}; {budget}", spent(total)))
}

#[cfg(test)]
mod tests {
    use super::describe;
    use infinity_agent_core::ids::{CallId, ThreadId};
    use infinity_agent_core::state::{
        ChildLink, Migration, MigrationState, OpenChoice, PendingCall, PendingKind, Suspension,
        ThreadRecord, ThreadStatus,
    };
    use jiff::Timestamp;

    fn record() -> ThreadRecord {
        let id = ThreadId::new("t").unwrap();
        ThreadRecord::new(id, "a", None, Timestamp::UNIX_EPOCH)
    }

    fn call(id: &str, tool: &str, kind: PendingKind, due: Option<&str>) -> PendingCall {
        PendingCall {
            call_id: CallId::new(id).unwrap(),
            tool: tool.to_owned(),
            args: serde_json::json!({}),
            kind,
            issued_at: Timestamp::UNIX_EPOCH,
            moved_on: false,
            due: due.map(|d| d.parse().unwrap()),
            authorizing: false,
            delegated: false,
            trace: None,
            client: None,
            approval: None,
        }
    }

    fn child(id: &str, closed: bool) -> ChildLink {
        ChildLink {
            thread_id: ThreadId::new(id).unwrap(),
            call_id: CallId::new(format!("spawn-{id}")).unwrap(),
            tool: "spawn_thread".to_owned(),
            args: serde_json::json!({}),
            closed,
        }
    }

    #[test]
    fn a_new_thread_is_idle_and_a_closed_one_closed() {
        let mut r = record();
        assert_eq!(describe(&r), "idle");
        r.status = ThreadStatus::Closed;
        r.pending_calls
            .push(call("c1", "lookup", PendingKind::Dispatched, None));
        assert_eq!(describe(&r), "closed");
    }

    #[test]
    fn each_state_in_the_web_apps_words_first_match_wins() {
        let mut r = record();
        r.open_choices.push(OpenChoice {
            call_id: CallId::new("c9").unwrap(),
            prompt: "Which?".to_owned(),
            choices: vec!["a".to_owned()],
            default: 0,
            response_url: "http://127.0.0.1/answer".to_owned(),
        });
        assert_eq!(describe(&r), "waiting for your answer");
        r.children.push(child("k1", false));
        r.children.push(child("k0", true));
        assert_eq!(describe(&r), "waiting on 1 child thread");
        r.children.push(child("k2", false));
        assert_eq!(describe(&r), "waiting on 2 child threads");
        r.pending_calls.push(call(
            "s0",
            "sleep_until_event_or_input",
            PendingKind::Passive,
            None,
        ));
        assert_eq!(describe(&r), "sleeping until an event or a message");
        r.pending_calls.push(call(
            "s1",
            "sleep",
            PendingKind::Passive,
            Some("2026-05-01T21:09:00Z"),
        ));
        r.pending_calls.push(call(
            "s2",
            "sleep",
            PendingKind::Passive,
            Some("2026-05-01T21:07:08.6Z"),
        ));
        // The soonest timer, rounded to the second as the model is told it.
        assert_eq!(describe(&r), "sleeping until 2026-05-01 21:07:09 UTC");
        r.pending_calls
            .push(call("c1", "lookup", PendingKind::Dispatched, None));
        r.pending_calls
            .push(call("c2", "fetch", PendingKind::Dispatched, None));
        r.pending_calls
            .push(call("c3", "lookup", PendingKind::Dispatched, None));
        assert_eq!(describe(&r), "waiting on lookup, fetch");
        let mut asking = call("c4", "send_mail", PendingKind::Dispatched, None);
        asking.approval = Some(Box::new(infinity_agent_core::state::PendingApproval {
            args: serde_json::json!({}),
            deadline: None,
            default: Default::default(),
        }));
        r.pending_calls.push(asking);
        assert_eq!(describe(&r), "waiting for your approval of send_mail");
        r.suspended = Some(Suspension {
            reason: "completions per hour".to_owned(),
            since: Timestamp::UNIX_EPOCH,
            budget: false,
        });
        assert_eq!(describe(&r), "paused: hourly limit reached");
        r.suspended.as_mut().unwrap().budget = true;
        assert_eq!(describe(&r), "stopped: budget reached");
        r.migration = Some(Migration {
            to: "aws".to_owned(),
            since: Timestamp::UNIX_EPOCH,
            state: MigrationState::Moving,
        });
        assert_eq!(describe(&r), "moving to aws");
    }

    #[test]
    fn calls_the_conversation_moved_on_from_are_not_waited_on() {
        let mut r = record();
        let mut sleep = call(
            "s1",
            "sleep",
            PendingKind::Passive,
            Some("2026-05-01T21:07:08Z"),
        );
        sleep.moved_on = true;
        let mut lookup = call("c1", "lookup", PendingKind::Dispatched, None);
        lookup.moved_on = true;
        r.pending_calls = vec![sleep, lookup];
        assert_eq!(describe(&r), "idle");
        r.pending_calls.push(call(
            "s2",
            "sleep",
            PendingKind::Passive,
            Some("2026-05-01T22:00:00Z"),
        ));
        assert_eq!(describe(&r), "sleeping until 2026-05-01 22:00:00 UTC");
    }
}
