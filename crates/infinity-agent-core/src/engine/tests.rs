//! The engine on its own: canned completions in, commits out. No model, no store, no clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::{json, Value};

use super::{DropReason, Slice, SliceError, SliceOutcome, SliceRequest, Step};
use crate::agent::{Agent, Limits};
use crate::effect::{Effect, OutputEvent, OutputKind};
use crate::history::{HistoryEntry, Item};
use crate::ids::{CallId, InputId, SeededIds, ThreadId};
use crate::input::{Input, InputBody};
use crate::model::{
    Completion, CompletionRequest, ModelError, ModelErrorKind, ModelProvider, ModelToolCall,
    StopReason, Usage,
};
use crate::state::{PendingKind, ThreadRecord, ThreadStatus};
use crate::tools::ToolRegistry;

mod closing;
mod compaction;
mod migration;
mod pending_calls;
mod schedules;

const NOW: &str = "2026-03-07T17:00:00Z";

/// A model the engine never calls: it only reads the name and the context window.
#[derive(Debug)]
struct Canned {
    window: u32,
}

#[async_trait]
impl ModelProvider for Canned {
    fn name(&self) -> &str {
        "canned"
    }

    fn context_window(&self) -> u32 {
        self.window
    }

    async fn complete(&self, _: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        Err(ModelError::terminal(
            ModelErrorKind::Other,
            "the engine tests feed completions by hand",
        ))
    }
}

fn agents(limits: Limits, window: u32) -> HashMap<String, Arc<Agent>> {
    let mut tools = ToolRegistry::with_builtins();
    tools
        .register(Arc::new(crate::testing::DispatchedTool("lookup")))
        .unwrap();
    let mut agent = Agent::new("a", "Test agent.", Arc::new(Canned { window }), tools);
    agent.limits = limits;
    [("a".to_owned(), Arc::new(agent))].into()
}

fn text(t: &str) -> Completion {
    Completion {
        text: Some(t.into()),
        tool_calls: vec![],
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 2,
            ..Usage::default()
        },
    }
}

fn calls(list: &[(&str, Value)]) -> Completion {
    Completion {
        text: None,
        tool_calls: list
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ModelToolCall {
                id: Some(format!("c{i}-{name}")),
                name: (*name).into(),
                args: args.clone(),
            })
            .collect(),
        stop_reason: StopReason::ToolUse,
        usage: Usage::default(),
    }
}

fn tid() -> ThreadId {
    ThreadId::new("t").unwrap()
}

fn input(id: &str, body: InputBody) -> Input {
    Input {
        id: InputId::new(id).unwrap(),
        thread_id: tid(),
        body,
    }
}

fn user(id: &str, text: &str) -> Input {
    input(
        id,
        InputBody::UserMessage {
            text: text.into(),
            agent: None,
            while_busy: None,
        },
    )
}

/// What a completion request looked like, in short.
#[derive(Debug, Clone, PartialEq)]
struct Asked {
    system: String,
    tools: Vec<String>,
    history: Vec<String>,
}

/// One slice's result, with what the model was asked.
struct Run {
    outcome: Result<SliceOutcome, SliceError>,
    asked: Vec<Asked>,
    outputs: Vec<OutputEvent>,
}

impl Run {
    fn outcome(&self) -> &SliceOutcome {
        self.outcome.as_ref().unwrap()
    }

    fn effects(&self) -> Vec<&Effect> {
        self.outcome()
            .commit
            .iter()
            .flat_map(|c| c.effects.iter().map(|e| &e.effect))
            .collect()
    }

    fn dropped(&self) -> Vec<DropReason> {
        self.outcome()
            .dropped
            .iter()
            .map(|d| d.reason.clone())
            .collect()
    }
}

fn line(item: &Item) -> String {
    match item {
        Item::Message { text, .. } => format!("message: {text}"),
        Item::Assistant {
            text,
            tool_calls,
            synthetic,
        } => {
            let calls: Vec<String> = tool_calls.iter().map(|c| c.name.clone()).collect();
            let who = if *synthetic { "synthetic" } else { "assistant" };
            format!(
                "{who}: {}{}",
                text.as_deref().unwrap_or(""),
                calls.join(",")
            )
        }
        Item::ToolResult {
            name,
            text,
            is_error,
            ..
        } => format!("{}{name}: {text}", if *is_error { "error " } else { "" }),
        Item::Notice { text, .. } => format!("notice: {text}"),
        Item::Summary { text, .. } => format!("summary: {text}"),
    }
}

/// A thread as a store would hold it, advanced one slice at a time.
struct Thread {
    agents: HashMap<String, Arc<Agent>>,
    record: Option<ThreadRecord>,
    entries: Vec<Arc<HistoryEntry>>,
    processed: HashSet<InputId>,
    seed: u64,
    live: bool,
    /// Hand the engine only the entries from the record's view start, as hosts do.
    windowed: bool,
}

impl Thread {
    fn new() -> Self {
        Self::with(Limits::default(), 128_000)
    }

    fn with(limits: Limits, window: u32) -> Self {
        Self {
            agents: agents(limits, window),
            record: None,
            entries: Vec::new(),
            processed: HashSet::new(),
            seed: 1,
            live: false,
            windowed: false,
        }
    }

    /// Runs one slice over `inputs`, answering completions from `answers` in order, and
    /// commits the result here.
    fn slice(&mut self, inputs: Vec<Input>, answers: Vec<Result<Completion, ModelError>>) -> Run {
        let mut answers: VecDeque<_> = answers.into();
        let mut ids = SeededIds::new(self.seed);
        self.seed += 1;
        let already = inputs
            .iter()
            .filter(|i| self.processed.contains(&i.id))
            .map(|i| i.id.clone())
            .collect();
        let view_start = match (&self.record, self.windowed) {
            (Some(record), true) => record.view_start(),
            _ => 0,
        };
        let mut slice = Slice::start(SliceRequest {
            inputs,
            already_processed: already,
            default_agent: Some("a"),
            live_output: self.live,
            view_start,
            ..SliceRequest::new(
                tid(),
                self.record.clone(),
                &self.entries[view_start as usize..],
                &self.agents,
                NOW.parse().unwrap(),
                &mut ids,
            )
        });
        let mut asked = Vec::new();
        let mut outputs = Vec::new();
        let outcome = loop {
            let answer = match slice.poll() {
                Step::Output(event) => {
                    outputs.push(event);
                    continue;
                }
                Step::Done(outcome) => break Ok(outcome),
                Step::Failed(err) => break Err(err),
                Step::Complete(request) => {
                    asked.push(Asked {
                        system: request.system.to_owned(),
                        tools: request.tools.iter().map(|t| t.name.clone()).collect(),
                        history: request.history.iter().map(|e| line(&e.item)).collect(),
                    });
                    answers
                        .pop_front()
                        .unwrap_or_else(|| panic!("unexpected completion #{}", asked.len()))
                }
            };
            slice.on_completion(answer);
        };
        assert!(answers.is_empty(), "answers left over: {answers:?}");
        if let Ok(SliceOutcome {
            commit: Some(commit),
            ..
        }) = &outcome
        {
            assert_eq!(
                commit.expected_version,
                self.record.as_ref().map(|r| r.version)
            );
            assert_eq!(
                commit.record.version,
                commit.expected_version.unwrap_or(0) + 1
            );
            self.entries
                .extend(commit.new_entries.iter().cloned().map(Arc::new));
            self.processed
                .extend(commit.processed_inputs.iter().cloned());
            self.record = Some(commit.record.clone());
        }
        Run {
            outcome,
            asked,
            outputs,
        }
    }

    fn history(&self) -> Vec<String> {
        self.entries.iter().map(|e| line(&e.item)).collect()
    }

    fn record(&self) -> &ThreadRecord {
        self.record.as_ref().unwrap()
    }
}

#[test]
fn the_basic_transitions() {
    struct Case {
        name: &'static str,
        answers: Vec<Result<Completion, ModelError>>,
        history: &'static [&'static str],
        completions: u32,
    }
    let cases = [
        Case {
            name: "a message is answered",
            answers: vec![Ok(text("hello"))],
            history: &["message: hi", "assistant: hello"],
            completions: 1,
        },
        Case {
            name: "a synchronous tool loops back to the model",
            answers: vec![
                Ok(calls(&[("sleep", json!({"seconds": 0}))])),
                Ok(text("rested")),
            ],
            history: &[
                "message: hi",
                "assistant: sleep",
                "sleep: Slept 0 seconds.",
                "assistant: rested",
            ],
            completions: 2,
        },
        Case {
            name: "bad arguments are an error result the model answers",
            answers: vec![
                Ok(calls(&[("sleep", json!({"seconds": "ten"}))])),
                Ok(text("sorry")),
            ],
            history: &[
                "message: hi",
                "assistant: sleep",
                "error sleep: Error: invalid arguments for `sleep`",
                "assistant: sorry",
            ],
            completions: 2,
        },
        Case {
            name: "an unknown tool is an error result naming the tools",
            answers: vec![Ok(calls(&[("fly", json!({}))])), Ok(text("ok"))],
            history: &[
                "message: hi",
                "assistant: fly",
                "error fly: Error: there is no tool named `fly`. Available tools: sleep,",
                "assistant: ok",
            ],
            completions: 2,
        },
        Case {
            name: "the reserved injection tool cannot be called",
            answers: vec![
                Ok(calls(&[("receive_event__injected", json!({}))])),
                Ok(text("ok")),
            ],
            history: &[
                "message: hi",
                "assistant: receive_event__injected",
                "error receive_event__injected: Error: `receive_event__injected` is reserved",
                "assistant: ok",
            ],
            completions: 2,
        },
        Case {
            name: "a terminal model error is recorded and ends the slice",
            answers: vec![Err(ModelError::terminal(
                ModelErrorKind::Refused,
                "bad request",
            ))],
            history: &["message: hi", "notice: Model error (canned): bad request"],
            completions: 0,
        },
        Case {
            name: "a reply cut off at the token limit is recorded",
            answers: vec![Ok(Completion {
                stop_reason: StopReason::MaxTokens,
                ..text("half a")
            })],
            history: &[
                "message: hi",
                "assistant: half a",
                "notice: The model's reply was cut off",
            ],
            completions: 1,
        },
    ];
    for case in cases {
        let mut thread = Thread::new();
        let run = thread.slice(vec![user("m1", "hi")], case.answers);
        let history = thread.history();
        assert_eq!(
            history.len(),
            case.history.len(),
            "{}: {history:#?}",
            case.name
        );
        for (got, want) in history.iter().zip(case.history) {
            assert!(got.starts_with(want), "{}: {got:?} vs {want:?}", case.name);
        }
        assert_eq!(run.outcome().completions, case.completions, "{}", case.name);
        assert_eq!(thread.record().version, 1, "{}", case.name);
    }
}

#[test]
fn an_unknown_thread_is_created_only_by_what_may_create_it() {
    let mut thread = Thread::new();
    let run = thread.slice(
        vec![input(
            "w",
            InputBody::TimerWakeUp {
                call_id: CallId::new("c").unwrap(),
            },
        )],
        vec![],
    );
    assert!(run.outcome().commit.is_none());
    assert_eq!(run.dropped(), [DropReason::UnknownThread]);

    let run = thread.slice(
        vec![
            input(
                "w",
                InputBody::TimerWakeUp {
                    call_id: CallId::new("c").unwrap(),
                },
            ),
            user("m1", "hi"),
        ],
        vec![Ok(text("hello"))],
    );
    assert_eq!(run.dropped(), [DropReason::BeforeCreation]);
    assert_eq!(thread.history(), ["message: hi", "assistant: hello"]);
    assert_eq!(thread.record().agent, "a");
}

#[test]
fn a_sleep_never_holds_anything_back() {
    let mut thread = Thread::new();
    let run = thread.slice(
        vec![user("m1", "nap")],
        vec![Ok(calls(&[("sleep", json!({"seconds": 60}))]))],
    );
    let due: Timestamp = "2026-03-07T17:01:00Z".parse().unwrap();
    assert!(run
        .effects()
        .iter()
        .any(|e| matches!(e, Effect::SendAt { due: d, .. } if *d == due)));
    let call = thread.record().pending_calls[0].call_id.clone();

    thread.slice(vec![user("m2", "wake up")], vec![Ok(text("awake"))]);
    let history = thread.history();
    assert!(
        history[2].starts_with("sleep: Sleep interrupted"),
        "{history:#?}"
    );
    assert_eq!(history[3], "message: wake up");
    assert!(thread.record().pending_calls[0].moved_on);

    // The timer's own result arrives later, injected as an event the model answers.
    thread.slice(
        vec![input("w", InputBody::TimerWakeUp { call_id: call })],
        vec![Ok(text("noted"))],
    );
    let history = thread.history();
    assert_eq!(history[5], "synthetic: receive_event__injected");
    assert!(
        history[6].contains("interrupted earlier has ended"),
        "{history:#?}"
    );
    assert_eq!(history[7], "assistant: noted");
    assert!(thread.record().pending_calls.is_empty());
}

#[test]
fn the_completion_limit_stops_a_runaway_loop_with_a_recorded_error() {
    let limits = Limits {
        max_completions_per_slice: 2,
        ..Limits::default()
    };
    let mut thread = Thread::with(limits, 128_000);
    let again = || Ok(calls(&[("sleep", json!({"seconds": 0}))]));
    let run = thread.slice(vec![user("m1", "go")], vec![again(), again()]);
    assert_eq!(run.outcome().completions, 2);
    let history = thread.history();
    assert!(
        history
            .last()
            .unwrap()
            .starts_with("notice: Stopped after 2 completions"),
        "{history:#?}"
    );
    assert!(run.effects().iter().any(
        |e| matches!(e, Effect::Output { event } if matches!(event.kind, OutputKind::Error { .. }))
    ));
}

#[test]
fn a_retryable_model_error_fails_the_slice_and_commits_nothing() {
    let mut thread = Thread::new();
    let run = thread.slice(
        vec![user("m1", "hi")],
        vec![Err(ModelError::retryable(
            ModelErrorKind::Unavailable,
            "overloaded",
        ))],
    );
    match run.outcome {
        Err(SliceError::Retryable(why)) => assert_eq!(why, "overloaded"),
        other => panic!("{:?}", other.map(|o| o.commit)),
    }
    assert!(thread.record.is_none());
    // The same input succeeds later, as if it were the first time.
    thread.slice(vec![user("m1", "hi")], vec![Ok(text("hello"))]);
    assert_eq!(thread.history(), ["message: hi", "assistant: hello"]);
}

#[test]
fn polling_again_hands_out_the_same_request() {
    let agents = agents(Limits::default(), 128_000);
    let mut ids = SeededIds::new(3);
    let mut slice = Slice::start(SliceRequest {
        inputs: vec![user("m1", "hi")],
        default_agent: Some("a"),
        ..SliceRequest::new(tid(), None, &[], &agents, NOW.parse().unwrap(), &mut ids)
    });
    let first = match slice.poll() {
        Step::Complete(r) => r.history.len(),
        other => panic!("{other:?}"),
    };
    let again = match slice.poll() {
        Step::Complete(r) => r.history.len(),
        other => panic!("{other:?}"),
    };
    assert_eq!((first, again), (1, 1));
    slice.on_completion(Ok(text("hello")));
    assert!(matches!(slice.poll(), Step::Done(_)));
    assert!(matches!(
        slice.poll(),
        Step::Failed(SliceError::AlreadyEnded)
    ));
    // A completion nobody asked for changes nothing.
    slice.on_completion(Ok(text("stray")));
    assert!(matches!(
        slice.poll(),
        Step::Failed(SliceError::AlreadyEnded)
    ));
}

#[test]
fn a_seed_replays_a_slice_exactly() {
    let run = |seed: u64| {
        let mut thread = Thread::new();
        thread.seed = seed;
        // The model gives no call ids: the engine takes them from the seed, as it does the
        // child's thread id and the outbox ids.
        let spawn = Completion {
            tool_calls: vec![ModelToolCall {
                id: None,
                name: "spawn_thread".into(),
                args: json!({"instructions": "help", "child_of": ["t"]}),
            }],
            ..calls(&[])
        };
        let run = thread.slice(vec![user("m1", "hi")], vec![Ok(spawn), Ok(text("spawned"))]);
        run.outcome.unwrap().commit.unwrap()
    };
    assert_eq!(run(5), run(5));
    let (a, b) = (run(5), run(6));
    assert_ne!(
        a.record.children[0].thread_id,
        b.record.children[0].thread_id
    );
    assert_ne!(a.effects[0].id, b.effects[0].id);
}

#[test]
fn live_output_is_handed_out_in_order_and_not_committed() {
    let mut thread = Thread::new();
    thread.live = true;
    let run = thread.slice(
        vec![user("m1", "hi")],
        vec![
            Ok(calls(&[("sleep", json!({"seconds": 0}))])),
            Ok(text("done")),
        ],
    );
    let kinds: Vec<&str> = run.outputs.iter().map(|e| e.kind.kind()).collect();
    assert_eq!(
        kinds,
        ["user_message", "tool_call", "tool_result", "assistant_text"]
    );
    assert!(!run
        .effects()
        .iter()
        .any(|e| matches!(e, Effect::Output { .. })));
}

#[test]
fn a_provider_that_reuses_call_ids_cannot_make_a_sleep_lose_its_timer() {
    // Some servers name every call `call_0`. Ids derived from a call (a sleep's wake-up) must
    // still be unique, so the engine records calls under ids of its own.
    let same_id = |seconds: u64| Completion {
        tool_calls: vec![ModelToolCall {
            id: Some("call_0".into()),
            name: "sleep".into(),
            args: json!({"seconds": seconds}),
        }],
        ..calls(&[])
    };
    let wake_of = |run: &Run| -> Input {
        run.effects()
            .into_iter()
            .find_map(|e| match e {
                Effect::SendAt { input, .. } => Some(input.clone()),
                _ => None,
            })
            .unwrap()
    };
    let mut thread = Thread::new();
    let first = thread.slice(vec![user("m1", "nap")], vec![Ok(same_id(10))]);
    let second = thread.slice(vec![user("m2", "nap again")], vec![Ok(same_id(20))]);
    let (wake1, wake2) = (wake_of(&first), wake_of(&second));
    assert_ne!(wake1.id, wake2.id);
    thread.slice(vec![wake1], vec![Ok(text("one"))]);
    thread.slice(vec![wake2], vec![Ok(text("two"))]);
    assert!(
        thread.record().pending_calls.is_empty(),
        "both sleeps ended"
    );
    let ids: HashSet<String> = thread
        .entries
        .iter()
        .filter(|e| {
            !matches!(
                e.item,
                Item::Assistant {
                    synthetic: true,
                    ..
                }
            )
        })
        .flat_map(|e| e.item.tool_calls().iter().map(|c| c.id.to_string()))
        .collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(!ids.contains("call_0"));
}
