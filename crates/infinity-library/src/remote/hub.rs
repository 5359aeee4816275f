//! The machines people connect to a host (`infinity remote connect`), as the `remote` category
//! sees them, and what every host that takes them shares: the orders a remote polls for and the
//! reports it sends ([`Order`], [`Report`]), the hub a host keeps them in ([`RemoteHub`]: in
//! memory on `infinity serve`, in the table on AWS; `crate::remote::RemoteDispatcher`
//! hands it the `remote_exec` calls), and the results the calling thread is sent.
//!
//! The thread reads remotes from a copy the host loads before a slice that may need them
//! ([`RemoteShelf`], listed again before every slice of an agent with the category on); tools
//! cannot wait.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::json;

use infinity_agent_core::effect::ToolInvocation;
use infinity_agent_core::ids::{CallId, InputId, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::library::ShelfError;

/// The name of the tool that runs a command.
pub const REMOTE_EXEC: &str = "remote_exec";
/// How long a command may run unless the call says otherwise, in seconds.
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 600;
/// How much of the end of stdout and of stderr a result keeps, in characters.
pub const OUTPUT_CHARS: usize = 30_000;

/// A remote with no poll open for this long is offline.
pub const OFFLINE_AFTER: Duration = Duration::from_secs(10);
/// How long after its timeout a run may still report before it is answered as timed out.
pub const REPORT_GRACE: Duration = Duration::from_secs(30);
/// Offline remotes are listed for this long, then forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// The longest a poll waits for an order.
pub const MAX_WAIT: Duration = Duration::from_secs(25);

/// A connected machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct RemoteInfo {
    /// Its id (`rm-...`), fresh for each connection.
    pub id: String,
    /// The name it connected with.
    pub name: String,
    /// True while it polls for work.
    pub online: bool,
    /// False for a remote connected without `--exec`: it is listed but runs nothing.
    pub exec: bool,
    /// When it last polled.
    #[schemars(with = "infinity_agent_core::schema::Rfc3339")]
    pub last_seen: Timestamp,
}

/// What a remote is told to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Order {
    /// Run `command` with `sh -c`, killing it after `timeout_seconds`.
    Run {
        /// The run's id.
        run_id: String,
        /// The command line.
        command: String,
        /// The call's one-line summary, for the remote's log (empty when the call gave none, or
        /// the hub is older).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        description: String,
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// Why a hub could not do what it was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubError {
    /// No such remote, run or question (gone, answered already, never there): the message says
    /// which.
    #[error("{0}")]
    NotFound(String),
    /// The hub's store could not be reached; asking again later may work.
    #[error("the remotes cannot be reached: {0}")]
    Unavailable(String),
}

/// Where a host's connected remotes are listed.
#[async_trait]
pub trait RemoteDirectory: Send + Sync + fmt::Debug {
    /// Every remote the host knows, connected or recently gone.
    async fn remotes(&self) -> Result<Vec<RemoteInfo>, HubError>;
}

/// A host's remotes, their orders, the runs in flight and the questions waiting for a person.
/// The HTTP routes remotes use, the dispatcher and the host's watch all go through it.
#[async_trait]
pub trait RemoteHub: RemoteDirectory {
    /// A remote connects: its fresh id.
    async fn connect(&self, name: &str, exec: bool) -> Result<String, HubError>;
    /// The remote's orders, waiting up to `wait` for one (`NotFound`: the hub forgot it, and it
    /// should connect again).
    async fn poll(&self, id: &str, wait: Duration) -> Result<Vec<Order>, HubError>;
    /// A remote says it is going away: its runs in flight are answered as disconnected.
    async fn disconnect(&self, id: &str) -> Result<(), HubError>;
    /// A remote reports a run's end (`NotFound` when it is not one of its runs in flight).
    async fn report(&self, remote: &str, run_id: &str, report: Report) -> Result<(), HubError>;
    /// A person answered an approval question (0: run it).
    async fn approve(&self, token: &str, selected: usize) -> Result<(), HubError>;
    /// A `remote_exec` call to perform: queued for its remote, or first put to a person.
    /// Performing the same call again (an outbox retried after a crash) queues nothing twice.
    async fn dispatch(&self, call: ExecCall) -> Result<(), HubError>;
    /// The conversation stopped the call: its run is killed, or its question withdrawn.
    async fn cancel(&self, thread: &ThreadId, call: &CallId);
}

/// A `remote_exec` call as the tool hands it to the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecCall {
    /// The calling thread.
    pub thread: ThreadId,
    /// The call.
    pub call: CallId,
    /// The remote's id.
    pub remote_id: String,
    /// Its name, for the question.
    pub remote_name: String,
    /// The command line.
    pub command: String,
    /// The call's one-line summary (shown above the command in the question).
    pub description: String,
    /// When to kill it.
    pub timeout_seconds: u64,
    /// True when an allow rule covers it (no question).
    pub approved: bool,
    /// Why no rule covers it (shown in the question; empty when approved, or stored by an
    /// older version).
    #[serde(default)]
    pub asks: String,
}

impl ExecCall {
    /// The call a `remote_exec` invocation carries.
    pub fn of(invocation: &ToolInvocation) -> Self {
        let args = &invocation.args;
        let text = |key: &str| args[key].as_str().unwrap_or_default().to_owned();
        let remote_id = text("remote_id");
        Self {
            thread: invocation.thread_id.clone(),
            call: invocation.call_id.clone(),
            remote_name: args["remote"].as_str().unwrap_or(&remote_id).to_owned(),
            remote_id,
            command: text("command"),
            description: text("description"),
            timeout_seconds: args["timeout_seconds"]
                .as_u64()
                .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            approved: args["approved"].as_bool() == Some(true),
            asks: text("asks"),
        }
    }

    /// The question a person is asked before the command runs; `response_url` takes the
    /// answer. The description (the model's words) and the command (exactly what `sh -c` gets)
    /// are on lines of their own, each labelled, so neither can pass for the other; hidden
    /// characters are shown in visible form ([`infinity_agent_core::text::visible`]) and the command's lines
    /// are indented, so no line of it can pass for the prompt's own.
    pub fn question(&self, response_url: String) -> Input {
        use infinity_agent_core::text::visible;
        let mut prompt = format!(
            "Run this command on the remote {}?\nDescription (the agent's words): {}\nCommand \
             (exactly what runs):\n",
            visible(&self.remote_name),
            if self.description.is_empty() {
                "(none given)".into()
            } else {
                visible(&self.description)
            }
        );
        for line in visible(&self.command).split('\n') {
            prompt.push_str("    ");
            prompt.push_str(line);
            prompt.push('\n');
        }
        if self
            .command
            .chars()
            .any(infinity_agent_core::text::is_hidden)
        {
            prompt.push_str(
                "(It has control characters, shown as ^X, ^? or <U+XXXX>; they are sent as they \
                 are.)\n",
            );
        }
        if !self.asks.is_empty() {
            prompt.push_str(&format!("Asked because {}.", visible(&self.asks)));
        }
        let prompt = prompt.trim_end().to_owned();
        Input {
            id: InputId::derived(self.call.as_str(), "approval"),
            thread_id: self.thread.clone(),
            body: InputBody::UserChoiceRequest {
                call_id: self.call.clone(),
                prompt,
                choices: vec!["Run it".to_owned(), "Do not run it".to_owned()],
                default: 1,
                response_url,
            },
        }
    }
}

/// How a run ended without a report of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The remote went away while it ran.
    Disconnected,
    /// The remote went away before it could start.
    NotStarted,
    /// No report came within its timeout and [`REPORT_GRACE`].
    Unreported,
    /// The person asked did not approve it.
    Declined,
}

/// The result input that ends the call `call` of `thread` with `text` (its id comes from the
/// call, so a result sent twice is processed once).
pub fn result_input(thread: &ThreadId, call: &CallId, text: String) -> Input {
    Input {
        id: InputId::derived(call.as_str(), "result"),
        thread_id: thread.clone(),
        body: InputBody::tool_result(call.clone(), text),
    }
}

/// The result text of a run its remote reported on.
pub fn reported(run_id: &str, report: &Report) -> String {
    json!({
        "run_id": run_id,
        "status": report.status,
        "exit_code": report.exit_code,
        "stdout": tail(&report.stdout),
        "stderr": tail(&report.stderr),
    })
    .to_string()
}

/// The result text of a run (or a call) that ended without a report.
pub fn ended(run_id: Option<&str>, ending: Ending) -> String {
    let (status, reason) = match ending {
        Ending::Disconnected => (
            "disconnected",
            "remote disconnected before the command finished",
        ),
        Ending::NotStarted => (
            "disconnected",
            "the remote went offline before the command could start",
        ),
        Ending::Unreported => (
            "timeout",
            "the remote did not report the end of the command within its timeout",
        ),
        Ending::Declined => (
            "declined",
            "the person asked did not approve running the command",
        ),
    };
    match run_id {
        Some(run_id) => json!({"run_id": run_id, "status": status, "reason": reason}),
        None => json!({"status": status, "reason": reason}),
    }
    .to_string()
}

/// The end of `text`: its last [`OUTPUT_CHARS`] characters.
pub fn tail(text: &str) -> String {
    let count = text.chars().count();
    if count <= OUTPUT_CHARS {
        return text.to_owned();
    }
    text.chars().skip(count - OUTPUT_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_shows_the_description_and_the_command_apart_with_controls_visible() {
        let call = ExecCall {
            thread: ThreadId::new("t").unwrap(),
            call: CallId::new("c").unwrap(),
            remote_id: "rm-1".to_owned(),
            remote_name: "Laptop".to_owned(),
            command: "echo spoofed > F \u{1b}[2K\rgit status\nls".to_owned(),
            description: "shows the status".to_owned(),
            timeout_seconds: 60,
            approved: false,
            asks: "`echo spoofed` has the redirection `> F`".to_owned(),
        };
        let InputBody::UserChoiceRequest { prompt, .. } = call.question("http://x".to_owned()).body
        else {
            panic!("not a question");
        };
        assert_eq!(
            prompt,
            "Run this command on the remote Laptop?\n\
             Description (the agent's words): shows the status\n\
             Command (exactly what runs):\n\
             \x20   echo spoofed > F ^[[2K^Mgit status\n\
             \x20   ls\n\
             (It has control characters, shown as ^X, ^? or <U+XXXX>; they are sent as they are.)\n\
             Asked because `echo spoofed` has the redirection `> F`."
        );
        let plain = ExecCall {
            command: "ls".to_owned(),
            description: String::new(),
            asks: String::new(),
            ..call
        };
        let InputBody::UserChoiceRequest { prompt, .. } = plain.question(String::new()).body else {
            panic!("not a question");
        };
        assert!(
            prompt.ends_with("(none given)\nCommand (exactly what runs):\n    ls"),
            "{prompt}"
        );
    }

    #[test]
    fn results_keep_the_end_of_long_output_and_name_how_a_run_ended() {
        let long = format!("{}END", "x".repeat(OUTPUT_CHARS));
        let report = Report {
            status: "exited".to_owned(),
            exit_code: Some(3),
            stdout: long,
            stderr: "é".repeat(10),
        };
        let text: serde_json::Value = serde_json::from_str(&reported("run-1", &report)).unwrap();
        let stdout = text["stdout"].as_str().unwrap();
        assert_eq!(stdout.chars().count(), OUTPUT_CHARS);
        assert!(stdout.ends_with("END"));
        assert_eq!(text["stderr"], "é".repeat(10));
        assert_eq!(text["exit_code"], 3);
        let gone: serde_json::Value =
            serde_json::from_str(&ended(Some("run-2"), Ending::Disconnected)).unwrap();
        assert_eq!(gone["status"], "disconnected");
        assert_eq!(
            gone["reason"],
            "remote disconnected before the command finished"
        );
        assert!(!ended(None, Ending::Declined).contains("run_id"));
    }
}

/// The `remote` category's shelf: the host's remotes as listed before the slice (remotes come
/// and go by the second, so the list is read again before every slice that may use it).
#[derive(Debug)]
pub struct RemoteShelf {
    directory: Arc<dyn RemoteDirectory>,
    copy: RwLock<Vec<RemoteInfo>>,
}

impl RemoteShelf {
    /// The remotes `directory` lists.
    pub fn new(directory: Arc<dyn RemoteDirectory>) -> Self {
        Self {
            directory,
            copy: RwLock::new(Vec::new()),
        }
    }

    /// The remotes as last listed.
    pub fn copy(&self) -> Vec<RemoteInfo> {
        self.copy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl infinity_agent_core::library::Shelf for RemoteShelf {
    fn category(&self) -> &'static str {
        "remote"
    }

    async fn prepare(&self) -> Result<(), ShelfError> {
        let listed = self
            .directory
            .remotes()
            .await
            .map_err(|e| ShelfError::Unavailable(e.to_string()))?;
        *self.copy.write().unwrap_or_else(PoisonError::into_inner) = listed;
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
