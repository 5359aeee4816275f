//! The `remote` category end to end on `infinity serve`: a real server, real `infinity remote
//! connect` processes, real shell commands: a command an allow rule covers runs at once, another
//! asks a person first (approved, declined), a timeout, a remote connected without `--exec`, a
//! remote that drops mid-run (the call gets its result, it does not hang), and closing the
//! conversation kills its running command. (`stack_remote.rs` runs the same scenarios against
//! a stack.) And `infinity remote check`, which says whether the rules let a command run.

use crate::common;
use crate::remotes;

use common::{free_port, until, Server};
use infinity_test_support::Api;
use remotes::{AGENT, SCRIPT};
use std::process::{Command, Stdio};

/// `infinity serve` of the `ops` agent, on loopback without a token.
struct Served {
    _dir: tempfile::TempDir,
    _server: Server,
    api: Api,
}

async fn serve() -> Served {
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
    let url = format!("http://127.0.0.1:{port}");
    until("the server to start", || async {
        reqwest::get(format!("{url}/health")).await.is_ok()
    })
    .await;
    Served {
        _dir: dir,
        _server: Server(child),
        api: Api::new(&url, None),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_run_on_a_connected_remote_with_rules_approvals_and_timeouts() {
    let served = serve().await;
    remotes::commands_run_with_rules_approvals_timeouts_and_drops(&served.api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_conversation_kills_its_running_command() {
    let served = serve().await;
    remotes::closing_a_conversation_kills_its_command(&served.api).await;
}

/// `infinity remote check --agent FILE [--remote NAME] -- COMMAND`: its exit status, stdout and
/// stderr.
fn check(agent: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(["remote", "check", "--agent"])
        .arg(agent)
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn check_says_whether_the_rules_let_a_command_run_and_why() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("ops.yaml");
    std::fs::write(
        &agent,
        r#"name: ops
model: script:ops.script.yaml
internal_tools: {remote: true}
remote_allow:
  - {command: "echo:*"}
  - {command: "make:*", redirects: ["> build.log"]}
  - {remote: laptop, command: "ls:*"}
"#,
    )
    .unwrap();
    let allowed = check(&agent, &["--", "echo hi && echo there 2>&1"]);
    assert_eq!(
        allowed,
        (
            0,
            "allowed ({command: \"echo:*\"})\n".to_owned(),
            String::new()
        )
    );
    let (code, out, _) = check(&agent, &["--", "make all > build.log; echo done"]);
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "allowed ({command: \"make:*\", redirects: [\"> build.log\"]}, {command: \"echo:*\"})\n"
        )
    );
    let (code, out, _) = check(&agent, &["--", "echo hi > FILE"]);
    assert_eq!(
        (code, out.as_str()),
        (
            1,
            "asks: `echo hi` has the redirection `> FILE`, which reads or writes a file no \
             rule's `redirects` names\n"
        )
    );
    // Control characters ask and are shown, never printed raw.
    let (code, out, _) = check(&agent, &["--", "echo spoofed > F \u{1b}[2K\rgit status"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("asks: it has the control character ^["),
        "{out:?}"
    );
    // A rule for one remote applies only with --remote; words after `--` are joined.
    assert_eq!(
        check(&agent, &["--remote", "Laptop", "--", "ls", "-la"]).0,
        0
    );
    let (code, out, _) = check(&agent, &["--", "ls", "-la"]);
    assert_eq!((code, out.as_str()), (1, "asks: no rule allows `ls -la`\n"));
    // A rule that can never match is an error naming it (exit 2).
    std::fs::write(
        &agent,
        "name: ops\nmodel: script:x.yaml\nremote_allow:\n  - {command: \"cd x && make\"}\n",
    )
    .unwrap();
    let (code, _, err) = check(&agent, &["--", "ls"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("internal_tools: `remote`: allow: rule 1: the command pattern `cd x && make` is more than one command"),
        "{err}"
    );
}
