//! Stored agents (the catalog): a thread keeps the version it started with; configured agents
//! (`agents:`) are tools that delegate to the newest version, under the `agent` category's depth
//! and fan-out limits; a delegation to an agent the host cannot run is an error result, not a
//! wait that never ends.

use std::path::Path;
use std::sync::Arc;

use infinity_agent_core::agent::{Agent, AgentSpec};
use infinity_agent_core::input::InputBody;
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::state::ThreadStatus;
use infinity_agent_core::tools::internal::delegation::SubAgent;
use infinity_agent_core::tools::internal::{Categories, InternalTools};

use crate::behaviour::harness::{assert_in_order, count, tid, Harness, Servers, Stored};

fn researcher(version: &str) -> String {
    format!(
        r#"
rules:
  - when: "^Task: (.+)"
    reply:
      tool_calls: [{{name: finish, args: {{status: succeeded, result: "found $1 ({version})"}}}}]
  - reply: {{text: "idle"}}
"#
    )
}

const LEAD: &str = r#"
rules:
  - when: "^research (.+)$"
    reply:
      tool_calls: [{name: researcher, args: {task: "$1", images: ["https://example.com/chart.png"]}}]
  - when: "^ask ghost$"
    reply:
      tool_calls: [{name: ghost, args: {task: "haunt"}}]
  - when: "^crowd$"
    reply:
      tool_calls:
        - {name: agent, args: {task: "nap"}}
        - {name: napper, args: {task: "nap"}}
        - {name: napper, args: {task: "nap"}}
  - when: "^Task: nap"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 60}}]
  - when: "^sleep .* -> Slept"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: "rested"}}]
  - reply: {text: "noted"}
"#;

fn sub(name: &str) -> SubAgent {
    SubAgent {
        name: name.to_owned(),
        description: Some(format!("The {name}.")),
    }
}

#[tokio::test(start_paused = true)]
async fn a_configured_agent_runs_its_newest_version_in_a_fresh_thread() {
    let stored = Stored::new();
    stored.save("researcher", "", &researcher("v1")).await;
    let mut setup = stored.setup(LEAD);
    setup.sub_agents = vec![sub("researcher")];
    let mut h: Harness = setup.start().await;
    h.say("main", "research tides").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "call researcher",
            "result researcher: The delegated agent finished (succeeded). Result: found tides (v1)",
            "assistant: noted",
        ],
    );
    let first = h.children("main").pop().unwrap();
    let record = h.system.record(&tid(&first)).await.unwrap().unwrap();
    assert_eq!(record.agent, "researcher@1");
    assert_eq!((record.depth, record.status), (1, ThreadStatus::Closed));
    let history = h.history(&first).await;
    assert!(
        history[0].contains("Images:\n- https://example.com/chart.png"),
        "{history:#?}"
    );
    // A new version: the next delegation, even from the same conversation, runs it.
    stored.save("researcher", "", &researcher("v2")).await;
    h.say("main", "research moons").await;
    assert_in_order(&h.lines("main"), &["Result: found moons (v2)"]);
    let second = h.children("main").pop().unwrap();
    assert_eq!(
        h.system.record(&tid(&second)).await.unwrap().unwrap().agent,
        "researcher@2"
    );
}

#[tokio::test(start_paused = true)]
async fn a_conversation_keeps_the_version_it_started_with() {
    let stored = Stored::new();
    let reply = |v: &str| format!("rules:\n  - reply: {{text: \"helper {v} here\"}}\n");
    stored.save("helper", "", &reply("v1")).await;
    let mut setup = stored.setup(LEAD);
    setup.default_agent = Some("helper".to_owned());
    let mut h = setup.start().await;
    h.say("early", "hello").await;
    stored.save("helper", "", &reply("v2")).await;
    h.say("early", "hello again").await;
    h.say("late", "hello").await;
    assert_eq!(count(&h.lines("early"), "assistant: helper v1 here"), 2);
    assert_eq!(count(&h.lines("early"), "v2"), 0);
    assert_in_order(&h.lines("late"), &["assistant: helper v2 here"]);
    let early = h.system.record(&tid("early")).await.unwrap().unwrap();
    let late = h.system.record(&tid("late")).await.unwrap().unwrap();
    assert_eq!(
        (early.agent.as_str(), late.agent.as_str()),
        ("helper@1", "helper@2")
    );
}

#[tokio::test(start_paused = true)]
async fn configured_agents_share_the_fan_out_limit_of_the_agent_category() {
    let stored = Stored::new();
    stored
        .save(
            "napper",
            "",
            "rules:\n  - when: \"^Task\"\n    reply:\n      tool_calls: [{name: sleep, args: {seconds: 60}}]\n  - reply: {text: rested}\n",
        )
        .await;
    let mut setup = stored.setup(LEAD);
    setup.internal_tools = InternalTools::builder().agent(true).build();
    setup.sub_agents = vec![sub("napper")];
    let mut h = setup.start().await;
    h.say("main", "crowd").await;
    let lines = h.lines("main");
    assert_eq!(h.children("main").len(), 2, "{lines:#?}");
    assert_eq!(
        count(
            &lines,
            "error napper: Error: this conversation already has 2 delegations running"
        ),
        1,
        "{lines:#?}"
    );
    assert_eq!(count(&lines, "result agent: "), 1, "{lines:#?}");
    assert_eq!(count(&lines, "result napper: "), 1, "{lines:#?}");
}

#[tokio::test(start_paused = true)]
async fn configured_agents_stop_at_depth_three() {
    let stored = Stored::new();
    // The diver's configured agent is itself: each delegation goes one deeper.
    stored
        .save(
            "diver",
            "agents: [diver]\n",
            r#"
rules:
  - when: "^Task: dive"
    reply:
      tool_calls: [{name: diver, args: {task: "dive"}}]
  - when: "not available here"
    reply:
      tool_calls: [{name: finish, args: {status: failed, result: "too deep"}}]
  - reply: {text: "surfaced"}
"#,
        )
        .await;
    let mut setup = stored.setup("rules:\n  - when: \"^dive$\"\n    reply:\n      tool_calls: [{name: diver, args: {task: \"dive\"}}]\n  - reply: {text: noted}\n");
    setup.sub_agents = vec![sub("diver")];
    let mut h = setup.start().await;
    h.say("main", "dive").await;
    let d1 = h.children("main").pop().unwrap();
    let d2 = h.children(&d1).pop().unwrap();
    let d3 = h.children(&d2).pop().unwrap();
    assert!(h.children(&d3).is_empty(), "depth 3 must not delegate");
    let record = h.system.record(&tid(&d3)).await.unwrap().unwrap();
    assert_eq!((record.depth, record.agent.as_str()), (3, "diver@1"));
    assert_in_order(
        &h.lines(&d3),
        &["error diver: Error: `diver` is not available here: this thread is at delegation depth 3"],
    );
    assert_in_order(&h.lines("main"), &["result diver: ", "assistant: noted"]);
}

#[tokio::test(start_paused = true)]
async fn a_delegation_to_an_agent_nobody_stored_is_an_error_result() {
    let stored = Stored::new();
    let mut setup = stored.setup(LEAD);
    setup.sub_agents = vec![SubAgent {
        name: "ghost".to_owned(),
        description: None,
    }];
    let mut h = setup.start().await;
    h.say("main", "ask ghost").await;
    assert_in_order(
        &h.lines("main"),
        &[
            "call ghost",
            "error ghost: Error: the agent `ghost` is not available on this host",
            "assistant: noted",
        ],
    );
    let main = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert!(main.pending_calls.is_empty() && main.conversation.delegations.is_empty());
    let ghost = h.children("main").pop().unwrap();
    let record = h.system.record(&tid(&ghost)).await.unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Closed);
}

#[test]
fn a_configured_agent_whose_name_is_now_taken_is_left_out_and_the_rest_stay() {
    let model = ScriptedModel::parse("rules: []", Path::new("s.yaml")).unwrap();
    let mut spec = AgentSpec::new("old", "An older version.", Arc::new(model));
    spec.sub_agents = vec![sub("memory_get"), sub("researcher")];
    let agent = Agent::from_spec(spec, &Categories::core(), &[]).unwrap();
    let memory_get = agent.tools.get("memory_get").unwrap().spec();
    assert!(
        !memory_get.description.contains("Delegate"),
        "the internal tool keeps its name"
    );
    assert!(agent
        .tools
        .get("researcher")
        .unwrap()
        .spec()
        .description
        .contains("Delegate a task to the agent `researcher`: The researcher."));
}

#[tokio::test(start_paused = true)]
async fn a_person_moves_a_thread_to_another_version_of_its_agent() {
    let stored = Stored::new();
    let reply = |v: &str| {
        format!(
            "rules:\n  - when: \"^time$\"\n    reply:\n      tool_calls: [{{name: get_time, args: {{timezone: UTC}}}}]\n  - reply: {{text: \"helper {v} here\"}}\n"
        )
    };
    stored.save("helper", "", &reply("v1")).await;
    let mut setup = stored.setup(LEAD);
    setup.default_agent = Some("helper".to_owned());
    setup.discovery = Some(Arc::new(Servers));
    let mut h = setup.start().await;
    h.say("t", "hello").await;
    // The newest version has a tool server; moving to it (by its bare name) brings its tools.
    stored
        .save(
            "helper",
            "tool_servers: ['http://clock.test']\n",
            &reply("v2"),
        )
        .await;
    let use_agent = |agent: &str| InputBody::UseAgent {
        agent: agent.to_owned(),
    };
    h.send("t", use_agent("helper")).await;
    h.say("t", "hello").await;
    h.say("t", "time").await;
    let invocations = h.dispatcher.invocations.lock().unwrap().clone();
    assert_eq!(invocations.len(), 1, "{:#?}", h.lines("t"));
    assert_eq!(invocations[0].tool, "get_time");
    h.send(
        "t",
        InputBody::tool_result(invocations[0].call_id.clone(), "12:00"),
    )
    .await;
    let history = h.history("t").await;
    assert_in_order(
        &history,
        &[
            "assistant: helper v1 here",
            "notice: This thread now runs the agent helper@2 (it ran helper@1).",
            "assistant: helper v2 here",
        ],
    );
    // Back to an older version, named with it; its tool servers (none) replace the others.
    h.send("t", use_agent("helper@1")).await;
    h.say("t", "time").await;
    let record = h.system.record(&tid("t")).await.unwrap().unwrap();
    assert_eq!(record.agent, "helper@1");
    assert_eq!(h.dispatcher.invocations.lock().unwrap().len(), 1);
    assert_in_order(
        &h.lines("t"),
        &["error get_time: Error: there is no tool named `get_time`"],
    );
    // Another agent, a version nobody stored and a malformed name are refused, with a notice.
    for (target, says) in [
        ("lead", "a thread keeps its agent (helper)"),
        ("helper@9", "this host has no such version"),
        ("helper@x", "the version after `@` must be a number"),
    ] {
        h.send("t", use_agent(target)).await;
        assert_in_order(
            &h.history("t").await,
            &[&format!("notice: Not moved to `{target}`: {says}")],
        );
        let lines = h.lines("t");
        assert!(
            lines.last().unwrap().starts_with("ERROR Not moved"),
            "{lines:#?}"
        );
    }
    let record = h.system.record(&tid("t")).await.unwrap().unwrap();
    assert_eq!(record.agent, "helper@1");
}
