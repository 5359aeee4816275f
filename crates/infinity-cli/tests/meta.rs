//! The `meta` category through the binary over real HTTP: a stored agent names an example tool
//! server, so the store's catalog holds it as an app; an agent with `meta` on, run with
//! `infinity run --store`, finds it with `search_tools` and calls it with `execute_tool`, and
//! the server's answer comes back as the call's result.

use std::process::Command;

use infinity_rap::kit::testing::LocalServer;
use rap_example_servers::get_time_server;
use serde_json::Value;

const CONCIERGE: &str = r#"
rules:
  - when: "^what time is it in Tokyo$"
    reply:
      tool_calls: [{name: search_tools, args: {query: "current time in a timezone", kind: app}}]
  - when: "search_tools .*\"name\":\"([^\"]+)\""
    reply:
      tool_calls: [{name: execute_tool, args: {name: "$1", arguments: {timezone: "Asia/Tokyo"}}}]
  - when: "execute_tool .* -> (.+)"
    reply: {text: "Tokyo: $1"}
  - reply: {text: "I found nothing."}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_finds_an_app_in_the_catalog_and_calls_it() {
    let clock = LocalServer::start(get_time_server()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_owned();
    std::fs::create_dir(d.join("store")).unwrap();
    std::fs::write(d.join("idle.yaml"), "rules:\n  - reply: {text: idle}\n").unwrap();
    std::fs::write(
        d.join("clockwork.yaml"),
        format!(
            "name: clockwork\nmodel: script:idle.yaml\ndescription: Keeps the clocks.\ntool_servers: ['{}']\n",
            clock.base_url()
        ),
    )
    .unwrap();
    std::fs::write(d.join("concierge.script.yaml"), CONCIERGE).unwrap();
    std::fs::write(
        d.join("concierge.yaml"),
        "name: concierge\nmodel: script:concierge.script.yaml\ninternal_tools: {meta: true}\n",
    )
    .unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let infinity = |args: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_infinity"))
                .args(args)
                .current_dir(&d)
                .env_remove("ANTHROPIC_API_KEY")
                .env_remove("OPENAI_API_KEY")
                .output()
                .unwrap()
        };
        let saved = infinity(&["agents", "save", "--store", "store", "clockwork.yaml"]);
        assert!(saved.status.success(), "{saved:?}");
        infinity(&[
            "run",
            "--store",
            "store",
            "--agent",
            "concierge.yaml",
            "--json",
            "--timeout",
            "30",
            "what time is it in Tokyo",
        ])
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{events:#?}");
    let result = |name: &str| {
        events
            .iter()
            .find(|e| e["type"] == "tool_result" && e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} result: {events:#?}"))
    };
    let found = result("search_tools")["text"].as_str().unwrap();
    let found: Value = serde_json::from_str(found).unwrap();
    let port = clock.base_url().rsplit(':').next().unwrap().to_owned();
    assert_eq!(found["results"][0]["source"], "app");
    assert!(
        found["results"][0]["name"]
            .as_str()
            .unwrap()
            .starts_with(&format!("127.0.0.1:{port}/")),
        "{found}"
    );
    let time = result("execute_tool");
    assert_eq!(time["is_error"], false, "{time}");
    assert!(time["text"].as_str().unwrap().contains("+09:00"), "{time}");
    let answer = events
        .iter()
        .rev()
        .find(|e| e["type"] == "assistant_text")
        .unwrap();
    assert!(
        answer["text"].as_str().unwrap().starts_with("Tokyo: "),
        "{answer}"
    );
}
