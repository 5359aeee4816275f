//! [`RemoteHub`]: the machines connected to an `infinity serve` (`infinity remote connect`), the
//! commands waiting for them or for a person's approval, and the runs in flight.
//!
//! A remote polls for orders (a long poll: the request waits until there is one, or about 20
//! s). It is online while a poll is open or one ended less than [`OFFLINE_AFTER`] ago; a remote
//! that goes offline with runs in flight has each of them answered "remote disconnected before
//! the command finished", and a run that outlives its timeout by [`REPORT_GRACE`] without a
//! report is answered as timed out, so no call is left hanging on a machine that went away.
//! Results go to the calling thread through the runtime's input queue (the input's id comes from
//! the call, so a result reported twice is processed once).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use infinity_agent_core::effect::ToolInvocation;
use infinity_agent_core::ids::{CallId, InputId, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::library::remotes::{RemoteDirectory, RemoteInfo};
use infinity_agent_core::runtime::AgentSystem;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::Notify;

/// A remote with no poll open for this long is offline.
pub const OFFLINE_AFTER: Duration = Duration::from_secs(10);
/// How long after its timeout a run may still report before it is answered as timed out.
pub const REPORT_GRACE: Duration = Duration::from_secs(30);
/// Offline remotes are listed for this long, then forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// What a remote is told to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Order {
    /// Run `command` with `sh -c`, killing it after `timeout_seconds`.
    Run {
        /// The run's id.
        run_id: String,
        /// The command line.
        command: String,
        /// When to kill it.
        timeout_seconds: u64,
    },
    /// Kill a run (its conversation was stopped).
    Kill {
        /// The run.
        run_id: String,
    },
}

/// How a run ended, as the remote reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// `exited`, `timeout`, `killed` or `failed` (it could not be started).
    pub status: String,
    /// The exit code, when it exited.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The end of its stdout.
    #[serde(default)]
    pub stdout: String,
    /// The end of its stderr.
    #[serde(default)]
    pub stderr: String,
}

#[derive(Debug)]
struct Remote {
    info: RemoteInfo,
    polls: usize,
    last_poll: Instant,
    gone: bool,
    orders: VecDeque<Order>,
    wake: Arc<Notify>,
}

impl Remote {
    fn online(&self) -> bool {
        !self.gone && (self.polls > 0 || self.last_poll.elapsed() < OFFLINE_AFTER)
    }
}

#[derive(Debug, Clone)]
struct Call {
    thread: ThreadId,
    call: CallId,
}

#[derive(Debug)]
struct Run {
    remote: String,
    call: Call,
    started: Instant,
    timeout: Duration,
}

#[derive(Debug)]
struct Approval {
    remote: String,
    command: String,
    timeout_seconds: u64,
    call: Call,
}

#[derive(Debug, Default)]
struct State {
    remotes: BTreeMap<String, Remote>,
    runs: HashMap<String, Run>,
    approvals: HashMap<String, Approval>,
}

/// The remotes of one served runtime.
#[derive(Debug)]
pub struct RemoteHub {
    state: Mutex<State>,
    system: OnceLock<AgentSystem>,
    /// The server's own base URL, for the approval questions' `response_url`.
    base_url: OnceLock<String>,
}

fn fresh_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

impl RemoteHub {
    /// A hub with no remote; [`RemoteHub::start`] gives it the runtime it answers calls in.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            system: OnceLock::new(),
            base_url: OnceLock::new(),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts answering: results go to `system`; approval answers come to `base_url`. Watches
    /// the remotes until the process ends.
    pub fn start(self: &Arc<Self>, system: AgentSystem, base_url: String) {
        let _ = self.system.set(system);
        let _ = self.base_url.set(base_url);
        let hub = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                hub.watch();
            }
        });
    }

    /// A remote connects: its fresh id.
    pub fn connect(&self, name: &str, exec: bool) -> String {
        let id = fresh_id("rm");
        let remote = Remote {
            info: RemoteInfo {
                id: id.clone(),
                name: name.to_owned(),
                online: true,
                exec,
                last_seen: Timestamp::now(),
            },
            polls: 0,
            last_poll: Instant::now(),
            gone: false,
            orders: VecDeque::new(),
            wake: Arc::new(Notify::new()),
        };
        tracing::info!(remote = %id, name, exec, "remote connected");
        self.state().remotes.insert(id.clone(), remote);
        id
    }

    /// The remote's orders, waiting up to `wait` for one. `None` for an unknown remote.
    pub async fn poll(&self, id: &str, wait: Duration) -> Option<Vec<Order>> {
        let wake = {
            let mut state = self.state();
            let remote = state.remotes.get_mut(id).filter(|r| !r.gone)?;
            remote.polls += 1;
            remote.info.last_seen = Timestamp::now();
            Arc::clone(&remote.wake)
        };
        // The poll counts as open until this returns or its request is dropped.
        let _open = PollGuard { hub: self, id };
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = wake.notified();
            {
                let mut state = self.state();
                let remote = state.remotes.get_mut(id)?;
                if !remote.orders.is_empty() {
                    return Some(remote.orders.drain(..).collect());
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Some(Vec::new());
            }
        }
    }

    /// A remote says it is going away: its runs in flight are answered as disconnected.
    pub fn disconnect(&self, id: &str) -> bool {
        let mut state = self.state();
        let Some(remote) = state.remotes.get_mut(id) else {
            return false;
        };
        remote.gone = true;
        drop(state);
        self.watch();
        true
    }

    /// A remote reports a run's end. False when the run is not one of its runs in flight.
    pub fn report(&self, remote: &str, run_id: &str, report: Report) -> bool {
        let run = {
            let mut state = self.state();
            match state.runs.get(run_id) {
                Some(run) if run.remote == remote => state.runs.remove(run_id),
                _ => None,
            }
        };
        let Some(run) = run else {
            return false;
        };
        let text = json!({
            "run_id": run_id,
            "status": report.status,
            "exit_code": report.exit_code,
            "stdout": tail(&report.stdout),
            "stderr": tail(&report.stderr),
        });
        self.answer(&run.call, text.to_string());
        true
    }

    /// A `remote_exec` call to perform: queued for its remote, or first put to a person.
    pub fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), String> {
        let args = &invocation.args;
        let remote = args["remote_id"].as_str().unwrap_or_default().to_owned();
        let command = args["command"].as_str().unwrap_or_default().to_owned();
        let timeout_seconds = args["timeout_seconds"]
            .as_u64()
            .unwrap_or(infinity_agent_core::tools::internal::REMOTE_DEFAULT_TIMEOUT);
        let call = Call {
            thread: invocation.thread_id.clone(),
            call: invocation.call_id.clone(),
        };
        if !self.state().remotes.contains_key(&remote) {
            return Err(format!("the remote {remote} is not connected any more"));
        }
        if args["approved"].as_bool() == Some(true) {
            self.queue_run(&remote, command, timeout_seconds, call);
            return Ok(());
        }
        let name = args["remote"].as_str().unwrap_or(&remote).to_owned();
        let description = args["description"].as_str().unwrap_or_default();
        let token = fresh_id("ap");
        let base = self.base_url.get().cloned().unwrap_or_default();
        let prompt = if description.is_empty() {
            format!("Run this command on the remote {name}?\n\n{command}")
        } else {
            format!("Run this command on the remote {name}? {description}\n\n{command}")
        };
        self.state().approvals.insert(
            token.clone(),
            Approval {
                remote,
                command,
                timeout_seconds,
                call: call.clone(),
            },
        );
        self.send(Input {
            id: InputId::derived(call.call.as_str(), "approval"),
            thread_id: call.thread.clone(),
            body: InputBody::UserChoiceRequest {
                call_id: call.call.clone(),
                prompt,
                choices: vec!["Run it".to_owned(), "Do not run it".to_owned()],
                default: 1,
                response_url: format!("{base}/remotes/approvals/{token}"),
            },
        });
        Ok(())
    }

    /// A person answered an approval question (0: run it). False for an unknown token.
    pub fn approve(&self, token: &str, selected: usize) -> bool {
        let Some(approval) = self.state().approvals.remove(token) else {
            return false;
        };
        if selected == 0 {
            self.queue_run(
                &approval.remote,
                approval.command,
                approval.timeout_seconds,
                approval.call,
            );
        } else {
            let text = json!({"status": "declined",
                              "reason": "the person asked did not approve running the command"});
            self.answer(&approval.call, text.to_string());
        }
        true
    }

    /// The conversation stopped the call: its run is killed, or its question withdrawn.
    pub fn cancel(&self, thread: &ThreadId, call: &CallId) {
        let mut state = self.state();
        state
            .approvals
            .retain(|_, a| !(a.call.thread == *thread && a.call.call == *call));
        let found = state
            .runs
            .iter()
            .find(|(_, r)| r.call.thread == *thread && r.call.call == *call)
            .map(|(id, r)| (id.clone(), r.remote.clone()));
        if let Some((run_id, remote)) = found {
            if let Some(remote) = state.remotes.get_mut(&remote) {
                remote.orders.push_back(Order::Kill { run_id });
                remote.wake.notify_one();
            }
        }
    }

    fn queue_run(&self, remote: &str, command: String, timeout_seconds: u64, call: Call) {
        let run_id = fresh_id("run");
        let mut state = self.state();
        let Some(target) = state.remotes.get_mut(remote).filter(|r| r.online()) else {
            drop(state);
            let text = json!({"status": "disconnected",
                              "reason": "the remote went offline before the command could start"});
            self.answer(&call, text.to_string());
            return;
        };
        target.orders.push_back(Order::Run {
            run_id: run_id.clone(),
            command,
            timeout_seconds,
        });
        target.wake.notify_one();
        state.runs.insert(
            run_id,
            Run {
                remote: remote.to_owned(),
                call,
                started: Instant::now(),
                timeout: Duration::from_secs(timeout_seconds),
            },
        );
    }

    /// Answers runs whose remote went away or that never reported, and forgets old remotes.
    fn watch(&self) {
        let mut ended = Vec::new();
        {
            let mut state = self.state();
            let State { remotes, runs, .. } = &mut *state;
            runs.retain(|run_id, run| {
                let online = remotes.get(&run.remote).is_some_and(Remote::online);
                let overdue = run.started.elapsed() > run.timeout + REPORT_GRACE;
                let status = match (online, overdue) {
                    (false, _) => "disconnected",
                    (true, true) => "timeout",
                    (true, false) => return true,
                };
                ended.push((run_id.clone(), run.call.clone(), status));
                false
            });
            remotes.retain(|_, r| r.online() || r.last_poll.elapsed() < FORGET_AFTER);
        }
        for (run_id, call, status) in ended {
            let reason = if status == "disconnected" {
                "remote disconnected before the command finished"
            } else {
                "the remote did not report the end of the command within its timeout"
            };
            tracing::info!(run = %run_id, thread = %call.thread, status, "a remote run ended without a report");
            let text = json!({"run_id": run_id, "status": status, "reason": reason});
            self.answer(&call, text.to_string());
        }
    }

    fn answer(&self, call: &Call, text: String) {
        self.send(Input {
            id: InputId::derived(call.call.as_str(), "result"),
            thread_id: call.thread.clone(),
            body: InputBody::tool_result(call.call.clone(), text),
        });
    }

    fn send(&self, input: Input) {
        match self.system.get() {
            Some(system) => system.send(input),
            None => {
                tracing::error!(thread = %input.thread_id, "the remote hub is not started; an input is lost")
            }
        }
    }
}

impl RemoteDirectory for RemoteHub {
    fn remotes(&self) -> Vec<RemoteInfo> {
        self.state()
            .remotes
            .values()
            .map(|r| RemoteInfo {
                online: r.online(),
                ..r.info.clone()
            })
            .collect()
    }
}

/// The end of `text`: its last [`infinity_agent_core::tools::internal::REMOTE_OUTPUT_CHARS`]
/// characters.
fn tail(text: &str) -> String {
    let max = infinity_agent_core::tools::internal::REMOTE_OUTPUT_CHARS;
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    text.chars().skip(count - max).collect()
}

struct PollGuard<'a> {
    hub: &'a RemoteHub,
    id: &'a str,
}

impl Drop for PollGuard<'_> {
    fn drop(&mut self) {
        let mut state = self.hub.state();
        if let Some(remote) = state.remotes.get_mut(self.id) {
            remote.polls = remote.polls.saturating_sub(1);
            remote.last_poll = Instant::now();
            remote.info.last_seen = Timestamp::now();
        }
    }
}
