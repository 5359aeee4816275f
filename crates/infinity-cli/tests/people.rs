//! People and applications in the loop, as they reach a real host: client tools answered by
//! `infinity tool-result` and `POST /threads/{id}/tool_results/{call}` on the local AWS stack,
//! approvals answered by `infinity choose` or by their deadline through the stack's timers, and
//! both kept through a `kill -9` of `infinity serve --store`.

use crate::aws_stack::{eventually, serve_aws, stack_with};
use crate::common::{self, until};
use crate::stack::infinity_on;
use infinity_test_support::{get_json, post_json};

use std::time::Duration;

use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::ThreadStore;
use serde_json::{json, Value};

const SCRIPT: &str = r#"
rules:
  - when: "(?m)^paint$"
    reply:
      tool_calls: [{name: pick_color, args: {for: "the fence"}}]
  - when: "(?m)^name it$"
    reply:
      tool_calls: [{name: set_title, args: {title: "Tides"}}]
  - when: "(?m)^nap$"
    reply:
      tool_calls: [{name: sleep, args: {seconds: 1}}]
  - when: "-> (.*)$"
    reply: {text: "got: $1"}
  - reply: {text: "ok"}
"#;

const AGENT: &str = "name: tester\nmodel: script:script.yaml\n\
client_tools:\n  - name: pick_color\n    description: Asks the user for a color.\n    \
input_schema: {type: object, properties: {for: {type: string}}, required: [for]}\n\
approvals:\n  - {tools: [set_title], deadline: 3s, default: approve}\n  - {tools: [sleep]}\n";

/// What a stream opened without a position sends before it follows the thread: up to and with
/// its `attached` (10 s at most).
async fn snapshot(url: &str) -> String {
    let mut response = reqwest::get(url).await.unwrap();
    assert_eq!(response.status(), 200, "{url}");
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !text.contains("event: attached") {
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .unwrap_or_else(|_| panic!("no `attached` from {url}: {text}"))
            .unwrap()
            .unwrap_or_else(|| panic!("{url} ended before `attached`: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

/// The one client tool's call `record` waits for.
fn client_call(record: &ThreadRecord) -> Option<String> {
    let calls: Vec<_> = record
        .pending_calls
        .iter()
        .filter(|p| p.client.is_some())
        .collect();
    match calls.as_slice() {
        [call] => Some(call.call_id.to_string()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_stack_client_tools_and_approvals_wait_for_their_answers() {
    let Some(stack) = stack_with(AGENT, SCRIPT, &[]).await else {
        return;
    };
    let store = infinity_aws::store::DynamoThreadStore::new(
        stack.clients.dynamodb.clone(),
        stack.env["INFINITY_TABLE"].clone(),
        Duration::from_secs(86_400),
    );
    let record = |id: &'static str| {
        let store = &store;
        async move {
            store
                .load_record(&ThreadId::new(id).unwrap())
                .await
                .unwrap()
        }
    };

    // A client tool's call: on the output queue for the application, answered once by
    // `infinity tool-result`; a second answer is refused, naming why.
    infinity_on(&stack, &["send", "--thread", "ct1", "paint"]).await;
    eventually("the client call", || async {
        record("ct1")
            .await
            .is_some_and(|r| client_call(&r).is_some())
    })
    .await;
    let call = client_call(&record("ct1").await.unwrap()).unwrap();
    let tail = infinity_on(
        &stack,
        &["tail", "--thread", "ct1", "--json", "--idle-exit", "4"],
    )
    .await;
    let shown: Vec<Value> = tail
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &Value| e["type"] == "client_tool_call")
        .collect();
    assert_eq!(shown.len(), 1, "{tail}");
    assert_eq!(
        (&shown[0]["call_id"], &shown[0]["args"]),
        (&json!(call), &json!({"for": "the fence"}))
    );
    infinity_on(&stack, &["tool-result", "ct1", &call, "teal"]).await;
    eventually("the model's answer to the result", || async {
        infinity_on(&stack, &["thread", "show", "ct1"])
            .await
            .contains("got: teal")
    })
    .await;
    let env = stack.env.clone();
    let again = {
        let call = call.clone();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_infinity"))
                .envs(env)
                .args(["tool-result", "ct1", &call, "red"])
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    assert!(!again.status.success());
    let why = String::from_utf8_lossy(&again.stderr);
    assert!(
        why.contains(&format!("call {call} has its result already"))
            && why.contains("a result of 4 bytes"),
        "{why}"
    );

    // The same through the API (`serve --aws`, the API function's router): the call is in the
    // stream's snapshot, the answer is taken once.
    let (_server, api) = serve_aws(&stack).await;
    let (status, _) = post_json(
        &format!("{api}/threads/ct1/messages"),
        &json!({"text": "paint"}),
    )
    .await;
    assert_eq!(status, 202);
    eventually("the second client call", || async {
        record("ct1")
            .await
            .is_some_and(|r| client_call(&r).is_some())
    })
    .await;
    let second = client_call(&record("ct1").await.unwrap()).unwrap();
    let snapshot = snapshot(&format!("{api}/threads/ct1/events")).await;
    assert!(
        snapshot.contains("event: client_tool_call") && snapshot.contains(&second),
        "{snapshot}"
    );
    let answer = format!("{api}/threads/ct1/tool_results/{second}");
    let (status, _) = post_json(&answer, &json!({"text": "blue"})).await;
    assert_eq!(status, 202);
    eventually("the answer to the second result", || async {
        infinity_on(&stack, &["thread", "show", "ct1"])
            .await
            .contains("got: blue")
    })
    .await;
    let (status, body) = post_json(&answer, &json!({"text": "green"})).await;
    assert_eq!(status, 409, "{body}");

    // An approval with a deadline and `default: approve`: nobody answers, the stack's timer
    // does, and the call runs.
    infinity_on(&stack, &["send", "--thread", "ap1", "name it"]).await;
    eventually("the approval question", || async {
        record("ap1")
            .await
            .is_some_and(|r| r.open_choices.len() == 1)
    })
    .await;
    assert!(record("ap1").await.unwrap().title.is_none());
    eventually("the deadline's approval to run the call", || async {
        record("ap1")
            .await
            .is_some_and(|r| r.title.as_deref() == Some("Tides") && r.open_choices.is_empty())
    })
    .await;

    // An approval answered by `infinity choose`: declined, the call does not run.
    infinity_on(&stack, &["send", "--thread", "ap2", "nap"]).await;
    eventually("the second approval question", || async {
        record("ap2")
            .await
            .is_some_and(|r| r.open_choices.len() == 1)
    })
    .await;
    let asked = record("ap2").await.unwrap().open_choices[0]
        .call_id
        .to_string();
    infinity_on(&stack, &["choose", "ap2", &asked, "1"]).await;
    eventually("the declined call's result", || async {
        infinity_on(&stack, &["thread", "show", "ap2"])
            .await
            .contains("the person asked did not approve")
    })
    .await;
    let ap2 = record("ap2").await.unwrap();
    assert!(ap2.pending_calls.is_empty() && ap2.open_choices.is_empty());
    // Choosing again says the question was answered, with what, and fails.
    let env = stack.env.clone();
    let again = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_infinity"))
            .envs(env)
            .args(["choose", "ap2", &asked, "0"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!again.status.success());
    let why = String::from_utf8_lossy(&again.stderr);
    assert!(
        why.contains("\"Do not run it\" (option 1); this answer was not taken"),
        "{why}"
    );
}

/// The history entries of `thread` (on `api`) that mention `text`.
async fn entries_with(api: &str, thread: &str, text: &str) -> usize {
    let (_, history) = get_json(&format!("{api}/threads/{thread}/history")).await;
    history.as_array().map_or(0, |entries| {
        entries
            .iter()
            .filter(|e| e.to_string().contains(text))
            .count()
    })
}

/// `kill -9` of `serve --store` while a client tool's call and two approvals wait: after the
/// restart the call is in the stream's snapshot for its application, an approval's deadline
/// that passed meanwhile answers it, and the answers acknowledged before a second kill (before
/// their slices committed) are each taken once after the third start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_calls_and_approvals_outlive_a_kill_and_their_answers_count_once() {
    let dir = tempfile::tempdir().unwrap();
    let agent = "name: tester\nmodel: script:script.yaml\n\
client_tools:\n  - {name: pick_color, description: Asks the user for a color., deadline: 1h}\n\
approvals:\n  - {tools: [set_title], deadline: 8s, default: approve}\n  - {tools: [sleep]}\n";
    std::fs::write(dir.path().join("agent.yaml"), agent).unwrap();
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    let args = ["--agent", "agent.yaml", "--store", "state"];
    let message = |api: &str, thread: &str, text: &str| {
        let url = format!("{api}/threads/{thread}/messages");
        let body = json!({ "text": text });
        async move { post_json(&url, &body).await.0 }
    };
    let record = |api: &str, thread: &str| {
        let url = format!("{api}/threads/{thread}");
        async move { get_json(&url).await.1 }
    };

    // First life: a client call, an approval with a deadline, one without; then killed.
    let (server, api) = common::serve_in(dir.path(), &args).await;
    assert_eq!(message(&api, "c", "paint").await, 202);
    assert_eq!(message(&api, "a", "name it").await, 202);
    assert_eq!(message(&api, "b", "nap").await, 202);
    until("all three waiting", || async {
        record(&api, "c").await["pending_calls"][0]["client"].is_object()
            && record(&api, "a").await["open_choices"][0].is_object()
            && record(&api, "b").await["open_choices"][0].is_object()
    })
    .await;
    let call = record(&api, "c").await["pending_calls"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let asked = record(&api, "b").await["open_choices"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Its eight seconds (from when it was asked) pass while nothing runs.
    let a = record(&api, "a").await;
    assert!(
        a["title"].is_null(),
        "the deadline came before the kill: {a}"
    );
    let asked_at: jiff::Timestamp = a["updated_at"].as_str().unwrap().parse().unwrap();
    drop(server); // SIGKILL
    let due = asked_at + jiff::SignedDuration::from_millis(8_500);
    let left = jiff::Timestamp::now().duration_until(due);
    tokio::time::sleep(left.try_into().unwrap_or_default()).await;

    // Second life: the model takes ten minutes. The application finds the call it owes in the
    // stream's snapshot, and answers it; a person approves the nap; both are acknowledged, and
    // the process is killed again before any of their slices commits.
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - reply: {text: \"too late\", delay_ms: 600000}\n",
    )
    .unwrap();
    let (server, api) = common::serve_in(dir.path(), &args).await;
    let shown = snapshot(&format!("{api}/threads/c/events")).await;
    assert!(
        shown.contains("event: client_tool_call")
            && shown.contains(&call)
            && shown.contains(r#""args":{"for":"the fence"}"#),
        "{shown}"
    );
    let answer = format!("{api}/threads/c/tool_results/{call}");
    assert_eq!(post_json(&answer, &json!({"text": "teal"})).await.0, 202);
    let choice = format!("{api}/threads/b/choices/{asked}");
    assert_eq!(post_json(&choice, &json!({"selected": 0})).await.0, 200);
    // The deadline that passed while the process was down fired at the start: its slice runs
    // the call and then asks the slow model, so nothing of it commits either.
    assert!(record(&api, "a").await["title"].is_null());
    drop(server); // SIGKILL

    // Third life: a quick model again; each answer is taken once, the deadline's too.
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    let (_server, api) = common::serve_in(dir.path(), &args).await;
    until("every answer's turn", || async {
        entries_with(&api, "c", "got: teal").await == 1
            && record(&api, "a").await["title"] == "Tides"
            && entries_with(&api, "b", r#""text":"Slept until"#).await == 1
    })
    .await;
    assert_eq!(entries_with(&api, "c", "\"text\":\"teal\"").await, 1);
    let late = format!("{api}/threads/c/tool_results/{call}");
    assert_eq!(post_json(&late, &json!({"text": "red"})).await.0, 409);
    for thread in ["a", "b", "c"] {
        let now = record(&api, thread).await;
        let none = |field: &str| now[field].as_array().is_none_or(Vec::is_empty);
        assert!(
            none("pending_calls") && none("open_choices"),
            "{thread}: {now}"
        );
    }
    until("every acknowledged input to be let go", || async {
        std::fs::read(dir.path().join("state/inbox.jsonl")).is_ok_and(|b| b.is_empty())
    })
    .await;
}

/// How many of the thread's tool results contain `text`.
async fn results_with(api: &str, thread: &str, text: &str) -> usize {
    let (_, history) = get_json(&format!("{api}/threads/{thread}/history")).await;
    history.as_array().map_or(0, |entries| {
        entries
            .iter()
            .filter(|e| e["item"]["type"] == "tool_result")
            .filter(|e| e["item"]["text"].as_str().is_some_and(|t| t.contains(text)))
            .count()
    })
}

/// The first answer to a call stands, whoever sends it and however close together: a person's
/// "Run it" and "Do not run it" sent at the same moment (three times over), a decline half a
/// second after an approval, two applications posting a client tool's result at once. Exactly
/// one answer gets its 2xx, every other a 409 naming the one that stands, and the tool runs if
/// and only if that one says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_answer_stands_and_every_other_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent.yaml"), AGENT).unwrap();
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    let (_server, api) = common::serve_in(dir.path(), &["--agent", "agent.yaml"]).await;
    let question = |thread: String| {
        let url = format!("{api}/threads/{thread}");
        async move {
            let call = |record: Value| {
                record["open_choices"][0]["call_id"]
                    .as_str()
                    .map(str::to_owned)
            };
            until("the approval's question", || async {
                call(get_json(&url).await.1).is_some()
            })
            .await;
            call(get_json(&url).await.1).unwrap()
        }
    };
    for round in 0..3 {
        let thread = format!("nap{round}");
        let url = format!("{api}/threads/{thread}/messages");
        assert_eq!(post_json(&url, &json!({"text": "nap"})).await.0, 202);
        let call = question(thread.clone()).await;
        let choose = format!("{api}/threads/{thread}/choices/{call}");
        let (first, second) = (json!({"selected": 0}), json!({"selected": 1}));
        let (run, decline) = tokio::join!(post_json(&choose, &first), post_json(&choose, &second));
        let (won, lost) = match (run.0, decline.0) {
            (200, 409) => (0, &decline.1),
            (409, 200) => (1, &run.1),
            other => {
                panic!("round {round}: one answer must stand, got {other:?}: {run:?} {decline:?}")
            }
        };
        let stands = ["\"Run it\" (option 0)", "\"Do not run it\" (option 1)"][won];
        let why = lost["error"].as_str().unwrap_or_default();
        assert!(why.contains(stands), "round {round}: {why}");
        // The tool ran if and only if the answer that stands said so.
        until("the answer's turn", || async {
            results_with(&api, &thread, "Slept until").await
                + results_with(&api, &thread, "Not run").await
                == 1
        })
        .await;
        assert_eq!(
            results_with(&api, &thread, "Slept until").await,
            usize::from(won == 0),
            "round {round}: {stands} stood"
        );
        // Answering again, the same or another way, is refused the same way.
        for selected in [0, 1] {
            let (status, body) = post_json(&choose, &json!({"selected": selected})).await;
            assert_eq!(status, 409, "{body}");
            assert!(
                body["error"].as_str().unwrap_or_default().contains(stands),
                "{body}"
            );
        }
    }

    // A decline sent half a second after an approval is refused; the call runs.
    let url = format!("{api}/threads/late/messages");
    assert_eq!(post_json(&url, &json!({"text": "nap"})).await.0, 202);
    let call = question("late".to_owned()).await;
    let choose = format!("{api}/threads/late/choices/{call}");
    assert_eq!(post_json(&choose, &json!({"selected": 0})).await.0, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, body) = post_json(&choose, &json!({"selected": 1})).await;
    assert_eq!(status, 409, "{body}");
    until("the approved nap", || async {
        results_with(&api, "late", "Slept until").await == 1
    })
    .await;
    assert_eq!(results_with(&api, "late", "Not run").await, 0);

    // Two results for one client tool's call at once: one is taken, the other told so.
    let url = format!("{api}/threads/paint/messages");
    assert_eq!(post_json(&url, &json!({"text": "paint"})).await.0, 202);
    let waiting = || async {
        let (_, record) = get_json(&format!("{api}/threads/paint")).await;
        serde_json::from_value::<ThreadRecord>(record)
            .ok()
            .as_ref()
            .and_then(client_call)
    };
    until("the client tool's call", || async {
        waiting().await.is_some()
    })
    .await;
    let results = format!(
        "{api}/threads/paint/tool_results/{}",
        waiting().await.unwrap()
    );
    let (first, second) = (json!({"text": "teal"}), json!({"text": "crimson red"}));
    let (teal, red) = tokio::join!(post_json(&results, &first), post_json(&results, &second));
    let (winner, refusal) = match (teal.0, red.0) {
        (202, 409) => ("teal", &red.1),
        (409, 202) => ("crimson red", &teal.1),
        other => panic!("one result must be taken, got {other:?}: {teal:?} {red:?}"),
    };
    let why = refusal["error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("a result of {} bytes", winner.len())),
        "{why}"
    );
    until("the result's turn", || async {
        entries_with(&api, "paint", &format!("got: {winner}")).await == 1
    })
    .await;
    assert_eq!(entries_with(&api, "paint", "got: ").await, 1);
}
