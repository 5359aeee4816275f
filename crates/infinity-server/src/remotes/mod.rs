//! The `remote` category's server side: the HTTP routes machines people connect with
//! `infinity remote connect` use, over any [`RemoteHub`] (the embedded runtime's in memory,
//! [`hub`]; a stack's in its table, from `infinity serve --aws` and the API function).
//!
//! | Route | What |
//! |---|---|
//! | `POST /remotes` | `{"name", "exec"}`: a remote connects; `{"id"}` |
//! | `GET /remotes` | the remotes (id, name, online, exec, last_seen) |
//! | `GET /remotes/{id}/orders?wait=SECS` | a long poll for the remote's orders (`run`, `kill`), waiting up to `wait` seconds (default 20, at most 25: 400 above); 404 once the hub forgot it |
//! | `POST /remotes/{id}/runs/{run}` | `{"status", "exit_code", "stdout", "stderr"}`: a run ended |
//! | `DELETE /remotes/{id}` | the remote goes away |
//! | `POST /remotes/approvals/{token}` | a person's answer to an approval question (`{"id", "selected"}`, sent by the surface that asked: the token in the URL is the credential) |

pub mod hub;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use infinity_library::remote::{HubError, RemoteHub, Report, MAX_WAIT};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use hub::MemoryRemotes;

use crate::api::{Json, Path, Query};

type Hub = Arc<dyn RemoteHub>;

fn problem(status: StatusCode, message: impl std::fmt::Display) -> Response {
    crate::api::error(status, message).into_response()
}

fn hub_problem(err: HubError) -> Response {
    match err {
        HubError::NotFound(why) => problem(StatusCode::NOT_FOUND, why),
        err @ HubError::Unavailable(_) => problem(StatusCode::SERVICE_UNAVAILABLE, err),
    }
}

/// A machine connecting.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Connect {
    /// Its name, as people see it (not blank; at most 100 characters, leading and trailing
    /// spaces aside).
    #[schemars(regex(pattern = infinity_agent_core::text::NOT_BLANK))]
    #[schemars(length(min = 1, max = NAME_CHARS))]
    name: String,
    /// Whether it runs commands without asking a person first.
    #[serde(default)]
    exec: bool,
}

/// 201 for a machine connected.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
pub struct Connected {
    /// The remote's id, in its other routes.
    pub id: String,
}

/// The connected machines.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Remotes {
    /// Each one.
    pub remotes: Vec<infinity_library::remote::RemoteInfo>,
}

/// A remote's orders.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Orders {
    /// What to run or stop, perhaps nothing (the wait ran out).
    pub orders: Vec<infinity_library::remote::Order>,
}

/// The longest name a remote may have, in characters.
const NAME_CHARS: usize = 100;

/// How long an orders request waits for one.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    /// Seconds (default 20, at most 25).
    #[serde(default)]
    #[schemars(range(max = 25))]
    wait: Option<u64>,
    /// The token, for clients that cannot set headers (read by the guard; in the document as
    /// a security scheme).
    #[serde(default, rename = "access_token")]
    #[schemars(skip)]
    _access_token: Option<String>,
}

/// A person's answer to a command's approval.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Approval {
    /// The index of the choice taken.
    selected: usize,
}

/// `app` with the routes remotes use, behind `access`, and the approval route behind its
/// `Host` and `Origin` checks without the token (the token in its URL is the credential, as for
/// any `user_choice` question's `response_url`); the whole, answering what it does not route as
/// JSON ([`crate::api::with_fallbacks`]) and checked against the API's document when asked
/// ([`crate::checked`]).
pub fn mount(app: Router, hub: Hub, access: &crate::Guard) -> Router {
    let (guarded, open) = routes(hub);
    let guarded = guarded.layer(access.clone());
    let open = open.layer(access.without_token());
    crate::checked(crate::api::with_fallbacks(app.merge(guarded).merge(open)))
}

/// The routes remotes use, and the approval route.
fn routes(hub: Hub) -> (Router, Router) {
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

async fn connect(State(hub): State<Hub>, Json(body): Json<Connect>) -> Response {
    let name = body.name.trim();
    if infinity_agent_core::text::is_blank(name) || name.chars().count() > NAME_CHARS {
        return problem(
            StatusCode::BAD_REQUEST,
            format!("`name` must have 1 to {NAME_CHARS} characters, not only spaces"),
        );
    }
    match hub.connect(name, body.exec).await {
        Ok(id) => (StatusCode::CREATED, Json(Connected { id })).into_response(),
        Err(err) => hub_problem(err),
    }
}

async fn list(State(hub): State<Hub>) -> Response {
    match hub.remotes().await {
        Ok(remotes) => Json(Remotes { remotes }).into_response(),
        Err(err) => hub_problem(err),
    }
}

async fn orders(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    Query(wait): Query<Wait>,
) -> Response {
    let wait = Duration::from_secs(wait.wait.unwrap_or(20));
    if wait > MAX_WAIT {
        return problem(
            StatusCode::BAD_REQUEST,
            format!(
                "`wait` must be at most {} seconds, not {}",
                MAX_WAIT.as_secs(),
                wait.as_secs()
            ),
        );
    }
    match hub.poll(&id, wait).await {
        Ok(orders) => Json(Orders { orders }).into_response(),
        Err(err) => hub_problem(err),
    }
}

async fn disconnect(State(hub): State<Hub>, Path(id): Path<String>) -> Response {
    match hub.disconnect(&id).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => hub_problem(err),
    }
}

async fn report(
    State(hub): State<Hub>,
    Path((id, run)): Path<(String, String)>,
    Json(body): Json<Report>,
) -> Response {
    match hub.report(&id, &run, body).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => hub_problem(err),
    }
}

async fn approve(
    State(hub): State<Hub>,
    Path(token): Path<String>,
    Json(body): Json<Approval>,
) -> Response {
    match hub.approve(&token, body.selected).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(err) => hub_problem(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    /// The answer of the mounted routes to a `POST` of `body` to `path` with `headers`.
    async fn answer(path: &str, headers: &[(&str, &str)], body: &str) -> u16 {
        let (access, _) = crate::Guard::for_address("127.0.0.1", 8700, None);
        let app = mount(Router::new(), MemoryRemotes::new(), &access);
        let mut request = Request::post(path).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let Ok(request) = request.body(Body::from(body.to_owned())) else {
            return 0;
        };
        match app.oneshot(request).await {
            Ok(answer) => answer.status().as_u16(),
            Err(never) => match never {},
        }
    }

    #[tokio::test]
    async fn an_approval_is_refused_from_another_host_or_origin_as_every_route_is() {
        let own = ("host", "127.0.0.1:8700");
        let body = r#"{"selected": 0}"#;
        for (headers, why) in [
            (vec![("host", "evil.example:8700")], "DNS rebinding"),
            (
                vec![own, ("origin", "http://evil.example")],
                "another site's page",
            ),
        ] {
            assert_eq!(
                answer("/remotes/approvals/t1", &headers, body).await,
                403,
                "{why}"
            );
            assert_eq!(answer("/remotes", &headers, body).await, 403, "{why}");
        }
        assert_eq!(
            answer(
                "/remotes/approvals/t1",
                &[("host", "evil.example:8700")],
                "{"
            )
            .await,
            403,
            "refused before the body is read"
        );
        // From the server's own host, the token in the path is the credential: no bearer token.
        assert_eq!(answer("/remotes/approvals/t1", &[own], body).await, 404);
    }
}
