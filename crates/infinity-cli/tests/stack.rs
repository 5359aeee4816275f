//! The API and the web app over a stack's threads, on the local stack (the emulators, started
//! here through `infra/local/`, as the `infinity-aws` local-stack tests do): `infinity serve --aws`
//! as a real process beside the real agent handler, and the same binary as the stack's API
//! function, started the way Lambda starts it (no arguments, the runtime API to poll) against a
//! small stand-in of Lambda's runtime API.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod browser;
mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::routing::{get, post};
use infinity_agent_core::agent::AgentFile;
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{build_agent, AgentHandler};
use infinity_aws::local::LocalRunner;
use serde_json::{json, Value};

use common::{free_port, Server};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Starts the emulators once per test process (installing them first if needed).
fn emulators() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| infinity_aws::local::start_emulators(&repo()).unwrap());
}

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

/// A fresh stack (queues and a table), its agent handler polling it in this process, and the
/// environment a process needs to reach it.
struct Stack {
    env: HashMap<String, String>,
    clients: Clients,
    _dir: tempfile::TempDir,
}

async fn stack() -> Stack {
    emulators();
    let prefix = format!("cli{}", &uuid_like()[..10]);
    let mut env = infinity_aws::local::bootstrap_stack(&repo(), &prefix).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    let agent_path = dir.path().join("agent.yaml");
    std::fs::write(
        &agent_path,
        "name: tester\nmodel: script:script.yaml\ninternal_tools: {artifact: true}\n",
    )
    .unwrap();
    env.insert("INFINITY_DEFAULT_AGENT".into(), String::new());
    env.insert(
        "INFINITY_AGENT_FILE".into(),
        agent_path.to_string_lossy().into_owned(),
    );
    let config = AwsConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
    let endpoint = |service: &str| env[&format!("AWS_ENDPOINT_URL_{service}")].clone();
    assert!(
        config.artifact_bucket.is_some(),
        "the stack has a bucket for pages"
    );
    let clients = Clients::for_endpoints(
        &env["AWS_REGION"],
        &endpoint("DYNAMODB"),
        &endpoint("SQS"),
        &endpoint("SCHEDULER"),
    )
    .await;
    let agent = build_agent(&AgentFile::load(&agent_path).unwrap())
        .await
        .unwrap();
    let handler = Arc::new(AgentHandler::new(&clients, &config, agent));
    let runner = LocalRunner::new(clients.clone(), config, handler);
    tokio::spawn(runner.run());
    Stack {
        env,
        clients,
        _dir: dir,
    }
}

fn uuid_like() -> String {
    infinity_agent_core::ids::EffectId::generate().as_str()[3..].to_owned()
}

/// Waits (up to 60 s: the emulators are slow) until `check` holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn post_json(url: &str, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// `infinity serve --aws` on the stack, on loopback (no token).
async fn serve_aws(stack: &Stack) -> (Server, String) {
    let port = free_port();
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_infinity"))
            .args(["serve", "--aws", "--port", &port.to_string()])
            .envs(&stack.env)
            .env_remove("INFINITY_SERVE_TOKEN")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let api = format!("http://127.0.0.1:{port}");
    eventually("the server to start", || async {
        reqwest::get(format!("{api}/health")).await.is_ok()
    })
    .await;
    (server, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_a_stack_in_a_real_browser() {
    let Some(chromium) = browser::chromium_or_skip() else {
        return;
    };
    let stack = stack().await;
    let (_server, api) = serve_aws(&stack).await;
    let browser = browser::Browser::launch(&chromium, 1280, 900).await;
    browser.open(&format!("{api}/")).await;
    browser
        .wait_for(
            "the placeholder of an empty stack",
            "!document.getElementById('no-threads').hidden",
        )
        .await;
    browser.click("#new-conversation", None).await;
    browser
        .wait_for(
            "the new conversation, connected",
            "document.activeElement.id === 'message' \
             && document.getElementById('connection').textContent === 'live'",
        )
        .await;
    browser.type_text("hello").await;
    browser.press("Enter", false).await;
    // The deployment's answer comes through the output queue to the page.
    browser
        .wait_for(
            "the stack's answer",
            "[...document.querySelectorAll('.msg.assistant:not(.streaming)')]\
               .some((m) => m.innerText.includes('stack says hi'))",
        )
        .await;
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
    let stack = stack().await;
    let (server, api) = serve_aws(&stack).await;

    // The page is there, and the agents: the deployment's default, by its file's name.
    let page = reqwest::get(format!("{api}/")).await.unwrap();
    assert_eq!(page.status(), 200);
    let (status, agents) = common::get_json(&format!("{api}/agents")).await;
    assert_eq!((status, &agents["default"]), (200, &json!("tester")));

    // Live events first, then a message: the answer streams in from the output queue.
    let mut events = reqwest::get(format!("{api}/threads/web1/events"))
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    let (status, queued) = post_json(
        &format!("{api}/threads/web1/messages"),
        json!({"text": "hello"}),
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
    let (status, history) = common::get_json(&format!("{api}/threads/web1/history")).await;
    assert_eq!(status, 200);
    let texts: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["item"]["text"].as_str())
        .collect();
    assert_eq!(texts, ["hello", "stack says hi"], "{history}");

    // A recurring schedule, set by a person through the stack, lands on the thread's record.
    let (status, made) = post_json(
        &format!("{api}/threads/web1/schedules"),
        json!({"message": "water", "cron": "0 7 * * *", "timezone": "Europe/Berlin"}),
    )
    .await;
    assert_eq!(status, 202, "{made}");
    let schedule = made["schedule_id"].as_str().unwrap().to_owned();
    eventually("the schedule on the record", || async {
        let (_, list) = common::get_json(&format!("{api}/threads/web1/schedules")).await;
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
            400,
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
        let (status, answer) = post_json(&format!("{api}{path}"), body).await;
        assert_eq!(status, want, "{path}: {answer}");
        assert!(
            answer["error"].as_str().unwrap_or_default().contains(says),
            "{path}: {answer}"
        );
    }
    let (_, record) = common::get_json(&format!("{api}/threads/web9")).await;
    assert!(
        record["error"].as_str().is_some(),
        "no thread was made: {record}"
    );

    // Closing goes through the queue too; then the thread takes no more messages.
    let (status, _) = post_json(&format!("{api}/threads/web1/close"), json!({})).await;
    assert_eq!(status, 202);
    eventually("the thread to close", || async {
        let (_, record) = common::get_json(&format!("{api}/threads/web1")).await;
        record["status"] == "closed"
    })
    .await;
    let (status, answer) = post_json(
        &format!("{api}/threads/web1/messages"),
        json!({"text": "more"}),
    )
    .await;
    assert_eq!(status, 409, "{answer}");
    drop(server);
    drop(stack.clients);
}

/// The requests a stand-in of Lambda's runtime API hands out, and the answers it got back.
#[derive(Default)]
struct Invocations {
    waiting: Vec<(String, Value)>,
    answers: HashMap<String, Value>,
}

type Runtime = Arc<Mutex<Invocations>>;

/// `GET /2018-06-01/runtime/invocation/next`: the next event (polled until there is one).
async fn next(State(runtime): State<Runtime>) -> axum::response::Response {
    use axum::response::IntoResponse;
    loop {
        let next = runtime.lock().unwrap().waiting.pop();
        if let Some((id, event)) = next {
            let deadline = (jiff::Timestamp::now().as_millisecond() + 30_000).to_string();
            return (
                [
                    ("lambda-runtime-aws-request-id", id.as_str()),
                    ("lambda-runtime-deadline-ms", deadline.as_str()),
                    (
                        "lambda-runtime-invoked-function-arn",
                        "arn:aws:lambda:us-east-1:123456789012:function:api",
                    ),
                ],
                axum::Json(event),
            )
                .into_response();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn response(
    State(runtime): State<Runtime>,
    UrlPath(id): UrlPath<String>,
    body: axum::body::Bytes,
) -> &'static str {
    let answer = serde_json::from_slice(&body).unwrap_or(Value::Null);
    runtime.lock().unwrap().answers.insert(id, answer);
    "ok"
}

/// Hands `event` to the function as invocation `id` and waits for its answer.
async fn ask(runtime: Runtime, id: String, event: Value) -> Value {
    runtime
        .lock()
        .unwrap()
        .waiting
        .insert(0, (id.clone(), event));
    for _ in 0..600 {
        if let Some(answer) = runtime.lock().unwrap().answers.get(&id) {
            return answer.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the function did not answer {id}");
}

/// A Function URL event (payload format 2.0) for `method path`.
fn url_event(method: &str, path: &str, query: &str, headers: Value, body: Option<&str>) -> Value {
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "queryStringParameters": {},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.lambda-url.us-east-1.on.aws",
            "domainPrefix": "api",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": "127.0.0.1", "userAgent": "test"},
            "requestId": "r",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Dec/2026:00:00:00 +0000",
            "timeEpoch": 0
        },
        "body": body,
        "isBase64Encoded": false
    })
}

/// The `infinity` binary started as the stack's API function, under a stand-in of Lambda's
/// runtime API, with its token in an SSM parameter on the emulator.
struct ApiFunction {
    runtime: Runtime,
    _process: Server,
}

impl ApiFunction {
    async fn start(stack: &Stack) -> ApiFunction {
        // The token, where the template keeps it (an SSM parameter), on the emulator.
        let parameter = format!("/{}/api-token", uuid_like());
        let sqs = &stack.env["AWS_ENDPOINT_URL_SQS"];
        let put = Command::new(repo().join(".venv/bin/python"))
        .args([
            "-c",
            "import boto3,sys; boto3.client('ssm', endpoint_url=sys.argv[1], region_name='us-east-1', \
             aws_access_key_id='test', aws_secret_access_key='test').put_parameter(Name=sys.argv[2], \
             Value='s3cret-token', Type='SecureString')",
            sqs,
            &parameter,
        ])
        .output()
        .unwrap();
        assert!(
            put.status.success(),
            "{}",
            String::from_utf8_lossy(&put.stderr)
        );

        let runtime = Runtime::default();
        let app = axum::Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(response),
            )
            .with_state(Arc::clone(&runtime));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let runtime_api = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        // Started as Lambda starts it: no arguments.
        let process = Server(
            Command::new(env!("CARGO_BIN_EXE_infinity"))
                .envs(&stack.env)
                .env("AWS_ENDPOINT_URL_SSM", sqs)
                .env("AWS_LAMBDA_RUNTIME_API", &runtime_api)
                .env("AWS_LAMBDA_FUNCTION_NAME", "api")
                .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
                .env("AWS_LAMBDA_LOG_STREAM_NAME", "s")
                .env("AWS_LAMBDA_LOG_GROUP_NAME", "g")
                .env("INFINITY_API_TOKEN_PARAMETER", &parameter)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        ApiFunction {
            runtime,
            _process: process,
        }
    }
}

/// Serves HTTP by handing each request to the function as a Function URL event (what AWS does in
/// front of a Function URL), so a browser can use it.
async fn function_url(runtime: Runtime) -> String {
    use axum::response::IntoResponse;
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (runtime, counter) = (Arc::clone(&runtime), Arc::clone(&counter));
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 10 << 20).await.unwrap();
            let headers: serde_json::Map<String, Value> = parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), json!(v.to_str().unwrap_or_default())))
                .collect();
            let text = String::from_utf8_lossy(&body).into_owned();
            let event = url_event(
                parts.method.as_str(),
                parts.uri.path(),
                parts.uri.query().unwrap_or_default(),
                Value::Object(headers),
                (!body.is_empty()).then_some(text.as_str()),
            );
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let answer = ask(runtime, format!("web{n}"), event).await;
            let mut response = axum::http::Response::builder()
                .status(answer["statusCode"].as_u64().unwrap_or(500) as u16);
            for (name, value) in answer["headers"].as_object().into_iter().flatten() {
                response = response.header(name, value.as_str().unwrap_or_default());
            }
            let text = answer["body"].as_str().unwrap_or_default();
            let bytes = if answer["isBase64Encoded"] == true {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap()
            } else {
                text.as_bytes().to_vec()
            };
            response
                .body(axum::body::Body::from(bytes))
                .unwrap()
                .into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_uses_the_web_app_through_the_api_function_in_a_real_browser() {
    let Some(chromium) = browser::chromium_or_skip() else {
        return;
    };
    let stack = stack().await;
    let function = ApiFunction::start(&stack).await;
    let url = function_url(Arc::clone(&function.runtime)).await;
    let browser = browser::Browser::launch(&chromium, 1280, 900).await;
    browser
        .open(&format!("{url}/?access_token=s3cret-token"))
        .await;
    browser
        .wait_for(
            "the placeholder of an empty stack",
            "!document.getElementById('no-threads').hidden",
        )
        .await;
    browser.click("#new-conversation", None).await;
    browser
        .wait_for(
            "the new conversation, following the thread by reconnecting",
            "document.activeElement.id === 'message' \
             && document.getElementById('connection').textContent === 'live (refreshes every 2 s)'",
        )
        .await;
    browser.type_text("hello").await;
    browser.press("Enter", false).await;
    // No stream from a Lambda: the page reconnects every 2 s and reloads the history.
    browser
        .wait_for(
            "the stack's answer",
            "[...document.querySelectorAll('.msg.assistant:not(.streaming)')]\
               .some((m) => m.innerText.includes('stack says hi'))",
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
    let stack = stack().await;
    let function = ApiFunction::start(&stack).await;
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
    assert!(
        events["body"].as_str().unwrap().contains("retry: 2000"),
        "{events}"
    );
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
    let stack = stack().await;
    let (_server, api) = serve_aws(&stack).await;
    let (status, _) = post_json(
        &format!("{api}/threads/pages1/messages"),
        json!({"text": "publish"}),
    )
    .await;
    assert_eq!(status, 202);
    let mut id = String::new();
    for _ in 0..300 {
        let (_, record) = common::get_json(&format!("{api}/threads/pages1")).await;
        if let Some(found) = record["artifacts"][0]["id"].as_str() {
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
        json!({"text": "nice", "author": "Bo"}),
    )
    .await;
    assert_eq!(status, 201, "{comment}");
    eventually("the answer under the comment", || async {
        let (_, comments) = common::get_json(&format!("{api}/a/{id}/comments")).await;
        comments[0]["answers"][0]["text"] == "Noted: nice"
    })
    .await;
}
