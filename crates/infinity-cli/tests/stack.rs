//! The API and the web app over a stack's threads, on the local stack (the emulators, started
//! here through `infra/local/`, as the `infinity-aws` local-stack tests do): `infinity serve --aws`
//! as a real process beside the real agent handler, and the same binary as the stack's API
//! function, started the way Lambda starts it (no arguments, the runtime API to poll) against a
//! small stand-in of Lambda's runtime API.

use crate::aws_stack;
use crate::browser;
use crate::lambda;

use aws_stack::{eventually, serve_aws, stack_with, Stack};
use lambda::{ask, function_url, url_event, ApiFunction};

use std::sync::Arc;
use std::time::Duration;

use infinity_test_support::{get_json, post_json};
use serde_json::{json, Value};

const SCRIPT: &str = r##"
rules:
  - when: "^publish$"
    reply:
      tool_calls:
        - name: artifact_publish
          args: {title: "Stack page", format: markdown, content: "# From the stack"}
  - when: "^\\[artifact\\] .*\\((art-[0-9a-f]+), comment (cm-[0-9a-f]+)\\): ([\\s\\S]*)$"
    reply:
      tool_calls:
        - name: artifact_reply
          args: {id: "$1", comment_id: "$2", text: "Noted: $3"}
  - reply: {text: "stack says hi"}
"##;

const AGENT: &str = "name: tester\nmodel: script:script.yaml\ninternal_tools: {artifact: true}\n";

async fn stack() -> Option<Stack> {
    stack_with(AGENT, SCRIPT, &[]).await
}

/// Opens the page at `url` on an empty stack, starts a conversation (its connection saying
/// `connected`), says hello, and waits for the stack's answer.
async fn first_conversation(browser: &browser::Browser, url: &str, connected: &str) {
    browser.open(url).await;
    browser
        .wait_for(
            "the placeholder of an empty stack",
            "!document.getElementById('no-threads').hidden",
        )
        .await;
    browser.click("#new-conversation", None).await;
    browser
        .wait_for(
            &format!("the new conversation, {connected}"),
            &format!(
                "document.activeElement.id === 'message' \
                 && document.getElementById('connection').textContent === '{connected}'"
            ),
        )
        .await;
    browser.type_text("hello").await;
    browser.press("Enter", false).await;
    browser
        .wait_for(
            "the stack's answer",
            "[...document.querySelectorAll('.msg.assistant:not(.streaming)')]\
               .some((m) => m.innerText.includes('stack says hi'))",
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_a_stack_in_a_real_browser() {
    let Some(chromium) = browser::chromium_or_skip() else {
        return;
    };
    let Some(stack) = stack().await else {
        return;
    };
    let (_server, api) = serve_aws(&stack).await;
    let browser = browser::Browser::launch(&chromium, 1280, 900).await;
    // The deployment's answer comes through the output queue to the page.
    first_conversation(&browser, &format!("{api}/"), "live").await;
    browser
        .wait_for(
            "the conversation in the list",
            "document.getElementById('thread-list').innerText.length > 0",
        )
        .await;
    browser
        .screenshot(&browser::screenshot_dir(), "10-stack")
        .await;
    let problems = browser.problems();
    assert!(problems.is_empty(), "console problems: {problems:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_aws_serves_a_stacks_threads_live() {
    let Some(stack) = stack().await else {
        return;
    };
    let (server, api) = serve_aws(&stack).await;

    // The page is there, and the agents: the deployment's default, by its file's name.
    let page = reqwest::get(format!("{api}/")).await.unwrap();
    assert_eq!(page.status(), 200);
    let (status, agents) = get_json(&format!("{api}/agents")).await;
    assert_eq!((status, &agents["default"]), (200, &json!("tester")));

    // Live events first, then a message: the answer streams in from the output queue.
    let mut events = reqwest::get(format!("{api}/threads/web1/events"))
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let (status, queued) = post_json(
        &format!("{api}/threads/web1/messages"),
        &json!({"text": "hello"}),
    )
    .await;
    assert_eq!(status, 202, "{queued}");
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !seen.contains("stack says hi") {
        let chunk = tokio::time::timeout_at(deadline, events.chunk())
            .await
            .unwrap_or_else(|_| panic!("no answer in the event stream; saw:\n{seen}"))
            .unwrap()
            .expect("the stream stays open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("event: assistant"), "{seen}");
    let (status, history) = get_json(&format!("{api}/threads/web1/history")).await;
    assert_eq!(status, 200);
    let texts: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["item"]["text"].as_str())
        .collect();
    assert_eq!(texts, ["hello", "stack says hi"], "{history}");
    // The live events carried their numbers; a client that saw only the first gets the rest
    // from the table (the output queue's copies are gone).
    assert!(seen.contains("id: 1\n"), "{seen}");
    let mut resumed = reqwest::Client::new()
        .get(format!("{api}/threads/web1/events"))
        .header("Last-Event-ID", "1")
        .send()
        .await
        .unwrap();
    let mut rest = String::new();
    while !rest.contains("stack says hi") {
        let chunk = tokio::time::timeout_at(deadline, resumed.chunk())
            .await
            .unwrap_or_else(|_| panic!("no resumed events; saw:\n{rest}"))
            .unwrap()
            .expect("the stream stays open");
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!rest.contains("id: 1\n"), "{rest}");
    assert!(!rest.contains("event: user_message"), "{rest}");
    assert!(rest.contains("id: 2\n"), "{rest}");
    drop(resumed);

    // A recurring schedule, set by a person through the stack, lands on the thread's record.
    let (status, made) = post_json(
        &format!("{api}/threads/web1/schedules"),
        &json!({"message": "water", "cron": "0 7 * * *", "timezone": "Europe/Berlin"}),
    )
    .await;
    assert_eq!(status, 202, "{made}");
    let schedule = made["schedule_id"].as_str().unwrap().to_owned();
    eventually("the schedule on the record", || async {
        let (_, list) = get_json(&format!("{api}/threads/web1/schedules")).await;
        list.as_array()
            .is_some_and(|l| l.len() == 1 && l[0]["id"] == schedule.as_str())
    })
    .await;

    // What the stack cannot take is refused here, naming why, and nothing is queued.
    let refusals = [
        ("/threads/nobody/close", json!({}), 404, "no thread nobody"),
        (
            "/threads/web1/agent",
            json!({"agent": "other"}),
            409,
            "runs the agent `tester`",
        ),
        (
            "/threads/web9/messages",
            json!({"text": "x", "agent": "ghost"}),
            404,
            "no agent `ghost`",
        ),
        (
            "/threads/web1/model",
            json!({"model": "nosuch:model"}),
            400,
            "nosuch",
        ),
        (
            "/threads/web1/schedules",
            json!({"message": "m", "rrule": "FREQ=DAILY;BYHOUR=31"}),
            400,
            "BYHOUR",
        ),
    ];
    for (path, body, want, says) in refusals {
        let (status, answer) = post_json(&format!("{api}{path}"), &body).await;
        assert_eq!(status, want, "{path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap_or_default().contains(says),
            "{path}: {answer}"
        );
    }
    let (_, record) = get_json(&format!("{api}/threads/web9")).await;
    assert!(
        record["error"].as_str().is_some(),
        "no thread was made: {record}"
    );

    // Closing goes through the queue too; then the thread takes no more messages.
    let (status, _) = post_json(&format!("{api}/threads/web1/close"), &json!({})).await;
    assert_eq!(status, 202);
    eventually("the thread to close", || async {
        let (_, record) = get_json(&format!("{api}/threads/web1")).await;
        record["status"] == "closed"
    })
    .await;
    let (status, answer) = post_json(
        &format!("{api}/threads/web1/messages"),
        &json!({"text": "more"}),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    drop(server);
    drop(stack.clients);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_uses_the_web_app_through_the_api_function_in_a_real_browser() {
    let Some(chromium) = browser::chromium_or_skip() else {
        return;
    };
    let Some(stack) = stack().await else {
        return;
    };
    let function = ApiFunction::start(&stack.env).await;
    let url = function_url(Arc::clone(&function.runtime)).await;
    let browser = browser::Browser::launch(&chromium, 1280, 900).await;
    // No stream from a Lambda: the page reconnects every 2 s and reloads the history.
    first_conversation(
        &browser,
        &format!("{url}/?access_token=s3cret-token"),
        "live (refreshes every 2 s)",
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let entries = browser
        .eval("[...document.querySelectorAll('#transcript > li')].length")
        .await;
    assert_eq!(entries, 2, "reconnecting duplicates nothing");
    browser
        .screenshot(&browser::screenshot_dir(), "12-api-function")
        .await;
    let problems = browser.problems();
    assert!(problems.is_empty(), "console problems: {problems:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_function_answers_function_url_requests_behind_its_token() {
    let Some(stack) = stack().await else {
        return;
    };
    let function = ApiFunction::start(&stack.env).await;
    let runtime = Arc::clone(&function.runtime);
    let ask = |id: &str, event: Value| ask(Arc::clone(&runtime), id.to_owned(), event);
    let host = json!({"host": "api.lambda-url.us-east-1.on.aws"});
    let with_token = json!({"host": "api.lambda-url.us-east-1.on.aws",
                            "authorization": "Bearer s3cret-token",
                            "content-type": "application/json"});

    // Without the token: refused; the page itself needs none.
    let refused = ask("1", url_event("GET", "/threads", "", host.clone(), None)).await;
    assert_eq!(refused["statusCode"], 401, "{refused}");
    let page = ask("2", url_event("GET", "/", "", host.clone(), None)).await;
    assert_eq!(page["statusCode"], 200, "{page}");
    assert!(page["body"].as_str().unwrap().contains("<html"), "{page}");
    // The API's document, with no token, as committed for the clients.
    let document = ask(
        "2b",
        url_event("GET", "/openapi.json", "", host.clone(), None),
    )
    .await;
    assert_eq!(document["statusCode"], 200, "{document}");
    let served: Value = serde_json::from_str(document["body"].as_str().unwrap()).unwrap();
    let committed: Value =
        serde_json::from_str(include_str!("../../../clients/openapi.json")).unwrap();
    assert!(
        served == committed,
        "the API function's /openapi.json is not clients/openapi.json"
    );

    // With it: a message goes on the stack's queue and the agent handler answers it.
    let sent = ask(
        "3",
        url_event(
            "POST",
            "/threads/lambda1/messages",
            "",
            with_token.clone(),
            Some(r#"{"text": "hello"}"#),
        ),
    )
    .await;
    assert_eq!(sent["statusCode"], 202, "{sent}");
    let mut answered = false;
    for n in 0..300 {
        let event = url_event(
            "GET",
            "/threads/lambda1/history",
            "",
            with_token.clone(),
            None,
        );
        let answer = ask(&format!("history{n}"), event).await;
        if answer["body"]
            .as_str()
            .unwrap_or_default()
            .contains("stack says hi")
        {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(answered, "no answer in the thread's history");
    // The event stream (the token in the query, as EventSource sends it) sends what is open and
    // asks the page to come back, as a Lambda answers whole.
    let events = ask(
        "events",
        url_event(
            "GET",
            "/threads/lambda1/events",
            "access_token=s3cret-token",
            host.clone(),
            None,
        ),
    )
    .await;
    assert_eq!(events["statusCode"], 200, "{events}");
    let body = events["body"].as_str().unwrap();
    assert!(body.contains("retry: 2000"), "{events}");
    // It says where the thread stands; from the start, every kept event comes, numbered.
    assert!(body.contains("event: attached"), "{body}");
    let from_start = ask(
        "events-from-start",
        url_event(
            "GET",
            "/threads/lambda1/events",
            "after=0&access_token=s3cret-token",
            host.clone(),
            None,
        ),
    )
    .await;
    let body = from_start["body"].as_str().unwrap();
    let ids: Vec<u64> = body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|id| id.parse().unwrap())
        .collect();
    assert!(ids.len() >= 2, "{body}");
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "{body}");
    assert!(
        body.contains("event: user_message") && body.contains("stack says hi"),
        "{body}"
    );
    // The page's next request (`Last-Event-ID`, as EventSource sends it) gets only what is new:
    // nothing yet.
    let mut resuming = host.clone();
    resuming["last-event-id"] = json!(ids.last().unwrap().to_string());
    let again = ask(
        "events-again",
        url_event(
            "GET",
            "/threads/lambda1/events",
            "access_token=s3cret-token",
            resuming,
            None,
        ),
    )
    .await;
    let body = again["body"].as_str().unwrap();
    assert!(!body.contains("id: "), "{body}");
    assert!(body.contains("event: reconnect"), "{body}");
    // A malformed body is a clear 400, not a crash of the function.
    let bad = ask(
        "bad",
        url_event(
            "POST",
            "/threads/lambda1/messages",
            "",
            with_token,
            Some("{not json"),
        ),
    )
    .await;
    assert_eq!(bad["statusCode"], 400, "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_publishes_pages_people_comment_on() {
    let Some(stack) = stack().await else {
        return;
    };
    let (_server, api) = serve_aws(&stack).await;
    let (status, _) = post_json(
        &format!("{api}/threads/pages1/messages"),
        &json!({"text": "publish"}),
    )
    .await;
    assert_eq!(status, 202);
    let mut id = String::new();
    for _ in 0..300 {
        let (_, record) = get_json(&format!("{api}/threads/pages1")).await;
        if let Some(found) = record["category_notes"]["artifact"][0]["id"].as_str() {
            id = found.to_owned();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!id.is_empty(), "the thread published no page");
    // Stored in the stack's bucket by the agent handler, served here.
    eventually("the page in the bucket", || async {
        reqwest::get(format!("{api}/a/{id}"))
            .await
            .unwrap()
            .status()
            == 200
    })
    .await;
    let shown = reqwest::get(format!("{api}/a/{id}/open/v1/page"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(shown.contains("<h1>From the stack</h1>"), "{shown}");
    // A comment goes on the stack's queue to the thread, whose answer lands in the bucket.
    let (status, comment) = post_json(
        &format!("{api}/a/{id}/comments"),
        &json!({"text": "nice", "author": "Bo"}),
    )
    .await;
    assert_eq!(status, 201, "{comment}");
    eventually("the answer under the comment", || async {
        let (_, comments) = get_json(&format!("{api}/a/{id}/comments")).await;
        comments[0]["answers"][0]["text"] == "Noted: nice"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_for_one_thread_leaves_the_others_events_and_drops_copies() {
    let Some(stack) = stack().await else {
        return;
    };
    let queue = stack.env["INFINITY_OUTPUT_QUEUE_URL"].clone();
    let sqs = stack.clients.sqs.clone();
    let event = |id: &str, thread: &str, text: &str| {
        json!({"id": id, "thread_id": thread, "at": "2026-01-01T00:00:00Z",
               "type": "assistant_text", "text": text})
        .to_string()
    };
    // One event of each thread, and a copy of ours (the same effect published again).
    for body in [
        event("fx-mine-1", "mine", "for me"),
        event("fx-theirs-1", "theirs", "for them"),
        event("fx-mine-1", "mine", "for me"),
    ] {
        sqs.send_message()
            .queue_url(&queue)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let stdout = infinity_on(
        &stack,
        &["tail", "--thread", "mine", "--json", "--idle-exit", "4"],
    )
    .await;
    let shown: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(shown.len(), 1, "{stdout}");
    assert_eq!(
        (&shown[0]["id"], &shown[0]["text"]),
        (&json!("fx-mine-1"), &json!("for me"))
    );
    // The other thread's event is still there for its own reader.
    let mut left = Vec::new();
    for _ in 0..5 {
        let got = sqs
            .receive_message()
            .queue_url(&queue)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        left.extend(
            got.messages()
                .iter()
                .filter_map(|m| m.body().map(str::to_owned)),
        );
        if !left.is_empty() {
            break;
        }
    }
    assert_eq!(left.len(), 1, "{left:#?}");
    assert!(left[0].contains("for them"), "{left:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_show_labels_a_notice_as_a_notice_and_an_error_as_an_error() {
    use infinity_agent_core::commit::Commit;
    use infinity_agent_core::history::{HistoryEntry, Item};
    use infinity_agent_core::ids::ThreadId;
    use infinity_agent_core::state::ThreadRecord;
    use infinity_agent_core::store::ThreadStore;
    let Some(stack) = stack().await else {
        return;
    };
    let thread = ThreadId::new("noticed").unwrap();
    let now = jiff::Timestamp::now();
    let mut record = ThreadRecord::new(thread.clone(), "tester", None, now);
    record.version = 1;
    let entries: Vec<HistoryEntry> = [
        ("A person created a schedule sch-1.", false),
        ("The model failed for good.", true),
    ]
    .into_iter()
    .enumerate()
    .map(|(seq, (text, is_error))| HistoryEntry {
        seq: seq as u64,
        at: now,
        input_id: None,
        item: Item::Notice {
            text: text.to_owned(),
            is_error,
        },
    })
    .collect();
    record.history_len = entries.len() as u64;
    let store = infinity_aws::store::DynamoThreadStore::new(
        stack.clients.dynamodb.clone(),
        stack.env["INFINITY_TABLE"].clone(),
        Duration::from_secs(86_400),
    );
    store
        .commit(&Commit {
            thread_id: thread.clone(),
            expected_version: None,
            record,
            new_entries: entries,
            processed_inputs: Vec::new(),
            effects: Vec::new(),
            events: Vec::new(),
        })
        .await
        .unwrap();
    let stdout = infinity_on(&stack, &["thread", "show", "noticed"]).await;
    assert!(
        stdout.contains("notice: A person created a schedule sch-1."),
        "{stdout}"
    );
    assert!(!stdout.contains("ERROR: A person"), "{stdout}");
    assert!(
        stdout.contains("ERROR: The model failed for good."),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_on_a_stack_stops_at_its_budget_until_a_person_raises_it() {
    use infinity_agent_core::ids::ThreadId;
    use infinity_agent_core::store::ThreadStore;
    // A dollar a token, and a dollar to spend: the first answer spends it.
    let agent = "name: tester\nmodel: script:script.yaml\n\
                 prices: {input: 1000000, output: 1000000}\n\
                 limits: {conversation_budget_usd: 1}\n";
    let Some(stack) = stack_with(agent, SCRIPT, &[]).await else {
        return;
    };
    let store = infinity_aws::store::DynamoThreadStore::new(
        stack.clients.dynamodb.clone(),
        stack.env["INFINITY_TABLE"].clone(),
        Duration::from_secs(86_400),
    );
    let thread = ThreadId::new("budget1").unwrap();
    let record = || async { store.load_record(&thread).await.unwrap() };
    infinity_on(&stack, &["send", "--thread", "budget1", "hello there"]).await;
    eventually("the first answer", || async {
        record().await.is_some_and(|r| r.usage.completions == 1)
    })
    .await;
    // The next message finds the conversation stopped: it is kept, not answered.
    infinity_on(&stack, &["send", "--thread", "budget1", "hello again"]).await;
    eventually("the stop", || async {
        record()
            .await
            .is_some_and(|r| r.suspended.as_ref().is_some_and(|s| s.budget))
    })
    .await;
    let stopped = record().await.unwrap();
    assert_eq!(stopped.usage.completions, 1);
    // What it cost, shown: a dollar a token.
    let tokens = stopped.usage.tokens();
    assert!(tokens >= 1);
    let spent = format!("${tokens}.00");
    let shown = infinity_on(&stack, &["thread", "show", "budget1"]).await;
    assert!(
        shown.contains(&format!(
            "conversation: 1 completions, {tokens} tokens, {spent}; budget $1.00 (the agent's)"
        )),
        "{shown}"
    );
    assert!(
        shown.contains(&format!(
            "Stopped: this conversation has spent {spent} of its $1.00 budget"
        )),
        "{shown}"
    );
    // A person raises it: the kept message is answered.
    let sent = infinity_on(&stack, &["budget", "budget1", "--usd", "100"]).await;
    assert!(
        sent.contains(&format!("to conversation budget1 (spent so far: {spent}")),
        "{sent}"
    );
    eventually("the answer after the raise", || async {
        record().await.is_some_and(|r| r.usage.completions == 2)
    })
    .await;
    let after = record().await.unwrap();
    assert!(after.suspended.is_none(), "{:?}", after.suspended);
    assert_eq!(
        after.conversation.budget_set.usd.map(|usd| usd.dollars()),
        Some(100.0)
    );
    let shown = infinity_on(&stack, &["thread", "show", "budget1"]).await;
    assert!(
        shown.contains("budget $100.00 (set by a person)"),
        "{shown}"
    );
}

/// Runs `infinity ARGS` against the stack (its `INFINITY_*` variables); its stdout, once it
/// exited 0.
pub(crate) async fn infinity_on(stack: &Stack, args: &[&str]) -> String {
    let env = stack.env.clone();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_infinity"))
            .envs(env)
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A tool server whose one tool, `hold`, takes calls and never answers them: a thread that
/// calls it stays busy until it is interrupted.
async fn holding_tool_server() -> String {
    use axum::routing::{get, post};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let manifest = json!({"name": "holder", "endpoint": format!("{base}/invoke"), "tools": [
        {"name": "hold", "description": "Holds on.",
         "inputSchema": {"type": "object", "additionalProperties": false}}]});
    let app = axum::Router::new()
        .route(
            "/.well-known/rap-toolset",
            get(move || async move { axum::Json(manifest) }),
        )
        .route("/invoke", post(|| async { "ok" }))
        .route("/cancel_tool_call", post(|| async { "ok" }))
        .route("/close_thread", post(|| async { "ok" }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_stack_a_message_to_a_busy_thread_is_refused_or_queued_as_it_says() {
    use infinity_agent_core::ids::ThreadId;
    use infinity_agent_core::store::ThreadStore;
    let holder = holding_tool_server().await;
    let agent = format!(
        "name: tester\nmodel: script:script.yaml\ntool_servers: [{holder}]\nwhile_busy: reject\n"
    );
    let script = "rules:\n  - when: \"(?m)^hold$\"\n    reply:\n      tool_calls: [{name: hold, args: {}}]\n  - when: \"(?m)^say (.+)$\"\n    reply: {text: \"you said $1\"}\n  - reply: {text: \"ok\"}\n";
    let Some(stack) = stack_with(&agent, script, &[]).await else {
        return;
    };
    let store = infinity_aws::store::DynamoThreadStore::new(
        stack.clients.dynamodb.clone(),
        stack.env["INFINITY_TABLE"].clone(),
        Duration::from_secs(86_400),
    );
    let thread = ThreadId::new("busy1").unwrap();
    let record = || async { store.load_record(&thread).await.unwrap() };
    infinity_on(&stack, &["send", "--thread", "busy1", "hold"]).await;
    eventually("the held call", || async {
        record().await.is_some_and(|r| r.is_busy())
    })
    .await;
    assert_eq!(
        record().await.unwrap().while_busy,
        Some(infinity_agent_core::state::WhileBusy::Reject),
        "the agent's policy is on the record, where hosts read it"
    );
    // The agent's `reject`: refused at once, saying why.
    let env = stack.env.clone();
    let refused = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_infinity"))
            .envs(env)
            .args(["send", "--thread", "busy1", "say too soon"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        why.contains("busy") && why.contains("while_busy: reject"),
        "{why}"
    );
    // The message's own `queue`: kept on the record through the queue and the handler.
    infinity_on(
        &stack,
        &[
            "send",
            "--thread",
            "busy1",
            "--while-busy",
            "queue",
            "say after",
        ],
    )
    .await;
    eventually("the queued message", || async {
        record().await.is_some_and(|r| r.queued.len() == 1)
    })
    .await;
    // The turn ends with the interruption; the queued message is answered then.
    infinity_on(&stack, &["interrupt", "busy1"]).await;
    eventually("the queued answer", || async {
        let shown = infinity_on(&stack, &["thread", "show", "busy1"]).await;
        shown.contains("you said after")
    })
    .await;
    let shown = infinity_on(&stack, &["thread", "show", "busy1"]).await;
    assert!(!shown.contains("too soon"), "{shown}");
    assert!(record().await.unwrap().queued.is_empty());
}
