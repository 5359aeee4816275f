//! The runtime's side of RAP over real HTTP, on the embedded runtime: discovery, invocation
//! with retries (500 then 200; 400 and 429 not retried), the signed callback receiver (forged,
//! altered, expired and replayed callbacks), and the oauth, user_choice and view_update
//! callbacks.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder, Front};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::tools::servers::ToolServerConfig;
use infinity_rap::signing::CallbackSigner;
use infinity_rap_runtime::client::{RapClient, RetryPolicy};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc::UnboundedReceiver;

const SECRET: &[u8] = b"a test secret of thirty-two bytes or more";

/// A tool server written by hand (not with the kit), so the test controls every answer: the
/// invocation endpoint answers with the statuses in `answers` in turn (the last one repeats)
/// and records the invocations.
#[derive(Default)]
struct Fake {
    answers: Mutex<Vec<u16>>,
    invocations: Mutex<Vec<Value>>,
    attempts: AtomicUsize,
    base: Mutex<String>,
    /// The `Authorization` header of every request, manifest and invocations alike.
    authorization: Mutex<Vec<Option<String>>>,
    /// The bodies of `/cancel_tool_call` notifications.
    cancels: Mutex<Vec<Value>>,
    /// Set once an invocation with `q: fast` arrived; one with `q: slow` is not acknowledged
    /// before that (so invocations sent one at a time would never get past it).
    fast_arrived: tokio::sync::Notify,
}

fn note_auth(fake: &Fake, headers: &axum::http::HeaderMap) {
    fake.authorization.lock().unwrap().push(
        headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
}

async fn manifest(State(fake): State<Arc<Fake>>, headers: axum::http::HeaderMap) -> Json<Value> {
    note_auth(&fake, &headers);
    let base = fake.base.lock().unwrap().clone();
    Json(json!({
        "name": "fake-tools",
        "endpoint": format!("{base}/invoke"),
        "tools": [{
            "name": "lookup",
            "description": "Looks something up.",
            "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
        }]
    }))
}

async fn invoke(
    State(fake): State<Arc<Fake>>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> StatusCode {
    note_auth(&fake, &headers);
    fake.attempts.fetch_add(1, Ordering::SeqCst);
    match body["arguments"]["q"].as_str() {
        Some("fast") => fake.fast_arrived.notify_one(),
        Some("slow") => {
            let waited =
                tokio::time::timeout(Duration::from_secs(10), fake.fast_arrived.notified()).await;
            if waited.is_err() {
                return StatusCode::SERVICE_UNAVAILABLE;
            }
        }
        _ => {}
    }
    let status = {
        let mut answers = fake.answers.lock().unwrap();
        if answers.len() > 1 {
            answers.remove(0)
        } else {
            answers[0]
        }
    };
    if status == 200 {
        fake.invocations.lock().unwrap().push(body);
    }
    StatusCode::from_u16(status).unwrap()
}

async fn start_fake(answers: &[u16]) -> Arc<Fake> {
    let fake = Arc::new(Fake {
        answers: Mutex::new(answers.to_vec()),
        ..Fake::default()
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    *fake.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route("/.well-known/rap-toolset", get(manifest))
        .route("/invoke", post(invoke))
        .route(
            "/cancel_tool_call",
            post(
                |State(fake): State<Arc<Fake>>, Json(body): Json<Value>| async move {
                    fake.cancels.lock().unwrap().push(body);
                    StatusCode::OK
                },
            ),
        )
        .route("/close_thread", post(|| async { StatusCode::OK }))
        .with_state(Arc::clone(&fake));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    fake
}

struct Runtime {
    system: AgentSystem,
    events: UnboundedReceiver<OutputEvent>,
    log: Vec<OutputEvent>,
    receiver: String,
    http: reqwest::Client,
}

const SCRIPT: &str = r#"
rules:
  - when: "^look it up$"
    reply:
      tool_calls: [{name: lookup, args: {q: "answer"}}]
  - when: "^two at once$"
    reply:
      tool_calls: [{name: lookup, args: {q: "slow"}}, {name: lookup, args: {q: "fast"}}]
  - reply: {text: "noted"}
"#;

async fn start(fake: &Fake) -> Runtime {
    start_with(fake, "").await
}

/// `auth` is YAML for the server's `auth` settings (empty for none).
async fn start_with(fake: &Fake, auth: &str) -> Runtime {
    if auth.is_empty() {
        start_with_config(fake, "").await
    } else {
        start_with_config(fake, &format!("auth: {auth}")).await
    }
}

/// `config` is YAML for the server entry's settings besides its `url` (empty for none).
async fn start_with_config(fake: &Fake, config: &str) -> Runtime {
    let model = ScriptedModel::parse(SCRIPT, Path::new("test.script.yaml")).unwrap();
    let mut agent = AgentSpec::new("looker", "You look things up.", Arc::new(model));
    let base = fake.base.lock().unwrap().clone();
    let server: ToolServerConfig = if config.is_empty() {
        serde_yaml_ng::from_str(&base).unwrap()
    } else {
        serde_yaml_ng::from_str(&format!("{{url: '{base}', {config}}}")).unwrap()
    };
    agent.tool_servers = vec![server.clone()];
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver = format!("http://{}", listener.local_addr().unwrap());
    let signer = CallbackSigner::new(SECRET.to_vec(), &receiver).unwrap();
    let client = Arc::new(
        RapClient::new(signer.clone())
            .with_configured(&[server])
            .unwrap()
            .with_retry(RetryPolicy::new(
                4,
                Duration::from_millis(20),
                Duration::from_millis(100),
            ))
            .with_timeout(Duration::from_secs(5)),
    );
    let system = AgentSystemBuilder::new()
        .with_agent(agent)
        .with_tokio_sleep_tools()
        .with_discovery(client.clone())
        .with_dispatcher(client)
        .build()
        .await
        .unwrap();
    let app = infinity_rap_runtime::receiver::router(signer, Arc::new(system.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let events = system.subscribe();
    Runtime {
        system,
        events,
        log: Vec::new(),
        receiver,
        http: reqwest::Client::new(),
    }
}

impl Runtime {
    async fn settle(&mut self) {
        self.system.wait_idle(None).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        self.system.wait_idle(None).await;
        while let Ok(e) = self.events.try_recv() {
            self.log.push(e);
        }
    }

    fn results(&self) -> Vec<(String, bool)> {
        self.log
            .iter()
            .filter_map(|e| match &e.kind {
                OutputKind::ToolResult { text, is_error, .. } => Some((text.clone(), *is_error)),
                _ => None,
            })
            .collect()
    }

    async fn post(&self, url: &str, body: &Value) -> (u16, String) {
        let r = self.http.post(url).json(body).send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }
}

fn thread() -> ThreadId {
    ThreadId::new("main").unwrap()
}

#[tokio::test]
async fn a_server_error_is_retried_and_the_signed_callback_delivers_the_result() {
    let fake = start_fake(&[500, 200]).await;
    let mut rt = start(&fake).await;
    rt.system
        .send_user_message(&thread(), "look it up")
        .await
        .unwrap();
    rt.settle().await;
    assert_eq!(fake.attempts.load(Ordering::SeqCst), 2);
    let invocation = fake.invocations.lock().unwrap()[0].clone();
    assert_eq!(invocation["operation"], "lookup");
    assert_eq!(invocation["arguments"], json!({"q": "answer"}));
    assert_eq!(invocation["group_id"], "main");
    assert!(
        invocation.get("thread_ancestors").is_none(),
        "a root thread has no ancestors"
    );
    let url = invocation["callback_url"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with(&format!("{}/rap/callback/main/", rt.receiver)),
        "{url}"
    );
    let id = invocation["id"].as_str().unwrap().to_owned();
    let result = json!({"type": "tool_result", "group_id": "main", "id": id, "text": "42"});

    // Forged: another thread's path, an altered signature, an altered expiry, no signature.
    let other_thread = url.replace("/rap/callback/main/", "/rap/callback/other/");
    let other_body = json!({"type": "tool_result", "group_id": "other", "id": id, "text": "x"});
    assert_eq!(rt.post(&other_thread, &other_body).await.0, 403);
    let (base, query) = url.split_once('?').unwrap();
    let sig_at = query.find("sig=").unwrap() + 4;
    let mut bad_sig = query.to_owned();
    let flipped = if &bad_sig[sig_at..sig_at + 1] == "0" {
        "1"
    } else {
        "0"
    };
    bad_sig.replace_range(sig_at..sig_at + 1, flipped);
    assert_eq!(rt.post(&format!("{base}?{bad_sig}"), &result).await.0, 403);
    let later = query.replacen("exp=", "exp=9", 1);
    assert_eq!(rt.post(&format!("{base}?{later}"), &result).await.0, 403);
    assert_eq!(rt.post(base, &result).await.0, 401);
    // A valid URL with a body for another call or thread.
    let wrong_call =
        json!({"type": "tool_result", "group_id": "main", "id": "call-other", "text": "x"});
    let (status, why) = rt.post(&url, &wrong_call).await;
    assert_eq!((status, why.contains("call-other")), (403, true), "{why}");
    rt.settle().await;
    assert!(
        rt.results().is_empty(),
        "nothing reached the thread: {:?}",
        rt.results()
    );

    // The real one, then a replay of it.
    assert_eq!(rt.post(&url, &result).await.0, 200);
    rt.settle().await;
    assert_eq!(rt.post(&url, &result).await.0, 200);
    rt.settle().await;
    assert_eq!(rt.results(), vec![("42".to_owned(), false)]);
    let texts: Vec<String> = rt
        .log
        .iter()
        .filter_map(|e| match &e.kind {
            OutputKind::AssistantText { text } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["noted"]);
}

#[tokio::test]
async fn a_refused_invocation_is_not_retried_and_becomes_an_error_result() {
    // 429 too: the spec forbids retrying any 4xx.
    for refusal in [400, 429] {
        let fake = start_fake(&[refusal]).await;
        let mut rt = start(&fake).await;
        rt.system
            .send_user_message(&thread(), "look it up")
            .await
            .unwrap();
        rt.settle().await;
        assert_eq!(fake.attempts.load(Ordering::SeqCst), 1, "{refusal}");
        let results = rt.results();
        assert_eq!(results.len(), 1, "{results:?}");
        assert!(
            results[0].1 && results[0].0.contains(&format!("HTTP {refusal}")),
            "{results:?}"
        );
    }
}

#[tokio::test]
async fn oauth_user_choice_and_view_update_reach_the_thread() {
    let fake = start_fake(&[200]).await;
    let mut rt = start(&fake).await;
    rt.system
        .send_user_message(&thread(), "look it up")
        .await
        .unwrap();
    rt.settle().await;
    let invocation = fake.invocations.lock().unwrap()[0].clone();
    let url = invocation["callback_url"].as_str().unwrap().to_owned();
    let id = invocation["id"].as_str().unwrap().to_owned();

    let oauth = json!({"type": "oauth", "group_id": "main", "id": id,
                       "auth_url": "https://auth.example.com/authorize?x=1"});
    assert_eq!(rt.post(&url, &oauth).await.0, 200);
    rt.settle().await;
    assert!(rt.log.iter().any(|e| matches!(&e.kind,
        OutputKind::AuthorizationRequested { auth_url, .. } if auth_url.contains("auth.example.com"))));
    // The detour is the tool's business: the call stays pending and the model is not asked.
    assert!(rt.results().is_empty(), "{:?}", rt.results());
    let record = rt.system.record(&thread()).await.unwrap().unwrap();
    assert!(record.pending_calls[0].authorizing);

    let choice = json!({"type": "user_choice", "group_id": "main", "id": id,
                        "prompt": "Which one?", "choices": ["left", "right"], "default": 1,
                        "response_url": "http://127.0.0.1:9/choice"});
    assert_eq!(rt.post(&url, &choice).await.0, 200);
    let view = json!({"type": "view_update", "group_id": "main", "view_type": "diff",
                      "content": {"patch": "+1"}});
    assert_eq!(rt.post(&url, &view).await.0, 200);
    rt.settle().await;
    let record = rt.system.record(&thread()).await.unwrap().unwrap();
    assert_eq!(record.open_choices.len(), 1);
    assert_eq!(record.open_choices[0].choices, ["left", "right"]);
    assert_eq!(record.views["diff"]["patch"], "+1");

    // The tool's result is the call's own result; the choice is closed.
    let result = json!({"type": "tool_result", "group_id": "main", "id": id, "text": "found it",
                        "display_as": [{"type": "diff", "content": {"path": "a.rs", "patch": "+x"}},
                                       {"type": "text", "content": "found"}]});
    assert_eq!(rt.post(&url, &result).await.0, 200);
    rt.settle().await;
    let record = rt.system.record(&thread()).await.unwrap().unwrap();
    assert!(record.open_choices.is_empty());
    assert!(record.pending_calls.is_empty());
    assert_eq!(rt.results(), [("found it".to_owned(), false)]);
    // People see what `display_as` asks for; the model got the text.
    let shown = rt.log.iter().find_map(|e| match &e.kind {
        OutputKind::ToolResult { display_as, .. } => Some(display_as.clone()),
        _ => None,
    });
    assert_eq!(
        shown.unwrap(),
        [
            json!({"type": "diff", "content": {"path": "a.rs", "patch": "+x"}}),
            json!({"type": "text", "content": "found"})
        ]
    );
    let history = rt.system.view(&thread()).await.unwrap();
    assert!(history.iter().any(|e| matches!(&e.item,
        infinity_agent_core::history::Item::ToolResult { text, display_as, .. } if text == "found it" && display_as.len() == 2)));
}

#[tokio::test]
async fn a_callback_the_runtime_refuses_gives_its_call_an_error_result() {
    let cases = [
        // Neither text nor content.
        (
            json!({"type": "tool_result", "group_id": "main", "id": "ID"}),
            "neither",
        ),
        // An authorization link that is not https.
        (
            json!({"type": "oauth", "group_id": "main", "id": "ID",
                   "auth_url": "http://auth.example.com/authorize"}),
            "https",
        ),
        // Not a callback at all.
        (
            json!({"type": "tool_progress", "group_id": "main"}),
            "tool_progress",
        ),
    ];
    for (body, says) in cases {
        let fake = start_fake(&[200]).await;
        let mut rt = start(&fake).await;
        rt.system
            .send_user_message(&thread(), "look it up")
            .await
            .unwrap();
        rt.settle().await;
        let invocation = fake.invocations.lock().unwrap()[0].clone();
        let url = invocation["callback_url"].as_str().unwrap().to_owned();
        let id = invocation["id"].as_str().unwrap().to_owned();
        let body: Value =
            serde_json::from_str(&body.to_string().replace("\"ID\"", &format!("\"{id}\"")))
                .unwrap();
        let (status, why) = rt.post(&url, &body).await;
        assert_eq!(status, 400, "{why}");
        assert!(why.contains(says) && why.contains("error result"), "{why}");
        rt.settle().await;
        // The call does not wait for ever: it has an error result naming the problem, and the
        // model went on.
        let results = rt.results();
        assert_eq!(results.len(), 1, "{results:?}");
        assert!(results[0].1 && results[0].0.contains(says), "{results:?}");
        assert!(rt
            .system
            .record(&thread())
            .await
            .unwrap()
            .unwrap()
            .pending_calls
            .is_empty());
        assert!(rt
            .log
            .iter()
            .any(|e| matches!(&e.kind, OutputKind::AssistantText { text } if text == "noted")));
    }
}

#[tokio::test]
async fn identical_events_are_distinct_and_a_keyed_retry_counts_once() {
    let fake = start_fake(&[200]).await;
    let mut rt = start(&fake).await;
    rt.system
        .send_user_message(&thread(), "look it up")
        .await
        .unwrap();
    rt.settle().await;
    let invocation = fake.invocations.lock().unwrap()[0].clone();
    let url = invocation["callback_url"].as_str().unwrap().to_owned();
    let id = invocation["id"].as_str().unwrap().to_owned();
    let subscribed = json!({"type": "tool_result", "group_id": "main", "id": id,
                            "text": "watching", "subscription": true});
    assert_eq!(rt.post(&url, &subscribed).await.0, 200);
    rt.settle().await;
    let event = |text: &str| {
        json!({"type": "subscription_event", "group_id": "main", "tool_call_id": id,
               "text": text, "associative": true})
    };
    // The same body twice: a price that is unchanged twice is two events.
    for _ in 0..2 {
        assert_eq!(rt.post(&url, &event("price unchanged")).await.0, 200);
        rt.settle().await;
    }
    // A retry of one delivery, named by the header or by `event_id`: one event.
    for _ in 0..2 {
        let r = rt
            .http
            .post(&url)
            .header("Idempotency-Key", "delivery-7")
            .json(&event("price up"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        rt.settle().await;
    }
    let mut with_id = event("price down");
    with_id["event_id"] = json!("evt-9");
    for _ in 0..2 {
        assert_eq!(rt.post(&url, &with_id).await.0, 200);
        rt.settle().await;
    }
    let count = |text: &str| rt.results().iter().filter(|(t, _)| t == text).count();
    assert_eq!(count("price unchanged"), 2);
    assert_eq!(count("price up"), 1);
    assert_eq!(count("price down"), 1);

    // A view that returns to an earlier state is shown again.
    for patch in ["+1", "+2", "+1"] {
        let view = json!({"type": "view_update", "group_id": "main", "view_type": "diff",
                          "content": {"patch": patch}});
        assert_eq!(rt.post(&url, &view).await.0, 200);
        rt.settle().await;
    }
    let shown: Vec<Value> = rt
        .log
        .iter()
        .filter_map(|e| match &e.kind {
            OutputKind::ViewUpdated { content, .. } => Some(content["patch"].clone()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, ["+1", "+2", "+1"]);
}

#[tokio::test]
async fn a_turns_invocations_go_out_together() {
    // `slow` is acknowledged only once `fast` has arrived: sent one after the other, `slow`
    // would hold `fast` back and fail after its retries.
    let fake = start_fake(&[200]).await;
    let mut rt = start(&fake).await;
    rt.system
        .send_user_message(&thread(), "two at once")
        .await
        .unwrap();
    rt.settle().await;
    let invoked: Vec<Value> = fake
        .invocations
        .lock()
        .unwrap()
        .iter()
        .map(|i| i["arguments"]["q"].clone())
        .collect();
    assert_eq!(invoked.len(), 2, "{invoked:?}");
    assert!(
        rt.results().is_empty(),
        "no call failed: {:?}",
        rt.results()
    );
}

#[tokio::test]
async fn an_interrupt_cancels_the_call_and_drops_its_late_result() {
    let fake = start_fake(&[200]).await;
    let mut rt = start(&fake).await;
    rt.system
        .send_user_message(&thread(), "look it up")
        .await
        .unwrap();
    rt.settle().await;
    let invocation = fake.invocations.lock().unwrap()[0].clone();
    let url = invocation["callback_url"].as_str().unwrap().to_owned();
    let id = invocation["id"].as_str().unwrap().to_owned();
    rt.system.interrupt(&thread(), false).await.unwrap();
    rt.settle().await;
    assert_eq!(
        fake.cancels.lock().unwrap().clone(),
        [json!({"thread_id": "main", "tool_call_id": id})]
    );
    let results = rt.results();
    assert!(
        results.len() == 1 && results[0].1 && results[0].0.starts_with("Interrupted by the user"),
        "{results:?}"
    );
    // The tool answers anyway: accepted by the receiver, dropped by the thread.
    let late = json!({"type": "tool_result", "group_id": "main", "id": id, "text": "too late"});
    assert_eq!(rt.post(&url, &late).await.0, 200);
    rt.settle().await;
    assert_eq!(rt.results().len(), 1, "{:?}", rt.results());
    assert!(!rt
        .log
        .iter()
        .any(|e| matches!(&e.kind, OutputKind::AssistantText { .. })));
    // An unknown thread cannot be interrupted.
    let error = rt
        .system
        .interrupt(&ThreadId::new("nobody").unwrap(), false)
        .await
        .unwrap_err();
    assert_eq!(error.to_string(), "no thread nobody");
}

#[tokio::test]
async fn a_call_past_its_servers_deadline_gets_an_error_result_and_a_cancel() {
    let fake = start_fake(&[200]).await;
    let mut rt = start_with_config(&fake, "deadline: 1s").await;
    rt.system
        .send_user_message(&thread(), "look it up")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    // (Settling waits for the deadline's timer too.)
    rt.settle().await;
    assert!(started.elapsed() >= Duration::from_millis(900));
    let results = rt.results();
    assert!(
        results.len() == 1
            && results[0].1
            && results[0]
                .0
                .contains("no result from the tool server within 1s"),
        "{results:?}"
    );
    assert_eq!(fake.cancels.lock().unwrap().len(), 1);
    assert!(rt
        .log
        .iter()
        .any(|e| matches!(&e.kind, OutputKind::AssistantText { text } if text == "noted")));
}

#[tokio::test]
async fn a_bearer_token_goes_with_discovery_and_invocations() {
    std::env::set_var("INFINITY_TEST_LOOKUP_TOKEN", "s3cret");
    let fake = start_fake(&[200]).await;
    let mut rt = start_with(&fake, "{bearer_env: INFINITY_TEST_LOOKUP_TOKEN}").await;
    rt.system
        .send_user_message(&thread(), "look it up")
        .await
        .unwrap();
    rt.settle().await;
    let seen = fake.authorization.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        2,
        "a manifest request and an invocation: {seen:?}"
    );
    assert!(
        seen.iter().all(|a| a.as_deref() == Some("Bearer s3cret")),
        "{seen:?}"
    );
    // Without auth settings, nothing is sent.
    let plain = start_fake(&[200]).await;
    let mut rt = start(&plain).await;
    rt.system
        .send_user_message(&thread(), "look it up")
        .await
        .unwrap();
    rt.settle().await;
    assert!(plain
        .authorization
        .lock()
        .unwrap()
        .iter()
        .all(Option::is_none));
}

/// Serves `answer` (a status and a body) at the manifest's path; the server's base URL.
async fn manifest_server(status: u16, body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route(
        "/.well-known/rap-toolset",
        get(move || async move { (StatusCode::from_u16(status).unwrap(), body) }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

#[tokio::test]
async fn a_manifest_that_cannot_be_had_says_which_kind_of_failure() {
    use infinity_agent_core::tools::servers::DiscoveryError;
    let signer = CallbackSigner::new(SECRET.to_vec(), "http://127.0.0.1:9").unwrap();
    let client = RapClient::new(signer).with_timeout(Duration::from_secs(5));
    // Nothing listens: the server may answer next time.
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let nobody = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let err = client.manifest(&nobody).await.unwrap_err();
    assert!(matches!(err, DiscoveryError::Unreachable(_)), "{err:?}");
    // An error status: refused, naming it.
    let failing = manifest_server(500, "down").await;
    let err = client.manifest(&failing).await.unwrap_err();
    assert!(
        matches!(&err, DiscoveryError::Refused(why) if why.contains("500")),
        "{err:?}"
    );
    // A 200 whose body is no manifest: invalid, saying why.
    let garbled = manifest_server(200, r#"{"name": "x"}"#).await;
    let err = client.manifest(&garbled).await.unwrap_err();
    assert!(
        matches!(&err, DiscoveryError::InvalidManifest(why) if why.starts_with("invalid manifest")),
        "{err:?}"
    );
}
