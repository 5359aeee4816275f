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

use async_trait::async_trait;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use crate::history::{HistoryEntry, HistoryView, Item};
use crate::model::Usage;
use crate::model::{
    Completion, CompletionRequest, ModelError, ModelProvider, ModelToolCall, StopReason,
};

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

/// Renders one entry the way rules see it, or `None` for entries that read as nothing.
fn render(entry: &HistoryEntry, history: HistoryView<'_>) -> Option<String> {
    match &entry.item {
        Item::Message { text, .. } => Some(text.clone()),
        Item::Assistant { text, .. } => text.clone().filter(|t| !t.is_empty()),
        Item::ToolResult {
            call_id,
            name,
            text,
            ..
        } => {
            let args = history
                .iter()
                .rev()
                .flat_map(|e| e.item.tool_calls())
                .find(|c| &c.id == call_id)
                .map(|c| c.args.to_string())
                .unwrap_or_else(|| "{}".to_owned());
            Some(format!("{name} {args} -> {text}"))
        }
        Item::Summary { text, .. } => Some(crate::history::summary_text(text)),
        Item::Notice { .. } => None,
    }
}

/// The text rules with `scope: newest` see: what arrived since the model last spoke.
fn newest_text(history: HistoryView<'_>) -> String {
    let start = history
        .rposition(|e| {
            matches!(
                e.item,
                Item::Assistant {
                    synthetic: false,
                    ..
                }
            )
        })
        .map_or(0, |i| i + 1);
    history
        .since(start)
        .filter(|e| !matches!(e.item, Item::Assistant { .. }))
        .filter_map(|e| render(e, history))
        .collect::<Vec<_>>()
        .join("\n")
}

fn all_text(history: HistoryView<'_>) -> String {
    history
        .iter()
        .filter_map(|e| render(e, history))
        .collect::<Vec<_>>()
        .join("\n")
}

/// What `$...` placeholders are filled with.
struct Bindings<'a> {
    captures: Vec<Option<String>>,
    thread_id: &'a str,
    stack: &'a [crate::ids::ThreadId],
}

/// Replaces `$1`, `$2`, ... with capture groups, `${thread_id}` with the thread id and `$$`
/// with `$`.
fn substitute(template: &str, b: &Bindings<'_>) -> String {
    substitute_captures(&template.replace("${thread_id}", b.thread_id), &b.captures)
}

fn substitute_captures(template: &str, captures: &[Option<String>]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'$') {
            chars.next();
            out.push('$');
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(n) => out.push_str(captures.get(n).and_then(|c| c.as_deref()).unwrap_or("")),
            Err(_) => out.push('$'),
        }
    }
    out
}

fn substitute_value(value: &Value, b: &Bindings<'_>) -> Value {
    match value {
        Value::String(s) if s == "${stack}" => Value::Array(
            b.stack
                .iter()
                .map(|t| Value::String(t.to_string()))
                .collect(),
        ),
        Value::String(s) => Value::String(substitute(s, b)),
        Value::Array(items) => Value::Array(items.iter().map(|v| substitute_value(v, b)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), substitute_value(v, b)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[async_trait]
impl ModelProvider for ScriptedModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.context_window
    }

    /// Streams the reply text word by word, as a real model streams tokens.
    async fn complete_streaming(
        &self,
        request: CompletionRequest<'_>,
        on_text: &crate::model::TextSink<'_>,
    ) -> Result<Completion, ModelError> {
        let Answer {
            completion,
            pace,
            breaks,
        } = self.answer(request)?;
        let latency = match pace {
            Pace::Fixed(delay) => {
                pause(delay).await;
                None
            }
            Pace::Model(latency) => {
                pause(Duration::from_millis(latency.first_token_ms)).await;
                Some(latency)
            }
        };
        if let Some(text) = &completion.text {
            for (i, piece) in text.split_inclusive(' ').enumerate() {
                if breaks == Some(i) {
                    return Err(broke_off(&self.name));
                }
                on_text(crate::model::Streamed::Text(piece));
                if let Some(latency) = latency {
                    pause(latency.output_time(piece)).await;
                }
            }
        }
        if breaks.is_some() {
            return Err(broke_off(&self.name));
        }
        if let Some(latency) = latency {
            pause(latency.output_time(&calls_text(&completion))).await;
        }
        Ok(completion)
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        let Answer {
            completion,
            pace,
            breaks,
        } = self.answer(request)?;
        if breaks.is_some() {
            return Err(broke_off(&self.name));
        }
        let time = match pace {
            Pace::Fixed(delay) => delay,
            Pace::Model(latency) => {
                let text = completion.text.as_deref().unwrap_or_default();
                Duration::from_millis(latency.first_token_ms)
                    + latency.output_time(text)
                    + latency.output_time(&calls_text(&completion))
            }
        };
        pause(time).await;
        Ok(completion)
    }
}

/// Waits `time`; no wait at all (and no timer) when it is zero, so a script without delays runs
/// on a runtime without timers.
async fn pause(time: Duration) {
    if !time.is_zero() {
        tokio::time::sleep(time).await;
    }
}

/// The tool calls of a completion as a model would write them (their names and arguments).
fn calls_text(completion: &Completion) -> String {
    completion
        .tool_calls
        .iter()
        .map(|c| format!("{}{}", c.name, c.args))
        .collect()
}

/// A rule's reply to one request.
struct Answer {
    completion: Completion,
    pace: Pace,
    /// The stream breaks off after this many pieces.
    breaks: Option<usize>,
}

/// The transient error of a `break_after` stream.
fn broke_off(model: &str) -> ModelError {
    ModelError::Retryable(format!(
        "{model}: the stream broke off (the script's break_after)"
    ))
}

impl ScriptedModel {
    /// The reply of the first rule that matches, and how long it takes (not waited here).
    fn answer(&self, request: CompletionRequest<'_>) -> Result<Answer, ModelError> {
        let newest = newest_text(request.history);
        let mut all: Option<String> = None;
        for rule in &self.rules {
            match rule.thread {
                Some(ThreadFilter::Root) if !request.is_root => continue,
                Some(ThreadFilter::Child) if request.is_root => continue,
                _ => {}
            }
            let text: &str = match rule.scope {
                Scope::Newest => &newest,
                Scope::All => all.get_or_insert_with(|| all_text(request.history)),
            };
            let captures: Vec<Option<String>> = match &rule.when {
                None => vec![Some(text.to_owned())],
                Some(re) => match re.captures(text) {
                    None => continue,
                    Some(c) => c.iter().map(|m| m.map(|m| m.as_str().to_owned())).collect(),
                },
            };
            let bindings = Bindings {
                captures,
                thread_id: request.thread_id.as_str(),
                stack: request.stack,
            };
            let tool_calls: Vec<ModelToolCall> = rule
                .reply
                .tool_calls
                .iter()
                .map(|c| ModelToolCall {
                    id: c.id.clone(),
                    name: c.name.clone(),
                    args: substitute_value(&c.args, &bindings),
                })
                .collect();
            let pace = match self.latency {
                Some(latency) if rule.reply.delay_ms == 0 => Pace::Model(latency),
                _ => Pace::Fixed(Duration::from_millis(rule.reply.delay_ms)),
            };
            let completion = Completion {
                text: rule.reply.text.as_deref().map(|t| substitute(t, &bindings)),
                stop_reason: if tool_calls.is_empty() {
                    StopReason::EndTurn
                } else {
                    StopReason::ToolUse
                },
                tool_calls,
                usage: Usage {
                    // A rough prompt size: a token per four characters of what is measured.
                    input_tokens: if self.measure_prompts {
                        ((request.system.len()
                            + all.get_or_insert_with(|| all_text(request.history)).len())
                            / 4) as u64
                    } else {
                        (newest.len() / 4) as u64
                    },
                    ..Usage::default()
                },
            };
            let breaks = rule
                .reply
                .break_after
                .filter(|_| !rule.broke.swap(true, std::sync::atomic::Ordering::Relaxed));
            return Ok(Answer {
                completion,
                pace,
                breaks,
            });
        }
        Err(ModelError::Terminal(format!(
            "{}: no rule matched the text {:?}",
            self.name,
            crate::tools::clip(&newest, 500)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::ToolCall;
    use crate::ids::{CallId, ThreadId};
    use jiff::Timestamp;

    fn entry(item: Item) -> Arc<HistoryEntry> {
        Arc::new(HistoryEntry {
            seq: 0,
            at: Timestamp::UNIX_EPOCH,
            input_id: None,
            item,
        })
    }

    #[test]
    fn a_file_that_is_not_a_script_is_refused_without_quoting_it() {
        let path = Path::new("secret.yaml");
        for (text, says) in [
            ("root:x:0:0:root:/root:/bin/bash\n", "not a script"),
            ("token: s3cr3t-value\n", "an unknown key, expected"),
            (
                "rules:\n  - when: ok\n    secret_key: x\n",
                "an unknown key, expected",
            ),
            ("rules: \"s3cr3t-value\"\n", "a value of the wrong type"),
            ("rules:\n  - when: x\n", "`reply` is missing"),
            (
                "rules:\n  - when: \"(s3cr3t-value\"\n    reply: {text: hi}\n",
                "`when` is not a valid regex",
            ),
            ("{ s3cr3t-value: [\n", "not a script"),
        ] {
            let error = ScriptedModel::parse(text, path).unwrap_err().to_string();
            assert!(error.contains(says), "{text}: {error}");
            assert!(error.starts_with("secret.yaml: "), "{error}");
            for secret in ["root:x", "/bin/bash", "s3cr3t", "token", "secret_key"] {
                assert!(!error.contains(secret), "{text}: {error}");
            }
        }
    }

    async fn ask(
        script: &str,
        history: &[Arc<HistoryEntry>],
        is_root: bool,
    ) -> Result<Completion, ModelError> {
        let model = ScriptedModel::parse(script, Path::new("t.yaml")).unwrap();
        let id = ThreadId::new("t").unwrap();
        let stack = [ThreadId::new("root").unwrap(), id.clone()];
        model
            .complete(CompletionRequest {
                thread_id: &id,
                is_root,
                stack: &stack,
                system: "",
                tools: &[],
                history: HistoryView::from_slice(history),
            })
            .await
    }

    #[tokio::test]
    async fn a_break_after_rule_breaks_its_first_stream_once() {
        let model = ScriptedModel::parse(
            "rules: [{reply: {text: 'one two three four', break_after: 2}}]",
            Path::new("t.yaml"),
        )
        .unwrap();
        let id = ThreadId::new("t").unwrap();
        let history = [entry(Item::user("hi"))];
        let stream = || async {
            let seen = std::sync::Mutex::new(String::new());
            let sink = |piece: crate::model::Streamed<'_>| {
                if let crate::model::Streamed::Text(piece) = piece {
                    seen.lock().unwrap().push_str(piece);
                }
            };
            let request = CompletionRequest {
                thread_id: &id,
                is_root: true,
                stack: std::slice::from_ref(&id),
                system: "",
                tools: &[],
                history: HistoryView::from_slice(&history),
            };
            let result = model.complete_streaming(request, &sink).await;
            (result, seen.into_inner().unwrap())
        };
        let (first, shown) = stream().await;
        match first {
            Err(ModelError::Retryable(why)) => assert!(why.contains("broke off"), "{why}"),
            other => panic!("the first stream did not break: {other:?}"),
        }
        assert_eq!(shown, "one two ");
        let (second, shown) = stream().await;
        assert_eq!(second.unwrap().text.as_deref(), Some("one two three four"));
        assert_eq!(shown, "one two three four");
    }

    #[tokio::test(start_paused = true)]
    async fn a_script_s_latency_paces_its_replies_like_a_model() {
        // 800 ms to the first token, then 10 tokens (40 characters) a second.
        let script = r#"
latency: {first_token_ms: 800, tokens_per_second: 10}
rules:
  - when: "slow"
    reply: {text: "fixed", delay_ms: 50}
  - reply: {text: "forty characters of text, eight pieces.."}
"#;
        let started = tokio::time::Instant::now();
        ask(script, &[entry(Item::user("hi"))], true).await.unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(1800));
        // A rule's own delay wins.
        let started = tokio::time::Instant::now();
        ask(script, &[entry(Item::user("slow"))], true)
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_millis(50));
        // Streamed: the first piece at the first-token time, each next one as long after as
        // the one before takes to write.
        let model = ScriptedModel::parse(script, Path::new("t.yaml")).unwrap();
        let id = ThreadId::new("t").unwrap();
        let history = [entry(Item::user("hi"))];
        let started = tokio::time::Instant::now();
        let seen = std::sync::Mutex::new(Vec::new());
        let sink = |piece: crate::model::Streamed<'_>| {
            let crate::model::Streamed::Text(piece) = piece else {
                panic!("nothing broke, yet the stream restarted");
            };
            seen.lock()
                .unwrap()
                .push((started.elapsed(), piece.to_owned()));
        };
        let request = CompletionRequest {
            thread_id: &id,
            is_root: true,
            stack: std::slice::from_ref(&id),
            system: "",
            tools: &[],
            history: HistoryView::from_slice(&history),
        };
        model.complete_streaming(request, &sink).await.unwrap();
        let seen = seen.into_inner().unwrap();
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert_eq!(seen[0].0, Duration::from_millis(800));
        assert_eq!(seen[5].0, Duration::from_millis(1600), "{seen:?}");
        assert_eq!(started.elapsed(), Duration::from_millis(1800));
    }

    #[tokio::test]
    async fn first_matching_rule_answers_with_captures() {
        let script = r#"
rules:
  - when: "remind me in (\\d+)s"
    reply:
      text: "Okay, $1 seconds; costs $$0."
      tool_calls: [{name: sleep, args: {seconds: "$1", nested: ["$1"], me: "${thread_id}", up: "${stack}"}}]
  - reply: {text: "fallback"}
"#;
        let c = ask(script, &[entry(Item::user("please remind me in 5s"))], true)
            .await
            .unwrap();
        assert_eq!(c.text.as_deref(), Some("Okay, 5 seconds; costs $0."));
        assert_eq!(c.tool_calls[0].args["seconds"], "5");
        assert_eq!(c.tool_calls[0].args["nested"][0], "5");
        assert_eq!(c.tool_calls[0].args["me"], "t");
        assert_eq!(c.tool_calls[0].args["up"], serde_json::json!(["root", "t"]));
        let c = ask(script, &[entry(Item::user("hello"))], true)
            .await
            .unwrap();
        assert_eq!(c.text.as_deref(), Some("fallback"));
    }

    #[tokio::test]
    async fn tool_results_render_with_name_and_args() {
        let call = ToolCall {
            id: CallId::new("c1").unwrap(),
            name: "spawn_thread".into(),
            args: serde_json::json!({"instructions": "x"}),
        };
        let history = vec![
            entry(Item::user("go")),
            entry(Item::Assistant {
                text: None,
                tool_calls: vec![call.clone()],
                synthetic: false,
            }),
            entry(Item::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                text: "Child thread spawned with ID: t-1".into(),
                is_error: false,
                images: Vec::new(),
                display_as: Vec::new(),
            }),
        ];
        assert_eq!(
            newest_text(HistoryView::from_slice(&history)),
            r#"spawn_thread {"instructions":"x"} -> Child thread spawned with ID: t-1"#
        );
        let script = "rules:\n  - when: 'ID: (\\S+)'\n    reply: {text: 'child $1'}\n";
        let c = ask(script, &history, true).await.unwrap();
        assert_eq!(c.text.as_deref(), Some("child t-1"));
    }

    #[tokio::test]
    async fn thread_filter_and_scope_all() {
        let script = r#"
rules:
  - thread: child
    reply: {text: "child rule"}
  - when: "first"
    scope: all
    reply: {text: "saw all"}
"#;
        let history = vec![
            entry(Item::user("first")),
            entry(Item::Assistant {
                text: Some("ok".into()),
                tool_calls: vec![],
                synthetic: false,
            }),
            entry(Item::user("second")),
        ];
        assert_eq!(
            ask(script, &history, false).await.unwrap().text.as_deref(),
            Some("child rule")
        );
        assert_eq!(
            ask(script, &history, true).await.unwrap().text.as_deref(),
            Some("saw all")
        );
    }

    #[tokio::test]
    async fn no_match_names_the_text() {
        let script = "rules:\n  - when: nope\n    reply: {text: x}\n";
        let err = ask(script, &[entry(Item::user("hello there"))], true)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("\"hello there\""), "{err}");
    }

    #[test]
    fn bad_scripts_are_rejected_with_location() {
        let err = ScriptedModel::parse(
            "rules:\n  - when: '('\n    reply: {}\n",
            Path::new("s.yaml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("rule 1"), "{err}");
        let err =
            ScriptedModel::parse("rules:\n  - reply: {txt: x}\n", Path::new("s.yaml")).unwrap_err();
        // Where, and what was expected; the unknown key itself is the file's text, not quoted.
        let err = err.to_string();
        assert!(
            err.contains("an unknown key, expected one of `text`")
                && err.contains("line 2 column 13")
                && !err.contains("txt"),
            "{err}"
        );
    }
}
