//! Moving a thread to another version of its stored agent, as a person does it on the embedded
//! runtime: `infinity run --thread T --agent NAME[@VERSION] --move-to-agent`, and `serve`'s
//! `POST /threads/{id}/agent`, with the refusals that name what was wrong; and switching the
//! model of a thread (`POST /threads/{id}/model`) to one the deployment lists, and only those.

use crate::common;

use std::path::Path;

use common::{infinity, serve_in, until};
use infinity_test_support::{get_json, post_json};
use serde_json::json;

/// Saves a version of `greeter` that answers "greeter VERSION here".
fn save_greeter(dir: &Path, version: &str) {
    std::fs::write(
        dir.join("greeter.script.yaml"),
        format!("rules:\n  - reply: {{text: \"greeter {version} here\"}}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("greeter.yaml"),
        "name: greeter\nmodel: script:greeter.script.yaml\n",
    )
    .unwrap();
    let out = infinity(dir, &["agents", "save", "--store", "store", "greeter.yaml"]);
    assert!(out.status.success(), "{out:?}");
}

fn run(dir: &Path, extra: &[&str]) -> (bool, String, String) {
    let mut args = vec!["run", "--store", "store", "--thread", "t1"];
    args.extend_from_slice(extra);
    let out = infinity(dir, &args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_moves_a_thread_to_the_version_it_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("store")).unwrap();
    save_greeter(d, "v1");
    let (ok, stdout, stderr) = run(d, &["--agent", "greeter", "hello"]);
    assert!(ok && stdout.contains("greeter v1 here"), "{stdout}{stderr}");
    save_greeter(d, "v2");
    // Without the flag the conversation keeps its version.
    let (_, stdout, _) = run(d, &["--agent", "greeter", "hello"]);
    assert!(stdout.contains("greeter v1 here"), "{stdout}");
    let (ok, stdout, stderr) = run(d, &["--agent", "greeter", "--move-to-agent", "hello"]);
    assert!(ok && stdout.contains("greeter v2 here"), "{stdout}{stderr}");
    let (threads, _) = (
        String::from_utf8_lossy(&infinity(d, &["threads", "--store", "store"]).stdout).into_owned(),
        (),
    );
    assert!(threads.contains("t1 [idle] agent greeter@2"), "{threads}");
    // Back to the first version, named; a version nobody stored is refused, naming it.
    let (ok, stdout, _) = run(d, &["--agent", "greeter@1", "--move-to-agent", "hi"]);
    assert!(ok && stdout.contains("greeter v1 here"), "{stdout}");
    let (ok, _, stderr) = run(d, &["--agent", "greeter@7", "--move-to-agent", "hi"]);
    assert!(!ok, "{stderr}");
    assert!(stderr.contains("greeter@7"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_moves_a_thread_and_refuses_what_it_cannot_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("store")).unwrap();
    save_greeter(d, "v1");
    save_greeter(d, "v2");
    let (_server, api) = serve_in(
        d,
        &[
            "--agent",
            "greeter@1",
            "--store",
            "store",
            "--allow-model",
            "script:other.script.yaml",
            "--allow-model",
            "nosuch:model",
        ],
    )
    .await;
    // The status and the answer as text, to look for words in.
    let post = |url: String, body: serde_json::Value| async move {
        let (status, answer) = post_json(&url, &body).await;
        (status, answer.to_string())
    };
    let (status, _) = post(
        format!("{api}/threads/t1/messages"),
        json!({"text": "hello"}),
    )
    .await;
    assert_eq!(status, 202);
    until("the first answer", || async {
        let (_, record) = get_json(&format!("{api}/threads/t1")).await;
        record["agent"] == "greeter@1" && record["history_len"].as_u64() >= Some(2)
    })
    .await;
    for (body, want, says) in [
        (
            json!({"agent": "someone"}),
            409,
            "can only move to another version",
        ),
        (json!({"agent": "greeter@9"}), 404, "greeter@9"),
        (json!({"agent": "greeter@x"}), 400, "must be a number"),
        (json!({"agents": "greeter"}), 422, "unknown field `agents`"),
    ] {
        let (status, text) = post(format!("{api}/threads/t1/agent"), body.clone()).await;
        assert_eq!(status, want, "{body}: {text}");
        assert!(text.contains(says), "{body}: {text}");
    }
    let (status, _) = post(
        format!("{api}/threads/nobody/agent"),
        json!({"agent": "greeter"}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, text) = post(
        format!("{api}/threads/t1/agent"),
        json!({"agent": "greeter"}),
    )
    .await;
    assert_eq!(status, 202, "{text}");
    until("the move", || async {
        let (_, record) = get_json(&format!("{api}/threads/t1")).await;
        record["agent"] == "greeter@2"
    })
    .await;
    post(
        format!("{api}/threads/t1/messages"),
        json!({"text": "again"}),
    )
    .await;
    until("an answer from the new version", || async {
        let (_, history) = get_json(&format!("{api}/threads/t1/history")).await;
        history.to_string().contains("greeter v2 here")
    })
    .await;
    // The thread's model, switched for its next completion (a script next to the agent file).
    std::fs::write(
        d.join("other.script.yaml"),
        "rules:\n  - reply: {text: \"another model here\"}\n",
    )
    .unwrap();
    let (status, text) = post(
        format!("{api}/threads/t1/model"),
        json!({"model": "nosuch:model"}),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("nosuch:model"), "{text}");
    let (_, listed) = get_json(&format!("{api}/models")).await;
    assert_eq!(
        listed["allowed"],
        json!(["script:other.script.yaml", "nosuch:model"])
    );
    // Nothing else: not a file on the machine, not a readable YAML file next to the agent, and
    // the refusal quotes none of them.
    std::fs::write(d.join("secret.yaml"), "token: s3cr3t-value\nrules: []\n").unwrap();
    for spec in [
        "script:/etc/passwd",
        "script:secret.yaml",
        "script:store/callback-secret",
        "anthropic:claude-opus-4-1",
    ] {
        let (status, text) =
            post(format!("{api}/threads/t1/model"), json!({ "model": spec })).await;
        assert_eq!(status, 400, "{spec}: {text}");
        assert!(
            text.contains(&format!("`{spec}` is not one")) && text.contains("--allow-model"),
            "{spec}: {text}"
        );
        for secret in ["root:", "s3cr3t", "token"] {
            assert!(!text.contains(secret), "{spec}: {text}");
        }
    }
    let (_, record) = get_json(&format!("{api}/threads/t1")).await;
    assert!(record["model"].is_null(), "{record}");
    let (status, text) = post(
        format!("{api}/threads/t1/model"),
        json!({"model": "script:other.script.yaml"}),
    )
    .await;
    assert_eq!(status, 202, "{text}");
    post(
        format!("{api}/threads/t1/messages"),
        json!({"text": "and now"}),
    )
    .await;
    until("an answer from the other model", || async {
        let (_, history) = get_json(&format!("{api}/threads/t1/history")).await;
        history.to_string().contains("another model here")
    })
    .await;
    let (_, record) = get_json(&format!("{api}/threads/t1")).await;
    assert_eq!(record["model"], "script:other.script.yaml");
    // A new conversation with a chosen agent; refused for an existing thread or an unknown agent.
    let (status, text) = post(
        format!("{api}/threads/t2/messages"),
        json!({"text": "hi", "agent": "greeter@2"}),
    )
    .await;
    assert_eq!(status, 202, "{text}");
    until("the conversation with the chosen agent", || async {
        let (_, history) = get_json(&format!("{api}/threads/t2/history")).await;
        history.to_string().contains("greeter v2 here")
    })
    .await;
    let (_, record) = get_json(&format!("{api}/threads/t2")).await;
    assert_eq!(record["agent"], "greeter@2");
    let (status, text) = post(
        format!("{api}/threads/t2/messages"),
        json!({"text": "hi", "agent": "greeter@1"}),
    )
    .await;
    assert_eq!(status, 409, "{text}");
    assert!(text.contains("keeps its agent"), "{text}");
    let (status, text) = post(
        format!("{api}/threads/t3/messages"),
        json!({"text": "hi", "agent": "nobody"}),
    )
    .await;
    assert_eq!(status, 404, "{text}");
}
