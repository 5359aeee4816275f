//! Playing a script: the text a rule sees, the substitutions in its reply, and the reply as a
//! completion (whole or streamed, at the script's pace).

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::*;
use crate::history::{HistoryEntry, HistoryView, Item};
use crate::model::Usage;
use crate::model::{Completion, CompletionRequest, ModelError, ModelToolCall, StopReason};

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
pub(super) fn newest_text(history: HistoryView<'_>) -> String {
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
    ModelError::retryable(
        crate::model::ModelErrorKind::Network,
        format!("{model}: the stream broke off (the script's break_after)"),
    )
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
                stack: request.lineage,
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
        Err(ModelError::terminal(
            crate::model::ModelErrorKind::Other,
            format!(
                "{}: no rule matched the text {:?}",
                self.name,
                crate::tools::clip(&newest, 500)
            ),
        ))
    }
}
