//! The callback receiver: an axum router that checks a callback's signed URL and body and turns
//! it into an input on the thread's queue.
//!
//! `POST /rap/callback/{thread}/{call}?exp=..&sig=..` answers:
//! - 401 when the URL is unsigned or expired, 403 when its signature does not match or the body
//!   is for another thread or call: nothing reaches a thread;
//! - 400 when the body is not a valid RAP callback (the reason in the body), 413 when too large;
//! - 503 when the input queue cannot take it (the tool server retries);
//! - 200 once the input is queued. Whether the thread and call exist is the thread's business:
//!   an input for an unknown thread, or a result for a call that is not pending, is logged and
//!   discarded when the thread's slice runs (the spec's routing rule), so duplicates are safe.
//!
//! `POST /rap/forward/{thread}?sig=..` takes an input that the host a conversation moved away
//! from forwards ([`handle_forward`], see docs/migration.md).
//!
//! The embedded runtime serves it on a local port; on AWS a Lambda behind a Function URL runs
//! the same [`handle`] and [`handle_forward`] functions.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use infinity_agent_core::history::Image;
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::{CallId, InputId, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use sha2::{Digest, Sha256};

use infinity_rap::signing::CallbackSigner;
use infinity_rap::wire::{self, Callback, ContentItem};

/// The largest callback body accepted (images arrive inline, base64).
pub const MAX_CALLBACK_BYTES: usize = 8 * 1024 * 1024;

/// The query of a callback URL.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct Signature {
    /// Expiry, unix seconds.
    pub exp: Option<String>,
    /// The HMAC, hex.
    pub sig: Option<String>,
}

/// What the receiver answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// A short plain-text reason.
    pub body: String,
}

impl Reply {
    fn new(status: u16, body: impl Into<String>) -> Self {
        Self {
            status,
            body: body.into(),
        }
    }
}

/// The header a tool may send to name one delivery of a callback, so that its retries of that
/// delivery are recognised (`event_id` in the body does the same).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// Checks one callback and queues its input. `thread` and `call` are the URL's path segments;
/// `idempotency_key` is the request's `Idempotency-Key` header, if any.
#[allow(clippy::too_many_arguments)]
pub async fn handle(
    signer: &CallbackSigner,
    queue: &dyn InputSender,
    thread: &str,
    call: &str,
    signature: &Signature,
    idempotency_key: Option<&str>,
    body: &[u8],
    now_unix: i64,
) -> Reply {
    if let Err(rejection) = signer.verify(
        thread,
        call,
        signature.exp.as_deref(),
        signature.sig.as_deref(),
        now_unix,
    ) {
        tracing::warn!(%thread, %call, %rejection, "callback refused");
        return Reply::new(rejection.status(), rejection.to_string());
    }
    if body.len() > MAX_CALLBACK_BYTES {
        return Reply::new(
            413,
            format!("the callback is larger than {MAX_CALLBACK_BYTES} bytes"),
        );
    }
    let callback = match wire::parse_callback(body) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%thread, %call, error = %e, "malformed callback");
            return refuse(queue, thread, call, body, &e.to_string()).await;
        }
    };
    if callback.group_id() != thread {
        return Reply::new(
            403,
            format!(
                "the callback is for thread {} but its URL was issued for thread {thread}",
                callback.group_id()
            ),
        );
    }
    if let Some(id) = callback.tool_call_id() {
        if id != call {
            return Reply::new(
                403,
                format!("the callback is for call {id} but its URL was issued for call {call}"),
            );
        }
    }
    let delivery = Delivery::of(idempotency_key, body);
    let input = match to_input(callback, thread, call, &delivery) {
        Ok(input) => input,
        Err(why) => return Reply::new(400, why.to_string()),
    };
    match queue.send_to_input_queue(&input).await {
        Ok(()) => {
            tracing::info!(%thread, %call, kind = input.body.kind(), "callback queued");
            Reply::new(200, "ok")
        }
        Err(e) => {
            tracing::error!(%thread, %call, error = %e, "callback could not be queued");
            Reply::new(503, "the input queue is unavailable; retry later")
        }
    }
}

/// Takes an input forwarded by the host a conversation moved away from (`POST
/// /rap/forward/{thread}?sig=..`, the body an input as JSON): 401/403 for an unsigned or forged
/// URL, 400 for a body that is not an input of that thread, 503 when the queue cannot take it,
/// 200 once queued. The thread drops a repeat by its input id.
pub async fn handle_forward(
    signer: &CallbackSigner,
    queue: &dyn InputSender,
    thread: &str,
    sig: Option<&str>,
    body: &[u8],
) -> Reply {
    if let Err(rejection) = signer.verify_forward(thread, sig) {
        tracing::warn!(%thread, %rejection, "forwarded input refused");
        return Reply::new(rejection.status(), rejection.to_string());
    }
    if body.len() > MAX_FORWARD_BYTES {
        return Reply::new(
            413,
            format!("the forwarded input is larger than {MAX_FORWARD_BYTES} bytes"),
        );
    }
    let input: Input = match serde_json::from_slice(body) {
        Ok(input) => input,
        Err(e) => return Reply::new(400, format!("the body is not an input: {e}")),
    };
    if input.thread_id.as_str() != thread {
        return Reply::new(
            400,
            format!(
                "the input is for thread {} but the URL is thread {thread}'s",
                input.thread_id
            ),
        );
    }
    match queue.send_to_input_queue(&input).await {
        Ok(()) => {
            tracing::info!(%thread, input = %input.id, kind = input.body.kind(), "forwarded input queued");
            Reply::new(200, "ok")
        }
        Err(e) => {
            tracing::error!(%thread, error = %e, "forwarded input could not be queued");
            Reply::new(503, "the input queue is unavailable; retry later")
        }
    }
}

/// The largest forwarded input accepted: a callback's worth, and room for the input around it.
pub const MAX_FORWARD_BYTES: usize = MAX_CALLBACK_BYTES + 64 * 1024;

/// A callback the receiver cannot take (400). The tool will not send it again (4xx is final),
/// so a call that would have waited for it would wait for ever: when the callback was meant to
/// answer or hold its call (a `tool_result`, `oauth` or `user_choice`, or a body too broken to
/// tell), the call gets an error result saying what was wrong. The thread drops that result if
/// the call is no longer pending.
async fn refuse(
    queue: &dyn InputSender,
    thread: &str,
    call: &str,
    body: &[u8],
    why: &str,
) -> Reply {
    let kind = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned));
    if matches!(
        kind.as_deref(),
        Some("subscription_event") | Some("view_update")
    ) {
        return Reply::new(400, why);
    }
    let (Ok(thread_id), Ok(call_id)) = (ThreadId::new(thread), CallId::new(call)) else {
        return Reply::new(400, why);
    };
    let input = Input {
        id: InputId::derived(call, "refused"),
        thread_id: thread_id.clone(),
        body: InputBody::tool_error(
            call_id,
            format!(
                "Error: the tool server sent a callback the runtime cannot accept, so this call \
                 has no result: {why}"
            ),
        ),
    };
    match queue.send_to_input_queue(&input).await {
        Ok(()) => Reply::new(
            400,
            format!("{why} (the call was given an error result saying so)"),
        ),
        Err(e) => {
            tracing::error!(%thread, %call, error = %e, "error result for a refused callback could not be queued");
            Reply::new(503, "the input queue is unavailable; retry later")
        }
    }
}

/// What names one delivery of a callback: the tool's own key (`Idempotency-Key` header, or
/// `event_id` in the body), or else a fresh one (every delivery is a new event).
#[derive(Debug, Clone)]
pub struct Delivery<'a> {
    key: String,
    body: &'a [u8],
}

impl<'a> Delivery<'a> {
    /// The delivery of `body`, with the request's `Idempotency-Key` header if it had one.
    pub fn of(idempotency_key: Option<&str>, body: &'a [u8]) -> Self {
        let from_body = || {
            serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| match v.get("event_id") {
                    Some(serde_json::Value::String(s)) => Some(s.clone()),
                    Some(n @ serde_json::Value::Number(_)) => Some(n.to_string()),
                    _ => None,
                })
        };
        let key = match idempotency_key
            .map(str::to_owned)
            .filter(|k| !k.is_empty())
            .or_else(from_body)
        {
            // Hashed: a key may hold anything; ids hold letters, digits, `_` and `-`.
            Some(key) => format!("k{}", hex::encode(&Sha256::digest(key)[..10])),
            None => InputId::generate().as_str().to_owned(),
        };
        Delivery { key, body }
    }
}

fn digest(body: &[u8]) -> String {
    hex::encode(&Sha256::digest(body)[..8])
}

/// The input a valid callback becomes. A result, an `oauth` and a `user_choice` take ids derived
/// from the call (a question, from the call and its body), so a repeated one is dropped by the
/// thread; subscription events and view
/// updates take the id of their `delivery`, so two identical events are two events while the
/// retries of one delivery (same key) count once.
pub fn to_input(
    callback: Callback,
    thread: &str,
    call: &str,
    delivery: &Delivery<'_>,
) -> Result<Input, infinity_agent_core::ids::IdError> {
    let thread_id = ThreadId::new(thread)?;
    let call_id = CallId::new(call)?;
    let (id, body) = match callback {
        Callback::ToolResult(result) => {
            let mut images = Vec::new();
            let text = match result.content {
                Some(items) => {
                    let mut parts = Vec::new();
                    for item in items {
                        match item {
                            ContentItem::Text { text } => parts.push(text),
                            ContentItem::Image(image) => images.push(Image {
                                media_type: image.media_type,
                                data: image.data,
                            }),
                        }
                    }
                    parts.join("\n")
                }
                None => result.text.unwrap_or_default(),
            };
            // RAP has no error flag: by convention an error result's text starts "Error:".
            let is_error = text.trim_start().starts_with("Error:");
            let display_as = result
                .display_as
                .unwrap_or_default()
                .iter()
                .filter_map(|segment| serde_json::to_value(segment).ok())
                .collect();
            (
                InputId::derived(call, "result"),
                InputBody::ToolResult {
                    call_id,
                    text,
                    is_error,
                    subscription: result.subscription.unwrap_or(false),
                    images,
                    display_as,
                },
            )
        }
        Callback::SubscriptionEvent(event) => (
            InputId::derived(call, &format!("event-{}", delivery.key)),
            InputBody::SubscriptionEvent {
                call_id,
                associative: event.is_associative(),
                is_final: event.is_final(),
                text: event.text,
            },
        ),
        Callback::OAuth(request) => (
            InputId::derived(call, "oauth"),
            InputBody::ToolAuthorization {
                call_id,
                auth_url: request.auth_url,
            },
        ),
        Callback::UserChoice(request) => (
            InputId::derived(call, &format!("choice-{}", digest(delivery.body))),
            InputBody::UserChoiceRequest {
                call_id,
                prompt: request.prompt,
                choices: request.choices,
                default: request.default_choice,
                response_url: request.response_url,
            },
        ),
        Callback::ViewUpdate(update) => (
            InputId::derived(thread, &format!("view-{}", delivery.key)),
            InputBody::ViewUpdate {
                view_type: update.view_type,
                content: update.content,
            },
        ),
    };
    Ok(Input {
        id,
        thread_id,
        body,
    })
}

struct Shared {
    signer: CallbackSigner,
    queue: Arc<dyn InputSender>,
}

/// The receiver's router: `POST /rap/callback/{thread}/{call}` and `POST /rap/forward/{thread}`.
pub fn router(signer: CallbackSigner, queue: Arc<dyn InputSender>) -> Router {
    Router::new()
        .route("/rap/callback/{thread}/{call}", post(receive))
        .route("/rap/forward/{thread}", post(receive_forward))
        .layer(DefaultBodyLimit::max(MAX_FORWARD_BYTES + 1024))
        .with_state(Arc::new(Shared { signer, queue }))
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    Path((thread, call)): Path<(String, String)>,
    Query(signature): Query<Signature>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let key = headers
        .get(IDEMPOTENCY_KEY_HEADER)
        .and_then(|v| v.to_str().ok());
    let reply = handle(
        &shared.signer,
        shared.queue.as_ref(),
        &thread,
        &call,
        &signature,
        key,
        &body,
        jiff::Timestamp::now().as_second(),
    )
    .await;
    (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        reply.body,
    )
}

async fn receive_forward(
    State(shared): State<Arc<Shared>>,
    Path(thread): Path<String>,
    Query(signature): Query<Signature>,
    body: Bytes,
) -> (StatusCode, String) {
    let reply = handle_forward(
        &shared.signer,
        shared.queue.as_ref(),
        &thread,
        signature.sig.as_deref(),
        &body,
    )
    .await;
    (
        StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        reply.body,
    )
}
