//! `infinity serve`: the embedded runtime behind a small HTTP API, for clients (UIs, scripts)
//! that attach to threads.
//!
//! | Route | What |
//! |---|---|
//! | `GET /health` | `ok` |
//! | `GET /`, `GET /app/{file}` | the web app (see [`crate::web`]): its files need no token, its API calls carry it |
//! | `GET /tools/internal`, `GET /agents/internal-tools` | every internal tool with its category and default (as `infinity tools internal --json`) |
//! | `GET /agents` | the default agent and the stored ones (`{"default", "stored": [{name, version, description, saved_at}]}`) |
//! | `GET /agents/{name}` | a stored version, `NAME` (the newest) or `NAME@VERSION` (404 if none) |
//! | `GET /threads` | every thread's record |
//! | `GET /threads/{id}` | one thread's record (404 if unknown) |
//! | `GET /threads/{id}/history` | its history as the model sees it |
//! | `POST /threads/{id}/messages` | `{"text": ...}`: a user message (creates the thread); `{"text", "agent": "NAME[@VERSION]"}` starts a conversation with that agent (400 for a thread that exists, 404 for an agent this host lacks) |
//! | `GET /threads/{id}/events` | Server-Sent Events: first the thread's current views and open questions, then its output events as they happen |
//! | `POST /threads/{id}/choices/{call}` | `{"selected": N}` or `{"dismiss": true}`: answers a tool server's question |
//! | `POST /threads/{id}/widget-actions` | `{"action": ..., "values": {...}}`: a press of a button of a `widget` the thread showed |
//! | `POST /threads/{id}/agent` | `{"agent": "NAME"}` or `{"agent": "NAME@VERSION"}`: moves the thread to another version of its agent (400 for another agent, 404 for a version this host lacks) |
//! | `POST /threads/{id}/model` | `{"model": "PROVIDER:MODEL"}` or `{"model": null}`: the model the thread's completions use from its next one on (400 naming why for a model this host cannot make) |
//! | `POST /threads/{id}/interrupt` | cancels the thread's calls in flight (`{"tree": true}`: its descendants' too) |
//! | `GET /threads/{id}/schedules`, `DELETE /threads/{id}/schedules/{schedule}` | the thread's recurring schedules; deleting one |
//! | `POST /threads/{id}/close` | closes the thread and every thread below it (`{"tree": true}` required when it has open children) |
//! | `POST /threads/{id}/migration`, `.../migration/finish`, `.../migration/abort`, `POST /migration/import` | moving a session to or from another host (`infinity migrate`, see [`crate::migrate`]) |
//!
//! Every route but `/health` is guarded (see [`Guard`]): on a loopback address, requests must
//! name the server itself in `Host` (no DNS rebinding) and come from its own origin if they carry
//! an `Origin` (no other site's page); on any other address, a bearer token is required too.

use std::convert::Infallible;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Args;
use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystem, PostError};
use infinity_agent_core::store::load_view;
use serde::Deserialize;
use serde_json::json;

use crate::AgentArgs;

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port to listen on.
    #[arg(long, default_value_t = 8700)]
    port: u16,
}

/// The variable that holds the API's bearer token (otherwise one is made at start when the
/// server listens beyond loopback, and printed).
pub const TOKEN_VAR: &str = "INFINITY_SERVE_TOKEN";

/// Who may use the API.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// A token every request must carry (`Authorization: Bearer T`, or `?access_token=T` for
    /// `EventSource`, which cannot set headers).
    pub token: Option<String>,
    /// The `Host` values the server answers to (empty: any, when it listens beyond loopback).
    pub hosts: Vec<String>,
}

impl Guard {
    /// The guard for a server listening on `host:port`: on loopback, only its own host names;
    /// beyond it, any host name but a token, from `INFINITY_SERVE_TOKEN` or made now. The token
    /// from the variable is required on loopback too.
    pub fn for_address(host: &str, port: u16, token_var: Option<String>) -> (Self, bool) {
        let loopback = matches!(host, "127.0.0.1" | "localhost" | "::1" | "[::1]");
        let made = token_var.is_none() && !loopback;
        let token = token_var.or_else(|| made.then(|| uuid::Uuid::new_v4().simple().to_string()));
        let hosts = if loopback {
            ["127.0.0.1", "localhost", "[::1]"]
                .iter()
                .map(|h| format!("{h}:{port}"))
                .collect()
        } else {
            Vec::new()
        };
        (Self { token, hosts }, made)
    }
}

pub(crate) async fn guard(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path() == "/health" {
        return next.run(request).await;
    }
    // Owned copies: the request (not `Sync`) must not stay borrowed across the await below.
    let (host, origin, bearer, query) = {
        let header = |name: axum::http::HeaderName| -> Option<String> {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let query = request.uri().query().and_then(|q| {
            q.split('&')
                .find_map(|kv| kv.strip_prefix("access_token="))
                .map(str::to_owned)
        });
        (
            header(axum::http::header::HOST).unwrap_or_default(),
            header(axum::http::header::ORIGIN),
            header(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.strip_prefix("Bearer ").map(str::to_owned)),
            query,
        )
    };
    if !guard.hosts.is_empty() && !guard.hosts.contains(&host) {
        return error(
            StatusCode::FORBIDDEN,
            format!("this server answers to {} only", guard.hosts.join(", ")),
        )
        .into_response();
    }
    if let Some(origin) = origin {
        let own = [format!("http://{host}"), format!("https://{host}")];
        if !own.contains(&origin) {
            return error(
                StatusCode::FORBIDDEN,
                format!(
                    "requests from {origin} are not accepted (only from this server's own pages)"
                ),
            )
            .into_response();
        }
    }
    if let Some(token) = &guard.token {
        let given = bearer.or(query);
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            return error(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required (Authorization: Bearer TOKEN)",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// Compares without stopping at the first difference, so timing tells nothing of the token.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

type Shared = Arc<AgentSystem>;

/// An error answer: a status and `{"error": message}`.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> ApiError {
    ApiError(status, message.to_string())
}

fn thread_id(raw: &str) -> Result<ThreadId, ApiError> {
    ThreadId::new(raw).map_err(|e| error(StatusCode::BAD_REQUEST, e))
}

/// The thread's record, or 404.
async fn record_of(
    system: &AgentSystem,
    id: &ThreadId,
) -> Result<infinity_agent_core::state::ThreadRecord, ApiError> {
    system
        .record(id)
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e))?
        .ok_or_else(|| error(StatusCode::NOT_FOUND, format!("no thread {id}")))
}

type Answer = Result<Response, ApiError>;

pub async fn serve(args: ServeArgs) -> Result<u8> {
    let remotes = crate::remote::RemoteHub::new();
    let (system, links) = crate::system::build_system_full(
        &args.agent,
        crate::StoreAccess::FailFast,
        true,
        Some(Arc::clone(&remotes)),
    )
    .await?;
    let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", args.host, args.port))?;
    let port = listener.local_addr()?.port();
    let from_env = std::env::var(TOKEN_VAR)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let (access, made) = Guard::for_address(&args.host, port, from_env);
    eprintln!("serving on http://{}", listener.local_addr()?);
    if let (true, Some(token)) = (made, &access.token) {
        eprintln!(
            "token (this address is reachable beyond this machine; every request needs \
             Authorization: Bearer TOKEN, or set {TOKEN_VAR}): {token}"
        );
    }
    let local = listener.local_addr()?;
    remotes.start(system.clone(), format!("http://{local}"));
    let (remote_routes, approvals) = crate::remote::routes(remotes);
    let remote_routes = remote_routes.layer(axum::middleware::from_fn_with_state(
        Arc::new(access.clone()),
        guard,
    ));
    let app = router(Arc::new(system), access, links)
        .merge(remote_routes)
        .merge(approvals);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(0)
}

pub fn router(system: Shared, access: Guard, links: Option<crate::tool_servers::Links>) -> Router {
    let moves = match links {
        Some(links) => crate::migrate::routes(system.clone(), links),
        None => Router::new(),
    };
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route(
            "/tools/internal",
            get(|| async { Json(infinity_agent_core::tools::internal::listing()) }),
        )
        .route(
            "/agents/internal-tools",
            get(|| async { Json(infinity_agent_core::tools::internal::listing()) }),
        )
        .route("/agents", get(agents))
        .route("/agents/{name}", get(agent))
        .route("/threads", get(threads))
        .route("/threads/{id}", get(thread))
        .route("/threads/{id}/history", get(history))
        .route("/threads/{id}/messages", post(message))
        .route("/threads/{id}/events", get(events))
        .route("/threads/{id}/choices/{call}", post(choose))
        .route("/threads/{id}/widget-actions", post(widget_action))
        .route("/threads/{id}/interrupt", post(interrupt))
        .route("/threads/{id}/agent", post(use_agent))
        .route("/threads/{id}/model", post(use_model))
        .route("/threads/{id}/close", post(close))
        .route(
            "/threads/{id}/schedules",
            get(schedules).post(create_schedule),
        )
        .route(
            "/threads/{id}/schedules/{schedule}",
            axum::routing::delete(delete_schedule),
        )
        .with_state(system)
        .merge(moves)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(access.clone()),
            guard,
        ))
        .merge(crate::web::routes(access))
}

/// The stored agents (the newest version of each) and the default agent.
async fn agents(State(system): State<Shared>) -> Answer {
    let stored = match system.catalog() {
        Some(catalog) => catalog
            .list()
            .await
            .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?,
        None => Vec::new(),
    };
    let rows: Vec<serde_json::Value> = stored
        .iter()
        .map(|a| {
            json!({"name": a.name, "version": a.version, "description": a.description,
                   "saved_at": a.saved_at})
        })
        .collect();
    Ok(Json(json!({"default": system.default_agent(), "stored": rows})).into_response())
}

/// One stored agent: `NAME` (the newest version) or `NAME@VERSION`.
async fn agent(State(system): State<Shared>, Path(name): Path<String>) -> Answer {
    let reference = infinity_agent_core::catalog::AgentRef::parse(&name)
        .map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let Some(catalog) = system.catalog() else {
        return Err(error(
            StatusCode::NOT_FOUND,
            "this server has no stored agents (start it with --store)",
        ));
    };
    let found = catalog
        .get(&reference.name, reference.version)
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?
        .ok_or_else(|| {
            error(
                StatusCode::NOT_FOUND,
                format!("no stored agent {reference}"),
            )
        })?;
    Ok(Json(found).into_response())
}

async fn threads(State(system): State<Shared>) -> Answer {
    let ids = system
        .store()
        .thread_ids()
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    let mut records = Vec::new();
    for id in ids {
        if let Ok(Some(record)) = system.record(&id).await {
            records.push(record);
        }
    }
    Ok(Json(records).into_response())
}

async fn thread(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    Ok(Json(record_of(&system, &id).await?).into_response())
}

async fn history(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    let record = record_of(&system, &id).await?;
    let view = load_view(system.store().as_ref(), &record)
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    Ok(Json(view.iter().map(|e| &**e).collect::<Vec<_>>()).into_response())
}

#[derive(Debug, Deserialize)]
struct Message {
    text: String,
    /// For a new conversation: the agent that runs it (default: the server's).
    #[serde(default)]
    agent: Option<String>,
}

async fn message(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: Result<Json<Message>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let id = thread_id(&id)?;
    let Json(body) = body.map_err(|e| error(e.status(), e.body_text()))?;
    if body.text.trim().is_empty() {
        return Err(error(StatusCode::BAD_REQUEST, "`text` is empty"));
    }
    let input = match &body.agent {
        Some(agent) => system.start_conversation(&id, body.text, agent).await,
        None => system.post_user_message(&id, body.text).await,
    }
    .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WidgetAction {
    action: String,
    #[serde(default)]
    values: serde_json::Map<String, serde_json::Value>,
}

/// `POST /threads/{id}/widget-actions`: a person pressed a button of a widget the thread showed
/// (202; 404 for an unknown thread, 409 for a closed one).
async fn widget_action(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: Result<Json<WidgetAction>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let id = thread_id(&id)?;
    let Json(body) = body.map_err(|e| error(e.status(), e.body_text()))?;
    if body.action.trim().is_empty() {
        return Err(error(StatusCode::BAD_REQUEST, "`action` is empty"));
    }
    let record = record_of(&system, &id).await?;
    if record.status == infinity_agent_core::state::ThreadStatus::Closed {
        return Err(post_error(PostError::Closed(id)));
    }
    let input = infinity_agent_core::input::Input::new(
        id.clone(),
        infinity_agent_core::input::InputBody::WidgetAction {
            action: body.action,
            values: body.values,
        },
    );
    let input_id = input.id.clone();
    system.send(input);
    Ok(accepted(&id, &input_id))
}

/// `POST /threads/{id}/close` (`{"tree": true}` when it has open children, which close with
/// it): closes the thread (202; 409 if closed, or with open children and no `tree`).
async fn close(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    let id = thread_id(&id)?;
    let tree = tree_option(&body)?;
    let input = system.close(&id, tree).await.map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `GET /threads/{id}/schedules`: the thread's recurring schedules.
async fn schedules(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    Ok(Json(record_of(&system, &id).await?.schedules).into_response())
}

/// `POST /threads/{id}/schedules` (`schedule_create`'s arguments): creates one (202 with its
/// id and next occurrences; 400 naming what is wrong).
async fn create_schedule(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: Result<Json<serde_json::Value>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let id = thread_id(&id)?;
    let Json(args) = body.map_err(|e| error(e.status(), e.body_text()))?;
    let (schedule, text) = system
        .create_schedule(&id, &args)
        .await
        .map_err(post_error)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"thread_id": id, "schedule_id": schedule, "text": text})),
    )
        .into_response())
}

/// `DELETE /threads/{id}/schedules/{schedule}`: deletes one (202; 404 if it has no such
/// schedule).
async fn delete_schedule(
    State(system): State<Shared>,
    Path((id, schedule)): Path<(String, String)>,
) -> Answer {
    let id = thread_id(&id)?;
    let input = system
        .delete_schedule(&id, &schedule)
        .await
        .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// 202 with the thread and the id of the input queued for it.
fn accepted(id: &ThreadId, input: &infinity_agent_core::ids::InputId) -> Response {
    (
        StatusCode::ACCEPTED,
        Json(json!({"thread_id": id, "input_id": input})),
    )
        .into_response()
}

fn post_error(e: PostError) -> ApiError {
    match e {
        PostError::NoSchedule { .. } => error(StatusCode::NOT_FOUND, e),
        PostError::BadSchedule(_) | PostError::BadAgent(_) | PostError::BadModel(_) => {
            error(StatusCode::BAD_REQUEST, e)
        }
        PostError::NoAgent(_) => error(StatusCode::NOT_FOUND, e),
        PostError::Closed(_) | PostError::OpenChildren { .. } => error(StatusCode::CONFLICT, e),
        PostError::Unknown(_) => error(StatusCode::NOT_FOUND, e),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// The optional body of `close` and `interrupt`: `{"tree": true}` acts on the thread's open
/// descendants too.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeOption {
    #[serde(default)]
    tree: bool,
}

fn tree_option(body: &[u8]) -> Result<bool, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(false);
    }
    serde_json::from_slice::<TreeOption>(body)
        .map(|o| o.tree)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("the body: {e}")))
}

/// `POST /threads/{id}/interrupt` (`{"tree": true}`: its open descendants too): cancels the
/// calls in flight (202).
async fn interrupt(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    let id = thread_id(&id)?;
    let input = if tree_option(&body)? {
        system.interrupt_tree(&id).await
    } else {
        system.interrupt(&id).await
    }
    .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// A JSON body of the `shape` a route takes, or a 400 naming it.
fn body_of<T: serde::de::DeserializeOwned>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            format!("the body must be {shape}: {e}"),
        )
    })
}

/// `{"agent": "NAME" | "NAME@VERSION"}`: moves the thread to that version of its agent.
async fn use_agent(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        agent: String,
    }
    let id = thread_id(&id)?;
    let Body { agent } = body_of(&body, r#"{"agent": "NAME" or "NAME@VERSION"}"#)?;
    let input = system.use_agent(&id, &agent).await.map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `{"model": "PROVIDER:MODEL"}` (or `null`, back to the agent's): the model the thread's
/// completions use from its next one on.
async fn use_model(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        model: Option<String>,
    }
    let id = thread_id(&id)?;
    let Body { model } = body_of(&body, r#"{"model": "PROVIDER:MODEL" or null}"#)?;
    let input = system
        .use_model(&id, model.as_deref())
        .await
        .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

fn sse(event: &OutputEvent) -> Result<Event, Infallible> {
    Ok(Event::default()
        .event(event.kind.kind())
        .data(serde_json::to_string(event).unwrap_or_default()))
}

async fn events(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    // Subscribe first, so nothing falls between the replay and the live events.
    let live = system.subscribe();
    let mut replay = Vec::new();
    if let Ok(Some(record)) = system.record(&id).await {
        let at = record.updated_at;
        for (view_type, content) in &record.views {
            replay.push(OutputEvent {
                thread_id: id.clone(),
                at,
                kind: OutputKind::ViewUpdated {
                    view_type: view_type.clone(),
                    content: content.clone(),
                },
            });
        }
        for choice in &record.open_choices {
            replay.push(OutputEvent {
                thread_id: id.clone(),
                at,
                kind: OutputKind::ChoiceRequested {
                    call_id: choice.call_id.clone(),
                    prompt: choice.prompt.clone(),
                    choices: choice.choices.clone(),
                    default: choice.default,
                },
            });
        }
    }
    let replay = futures_util::stream::iter(replay.into_iter().map(|e| sse(&e)));
    let live = futures_util::stream::unfold((live, id), |(mut rx, id)| async move {
        loop {
            let event = rx.recv().await?;
            if event.thread_id == id {
                return Some((sse(&event), (rx, id)));
            }
        }
    });
    use futures_util::StreamExt;
    Ok(Sse::new(replay.chain(live))
        .keep_alive(KeepAlive::default())
        .into_response())
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    selected: Option<usize>,
    #[serde(default)]
    dismiss: bool,
}

async fn choose(
    State(system): State<Shared>,
    Path((id, call)): Path<(String, String)>,
    body: Result<Json<Choice>, axum::extract::rejection::JsonRejection>,
) -> Answer {
    let id = thread_id(&id)?;
    let Json(body) = body.map_err(|e| error(e.status(), e.body_text()))?;
    if body.selected.is_none() && !body.dismiss {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "give `selected` (an index) or `dismiss: true`",
        ));
    }
    let record = record_of(&system, &id).await?;
    let choice = infinity_rap::client::find_choice(&record, Some(&call))
        .map_err(|e| error(StatusCode::NOT_FOUND, e))?;
    let (selected, input) = infinity_rap::client::answer_choice(&id, choice, body.selected)
        .await
        .map_err(|e| match e {
            infinity_rap::client::ChoiceError::Delivery(_) => error(StatusCode::BAD_GATEWAY, e),
            _ => error(StatusCode::BAD_REQUEST, e),
        })?;
    system.send(input);
    Ok(
        Json(json!({"call_id": call, "selected": selected, "choice": choice.choices[selected]}))
            .into_response(),
    )
}
