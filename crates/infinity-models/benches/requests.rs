//! Model adapter benchmarks (`make bench-models`; results in docs/benchmarks.md):
//! 1. time to convert a 1,000-entry thread into each provider's request;
//! 2. the share of input tokens read from Anthropic's prompt cache over a 50-slice conversation,
//!    against a local server that replays usage the way the cache works (a request's longest
//!    prefix, at block boundaries, that an earlier request marked with `cache_control` is read from
//!    the cache; the rest up to its own last breakpoint is written).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench: a failed step should stop it

use std::hint::black_box;
use std::sync::{Arc, Mutex};

use axum::routing::post;
use axum::Router;
use criterion::Criterion;
use infinity_agent_core::history::{HistoryEntry, HistoryView, Item, ToolCall};
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::model::{CompletionRequest, ModelProvider, ToolSpec};
use infinity_agent_core::tools::ToolRegistry;
use infinity_models::anthropic::{AnthropicConfig, AnthropicModel};
use infinity_models::openai::{OpenAiConfig, OpenAiModel};
use infinity_models::transport::RetryPolicy;
use serde_json::{json, Value};

fn thread(n: usize) -> Vec<Arc<HistoryEntry>> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while out.len() < n {
        let call = ToolCall {
            id: CallId::new(format!("call_{i}")).unwrap(),
            name: "sleep".into(),
            args: json!({"seconds": i}),
        };
        for item in [
            Item::user(format!("message {i}: please do the next step of the plan")),
            Item::Assistant {
                text: Some(format!("Step {i}: working on it.")),
                tool_calls: vec![call.clone()],
                synthetic: false,
            },
            Item::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                text: format!("Slept {i} seconds."),
                is_error: false,
                images: Vec::new(),
                display_as: Vec::new(),
            },
            Item::Assistant {
                text: Some(format!("Step {i} is done.")),
                tool_calls: vec![],
                synthetic: false,
            },
        ] {
            out.push(Arc::new(HistoryEntry {
                seq: out.len() as u64,
                at: jiff::Timestamp::UNIX_EPOCH,
                input_id: None,
                item,
            }));
        }
        i += 1;
    }
    out.truncate(n);
    out
}

fn conversion(c: &mut Criterion) {
    let history = thread(1_000);
    let tools: Vec<ToolSpec> = ToolRegistry::with_builtins().specs().to_vec();
    let id = ThreadId::new("bench").unwrap();
    let stack = [id.clone()];
    let request = CompletionRequest {
        thread_id: &id,
        is_root: true,
        stack: &stack,
        system: "You are benchmarked.",
        tools: &tools,
        history: HistoryView::from_slice(&history),
    };
    let anthropic = AnthropicModel::new(
        "claude-sonnet-4-5",
        AnthropicConfig {
            base_url: "http://unused".into(),
            api_key: "k".into(),
            retry: RetryPolicy::default(),
        },
    );
    let openai = OpenAiModel::new(
        "gpt-4.1",
        OpenAiConfig {
            base_url: "http://unused".into(),
            api_key: None,
            retry: RetryPolicy::default(),
        },
    );
    let mut group = c.benchmark_group("request_from_1000_entries");
    group.bench_function("anthropic", |b| {
        b.iter(|| black_box(anthropic.request_body(&request)))
    });
    group.bench_function("openai", |b| {
        b.iter(|| black_box(openai.request_body(&request)))
    });
    group.bench_function("bedrock", |b| {
        b.iter(|| black_box(infinity_models::bedrock::convert_history(&request).unwrap()))
    });
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
            retry: RetryPolicy::default(),
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
            stack: &stack,
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
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));
    if wants("request_from_1000_entries") {
        let mut c = Criterion::default().configure_from_args();
        conversion(&mut c);
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
