//! What the tests that start `infinity` processes share: a child process stopped when dropped,
//! a free port, waiting until something holds, and running `infinity` in a folder. What the
//! other crates' tests share too (JSON over HTTP, a running API's messages and history) is in
//! `infinity_test_support`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // each test crate uses a part

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// A running `infinity` process, killed when dropped.
pub struct Server(pub Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A local port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to 15 s) until `check` holds.
pub async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..300 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Waits up to `seconds` until `check` holds.
pub async fn wait_for<F, Fut>(what: &str, seconds: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..seconds * 10 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// Runs `infinity ARGS` in `dir` with no model key (the scripted model runs offline).
pub fn infinity(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(args)
        .current_dir(dir)
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap()
}

/// Starts `infinity serve ARGS` in `dir` on a free loopback port, without a token, and waits
/// until it answers: the process (killed when dropped) and its base URL.
pub async fn serve_in(dir: &Path, args: &[&str]) -> (Server, String) {
    serve_with(dir, args, &[]).await
}

/// [`serve_in`] with these variables set (a token, a stack's `INFINITY_*`).
pub async fn serve_with(dir: &Path, args: &[&str], envs: &[(String, String)]) -> (Server, String) {
    serve_on(dir, args, envs, free_port()).await
}

/// [`serve_with`] on `port`.
pub async fn serve_on(
    dir: &Path,
    args: &[&str],
    envs: &[(String, String)],
    port: u16,
) -> (Server, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .arg("serve")
        .args(args)
        .args(["--port", &port.to_string()])
        .current_dir(dir)
        .env_remove("INFINITY_SERVE_TOKEN")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        // Every answer checked against the API's document (a break answers 500, naming it).
        .env("INFINITY_CHECK_API", "1")
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server(child);
    let api = format!("http://127.0.0.1:{port}");
    until("the server to start", || async {
        reqwest::get(format!("{api}/health")).await.is_ok()
    })
    .await;
    (server, api)
}
