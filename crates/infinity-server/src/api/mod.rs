//! The HTTP API's routes over threads (see [the crate docs](crate) for the table of them), written
//! once for every host over its [`Front`]: the embedded runtime
//! ([`infinity_agent_core::runtime::AgentSystem`]) and a stack's table and queues (`infinity
//! serve --aws`, [`infinity_aws::front::StackFront`]).

mod bodies;
pub(crate) mod extract;

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use infinity_agent_core::ids::{InputId, ThreadId};
use infinity_agent_core::runtime::{Front, PostError};
use infinity_agent_core::state::{ThreadKind, ThreadQuery, ThreadStatus};
use infinity_agent_core::store::load_view;
use schemars::JsonSchema;
use serde::Deserialize;

pub use bodies::*;
pub(crate) use extract::{Json, Path, Query};

/// Every internal tool of the categories the hosts run agents with.
async fn internal_tools() -> Json<Vec<infinity_agent_core::tools::internal::ListedTool>> {
    Json(infinity_library::categories().listing())
}

/// The routes over threads and agents, on `host`.
pub fn routes(host: Shared) -> Router {
    Router::new()
        .route("/agents/internal-tools", get(internal_tools))
        // An alias, kept until a release notes its removal (docs/architecture.md's shims).
        .route("/tools/internal", get(internal_tools))
        .route("/agents", get(agents))
        .route("/models", get(models))
        .route("/agents/{name}", get(agent))
        .route("/threads", get(threads))
        .route("/threads/{id}", get(thread))
        .route("/threads/{id}/history", get(history))
        .route("/threads/{id}/tree", get(tree))
        .route("/threads/{id}/waiting", get(waiting))
        .route("/threads/{id}/messages", post(message))
        .route("/threads/{id}/choices/{call}", post(choose))
        .route("/threads/{id}/tool_results/{call}", post(tool_result))
        .route("/threads/{id}/widget-actions", post(widget_action))
        .route("/threads/{id}/interrupt", post(interrupt))
        .route("/threads/{id}/agent", post(use_agent))
        .route("/threads/{id}/model", post(use_model))
        .route("/threads/{id}/budget", post(set_budget))
        .route("/threads/{id}/close", post(close))
        .route(
            "/threads/{id}/schedules",
            get(schedules).post(create_schedule),
        )
        .route(
            "/threads/{id}/schedules/{schedule}",
            axum::routing::delete(delete_schedule),
        )
        .with_state(host)
}

/// `app` answering a path no route has (404) and a method its route does not take (405, with
/// `Allow`) as every error is answered, with `{"error": ...}`.
pub fn with_fallbacks(app: Router) -> Router {
    async fn unrouted(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
        error(
            StatusCode::NOT_FOUND,
            format!("no route {method} {}", uri.path()),
        )
    }
    async fn not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
        error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{} takes no {method} (`Allow` says what it takes)",
                uri.path()
            ),
        )
    }
    app.fallback(unrouted)
        .method_not_allowed_fallback(not_allowed)
}

/// The host the routes serve.
pub type Shared = Arc<dyn Front>;

/// An error answer: a status and `{"error": message}`.
#[derive(Debug)]
pub(crate) struct ApiError(pub(crate) StatusCode, pub(crate) String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(ErrorBody { error: self.1 })).into_response()
    }
}

pub(crate) fn error(status: StatusCode, message: impl std::fmt::Display) -> ApiError {
    ApiError(status, message.to_string())
}

fn thread_id(raw: &str) -> Result<ThreadId, ApiError> {
    ThreadId::new(raw).map_err(|e| error(StatusCode::BAD_REQUEST, e))
}

/// The thread's record, or 404.
async fn record_of(
    system: &dyn Front,
    id: &ThreadId,
) -> Result<infinity_agent_core::state::ThreadRecord, ApiError> {
    system
        .threads()
        .load_record(id)
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e))?
        .ok_or_else(|| error(StatusCode::NOT_FOUND, format!("no thread {id}")))
}

type Answer = Result<Response, ApiError>;

/// `GET /models`: the models people may switch threads to (`POST /threads/{id}/model`), besides
/// each thread's agent's own, and where the list is set.
async fn models(State(system): State<Shared>) -> Answer {
    let allowed = system.allowed_models();
    Ok(Json(Models {
        allowed: allowed.specs().to_vec(),
        set_in: allowed.set_in().to_owned(),
    })
    .into_response())
}

/// The stored agents (the newest version of each) and the default agent.
async fn agents(State(system): State<Shared>) -> Answer {
    let stored = match system.agent_catalog() {
        Some(catalog) => catalog
            .list()
            .await
            .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?,
        None => Vec::new(),
    };
    let stored = stored
        .into_iter()
        .map(|a| AgentVersion {
            name: a.name,
            version: a.version,
            description: a.description,
            saved_at: a.saved_at,
        })
        .collect();
    Ok(Json(Agents {
        default: system.default_agent_name().to_owned(),
        stored,
    })
    .into_response())
}

/// One stored agent: `NAME` (the newest version) or `NAME@VERSION`.
async fn agent(State(system): State<Shared>, Path(name): Path<String>) -> Answer {
    let reference = infinity_agent_core::catalog::AgentRef::parse(&name)
        .map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let Some(catalog) = system.agent_catalog() else {
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

/// `GET /threads`'s query: filters, a cursor and a limit (see [`ThreadQuery`]). Each is read
/// here, so that a bad one gets an error naming it; the document gives the types they take.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only conversations people started (`true`), or every thread (`false`, the default).
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    roots: Option<String>,
    /// Only threads of this kind.
    #[serde(default)]
    #[schemars(with = "Option<ThreadKind>")]
    kind: Option<String>,
    /// Only open or only closed threads.
    #[serde(default)]
    #[schemars(with = "Option<ThreadStatus>")]
    status: Option<String>,
    /// Only threads of this agent.
    #[serde(default)]
    agent: Option<String>,
    /// Only threads whose title or id contains this, ignoring case.
    #[serde(default)]
    title: Option<String>,
    /// Only threads with activity at or after this time.
    #[serde(default)]
    #[schemars(with = "Option<infinity_agent_core::schema::Rfc3339>")]
    updated_since: Option<String>,
    /// The `next` of the page before.
    #[serde(default)]
    #[schemars(regex(pattern = infinity_agent_core::state::thread_list::CURSOR_PATTERN))]
    cursor: Option<String>,
    /// How many threads a page has at most (default 50).
    #[serde(default)]
    #[schemars(with = "Option<u16>", range(min = 1, max = 500))]
    limit: Option<String>,
    /// The token, for clients that cannot set headers (read by the guard; in the document as
    /// a security scheme).
    #[serde(default, rename = "access_token")]
    #[schemars(skip)]
    _access_token: Option<String>,
}

fn bad(name: &str, value: &str, what: &str) -> ApiError {
    error(
        StatusCode::BAD_REQUEST,
        format!("`{name}` must be {what}, not `{value}`"),
    )
}

impl ListParams {
    fn query(self) -> Result<ThreadQuery, ApiError> {
        let roots = match self.roots.as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => return Err(bad("roots", other, "true or false")),
        };
        let kind = match self.kind.as_deref() {
            None => None,
            Some("conversation") => Some(ThreadKind::Conversation),
            Some("delegation") => Some(ThreadKind::Delegation),
            Some("child") => Some(ThreadKind::Child),
            Some(other) => return Err(bad("kind", other, "conversation, delegation or child")),
        };
        let status = match self.status.as_deref() {
            None => None,
            Some("open") => Some(ThreadStatus::Open),
            Some("closed") => Some(ThreadStatus::Closed),
            Some(other) => return Err(bad("status", other, "open or closed")),
        };
        let updated_since = match self.updated_since.as_deref() {
            None => None,
            Some(raw) => Some(raw.parse::<jiff::Timestamp>().map_err(|_| {
                bad(
                    "updated_since",
                    raw,
                    "a time in RFC 3339 (2026-05-01T21:07:09Z)",
                )
            })?),
        };
        let limit = match self.limit.as_deref() {
            None => ThreadQuery::DEFAULT_LIMIT,
            Some(raw) => match raw.parse::<usize>() {
                Ok(n) if (1..=ThreadQuery::MAX_LIMIT).contains(&n) => n,
                _ => {
                    return Err(bad(
                        "limit",
                        raw,
                        &format!("a whole number from 1 to {}", ThreadQuery::MAX_LIMIT),
                    ))
                }
            },
        };
        if let Some(cursor) = &self.cursor {
            if infinity_agent_core::state::thread_list::read_cursor(cursor).is_none() {
                return Err(bad("cursor", cursor, "the `next` of a page of this list"));
            }
        }
        Ok(ThreadQuery {
            kind,
            roots,
            status,
            agent: self.agent.filter(|a| !a.is_empty()),
            title: self.title.filter(|t| !t.trim().is_empty()),
            updated_since,
            cursor: self.cursor,
            limit,
        })
    }
}

/// `GET /threads`: a page of threads, newest activity first (`{"threads": [summary...],
/// "next": cursor or null}`), filtered by the query.
async fn threads(State(system): State<Shared>, Query(params): Query<ListParams>) -> Answer {
    let page = system
        .threads()
        .list_threads(&params.query()?)
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?;
    Ok(Json(page).into_response())
}

/// The most threads `GET /threads/{id}/tree` reads.
const TREE_LIMIT: usize = 1_000;

/// `GET /threads/{id}/tree`: the records of the thread and of every thread below it (its
/// children's, theirs, ...), the thread first; at most 1,000.
async fn tree(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    let first = record_of(system.as_ref(), &id).await?;
    let mut queue: std::collections::VecDeque<ThreadId> =
        first.children.iter().map(|c| c.thread_id.clone()).collect();
    let mut records = vec![first];
    while let Some(child) = queue.pop_front() {
        if records.len() >= TREE_LIMIT {
            break;
        }
        if let Some(record) = system
            .threads()
            .load_record(&child)
            .await
            .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?
        {
            queue.extend(record.children.iter().map(|c| c.thread_id.clone()));
            records.push(record);
        }
    }
    Ok(Json(records).into_response())
}

async fn thread(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    Ok(Json(record_of(system.as_ref(), &id).await?).into_response())
}

async fn history(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    let record = record_of(system.as_ref(), &id).await?;
    let view = load_view(system.threads(), &record)
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    // The last event the history includes: a client streams events after it.
    Ok((
        [("last-event-id", record.last_event_seq.to_string())],
        Json(view.iter().map(|e| &**e).collect::<Vec<_>>()),
    )
        .into_response())
}

/// `GET /threads/{id}/waiting`: what would wake the thread and each open thread below it, the
/// stuck ones flagged (`infinity status` prints the same).
async fn waiting(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    let threads = infinity_agent_core::store::waiting(system.threads(), &id)
        .await
        .map_err(|e| error(StatusCode::INTERNAL_SERVER_ERROR, e))?
        .ok_or_else(|| error(StatusCode::NOT_FOUND, format!("no thread {id}")))?;
    let stuck = threads.iter().filter(|t| t.stuck.is_some()).count();
    Ok(Json(WaitingTree {
        thread_id: id,
        stuck,
        threads,
    })
    .into_response())
}

async fn message(
    State(system): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<Message>,
) -> Answer {
    let id = thread_id(&id)?;
    if infinity_agent_core::text::is_blank(&body.text) {
        return Err(error(StatusCode::BAD_REQUEST, "`text` is empty"));
    }
    let input = match &body.agent {
        Some(agent) => system.start_conversation(&id, body.text, agent).await,
        None => system.post_message(&id, body.text, body.while_busy).await,
    }
    .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `POST /threads/{id}/tool_results/{call}`: the application's result for a call of one of the
/// thread's client tools (202; 404 for an unknown thread, 409 for a closed one or a call that
/// does not wait for the application: answered already, cancelled, not a client tool's).
async fn tool_result(
    State(system): State<Shared>,
    Path((id, call)): Path<(String, String)>,
    Json(body): Json<ToolResult>,
) -> Answer {
    let id = thread_id(&id)?;
    let call = infinity_agent_core::ids::CallId::new(&call)
        .map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let input = system
        .post_tool_result(&id, &call, body.text, body.is_error)
        .await
        .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `POST /threads/{id}/widget-actions`: a person pressed a button of a widget the thread showed
/// (202; 404 for an unknown thread, 409 for a closed one).
async fn widget_action(
    State(system): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<WidgetAction>,
) -> Answer {
    let id = thread_id(&id)?;
    if infinity_agent_core::text::is_blank(&body.action) {
        return Err(error(StatusCode::BAD_REQUEST, "`action` is empty"));
    }
    let record = record_of(system.as_ref(), &id).await?;
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
    let input_id = system.post(input).await.map_err(post_error)?;
    Ok(accepted(&id, &input_id))
}

/// `POST /threads/{id}/close` (`{"tree": true}` when it has open children, which close with
/// it): closes the thread (202; 409 if closed, or with open children and no `tree`).
async fn close(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: Option<Json<TreeOption>>,
) -> Answer {
    let id = thread_id(&id)?;
    let input = system
        .close(&id, tree_option(body))
        .await
        .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `GET /threads/{id}/schedules`: the thread's recurring schedules.
async fn schedules(State(system): State<Shared>, Path(id): Path<String>) -> Answer {
    let id = thread_id(&id)?;
    Ok(Json(record_of(system.as_ref(), &id).await?.schedules).into_response())
}

/// `POST /threads/{id}/schedules` (`schedule_create`'s arguments): creates one (202 with its
/// id and next occurrences; 400 naming what is wrong).
async fn create_schedule(
    State(system): State<Shared>,
    Path(id): Path<String>,
    Json(args): Json<serde_json::Value>,
) -> Answer {
    let id = thread_id(&id)?;
    let (schedule, text) = system
        .create_schedule(&id, &args)
        .await
        .map_err(post_error)?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ScheduleCreated {
            thread_id: id,
            schedule_id: schedule,
            text,
        }),
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
fn accepted(id: &ThreadId, input: &InputId) -> Response {
    (
        StatusCode::ACCEPTED,
        Json(Accepted {
            thread_id: id.clone(),
            input_id: input.clone(),
        }),
    )
        .into_response()
}

fn post_error(e: PostError) -> ApiError {
    match e {
        PostError::NoSchedule { .. } => error(StatusCode::NOT_FOUND, e),
        PostError::BadSchedule(_)
        | PostError::BadAgent(_)
        | PostError::BadModel { .. }
        | PostError::BadBudget(_)
        | PostError::EmptyMessage(_) => error(StatusCode::BAD_REQUEST, e),
        PostError::NoAgent(_) => error(StatusCode::NOT_FOUND, e),
        PostError::Closed(_)
        | PostError::KeepsAgent(_)
        | PostError::OpenChildren { .. }
        | PostError::Busy(_)
        | PostError::Answered { .. }
        | PostError::NoClientCall { .. } => error(StatusCode::CONFLICT, e),
        PostError::Undelivered(_) => error(StatusCode::BAD_GATEWAY, e),
        PostError::Unknown(_) => error(StatusCode::NOT_FOUND, e),
        // The input was not kept (the store's inbox, the queue): nothing was accepted.
        PostError::Store(ref err) if err.is_retryable() => {
            error(StatusCode::SERVICE_UNAVAILABLE, e)
        }
        PostError::Unavailable(_) => error(StatusCode::SERVICE_UNAVAILABLE, e),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

/// `close`'s and `interrupt`'s `tree`, false when the body is left out.
fn tree_option(body: Option<Json<TreeOption>>) -> bool {
    body.is_some_and(|Json(option)| option.tree)
}

/// `POST /threads/{id}/interrupt` (`{"tree": true}`: its open descendants too): cancels the
/// calls in flight (202).
async fn interrupt(
    State(system): State<Shared>,
    Path(id): Path<String>,
    body: Option<Json<TreeOption>>,
) -> Answer {
    let id = thread_id(&id)?;
    let input = system
        .interrupt(&id, tree_option(body))
        .await
        .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `{"agent": "NAME" | "NAME@VERSION"}`: moves the thread to that version of its agent.
async fn use_agent(
    State(system): State<Shared>,
    Path(id): Path<String>,
    Json(UseAgent { agent }): Json<UseAgent>,
) -> Answer {
    let id = thread_id(&id)?;
    let input = system.use_agent(&id, &agent).await.map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `{"model": "PROVIDER:MODEL"}` (or `null`, back to the agent's): the model the thread's
/// completions use from its next one on; one of `GET /models` or the agent's own (400 otherwise,
/// decided on the spec alone: a `script:` path is never read for it).
async fn use_model(
    State(system): State<Shared>,
    Path(id): Path<String>,
    Json(UseModel { model }): Json<UseModel>,
) -> Answer {
    let id = thread_id(&id)?;
    let input = system
        .use_model(&id, model.as_deref())
        .await
        .map_err(post_error)?;
    Ok(accepted(&id, &input))
}

/// `{"usd": 10}`, `{"tokens": 5000000}` or both: the lifetime budget of the conversation the
/// thread is part of (its root takes it; what the body leaves out stays). Threads stopped at
/// the budget go on once it is no longer reached. 202 with the root's id.
async fn set_budget(
    State(system): State<Shared>,
    Path(id): Path<String>,
    Json(budget): Json<NewBudget>,
) -> Answer {
    let id = thread_id(&id)?;
    let (input, root) = system
        .set_budget(&id, budget.into())
        .await
        .map_err(post_error)?;
    Ok(accepted(&root, &input))
}

async fn choose(
    State(system): State<Shared>,
    Path((id, call)): Path<(String, String)>,
    Json(body): Json<Choice>,
) -> Answer {
    let id = thread_id(&id)?;
    if body.selected.is_some() && body.dismiss {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "give `selected` (an index) or `dismiss: true`, not both",
        ));
    }
    if body.selected.is_none() && !body.dismiss {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "give `selected` (an index) or `dismiss: true`",
        ));
    }
    let post = infinity_agent_core::runtime::poster(system.as_ref());
    let chosen = infinity_rap_runtime::client::answer_question(
        system.threads(),
        &post,
        &id,
        Some(&call),
        body.selected.into(),
        system.now(),
    )
    .await
    .map_err(|e| {
        use infinity_rap_runtime::client::ChoiceError;
        match e {
            ChoiceError::Delivery(_) => error(StatusCode::BAD_GATEWAY, e),
            ChoiceError::NoThread(_) | ChoiceError::NoQuestion { .. } => {
                error(StatusCode::NOT_FOUND, e)
            }
            ChoiceError::Refused(refused) => post_error(refused),
            _ => error(StatusCode::BAD_REQUEST, e),
        }
    })?;
    Ok(Json(Chosen {
        choice: chosen.choice().to_owned(),
        call_id: call,
        selected: chosen.selected,
    })
    .into_response())
}
