//! The bodies the routes over threads read and write, as the API's document describes them
//! (each derives or writes its `JsonSchema`).

use infinity_agent_core::catalog::AgentRef;
use infinity_agent_core::cost::{Budget, Usd};
use infinity_agent_core::ids::{InputId, ThreadId};
use infinity_agent_core::state::WhileBusy;
use infinity_agent_core::text::NOT_BLANK;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The body of every error answer.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ErrorBody {
    /// What went wrong, naming what was wrong with the request when it was.
    pub error: String,
}

/// 202: the input was kept, and the thread will take it.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Accepted {
    /// The thread that takes it.
    pub thread_id: ThreadId,
    /// The input's id: the thread's events name it when they answer it.
    pub input_id: InputId,
}

/// `GET /models`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Models {
    /// The models (`PROVIDER:MODEL`) threads may be switched to besides their agent's own.
    pub allowed: Vec<String>,
    /// Where the list is set (`--allow-model`, `INFINITY_ALLOWED_MODELS`).
    pub set_in: String,
}

/// `GET /agents`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Agents {
    /// The agent a new conversation gets when it names none.
    pub default: String,
    /// The stored agents, the newest version of each.
    pub stored: Vec<AgentVersion>,
}

/// A stored agent's version, as listed.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct AgentVersion {
    /// Its name.
    pub name: String,
    /// Its version, from 1.
    pub version: u32,
    /// Its `description:`.
    #[serde(default)]
    pub description: Option<String>,
    /// When it was saved.
    #[schemars(with = "infinity_agent_core::schema::Rfc3339")]
    pub saved_at: jiff::Timestamp,
}

/// `GET /threads/{id}/history`: the entries, oldest first.
pub type HistoryEntries = Vec<infinity_agent_core::history::HistoryEntry>;

/// `GET /threads/{id}/waiting`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct WaitingTree {
    /// The thread asked about.
    pub thread_id: ThreadId,
    /// How many of the threads are stuck (waiting on nothing that will come).
    pub stuck: usize,
    /// The thread and each open thread below it.
    pub threads: Vec<infinity_agent_core::state::waits::Waits>,
}

/// 202 for a new schedule.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct ScheduleCreated {
    /// The thread it runs on.
    pub thread_id: ThreadId,
    /// Its id (for `DELETE /threads/{id}/schedules/{schedule}`).
    pub schedule_id: String,
    /// What it does: its next occurrences.
    pub text: String,
}

/// The answer given to a question.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Chosen {
    /// The call that asked.
    pub call_id: String,
    /// The index of the choice taken.
    pub selected: usize,
    /// The choice taken.
    pub choice: String,
}

/// A person's message.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// The text (not blank: it has a character other than whitespace and invisible ones).
    #[schemars(regex(pattern = NOT_BLANK), length(min = 1))]
    pub(crate) text: String,
    /// For a new conversation: the agent that runs it, `NAME` or `NAME@VERSION` (default: the
    /// server's).
    #[serde(default)]
    #[schemars(regex(pattern = AgentRef::PATTERN))]
    pub(crate) agent: Option<String>,
    /// What the message does if the thread is busy (a call it made has no result yet), instead
    /// of what its agent says: `move_on`, `queue`, `interrupt` or `reject` (409 at once when
    /// the thread is busy).
    #[serde(default)]
    pub(crate) while_busy: Option<WhileBusy>,
}

/// The application's result for a call of a client tool.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// The result, as the model reads it (JSON, or any text).
    pub(crate) text: String,
    /// True when the call failed: the model reads `text` as the error.
    #[serde(default)]
    pub(crate) is_error: bool,
}

/// A press of a widget's button.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WidgetAction {
    /// The button's action (not blank).
    #[schemars(regex(pattern = NOT_BLANK), length(min = 1))]
    pub(crate) action: String,
    /// The widget's fields, by name.
    #[serde(default)]
    pub(crate) values: serde_json::Map<String, serde_json::Value>,
}

/// Moves a thread to another version of its agent.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseAgent {
    /// `NAME` (the newest version) or `NAME@VERSION`: the thread's own agent.
    #[schemars(regex(pattern = AgentRef::PATTERN))]
    pub(crate) agent: String,
}

/// Switches a thread's model.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseModel {
    /// `PROVIDER:MODEL`, one `GET /models` lists or the agent's own; `null`: the agent's.
    pub(crate) model: Option<String>,
}

/// A conversation's lifetime budget as a person sets it: dollars, tokens or both, neither zero
/// (what it leaves out stays as it was).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("minProperties" = 1))]
pub struct NewBudget {
    // A field left out is absent, never `null`: `skip_serializing_if` keeps a `default: null`
    // out of the document.
    /// Dollars the conversation's completions may cost, all its threads together (from a
    /// billionth: less is kept as nothing).
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Usd", extend("minimum" = 0.000_000_001))]
    usd: Option<Usd>,
    /// Tokens (prompt, cache and output) they may use (from 1).
    #[serde(
        default,
        deserialize_with = "given",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "u64", range(min = 1))]
    tokens: Option<u64>,
}

/// A field that may be left out but is not `null` when given.
fn given<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

impl From<NewBudget> for Budget {
    fn from(set: NewBudget) -> Self {
        Budget {
            usd: set.usd,
            tokens: set.tokens,
        }
    }
}

/// The optional body of `close` and `interrupt`: `{"tree": true}` acts on the thread's open
/// descendants too.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TreeOption {
    /// Act on the thread's open descendants too.
    #[serde(default)]
    pub(crate) tree: bool,
}

/// An answer to a question: `{"selected": N}` or `{"dismiss": true}`, not both.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    #[serde(default)]
    pub(crate) selected: Option<usize>,
    #[serde(default)]
    pub(crate) dismiss: bool,
}

impl JsonSchema for Choice {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Choice".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "An answer to a question: one of the choices, or none.",
            "oneOf": [
                {"type": "object", "title": "Selected", "required": ["selected"],
                 "additionalProperties": false,
                 "properties": {"selected": {"type": "integer", "format": "uint", "minimum": 0,
                                             "description": "The index of the choice taken."}}},
                {"type": "object", "title": "Dismissed", "required": ["dismiss"],
                 "additionalProperties": false,
                 "properties": {"dismiss": {"const": true,
                                            "description": "Declines to answer."}}},
            ],
        })
    }
}
