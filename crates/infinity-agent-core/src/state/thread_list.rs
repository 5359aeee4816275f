//! A thread as a list shows it ([`ThreadSummary`]), what it is doing in words ([`Activity`],
//! said in one of the [`Phrase`]s), and the questions a list answers ([`ThreadQuery`], a page of
//! them: [`ThreadPage`]).
//!
//! The phrases are the one source of the words. The web app is served them
//! (`/app/status-words.js`, made from [`Phrase::ALL`]) and says the same activity from a record
//! it keeps up to date, in `web/status.js` (`describeStatus`), by the rules of [`Activity::of`]:
//! change those rules in both. The web app also knows when the model is at work (from the event
//! stream, [`Phrase::RUNNING`]); a record alone does not say.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{MigrationState, PendingKind, ThreadRecord, ThreadStatus};
use crate::ids::ThreadId;
use crate::model::Usage;

/// What a thread is doing: a word for its kind of state (`moving`, `moved`, `closed`,
/// `suspended`, `waiting`, `sleeping`, `idle`) and a few words for a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Activity {
    /// The kind of state, for styling and filtering.
    pub state: String,
    /// The state in words: "waiting on lookup", "sleeping until 2026-05-01 21:07:09 UTC", ...
    pub text: String,
}

/// A way of saying what a thread is doing: its kind of state, and its words, with `{name}` where
/// a value of the record goes (`waiting on {tools}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phrase {
    /// The name the web app looks it up by.
    pub name: &'static str,
    /// The kind of state it says ([`Activity::state`]).
    pub state: &'static str,
    /// The words, with `{name}` for each value put in.
    pub text: &'static str,
}

impl Phrase {
    const fn new(name: &'static str, state: &'static str, text: &'static str) -> Self {
        Self { name, state, text }
    }

    /// Being moved to the host `{host}`.
    pub const MOVING: Phrase = Phrase::new("moving", "moving", "moving to {host}");
    /// Moved to the host `{host}`, where it lives now.
    pub const MOVED: Phrase = Phrase::new("moved", "moved", "moved to {host}");
    /// Closed: it takes no more input.
    pub const CLOSED: Phrase = Phrase::new("closed", "closed", "closed");
    /// Stopped at its conversation's budget.
    pub const BUDGET_REACHED: Phrase =
        Phrase::new("budget_reached", "suspended", "stopped: budget reached");
    /// Paused at an hourly limit until a person writes to it.
    pub const HOURLY_LIMIT: Phrase =
        Phrase::new("hourly_limit", "suspended", "paused: hourly limit reached");
    /// Calls of the tools `{tools}` wait for a person's approval.
    pub const APPROVAL: Phrase = Phrase::new(
        "approval",
        "waiting",
        "waiting for your approval of {tools}",
    );
    /// Calls of the tools `{tools}` are in flight.
    pub const TOOLS: Phrase = Phrase::new("tools", "waiting", "waiting on {tools}");
    /// A sleep is due at `{time}` (as [`person_time`](crate::history::person_time) writes it).
    pub const SLEEPING_UNTIL: Phrase =
        Phrase::new("sleeping_until", "sleeping", "sleeping until {time}");
    /// A sleep with no timer.
    pub const SLEEPING: Phrase = Phrase::new(
        "sleeping",
        "sleeping",
        "sleeping until an event or a message",
    );
    /// One open child is at work.
    pub const ONE_CHILD: Phrase = Phrase::new("one_child", "waiting", "waiting on 1 child thread");
    /// `{count}` (two or more) open children are at work.
    pub const CHILDREN: Phrase =
        Phrase::new("children", "waiting", "waiting on {count} child threads");
    /// A tool server asked a person a question.
    pub const ANSWER: Phrase = Phrase::new("answer", "waiting", "waiting for your answer");
    /// Nothing in flight: it waits for a message.
    pub const IDLE: Phrase = Phrase::new("idle", "idle", "idle");
    /// The web app's own: it sees the model at work in the event stream (a record alone does
    /// not say, so the CLI never shows it).
    pub const RUNNING: Phrase = Phrase::new("running", "running", "running");
    /// The web app's own: a conversation started on the page that has no record yet.
    pub const NEW: Phrase = Phrase::new("new", "new", "new");

    /// Every phrase.
    pub const ALL: &'static [Phrase] = &[
        Phrase::MOVING,
        Phrase::MOVED,
        Phrase::CLOSED,
        Phrase::BUDGET_REACHED,
        Phrase::HOURLY_LIMIT,
        Phrase::APPROVAL,
        Phrase::TOOLS,
        Phrase::SLEEPING_UNTIL,
        Phrase::SLEEPING,
        Phrase::ONE_CHILD,
        Phrase::CHILDREN,
        Phrase::ANSWER,
        Phrase::IDLE,
        Phrase::RUNNING,
        Phrase::NEW,
    ];

    /// The activity this phrase says, with `values` put in for its `{name}`s (a name with no
    /// value stays as it is).
    pub fn say(&self, values: &[(&str, &str)]) -> Activity {
        let mut text = String::new();
        let mut rest = self.text;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|at| open + at) else {
                break;
            };
            text.push_str(&rest[..open]);
            let name = &rest[open + 1..close];
            match values.iter().find(|(given, _)| *given == name) {
                Some((_, value)) => text.push_str(value),
                None => text.push_str(&rest[open..=close]),
            }
            rest = &rest[close + 1..];
        }
        text.push_str(rest);
        Activity {
            state: self.state.to_owned(),
            text,
        }
    }
}

impl Activity {
    /// The first that holds of: moving or moved to another host, closed, stopped at its
    /// conversation's budget, paused at an hourly limit, waiting for a person's approval of
    /// tool calls, waiting on tool calls (a client tool's among them), sleeping,
    /// waiting on its children, waiting for a person's answer, else idle. Calls the
    /// conversation moved on from (they have a stand-in result, their real one comes as an
    /// event) are not waited on.
    pub fn of(record: &ThreadRecord) -> Self {
        if let Some(migration) = &record.migration {
            let host = [("host", migration.to.as_str())];
            return match migration.state {
                MigrationState::Moving => Phrase::MOVING.say(&host),
                MigrationState::Moved { .. } => Phrase::MOVED.say(&host),
            };
        }
        if record.status == ThreadStatus::Closed {
            return Phrase::CLOSED.say(&[]);
        }
        match &record.suspended {
            Some(suspension) if suspension.budget => return Phrase::BUDGET_REACHED.say(&[]),
            Some(_) => return Phrase::HOURLY_LIMIT.say(&[]),
            None => {}
        }
        let waited_on = || record.pending_calls.iter().filter(|call| !call.moved_on);
        let mut tools: Vec<&str> = Vec::new();
        let mut approvals: Vec<&str> = Vec::new();
        for call in waited_on().filter(|call| call.kind == PendingKind::Dispatched) {
            let names = if call.approval.is_some() {
                &mut approvals
            } else {
                &mut tools
            };
            if !names.contains(&call.tool.as_str()) {
                names.push(&call.tool);
            }
        }
        if !approvals.is_empty() {
            return Phrase::APPROVAL.say(&[("tools", &approvals.join(", "))]);
        }
        if !tools.is_empty() {
            return Phrase::TOOLS.say(&[("tools", &tools.join(", "))]);
        }
        let mut sleeps = waited_on().filter(|call| call.kind == PendingKind::Passive);
        if let Some(first) = sleeps.next() {
            let due = std::iter::once(first)
                .chain(sleeps)
                .filter_map(|call| call.due)
                .min();
            return match due {
                Some(due) => {
                    Phrase::SLEEPING_UNTIL.say(&[("time", &crate::history::person_time(due))])
                }
                None => Phrase::SLEEPING.say(&[]),
            };
        }
        match record.children.iter().filter(|child| !child.closed).count() {
            0 => {}
            1 => return Phrase::ONE_CHILD.say(&[]),
            open => return Phrase::CHILDREN.say(&[("count", &open.to_string())]),
        }
        if !record.open_choices.is_empty() {
            return Phrase::ANSWER.say(&[]);
        }
        Phrase::IDLE.say(&[])
    }
}

/// Where a thread stands among the others: a conversation a person started, the root of a
/// conversation an agent delegated, or a child thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ThreadKind {
    /// The root of a conversation a person started.
    Conversation,
    /// The root of a conversation the `agent` tool started for another one.
    Delegation,
    /// A thread below a root.
    Child,
}

impl ThreadKind {
    /// The kind of `record`'s thread.
    pub fn of(record: &ThreadRecord) -> Self {
        match (&record.parent, &record.delegated_by) {
            (Some(_), _) => ThreadKind::Child,
            (None, Some(_)) => ThreadKind::Delegation,
            (None, None) => ThreadKind::Conversation,
        }
    }

    /// True for the roots of conversations (a person's or a delegation's).
    pub fn is_root(self) -> bool {
        self != ThreadKind::Child
    }
}

/// A thread as a list shows it: small and of a bounded size, whatever its record holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadSummary {
    /// The thread.
    pub id: ThreadId,
    /// Its kind.
    pub kind: ThreadKind,
    /// The root of its tree (itself for a root).
    pub root: ThreadId,
    /// Its parent, for a child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ThreadId>,
    /// The agent that runs it.
    pub agent: String,
    /// Its title, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Open or closed.
    pub status: ThreadStatus,
    /// What it is doing.
    pub activity: Activity,
    /// When it was created.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub created_at: Timestamp,
    /// When it last changed.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub updated_at: Timestamp,
    /// Its record's version.
    pub version: u64,
    /// What it used: for a root, its whole conversation's; for a child, its own.
    pub usage: Usage,
}

/// The longest title a summary carries (a title is set by a tool and may be long).
const TITLE_CHARS: usize = 200;

impl ThreadSummary {
    /// `record` as a list shows it.
    pub fn of(record: &ThreadRecord) -> Self {
        let kind = ThreadKind::of(record);
        Self {
            id: record.id.clone(),
            kind,
            root: record.root().clone(),
            parent: record.parent.as_ref().map(|p| p.thread_id.clone()),
            agent: record.agent.clone(),
            title: Self::title_of(record),
            status: record.status,
            activity: Activity::of(record),
            created_at: record.created_at,
            updated_at: record.updated_at,
            version: record.version,
            usage: if kind.is_root() {
                record.conversation.total
            } else {
                record.usage
            },
        }
    }

    /// The title a summary of `record` carries (cut to a bounded length).
    pub fn title_of(record: &ThreadRecord) -> Option<String> {
        record
            .title
            .as_ref()
            .map(|t| t.chars().take(TITLE_CHARS).collect())
    }

    /// The text a title search looks in: the title, or the id when there is none, in lower
    /// case.
    pub fn search_text(&self) -> String {
        self.title
            .as_deref()
            .unwrap_or(self.id.as_str())
            .to_lowercase()
    }
}

/// What a list of threads asks for: newest activity first, filtered, a page at a time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadQuery {
    /// Only threads of this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ThreadKind>,
    /// Only roots (conversations and delegations); `kind` narrows it further.
    #[serde(default)]
    pub roots: bool,
    /// Only open or only closed threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ThreadStatus>,
    /// Only threads of this agent (by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Only threads whose title (or id, without one) contains this, ignoring case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Only threads that changed at or after this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_since: Option<Timestamp>,
    /// Where the previous page ended ([`ThreadPage::next`]); `None` for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The most threads a page holds.
    pub limit: usize,
}

impl ThreadQuery {
    /// The default page size.
    pub const DEFAULT_LIMIT: usize = 50;
    /// The largest page size.
    pub const MAX_LIMIT: usize = 500;
}

/// One page of a list of threads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadPage {
    /// The threads, newest activity first.
    pub threads: Vec<ThreadSummary>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<String>,
}

/// A position in the order of lists (newest activity first; among threads that changed at the
/// same instant, the greater id first): a summary's update time and id, as an opaque cursor a
/// store can read back.
pub fn cursor_of(summary: &ThreadSummary) -> String {
    format!(
        "{}.{}",
        summary.updated_at.as_nanosecond(),
        summary.id.as_str()
    )
}

/// A JSON Schema `pattern` of the cursors [`read_cursor`] reads (the API's document gives it to
/// `GET /threads`'s `cursor`): nanoseconds since 1970 (up to 20 digits: before the year 5000),
/// `.`, a thread's id.
pub const CURSOR_PATTERN: &str = "^[0-9]{1,20}[.][A-Za-z0-9_-]{1,128}$";

/// A cursor made by [`cursor_of`], read back: `(updated_at, id)`; `None` when it is not one
/// (a time before 1970 is not: no thread changed then).
pub fn read_cursor(cursor: &str) -> Option<(Timestamp, ThreadId)> {
    let (at, id) = cursor.split_once('.')?;
    if at.is_empty() || !at.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let at = Timestamp::from_nanosecond(at.parse().ok()?).ok()?;
    Some((at, ThreadId::new(id).ok()?))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A thread of the agent `helper`, changed at second `at`.
    pub(crate) fn record(id: &str, at: i64, title: Option<&str>) -> ThreadRecord {
        let mut r = ThreadRecord::new(
            ThreadId::new(id).unwrap(),
            "helper",
            None,
            Timestamp::from_second(at).unwrap(),
        );
        r.title = title.map(str::to_owned);
        r
    }

    #[test]
    fn a_cursor_reads_back_and_nothing_else_does() {
        let summary = ThreadSummary::of(&record("web-1", 1_764_781_234, None));
        let cursor = cursor_of(&summary);
        assert_eq!(
            read_cursor(&cursor),
            Some((summary.updated_at, summary.id.clone()))
        );
        for refused in ["-1.x", "+1.x", ".x", "1.", "1", "x.1", "1.a b", "1.5.x"] {
            assert_eq!(read_cursor(refused), None, "{refused}");
        }
    }

    #[test]
    fn a_phrase_puts_in_the_values_it_names_and_leaves_the_rest() {
        let said = Phrase::TOOLS.say(&[("tools", "lookup, {count}")]);
        assert_eq!(
            (said.state.as_str(), said.text.as_str()),
            ("waiting", "waiting on lookup, {count}")
        );
        assert_eq!(
            Phrase::CHILDREN.say(&[]).text,
            "waiting on {count} child threads"
        );
        let odd = Phrase::new("odd", "idle", "a {b} {c");
        assert_eq!(odd.say(&[("b", "B"), ("c", "C")]).text, "a B {c");
        let names: std::collections::BTreeSet<&str> = Phrase::ALL.iter().map(|p| p.name).collect();
        assert_eq!(
            names.len(),
            Phrase::ALL.len(),
            "each phrase has a name of its own"
        );
    }

    #[test]
    fn a_summary_says_what_the_thread_does_and_stays_small() {
        let mut r = record("t", 0, Some(&"very long title ".repeat(100)));
        assert_eq!(Activity::of(&r), Phrase::IDLE.say(&[]));
        r.status = ThreadStatus::Closed;
        let summary = ThreadSummary::of(&r);
        assert_eq!(summary.activity.state, "closed");
        assert_eq!(summary.title.unwrap().chars().count(), TITLE_CHARS);
        assert_eq!(summary.kind, ThreadKind::Conversation);
    }
}
