//! A thread as a list shows it ([`ThreadSummary`]), what it is doing in words ([`Activity`]),
//! and the questions a list answers ([`ThreadQuery`], a page of them: [`ThreadPage`]).
//!
//! The web app says the same activity from a whole record in `web/status.js`
//! (`describeStatus`): the two must agree, word for word and rule for rule, so change both
//! together. The web app also knows when the model is at work (from the event stream,
//! "running"); a record alone does not say.

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

impl Activity {
    fn new(state: &str, text: impl Into<String>) -> Self {
        Self {
            state: state.to_owned(),
            text: text.into(),
        }
    }

    /// The first that holds of: moving or moved to another host, closed, stopped at its
    /// conversation's budget, paused at an hourly limit, waiting for a person's approval of
    /// tool calls, waiting on tool calls (a client tool's among them), sleeping,
    /// waiting on its children, waiting for a person's answer, else idle. Calls the
    /// conversation moved on from (they have a stand-in result, their real one comes as an
    /// event) are not waited on.
    pub fn of(record: &ThreadRecord) -> Self {
        if let Some(migration) = &record.migration {
            return match migration.state {
                MigrationState::Moving => {
                    Self::new("moving", format!("moving to {}", migration.to))
                }
                MigrationState::Moved { .. } => {
                    Self::new("moved", format!("moved to {}", migration.to))
                }
            };
        }
        if record.status == ThreadStatus::Closed {
            return Self::new("closed", "closed");
        }
        match &record.suspended {
            Some(suspension) if suspension.budget => {
                return Self::new("suspended", "stopped: budget reached")
            }
            Some(_) => return Self::new("suspended", "paused: hourly limit reached"),
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
            let text = format!("waiting for your approval of {}", approvals.join(", "));
            return Self::new("waiting", text);
        }
        if !tools.is_empty() {
            return Self::new("waiting", format!("waiting on {}", tools.join(", ")));
        }
        let mut sleeps = waited_on().filter(|call| call.kind == PendingKind::Passive);
        if let Some(first) = sleeps.next() {
            let due = std::iter::once(first)
                .chain(sleeps)
                .filter_map(|call| call.due)
                .min();
            return match due {
                Some(due) => Self::new(
                    "sleeping",
                    format!("sleeping until {}", crate::history::person_time(due)),
                ),
                None => Self::new("sleeping", "sleeping until an event or a message"),
            };
        }
        let open = record.children.iter().filter(|child| !child.closed).count();
        if open > 0 {
            let s = if open == 1 { "" } else { "s" };
            return Self::new("waiting", format!("waiting on {open} child thread{s}"));
        }
        if !record.open_choices.is_empty() {
            return Self::new("waiting", "waiting for your answer");
        }
        Self::new("idle", "idle")
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
    fn a_summary_says_what_the_thread_does_and_stays_small() {
        let mut r = record("t", 0, Some(&"very long title ".repeat(100)));
        assert_eq!(Activity::of(&r), Activity::new("idle", "idle"));
        r.status = ThreadStatus::Closed;
        let summary = ThreadSummary::of(&r);
        assert_eq!(summary.activity.state, "closed");
        assert_eq!(summary.title.unwrap().chars().count(), TITLE_CHARS);
        assert_eq!(summary.kind, ThreadKind::Conversation);
    }
}
