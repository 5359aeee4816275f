//! The HTTP side of a tool server: discovery, invocations, notifications and status checks, and
//! the table of the calls in progress that connects them.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use tracing::Instrument;

use super::call::{Call, CallLink};
use super::delivery::Delivery;
use super::INVOKE_PATH;
use crate::wire::{
    parse, parse_invocation, Callback, CancelToolCall, CloseThread, Invocation, Manifest, Nullable,
    ToolCallStatusRequest, ToolCallStatusResponse, ToolResult, WireError, CANCEL_TOOL_CALL_PATH,
    CLOSE_THREAD_PATH, DISCOVERY_PATH, TOOL_CALL_STATUS_PATH,
};

/// A handler with its types erased: takes the call, returns the failure to report, if any.
pub(crate) type BoxedHandler =
    Arc<dyn Fn(Call) -> Pin<Box<dyn Future<Output = Option<String>> + Send>> + Send + Sync>;

/// Everything the routes share: the manifest, the handlers and the calls in progress.
pub(crate) struct Server {
    manifest: Manifest,
    handlers: HashMap<String, BoxedHandler>,
    delivery: Arc<Delivery>,
    calls: Mutex<HashMap<CallKey, Arc<CallLink>>>,
}

/// A call as the runtime names it in notifications: its thread and its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CallKey {
    thread_id: String,
    tool_call_id: String,
}

impl Server {
    pub(crate) fn new(
        manifest: Manifest,
        handlers: HashMap<String, BoxedHandler>,
        delivery: Delivery,
    ) -> Self {
        Server {
            manifest,
            handlers,
            delivery: Arc::new(delivery),
            calls: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn into_router(self) -> Router {
        Router::new()
            .route(DISCOVERY_PATH, get(manifest))
            .route(INVOKE_PATH, post(invoke))
            .route(CLOSE_THREAD_PATH, post(close_thread))
            .route(CANCEL_TOOL_CALL_PATH, post(cancel_tool_call))
            .route(TOOL_CALL_STATUS_PATH, post(tool_call_status))
            .with_state(Arc::new(self))
    }

    /// Runs an accepted invocation: the handler on a task of its own, then the kit's closing of
    /// the call. An unknown operation is answered with an error result instead.
    fn start(self: &Arc<Self>, invocation: Invocation) {
        let Some(handler) = self.handlers.get(&invocation.operation).cloned() else {
            let offered: Vec<&str> = self
                .manifest
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            let text = format!(
                "Error: unknown operation `{}`; this toolset offers: {}",
                invocation.operation,
                offered.join(", ")
            );
            self.answer_detached(&invocation, text);
            return;
        };
        let key = CallKey {
            thread_id: invocation.group_id.clone(),
            tool_call_id: invocation.id.clone(),
        };
        let span = tracing::info_span!(
            "rap_call",
            thread_id = ?invocation.group_id,
            tool_call_id = ?invocation.id,
            tool = %invocation.operation,
        );
        let link = Arc::new(CallLink::new(invocation, Arc::clone(&self.delivery)));
        match self.calls().entry(key.clone()) {
            Entry::Vacant(slot) => {
                slot.insert(Arc::clone(&link));
            }
            Entry::Occupied(_) => {
                // The runtime sent the invocation again (it did not get our first answer): the
                // call already runs, and will send its callbacks once.
                tracing::info!(parent: &span, "duplicate invocation of a running call ignored");
                return;
            }
        }
        let server = Arc::clone(self);
        let call = Call::new(Arc::clone(&link));
        // Even building the handler's future happens after the acknowledgement, on its task.
        let handling = async move { handler(call).await }.instrument(span.clone());
        tokio::spawn(
            async move {
                let failure = match tokio::spawn(handling).await {
                    Ok(failure) => failure,
                    Err(error) => {
                        tracing::error!(%error, "the tool's handler panicked");
                        Some(format!(
                            "the tool `{}` failed unexpectedly",
                            link.invocation().operation
                        ))
                    }
                };
                link.finish(failure).await;
                server.forget(&key, &link);
            }
            .instrument(span),
        );
    }

    /// Sends an error `tool_result` for an invocation of an operation the toolset does not have,
    /// on a task of its own.
    fn answer_detached(&self, invocation: &Invocation, text: String) {
        self.send_error_result(
            invocation.callback_url.clone(),
            invocation.group_id.clone(),
            invocation.id.clone(),
            invocation.call_id.clone(),
            text,
        );
    }

    fn send_error_result(
        &self,
        callback_url: String,
        group_id: String,
        id: String,
        call_id: Nullable<String>,
        text: String,
    ) {
        let delivery = Arc::clone(&self.delivery);
        tracing::info!(thread_id = ?group_id, tool_call_id = ?id, %text, "invocation refused");
        let result = Callback::ToolResult(ToolResult {
            group_id,
            id,
            call_id,
            text: Some(text),
            content: None,
            display_as: None,
            subscription: None,
        });
        tokio::spawn(async move {
            if let Err(error) = delivery.deliver(&callback_url, &result).await {
                tracing::warn!(%error, "could not send the error result of a refused invocation");
            }
        });
    }

    /// Removes the call from the table, unless the key now belongs to another link.
    fn forget(&self, key: &CallKey, link: &Arc<CallLink>) {
        let mut calls = self.calls();
        if calls.get(key).is_some_and(|known| Arc::ptr_eq(known, link)) {
            calls.remove(key);
        }
    }

    /// Cancels and forgets every call `matches` selects.
    fn cancel_where(&self, matches: impl Fn(&CallKey) -> bool) -> usize {
        let cancelled: Vec<Arc<CallLink>> = {
            let mut calls = self.calls();
            let keys: Vec<CallKey> = calls.keys().filter(|key| matches(key)).cloned().collect();
            keys.iter().filter_map(|key| calls.remove(key)).collect()
        };
        for link in &cancelled {
            link.cancel();
        }
        cancelled.len()
    }

    fn calls(&self) -> MutexGuard<'_, HashMap<CallKey, Arc<CallLink>>> {
        // Every update of the table is a single insert or remove: a panic cannot leave it half
        // changed.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `GET /.well-known/rap-toolset`.
async fn manifest(State(server): State<Arc<Server>>) -> Json<Manifest> {
    Json(server.manifest.clone())
}

/// `POST /invoke`: 200 at once for anything the kit can answer with a callback, 400 otherwise.
async fn invoke(State(server): State<Arc<Server>>, body: Bytes) -> Response {
    let invocation = match parse_invocation(&body) {
        Ok(invocation) => invocation,
        Err(error) => return refuse_malformed(&server, &body, &error),
    };
    if !is_http_url(&invocation.callback_url) {
        return bad_request(format!(
            "`callback_url` must be an absolute http(s) URL, got `{}`",
            invocation.callback_url
        ));
    }
    server.start(invocation);
    StatusCode::OK.into_response()
}

/// An invocation that did not parse: if it still says where and for which call to answer (only
/// its `arguments` or `operation` are wrong), accept it and answer with an error result, as the
/// spec asks; otherwise it cannot be answered at all and gets a 400.
fn refuse_malformed(server: &Server, body: &[u8], error: &WireError) -> Response {
    /// The fields needed to answer an invocation.
    #[derive(Deserialize)]
    struct ReplyAddress {
        id: String,
        group_id: String,
        callback_url: String,
        #[serde(default)]
        call_id: Nullable<String>,
    }

    match serde_json::from_slice::<ReplyAddress>(body) {
        Ok(address) if is_http_url(&address.callback_url) => {
            server.send_error_result(
                address.callback_url,
                address.group_id,
                address.id,
                address.call_id,
                format!("Error: the invocation could not be read: {error}"),
            );
            StatusCode::OK.into_response()
        }
        _ => bad_request(format!("not a RAP invocation: {error}")),
    }
}

/// `POST /close_thread`: cancels every call of the thread. Always 200.
async fn close_thread(State(server): State<Arc<Server>>, body: Bytes) -> StatusCode {
    match parse::<CloseThread>(&body) {
        Ok(notice) => {
            let count = server.cancel_where(|key| key.thread_id == notice.thread_id);
            tracing::info!(thread_id = ?notice.thread_id, cancelled = count, "thread closed");
        }
        Err(error) => tracing::warn!(%error, "ignoring an unreadable close_thread"),
    }
    StatusCode::OK
}

/// `POST /cancel_tool_call`: cancels the call. Always 200.
async fn cancel_tool_call(State(server): State<Arc<Server>>, body: Bytes) -> StatusCode {
    match parse::<CancelToolCall>(&body) {
        Ok(notice) => {
            let count = server.cancel_where(|key| {
                key.thread_id == notice.thread_id && key.tool_call_id == notice.tool_call_id
            });
            tracing::info!(
                thread_id = ?notice.thread_id, tool_call_id = ?notice.tool_call_id,
                cancelled = count, "tool call cancelled"
            );
        }
        Err(error) => tracing::warn!(%error, "ignoring an unreadable cancel_tool_call"),
    }
    StatusCode::OK
}

/// `POST /tool_call_status`: whether a result or more events are still to come.
async fn tool_call_status(State(server): State<Arc<Server>>, body: Bytes) -> Response {
    let request = match parse::<ToolCallStatusRequest>(&body) {
        Ok(request) => request,
        Err(error) => return bad_request(error.to_string()),
    };
    let key = CallKey {
        thread_id: request.thread_id,
        tool_call_id: request.tool_call_id,
    };
    let link = server.calls().get(&key).cloned();
    let alive = link.is_some_and(|link| link.is_alive());
    Json(ToolCallStatusResponse { alive }).into_response()
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, message).into_response()
}

/// True for a URL the kit can POST callbacks to.
fn is_http_url(url: &str) -> bool {
    reqwest::Url::parse(url)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_go_to_http_urls_only() {
        assert!(is_http_url("http://127.0.0.1:8080/callback?token=abc"));
        assert!(is_http_url("https://agent.example.com/callback"));
        assert!(!is_http_url("/callback"));
        assert!(!is_http_url("ftp://agent.example.com/callback"));
        assert!(!is_http_url("not a url"));
    }
}
