//! A kit to write RAP tool servers: declare tools and async handlers, get an [`axum::Router`]
//! that speaks the protocol (feature `kit`, on by default).
//!
//! The kit does the protocol's chores so a handler only does the tool's work:
//!
//! - serves the manifest at `GET /.well-known/rap-toolset`, with `endpoint` set to
//!   `{public_url}/invoke` (the server cannot guess its public URL behind a proxy, so it is
//!   given to [`ToolServer::router`]);
//! - answers `POST /invoke` with 200 at once and runs the tool's handler on a task of its own,
//!   handing it a [`Call`]. An unknown operation or unreadable arguments still get 200, then an
//!   error `tool_result`; a body that is no invocation at all (no `id`, `group_id` or usable
//!   `callback_url` to answer to) gets 400 with a plain-text reason;
//! - delivers the [`Call`]'s callbacks to the `callback_url`, retrying connection errors and
//!   5xx with exponential backoff ([`RetryPolicy`]), never a 4xx (429 included);
//! - makes sure every call ends with a callback: a handler that returns (or panics) without
//!   sending a `tool_result` gets an error one sent in its name;
//! - handles `POST /cancel_tool_call` and `POST /close_thread` (200): the matching calls see
//!   [`Call::cancelled`] resolve and can send nothing more;
//! - checks those notifications are the runtime's: when an invocation's `callback_url` carries
//!   a notification key (`nk`, as Infinity's runtime sends; one that is not 64 hex digits gets
//!   the invocation a 400), the kit keeps it for the thread while the thread has calls here, and
//!   a notification about that thread must carry a valid `X-Infinity-Signature` whose time is
//!   within 300 s of the kit's clock, or it gets 401 with the reason and changes nothing (see
//!   [`crate::signing`]). Notifications about other threads are taken as they come;
//! - serves the `response_url` of the questions a handler asks with [`Call::user_choice`]
//!   (`POST /user_choice/{token}`, a random token per question);
//! - answers `POST /tool_call_status` with `{"alive": true}` while a call's handler runs and
//!   still owes a result or subscription events, `false` otherwise (also for unknown calls).
//!
//! Calls live in memory: a restarted server forgets them, and the runtime learns it from
//! `/tool_call_status`. The kit does not authenticate invocations (nor status checks): add a
//! layer (or a proxy) in front of the router when the network is not trusted, the same that
//! the runtime's `tool_servers` auth settings satisfy (a bearer token, SigV4). Signed
//! notifications are only as trustworthy as the invocations that brought their keys.
//!
//! ```no_run
//! use infinity_rap::kit::{tool_definition, Call, CallbackError, ToolServer};
//! use serde_json::json;
//!
//! async fn echo(call: Call) -> Result<(), CallbackError> {
//!     match call.args().get("text").and_then(|text| text.as_str()) {
//!         Some(text) => call.result_text(text).await,
//!         None => call.result_error("`text` must be a string").await,
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"text": {"type": "string"}},
//!     "required": ["text"],
//! });
//! let server = ToolServer::new("echo-tools", "Says things back")
//!     .tool(tool_definition("echo", "Returns its `text` argument", schema), echo);
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8700").await?;
//! axum::serve(listener, server.router("http://127.0.0.1:8700")?).await?;
//! # Ok(())
//! # }
//! ```
//!
//! [`testing`] has a callback sink and an in-process server, to test tools over real HTTP.

mod call;
mod choice;
mod delivery;
mod routes;
pub mod testing;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

pub use infinity_retry::RetryPolicy;

/// How a server's callbacks are retried unless [`ToolServer::retry_policy`] says otherwise: six
/// attempts, waiting 0.2, 0.4, 0.8, 1.6 and 3.2 s in between (6.2 s in all).
pub const CALLBACK_RETRY: RetryPolicy = RetryPolicy::new(
    6,
    std::time::Duration::from_millis(200),
    std::time::Duration::from_secs(5),
);
pub use call::{Call, CallbackError};

use crate::wire::{Manifest, ToolDefinition, WireError};
use choice::Questions;
use delivery::{Delivery, ATTEMPT_TIMEOUT};
use routes::{BoxedHandler, Server};

/// The path of the invocation endpoint, relative to the server's public URL; the manifest's
/// `endpoint` points there.
pub const INVOKE_PATH: &str = "/invoke";

/// A RAP tool server under construction: its toolset and the handler of each tool.
///
/// Build it with [`ToolServer::new`] and [`ToolServer::tool`], then serve
/// [`ToolServer::router`].
#[derive(Clone)]
pub struct ToolServer {
    name: String,
    description: String,
    tools: Vec<(ToolDefinition, BoxedHandler)>,
    retry: RetryPolicy,
    http_client: Option<reqwest::Client>,
}

/// Why a [`ToolServer`] cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    /// The manifest would fail discovery (a bad tool name, a name twice, no tools, a public URL
    /// that is not an absolute http(s) URL): a runtime would expose none of the tools.
    #[error("the toolset is not a valid RAP manifest: {0}")]
    Manifest(#[from] WireError),
    /// The HTTP client for callbacks could not be built (TLS set-up failed).
    #[error("could not build the HTTP client for callbacks: {0}")]
    HttpClient(#[source] reqwest::Error),
}

/// What a tool's handler may return: nothing, or a `Result` whose error is reported.
///
/// When a handler returns an error before sending its `tool_result`, the kit sends the error's
/// text as an error `tool_result`; after it, the error is only logged.
pub trait HandlerOutput: Send + 'static {
    /// The failure to report, if the handler failed.
    fn into_failure(self) -> Option<String>;
}

impl HandlerOutput for () {
    fn into_failure(self) -> Option<String> {
        None
    }
}

impl<E: fmt::Display + Send + 'static> HandlerOutput for Result<(), E> {
    fn into_failure(self) -> Option<String> {
        self.err().map(|error| error.to_string())
    }
}

/// A [`ToolDefinition`] with a name, a description and an input schema (a JSON object), and no
/// annotations or display script.
pub fn tool_definition(
    name: impl Into<String>,
    description: impl Into<String>,
    input_schema: Value,
) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: description.into(),
        input_schema,
        annotations: None,
        display_script: None,
    }
}

impl ToolServer {
    /// A server for the toolset `name` (1 to 128 characters) with a description for people, and
    /// no tools yet.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        ToolServer {
            name: name.into(),
            description: description.into(),
            tools: Vec::new(),
            retry: CALLBACK_RETRY,
            http_client: None,
        }
    }

    /// Adds a tool: its definition for the manifest, and the async function that handles each of
    /// its calls on a task of its own, once the invocation was acknowledged.
    ///
    /// The handler owns the [`Call`]; the call ends when the handler returns (see [`Call`]).
    pub fn tool<H, F, O>(mut self, definition: ToolDefinition, handler: H) -> Self
    where
        H: Fn(Call) -> F + Send + Sync + 'static,
        F: Future<Output = O> + Send + 'static,
        O: HandlerOutput,
    {
        let handler: BoxedHandler = Arc::new(move |call| {
            let handling = handler(call);
            Box::pin(async move { handling.await.into_failure() })
        });
        self.tools.push((definition, handler));
        self
    }

    /// Replaces [`CALLBACK_RETRY`], the retry policy of callback delivery.
    pub fn retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sends callbacks with this client (to set timeouts, proxies, default headers such as an
    /// authorization token) instead of one with a 30 s timeout per attempt.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// The manifest the server publishes when reachable at `public_url` (its base URL, e.g.
    /// `https://tools.example.com/time`), checked as a runtime will check it.
    pub fn manifest(&self, public_url: &str) -> Result<Manifest, KitError> {
        let manifest = Manifest {
            name: self.name.clone(),
            description: Some(self.description.clone()).filter(|d| !d.is_empty()),
            endpoint: format!("{}{INVOKE_PATH}", public_url.trim_end_matches('/')),
            tools: self.tools.iter().map(|(tool, _)| tool.clone()).collect(),
            needs_migration: None,
        };
        manifest.validate()?;
        Ok(manifest)
    }

    /// The router serving the protocol for a server reachable at `public_url` (its base URL,
    /// where runtimes find `/.well-known/rap-toolset`, and answer questions).
    ///
    /// Serve it with `axum::serve(listener, router)`; mount it under a prefix with
    /// [`axum::Router::nest`] when `public_url` has a path.
    pub fn router(self, public_url: &str) -> Result<axum::Router, KitError> {
        let manifest = self.manifest(public_url)?;
        let client = match self.http_client {
            Some(client) => client,
            None => reqwest::Client::builder()
                .timeout(ATTEMPT_TIMEOUT)
                .build()
                .map_err(KitError::HttpClient)?,
        };
        let handlers: HashMap<String, BoxedHandler> = self
            .tools
            .into_iter()
            .map(|(tool, handler)| (tool.name, handler))
            .collect();
        let server = Server::new(
            manifest,
            handlers,
            Delivery::new(client, self.retry),
            Questions::new(public_url),
        );
        Ok(server.into_router())
    }
}

impl fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|(t, _)| t.name.as_str()).collect();
        f.debug_struct("ToolServer")
            .field("name", &self.name)
            .field("tools", &tools)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}
