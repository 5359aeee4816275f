//! `infinity serve`, run as a user runs it: messages in, records and history out, an event
//! stream that replays a thread's views and open questions on attach, and a tool server's
//! `user_choice` question answered over HTTP, end to end with a hand-written tool server.

use crate::common;

use common::{free_port, until, Server};
use infinity_test_support::{get_json, post_json};

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

/// A tool server whose `pick` tool asks the user (`user_choice`) and shows a view, then answers
/// with what was picked.
#[derive(Default)]
struct Picker {
    base: Mutex<String>,
    callback: Mutex<Option<(String, String, String)>>, // url, group, id
    answers: Mutex<Vec<Value>>,
    /// Results the runtime's receiver acknowledged.
    results_delivered: Mutex<u32>,
}

/// Sends a callback to the runtime as a tool server does; fails unless it is taken.
async fn deliver(url: &str, body: Value) {
    let (status, answer) = post_json(url, &body).await;
    assert!((200..300).contains(&status), "{url}: {status} {answer}");
}

fn picker_app(picker: Arc<Picker>) -> Router {
    Router::new()
        .route(
            "/.well-known/rap-toolset",
            get(|State(p): State<Arc<Picker>>| async move {
                let base = p.base.lock().unwrap().clone();
                Json(
                    json!({"name": "picker", "endpoint": format!("{base}/invoke"), "tools": [
                    {"name": "pick", "description": "Asks the user to pick a colour.",
                     "inputSchema": {"type": "object", "additionalProperties": false}}]}),
                )
            }),
        )
        .route(
            "/invoke",
            post(
                |State(p): State<Arc<Picker>>, Json(body): Json<Value>| async move {
                    let url = body["callback_url"].as_str().unwrap().to_owned();
                    let group = body["group_id"].as_str().unwrap().to_owned();
                    let id = body["id"].as_str().unwrap().to_owned();
                    *p.callback.lock().unwrap() = Some((url.clone(), group.clone(), id.clone()));
                    let base = p.base.lock().unwrap().clone();
                    tokio::spawn(async move {
                        deliver(
                            &url,
                            json!({"type": "view_update", "group_id": group,
                        "view_type": "palette", "content": {"colours": 2}}),
                        )
                        .await;
                        deliver(
                            &url,
                            json!({"type": "user_choice", "group_id": group, "id": id,
                        "prompt": "Which colour?", "choices": ["red", "blue"], "default": 0,
                        "response_url": format!("{base}/answer")}),
                        )
                        .await;
                    });
                    "ok"
                },
            ),
        )
        .route(
            "/answer",
            post(
                |State(p): State<Arc<Picker>>, Json(body): Json<Value>| async move {
                    p.answers.lock().unwrap().push(body.clone());
                    let (url, group, id) = p.callback.lock().unwrap().clone().unwrap();
                    let colour = ["red", "blue"][body["selected"].as_u64().unwrap() as usize];
                    tokio::spawn(async move {
                        deliver(
                            &url,
                            json!({"type": "tool_result", "group_id": group, "id": id,
                        "text": format!("picked {colour}")}),
                        )
                        .await;
                        *p.results_delivered.lock().unwrap() += 1;
                    });
                    "ok"
                },
            ),
        )
        .route("/close_thread", post(|| async { "ok" }))
        .route("/cancel_tool_call", post(|| async { "ok" }))
        .with_state(picker)
}

/// The picker tool server, running, and a folder with an agent file (`agent.yaml`) that uses it
/// and a script: "pick" calls `pick`, a result "picked X" is answered "you picked X".
async fn picker_agent() -> (Arc<Picker>, tempfile::TempDir) {
    let picker = Arc::new(Picker::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    *picker.base.lock().unwrap() = format!("http://{}", listener.local_addr().unwrap());
    let app = picker_app(Arc::clone(&picker));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - when: \"^pick$\"\n    reply:\n      tool_calls: [{name: pick, args: {}}]\n  - when: \"picked (\\\\w+)\"\n    reply: {text: \"you picked $1\"}\n  - reply: {text: \"ok\"}\n",
    )
    .unwrap();
    let base = picker.base.lock().unwrap().clone();
    std::fs::write(
        dir.path().join("agent.yaml"),
        format!("name: painter\nmodel: script:script.yaml\ntool_servers: [{base}]\n"),
    )
    .unwrap();
    (picker, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_streams_events_and_answers_a_tool_servers_question() {
    let (picker, dir) = picker_agent().await;
    let port = free_port();
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args(["serve", "--agent"])
            .arg(dir.path().join("agent.yaml"))
            .args(["--port", &port.to_string()])
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let api = format!("http://127.0.0.1:{port}");
    until("the server to start", || async {
        reqwest::get(format!("{api}/health")).await.is_ok()
    })
    .await;

    // The internal tools listing is the same document as `infinity tools internal --json`.
    let (status, listing) = get_json(&format!("{api}/tools/internal")).await;
    assert_eq!(status, 200);
    let cli = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(["tools", "internal", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        listing,
        serde_json::from_slice::<Value>(&cli.stdout).unwrap()
    );

    // Bad input is named.
    let http = reqwest::Client::new();
    let bad = http
        .post(format!("{api}/threads/no spaces/messages"))
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    assert_eq!(get_json(&format!("{api}/threads/nobody")).await.0, 404);

    let sent = http
        .post(format!("{api}/threads/s1/messages"))
        .json(&json!({"text": "pick"}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status().as_u16(), 202);
    until("the question and the view", || async {
        let (_, record) = get_json(&format!("{api}/threads/s1")).await;
        record["open_choices"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
            && record["views"]["palette"]["colours"] == 2
    })
    .await;

    // A client that attaches now gets the view and the open question first.
    let mut stream = http
        .get(format!("{api}/threads/s1/events"))
        .send()
        .await
        .unwrap();
    let mut seen = String::new();
    while !(seen.contains("event: view_updated") && seen.contains("event: choice_requested")) {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.chunk())
            .await
            .expect("the replay")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(
        seen.contains("Which colour?") && seen.contains("\"colours\":2"),
        "{seen}"
    );

    let (_, record) = get_json(&format!("{api}/threads/s1")).await;
    let call = record["open_choices"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out_of_range = http
        .post(format!("{api}/threads/s1/choices/{call}"))
        .json(&json!({"selected": 5}))
        .send()
        .await
        .unwrap();
    assert_eq!(out_of_range.status().as_u16(), 400);
    // An answer is one choice or none, never both, and names no other field.
    for (body, status) in [
        (json!({"selected": 1, "dismiss": true}), 400),
        (json!({"selected": 1, "extra": 2}), 422),
    ] {
        let refused = http
            .post(format!("{api}/threads/s1/choices/{call}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status().as_u16(), status, "{body}");
    }
    assert!(picker.answers.lock().unwrap().is_empty());
    let answered: Value = http
        .post(format!("{api}/threads/s1/choices/{call}"))
        .json(&json!({"selected": 1}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answered["choice"], "blue");
    assert_eq!(
        picker.answers.lock().unwrap().clone(),
        [json!({"id": call, "selected": 1})]
    );
    // The live stream carries the rest: the result, and the model's answer.
    while !seen.contains("you picked blue") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.chunk())
            .await
            .expect("live events")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    let (_, record) = get_json(&format!("{api}/threads/s1")).await;
    assert_eq!(record["open_choices"], Value::Null, "{record}");
    let (_, history) = get_json(&format!("{api}/threads/s1/history")).await;
    assert!(history.to_string().contains("picked blue"), "{history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_answers_a_tool_servers_question_with_choose() {
    use std::io::{BufRead, BufReader, Write};
    let (picker, dir) = picker_agent().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(["chat", "--agent"])
        .arg(dir.path().join("agent.yaml"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let wait_for = |needle: &str| -> Vec<String> {
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::time::Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
                let done = line.contains(needle);
                seen.push(line);
                if done {
                    return seen;
                }
            }
        }
        panic!("no line with `{needle}` in {seen:#?}");
    };
    writeln!(stdin, "pick").unwrap();
    let lines = wait_for("choice for call");
    let question = lines.last().unwrap();
    assert!(
        question.contains("Which colour?") && question.contains("1) blue"),
        "{question}"
    );
    writeln!(stdin, "/choose 7").unwrap(); // out of range: refused, nothing sent
    writeln!(stdin, "/choose 1").unwrap();
    wait_for("you picked blue");
    writeln!(stdin, "/quit").unwrap();
    let _ = child.wait();
    assert_eq!(picker.answers.lock().unwrap().len(), 1);
    assert_eq!(picker.answers.lock().unwrap()[0]["selected"], 1);
}

/// An agent that closes its thread on "bye" and answers anything else.
fn closing_agent() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - when: \"^bye$\"\n    reply:\n      tool_calls: [{name: close_thread, args: {thread_id: \"${thread_id}\"}}]\n  - reply: {text: \"ok\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("agent.yaml"),
        "name: closer\nmodel: script:script.yaml\n",
    )
    .unwrap();
    dir
}

fn start_serve(agent: &std::path::Path, extra: &[&str], stderr: Stdio) -> (Server, u16) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_infinity"))
        .args(["serve", "--agent"])
        .arg(agent)
        .args(["--port", &port.to_string()])
        .args(extra)
        .env_remove("INFINITY_SERVE_TOKEN")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    (Server(child), port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_what_it_must_and_says_why() {
    let dir = closing_agent();
    let (_server, port) = start_serve(&dir.path().join("agent.yaml"), &[], Stdio::null());
    let api = format!("http://127.0.0.1:{port}");
    until("the server to start", || async {
        reqwest::get(format!("{api}/health")).await.is_ok()
    })
    .await;
    let http = reqwest::Client::new();

    // The contract is served, without a token, as committed for the clients.
    let served = http
        .get(format!("{api}/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), 200);
    let served: serde_json::Value = served.json().await.unwrap();
    let committed: serde_json::Value =
        serde_json::from_str(include_str!("../../../clients/openapi.json")).unwrap();
    assert_eq!(
        served, committed,
        "GET /openapi.json is not clients/openapi.json"
    );

    let say_to = |thread: &'static str, text: &'static str| {
        let request = http
            .post(format!("{api}/threads/{thread}/messages"))
            .json(&json!({"text": text}))
            .send();
        async move { request.await.unwrap().status().as_u16() }
    };
    // A field the route does not know is named, not ignored.
    let typo = http
        .post(format!("{api}/threads/typo/messages"))
        .json(&json!({"text": "hi", "agnet": "other"}))
        .send()
        .await
        .unwrap();
    assert_eq!(typo.status(), 422);
    assert!(typo.text().await.unwrap().contains("unknown field `agnet`"));
    assert_eq!(get_json(&format!("{api}/threads/typo")).await.0, 404);
    // A message with no text is refused, for a new conversation and with an agent named; no
    // thread is made.
    for body in [
        json!({"text": " \n\t "}),
        json!({"text": "", "agent": "closer"}),
    ] {
        let blank = http
            .post(format!("{api}/threads/blank/messages"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(blank.status(), 400, "{body}");
        assert!(blank.text().await.unwrap().contains("is empty"), "{body}");
    }
    assert_eq!(get_json(&format!("{api}/threads/blank")).await.0, 404);
    // A closed thread takes no message: 409, not a silent 202.
    let say = |text: &'static str| {
        http.post(format!("{api}/threads/door/messages"))
            .json(&json!({"text": text}))
            .send()
    };
    assert_eq!(say("bye").await.unwrap().status(), 202);
    until("the thread to close", || async {
        get_json(&format!("{api}/threads/door")).await.1["status"] == "closed"
    })
    .await;
    let refused = say("hello?").await.unwrap();
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("closed"), "{body}");

    // Interrupting: a closed thread is 409, an unknown one 404.
    let interrupt = |thread: &'static str| {
        http.post(format!("{api}/threads/{thread}/interrupt"))
            .send()
    };
    assert_eq!(interrupt("door").await.unwrap().status(), 409);
    let unknown = interrupt("nobody").await.unwrap();
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(body["error"], "no thread nobody");

    // Closing: an open thread closes (202); a closed one is 409, an unknown one 404, a body
    // that is not `{"tree": bool}` 422.
    let close = |thread: &'static str, body: &'static str| {
        http.post(format!("{api}/threads/{thread}/close"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(say_to("open-door", "hi").await, 202);
    until("the thread to exist", || async {
        get_json(&format!("{api}/threads/open-door")).await.0 == 200
    })
    .await;
    assert_eq!(
        close("open-door", "{\"tree\": 1}").await.unwrap().status(),
        422
    );
    assert_eq!(close("open-door", "").await.unwrap().status(), 202);
    until("the closed thread", || async {
        get_json(&format!("{api}/threads/open-door")).await.1["status"] == "closed"
    })
    .await;
    assert_eq!(
        close("open-door", "{\"tree\": true}")
            .await
            .unwrap()
            .status(),
        409
    );
    assert_eq!(close("nobody", "").await.unwrap().status(), 404);

    // A conversation's budget: set on an open thread (202, to its root), refused when it
    // sets nothing or a zero (400) or is not a budget's shape (422), for a closed thread (409)
    // and an unknown one (404).
    let budget = |thread: &'static str, body: &'static str| {
        http.post(format!("{api}/threads/{thread}/budget"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(say_to("spender", "hi").await, 202);
    until("the spender", || async {
        get_json(&format!("{api}/threads/spender")).await.0 == 200
    })
    .await;
    for (body, status, why) in [
        ("{}", 400, "a budget needs dollars"),
        ("{\"usd\": 0}", 400, "a budget of zero"),
        ("{\"usd\": -2}", 422, "not an amount of dollars"),
        ("{\"dollars\": 2}", 422, "unknown field `dollars`"),
    ] {
        let refused = budget("spender", body).await.unwrap();
        assert_eq!(refused.status(), status, "{body}");
        let text = refused.text().await.unwrap();
        assert!(text.contains(why), "{body}: {text}");
    }
    let set = budget("spender", "{\"usd\": 2.5, \"tokens\": 9000}")
        .await
        .unwrap();
    assert_eq!(set.status(), 202);
    let set: Value = set.json().await.unwrap();
    assert_eq!(set["thread_id"], "spender");
    until("the budget on the record", || async {
        let record = get_json(&format!("{api}/threads/spender")).await.1;
        record["conversation_budget_set"] == json!({"usd": 2.5, "tokens": 9000})
            && record["conversation_budget"] == json!({"usd": 2.5, "tokens": 9000})
    })
    .await;
    assert_eq!(budget("door", "{\"usd\": 1}").await.unwrap().status(), 409);
    assert_eq!(
        budget("nobody", "{\"usd\": 1}").await.unwrap().status(),
        404
    );

    // A body over the limit is 413. (On a client of its own: the server closes the connection
    // without reading the rest of the body, and a pooled connection must not carry the next
    // request into that.)
    let big = "x".repeat(3 * 1024 * 1024);
    let too_big = reqwest::Client::new()
        .post(format!("{api}/threads/door2/messages"))
        .json(&json!({"text": big}))
        .send()
        .await
        .unwrap();
    assert_eq!(too_big.status(), 413);

    // Another site's page, directly or by DNS rebinding, gets nothing.
    let rebound = http
        .get(format!("{api}/threads"))
        .header("Host", format!("evil.example:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);
    let cross_site = http
        .post(format!("{api}/threads/door3/messages"))
        .header("Origin", "http://evil.example")
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    let same_origin = http
        .get(format!("{api}/threads"))
        .header("Origin", format!("http://127.0.0.1:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(same_origin.status(), 200);
    let page: serde_json::Value = same_origin.json().await.unwrap();
    assert!(
        page["threads"].is_array() && page.get("next").is_some(),
        "{page}"
    );

    // A list's query that cannot be understood is refused, naming the part.
    for (query, names) in [
        ("limit=0", "`limit`"),
        ("limit=many", "`limit`"),
        ("status=sleeping", "`status`"),
        ("kind=root", "`kind`"),
        ("roots=yes", "`roots`"),
        ("updated_since=yesterday", "`updated_since`"),
        ("cursor=nowhere", "`cursor`"),
        ("stauts=open", "stauts"),
    ] {
        let refused = http
            .get(format!("{api}/threads?{query}"))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{query}");
        let text = refused.text().await.unwrap();
        assert!(text.contains(names), "{query}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_loopback_serve_requires_the_token_it_prints() {
    use std::io::BufRead;
    let dir = closing_agent();
    let (mut server, port) = start_serve(
        &dir.path().join("agent.yaml"),
        &["--host", "0.0.0.0"],
        Stdio::piped(),
    );
    let stderr = server.0.stderr.take().unwrap();
    let (token, before) = tokio::task::spawn_blocking(move || {
        let mut before = Vec::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if let Some((_, token)) = line.rsplit_once("): ") {
                return (Some(token.trim().to_owned()), before);
            }
            before.push(line);
        }
        (None, before)
    })
    .await
    .unwrap();
    let token = token.expect("the token is printed");
    // No store and no tool servers: nothing can call back, so no callback port is opened.
    assert!(
        !before.iter().any(|l| l.contains("received at")),
        "{before:#?}"
    );
    let api = format!("http://127.0.0.1:{port}");
    until("the server to start", || async {
        reqwest::get(format!("{api}/health")).await.is_ok()
    })
    .await;
    let http = reqwest::Client::new();
    let without = http.get(format!("{api}/threads")).send().await.unwrap();
    assert_eq!(without.status(), 401);
    let wrong = http
        .get(format!("{api}/threads"))
        .bearer_auth("not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let with = http
        .get(format!("{api}/threads"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(with.status(), 200);
    let by_query = http
        .get(format!("{api}/threads?access_token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_query.status(), 200);
    // ... and no conversation moves in: it would be lost at the end, and nothing receives its
    // forwarded inputs.
    let moved = http
        .post(format!("{api}/migration/import"))
        .bearer_auth(&token)
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), 409);
    assert!(moved.text().await.unwrap().contains("--store"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_creates_lists_and_deletes_a_threads_schedules() {
    let dir = closing_agent();
    let (_server, port) = start_serve(&dir.path().join("agent.yaml"), &[], Stdio::null());
    let api = format!("http://127.0.0.1:{port}");
    until("the server to start", || async {
        reqwest::get(format!("{api}/health")).await.is_ok()
    })
    .await;
    let http = reqwest::Client::new();
    http.post(format!("{api}/threads/plants/messages"))
        .json(&json!({"text": "hi"}))
        .send()
        .await
        .unwrap();
    until("the thread", || async {
        get_json(&format!("{api}/threads/plants")).await.0 == 200
    })
    .await;
    let create = |body: Value| {
        http.post(format!("{api}/threads/plants/schedules"))
            .json(&body)
            .send()
    };

    let bad = create(json!({"message": "water", "rrule": "FREQ=DAILY;BYHOUR=31"}))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let why: Value = bad.json().await.unwrap();
    assert!(
        why["error"]
            .as_str()
            .unwrap()
            .contains("BYHOUR value `31` is out of range"),
        "{why}"
    );
    // Arguments are held to the tool's schema, as a model's call is: a field it does not know,
    // or one of the wrong type, is named.
    for (body, named) in [
        (
            json!({"message": "water", "cron": "0 7 * * *", "bogus": 1}),
            "bogus",
        ),
        (json!({"message": 5, "cron": "0 7 * * *"}), "message"),
    ] {
        let refused = create(body).await.unwrap();
        assert_eq!(refused.status(), 400);
        let why: Value = refused.json().await.unwrap();
        assert!(why["error"].as_str().unwrap().contains(named), "{why}");
    }
    let long = create(json!({"message": "x".repeat(4_001), "cron": "0 7 * * *"}))
        .await
        .unwrap();
    assert_eq!(long.status(), 400);
    let why: Value = long.json().await.unwrap();
    assert!(
        why["error"]
            .as_str()
            .unwrap()
            .contains("4001 characters, more than a schedule keeps"),
        "{why}"
    );
    let ok = create(json!({"message": "water", "cron": "0 7 * * *", "timezone": "Europe/Berlin"}))
        .await
        .unwrap();
    assert_eq!(ok.status(), 202);
    let created: Value = ok.json().await.unwrap();
    let id = created["schedule_id"].as_str().unwrap().to_owned();
    assert!(
        created["text"]
            .as_str()
            .unwrap()
            .contains("07:00:00 Europe/Berlin"),
        "{created}"
    );
    until("the schedule on the thread", || async {
        let (_, list) = get_json(&format!("{api}/threads/plants/schedules")).await;
        list.as_array()
            .is_some_and(|l| l.len() == 1 && l[0]["id"] == id.as_str())
    })
    .await;

    let delete = |schedule: String| {
        http.delete(format!("{api}/threads/plants/schedules/{schedule}"))
            .send()
    };
    assert_eq!(delete("sch-nope".into()).await.unwrap().status(), 404);
    assert_eq!(delete(id.clone()).await.unwrap().status(), 202);
    until("the schedule gone", || async {
        let (_, list) = get_json(&format!("{api}/threads/plants/schedules")).await;
        list.as_array().is_some_and(Vec::is_empty)
    })
    .await;
}

/// How many of a thread's history entries mention `text` (and not `but_not`).
async fn entries_with(api: &str, thread: &str, text: &str, but_not: &str) -> usize {
    let (_, history) = get_json(&format!("{api}/threads/{thread}/history")).await;
    history
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .map(Value::to_string)
                .filter(|e| e.contains(text) && (but_not.is_empty() || !e.contains(but_not)))
                .count()
        })
        .unwrap_or(0)
}

/// Accepted means durable: every input `serve --store` acknowledged while the model was still
/// answering (a message to a new thread and to an existing one, an answer to a tool server's
/// question, the tool server's result callback, a schedule, an interrupt, a close) survives a
/// `kill -9` before any of their slices committed, and each is processed once after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inputs_acknowledged_before_a_kill_are_processed_once_after_the_restart() {
    let (picker, dir) = picker_agent().await;
    let fast = std::fs::read_to_string(dir.path().join("script.yaml")).unwrap();
    let callback_port = free_port().to_string();
    let args = [
        "--agent",
        "agent.yaml",
        "--store",
        "state",
        "--callback-port",
        &callback_port,
    ];
    let http = reqwest::Client::new();
    let post = |api: String, path: &'static str, body: Value| async move {
        post_json(&format!("{api}{path}"), &body).await.0
    };

    // First life: a thread that exists, one to close later, and a tool server's open question.
    let (server, api) = common::serve_in(dir.path(), &args).await;
    assert_eq!(
        post(
            api.clone(),
            "/threads/old/messages",
            json!({"text": "hello"})
        )
        .await,
        202
    );
    assert_eq!(
        post(
            api.clone(),
            "/threads/closing/messages",
            json!({"text": "hello"})
        )
        .await,
        202
    );
    assert_eq!(
        post(api.clone(), "/threads/p/messages", json!({"text": "pick"})).await,
        202
    );
    until("the question", || async {
        let (_, record) = get_json(&format!("{api}/threads/p")).await;
        record["open_choices"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    })
    .await;
    until("the first replies", || async {
        entries_with(&api, "old", "ok", "").await == 1
            && entries_with(&api, "closing", "ok", "").await == 1
    })
    .await;
    let (_, record) = get_json(&format!("{api}/threads/p")).await;
    let call = record["open_choices"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    drop(server);

    // Second life: the model takes ten minutes, and the process is killed while it thinks.
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - reply: {text: \"too late\", delay_ms: 600000}\n",
    )
    .unwrap();
    let (server, api) = common::serve_in(dir.path(), &args).await;
    assert_eq!(
        post(
            api.clone(),
            "/threads/new/messages",
            json!({"text": "keep me"})
        )
        .await,
        202
    );
    assert_eq!(
        post(
            api.clone(),
            "/threads/old/messages",
            json!({"text": "again"})
        )
        .await,
        202
    );
    let schedule = json!({"message": "water", "cron": "0 7 * * *"});
    let created = http
        .post(format!("{api}/threads/old/schedules"))
        .json(&schedule)
        .send()
        .await
        .unwrap();
    assert!(
        created.status().is_success(),
        "{}",
        created.text().await.unwrap()
    );
    let choice = format!("{api}/threads/p/choices/{call}");
    let answered = http
        .post(&choice)
        .json(&json!({"selected": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status().as_u16(), 200);
    until("the tool server's result to be acknowledged", || async {
        *picker.results_delivered.lock().unwrap() == 1
    })
    .await;
    assert_eq!(
        post(api.clone(), "/threads/old/interrupt", json!({})).await,
        202
    );
    assert_eq!(
        post(api.clone(), "/threads/closing/close", json!({})).await,
        202
    );
    let (status, _) = get_json(&format!("{api}/threads/new")).await;
    assert_eq!(
        status, 404,
        "nothing of `new` may be committed before the kill"
    );
    drop(server); // SIGKILL

    // Third life: a quick model again; everything acknowledged is there, once.
    std::fs::write(dir.path().join("script.yaml"), fast).unwrap();
    let (_server, api) = common::serve_in(dir.path(), &args).await;
    until("the replayed inputs' replies", || async {
        entries_with(&api, "new", "ok", "keep me").await == 1
            && entries_with(&api, "p", "you picked blue", "").await == 1
    })
    .await;
    assert_eq!(entries_with(&api, "new", "keep me", "").await, 1);
    assert_eq!(entries_with(&api, "old", "again", "").await, 1);
    assert_eq!(entries_with(&api, "old", "hello", "").await, 1);
    assert_eq!(
        entries_with(&api, "p", "picked blue", "you picked").await,
        1
    );
    let (_, schedules) = get_json(&format!("{api}/threads/old/schedules")).await;
    assert_eq!(schedules.as_array().map(Vec::len), Some(1), "{schedules}");
    until("the closed thread", || async {
        get_json(&format!("{api}/threads/closing")).await.1["status"] == "closed"
    })
    .await;
    until("every replayed input to be let go", || async {
        std::fs::read(dir.path().join("state/inbox.jsonl")).is_ok_and(|b| b.is_empty())
    })
    .await;
}
