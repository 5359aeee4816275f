//! The HTTP side of a tool server: discovery, invocations, notifications, status checks and
//! answers to questions, and the table of the calls in progress that connects them.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use tracing::Instrument;

use super::call::{Call, CallLink};
use super::choice::{Questions, USER_CHOICE_PATH};
use super::delivery::Delivery;
use super::INVOKE_PATH;
use crate::signing::{
    InvalidNotificationKey, NotificationKey, NotificationRejection, NOTIFICATION_KEY_PARAM,
    NOTIFICATION_SIGNATURE_HEADER,
};
use crate::wire::{
    parse, parse_invocation, Callback, CancelToolCall, CloseThread, Invocation, Manifest, Nullable,
    ToolCallStatusRequest, ToolCallStatusResponse, ToolResult, WireError, CANCEL_TOOL_CALL_PATH,
    CLOSE_THREAD_PATH, DISCOVERY_PATH, TOOL_CALL_STATUS_PATH,
};

/// A handler with its types erased: takes the call, returns the failure to report, if any.
pub(crate) type BoxedHandler =
    Arc<dyn Fn(Call) -> Pin<Box<dyn Future<Output = Option<String>> + Send>> + Send + Sync>;

/// Everything the routes share: the manifest, the handlers, the calls in progress and their
/// open questions.
pub(crate) struct Server {
    manifest: Manifest,
    handlers: HashMap<String, BoxedHandler>,
    delivery: Arc<Delivery>,
    questions: Arc<Questions>,
    calls: Mutex<Calls>,
}

/// The calls in progress, and the notification key of each of their threads whose runtime gave
/// one. A key lives as long as its thread has calls here: a notification about a thread with no
/// call has nothing to act on, and a new invocation brings the key again.
#[derive(Default)]
struct Calls {
    links: HashMap<CallKey, Arc<CallLink>>,
    notification_keys: HashMap<String, NotificationKey>,
}

/// A call as the runtime names it in notifications: its thread and its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct CallKey {
    thread_id: String,
    tool_call_id: String,
}

impl Calls {
    /// Adds a call unless it is already there; the thread's key, if given, replaces the one
    /// known (the runtime's latest word). False for a call already running.
    fn insert(
        &mut self,
        key: CallKey,
        link: &Arc<CallLink>,
        notification_key: Option<NotificationKey>,
    ) -> bool {
        if let Some(notification_key) = notification_key {
            self.notification_keys
                .insert(key.thread_id.clone(), notification_key);
        }
        match self.links.entry(key) {
            Entry::Vacant(slot) => {
                slot.insert(Arc::clone(link));
                true
            }
            Entry::Occupied(_) => false,
        }
    }

    /// Removes a call, and its thread's key with the thread's last call.
    fn remove(&mut self, key: &CallKey) -> Option<Arc<CallLink>> {
        let link = self.links.remove(key)?;
        if !self.links.keys().any(|k| k.thread_id == key.thread_id) {
            self.notification_keys.remove(&key.thread_id);
        }
        Some(link)
    }
}

impl Server {
    pub(crate) fn new(
        manifest: Manifest,
        handlers: HashMap<String, BoxedHandler>,
        delivery: Delivery,
        questions: Questions,
    ) -> Self {
        Server {
            manifest,
            handlers,
            delivery: Arc::new(delivery),
            questions: Arc::new(questions),
            calls: Mutex::new(Calls::default()),
        }
    }

    pub(crate) fn into_router(self) -> Router {
        Router::new()
            .route(DISCOVERY_PATH, get(manifest))
            .route(INVOKE_PATH, post(invoke))
            .route(CLOSE_THREAD_PATH, post(close_thread))
            .route(CANCEL_TOOL_CALL_PATH, post(cancel_tool_call))
            .route(TOOL_CALL_STATUS_PATH, post(tool_call_status))
            .route(
                &format!("{USER_CHOICE_PATH}/{{token}}"),
                post(user_choice_answer),
            )
            .with_state(Arc::new(self))
    }

    /// Runs an accepted invocation: the handler on a task of its own, then the kit's closing of
    /// the call. An unknown operation is answered with an error result instead.
    fn start(self: &Arc<Self>, invocation: Invocation, notification_key: Option<NotificationKey>) {
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
        let link = Arc::new(CallLink::new(
            invocation,
            Arc::clone(&self.delivery),
            Arc::clone(&self.questions),
        ));
        if !self.calls().insert(key.clone(), &link, notification_key) {
            // The runtime sent the invocation again (it did not get our first answer): the call
            // already runs, and will send its callbacks once.
            tracing::info!(parent: &span, "duplicate invocation of a running call ignored");
            return;
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
        if calls
            .links
            .get(key)
            .is_some_and(|known| Arc::ptr_eq(known, link))
        {
            calls.remove(key);
        }
    }

    /// Cancels and forgets every call `matches` selects.
    fn cancel_where(&self, matches: impl Fn(&CallKey) -> bool) -> usize {
        let cancelled: Vec<Arc<CallLink>> = {
            let mut calls = self.calls();
            let keys: Vec<CallKey> = calls
                .links
                .keys()
                .filter(|key| matches(key))
                .cloned()
                .collect();
            keys.iter().filter_map(|key| calls.remove(key)).collect()
        };
        for link in &cancelled {
            link.cancel();
        }
        cancelled.len()
    }

    /// Checks a notification about `thread_id`: signed with the thread's key when the runtime
    /// gave one, anything otherwise (a runtime that does not sign, a thread with no call here).
    fn authenticate(
        &self,
        thread_id: &str,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), NotificationRejection> {
        let Some(key) = self.calls().notification_keys.get(thread_id).cloned() else {
            return Ok(());
        };
        // A header that is not text cannot be a signature: it counts as malformed.
        let header = headers
            .get(NOTIFICATION_SIGNATURE_HEADER)
            .map(|value| value.to_str().unwrap_or_default());
        key.verify(header, body, jiff::Timestamp::now().as_second())
    }

    fn calls(&self) -> MutexGuard<'_, Calls> {
        // Every update of the table is a single insert or remove (with its thread's key): a
        // panic cannot leave it half changed.
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
    let Some(callback_url) = http_url(&invocation.callback_url) else {
        return bad_request(format!(
            "`callback_url` must be an absolute http(s) URL, got `{}`",
            invocation.callback_url
        ));
    };
    let notification_key = match notification_key(&callback_url) {
        Ok(key) => key,
        Err(error) => return bad_request(format!("`callback_url`: {error}")),
    };
    server.start(invocation, notification_key);
    StatusCode::OK.into_response()
}

/// The key of the thread's notifications, when the runtime put one in the callback URL.
fn notification_key(
    callback_url: &reqwest::Url,
) -> Result<Option<NotificationKey>, InvalidNotificationKey> {
    callback_url
        .query_pairs()
        .find(|(name, _)| name == NOTIFICATION_KEY_PARAM)
        .map(|(_, key)| NotificationKey::parse(&key))
        .transpose()
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

/// `POST /close_thread`: cancels every call of the thread. 200, unless the thread's runtime
/// signs its notifications and this one's signature does not hold (401).
async fn close_thread(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let notice = match parse::<CloseThread>(&body) {
        Ok(notice) => notice,
        Err(error) => {
            tracing::warn!(%error, "ignoring an unreadable close_thread");
            return StatusCode::OK.into_response();
        }
    };
    if let Err(rejection) = server.authenticate(&notice.thread_id, &headers, &body) {
        tracing::warn!(thread_id = ?notice.thread_id, %rejection, "close_thread refused");
        return unauthorized(&rejection);
    }
    let count = server.cancel_where(|key| key.thread_id == notice.thread_id);
    tracing::info!(thread_id = ?notice.thread_id, cancelled = count, "thread closed");
    StatusCode::OK.into_response()
}

/// `POST /cancel_tool_call`: cancels the call. 200, unless the thread's runtime signs its
/// notifications and this one's signature does not hold (401).
async fn cancel_tool_call(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let notice = match parse::<CancelToolCall>(&body) {
        Ok(notice) => notice,
        Err(error) => {
            tracing::warn!(%error, "ignoring an unreadable cancel_tool_call");
            return StatusCode::OK.into_response();
        }
    };
    if let Err(rejection) = server.authenticate(&notice.thread_id, &headers, &body) {
        tracing::warn!(
            thread_id = ?notice.thread_id, tool_call_id = ?notice.tool_call_id, %rejection,
            "cancel_tool_call refused"
        );
        return unauthorized(&rejection);
    }
    let count = server.cancel_where(|key| {
        key.thread_id == notice.thread_id && key.tool_call_id == notice.tool_call_id
    });
    tracing::info!(
        thread_id = ?notice.thread_id, tool_call_id = ?notice.tool_call_id,
        cancelled = count, "tool call cancelled"
    );
    StatusCode::OK.into_response()
}

/// `POST /user_choice/{token}`: the runtime's answer to a call's question.
async fn user_choice_answer(
    State(server): State<Arc<Server>>,
    Path(token): Path<String>,
    body: Bytes,
) -> Response {
    match server.questions.answer(&token, &body) {
        Ok(()) => StatusCode::OK.into_response(),
        Err(rejection) => {
            tracing::info!(%rejection, "user_choice answer refused");
            (rejection.status(), rejection.to_string()).into_response()
        }
    }
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
    let link = server.calls().links.get(&key).cloned();
    let alive = link.is_some_and(|link| link.is_alive());
    Json(ToolCallStatusResponse { alive }).into_response()
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, message).into_response()
}

fn unauthorized(rejection: &NotificationRejection) -> Response {
    (StatusCode::UNAUTHORIZED, rejection.to_string()).into_response()
}

/// The URL, if the kit can POST callbacks to it.
fn http_url(url: &str) -> Option<reqwest::Url> {
    reqwest::Url::parse(url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
}

/// True for a URL the kit can POST callbacks to.
fn is_http_url(url: &str) -> bool {
    http_url(url).is_some()
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
