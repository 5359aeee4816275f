//! What the `remote` category's end-to-end tests share, whatever hosts the remotes (`infinity
//! serve` keeps them in memory, a stack in its table): the agent and its script, real `infinity
//! remote connect` processes, the remote calls and questions seen through the host's API
//! ([`infinity_test_support::Api`]), and the two scenarios every host must pass.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // each test crate uses a part

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use infinity_test_support::Api;
use serde_json::{json, Value};

use crate::common::{wait_for, Server};

pub const AGENT: &str = r#"name: ops
model: script:ops.script.yaml
internal_tools: {remote: true}
remote_allow:
  - {command: "echo:*"}
  - {command: "sleep:*"}
"#;

pub const SCRIPT: &str = r#"
rules:
  - when: "^list$"
    reply:
      tool_calls: [{name: remote_list, args: {}}]
  - when: "^on (\\S+) quickly run (.+)$"
    reply:
      tool_calls: [{name: remote_exec, args: {remote: "$1", command: "$2", timeout_seconds: 1, description: "as asked"}}]
  - when: "^on (\\S+) run (.+)$"
    reply:
      tool_calls: [{name: remote_exec, args: {remote: "$1", command: "$2", description: "as asked"}}]
  - when: "remote_exec .* -> (.+)"
    reply: {text: "done: $1"}
  - reply: {text: "ok"}
"#;

fn log_has(path: &Path, text: &str) -> bool {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .contains(text)
}

/// Starts `infinity remote connect --name NAME [--exec]` to `api`'s host and waits until it is
/// listed (the process is killed when the value is dropped, a failed test included).
pub async fn connect_remote(api: &Api, name: &str, exec: bool, log: &Path) -> Server {
    let mut args = vec!["remote", "connect", "--url", &api.url, "--name", name];
    if exec {
        args.push("--exec");
    }
    if let Some(token) = &api.token {
        args.extend(["--token", token]);
    }
    let child = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(&args)
        .env_remove("INFINITY_SERVE_TOKEN")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let child = Server(child);
    wait_for("the remote to connect", 30, || async {
        let (_, remotes) = api.get_json("/remotes").await;
        remotes["remotes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["name"] == name && r["online"] == true))
    })
    .await;
    child
}

/// The newest `remote_exec` result of the thread, once there is one more than `seen`, parsed.
pub async fn exec_result(api: &Api, thread: &str, seen: usize) -> Value {
    for _ in 0..900 {
        let results: Vec<Value> = api
            .history(thread)
            .await
            .into_iter()
            .filter(|e| e["item"]["type"] == "tool_result" && e["item"]["name"] == "remote_exec")
            .map(|e| e["item"].clone())
            .collect();
        if results.len() > seen {
            let text = results.last().unwrap()["text"].as_str().unwrap_or_default();
            return serde_json::from_str(text).unwrap_or(Value::Null);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let history = Value::from(api.history(thread).await);
    panic!("no new remote_exec result on {thread}: {history}");
}

/// The thread's open question, once it asks one.
pub async fn open_question(api: &Api, thread: &str) -> Value {
    for _ in 0..300 {
        let found = api.record(thread).await["open_choices"][0].clone();
        if found.is_object() {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{thread} asked no question");
}

/// Answers the thread's open question with choice `selected`.
async fn answer_question(api: &Api, thread: &str, selected: usize) {
    let call = open_question(api, thread).await["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/threads/{thread}/choices/{call}");
    let (status, body) = api.post_json(&path, &json!({"selected": selected})).await;
    assert_eq!(status, 200, "{body}");
}

/// Rules, approvals (run and declined), redirections and control characters that ask, a timeout, a remote without `--exec`, and a remote that
/// drops mid-run: each call ends with its result, none hangs.
pub async fn commands_run_with_rules_approvals_timeouts_and_drops(api: &Api) {
    let logs = tempfile::tempdir().unwrap();
    let laptop_log = logs.path().join("laptop.log");
    let mut laptop = connect_remote(api, "Laptop", true, &laptop_log).await;
    let viewer = connect_remote(api, "viewer", false, &logs.path().join("viewer.log")).await;

    api.say("t", "list").await;
    wait_for("the listing", 30, || async {
        api.history_mentions("t", "remote_list").await && api.history_mentions("t", "viewer").await
    })
    .await;

    // Allowed by a rule (every part of the line), by the remote's name in another case.
    api.say("t", "on laptop run echo hello && echo world >&2")
        .await;
    let ran = exec_result(api, "t", 0).await;
    assert_eq!(ran["status"], "exited", "{ran}");
    assert_eq!(ran["exit_code"], 0);
    assert_eq!(ran["stdout"], "hello\n");
    assert_eq!(ran["stderr"], "world\n");
    assert!(ran["run_id"].as_str().unwrap().starts_with("run-"));

    // Not covered by a rule: a person is asked, with the description above the command.
    api.say("t", "on Laptop run printf 'exit %s' 3; exit 3")
        .await;
    let asked = open_question(api, "t").await;
    let prompt = asked["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("as asked") && prompt.contains("printf 'exit %s' 3; exit 3"),
        "{prompt}"
    );
    answer_question(api, "t", 0).await;
    let ran = exec_result(api, "t", 1).await;
    assert_eq!(
        (ran["status"].as_str(), ran["exit_code"].as_i64()),
        (Some("exited"), Some(3)),
        "{ran}"
    );
    assert_eq!(ran["stdout"], "exit 3");

    // Declined: the call's result says so, and nothing runs.
    let marker = logs.path().join("should-not-exist");
    api.say("t", &format!("on laptop run touch {}", marker.display()))
        .await;
    answer_question(api, "t", 1).await;
    assert_eq!(exec_result(api, "t", 2).await["status"], "declined");
    assert!(!marker.exists());

    // A redirection is not covered by `echo:*`: the person is asked, and sees the command with
    // its control characters in visible form (a `\r` cannot hide the redirection), apart from
    // the description, and why it asks. Approved, it runs as sent; the remote's log shows it
    // the same way.
    let spoofed = logs.path().join("spoofed");
    api.say(
        "t",
        &format!(
            "on laptop run echo spoofed > {} \u{1b}[2K\rtrue",
            spoofed.display()
        ),
    )
    .await;
    let prompt = open_question(api, "t").await["prompt"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = format!("    echo spoofed > {} ^[[2K^Mtrue", spoofed.display());
    assert!(
        prompt.contains("\nDescription (the agent's words): as asked\n")
            && prompt.contains(&format!("\n{shown}\n"))
            && prompt.contains("control character ^["),
        "{prompt}"
    );
    assert!(!prompt.contains(['\u{1b}', '\r']), "{prompt:?}");
    answer_question(api, "t", 0).await;
    assert_eq!(exec_result(api, "t", 3).await["status"], "exited");
    assert!(spoofed.exists());
    let log = std::fs::read_to_string(&laptop_log).unwrap();
    assert!(log.contains("  description: as asked\n"), "{log}");
    assert!(log.contains(&format!("\n{shown}\n")), "{log}");
    assert!(!log.contains(['\u{1b}', '\r']), "{log:?}");

    // An append asks too, saying which redirection no rule names.
    let appended = logs.path().join("appended");
    api.say(
        "t",
        &format!("on laptop run echo x >> {}", appended.display()),
    )
    .await;
    let prompt = open_question(api, "t").await["prompt"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        prompt.contains(&format!("has the redirection `>> {}`", appended.display())),
        "{prompt}"
    );
    answer_question(api, "t", 1).await;
    assert_eq!(exec_result(api, "t", 4).await["status"], "declined");
    assert!(!appended.exists());

    // A timeout kills the whole command.
    api.say("t", "on laptop quickly run sleep 7.25; echo late")
        .await;
    let ran = exec_result(api, "t", 5).await;
    assert_eq!(ran["status"], "timeout", "{ran}");
    assert_eq!(ran["stdout"], "");

    // A remote without --exec is listed but runs nothing.
    api.say("t", "on viewer run echo hi").await;
    wait_for("the refusal", 30, || async {
        api.history_mentions("t", "was connected without --exec")
            .await
    })
    .await;

    // The remote drops mid-run (killed: no goodbye): the call gets its result, it does not hang.
    api.say("d", "on laptop run sleep 60.5").await;
    wait_for("the command to start", 30, || async {
        log_has(&laptop_log, "sleep 60.5")
    })
    .await;
    laptop.0.kill().unwrap();
    laptop.0.wait().unwrap();
    let dropped = exec_result(api, "d", 0).await;
    assert_eq!(dropped["status"], "disconnected", "{dropped}");
    assert_eq!(
        dropped["reason"],
        "remote disconnected before the command finished"
    );
    let _ = Command::new("pkill").args(["-f", "sleep 60.5"]).status();
    drop(viewer);
}

/// Closing a conversation kills its running command.
pub async fn closing_a_conversation_kills_its_command(api: &Api) {
    let logs = tempfile::tempdir().unwrap();
    let marker = logs.path().join("finished");
    let log = logs.path().join("box.log");
    let mut remote = connect_remote(api, "box", true, &log).await;
    api.say(
        "c",
        &format!("on box run sleep 9.75; echo done > {}", marker.display()),
    )
    .await;
    // Its redirection asks first.
    answer_question(api, "c", 0).await;
    wait_for("the command to start", 30, || async {
        log_has(&log, "sleep 9.75")
    })
    .await;
    assert_eq!(api.post_json("/threads/c/close", &json!({})).await.0, 202);
    wait_for("the kill", 30, || async {
        log_has(&log, "killed on request")
    })
    .await;
    // Had it not been killed, the command would have finished by now.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert!(!marker.exists(), "the command ran to its end");
    wait_for("the thread to close", 30, || async {
        api.record("c").await["status"] == "closed"
    })
    .await;
    remote.0.kill().unwrap();
    remote.0.wait().unwrap();
}
