//! The routes through which `infinity serve` takes part in moving a live conversation between
//! hosts (`infinity migrate` drives the move; see [`infinity_rap_runtime::migration`]).

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::migration::{Bundle, MigrationError};
use infinity_agent_core::runtime::AgentSystem;
use infinity_rap::signing::CallbackSigner;
use infinity_rap_runtime::client::RapClient;
use infinity_rap_runtime::migration::{self, FinishRequest, Host, MoveError, StartRequest};
use schemars::JsonSchema;
use serde::Serialize;

use crate::api::{error, ApiError, Json, Path};

/// What `serve`'s migration routes share.
struct MigrationRoutes {
    system: Arc<AgentSystem>,
    signer: CallbackSigner,
    client: Arc<RapClient>,
    runs_agent: Box<dyn Fn(&str) -> bool + Send + Sync>,
}

impl MigrationRoutes {
    fn host(&self) -> Host<'_> {
        Host {
            store: self.system.store().as_ref(),
            performer: self.system.as_ref(),
            signer: &self.signer,
            client: &self.client,
            runs_agent: &*self.runs_agent,
        }
    }
}

/// The largest conversation `serve` imports in one request.
const MAX_BUNDLE_BYTES: usize = 1 << 30;

/// `serve`'s side of a move: `POST /threads/{id}/migration` (a [`StartRequest`]; answers the
/// conversation as a bundle), `POST /threads/{id}/migration/finish` (a [`FinishRequest`]), `POST
/// /threads/{id}/migration/abort`, `POST /threads/{id}/migration/forwarding` (the forwarding
/// URLs of a conversation that runs here), and `POST /migration/import` (a bundle; answers the
/// forwarding URLs). `signer` signs the callback and forwarding URLs of the runtime's
/// receiver; `client` reaches tool servers and forwards inputs.
pub fn routes(system: Arc<AgentSystem>, signer: CallbackSigner, client: Arc<RapClient>) -> Router {
    let agents = Arc::clone(&system);
    let served = Arc::new(MigrationRoutes {
        system,
        signer,
        client,
        runs_agent: Box::new(move |name| agents.has_agent(name)),
    });
    Router::new()
        .route("/threads/{id}/migration", post(start))
        .route("/threads/{id}/migration/finish", post(finish))
        .route("/threads/{id}/migration/abort", post(abort))
        .route("/threads/{id}/migration/forwarding", post(forwarding))
        .route(
            "/migration/import",
            post(import).layer(DefaultBodyLimit::max(MAX_BUNDLE_BYTES)),
        )
        .with_state(served)
}

/// The migration routes of a `serve` without a store (and without tool servers, so without a
/// callback receiver): a conversation moved here would be lost when it stops, and inputs forwarded
/// to it would have no receiver, so each move is refused, saying why.
pub fn refused() -> Router {
    async fn refuse() -> ApiError {
        error(
            StatusCode::CONFLICT,
            "this `infinity serve` keeps no store, so it moves no sessions in or out: start it \
             with --store DIR"
                .to_owned(),
        )
    }
    Router::new()
        .route("/threads/{id}/migration", post(refuse))
        .route("/threads/{id}/migration/finish", post(refuse))
        .route("/threads/{id}/migration/abort", post(refuse))
        .route("/threads/{id}/migration/forwarding", post(refuse))
        .route("/migration/import", post(refuse))
}

impl From<MoveError> for ApiError {
    fn from(err: MoveError) -> Self {
        let status = match &err {
            MoveError::Migration(MigrationError::UnknownThread(_)) => StatusCode::NOT_FOUND,
            MoveError::Migration(MigrationError::Store(_)) => StatusCode::SERVICE_UNAVAILABLE,
            MoveError::Migration(MigrationError::BadBundle(_)) => StatusCode::BAD_REQUEST,
            MoveError::Migration(_)
            | MoveError::Busy { .. }
            | MoveError::UnmappedServer { .. }
            | MoveError::NotHere(_) => StatusCode::CONFLICT,
            _ => StatusCode::BAD_GATEWAY,
        };
        error(status, err)
    }
}

fn root(raw: &str) -> Result<ThreadId, ApiError> {
    ThreadId::new(raw).map_err(|e| error(StatusCode::BAD_REQUEST, e))
}

type Answer = Result<Response, ApiError>;

/// A move ended.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Finished {
    /// The session's root thread.
    finished: ThreadId,
}

/// A move given up.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Aborted {
    /// The session's root thread.
    aborted: ThreadId,
}

async fn start(
    State(served): State<Arc<MigrationRoutes>>,
    Path(id): Path<String>,
    Json(request): Json<StartRequest>,
) -> Answer {
    let bundle = migration::start(served.host(), &root(&id)?, &request).await?;
    Ok(Json(bundle).into_response())
}

async fn finish(
    State(served): State<Arc<MigrationRoutes>>,
    Path(id): Path<String>,
    Json(request): Json<FinishRequest>,
) -> Answer {
    let id = root(&id)?;
    migration::finish(served.host(), &id, &request.forward).await?;
    Ok(Json(Finished { finished: id }).into_response())
}

async fn abort(State(served): State<Arc<MigrationRoutes>>, Path(id): Path<String>) -> Answer {
    let id = root(&id)?;
    migration::abort(served.host(), &id).await?;
    Ok(Json(Aborted { aborted: id }).into_response())
}

async fn forwarding(State(served): State<Arc<MigrationRoutes>>, Path(id): Path<String>) -> Answer {
    let forward = migration::forward_urls(served.host(), &root(&id)?).await?;
    Ok(Json(FinishRequest { forward }).into_response())
}

async fn import(State(served): State<Arc<MigrationRoutes>>, Json(bundle): Json<Bundle>) -> Answer {
    let imported = migration::import(served.host(), &bundle).await?;
    Ok(Json(imported).into_response())
}
