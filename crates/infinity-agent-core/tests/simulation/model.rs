//! The model of the simulation: seeded, and shaped to use every kind of tool (dispatched,
//! passive, synchronous, thread tools, delegation, bad calls), with injected failures.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use infinity_agent_core::history::Item;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelErrorKind, ModelProvider, ModelToolCall,
    StopReason, Usage,
};
use serde_json::{json, Value};

use crate::simulation::rng::Rng;

/// How often completions fail, in per mille.
#[derive(Debug, Clone, Copy)]
pub struct ModelFaults {
    pub retryable: u64,
    pub terminal: u64,
}

/// The simulation's model: each completion draws from its own seeded stream.
#[derive(Debug)]
pub struct SimModel {
    name: String,
    rng: Mutex<Rng>,
    window: u32,
    faults: Mutex<ModelFaults>,
    /// Per thread: completions answered, threads spawned, delegations made. Budgets on these
    /// keep every run finite (compaction shortens what the model sees, so the history cannot).
    counts: Mutex<BTreeMap<String, (u32, u32, u32)>>,
}

impl SimModel {
    pub fn new(name: &str, seed: u64, window: u32, faults: ModelFaults) -> Self {
        Self {
            name: name.to_owned(),
            rng: Mutex::new(Rng::new(seed)),
            window,
            faults: Mutex::new(faults),
            counts: Mutex::default(),
        }
    }

    /// From now on, no injected failures (the simulation drains).
    pub fn heal(&self) {
        *self.faults.lock().unwrap() = ModelFaults {
            retryable: 0,
            terminal: 0,
        };
    }
}

fn call(name: &str, args: Value, id: Option<String>) -> ModelToolCall {
    ModelToolCall {
        id,
        name: name.to_owned(),
        args,
    }
}

/// Makes the first string argument `bytes` longer (arguments without one stay as they are).
fn inflate(args: &mut Value, bytes: usize) {
    if let Some(Value::String(s)) = args
        .as_object_mut()
        .and_then(|m| m.values_mut().find(|v| v.is_string()))
    {
        s.push_str(&" and more".repeat(bytes / 9));
    }
}

/// Children this thread spawned, from the results of its `spawn_thread` calls.
fn spawned(request: &CompletionRequest<'_>) -> Vec<String> {
    request
        .history
        .iter()
        .filter_map(|e| match &e.item {
            Item::ToolResult { name, text, .. } if name == "spawn_thread" => text
                .strip_prefix("Child thread spawned with ID: ")
                .map(str::to_owned),
            _ => None,
        })
        .collect()
}

#[async_trait]
impl ModelProvider for SimModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.window
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        let faults = *self.faults.lock().unwrap();
        let mut rng = self.rng.lock().unwrap();
        let usage = Usage {
            // A prompt costs ten tokens an entry, so a small window compacts.
            input_tokens: 10 * request.history.len() as u64,
            output_tokens: 5,
            ..Usage::default()
        };
        let roll = rng.below(1000);
        if roll < faults.retryable {
            return Err(ModelError::retryable(
                ModelErrorKind::Unavailable,
                "simulated overload",
            ));
        }
        if roll < faults.retryable + faults.terminal {
            return Err(ModelError::terminal(
                ModelErrorKind::Refused,
                "simulated bad request",
            ));
        }
        // Now and then something far bigger than a queue's message: a long text, a call with
        // long arguments.
        let big = (rng.below(40) == 0).then(|| 12_000 + rng.below(48_000) as usize);
        let text = |t: &str| Completion {
            text: Some(match big {
                Some(bytes) => format!("{t} {}", "long text ".repeat(bytes / 10)),
                None => t.to_owned(),
            }),
            tool_calls: Vec::new(),
            stop_reason: StopReason::EndTurn,
            usage,
        };
        if request.tools.is_empty() {
            return Ok(text("A summary of the conversation so far."));
        }
        let me = request.thread_id.to_string();
        let mut counts = self.counts.lock().unwrap();
        let (turns, spawns, delegations) = counts.entry(me.clone()).or_default();
        *turns += 1;
        if *turns > 12 {
            return Ok(text("That is all for now."));
        }
        let stack: Vec<String> = request.lineage.iter().map(ToString::to_string).collect();
        let children = spawned(&request);
        let offered = |name: &str| request.tools.iter().any(|t| t.name == name);
        let pick = rng.below(100);
        // Provider ids for most calls (unique per thread and turn), none for some: the engine
        // then assigns one from its id source.
        let len = request.history.len();
        let mut id = |i: usize| (rng.below(4) != 0).then(|| format!("sim_{me}_{len}_{i}"));
        let mut calls = Vec::new();
        match (request.is_root, pick) {
            (_, 0..=19) => return Ok(text("Done for now.")),
            (_, 30..=34) if offered("pick") => {
                calls.push(call("pick", json!({"for": format!("p{pick}")}), id(0)))
            }
            (_, 20..=34) => calls.push(call("lookup", json!({"q": format!("q{pick}")}), id(0))),
            (_, 35..=46) => {
                let seconds = 1 + pick * 13 % 1200;
                calls.push(call("sleep", json!({"seconds": seconds}), id(0)));
            }
            (_, 47..=52) => {
                calls.push(call("lookup", json!({"q": "both"}), id(0)));
                calls.push(call("sleep", json!({"seconds": 30}), id(1)));
            }
            (_, 53..=56) => calls.push(call("sleep_until_event_or_input", json!({}), id(0))),
            (_, 57..=64) if stack.len() < 3 && *spawns < 3 => {
                *spawns += 1;
                calls.push(call(
                    "spawn_thread",
                    json!({"instructions": format!("subtask {pick}"), "child_of": stack}),
                    id(0),
                ));
            }
            (true, 65..=70) if !children.is_empty() => calls.push(call(
                "send_message_to_child",
                json!({"thread_id": children[pick as usize % children.len()], "message": "how is it going?"}),
                id(0),
            )),
            (true, 71..=74) if !children.is_empty() => calls.push(call(
                "close_thread",
                json!({"thread_id": children[pick as usize % children.len()]}),
                id(0),
            )),
            (false, 65..=74) => calls.push(call(
                "report_to_parent",
                json!({"report": format!("progress {pick}")}),
                id(0),
            )),
            (false, 75..=80) => calls.push(call(
                "close_thread",
                json!({"thread_id": me, "report_to_parent": "finished"}),
                id(0),
            )),
            (_, 81..=84) if offered("memory_set") => calls.push(call(
                "memory_set",
                json!({"key": format!("k{}", pick % 3), "value": me}),
                id(0),
            )),
            (true, 85..=87) if offered("agent") && *delegations < 1 && !me.contains("agent") => {
                *delegations += 1;
                calls.push(call(
                    "agent",
                    json!({"task": format!("side task {pick}")}),
                    id(0),
                ));
            }
            (_, 88..=90) => calls.push(call("no_such_tool", json!({}), id(0))),
            (_, 91..=93) => calls.push(call("sleep", json!({"seconds": "soon"}), id(0))),
            (true, 94..=95) => calls.push(call("close_thread", json!({"thread_id": me}), id(0))),
            (_, 96..=99) if offered("finish") && !request.is_root => calls.push(call(
                "finish",
                json!({"status": "succeeded", "result": "ok"}),
                id(0),
            )),
            _ => return Ok(text("Nothing to add.")),
        }
        if let (Some(bytes), Some(first)) = (big, calls.first_mut()) {
            inflate(&mut first.args, bytes);
        }
        Ok(Completion {
            text: None,
            tool_calls: calls,
            stop_reason: StopReason::ToolUse,
            usage,
        })
    }
}
