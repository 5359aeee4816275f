//! The HTTP API, the web app and the pages agents publish, over any host's threads: `infinity
//! serve` runs them on the embedded runtime, `infinity serve --aws` and the stack's API function
//! ([`stack`]) on a stack's table and queues. The routes, for clients (UIs, scripts) that attach
//! to threads:
//!
//! | Route | What |
//! |---|---|
//! | `GET /health` | `ok` |
//! | `GET /openapi.json` | the API's OpenAPI 3.1 document, every route below with its types (see [`openapi`]; no token) |
//! | `GET /`, `GET /app/{file}` | the web app (see [`web`]): its files need no token, its API calls carry it |
//! | `GET /agents/internal-tools` (and its alias `GET /tools/internal`) | every internal tool with its category and default (as `infinity tools internal --json`) |
//! | `GET /agents` | the default agent and the stored ones (`{"default", "stored": [{name, version, description, saved_at}]}`) |
//! | `GET /agents/{name}` | a stored version, `NAME` (the newest) or `NAME@VERSION` (404 if none) |
//! | `GET /threads` | a page of threads, newest activity first: `{"threads": [summary...], "next": cursor}`; filters `roots`, `kind`, `status`, `agent`, `title`, `updated_since`, and `cursor`, `limit` (see [`ThreadQuery`](infinity_agent_core::state::ThreadQuery)) |
//! | `GET /threads/{id}/tree` | the records of the thread and every thread below it |
//! | `GET /threads/{id}` | one thread's record (404 if unknown) |
//! | `GET /threads/{id}/history` | its history as the model sees it (`Last-Event-ID`: the last event it includes) |
//! | `POST /threads/{id}/messages` | `{"text": ...}`: a user message (creates the thread); `{"text", "agent": "NAME[@VERSION]"}` starts a conversation with that agent (409 for a thread that exists: it keeps its agent; 404 for an agent this host lacks) |
//! | `GET /threads/{id}/events` | Server-Sent Events, resumable with `Last-Event-ID` or `?after=N` (see [`events`]): what the client missed, then the thread's output events as they happen |
//! | `POST /threads/{id}/choices/{call}` | `{"selected": N}` or `{"dismiss": true}`: answers a tool server's question |
//! | `POST /threads/{id}/widget-actions` | `{"action": ..., "values": {...}}`: a press of a button of a `widget` the thread showed |
//! | `POST /threads/{id}/agent` | `{"agent": "NAME"}` or `{"agent": "NAME@VERSION"}`: moves the thread to another version of its agent (409 for another agent: a thread keeps its agent; 404 for a version this host lacks) |
//! | `POST /markdown` | `{"texts": [...]}`: each Markdown text as safe HTML (`{"html": [...]}`, see [`markdown`]) |
//! | `GET /models` | the models threads may be switched to besides their agent's own (`{"allowed": [SPEC...], "set_in"}`: `--allow-model`, `INFINITY_ALLOWED_MODELS`) |
//! | `POST /threads/{id}/model` | `{"model": "PROVIDER:MODEL"}` or `{"model": null}`: the model the thread's completions use from its next one on; only one `GET /models` lists or the agent's own (400 naming the spec and where the list is set, without reading anything it names; 400 naming why for a listed model this host cannot make) |
//! | `POST /threads/{id}/interrupt` | cancels the thread's calls in flight (`{"tree": true}`: its descendants' too) |
//! | `GET /threads/{id}/schedules`, `DELETE /threads/{id}/schedules/{schedule}` | the thread's recurring schedules; deleting one |
//! | `POST /threads/{id}/close` | closes the thread and every thread below it (`{"tree": true}` required when it has open children) |
//! | `POST /threads/{id}/migration`, `.../migration/finish`, `.../migration/abort`, `POST /migration/import` | moving a conversation to or from another host (`infinity migrate`, see [`migration`]) |
//! | `/a/...` | the pages agents publish (see [`artifacts`]) |
//! | `/remotes/...` | machines people connect (see [`remotes`]) |
//!
//! The routes over threads are in [`api`], written once over
//! [`Front`](infinity_agent_core::runtime::Front) for every host (the migration routes are the
//! embedded runtime's only). Every route but `/health` is guarded (see [`Guard`]): on a loopback
//! address, requests must name the server itself in `Host` (no DNS rebinding) and come from its
//! own origin if they carry an `Origin` (no other site's page); on any other address, a bearer
//! token is required too.
//!
//! On a machine, [`serve_until_interrupted`] holds the connections to time limits and a cap
//! (see [`connections`]), so that slow, half-open and idle clients cannot hold the server.

pub mod api;
pub mod artifacts;
pub mod connections;
pub mod events;
pub mod guard;
pub mod markdown;
pub mod migration;
pub mod openapi;
pub mod remotes;
pub mod stack;
pub mod web;

use axum::routing::get;
use axum::Router;

pub use guard::{Guard, TOKEN_VAR};

/// Serves `app` on `listener` within the default [`connections::Limits`] until Ctrl-C.
pub async fn serve_until_interrupted(
    listener: tokio::net::TcpListener,
    app: Router,
) -> std::io::Result<()> {
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    connections::serve(listener, app, connections::Limits::default(), interrupted).await
}

/// The whole API on `host`: the thread routes, `moves` (moving conversations, embedded only:
/// [`migration::routes`] or [`migration::refused`]) and the web app, behind `access`.
pub fn router(host: api::Shared, access: Guard, moves: Router) -> Router {
    let pages = artifacts::routes(std::sync::Arc::clone(&host), &access);
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/openapi.json", get(openapi::serve))
        .merge(api::routes(std::sync::Arc::clone(&host)))
        .merge(events::routes(host))
        .merge(markdown::routes())
        .merge(moves)
        .layer(access.clone())
        .merge(web::routes(&access))
        .merge(pages)
}

/// `app` (the whole of it: [`router`] with the remotes' routes, see [`remotes::mount`]),
/// checking itself against its document when `INFINITY_CHECK_API=1` (see
/// [`openapi::check`]).
pub fn checked(app: Router) -> Router {
    if openapi::check::enabled() {
        app.layer(axum::middleware::from_fn(openapi::check::check))
    } else {
        app
    }
}

// Last: the document's test reads the routes from the sources up to the first test item.
#[cfg(test)]
mod testing;
