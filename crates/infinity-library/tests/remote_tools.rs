//! The `remote` category's tools in the core: a command is dispatched to the host with whether
//! the agent's rules allow it (and why not), a description of more than one line is refused, a remote is named by id or by a name only it has, and a run the
//! host never reports on (the host went away) still ends, as a result for the model. (The host
//! side, real remotes and real commands, is tested in `infinity-cli`'s `remote` tests.)

use std::sync::Arc;

use serde_json::json;

use infinity_agent_core::library::Library;
use infinity_agent_core::tools::internal::InternalTools;
use infinity_library::remote::{HubError, RemoteDirectory, RemoteInfo};
use infinity_library::LibraryExt;

use infinity_agent_core::testing::harness::{assert_in_order, Setup};

#[derive(Debug)]
struct Two;

#[async_trait::async_trait]
impl RemoteDirectory for Two {
    async fn remotes(&self) -> Result<Vec<RemoteInfo>, HubError> {
        let remote = |id: &str, name: &str, exec: bool| RemoteInfo {
            id: id.to_owned(),
            name: name.to_owned(),
            online: true,
            exec,
            last_seen: jiff::Timestamp::UNIX_EPOCH,
        };
        Ok(vec![
            remote("rm-1", "Laptop", true),
            remote("rm-2", "kiosk", false),
        ])
    }
}

const SCRIPT: &str = r#"
rules:
  - when: "^two lines on (\\S+)$"
    reply:
      tool_calls: [{name: remote_exec, args: {remote: "$1", command: "ls", description: "Lists files\nCommand: ls"}}]
  - when: "^on (\\S+) run (.+)$"
    reply:
      tool_calls: [{name: remote_exec, args: {remote: "$1", command: "$2", timeout_seconds: 60}}]
  - reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn commands_are_dispatched_with_their_approval_and_never_hang() {
    let mut setup = Setup::new(SCRIPT);
    setup.categories = infinity_library::categories();
    setup.internal_tools = InternalTools::builder()
        .settings("remote", json!({"allow": [{"command": "make:*"}]}))
        .build();
    setup.library = Some(Library::new().with_remotes(Arc::new(Two)));
    let mut h = setup.start().await;
    h.say("t", "on laptop run make test").await;
    h.say("u", "on rm-1 run rm -rf build").await;
    h.say("v", "on kiosk run ls").await;
    h.say("w", "on nas run ls").await;
    h.say("x", "two lines on laptop").await;
    let invocations = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(invocations.len(), 2, "{invocations:#?}");
    assert_eq!(invocations[0].args["remote_id"], "rm-1");
    assert_eq!(invocations[0].args["approved"], true);
    assert_eq!(
        invocations[1].args["approved"], false,
        "not covered: a person is asked"
    );
    assert_eq!(invocations[1].args["asks"], "no rule allows `rm -rf build`");
    // A description of two lines is refused before anything is dispatched.
    assert_in_order(
        &h.lines("x"),
        &["error remote_exec: Error: `description` must be one line of plain text (it has a line break)"],
    );
    assert!(invocations
        .iter()
        .all(|i| i.server.is_none() && i.tool == "remote_exec"));
    assert_in_order(
        &h.lines("v"),
        &["error remote_exec: Error: the remote `kiosk` (rm-2) was connected without --exec"],
    );
    assert_in_order(&h.lines("w"), &["error remote_exec: Error: no remote is called `nas`; connected: Laptop (rm-1), kiosk (rm-2)"]);
    // Nobody reports the allowed run: after its timeout and two minutes, it ends as lost.
    h.run_for(60 + 121).await;
    assert_in_order(
        &h.history("t").await,
        &[
            "result remote_exec: {\"reason\":\"no report of the command's end within 180 s",
            "\"status\":\"lost\"",
            "assistant: ok",
        ],
    );
    // The one waiting for a person has no deadline.
    assert!(!h.history("u").await.iter().any(|l| l.contains("lost")));
}
