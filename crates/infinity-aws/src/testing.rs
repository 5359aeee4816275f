//! For tests of the functions' binaries: a stand-in of Lambda's runtime API, as far as a
//! function uses it (the next event, its answer), so a binary started as Lambda starts it
//! (`AWS_LAMBDA_RUNTIME_API`) can be handed events and its answers read.

#![allow(clippy::unwrap_used, clippy::panic)] // test code: a failed step should stop the test

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::routing::{get, post};
use serde_json::Value;

/// The events waiting for the function, and the answers it gave.
#[derive(Debug, Default)]
pub struct Invocations {
    waiting: Vec<(String, Value)>,
    answers: HashMap<String, Value>,
    deadline: Duration,
    arn: String,
}

/// A running stand-in of the runtime API.
pub type Runtime = Arc<Mutex<Invocations>>;

/// Starts a stand-in on a free port for the function `arn`, each invocation with `deadline` to
/// run; its address (for `AWS_LAMBDA_RUNTIME_API`) and the handle to [`ask`] through.
pub async fn start(arn: &str, deadline: Duration) -> (String, Runtime) {
    let runtime = Runtime::new(Mutex::new(Invocations {
        deadline,
        arn: arn.to_owned(),
        ..Invocations::default()
    }));
    let app = axum::Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(response),
        )
        .with_state(Arc::clone(&runtime));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (address, runtime)
}

/// `GET /2018-06-01/runtime/invocation/next`: the next event (held until there is one).
async fn next(State(runtime): State<Runtime>) -> axum::response::Response {
    use axum::response::IntoResponse;
    loop {
        let next = {
            let mut invocations = runtime.lock().unwrap();
            let deadline = invocations.deadline;
            let arn = invocations.arn.clone();
            invocations
                .waiting
                .pop()
                .map(|(id, event)| (id, event, deadline, arn))
        };
        if let Some((id, event, deadline, arn)) = next {
            let ms = i64::try_from(deadline.as_millis()).unwrap_or(i64::MAX);
            let deadline = (jiff::Timestamp::now().as_millisecond() + ms).to_string();
            return (
                [
                    ("lambda-runtime-aws-request-id", id.as_str()),
                    ("lambda-runtime-deadline-ms", deadline.as_str()),
                    ("lambda-runtime-invoked-function-arn", arn.as_str()),
                ],
                axum::Json(event),
            )
                .into_response();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `POST /2018-06-01/runtime/invocation/{id}/response`: the function's answer.
async fn response(
    State(runtime): State<Runtime>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> &'static str {
    let answer = serde_json::from_slice(&body).unwrap_or(Value::Null);
    runtime.lock().unwrap().answers.insert(id, answer);
    "ok"
}

/// Hands `event` to the function as invocation `id` and waits (up to a minute) for its answer.
pub async fn ask(runtime: Runtime, id: String, event: Value) -> Value {
    runtime
        .lock()
        .unwrap()
        .waiting
        .insert(0, (id.clone(), event));
    for _ in 0..1200 {
        if let Some(answer) = runtime.lock().unwrap().answers.get(&id) {
            return answer.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the function did not answer {id}");
}
