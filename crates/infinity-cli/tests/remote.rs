//! The `remote` category end to end: a real `infinity serve`, real `infinity remote connect`
//! processes, real shell commands: a command an allow rule covers runs at once, another asks a
//! person first (approved, declined), a timeout, a remote connected without `--exec`, a remote
//! that drops mid-run (the call gets its result, it does not hang), and closing the
//! conversation kills its running command.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{free_port, get_json, until, Server};
use serde_json::{json, Value};

const AGENT: &str = r#"name: ops
model: script:ops.script.yaml
internal_tools: {remote: true}
remote_allow:
  - {command: "echo:*"}
  - {command: "sleep:*"}
"#;

const SCRIPT: &str = r#"
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

struct Stack {
    _dir: tempfile::TempDir,
    _server: Server,
    api: String,
    http: reqwest::Client,
}

impl Stack {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ops.yaml"), AGENT).unwrap();
        std::fs::write(dir.path().join("ops.script.yaml"), SCRIPT).unwrap();
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args(["serve", "--agent", "ops.yaml", "--port", &port.to_string()])
            .current_dir(dir.path())
            .env_remove("INFINITY_SERVE_TOKEN")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let api = format!("http://127.0.0.1:{port}");
        until("the server to start", || async {
            reqwest::get(format!("{api}/health")).await.is_ok()
        })
        .await;
        Self {
            _dir: dir,
            _server: Server(child),
            api,
            http: reqwest::Client::new(),
        }
    }

    /// Starts `infinity remote connect --name NAME [--exec]` and waits until it is listed (the
    /// process is killed when the value is dropped, a failed test included).
    async fn connect(&self, name: &str, exec: bool, log: &Path) -> Server {
        let mut args = vec!["remote", "connect", "--url", &self.api, "--name", name];
        if exec {
            args.push("--exec");
        }
        let child = Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args(&args)
            .env_remove("INFINITY_SERVE_TOKEN")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let child = Server(child);
        until("the remote to connect", || async {
            let (_, remotes) = get_json(&format!("{}/remotes", self.api)).await;
            remotes["remotes"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r["name"] == name && r["online"] == true))
        })
        .await;
        child
    }

    async fn post(&self, path: &str, body: Value) -> u16 {
        self.http
            .post(format!("{}{path}", self.api))
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn say(&self, thread: &str, text: &str) {
        let status = self
            .post(
                &format!("/threads/{thread}/messages"),
                json!({"text": text}),
            )
            .await;
        assert_eq!(status, 202);
    }

    async fn record(&self, thread: &str) -> Value {
        get_json(&format!("{}/threads/{thread}", self.api)).await.1
    }

    /// The newest `remote_exec` result of the thread, once there is one more than `seen`.
    async fn result(&self, thread: &str, seen: usize) -> Value {
        let mut found = Value::Null;
        let wait = async {
            loop {
                let (_, history) =
                    get_json(&format!("{}/threads/{thread}/history", self.api)).await;
                let results: Vec<Value> = history
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|e| {
                        e["item"]["type"] == "tool_result" && e["item"]["name"] == "remote_exec"
                    })
                    .map(|e| e["item"].clone())
                    .collect();
                if results.len() > seen {
                    found = results.last().unwrap().clone();
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        if tokio::time::timeout(Duration::from_secs(40), wait)
            .await
            .is_err()
        {
            let (_, history) = get_json(&format!("{}/threads/{thread}/history", self.api)).await;
            panic!("no new remote_exec result on {thread}: {history:#}");
        }
        found
    }

    /// The thread's open question, once it asks one.
    async fn question(&self, thread: &str) -> Value {
        for _ in 0..300 {
            let found = self.record(thread).await["open_choices"][0].clone();
            if found.is_object() {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{thread} asked no question");
    }
}

fn parsed(result: &Value) -> Value {
    serde_json::from_str(result["text"].as_str().unwrap()).unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_on_a_connected_remote_with_rules_approvals_and_timeouts() {
    let s = Stack::start().await;
    let logs = tempfile::tempdir().unwrap();
    let mut laptop = s
        .connect("Laptop", true, &logs.path().join("laptop.log"))
        .await;
    let viewer = s
        .connect("viewer", false, &logs.path().join("viewer.log"))
        .await;

    s.say("t", "list").await;
    until("the listing", || async {
        let (_, history) = get_json(&format!("{}/threads/t/history", s.api)).await;
        history.to_string().contains("remote_list") && history.to_string().contains("viewer")
    })
    .await;

    // Allowed by a rule (every part of the line), by the remote's name in another case.
    s.say("t", "on laptop run echo hello && echo world >&2")
        .await;
    let ran = parsed(&s.result("t", 0).await);
    assert_eq!(ran["status"], "exited", "{ran}");
    assert_eq!(ran["exit_code"], 0);
    assert_eq!(ran["stdout"], "hello\n");
    assert_eq!(ran["stderr"], "world\n");
    assert!(ran["run_id"].as_str().unwrap().starts_with("run-"));

    // Not covered by a rule: a person is asked, with the description above the command.
    s.say("t", "on Laptop run printf 'exit %s' 3; exit 3").await;
    let question = s.question("t").await;
    let prompt = question["prompt"].as_str().unwrap();
    assert!(
        prompt.contains("as asked") && prompt.contains("printf 'exit %s' 3; exit 3"),
        "{prompt}"
    );
    let call = question["call_id"].as_str().unwrap();
    assert_eq!(
        s.post(
            &format!("/threads/t/choices/{call}"),
            json!({"selected": 0})
        )
        .await,
        200
    );
    let ran = parsed(&s.result("t", 1).await);
    assert_eq!(
        (ran["status"].as_str(), ran["exit_code"].as_i64()),
        (Some("exited"), Some(3)),
        "{ran}"
    );
    assert_eq!(ran["stdout"], "exit 3");

    // Declined: the call's result says so, and nothing runs.
    s.say("t", "on laptop run touch should-not-exist").await;
    let call = s.question("t").await["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        s.post(
            &format!("/threads/t/choices/{call}"),
            json!({"selected": 1})
        )
        .await,
        200
    );
    assert_eq!(parsed(&s.result("t", 2).await)["status"], "declined");
    assert!(!Path::new("should-not-exist").exists());

    // A timeout kills the whole command.
    s.say("t", "on laptop quickly run sleep 7.25; echo late")
        .await;
    let ran = parsed(&s.result("t", 3).await);
    assert_eq!(ran["status"], "timeout", "{ran}");
    assert_eq!(ran["stdout"], "");

    // A remote without --exec is listed but runs nothing.
    s.say("t", "on viewer run echo hi").await;
    until("the refusal", || async {
        let (_, history) = get_json(&format!("{}/threads/t/history", s.api)).await;
        history.to_string().contains("was connected without --exec")
    })
    .await;

    // The remote drops mid-run (killed: no goodbye): the call gets its result, it does not hang.
    s.say("d", "on laptop run sleep 60.5").await;
    until("the command to start", || async {
        std::fs::read_to_string(logs.path().join("laptop.log"))
            .unwrap_or_default()
            .contains("sleep 60.5")
    })
    .await;
    laptop.0.kill().unwrap();
    laptop.0.wait().unwrap();
    let dropped = parsed(&s.result("d", 0).await);
    assert_eq!(dropped["status"], "disconnected", "{dropped}");
    assert_eq!(
        dropped["reason"],
        "remote disconnected before the command finished"
    );
    let _ = Command::new("pkill").args(["-f", "sleep 60.5"]).status();
    drop(viewer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_conversation_kills_its_running_command() {
    let s = Stack::start().await;
    let logs = tempfile::tempdir().unwrap();
    let marker = logs.path().join("finished");
    let mut laptop = s.connect("box", true, &logs.path().join("box.log")).await;
    s.say(
        "c",
        &format!("on box run sleep 4.75; echo done > {}", marker.display()),
    )
    .await;
    until("the command to start", || async {
        std::fs::read_to_string(logs.path().join("box.log"))
            .unwrap_or_default()
            .contains("sleep 4.75")
    })
    .await;
    assert_eq!(s.post("/threads/c/close", json!({})).await, 202);
    until("the kill", || async {
        std::fs::read_to_string(logs.path().join("box.log"))
            .unwrap_or_default()
            .contains("killed on request")
    })
    .await;
    // Had it not been killed, the command would have finished by now.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(!marker.exists(), "the command ran to its end");
    let record = s.record("c").await;
    assert_eq!(record["status"], "closed", "{record}");
    laptop.0.kill().unwrap();
    laptop.0.wait().unwrap();
}
