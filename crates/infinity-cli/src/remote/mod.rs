//! The `remote` category on `infinity serve`: machines people connect with
//! `infinity remote connect` ([`client`]), the hub that holds them ([`hub`]), its HTTP routes,
//! and the dispatcher that hands `remote_exec` calls to the hub and every other call to the
//! tool servers' client.
//!
//! | Route | What |
//! |---|---|
//! | `POST /remotes` | `{"name", "exec"}`: a remote connects; `{"id"}` |
//! | `GET /remotes` | the remotes (id, name, online, exec, last_seen) |
//! | `GET /remotes/{id}/orders?wait=SECS` | a long poll for the remote's orders (`run`, `kill`); 404 once the hub forgot it |
//! | `POST /remotes/{id}/runs/{run}` | `{"status", "exit_code", "stdout", "stderr"}`: a run ended |
//! | `DELETE /remotes/{id}` | the remote goes away |
//! | `POST /remotes/approvals/{token}` | a person's answer to an approval question (`{"id", "selected"}`, sent by the surface that asked: the token in the URL is the credential) |

pub mod client;
pub mod hub;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use infinity_agent_core::effect::{Notification, ToolInvocation};
use infinity_agent_core::host::{DispatchError, ToolDispatcher};
use infinity_agent_core::input::Input;
use infinity_agent_core::library::remotes::RemoteDirectory;
use infinity_agent_core::tools::internal::REMOTE_EXEC;
use serde::Deserialize;
use serde_json::json;

pub use hub::RemoteHub;

/// The longest a poll waits for an order.
const MAX_WAIT: Duration = Duration::from_secs(25);

/// Hands `remote_exec` calls to the hub, everything else to the tool servers' client.
#[derive(Debug)]
pub struct RemoteDispatcher {
    /// The remotes.
    pub hub: Arc<RemoteHub>,
    /// The tool servers' client, if the runtime has one.
    pub rap: Option<Arc<dyn ToolDispatcher>>,
}

fn is_remote(invocation: &ToolInvocation) -> bool {
    invocation.tool == REMOTE_EXEC && invocation.server.is_none()
}

#[async_trait]
impl ToolDispatcher for RemoteDispatcher {
    async fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), DispatchError> {
        if is_remote(invocation) {
            return self
                .hub
                .dispatch(invocation)
                .map_err(DispatchError::Refused);
        }
        match &self.rap {
            Some(rap) => rap.dispatch(invocation).await,
            None => Err(DispatchError::NoServer(invocation.tool.clone())),
        }
    }

    async fn notify(&self, notification: &Notification) {
        if let Notification::CancelToolCall {
            thread_id,
            call_id,
            tool,
            ..
        } = notification
        {
            if tool == REMOTE_EXEC {
                self.hub.cancel(thread_id, call_id);
                return;
            }
        }
        if let Some(rap) = &self.rap {
            rap.notify(notification).await;
        }
    }

    async fn forward(&self, url: &str, input: &Input) -> Result<(), DispatchError> {
        match &self.rap {
            Some(rap) => rap.forward(url, input).await,
            None => Err(DispatchError::NoServer("forwarding".to_owned())),
        }
    }
}

fn problem(status: StatusCode, message: impl std::fmt::Display) -> Response {
    (status, Json(json!({"error": message.to_string()}))).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Connect {
    name: String,
    #[serde(default)]
    exec: bool,
}

#[derive(Debug, Deserialize)]
struct Wait {
    #[serde(default)]
    wait: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct Answer {
    selected: usize,
}

/// The routes remotes use (behind the server's guard), and the approval route (outside it: the
/// token in its URL is the credential, as for any `user_choice` question's `response_url`).
pub fn routes(hub: Arc<RemoteHub>) -> (Router, Router) {
    let guarded = Router::new()
        .route("/remotes", post(connect).get(list))
        .route("/remotes/{id}/orders", get(orders))
        .route("/remotes/{id}", axum::routing::delete(disconnect))
        .route("/remotes/{id}/runs/{run}", post(report))
        .with_state(Arc::clone(&hub));
    let open = Router::new()
        .route("/remotes/approvals/{token}", post(approve))
        .with_state(hub);
    (guarded, open)
}

async fn connect(
    State(hub): State<Arc<RemoteHub>>,
    body: Result<Json<Connect>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(body) => body,
        Err(e) => return problem(e.status(), e.body_text()),
    };
    let name = body.name.trim();
    if name.is_empty() || name.len() > 100 {
        return problem(
            StatusCode::BAD_REQUEST,
            "`name` must have 1 to 100 characters",
        );
    }
    let id = hub.connect(name, body.exec);
    (StatusCode::CREATED, Json(json!({"id": id}))).into_response()
}

async fn list(State(hub): State<Arc<RemoteHub>>) -> Response {
    Json(json!({"remotes": hub.remotes()})).into_response()
}

async fn orders(
    State(hub): State<Arc<RemoteHub>>,
    Path(id): Path<String>,
    Query(wait): Query<Wait>,
) -> Response {
    let wait = Duration::from_secs(wait.wait.unwrap_or(20)).min(MAX_WAIT);
    match hub.poll(&id, wait).await {
        Some(orders) => Json(json!({"orders": orders})).into_response(),
        None => problem(
            StatusCode::NOT_FOUND,
            format!("no remote {id} is connected (connect again)"),
        ),
    }
}

async fn disconnect(State(hub): State<Arc<RemoteHub>>, Path(id): Path<String>) -> Response {
    if hub.disconnect(&id) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        problem(StatusCode::NOT_FOUND, format!("no remote {id}"))
    }
}

async fn report(
    State(hub): State<Arc<RemoteHub>>,
    Path((id, run)): Path<(String, String)>,
    body: Result<Json<hub::Report>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(body) => body,
        Err(e) => return problem(e.status(), e.body_text()),
    };
    if hub.report(&id, &run, body) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        problem(
            StatusCode::NOT_FOUND,
            format!("the remote {id} has no run {run} in flight"),
        )
    }
}

async fn approve(
    State(hub): State<Arc<RemoteHub>>,
    Path(token): Path<String>,
    body: Result<Json<Answer>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let Json(body) = match body {
        Ok(body) => body,
        Err(e) => return problem(e.status(), e.body_text()),
    };
    if hub.approve(&token, body.selected) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        problem(
            StatusCode::NOT_FOUND,
            "no approval is waiting at this address (answered already, or withdrawn)",
        )
    }
}
