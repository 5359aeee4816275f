//! The `finish` internal tool: output, output_schema, ending the turn, who is offered it.

use crate::behaviour::harness::{assert_in_order, count, tid, Setup};
use infinity_agent_core::state::FinishStatus;
use infinity_agent_core::tools::internal::InternalTools;
use serde_json::json;

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your thread ID is"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: {answer: 1}}}]
  - when: "^go$"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: {answer: "forty-two"}}}]
  - when: "does not match the agent's output_schema"
    reply:
      text: "Let me fix that."
      tool_calls: [{name: finish, args: {status: succeeded, result: {answer: 42}}}]
  - when: "^give up$"
    reply:
      tool_calls: [{name: finish, args: {status: failed, result: "no luck"}}]
  - when: "^spawn$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "help", child_of: "${stack}"}}]
  - reply: {text: "anything else?"}
"#;

#[tokio::test(start_paused = true)]
async fn a_result_that_fails_the_schema_goes_back_and_the_corrected_one_ends_the_turn() {
    let mut setup = Setup::new(SCRIPT);
    setup.output_schema = Some(json!({
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"]
    }));
    let mut h = setup.start().await;
    h.say("main", "go").await;
    let lines = h.lines("main");
    assert_in_order(
        &lines,
        &[
            "error finish: Error: the result does not match the agent's output_schema: at `/answer`",
            "assistant: Let me fix that.",
            "finished Succeeded {\"answer\":42}",
            "result finish: Finished: succeeded.",
        ],
    );
    // The succeeded finish ended the turn: no completion answered its result.
    assert_eq!(count(&lines, "assistant: anything else?"), 0, "{lines:#?}");
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.usage.completions, 2);
    let output = record.output.unwrap();
    assert_eq!(
        (output.status, output.result),
        (FinishStatus::Succeeded, json!({"answer": 42}))
    );
    // An input that brings the model nothing to read does not start one either.
    h.send("main", infinity_agent_core::input::InputBody::Nudge {})
        .await;
    assert_eq!(
        h.system
            .record(&tid("main"))
            .await
            .unwrap()
            .unwrap()
            .usage
            .completions,
        2
    );
    // New input starts a new turn.
    h.say("main", "thanks").await;
    assert_eq!(count(&h.lines("main"), "assistant: anything else?"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_finish_is_recorded_and_the_model_goes_on() {
    let mut h = Setup::new(SCRIPT).start().await;
    h.say("main", "give up").await;
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.output.unwrap().status, FinishStatus::Failed);
    assert_in_order(
        &h.lines("main"),
        &[
            "result finish: Finished: failed.",
            "assistant: anything else?",
        ],
    );
}

#[tokio::test(start_paused = true)]
async fn with_finish_off_only_children_are_offered_it() {
    let mut setup = Setup::new(SCRIPT);
    setup.internal_tools = InternalTools::builder().finish(false).build();
    let mut h = setup.start().await;
    h.say("main", "go").await;
    assert_in_order(
        &h.lines("main"),
        &["error finish: Error: `finish` is turned off for this agent's top-level threads"],
    );
    h.say("main", "spawn").await;
    let child = h.children("main").pop().unwrap();
    let record = h.system.record(&tid(&child)).await.unwrap().unwrap();
    assert_eq!(record.output.unwrap().result, json!({"answer": 1}));
}

#[tokio::test(start_paused = true)]
async fn a_result_too_big_for_the_record_goes_back_to_the_model() {
    const BIG: &str = r#"
rules:
  - when: "^huge ([\\s\\S]*)$"
    reply:
      tool_calls: [{name: finish, args: {status: succeeded, result: "$1"}}]
  - when: "finish records at most"
    reply:
      text: "Shorter, then."
      tool_calls: [{name: finish, args: {status: succeeded, result: "the gist"}}]
  - reply: {text: "anything else?"}
"#;
    let mut h = Setup::new(BIG).start().await;
    let bulk = "b".repeat(infinity_agent_core::tools::internal::MAX_FINISH_RESULT_BYTES);
    h.say("main", &format!("huge {bulk}")).await;
    assert_in_order(
        &h.lines("main"),
        &[
            "error finish: Error: the result is 100002 bytes of JSON; finish records at most 100000.",
            "assistant: Shorter, then.",
            "result finish: Finished: succeeded.",
        ],
    );
    let record = h.system.record(&tid("main")).await.unwrap().unwrap();
    assert_eq!(record.output.unwrap().result, json!("the gist"));
}
