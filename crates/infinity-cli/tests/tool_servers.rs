//! `infinity run` with tool servers: the example servers run in this process over real HTTP,
//! the binary discovers them, invokes them, receives their signed callbacks on its own port,
//! and waits for what the thread tree is owed.

use std::path::Path;
use std::process::{Command, Output};

use infinity_rap::kit::testing::LocalServer;
use infinity_rap::kit::{tool_definition, ToolServer};
use rap_example_servers::{get_time_server, ticker_server};
use serde_json::{json, Value};

/// Writes an agent file (with `servers` as `tool_servers`) and its script into `dir`.
fn agent(dir: &Path, servers: &[&str], script: &str) -> String {
    let list: Vec<String> = servers.iter().map(|s| format!("  - {s}\n")).collect();
    std::fs::write(dir.join("script.yaml"), script).unwrap();
    let path = dir.join("agent.yaml");
    std::fs::write(
        &path,
        format!(
            "name: timekeeper\nmodel: script:script.yaml\nsystem: You keep time.\ntool_servers:\n{}",
            list.concat()
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// Runs `infinity run --json` off the async runtime (the servers live on it).
async fn run(agent: String, timeout: &str, message: &str) -> (Output, Vec<Value>) {
    let (timeout, message) = (timeout.to_owned(), message.to_owned());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args([
                "run",
                "--agent",
                &agent,
                "--json",
                "--timeout",
                &timeout,
                &message,
            ])
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (out, events)
}

fn of<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

const SCRIPT: &str = r#"
rules:
  - when: "^what time is it$"
    reply:
      tool_calls:
        - {name: get_time, args: {timezone: "Asia/Tokyo"}}
        - {name: ticker, args: {count: 5, interval_seconds: 0.5, label: "t"}}
  - thread: child
    when: "spawned to handle this event of subscription ([A-Za-z0-9_-]+)\\."
    reply:
      tool_calls:
        - {name: report_to_parent, args: {report: "tick seen on $1"}}
        - {name: close_thread, args: {thread_id: "${thread_id}"}}
  - thread: child
    reply: {text: "child done"}
  - when: "tick seen on ([A-Za-z0-9_-]+)"
    reply:
      tool_calls: [{name: cancel_subscription, args: {tool_call_id: "$1"}}]
  - when: "Subscribed"
    reply: {text: "The time is in; waiting for ticks."}
  - reply: {text: "done"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_gets_the_time_subscribes_handles_an_event_and_cancels() {
    let clock = LocalServer::start(get_time_server()).await.unwrap();
    let ticker = LocalServer::start(ticker_server()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = agent(dir.path(), &[clock.base_url(), ticker.base_url()], SCRIPT);
    let (out, events) = run(file, "60", "what time is it").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{events:#?}");
    assert!(
        stderr.contains("callbacks received at http://127.0.0.1:"),
        "{stderr}"
    );
    let results = of(&events, "tool_result");
    let time = results.iter().find(|r| r["name"] == "get_time").unwrap();
    assert!(time["text"].as_str().unwrap().contains("+09:00"), "{time}");
    let subscribed = results.iter().find(|r| r["name"] == "ticker").unwrap();
    assert!(
        subscribed["text"].as_str().unwrap().contains("Subscribed"),
        "{subscribed}"
    );
    // An event was handled in its own thread, which reported back; then the model cancelled.
    let spawned = of(&events, "thread_spawned");
    assert!(!spawned.is_empty() && spawned.len() < 5, "{spawned:#?}");
    let cancel = results
        .iter()
        .find(|r| r["name"] == "cancel_subscription" && r["is_error"] == false)
        .unwrap();
    assert!(
        cancel["text"].as_str().unwrap().contains("ancel"),
        "{cancel}"
    );
    let text = serde_json::to_string(&events).unwrap();
    assert!(
        !text.contains("final event"),
        "the ticker ran to its end: {text}"
    );
    // The ticker heard the cancellation: the subscription is gone on its side too.
    let call = of(&events, "tool_call")
        .into_iter()
        .find(|c| c["name"] == "ticker")
        .unwrap();
    let (thread, call_id) = (
        call["thread_id"].as_str().unwrap(),
        call["call_id"].as_str().unwrap(),
    );
    let mut alive = true;
    for _ in 0..50 {
        alive = ticker.tool_call_status(thread, call_id).await.unwrap();
        if !alive {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(!alive, "the ticker still runs the subscription");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_waits_for_an_active_subscription_and_stops_at_the_timeout_saying_so() {
    let ticker = LocalServer::start(ticker_server()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
rules:
  - when: "^tick slowly$"
    reply:
      tool_calls: [{name: ticker, args: {count: 100, interval_seconds: 600}}]
  - reply: {text: "waiting"}
"#;
    let file = agent(dir.path(), &[ticker.base_url()], script);
    let started = std::time::Instant::now();
    let (out, events) = run(file, "3", "tick slowly").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(3),
        "it did not wait"
    );
    assert!(
        stderr.contains("subscriptions still active: call") && stderr.contains("(ticker)"),
        "{stderr}"
    );
    assert_eq!(of(&events, "assistant_text").len(), 1, "{events:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_fails_naming_a_call_whose_result_never_came() {
    let silent = ToolServer::new("silent", "A tool that never answers.").tool(
        tool_definition("ponder", "Thinks forever.", json!({"type": "object"})),
        |call: infinity_rap::kit::Call| async move { call.cancelled().await },
    );
    let silent = LocalServer::start(silent).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
rules:
  - when: "^ponder$"
    reply:
      tool_calls: [{name: ponder, args: {}}]
  - reply: {text: "done"}
"#;
    let file = agent(dir.path(), &[silent.base_url()], script);
    let (out, _) = run(file, "2", "ponder").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("waiting for tool results: call") && stderr.contains("(ponder)"),
        "{stderr}"
    );
}

/// Serves the MCP bridge's test server over Streamable HTTP; its MCP endpoint.
async fn tiny_mcp_server() -> String {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
    let server = infinity_mcp_bridge::test_server::TinyServer::default();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        std::sync::Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_in_the_agent_file_is_bridged_and_its_tools_called() {
    let mcp = tiny_mcp_server().await;
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
rules:
  - when: "^add them$"
    reply:
      tool_calls: [{name: add, args: {a: 2, b: 3}}]
  - when: "^add .* -> 5$"
    reply: {text: "the sum is 5"}
  - reply: {text: "unexpected"}
"#;
    let entry = format!("{{mcp: {{url: '{mcp}'}}}}");
    let file = agent(dir.path(), &[entry.as_str()], script);
    let (out, events) = run(file, "60", "add them").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{events:#?}");
    assert!(
        stderr.contains(&format!("MCP server `{mcp}` bridged at http://127.0.0.1:")),
        "{stderr}"
    );
    let texts: Vec<&str> = of(&events, "assistant_text")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(texts, ["the sum is 5"], "{events:#?}");
}

/// `ask` asks the user to pick a colour, answers with what was picked (shown to people as a
/// diff), and updates its view a moment after the result.
fn asking_server() -> ToolServer {
    ToolServer::new("asker", "Asks things").tool(
        tool_definition(
            "ask",
            "Asks the user to pick a colour",
            json!({"type": "object"}),
        ),
        |call: infinity_rap::kit::Call| async move {
            let picked = call
                .user_choice("Which colour?", ["red", "blue"], 1)
                .await?;
            let colour = ["red", "blue"][picked];
            call.result_displayed(
                format!("picked {colour}"),
                vec![
                    infinity_rap::wire::DisplaySegment::Diff(infinity_rap::wire::DiffContent {
                        path: "colour.txt".into(),
                        patch: format!(
                            "--- colour.txt\n+++ colour.txt\n@@ -1 +1 @@\n-none\n+{colour}"
                        ),
                    }),
                    infinity_rap::wire::DisplaySegment::Text(format!("picked {colour}")),
                ],
            )
            .await?;
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            let mut content = serde_json::Map::new();
            content.insert("colour".into(), json!(colour));
            call.view_update("palette", content).await
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_answers_a_question_with_its_default_and_takes_late_callbacks() {
    let server = LocalServer::start(asking_server()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = "rules:\n  - when: '^pick$'\n    reply: {tool_calls: [{name: ask, args: {}}]}\n  - reply: {text: 'done'}\n";
    let agent = agent(dir.path(), &[server.base_url()], script);
    let (out, events) = run(agent, "30", "pick").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Nobody can answer under `run`: the default goes, and the user is told.
    assert!(stderr.contains("with its default, 1) blue"), "{stderr}");
    let results = of(&events, "tool_result");
    assert_eq!(results.len(), 1, "{events:#?}");
    assert_eq!(results[0]["text"], "picked blue");
    assert_eq!(results[0]["display_as"][0]["type"], "diff");
    // The view update came after the result and the model's answer, and was still taken.
    let views = of(&events, "view_updated");
    assert_eq!(views.len(), 1, "{events:#?}");
    assert_eq!(views[0]["content"]["colour"], "blue");
}
