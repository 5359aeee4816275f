//! The scripted model: answers from a YAML file of rules, so agents run with no network.
//!
//! ```yaml
//! rules:                      # tried in order; the first that matches answers
//!   - when: "remind me"       # optional regex over the text the rule sees
//!     reply:
//!       text: "Okay."         # optional
//!       tool_calls:           # optional
//!         - name: sleep
//!           args: {seconds: 2}
//!           id: toolu_1       # optional: the id a provider would give (the runtime mints its own)
//!   - when: "think hard"
//!     reply: {text: "Hmm.", delay_ms: 5000}  # optional: answer this slowly, like a busy model
//!   - when: "flaky"
//!     reply: {text: "A long answer.", break_after: 2}  # optional: see below
//!   - reply: {text: "Done."}  # a rule with no `when` always matches
//! latency:                    # optional: every reply without a delay_ms takes model-like time
//!   first_token_ms: 800       # before the first piece of text
//!   tokens_per_second: 60     # then this fast (a token per four characters, tool calls too)
//! ```
//!
//! **The text a rule sees** is the newest message of the request: everything that reached the
//! thread since the model last spoke, one line per entry. A tool result reads
//! `<tool name> <arguments as JSON> -> <result text>`; a message reads as its text. Capture groups
//! of `when` fill `$1`, `$2`, ... in the reply text and in string arguments (`$$` is a literal
//! `$`). A real model learns its thread ID and stack from the system prompt; a script gets them
//! as `${thread_id}` (in any string) and `${stack}` (a string argument that is exactly `${stack}`
//! becomes the stack as a JSON array, e.g. for `spawn_thread`'s `child_of`). `thread: root` or `thread: child` restricts a rule to root or child threads;
//! `scope: all` makes a rule see every entry of the request, each rendered the same way (an
//! assistant turn reads as its text), joined by newlines.
//!
//! **`break_after: N`** plays a stream that breaks: the first time the rule answers, its
//! stream stops after N pieces (words) with a transient error, as a reset connection does; the
//! runtime withdraws what was shown (`assistant_restarted`) and asks again, and the rule then
//! answers whole. Without streaming the first answer fails the same way, before any text.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::model::ModelProvider;

mod play;
#[cfg(test)]
mod tests;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    /// The context window the script claims, in tokens (default 128,000). When it is set,
    /// whole prompts are measured (a quarter of their characters) so tests can reach the
    /// compaction threshold; otherwise only the newest message is, which keeps a slice's cost
    /// independent of the history's length.
    #[serde(default)]
    context_window: Option<u32>,
    /// How long replies without a `delay_ms` of their own take (default: no time).
    #[serde(default)]
    latency: Option<Latency>,
    rules: Vec<RuleFile>,
}

/// A model's pace: the time to its first token, then its tokens per second.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct Latency {
    #[serde(default)]
    first_token_ms: u64,
    /// 0: the whole reply at once after the first token.
    #[serde(default)]
    tokens_per_second: f64,
}

impl Latency {
    /// The time `text` takes to come out at this pace (a token per four characters).
    fn output_time(&self, text: &str) -> Duration {
        if self.tokens_per_second <= 0.0 || !self.tokens_per_second.is_finite() {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(text.len() as f64 / 4.0 / self.tokens_per_second)
    }
}

/// How long one completion takes: a rule's fixed delay, or the script's latency.
#[derive(Debug, Clone, Copy)]
enum Pace {
    Fixed(Duration),
    Model(Latency),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    #[serde(default)]
    when: Option<String>,
    #[serde(default)]
    thread: Option<ThreadFilter>,
    #[serde(default)]
    scope: Scope,
    reply: Reply,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ThreadFilter {
    Root,
    Child,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Scope {
    #[default]
    Newest,
    All,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Reply {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
    /// How long the completion takes, in milliseconds.
    #[serde(default)]
    delay_ms: u64,
    /// The first answer's stream breaks off after this many pieces.
    #[serde(default)]
    break_after: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    #[serde(default = "empty_object")]
    args: Value,
    /// The provider's id for the call; lets a script play a provider that repeats ids.
    #[serde(default)]
    id: Option<String>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

#[derive(Debug)]
struct Rule {
    when: Option<Regex>,
    thread: Option<ThreadFilter>,
    scope: Scope,
    reply: Reply,
    /// Whether the rule's one broken stream (`break_after`) has been played.
    broke: std::sync::atomic::AtomicBool,
}

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("{path}: cannot read the script: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The YAML is malformed or has unknown keys.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A `when` is not a valid regex.
    #[error("{path}: rule {rule}: `when` is not a valid regex: {reason}")]
    BadRegex {
        /// The file.
        path: PathBuf,
        /// The rule's position, from 1.
        rule: usize,
        /// Why.
        reason: String,
    },
}

/// What is wrong with a YAML file that should be `what` ("a script"), said without quoting the
/// text: a file may be one someone named (`script:PATH`), and what it holds must never reach an
/// error message. The parser's own words quote values (`invalid type:
/// string "..."`) and keys (`unknown field `...``); what stays is the kind of problem, what was
/// expected (our own names) and where.
fn yaml_problem(error: &serde_yaml_ng::Error, what: &str) -> String {
    let message = error.to_string();
    let at = error
        .location()
        .map(|l| format!(" at line {} column {}", l.line(), l.column()))
        .unwrap_or_default();
    // What was expected comes last, after any quoted text, and names our own types and keys.
    let expected = message
        .rfind("expected ")
        .map(|i| &message[i..])
        .map(|rest| rest.rfind(" at line ").map_or(rest, |end| &rest[..end]));
    let kind = [
        ("unknown field", "an unknown key"),
        ("unknown variant", "a value that is not one of the choices"),
        ("invalid type", "a value of the wrong type"),
        ("invalid value", "a value that is not allowed"),
        ("invalid length", "a list of the wrong length"),
        (
            "did not match any variant",
            "a value of none of the allowed shapes",
        ),
        ("missing field", "a missing key"),
        ("duplicate field", "a key given twice"),
    ]
    .into_iter()
    .find(|(marker, _)| message.contains(marker));
    match (kind, expected) {
        // A missing key is one of ours: naming it helps and quotes nothing of the file.
        (Some(("missing field", _)), _) => message
            .split("missing field ")
            .nth(1)
            .and_then(|rest| rest.split('`').nth(1))
            .map(|key| format!("the key `{key}` is missing{at}"))
            .unwrap_or_else(|| format!("a key is missing{at}")),
        (Some((_, kind)), Some(expected)) => format!("not {what}: {kind}, {expected}{at}"),
        (Some((_, kind)), None) => format!("not {what}: {kind}{at}"),
        (None, _) => format!("not {what} (not YAML of the expected shape){at}"),
    }
}

/// Why a rule's `when` is not a regex, without the pattern (the regex crate's message quotes it).
fn regex_problem(error: &regex::Error) -> String {
    let message = error.to_string();
    message
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix("error: "))
        .map(str::to_owned)
        .unwrap_or_else(|| match error {
            regex::Error::CompiledTooBig(limit) => {
                format!("it compiles to more than {limit} bytes")
            }
            _ => "it does not parse".to_owned(),
        })
}

/// A [`ModelProvider`] that answers from rules. See the module docs.
pub struct ScriptedModel {
    name: String,
    context_window: u32,
    measure_prompts: bool,
    latency: Option<Latency>,
    rules: Vec<Rule>,
}

impl fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .field("rules", &self.rules.len())
            .finish()
    }
}

impl ScriptedModel {
    /// Loads a script file.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses script text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ScriptError> {
        let file: ScriptFile = serde_yaml_ng::from_str(text).map_err(|e| ScriptError::Parse {
            path: path.to_owned(),
            reason: yaml_problem(&e, "a script"),
        })?;
        let rules = file
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                let when = r.when.map(|w| Regex::new(&w)).transpose().map_err(|e| {
                    ScriptError::BadRegex {
                        path: path.to_owned(),
                        rule: i + 1,
                        reason: regex_problem(&e),
                    }
                })?;
                Ok(Rule {
                    when,
                    thread: r.thread,
                    scope: r.scope,
                    reply: r.reply,
                    broke: Default::default(),
                })
            })
            .collect::<Result<Vec<_>, ScriptError>>()?;
        Ok(Self {
            name: format!("script:{}", path.display()),
            context_window: file.context_window.unwrap_or(128_000),
            measure_prompts: file.context_window.is_some(),
            latency: file.latency,
            rules,
        })
    }

    /// Loads a script, shared as a model provider.
    pub fn load_arc(path: &Path) -> Result<Arc<dyn ModelProvider>, ScriptError> {
        Ok(Arc::new(Self::load(path)?))
    }
}
