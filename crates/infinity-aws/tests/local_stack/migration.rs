//! A live conversation moves from the embedded runtime to the stack and back (RAP's session
//! migration), through the real handlers, SQS and DynamoDB: the stateful tool server moves its
//! state first, the call in flight and the sleep survive each move, and a tool's late callback to
//! the host the conversation left is forwarded to where it runs now.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Json;
use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::MigrationState;
use infinity_agent_core::tools::servers::ToolServerConfig;
use infinity_aws::migration::StackSide;
use infinity_aws::store::DynamoThreadStore;
use infinity_rap::signing::CallbackSigner;
use infinity_rap_runtime::client::RapClient;
use infinity_rap_runtime::migration::{self, Host, StartRequest};
use serde_json::{json, Value};

use crate::harness::{line, stack_with, tid, Options, Stack, CALLBACK_SECRET};

const SCRIPT: &str = r#"
rules:
  - when: "^look it up$"
    reply:
      tool_calls: [{name: lookup, args: {q: "answer"}}]
  - when: "(?m)^nap$"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 4}}]
  - reply: {text: "noted"}
"#;

/// A tool server that keeps state per conversation (`needsMigration`).
#[derive(Default)]
struct Tools {
    base: Mutex<String>,
    invocations: Mutex<Vec<Value>>,
    migrations: Mutex<Vec<Value>>,
}

async fn start_tools() -> Arc<Tools> {
    let tools = Arc::new(Tools::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    *tools.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route(
            "/.well-known/rap-toolset",
            get(|State(t): State<Arc<Tools>>| async move {
                let base = t.base.lock().unwrap().clone();
                Json(json!({
                    "name": "stateful", "endpoint": format!("{base}/invoke"), "needsMigration": true,
                    "tools": [{"name": "lookup", "description": "Looks up.", "inputSchema": {"type": "object"}}]
                }))
            }),
        )
        .route(
            "/invoke",
            post(|State(t): State<Arc<Tools>>, Json(v): Json<Value>| async move {
                t.invocations.lock().unwrap().push(v);
                StatusCode::OK
            }),
        )
        .route(
            "/migrate",
            post(|State(t): State<Arc<Tools>>, Json(v): Json<Value>| async move {
                t.migrations.lock().unwrap().push(v);
                StatusCode::OK
            }),
        )
        .route("/close_thread", post(|| async { StatusCode::OK }))
        .route("/cancel_tool_call", post(|| async { StatusCode::OK }))
        .with_state(Arc::clone(&tools));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    tools
}

impl Tools {
    fn base(&self) -> String {
        self.base.lock().unwrap().clone()
    }

    /// Answers the `n`th invocation at the callback URL it came with.
    async fn answer(&self, n: usize, text: &str) {
        let invocation = self.invocations.lock().unwrap()[n].clone();
        let body = json!({"type": "tool_result", "group_id": invocation["group_id"],
                          "id": invocation["id"], "text": text});
        let status = reqwest::Client::new()
            .post(invocation["callback_url"].as_str().unwrap())
            .json(&body)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200);
    }
}

/// The embedded runtime: the same agent, its own tool server and receiver.
struct Embedded {
    system: Arc<AgentSystem>,
    signer: CallbackSigner,
    client: Arc<RapClient>,
}

impl Embedded {
    async fn start(tools: &Tools) -> Self {
        let model = ScriptedModel::parse(SCRIPT, Path::new("script.yaml")).unwrap();
        let mut agent = AgentSpec::new("tester", "Test agent.", Arc::new(model));
        let server: ToolServerConfig = serde_json::from_value(json!(tools.base())).unwrap();
        agent.tool_servers = vec![server.clone()];
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let receiver = format!("http://{}", listener.local_addr().unwrap());
        let signer = CallbackSigner::new(
            b"the laptop's own secret, 32 bytes or more".to_vec(),
            &receiver,
        )
        .unwrap();
        let client = Arc::new(
            RapClient::new(signer.clone())
                .with_configured(&[server])
                .unwrap(),
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
        Self {
            system: Arc::new(system),
            signer,
            client,
        }
    }

    fn host(&self) -> Host<'_> {
        Host {
            store: self.system.store().as_ref(),
            performer: self.system.as_ref(),
            signer: &self.signer,
            client: &self.client,
            runs_agent: &|name| name == "tester",
        }
    }

    async fn history(&self) -> Vec<String> {
        self.system
            .view(&tid("trip"))
            .await
            .unwrap()
            .iter()
            .map(|e| line(&e.item))
            .collect()
    }

    async fn settle(&self) {
        let soon = tokio::time::Instant::now() + Duration::from_millis(500);
        self.system.wait_idle(Some(soon)).await;
    }
}

fn stack_side(s: &Stack) -> StackSide {
    let store = DynamoThreadStore::new(
        s.clients.dynamodb.clone(),
        s.config.table.clone(),
        s.config.dedup_ttl,
    );
    let signer =
        CallbackSigner::new(CALLBACK_SECRET.to_vec(), s.callback_url.as_deref().unwrap()).unwrap();
    StackSide::new(store, s.sender.clone(), signer).with_agents(vec!["tester".into()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_moves_from_the_embedded_runtime_to_the_stack_and_back() {
    let (laptop_tools, cloud_tools) = (start_tools().await, start_tools().await);
    let Some(s) = stack_with(
        SCRIPT,
        Options {
            tool_servers: vec![cloud_tools.base()],
            ..Options::default()
        },
    )
    .await
    else {
        return;
    };
    let laptop = Embedded::start(&laptop_tools).await;
    let cloud = stack_side(&s);

    // On the laptop: a call in flight, then a sleep.
    laptop
        .system
        .send_user_message(&tid("trip"), "look it up")
        .await
        .unwrap();
    laptop.settle().await;
    laptop
        .system
        .send_user_message(&tid("trip"), "nap")
        .await
        .unwrap();
    laptop.settle().await;
    assert_eq!(laptop_tools.invocations.lock().unwrap().len(), 1);

    // To the stack.
    let to_cloud = StartRequest {
        to: "aws".into(),
        servers: BTreeMap::from([(laptop_tools.base(), cloud_tools.base())]),
    };
    migration::move_conversation(&laptop.host(), &cloud.host(), &tid("trip"), &to_cloud)
        .await
        .unwrap();
    assert_eq!(
        *laptop_tools.migrations.lock().unwrap(),
        [json!({"session_id": "trip", "destination_url": cloud_tools.base()})]
    );
    let record = s.record("trip").await.unwrap();
    let pending: Vec<&str> = record
        .pending_calls
        .iter()
        .map(|p| p.tool.as_str())
        .collect();
    assert_eq!(pending, ["lookup", "sleep"]);
    assert_eq!(s.stored_history("trip").await, laptop.history().await);
    let tombstone = laptop.system.record(&tid("trip")).await.unwrap().unwrap();
    assert!(matches!(
        tombstone.migration.map(|m| m.state),
        Some(MigrationState::Moved { .. })
    ));

    // The tool answers at the laptop's receiver; the laptop forwards it to the stack.
    laptop_tools.answer(0, "found on the laptop's server").await;
    s.run_until(
        Duration::from_secs(60),
        "the forwarded result ran on the stack",
        || async {
            s.stored_history_has("trip", "found on the laptop's server")
                .await
        },
    )
    .await;
    // The sleep ends on the stack (its timer armed again there, through the relay queue).
    s.run_until(
        Duration::from_secs(60),
        "the sleep ended on the stack",
        || async { s.record("trip").await.unwrap().pending_calls.is_empty() },
    )
    .await;
    assert!(
        s.stored_history_has("trip", "The sleep that was interrupted earlier has ended")
            .await
    );

    // A new call on the stack goes to the stack's server; then the conversation goes back.
    s.enqueue_message("trip", "look it up").await;
    s.run_until(
        Duration::from_secs(60),
        "the stack invoked its server",
        || async { !cloud_tools.invocations.lock().unwrap().is_empty() },
    )
    .await;
    let callback = cloud_tools.invocations.lock().unwrap()[0]["callback_url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(callback.starts_with(s.callback_url.as_deref().unwrap()));
    let to_laptop = StartRequest {
        to: "laptop".into(),
        servers: BTreeMap::from([(cloud_tools.base(), laptop_tools.base())]),
    };
    migration::move_conversation(&cloud.host(), &laptop.host(), &tid("trip"), &to_laptop)
        .await
        .unwrap();
    assert_eq!(
        *cloud_tools.migrations.lock().unwrap(),
        [json!({"session_id": "trip", "destination_url": laptop_tools.base()})]
    );
    let home = laptop.system.record(&tid("trip")).await.unwrap().unwrap();
    assert!(
        home.migration.is_none(),
        "the laptop's tombstone took the conversation back"
    );
    assert_eq!(laptop.history().await, s.stored_history("trip").await);

    // The stack's server answers at the stack's callback function: the stack forwards it.
    cloud_tools.answer(0, "found on the stack's server").await;
    let mut forwarded = false;
    for _ in 0..100 {
        s.round().await;
        laptop.settle().await;
        if laptop
            .history()
            .await
            .iter()
            .any(|l| l.contains("found on the stack's server"))
        {
            forwarded = true;
            break;
        }
    }
    assert!(forwarded, "{:#?}", laptop.history().await);
    assert!(
        !s.stored_history_has("trip", "found on the stack's server")
            .await
    );
}
