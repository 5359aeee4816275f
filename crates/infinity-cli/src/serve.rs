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
//! | `GET /models` | the models threads may be switched to besides their agent's own (`{"allowed": [SPEC...], "set_in"}`: `--allow-model`, `INFINITY_ALLOWED_MODELS`) |
//! | `POST /threads/{id}/model` | `{"model": "PROVIDER:MODEL"}` or `{"model": null}`: the model the thread's completions use from its next one on; only one `GET /models` lists or the agent's own (400 naming the spec and where the list is set, without reading anything it names; 400 naming why for a listed model this host cannot make) |
//! | `POST /threads/{id}/interrupt` | cancels the thread's calls in flight (`{"tree": true}`: its descendants' too) |
//! | `GET /threads/{id}/schedules`, `DELETE /threads/{id}/schedules/{schedule}` | the thread's recurring schedules; deleting one |
//! | `POST /threads/{id}/close` | closes the thread and every thread below it (`{"tree": true}` required when it has open children) |
//! | `POST /threads/{id}/migration`, `.../migration/finish`, `.../migration/abort`, `POST /migration/import` | moving a session to or from another host (`infinity migrate`, see [`crate::migrate`]) |
//!
//! The routes over threads are in [`crate::api`], written once for every host: `serve` runs them on
//! the embedded runtime, `serve --aws` and the stack's API function on a stack's table and queues
//! ([`crate::stack_api`]; the migration routes are the embedded runtime's only).
//!
//! Every route but `/health` is guarded (see [`Guard`]): on a loopback address, requests must
//! name the server itself in `Host` (no DNS rebinding) and come from its own origin if they carry
//! an `Origin` (no other site's page); on any other address, a bearer token is required too.

use std::sync::Arc;

use anyhow::{Context, Result};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clap::Args;

use crate::api::error;
use crate::AgentArgs;

#[derive(Debug, Args)]
// clap would show the flattened agent's `--agent` as always required; it is not with --aws.
#[command(
    override_usage = "infinity serve --agent FILE [OPTIONS]\n       infinity serve --aws [OPTIONS]"
)]
pub struct ServeArgs {
    /// The agent to run here (not with --aws).
    #[command(flatten)]
    agent: Option<AgentArgs>,
    /// Serve a deployed (or local) stack's threads instead of running agents here: its table
    /// and input queue from the `INFINITY_*` variables (`infra/local/env.sh` sets them for the
    /// local stack), its output queue followed for the live events.
    #[arg(long, conflicts_with = "agent")]
    aws: bool,
    /// The address people reach this server at, for the links to pages agents publish (default:
    /// the address it listens on).
    #[arg(long)]
    public_url: Option<String>,
    /// With --aws: one endpoint for every AWS service (e.g. http://localhost:4566).
    #[arg(long, requires = "aws")]
    endpoint: Option<String>,
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
    /// Requests from any origin are taken (a published page's content and files, loaded by
    /// the page itself from its sandboxed origin, `null`); otherwise only from the server's own
    /// pages.
    pub any_origin: bool,
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
        (
            Self {
                token,
                hosts,
                any_origin: false,
            },
            made,
        )
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
        let query = request.uri().query().and_then(query_token);
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
    if let Some(origin) = origin.filter(|_| !guard.any_origin) {
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

/// The `access_token` a query string carries, decoded (the web app encodes it with
/// `encodeURIComponent`, so a token with `+`, `/` or `=` arrives as `%2B`, `%2F`, `%3D`).
fn query_token(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "access_token")
        .map(|(_, value)| value.into_owned())
}

/// Compares without stopping at the first difference, so timing tells nothing of the token.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(a, b).into()
}

/// Binds the address `args` give.
async fn bind(args: &ServeArgs) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind((args.host.as_str(), args.port))
        .await
        .with_context(|| format!("cannot listen on {}:{}", args.host, args.port))
}

/// The guard `listener`'s address needs, said on stderr (with a token it made): the last thing
/// `serve` prints before it answers.
fn announce(args: &ServeArgs, listener: &tokio::net::TcpListener) -> Result<Guard> {
    let from_env = std::env::var(TOKEN_VAR)
        .ok()
        .filter(|t| !t.trim().is_empty());
    let (access, made) = Guard::for_address(&args.host, listener.local_addr()?.port(), from_env);
    eprintln!("serving on http://{}", listener.local_addr()?);
    if let (true, Some(token)) = (made, &access.token) {
        eprintln!(
            "token (this address is reachable beyond this machine; every request needs \
             Authorization: Bearer TOKEN, or set {TOKEN_VAR}): {token}"
        );
    }
    Ok(access)
}

pub async fn serve(args: ServeArgs) -> Result<u8> {
    if args.aws {
        let listener = bind(&args).await?;
        let access = announce(&args, &listener)?;
        return crate::stack_api::serve(args.endpoint.as_deref(), (listener, access)).await;
    }
    let Some(agent) = &args.agent else {
        anyhow::bail!(
            "give the agent to run (--agent FILE), or serve a stack's threads with --aws"
        );
    };
    let listener = bind(&args).await?;
    let local = listener.local_addr()?;
    let public = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local}"));
    let remotes = crate::remote::MemoryRemotes::new();
    let (system, links) = crate::system::build_system_full(
        agent,
        crate::StoreAccess::FailFast,
        Some(Arc::clone(&remotes)),
        Some(&public),
    )
    .await?;
    let access = announce(&args, &listener)?;
    remotes.start(system.clone(), format!("http://{local}"));
    let moves = match links {
        Some(links) => crate::migrate::routes(Arc::new(system.clone()), links),
        None => no_moves(),
    };
    let app = crate::remote::mount(
        router(Arc::new(system), access.clone(), moves),
        remotes,
        access,
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(0)
}

/// The migration routes of a `serve` without a store (and without tool servers, so without a
/// callback receiver): a session moved here would be lost when it stops, and inputs forwarded
/// to it would have no receiver, so each move is refused, saying why.
fn no_moves() -> Router {
    async fn refuse() -> Response {
        let why = "this `infinity serve` keeps no store, so it moves no sessions in or out: \
                   start it with --store DIR";
        (
            StatusCode::CONFLICT,
            axum::Json(serde_json::json!({ "error": why })),
        )
            .into_response()
    }
    Router::new()
        .route("/threads/{id}/migration", post(refuse))
        .route("/threads/{id}/migration/{step}", post(refuse))
        .route("/migration/import", post(refuse))
}

/// The whole API on `host`: the thread routes, `moves` (a session's migration, embedded only)
/// and the web app, behind `access`.
pub fn router(host: crate::api::Shared, access: Guard, moves: Router) -> Router {
    let pages = crate::artifacts::routes(std::sync::Arc::clone(&host), access.clone());
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .merge(crate::api::routes(host))
        .merge(moves)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(access.clone()),
            guard,
        ))
        .merge(crate::web::routes(access))
        .merge(pages)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_token_is_decoded_as_the_web_app_encoded_it() {
        assert_eq!(
            query_token("x=1&access_token=a%2Bb%2Fc%3D&y=2").as_deref(),
            Some("a+b/c=")
        );
        assert_eq!(query_token("access_token=plain").as_deref(), Some("plain"));
        assert_eq!(query_token("token=other"), None);
        assert_eq!(query_token(""), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3cres"));
        assert!(
            !constant_time_eq(b"s3cret", b"s3cre"),
            "a prefix is not the token"
        );
        assert!(!constant_time_eq(b"", b"s3cret"));
    }
}
