//! Test support for tool servers over real HTTP on the loopback interface: a [`CallbackSink`]
//! that plays the runtime's callback endpoint, and a [`LocalServer`] that runs a
//! [`ToolServer`] in-process and sends it what a runtime would.
//!
//! ```
//! use std::time::Duration;
//!
//! use infinity_rap::kit::testing::{invocation, CallbackSink, LocalServer};
//! use infinity_rap::kit::{tool_definition, Call, ToolServer};
//! use infinity_rap::wire::Callback;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = ToolServer::new("greeter", "Greets").tool(
//!     tool_definition("greet", "Says hello", json!({"type": "object"})),
//!     |call: Call| async move { call.result_text("hello").await },
//! );
//! let server = LocalServer::start(server).await?;
//! let sink = CallbackSink::start().await?;
//!
//! let status = server.invoke(&invocation("greet", json!({}), "thread_1", "call_1", sink.url())).await?;
//! assert_eq!(status, 200);
//!
//! let callbacks = sink.wait_for(1, Duration::from_secs(5)).await;
//! let Some(Callback::ToolResult(result)) = callbacks.first() else {
//!     return Err("no tool_result".into());
//! };
//! assert_eq!((result.group_id.as_str(), result.id.as_str()), ("thread_1", "call_1"));
//! assert_eq!(result.text.as_deref(), Some("hello"));
//! # Ok(())
//! # }
//! ```

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{ToolServer, INVOKE_PATH};
use crate::wire::{
    parse_callback, Callback, CancelToolCall, CloseThread, ToolCallStatusRequest,
    ToolCallStatusResponse, CANCEL_TOOL_CALL_PATH, CLOSE_THREAD_PATH, DISCOVERY_PATH,
    TOOL_CALL_STATUS_PATH,
};

/// The path the sink receives callbacks on.
const CALLBACK_PATH: &str = "/callback";

/// A runtime's callback endpoint for tests, on `127.0.0.1` and a free port: it records every
/// callback it accepts, checked with [`parse_callback`], and can be told how to answer the next
/// requests. Stops when dropped.
#[derive(Debug)]
pub struct CallbackSink {
    url: String,
    shared: Arc<SinkShared>,
    task: JoinHandle<()>,
}

#[derive(Debug, Default)]
struct SinkShared {
    state: Mutex<SinkState>,
    changed: Notify,
}

#[derive(Debug, Default)]
struct SinkState {
    /// Statuses to answer the next requests with, instead of accepting them.
    planned: VecDeque<StatusCode>,
    requests: usize,
    accepted: Vec<Callback>,
    invalid: Vec<String>,
}

impl SinkShared {
    fn state(&self) -> MutexGuard<'_, SinkState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl CallbackSink {
    /// Starts the sink on a free port of `127.0.0.1`.
    pub async fn start() -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}{CALLBACK_PATH}", listener.local_addr()?);
        let shared = Arc::new(SinkShared::default());
        let router = Router::new()
            .route(CALLBACK_PATH, post(receive))
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::error!(%error, "the callback sink stopped");
            }
        });
        Ok(CallbackSink { url, shared, task })
    }

    /// The URL to give as `callback_url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers the next request with `status` instead of accepting it (not recorded as
    /// accepted). Calls queue up: `answer_next(500); answer_next(503)` fails two requests.
    pub fn answer_next(&self, status: StatusCode) {
        self.shared.state().planned.push_back(status);
    }

    /// How many requests arrived, accepted or not.
    pub fn requests(&self) -> usize {
        self.shared.state().requests
    }

    /// The callbacks accepted so far, in order of arrival.
    pub fn accepted(&self) -> Vec<Callback> {
        self.shared.state().accepted.clone()
    }

    /// Why the requests that were not valid callbacks were refused (with 400).
    pub fn invalid(&self) -> Vec<String> {
        self.shared.state().invalid.clone()
    }

    /// Waits until `count` callbacks were accepted, or `timeout` passed; returns those accepted
    /// by then (fewer than `count` on a timeout).
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<Callback> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let accepted = self.accepted();
            if accepted.len() >= count {
                return accepted;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.accepted();
            }
        }
    }
}

impl Drop for CallbackSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(State(shared): State<Arc<SinkShared>>, body: Bytes) -> (StatusCode, String) {
    let answer = {
        let mut state = shared.state();
        state.requests += 1;
        match state.planned.pop_front() {
            Some(status) => (status, "planned failure".to_owned()),
            None => match parse_callback(&body) {
                Ok(callback) => {
                    state.accepted.push(callback);
                    (StatusCode::OK, String::new())
                }
                Err(error) => {
                    state.invalid.push(error.to_string());
                    (StatusCode::BAD_REQUEST, error.to_string())
                }
            },
        }
    };
    shared.changed.notify_waiters();
    answer
}

/// A [`ToolServer`] served in-process on `127.0.0.1` and a free port, and a client that talks
/// to it as a runtime would. Stops when dropped.
#[derive(Debug)]
pub struct LocalServer {
    base_url: String,
    client: reqwest::Client,
    task: JoinHandle<()>,
}

impl LocalServer {
    /// Serves `server` with its public URL set to where it listens.
    pub async fn start(server: ToolServer) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let router = server.router(&base_url).map_err(io::Error::other)?;
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                tracing::error!(%error, "the local tool server stopped");
            }
        });
        Ok(LocalServer {
            base_url,
            client: reqwest::Client::new(),
            task,
        })
    }

    /// The server's base URL, e.g. `http://127.0.0.1:41234`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `GET /.well-known/rap-toolset`: the manifest's body, unparsed.
    pub async fn discover(&self) -> reqwest::Result<Bytes> {
        let url = format!("{}{DISCOVERY_PATH}", self.base_url);
        self.client
            .get(url)
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await
    }

    /// POSTs `body` (an invocation, or anything else) to `/invoke`; the answer's status.
    pub async fn invoke(&self, body: &Value) -> reqwest::Result<StatusCode> {
        self.post(INVOKE_PATH, body).await
    }

    /// `POST /cancel_tool_call`; the answer's status.
    pub async fn cancel_tool_call(
        &self,
        thread_id: &str,
        tool_call_id: &str,
    ) -> reqwest::Result<StatusCode> {
        let notice = CancelToolCall {
            thread_id: thread_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        };
        self.post(CANCEL_TOOL_CALL_PATH, &notice).await
    }

    /// `POST /close_thread`; the answer's status.
    pub async fn close_thread(&self, thread_id: &str) -> reqwest::Result<StatusCode> {
        let notice = CloseThread {
            thread_id: thread_id.to_owned(),
        };
        self.post(CLOSE_THREAD_PATH, &notice).await
    }

    /// `POST /tool_call_status`: the `alive` of a 200 answer, an error for any other.
    pub async fn tool_call_status(
        &self,
        thread_id: &str,
        tool_call_id: &str,
    ) -> reqwest::Result<bool> {
        let request = ToolCallStatusRequest {
            thread_id: thread_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
        };
        let url = format!("{}{TOOL_CALL_STATUS_PATH}", self.base_url);
        let response = self.client.post(url).json(&request).send().await?;
        let status: ToolCallStatusResponse = response.error_for_status()?.json().await?;
        Ok(status.alive)
    }

    async fn post(&self, path: &str, body: &impl Serialize) -> reqwest::Result<StatusCode> {
        let url = format!("{}{path}", self.base_url);
        Ok(self.client.post(url).json(body).send().await?.status())
    }
}

impl Drop for LocalServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The JSON of an invocation of `operation` with `arguments` (any JSON, so tests can send bad
/// ones) for the call `tool_call_id` of the thread `thread_id`, answering to `callback_url`.
pub fn invocation(
    operation: &str,
    arguments: Value,
    thread_id: &str,
    tool_call_id: &str,
    callback_url: &str,
) -> Value {
    json!({
        "operation": operation,
        "arguments": arguments,
        "id": tool_call_id,
        "callback_url": callback_url,
        "group_id": thread_id,
    })
}
