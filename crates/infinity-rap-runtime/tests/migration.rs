//! Moving a live conversation between two embedded runtimes over real HTTP (RAP's session
//! migration): the stateful tool server is told to move its state first, the call in flight and
//! the sleep survive the move, a late callback that reaches the old host is forwarded, new calls
//! go to the destination's server, and a move that cannot complete leaves the conversation
//! running where it was.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::history::Item;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder, Front};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::MigrationState;
use infinity_agent_core::tools::servers::ToolServerConfig;
use infinity_rap::signing::{CallbackSigner, NotificationKey, NOTIFICATION_SIGNATURE_HEADER};
use infinity_rap_runtime::client::{RapClient, RetryPolicy};
use infinity_rap_runtime::migration::{self, Host, MoveError, StartRequest};
use serde_json::{json, Value};
use tokio::net::TcpListener;

/// A tool server that keeps state per conversation (`needsMigration`), written by hand.
#[derive(Default)]
struct Server {
    base: Mutex<String>,
    invocations: Mutex<Vec<Value>>,
    migrations: Mutex<Vec<Value>>,
    /// Each `/cancel_tool_call`: its signature header and body.
    cancels: Mutex<Vec<(Option<String>, Vec<u8>)>>,
}

async fn start_server() -> Arc<Server> {
    let server = Arc::new(Server::default());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    *server.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new()
        .route(
            "/.well-known/rap-toolset",
            get(|State(s): State<Arc<Server>>| async move {
                let base = s.base.lock().unwrap().clone();
                Json(json!({
                    "name": "stateful-tools",
                    "endpoint": format!("{base}/invoke"),
                    "needsMigration": true,
                    "tools": [{
                        "name": "lookup",
                        "description": "Looks something up.",
                        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}
                    }]
                }))
            }),
        )
        .route(
            "/invoke",
            post(
                |State(s): State<Arc<Server>>, Json(body): Json<Value>| async move {
                    s.invocations.lock().unwrap().push(body);
                    StatusCode::OK
                },
            ),
        )
        .route(
            "/migrate",
            post(
                |State(s): State<Arc<Server>>, Json(body): Json<Value>| async move {
                    s.migrations.lock().unwrap().push(body);
                    StatusCode::OK
                },
            ),
        )
        .route("/close_thread", post(|| async { StatusCode::OK }))
        .route(
            "/cancel_tool_call",
            post(
                |State(s): State<Arc<Server>>,
                 headers: axum::http::HeaderMap,
                 body: axum::body::Bytes| async move {
                    let signature = headers
                        .get(NOTIFICATION_SIGNATURE_HEADER)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    s.cancels.lock().unwrap().push((signature, body.to_vec()));
                    StatusCode::OK
                },
            ),
        )
        .with_state(Arc::clone(&server));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    server
}

impl Server {
    fn base(&self) -> String {
        self.base.lock().unwrap().clone()
    }
}

const SCRIPT: &str = r#"
rules:
  - when: "^look it up$"
    reply:
      tool_calls: [{name: lookup, args: {q: "answer"}}]
  - when: "(?m)^nap$"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 3}}]
  - reply: {text: "noted"}
"#;

/// One embedded host: its runtime, its receiver, and what a move needs of it.
struct Runtime {
    system: Arc<AgentSystem>,
    signer: CallbackSigner,
    client: Arc<RapClient>,
    receiver: String,
}

async fn start_runtime(server: &Server, secret: &[u8]) -> Runtime {
    let model = ScriptedModel::parse(SCRIPT, Path::new("test.script.yaml")).unwrap();
    let mut agent = AgentSpec::new("looker", "You look things up.", Arc::new(model));
    let config: ToolServerConfig = serde_yaml_ng::from_str(&server.base()).unwrap();
    agent.tool_servers = vec![config.clone()];
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let receiver = format!("http://{}", listener.local_addr().unwrap());
    let signer = CallbackSigner::new(secret.to_vec(), &receiver).unwrap();
    let client = Arc::new(
        RapClient::new(signer.clone())
            .with_configured(&[config])
            .unwrap()
            .with_retry(RetryPolicy::new(
                3,
                Duration::from_millis(20),
                Duration::from_millis(100),
            )),
    );
    let system = AgentSystemBuilder::new()
        .with_agent(agent)
        .with_tokio_sleep_tools()
        .with_discovery(client.clone())
        .with_dispatcher(client.clone())
        .build()
        .await
        .unwrap();
    let app = infinity_rap_runtime::receiver::router(signer.clone(), Arc::new(system.clone()));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Runtime {
        system: Arc::new(system),
        signer,
        client,
        receiver,
    }
}

impl Runtime {
    fn host(&self) -> Host<'_> {
        Host {
            store: self.system.store().as_ref(),
            performer: self.system.as_ref(),
            signer: &self.signer,
            client: &self.client,
            runs_agent: &|name| name == "looker",
        }
    }

    /// Waits until nothing runs and no timer is due within the next half second.
    async fn settle(&self) {
        for _ in 0..2 {
            let soon = tokio::time::Instant::now() + Duration::from_millis(500);
            self.system.wait_idle(Some(soon)).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn lines(&self) -> Vec<String> {
        self.system
            .view(&main())
            .await
            .unwrap()
            .iter()
            .map(|e| match &e.item {
                Item::Message { text, .. } => format!("message: {text}"),
                Item::Assistant {
                    text, tool_calls, ..
                } => match text {
                    Some(t) => format!("assistant: {t}"),
                    None => format!(
                        "calls: {}",
                        tool_calls
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                },
                Item::ToolResult { name, text, .. } => format!("{name}: {text}"),
                other => format!("{other:?}"),
            })
            .collect()
    }
}

fn main() -> ThreadId {
    ThreadId::new("main").unwrap()
}

/// Waits (up to 10 s) until `done` holds.
async fn eventually<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if done().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test]
async fn a_live_conversation_moves_with_its_call_in_flight_and_its_sleep() {
    let (here_tools, there_tools) = (start_server().await, start_server().await);
    let here = start_runtime(&here_tools, b"the source host's secret, 32 bytes or more").await;
    let there = start_runtime(
        &there_tools,
        b"the destination's own secret, also 32+ bytes",
    )
    .await;

    let http = reqwest::Client::new();
    // A subscription at the source: the first call's result says events will follow.
    here.system
        .send_user_message(&main(), "look it up")
        .await
        .unwrap();
    here.settle().await;
    let watch = here_tools.invocations.lock().unwrap()[0].clone();
    let subscribed = json!({"type": "tool_result", "group_id": "main", "id": watch["id"],
                            "text": "watching", "subscription": true});
    let url = watch["callback_url"].as_str().unwrap();
    assert_eq!(
        http.post(url)
            .json(&subscribed)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    here.settle().await;
    assert_eq!(
        here.system
            .record(&main())
            .await
            .unwrap()
            .unwrap()
            .subscriptions
            .len(),
        1
    );
    // A call in flight at the source, and then a sleep (the message moves the call on).
    here.system
        .send_user_message(&main(), "look it up")
        .await
        .unwrap();
    here.settle().await;
    here.system.send_user_message(&main(), "nap").await.unwrap();
    here.settle().await;
    let invocation = here_tools.invocations.lock().unwrap()[1].clone();
    let old_callback = invocation["callback_url"].as_str().unwrap().to_owned();
    assert!(old_callback.starts_with(&here.receiver), "{old_callback}");

    let request = StartRequest {
        to: there.receiver.clone(),
        servers: BTreeMap::from([(here_tools.base(), there_tools.base())]),
    };
    let moved = migration::move_conversation(&here.host(), &there.host(), &main(), &request)
        .await
        .unwrap();
    assert_eq!(moved.threads, 1);

    // The stateful server was asked to move the conversation to its counterpart, once.
    assert_eq!(
        *here_tools.migrations.lock().unwrap(),
        [json!({"session_id": "main", "destination_url": there_tools.base()})]
    );
    assert!(there_tools.migrations.lock().unwrap().is_empty());
    // The destination has the conversation, its two calls pending; the source a tombstone.
    let record = there.system.record(&main()).await.unwrap().unwrap();
    let pending: Vec<&str> = record
        .pending_calls
        .iter()
        .map(|p| p.tool.as_str())
        .collect();
    assert_eq!(pending, ["lookup", "sleep"]);
    assert_eq!(
        record.subscriptions[0].call_id.as_str(),
        watch["id"].as_str().unwrap()
    );
    assert_eq!(there.lines().await, here.lines().await);
    let tombstone = here.system.record(&main()).await.unwrap().unwrap();
    let MigrationState::Moved { forward_url } = &tombstone.migration.as_ref().unwrap().state else {
        panic!("the source is not a tombstone: {:?}", tombstone.migration);
    };
    assert!(forward_url.starts_with(&format!("{}/rap/forward/main?sig=", there.receiver)));

    // The tool answers at the callback URL it was given (the old host's): forwarded.
    let result =
        json!({"type": "tool_result", "group_id": "main", "id": invocation["id"], "text": "42"});
    let status = http
        .post(&old_callback)
        .json(&result)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    eventually("the destination has the lookup's result", || async {
        there
            .lines()
            .await
            .iter()
            .any(|l| l == "receive_event__injected: 42")
    })
    .await;
    // The subscription's next event, sent where the server learned to send it, is forwarded and
    // reaches the conversation at the destination.
    let event = json!({"type": "subscription_event", "group_id": "main",
                       "tool_call_id": watch["id"], "text": "{\"tick\":1}", "associative": true});
    assert_eq!(
        http.post(url).json(&event).send().await.unwrap().status(),
        200
    );
    eventually("the destination has the subscription's event", || async {
        there
            .lines()
            .await
            .iter()
            .any(|l| l == "receive_event__injected: {\"tick\":1}")
    })
    .await;
    // The sleep wakes at the destination, where its timer was armed again.
    eventually("the sleep ended at the destination", || async {
        there
            .system
            .record(&main())
            .await
            .unwrap()
            .unwrap()
            .pending_calls
            .is_empty()
    })
    .await;
    // (The lookup's result woke the thread first, so the sleep's own end came as an event.)
    assert!(
        there
            .lines()
            .await
            .iter()
            .any(|l| l.contains("The sleep that was interrupted earlier has ended")),
        "{:#?}",
        there.lines().await
    );
    // Nothing ran at the source after the move.
    assert!(!here.lines().await.iter().any(|l| l.contains("42")));

    // A new call goes to the destination's server, with the destination's callback URL and the
    // notification key the thread had at the source (servers keep the key they learned).
    there
        .system
        .send_user_message(&main(), "look it up")
        .await
        .unwrap();
    there.settle().await;
    let invocation = there_tools.invocations.lock().unwrap()[0].clone();
    let new_callback = invocation["callback_url"].as_str().unwrap().to_owned();
    assert!(new_callback.starts_with(&there.receiver));
    assert_eq!(here_tools.invocations.lock().unwrap().len(), 2);
    let nk = |url: &str| {
        url.split(['?', '&'])
            .find_map(|kv| kv.strip_prefix("nk="))
            .unwrap()
            .to_owned()
    };
    assert_eq!(nk(&new_callback), nk(&old_callback));
    // Its cancellation is signed with that key too.
    there.system.interrupt(&main(), false).await.unwrap();
    eventually("the destination's server got the cancellation", || async {
        !there_tools.cancels.lock().unwrap().is_empty()
    })
    .await;
    let (signature, body) = there_tools.cancels.lock().unwrap()[0].clone();
    let key = NotificationKey::parse(&nk(&old_callback)).unwrap();
    key.verify(
        signature.as_deref(),
        &body,
        jiff::Timestamp::now().as_second(),
    )
    .unwrap();

    // A message posted at the old host still reaches the conversation.
    here.system
        .send_user_message(&main(), "hello again")
        .await
        .unwrap();
    eventually("the forwarded message arrived", || async {
        there
            .lines()
            .await
            .iter()
            .any(|l| l == "message: hello again")
    })
    .await;

    // Forged forwarding is refused: no signature, another thread's signature, wrong body.
    let bare = format!("{}/rap/forward/main", there.receiver);
    let input = json!({"id": "forged-1", "thread_id": "main", "type": "user_message", "text": "x"});
    assert_eq!(
        http.post(&bare).json(&input).send().await.unwrap().status(),
        401
    );
    let other = there.signer.forward_url("other");
    let other_sig = other.split_once("?").unwrap().1;
    let forged = format!("{bare}?{other_sig}");
    assert_eq!(
        http.post(&forged)
            .json(&input)
            .send()
            .await
            .unwrap()
            .status(),
        403
    );
    let for_other =
        json!({"id": "forged-2", "thread_id": "other", "type": "user_message", "text": "x"});
    let (status, why) = {
        let r = http
            .post(forward_url)
            .json(&for_other)
            .send()
            .await
            .unwrap();
        (r.status(), r.text().await.unwrap())
    };
    assert_eq!(status, 400, "{why}");
    assert!(why.contains("thread other"), "{why}");
}

#[tokio::test]
async fn a_move_that_cannot_complete_leaves_the_conversation_running_where_it_was() {
    let tools = start_server().await;
    let here = start_runtime(&tools, b"the source host's secret, 32 bytes or more").await;
    let there = start_runtime(&tools, b"the destination's own secret, also 32+ bytes").await;
    here.system
        .send_user_message(&main(), "look it up")
        .await
        .unwrap();
    here.settle().await;

    // The stateful server has no counterpart named: refused before anything moves.
    let request = StartRequest {
        to: there.receiver.clone(),
        servers: BTreeMap::new(),
    };
    let err = migration::move_conversation(&here.host(), &there.host(), &main(), &request)
        .await
        .unwrap_err();
    assert!(matches!(err, MoveError::UnmappedServer { .. }), "{err}");
    assert!(err.to_string().contains("add --server"), "{err}");
    assert!(tools.migrations.lock().unwrap().is_empty());
    assert!(there.system.record(&main()).await.unwrap().is_none());

    // The destination already has a thread by that id: the import fails, the source runs on.
    there.system.send_user_message(&main(), "hi").await.unwrap();
    there.settle().await;
    let request = StartRequest {
        to: there.receiver.clone(),
        servers: BTreeMap::from([(tools.base(), tools.base())]),
    };
    let err = migration::move_conversation(&here.host(), &there.host(), &main(), &request)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "thread main already exists at the destination"
    );
    let record = here.system.record(&main()).await.unwrap().unwrap();
    assert!(record.migration.is_none() && record.held.is_empty());
    here.system
        .send_user_message(&main(), "still here?")
        .await
        .unwrap();
    here.settle().await;
    assert_eq!(
        here.lines().await.last().map(String::as_str),
        Some("assistant: noted")
    );
}

#[tokio::test]
async fn a_move_whose_last_step_did_not_reach_the_source_is_finished_later() {
    let tools = start_server().await;
    let here = start_runtime(&tools, b"the source host's secret, 32 bytes or more").await;
    let there = start_runtime(&tools, b"the destination's own secret, also 32+ bytes").await;
    here.system
        .send_user_message(&main(), "look it up")
        .await
        .unwrap();
    here.settle().await;
    let (source, destination) = (here.host(), there.host());
    let request = StartRequest {
        to: there.receiver.clone(),
        servers: BTreeMap::from([(tools.base(), tools.base())]),
    };
    // Start and import, as `move_conversation` does; the finish never reaches the source.
    let bundle = migration::start(source, &main(), &request).await.unwrap();
    migration::import(destination, &bundle).await.unwrap();
    // Meanwhile a message reaches the old host: held, not lost.
    here.system
        .send_user_message(&main(), "are you moving?")
        .await
        .unwrap();
    here.settle().await;
    let held = here.system.record(&main()).await.unwrap().unwrap();
    assert_eq!(held.held.len(), 1);
    // The source cannot be asked for forwarding URLs of a conversation it does not run.
    let err = migration::forward_urls(source, &main()).await.unwrap_err();
    assert!(err.to_string().contains("does not run here"), "{err}");

    migration::finish_move(&source, &destination, &main())
        .await
        .unwrap();
    let tombstone = here.system.record(&main()).await.unwrap().unwrap();
    assert!(matches!(
        tombstone.migration.map(|m| m.state),
        Some(MigrationState::Moved { .. })
    ));
    eventually("the held message reached the destination", || async {
        there
            .lines()
            .await
            .iter()
            .any(|l| l == "message: are you moving?")
    })
    .await;
}
