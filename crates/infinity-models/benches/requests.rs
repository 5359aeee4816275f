//! Model adapter benchmarks (`make bench-models`; results in docs/benchmarks.md). Parts, to run one
//! alone: `cargo bench -p infinity-models --bench requests -- PART`.
//! 1. `request_from_1000_entries`: the body's bytes each adapter writes from a 1,000-entry
//!    thread; Bedrock's also signed (SigV4, which hashes the body); and, for scale, serde_json
//!    writing the Anthropic body from a ready-made tree and a copy of the finished body.
//! 2. `engine_and_request`: one whole engine slice at 10 / 1,000 / 10,000 entries, as a host
//!    drives it, with each adapter building its request from the slice's completion request
//!    (the body's bytes; for Bedrock also the whole request as it goes to the wire: body,
//!    SigV4 headers, not sent); a canned completion answers it.
//! 3. `cache_share`: the share of input tokens read from Anthropic's prompt cache over a
//!    50-slice conversation, against a local server that replays usage the way the cache works
//!    (a request's longest prefix, at block boundaries, that an earlier request marked with
//!    `cache_control` is read from the cache; the rest up to its own last breakpoint is written).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench: a failed step should stop it

use std::collections::HashMap;
use std::hint::black_box;
use std::path::Path;
use std::sync::{Arc, Mutex};

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use axum::routing::post;
use axum::Router;
use criterion::{BatchSize, BenchmarkId, Criterion};
use infinity_agent_core::agent::Agent;
use infinity_agent_core::engine::{Slice, SliceRequest, Step};
use infinity_agent_core::history::{HistoryEntry, HistoryView, Item, ToolCall};
use infinity_agent_core::ids::{CallId, SeededIds, ThreadId};
use infinity_agent_core::input::Input;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelProvider, StopReason, ToolSpec, Usage,
};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::tools::ToolRegistry;
use infinity_models::anthropic::{AnthropicConfig, AnthropicModel};
use infinity_models::bedrock::{BedrockConfig, BedrockModel};
use infinity_models::openai::{OpenAiConfig, OpenAiModel};
use infinity_models::transport::RequestPolicy;
use jiff::Timestamp;
use serde_json::{json, Value};
use tokio::runtime::Runtime;

/// History lengths of the engine + request part.
const LENGTHS: [usize; 3] = [10, 1_000, 10_000];

/// A thread of `n` entries: rounds of a message, a turn with a tool call, its result and a
/// reply; a shorter remainder of messages and replies.
fn thread(n: usize) -> Vec<Arc<HistoryEntry>> {
    let mut items = Vec::with_capacity(n);
    let mut i = 0;
    while items.len() + 4 <= n {
        let call = ToolCall {
            id: CallId::new(format!("call_{i}")).unwrap(),
            name: "sleep".into(),
            args: json!({"seconds": i}),
        };
        items.push(Item::user(format!(
            "message {i}: please do the next step of the plan"
        )));
        items.push(Item::Assistant {
            text: Some(format!("Step {i}: working on it.")),
            tool_calls: vec![call.clone()],
            synthetic: false,
        });
        items.push(Item::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            text: format!("Slept {i} seconds."),
            is_error: false,
            images: Vec::new(),
            display_as: Vec::new(),
        });
        items.push(Item::Assistant {
            text: Some(format!("Step {i} is done.")),
            tool_calls: vec![],
            synthetic: false,
        });
        i += 1;
    }
    while items.len() < n {
        items.push(if items.len() % 2 == 0 {
            Item::user(format!("message {i}: one more thing"))
        } else {
            Item::Assistant {
                text: Some(format!("Noted ({i}).")),
                tool_calls: vec![],
                synthetic: false,
            }
        });
        i += 1;
    }
    items
        .into_iter()
        .enumerate()
        .map(|(seq, item)| {
            Arc::new(HistoryEntry {
                seq: seq as u64,
                at: Timestamp::UNIX_EPOCH,
                input_id: None,
                item,
            })
        })
        .collect()
}

fn anthropic() -> AnthropicModel {
    AnthropicModel::new(
        "claude-sonnet-4-5",
        AnthropicConfig {
            base_url: "http://unused".into(),
            api_key: "k".into(),
            request: RequestPolicy::default(),
        },
    )
}

fn openai() -> OpenAiModel {
    OpenAiModel::new(
        "gpt-4.1",
        OpenAiConfig {
            base_url: "http://unused".into(),
            api_key: None,
            request: RequestPolicy::default(),
        },
    )
}

/// A Bedrock model with static credentials; nothing is sent.
fn bedrock() -> BedrockModel {
    BedrockModel::new(
        "anthropic.claude-sonnet-4-5-v1:0",
        BedrockConfig {
            region: Some("us-east-1".into()),
            endpoint_url: None,
            credentials: Some(SharedCredentialsProvider::new(Credentials::new(
                "AKID", "SECRET", None, None, "bench",
            ))),
            bearer_token: None,
            request: RequestPolicy::default(),
        },
    )
}

/// Builds and signs Bedrock's request, as the first attempt sends it; its body's size.
fn signed_bedrock_request(
    rt: &Runtime,
    model: &BedrockModel,
    request: &CompletionRequest<'_>,
) -> usize {
    let signed = rt.block_on(model.signed_request(request)).unwrap();
    black_box(&signed)
        .body()
        .and_then(|b| b.as_bytes())
        .map_or(0, <[u8]>::len)
}

fn conversion(c: &mut Criterion) {
    let history = thread(1_000);
    let tools: Vec<ToolSpec> = ToolRegistry::with_builtins().specs().to_vec();
    let id = ThreadId::new("bench").unwrap();
    let stack = [id.clone()];
    let request = CompletionRequest {
        thread_id: &id,
        is_root: true,
        lineage: &stack,
        system: "You are benchmarked.",
        tools: &tools,
        history: HistoryView::from_slice(&history),
    };
    let anthropic = anthropic();
    let openai = openai();
    let bedrock = bedrock();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let body = anthropic.request_body(&request);
    println!(
        "request_from_1000_entries: anthropic {} bytes, openai {} bytes, bedrock {} bytes",
        body.len(),
        openai.request_body(&request).len(),
        bedrock.request_body(&request).len()
    );
    let tree: Value = serde_json::from_slice(&body).unwrap();
    let mut group = c.benchmark_group("request_from_1000_entries");
    group.bench_function("anthropic", |b| {
        b.iter(|| black_box(anthropic.request_body(&request)))
    });
    group.bench_function("openai", |b| {
        b.iter(|| black_box(openai.request_body(&request)))
    });
    group.bench_function("bedrock", |b| {
        b.iter(|| black_box(bedrock.request_body(&request)))
    });
    group.bench_function("bedrock_signed", |b| {
        b.iter(|| signed_bedrock_request(&rt, &bedrock, &request))
    });
    // References for the cost of writing the Anthropic body's bytes: serde_json writing them
    // from a tree built beforehand, and copying the finished body.
    group.bench_function("reference_serde_json_writes_the_anthropic_body", |b| {
        b.iter(|| black_box(serde_json::to_vec(&tree).unwrap()))
    });
    group.bench_function("reference_copy_of_the_anthropic_body", |b| {
        b.iter(|| black_box(body.clone()))
    });
    group.finish();
}

/// How the engine + request part builds an adapter's request.
enum Adapter {
    /// No request: the engine's share (the scripted model's settings).
    EngineAlone(Arc<ScriptedModel>),
    Anthropic(Arc<AnthropicModel>),
    OpenAi(Arc<OpenAiModel>),
    Bedrock(Arc<BedrockModel>),
    /// The body and its SigV4 headers: the whole request as it goes to the wire.
    BedrockSigned(Arc<BedrockModel>),
}

impl Adapter {
    fn all() -> Vec<Self> {
        let bedrock = Arc::new(bedrock());
        let scripted = ScriptedModel::parse(
            "rules:\n  - reply: {text: Noted.}\n",
            Path::new("bench.yaml"),
        )
        .unwrap();
        vec![
            Adapter::EngineAlone(Arc::new(scripted)),
            Adapter::Anthropic(Arc::new(anthropic())),
            Adapter::OpenAi(Arc::new(openai())),
            Adapter::Bedrock(Arc::clone(&bedrock)),
            Adapter::BedrockSigned(bedrock),
        ]
    }

    fn name(&self) -> &'static str {
        match self {
            Adapter::EngineAlone(_) => "engine_alone",
            Adapter::Anthropic(_) => "anthropic",
            Adapter::OpenAi(_) => "openai",
            Adapter::Bedrock(_) => "bedrock",
            Adapter::BedrockSigned(_) => "bedrock_signed",
        }
    }

    fn model(&self) -> Arc<dyn ModelProvider> {
        match self {
            Adapter::EngineAlone(m) => m.clone(),
            Adapter::Anthropic(m) => m.clone(),
            Adapter::OpenAi(m) => m.clone(),
            Adapter::Bedrock(m) | Adapter::BedrockSigned(m) => m.clone(),
        }
    }

    /// Builds the request as the adapter does; its size in bytes (no request: the entries of
    /// the history).
    fn build(&self, rt: &Runtime, request: CompletionRequest<'_>) -> usize {
        match self {
            Adapter::EngineAlone(_) => black_box(request).history.len(),
            Adapter::Anthropic(m) => black_box(m.request_body(&request)).len(),
            Adapter::OpenAi(m) => black_box(m.request_body(&request)).len(),
            Adapter::Bedrock(m) => black_box(m.request_body(&request)).len(),
            Adapter::BedrockSigned(m) => signed_bedrock_request(rt, m, &request),
        }
    }
}

/// What the canned model answers.
fn canned() -> Completion {
    Completion {
        text: Some("Noted.".into()),
        tool_calls: vec![],
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            completions: 0,
            input_tokens: 1_000,
            output_tokens: 5,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            ..Usage::default()
        },
    }
}

/// One slice as a host drives it: the engine's steps, the adapter's request built from the
/// completion request, the canned completion handed back. Returns the request's size. (Not
/// inlined, so that profilers can count what a slice costs.)
#[inline(never)]
fn one_slice(
    rt: &Runtime,
    adapter: &Adapter,
    agents: &HashMap<String, Arc<Agent>>,
    record: ThreadRecord,
    view: &[Arc<HistoryEntry>],
) -> usize {
    let input = Input::user_message(record.id.clone(), "hello again");
    let mut ids = SeededIds::new(1);
    let mut slice = Slice::start(SliceRequest {
        inputs: vec![input],
        ..SliceRequest::new(
            record.id.clone(),
            Some(record),
            view,
            agents,
            Timestamp::UNIX_EPOCH,
            &mut ids,
        )
    });
    let mut size = 0;
    loop {
        match slice.poll() {
            Step::Complete(request) => size = adapter.build(rt, request),
            Step::Done(outcome) => {
                black_box(outcome.commit.expect("slice commits"));
                return size;
            }
            other => panic!("unexpected step {other:?}"),
        }
        slice.on_completion(Ok(canned()));
    }
}

fn engine_and_request(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("engine_and_request");
    for adapter in Adapter::all() {
        let agent = Agent::new(
            "bench",
            "You are benchmarked.",
            adapter.model(),
            ToolRegistry::with_builtins(),
        );
        let agents: HashMap<String, Arc<Agent>> = [("bench".to_owned(), Arc::new(agent))].into();
        for n in LENGTHS {
            let view = thread(n);
            let id = ThreadId::new("bench").unwrap();
            let mut record = ThreadRecord::new(id, "bench", None, Timestamp::UNIX_EPOCH);
            record.history_len = n as u64;
            record.version = 1;
            let size = one_slice(&rt, &adapter, &agents, record.clone(), &view);
            println!("{} at {n} entries: request of {size} bytes", adapter.name());
            group.bench_with_input(BenchmarkId::new(adapter.name(), n), &n, |b, _| {
                b.iter_batched(
                    || record.clone(),
                    |record| one_slice(&rt, &adapter, &agents, record, &view),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();
}

/// The blocks of a request in cache order (tools, system, message blocks), without
/// `cache_control`, and which of them carry a breakpoint.
fn blocks(body: &Value) -> Vec<(String, bool)> {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("cache_control");
        }
        v.to_string()
    };
    let mut out = Vec::new();
    for t in body["tools"].as_array().unwrap() {
        out.push((strip(t), t.get("cache_control").is_some()));
    }
    for s in body["system"].as_array().unwrap() {
        out.push((strip(s), s.get("cache_control").is_some()));
    }
    for m in body["messages"].as_array().unwrap() {
        for b in m["content"].as_array().unwrap() {
            out.push((
                format!("{}:{}", m["role"], strip(b)),
                b.get("cache_control").is_some(),
            ));
        }
    }
    out
}

#[derive(Default)]
struct Cache {
    prefixes: Vec<Vec<String>>,
    read: u64,
    written: u64,
    uncached: u64,
}

fn tokens(blocks: &[(String, bool)]) -> u64 {
    blocks.iter().map(|(b, _)| b.len() as u64 / 4).sum()
}

fn usage_for(cache: &mut Cache, body: &Value) -> Value {
    let blocks = blocks(body);
    let keys: Vec<String> = blocks.iter().map(|(b, _)| b.clone()).collect();
    let hit = cache
        .prefixes
        .iter()
        .filter(|p| keys.starts_with(p))
        .map(Vec::len)
        .max()
        .unwrap_or(0);
    let last_breakpoint = blocks.iter().rposition(|(_, bp)| *bp).map_or(0, |i| i + 1);
    for (i, (_, bp)) in blocks.iter().enumerate() {
        if *bp {
            cache.prefixes.push(keys[..=i].to_vec());
        }
    }
    let read = tokens(&blocks[..hit]);
    let written = tokens(&blocks[hit..last_breakpoint.max(hit)]);
    let rest = tokens(&blocks[last_breakpoint.max(hit)..]);
    cache.read += read;
    cache.written += written;
    cache.uncached += rest;
    json!({"input_tokens": rest, "cache_read_input_tokens": read, "cache_creation_input_tokens": written, "output_tokens": 5})
}

async fn cache_share() {
    let cache = Arc::new(Mutex::new(Cache::default()));
    let state = cache.clone();
    let app = Router::new().route(
        "/v1/messages",
        post(move |body: String| {
            let state = state.clone();
            async move {
                let body: Value = serde_json::from_str(&body).unwrap();
                let usage = usage_for(&mut state.lock().unwrap(), &body);
                let events = [
                    json!({"type": "message_start", "message": {"usage": usage}}),
                    json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                    json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Noted."}}),
                    json!({"type": "content_block_stop", "index": 0}),
                    json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
                    json!({"type": "message_stop"}),
                ];
                events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap())).collect::<String>()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let model = AnthropicModel::new(
        "claude-sonnet-4-5",
        AnthropicConfig {
            base_url: url,
            api_key: "k".into(),
            request: RequestPolicy::default(),
        },
    );
    let tools: Vec<ToolSpec> = ToolRegistry::with_builtins().specs().to_vec();
    let id = ThreadId::new("bench").unwrap();
    let stack = [id.clone()];
    let system = "You are a patient assistant. ".repeat(40);
    let mut history: Vec<Arc<HistoryEntry>> = Vec::new();
    for slice in 0..50 {
        history.push(Arc::new(HistoryEntry {
            seq: history.len() as u64,
            at: jiff::Timestamp::UNIX_EPOCH,
            input_id: None,
            item: Item::user(format!(
                "Slice {slice}: here is some more information about the task at hand."
            )),
        }));
        let request = CompletionRequest {
            thread_id: &id,
            is_root: true,
            lineage: &stack,
            system: &system,
            tools: &tools,
            history: HistoryView::from_slice(&history),
        };
        let c = model.complete(request).await.unwrap();
        history.push(Arc::new(HistoryEntry {
            seq: history.len() as u64,
            at: jiff::Timestamp::UNIX_EPOCH,
            input_id: None,
            item: Item::Assistant {
                text: c.text,
                tool_calls: vec![],
                synthetic: false,
            },
        }));
    }
    let cache = cache.lock().unwrap();
    let total = cache.read + cache.written + cache.uncached;
    println!(
        "\nanthropic prompt cache over 50 slices: {} input tokens, {:.1}% read from cache, {:.1}% written to cache, {:.1}% uncached",
        total,
        100.0 * cache.read as f64 / total as f64,
        100.0 * cache.written as f64 / total as f64,
        100.0 * cache.uncached as f64 / total as f64
    );
}

fn main() {
    // Filters pick parts: `engine` runs a part, `engine_and_request/openai` runs it too (and
    // criterion runs only what matches inside). Options and their values are criterion's.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-') && a.parse::<f64>().is_err())
        .collect();
    let wants = |name: &str| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| name.contains(f.as_str()) || f.starts_with(&format!("{name}/")))
    };
    if wants("request_from_1000_entries") {
        let mut c = Criterion::default().configure_from_args();
        conversion(&mut c);
        c.final_summary();
    }
    if wants("engine_and_request") {
        let mut c = Criterion::default().configure_from_args();
        engine_and_request(&mut c);
        c.final_summary();
    }
    if wants("cache_share") {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(cache_share());
    }
}
