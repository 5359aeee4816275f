//! `infinity migrate` between two `infinity serve` processes, as a user runs it: a conversation
//! with a child thread and a sleep moves, sleeps out at its new host, and a message posted at the
//! old host still reaches it; what cannot move is refused with a reason.

use crate::common;

use common::{free_port, until, Server};
use infinity_test_support::Api;

use std::process::{Command, Stdio};

use serde_json::json;

fn serve(agent: &std::path::Path, store: &std::path::Path) -> (Server, Api) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(["serve", "--agent"])
        .arg(agent)
        .arg("--store")
        .arg(store)
        .args(["--port", &port.to_string()])
        .env_remove("INFINITY_SERVE_TOKEN")
        .env_remove("INFINITY_CALLBACK_SECRET")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    (
        Server(child),
        Api::new(&format!("http://127.0.0.1:{port}"), None),
    )
}

fn migrate(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .arg("migrate")
        .args(args)
        .env_remove("INFINITY_SERVE_TOKEN")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_moves_between_two_served_runtimes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - thread: child\n    reply: {text: \"child here\"}\n  - when: \"^spawn$\"\n    reply:\n      tool_calls: [{name: spawn_thread, args: {instructions: \"say hi\", child_of: \"${stack}\"}}]\n  - when: \"(?m)^nap$\"\n    reply:\n      tool_calls: [{name: sleep, args: {seconds: 4}}]\n  - reply: {text: \"ok\"}\n",
    )
    .unwrap();
    let agent = dir.path().join("agent.yaml");
    std::fs::write(&agent, "name: napper\nmodel: script:script.yaml\n").unwrap();
    let (_a, here) = serve(&agent, &dir.path().join("here"));
    let (_b, there) = serve(&agent, &dir.path().join("there"));
    for api in [&here, &there] {
        until("serve is up", || async {
            api.get_json("/health").await.0 == 200
        })
        .await;
    }

    here.say("trip", "spawn").await;
    until("the child answered", || async {
        let (_, record) = here.get_json("/threads/trip").await;
        let Some(child) = record["children"][0]["thread_id"].as_str() else {
            return false;
        };
        here.history_mentions(child, "child here").await
    })
    .await;
    here.say("trip", "nap").await;
    until("the sleep began", || async {
        let (_, record) = here.get_json("/threads/trip").await;
        record["pending_calls"]
            .as_array()
            .is_some_and(|p| !p.is_empty())
    })
    .await;

    let (code, stderr) = migrate(&["trip", "--from", &here.url, "--to", &there.url]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("moved the session trip (2 thread(s))"),
        "{stderr}"
    );
    let (status, record) = there.get_json("/threads/trip").await;
    assert_eq!(status, 200);
    assert_eq!(record["pending_calls"][0]["tool"], "sleep");
    let child = record["children"][0]["thread_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(there.get_json(&format!("/threads/{child}")).await.0, 200);
    let (_, tombstone) = here.get_json("/threads/trip").await;
    assert_eq!(tombstone["migration"]["state"], "moved", "{tombstone}");

    // The sleep ends at the new host; a message posted at the old one is forwarded there.
    until("the sleep ended at the new host", || async {
        let (_, record) = there.get_json("/threads/trip").await;
        record.get("id").is_some() && record.get("pending_calls").is_none()
    })
    .await;
    here.say("trip", "still there?").await;
    until("the forwarded message was answered", || async {
        there.history_mentions("trip", "still there?").await
    })
    .await;
    assert!(!here.history_mentions("trip", "still there?").await);

    // Refusals name the reason.
    let (code, stderr) = migrate(&["trip", "--from", &here.url, "--to", &there.url]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("thread trip is already moved to"),
        "{stderr}"
    );
    let (code, stderr) = migrate(&[&child, "--from", &there.url, "--to", &here.url]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("cannot move on its own: it is a child of trip"),
        "{stderr}"
    );
    let (code, stderr) = migrate(&["nobody", "--from", &there.url, "--to", &here.url]);
    assert_eq!(code, 1);
    assert!(stderr.contains("thread nobody does not exist"), "{stderr}");

    // And back: the old host's tombstone takes the conversation back.
    let (code, stderr) = migrate(&["trip", "--from", &there.url, "--to", &here.url]);
    assert_eq!(code, 0, "{stderr}");
    let (_, record) = here.get_json("/threads/trip").await;
    assert!(record.get("migration").is_none(), "{record}");
    assert!(here.history_mentions("trip", "still there?").await);
    there.say("trip", "and now?").await;
    until("forwarded back home", || async {
        here.history_mentions("trip", "and now?").await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_stopped_after_the_import_is_finished_with_finish() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - reply: {text: \"ok\"}\n",
    )
    .unwrap();
    let agent = dir.path().join("agent.yaml");
    std::fs::write(&agent, "name: plain\nmodel: script:script.yaml\n").unwrap();
    let (_a, here) = serve(&agent, &dir.path().join("here"));
    let (_b, there) = serve(&agent, &dir.path().join("there"));
    for api in [&here, &there] {
        until("serve is up", || async {
            api.get_json("/health").await.0 == 200
        })
        .await;
    }
    here.say("half", "hello").await;
    until("the thread", || async {
        here.get_json("/threads/half").await.0 == 200
    })
    .await;
    // The first two steps by hand, as a command that died before its last step left them.
    let (_, bundle) = here
        .post_json("/threads/half/migration", &json!({"to": there.url}))
        .await;
    let (imported, _) = there.post_json("/migration/import", &bundle).await;
    assert_eq!(imported, 200);
    let (_, record) = here.get_json("/threads/half").await;
    assert_eq!(record["migration"]["state"], "moving");

    let (code, stderr) = migrate(&["half", "--from", &here.url, "--to", &there.url, "--finish"]);
    assert_eq!(code, 0, "{stderr}");
    let (_, record) = here.get_json("/threads/half").await;
    assert_eq!(record["migration"]["state"], "moved", "{record}");
    // Finishing from the wrong side is refused with the reason.
    let (code, stderr) = migrate(&["half", "--from", &there.url, "--to", &here.url, "--finish"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("does not run here"), "{stderr}");
}
