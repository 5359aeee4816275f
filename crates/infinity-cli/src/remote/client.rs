//! `infinity remote connect`: this machine as a remote of an `infinity serve` or a stack's API. Outbound only
//! (long polls for orders, so a laptop behind NAT works): with `--exec` it runs the commands
//! agents send (`sh -c`, in a process group of their own so a kill or a timeout ends the whole
//! command), without it the machine is listed and runs nothing. It reconnects when the server
//! restarts or forgets it, and says goodbye on Ctrl-C so runs in flight end at once.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

use infinity_library::remote::{Order, Report};

/// How much of the end of a stream is kept while reading it, in bytes (the result keeps its
/// last 30,000 characters).
const KEEP_BYTES: usize = 256 * 1024;

#[derive(Debug, Args)]
pub struct ConnectArgs {
    /// The server: an `infinity serve`, or a stack's API (its `ApiUrl` output, or `serve --aws`).
    #[arg(long, default_value = "http://127.0.0.1:8700")]
    url: String,
    /// The name agents know this machine by.
    #[arg(long)]
    name: String,
    /// Run the commands agents send (without it the machine is listed and runs nothing).
    #[arg(long)]
    exec: bool,
    /// The server's token (default: $INFINITY_SERVE_TOKEN), when it asks for one.
    #[arg(long)]
    token: Option<String>,
}

/// The runs in flight, by id. A run is entered when its order arrives, before its process exists,
/// so a kill that comes while the process is still being started is kept, not dropped.
type Running = Arc<Mutex<HashMap<String, Run>>>;

#[derive(Debug, Default)]
struct Run {
    /// The process group, once the command is started.
    group: Option<u32>,
    /// The server asked for this run to be stopped.
    killed: bool,
}

struct Connection {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
}

impl Connection {
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.url));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    async fn join(&self, name: &str, exec: bool) -> Result<String> {
        let response = self
            .request(reqwest::Method::POST, "/remotes")
            .json(&json!({"name": name, "exec": exec}))
            .send()
            .await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            anyhow::bail!("{} refused the connection: HTTP {status} {body}", self.url);
        }
        body["id"]
            .as_str()
            .map(str::to_owned)
            .context("the server answered without an id")
    }
}

pub async fn connect(args: ConnectArgs) -> Result<u8> {
    let connection = Arc::new(Connection {
        http: reqwest::Client::new(),
        url: args.url.trim_end_matches('/').to_owned(),
        token: args
            .token
            .clone()
            .or_else(|| std::env::var(infinity_server::TOKEN_VAR).ok()),
    });
    let running: Running = Arc::default();
    let mut said_waiting = false;
    loop {
        let id = match connection.join(&args.name, args.exec).await {
            Ok(id) => id,
            Err(err) if err.downcast_ref::<reqwest::Error>().is_some() => {
                if !said_waiting {
                    eprintln!("note: {} cannot be reached ({err}); trying again", args.url);
                    said_waiting = true;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
            Err(err) => return Err(err),
        };
        said_waiting = false;
        eprintln!(
            "connected to {} as {} ({id}){}",
            args.url,
            args.name,
            if args.exec {
                "; running the commands agents send"
            } else {
                "; listed only: commands are refused (pass --exec to run them)"
            }
        );
        let polling = poll(&connection, &id, args.exec, &running);
        tokio::select! {
            () = polling => eprintln!("note: the server forgot this remote; connecting again"),
            _ = tokio::signal::ctrl_c() => {
                let _ = connection
                    .request(reqwest::Method::DELETE, &format!("/remotes/{id}"))
                    .send()
                    .await;
                eprintln!("disconnected");
                return Ok(0);
            }
        }
    }
}

/// Polls for orders until the server no longer knows `id`.
async fn poll(connection: &Arc<Connection>, id: &str, exec: bool, running: &Running) {
    loop {
        let response = connection
            .request(
                reqwest::Method::GET,
                &format!("/remotes/{id}/orders?wait=20"),
            )
            .timeout(Duration::from_secs(40))
            .send()
            .await;
        let orders: Vec<Order> = match response {
            Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => return,
            Ok(r) if r.status().is_success() => match r.json::<Value>().await {
                Ok(body) => serde_json::from_value(body["orders"].clone()).unwrap_or_default(),
                Err(_) => Vec::new(),
            },
            Ok(r) => {
                eprintln!("note: the server answered HTTP {} to a poll", r.status());
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        for order in orders {
            match order {
                Order::Run {
                    run_id,
                    command,
                    description,
                    timeout_seconds,
                } => {
                    if exec {
                        lock(running).insert(run_id.clone(), Run::default());
                    }
                    let (connection, running, id) =
                        (Arc::clone(connection), Arc::clone(running), id.to_owned());
                    tokio::spawn(async move {
                        let report = if exec {
                            eprintln!("{}", run_log(&run_id, &description, &command));
                            run(&run_id, &command, timeout_seconds, &running).await
                        } else {
                            Report {
                                status: "failed".to_owned(),
                                exit_code: None,
                                stdout: String::new(),
                                stderr: "this remote was connected without --exec: it runs no \
                                         command"
                                    .to_owned(),
                            }
                        };
                        eprintln!("run {run_id}: {}", report.status);
                        // The server may be briefly away (or its store): a report is tried a few times.
                        for _ in 0..5 {
                            let sent = connection
                                .request(
                                    reqwest::Method::POST,
                                    &format!("/remotes/{id}/runs/{run_id}"),
                                )
                                .json(&report)
                                .send()
                                .await;
                            // Delivered, or refused for good (a 4xx): no use trying again.
                            if sent.is_ok_and(|r| !r.status().is_server_error()) {
                                break;
                            }
                            tokio::time::sleep(Duration::from_secs(2)).await;
                        }
                    });
                }
                Order::Kill { run_id } => {
                    let Some(group) = mark_killed(running, &run_id) else {
                        continue;
                    };
                    eprintln!("run {run_id}: killed on request");
                    // Not started yet: `run` sees the mark and kills the group it starts.
                    if let Some(group) = group {
                        kill_group(group).await;
                    }
                }
            }
        }
    }
}

/// The log's lines for a run that starts: the description (the agent's words) on a line of its
/// own, then the command exactly as it runs, each of its lines indented so none can pass for a
/// line of the log, with control characters shown as `^[` or `<U+202E>` rather than sent to the
/// terminal (a `\r` could otherwise overwrite the command with another).
fn run_log(run_id: &str, description: &str, command: &str) -> String {
    use infinity_agent_core::text::visible;
    let mut log = format!("run {run_id}: starting");
    if !description.is_empty() {
        log.push_str(&format!("\n  description: {}", visible(description)));
    }
    log.push_str("\n  command:");
    for line in visible(command).split('\n') {
        log.push_str("\n    ");
        log.push_str(line);
    }
    log
}

/// Runs `command` with `sh -c` in a process group of its own, killed after `timeout_seconds`.
async fn run(run_id: &str, command: &str, timeout_seconds: u64, running: &Running) -> Report {
    let failed = |why: String| Report {
        status: "failed".to_owned(),
        exit_code: None,
        stdout: String::new(),
        stderr: why,
    };
    let mut child = match tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            lock(running).remove(run_id);
            return failed(format!("the command could not be started: {e}"));
        }
    };
    let Some(group) = child.id() else {
        lock(running).remove(run_id);
        return failed("the command ended before it could be watched".to_owned());
    };
    let killed_already = {
        let mut running = lock(running);
        let run = running.entry(run_id.to_owned()).or_default();
        run.group = Some(group);
        run.killed
    };
    if killed_already {
        kill_group(group).await;
    }
    let stdout = child.stdout.take().map(|s| tokio::spawn(keep_tail(s)));
    let stderr = child.stderr.take().map(|s| tokio::spawn(keep_tail(s)));
    let waited = tokio::time::timeout(Duration::from_secs(timeout_seconds), child.wait()).await;
    let (status, exit_code) = match waited {
        Ok(Ok(exit)) => ("exited", exit.code()),
        Ok(Err(e)) => {
            kill_group(group).await;
            lock(running).remove(run_id);
            return failed(format!("waiting for the command failed: {e}"));
        }
        Err(_) => {
            kill_group(group).await;
            let _ = child.wait().await;
            ("timeout", None)
        }
    };
    // What is left of the group (a background job) must not hold the pipes open.
    kill_group(group).await;
    let killed = lock(running).remove(run_id).is_some_and(|run| run.killed);
    let text = |handle: Option<tokio::task::JoinHandle<Vec<u8>>>| async move {
        match handle {
            Some(h) => String::from_utf8_lossy(&h.await.unwrap_or_default()).into_owned(),
            None => String::new(),
        }
    };
    Report {
        status: if killed { "killed" } else { status }.to_owned(),
        exit_code: if killed { None } else { exit_code },
        stdout: text(stdout).await,
        stderr: text(stderr).await,
    }
}

/// Reads a stream to its end, keeping its last [`KEEP_BYTES`].
async fn keep_tail(mut stream: impl tokio::io::AsyncRead + Unpin) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => {
                kept.extend_from_slice(&buffer[..n]);
                if kept.len() > 2 * KEEP_BYTES {
                    kept.drain(..kept.len() - KEEP_BYTES);
                }
            }
        }
    }
}

/// Marks a run as told to stop: `None` when no such run is in flight, else its process group
/// when it has one yet.
fn mark_killed(running: &Running, run_id: &str) -> Option<Option<u32>> {
    lock(running).get_mut(run_id).map(|run| {
        run.killed = true;
        run.group
    })
}

fn lock(running: &Running) -> std::sync::MutexGuard<'_, HashMap<String, Run>> {
    running.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Kills a process group (the command and everything it started).
async fn kill_group(group: u32) {
    let _ = tokio::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{group}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

#[cfg(test)]
mod tests {
    use super::{lock, mark_killed, run, run_log, Run, Running};
    use std::time::Duration;

    #[tokio::test]
    async fn a_kill_that_arrives_before_the_process_starts_still_ends_it() {
        let running = Running::default();
        // The order was received; its process is not started yet when the kill comes.
        lock(&running).insert("run-1".to_owned(), Run::default());
        assert_eq!(mark_killed(&running, "run-1"), Some(None));
        let report = tokio::time::timeout(
            Duration::from_secs(20),
            run("run-1", "sleep 30; echo late", 60, &running),
        )
        .await
        .expect("the command ran on though it was killed");
        assert_eq!(report.status, "killed");
        assert_eq!(report.stdout, "");
        assert!(
            lock(&running).is_empty(),
            "the run stays listed after it ended"
        );
        assert_eq!(mark_killed(&running, "run-2"), None);
    }

    #[test]
    fn the_log_shows_the_description_and_the_command_apart_with_controls_visible() {
        let log = run_log(
            "run-1",
            "say hi",
            "echo spoofed > F \u{1b}[2K\rgit status\nrun run-2: exited",
        );
        assert_eq!(
            log,
            "run run-1: starting\n  description: say hi\n  command:\n    echo spoofed > F \
             ^[[2K^Mgit status\n    run run-2: exited"
        );
        assert!(!run_log("run-3", "", "ls").contains("description"));
    }
}
