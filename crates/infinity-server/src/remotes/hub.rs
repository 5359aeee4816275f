//! [`MemoryRemotes`]: the machines connected to an `infinity serve` (`infinity remote connect`), the
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

use async_trait::async_trait;
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::input::Input;
use infinity_agent_core::runtime::AgentSystem;
use infinity_library::remote::{
    ended, reported, result_input, Ending, ExecCall, HubError, Order, RemoteDirectory, RemoteHub,
    RemoteInfo, Report, FORGET_AFTER, OFFLINE_AFTER, REPORT_GRACE,
};
use jiff::Timestamp;
use tokio::sync::Notify;

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

#[derive(Debug, Default)]
struct State {
    remotes: BTreeMap<String, Remote>,
    runs: HashMap<String, Run>,
    approvals: HashMap<String, ExecCall>,
}

/// The remotes of one served runtime, in its memory (a restart forgets them; they connect
/// again, and the calls in flight end by their deadline).
#[derive(Debug)]
pub struct MemoryRemotes {
    state: Mutex<State>,
    system: OnceLock<AgentSystem>,
    /// The server's own base URL, for the approval questions' `response_url`.
    base_url: OnceLock<String>,
}

fn fresh_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn gone(id: &str) -> HubError {
    HubError::NotFound(format!("no remote {id} is connected (connect again)"))
}

impl MemoryRemotes {
    /// A hub with no remote; [`MemoryRemotes::start`] gives it the runtime it answers calls in.
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
                hub.watch().await;
            }
        });
    }

    async fn queue_run(&self, call: ExecCall) -> Result<(), HubError> {
        let run_id = fresh_id("run");
        let queued = {
            let mut state = self.state();
            match state
                .remotes
                .get_mut(&call.remote_id)
                .filter(|r| r.online())
            {
                Some(target) => {
                    target.orders.push_back(Order::Run {
                        run_id: run_id.clone(),
                        command: call.command.clone(),
                        description: call.description.clone(),
                        timeout_seconds: call.timeout_seconds,
                    });
                    target.wake.notify_one();
                    state.runs.insert(
                        run_id,
                        Run {
                            remote: call.remote_id.clone(),
                            call: Call {
                                thread: call.thread.clone(),
                                call: call.call.clone(),
                            },
                            started: Instant::now(),
                            timeout: Duration::from_secs(call.timeout_seconds),
                        },
                    );
                    true
                }
                None => false,
            }
        };
        if queued {
            return Ok(());
        }
        self.send(result_input(
            &call.thread,
            &call.call,
            ended(None, Ending::NotStarted),
        ))
        .await
    }

    /// Answers runs whose remote went away or that never reported, and forgets old remotes.
    async fn watch(&self) {
        let mut ended_runs = Vec::new();
        {
            let mut state = self.state();
            let State { remotes, runs, .. } = &mut *state;
            runs.retain(|run_id, run| {
                let online = remotes.get(&run.remote).is_some_and(Remote::online);
                let overdue = run.started.elapsed() > run.timeout + REPORT_GRACE;
                let ending = match (online, overdue) {
                    (false, _) => Ending::Disconnected,
                    (true, true) => Ending::Unreported,
                    (true, false) => return true,
                };
                ended_runs.push((run_id.clone(), run.call.clone(), ending));
                false
            });
            remotes.retain(|_, r| r.online() || r.last_poll.elapsed() < FORGET_AFTER);
        }
        for (run_id, call, ending) in ended_runs {
            tracing::info!(run = %run_id, thread = %call.thread, ?ending, "a remote run ended without a report");
            let input = result_input(&call.thread, &call.call, ended(Some(&run_id), ending));
            if let Err(err) = self.send(input).await {
                tracing::error!(run = %run_id, thread = %call.thread, %err, "the end of a remote run could not be handed to its thread");
            }
        }
    }

    /// Hands `input` to its thread, durably ([`AgentSystem::accept`]): a report is acknowledged
    /// to its machine only after this.
    async fn send(&self, input: Input) -> Result<(), HubError> {
        let Some(system) = self.system.get() else {
            tracing::error!(thread = %input.thread_id, "the remote hub is not started; an input is refused");
            return Err(HubError::Unavailable(
                "the remote hub is not started".to_owned(),
            ));
        };
        system
            .accept(input)
            .await
            .map(|_| ())
            .map_err(|e| HubError::Unavailable(e.to_string()))
    }
}

#[async_trait]
impl RemoteDirectory for MemoryRemotes {
    async fn remotes(&self) -> Result<Vec<RemoteInfo>, HubError> {
        Ok(self
            .state()
            .remotes
            .values()
            .map(|r| RemoteInfo {
                online: r.online(),
                ..r.info.clone()
            })
            .collect())
    }
}

#[async_trait]
impl RemoteHub for MemoryRemotes {
    async fn connect(&self, name: &str, exec: bool) -> Result<String, HubError> {
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
        Ok(id)
    }

    async fn poll(&self, id: &str, wait: Duration) -> Result<Vec<Order>, HubError> {
        let wake = {
            let mut state = self.state();
            let remote = state
                .remotes
                .get_mut(id)
                .filter(|r| !r.gone)
                .ok_or_else(|| gone(id))?;
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
                let remote = state.remotes.get_mut(id).ok_or_else(|| gone(id))?;
                if !remote.orders.is_empty() {
                    return Ok(remote.orders.drain(..).collect());
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    async fn disconnect(&self, id: &str) -> Result<(), HubError> {
        self.state()
            .remotes
            .get_mut(id)
            .ok_or_else(|| HubError::NotFound(format!("no remote {id}")))?
            .gone = true;
        self.watch().await;
        Ok(())
    }

    async fn report(&self, remote: &str, run_id: &str, report: Report) -> Result<(), HubError> {
        let run = {
            let mut state = self.state();
            match state.runs.get(run_id) {
                Some(run) if run.remote == remote => state.runs.remove(run_id),
                _ => None,
            }
        };
        let run = run.ok_or_else(|| {
            HubError::NotFound(format!("the remote {remote} has no run {run_id} in flight"))
        })?;
        self.send(result_input(
            &run.call.thread,
            &run.call.call,
            reported(run_id, &report),
        ))
        .await
    }

    async fn approve(&self, token: &str, selected: usize) -> Result<(), HubError> {
        let call = self.state().approvals.remove(token).ok_or_else(|| {
            HubError::NotFound(
                "no approval is waiting at this address (answered already, or withdrawn)"
                    .to_owned(),
            )
        })?;
        if selected == 0 {
            self.queue_run(call).await
        } else {
            self.send(result_input(
                &call.thread,
                &call.call,
                ended(None, Ending::Declined),
            ))
            .await
        }
    }

    async fn dispatch(&self, call: ExecCall) -> Result<(), HubError> {
        if !self.state().remotes.contains_key(&call.remote_id) {
            return Err(HubError::NotFound(format!(
                "the remote {} is not connected any more",
                call.remote_id
            )));
        }
        if call.approved {
            return self.queue_run(call).await;
        }
        let token = fresh_id("ap");
        let base = self.base_url.get().cloned().unwrap_or_default();
        let question = call.question(format!("{base}/remotes/approvals/{token}"));
        self.state().approvals.insert(token, call);
        self.send(question).await
    }

    async fn cancel(&self, thread: &ThreadId, call: &CallId) {
        let mut state = self.state();
        state
            .approvals
            .retain(|_, a| !(a.thread == *thread && a.call == *call));
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
}

struct PollGuard<'a> {
    hub: &'a MemoryRemotes,
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
