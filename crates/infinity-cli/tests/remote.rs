//! The `remote` category end to end on `infinity serve`: a real server, real `infinity remote
//! connect` processes, real shell commands: a command an allow rule covers runs at once, another
//! asks a person first (approved, declined), a timeout, a remote connected without `--exec`, a
//! remote that drops mid-run (the call gets its result, it does not hang), and closing the
//! conversation kills its running command. (`stack_remote.rs` runs the same scenarios against
//! a stack.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code: a failed step should stop the test

mod common;
mod remotes;

use common::{free_port, until, Server};
use remotes::{Api, AGENT, SCRIPT};
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
