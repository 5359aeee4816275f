//! Every route of the API, with the types it reads and writes: the table the document is
//! made from. A test reads the routers' sources and fails for a route missing here (or here
//! and not routed).

use infinity_agent_core::catalog::StoredAgent;
use infinity_agent_core::migration::Bundle;
use infinity_agent_core::state::{Schedule, ThreadPage, ThreadRecord};
use infinity_agent_core::tools::internal::ListedTool;
use infinity_library::artifact::Comment;
use infinity_library::remote::Report;
use infinity_rap_runtime::migration::{FinishRequest, Imported, StartRequest};
use schemars::{json_schema, Schema, SchemaGenerator};

use super::{delete, get, post, Content, Operation};
use crate::api::{
    Accepted, Agents, Choice, Chosen, HistoryEntries, ListParams, Message, Models, NewBudget,
    ScheduleCreated, ToolResult, TreeOption, UseAgent, UseModel, WaitingTree, WidgetAction,
};
use crate::events::{Position, StreamData};
use crate::markdown::{Html, Texts};
use crate::migration::{Aborted, Finished};
use crate::remotes::{Approval, Connect, Connected, Orders, Remotes, Wait};

const HTML: Content = Content::Other("text/html; charset=utf-8");

/// `schedule_create`'s arguments, as the built-in tool gives them to models (a test holds the
/// document to have them).
fn schedule_arguments(_: &mut SchemaGenerator) -> Schema {
    infinity_agent_core::tools::builtin_tools()
        .iter()
        .map(|t| t.spec())
        .find(|s| s.name == "schedule_create")
        .and_then(|spec| Schema::try_from(spec.input_schema).ok())
        .unwrap_or_else(|| json_schema!({"description": "the schedule_create tool is missing"}))
}

/// The operations, in the order the document lists them.
pub fn all() -> Vec<Operation> {
    vec![
        get("/health", "health")
            .about("host", "Whether the server answers")
            .answers_with(200, "`ok`", Some(Content::Other("text/plain; charset=utf-8")))
            .open(),
        get("/openapi.json", "openapi")
            .about("host", "This document")
            .answers_with(200, "The OpenAPI document", Some(Content::Other("application/json")))
            .open(),
        get("/", "webApp")
            .about("web", "The web app's page (its API calls carry the token)")
            .answers_with(200, "The page", Some(HTML))
            .open(),
        get("/app/{name}", "webAppFile")
            .about("web", "A file of the web app")
            .answers_with(200, "The file", Some(Content::Other("text/javascript")))
            .errors(&[404])
            .open(),
        get("/tools/internal", "internalTools")
            .about("agents", "Every internal tool, with its category and whether it is on by default")
            .answers::<Vec<ListedTool>>(200, "The tools"),
        get("/agents/internal-tools", "agentInternalTools")
            .about("agents", "The same as `GET /tools/internal`")
            .answers::<Vec<ListedTool>>(200, "The tools"),
        get("/agents", "listAgents")
            .about("agents", "The default agent and the stored ones (the newest version of each)")
            .answers::<Agents>(200, "The agents")
            .errors(&[503]),
        get("/agents/{name}", "getAgent")
            .about("agents", "A stored agent's version")
            .answers::<StoredAgent>(200, "The agent file and its files")
            .errors(&[400, 404, 503]),
        get("/models", "listModels")
            .about("models", "The models threads may be switched to besides their agent's own")
            .answers::<Models>(200, "The allowed models and where the list is set"),
        get("/threads", "listThreads")
            .about("threads", "A page of threads, newest activity first")
            .query::<ListParams>()
            .answers::<ThreadPage>(200, "The page, and the cursor of the next one")
            .errors(&[400, 503]),
        get("/threads/{id}", "getThread")
            .about("threads", "A thread's record")
            .answers::<ThreadRecord>(200, "The record")
            .errors(&[400, 404, 500]),
        get("/threads/{id}/history", "getHistory")
            .about("threads", "A thread's history as its model sees it")
            .answers::<HistoryEntries>(200, "The entries, oldest first")
            .errors(&[400, 404, 500]),
        get("/threads/{id}/tree", "getTree")
            .about("threads", "The records of the thread and every thread below it (at most 1,000), the thread first")
            .answers::<Vec<ThreadRecord>>(200, "The records")
            .errors(&[400, 404, 503]),
        get("/threads/{id}/waiting", "getWaiting")
            .about("threads", "What would wake the thread and each open thread below it")
            .answers::<WaitingTree>(200, "The waits, the stuck ones flagged")
            .errors(&[400, 404, 500]),
        get("/threads/{id}/events", "streamEvents")
            .about("threads", "The thread's events as Server-Sent Events, resumable with `Last-Event-ID` or `?after=N`")
            .query::<Position>()
            .answers_with(200, "What the client missed, then the events as they happen; a kept event's SSE `id` is its `seq`, one shown before its slice committed has `SEQ.B.D` (resuming from it checks the client's copies: see docs/api.md). A thread not made yet streams from its first event, once it is", Some(Content::Events(super::schema::<StreamData>)))
            .errors(&[400, 503]),
        post("/threads/{id}/messages", "postMessage")
            .about("threads", "A person's message; the first one, with `agent`, starts a conversation")
            .body::<Message>()
            .answers::<Accepted>(202, "Accepted: kept, and the thread will take it")
            .errors(&[400, 404, 409, 413, 503]),
        post("/threads/{id}/choices/{call}", "answerChoice")
            .about("threads", "Answers a question a tool asked")
            .body::<Choice>()
            .answers::<Chosen>(200, "The answer given: the first stands (any later one gets 409 naming it)")
            .errors(&[400, 404, 409, 502, 503]),
        post("/threads/{id}/tool_results/{call}", "postToolResult")
            .about("threads", "The application's result for a call of a client tool (an agent file's `client_tools:`), named by the `client_tool_call` event")
            .body::<ToolResult>()
            .answers::<Accepted>(202, "Accepted: kept as the call's answer (the first stands: any later one gets 409 naming it), and the thread will take it")
            .errors(&[400, 404, 409, 413, 503]),
        post("/threads/{id}/widget-actions", "pressWidget")
            .about("threads", "A press of a button of a widget the thread showed")
            .body::<WidgetAction>()
            .answers::<Accepted>(202, "Accepted")
            .errors(&[400, 404, 409, 503]),
        post("/threads/{id}/interrupt", "interrupt")
            .about("threads", "Cancels the thread's calls in flight (`tree`: its descendants' too)")
            .optional_body::<TreeOption>()
            .answers::<Accepted>(202, "Accepted")
            .errors(&[400, 404, 409, 503]),
        post("/threads/{id}/agent", "useAgent")
            .about("threads", "Moves the thread to another version of its agent")
            .body::<UseAgent>()
            .answers::<Accepted>(202, "Accepted")
            .errors(&[400, 404, 409, 503]),
        post("/threads/{id}/model", "useModel")
            .about("threads", "The model the thread's completions use from its next one on (`null`: the agent's)")
            .body::<UseModel>()
            .answers::<Accepted>(202, "Accepted")
            .errors(&[400, 404, 409, 503]),
        post("/threads/{id}/budget", "setBudget")
            .about("threads", "The lifetime budget of the thread's conversation (what the body leaves out stays)")
            .body::<NewBudget>()
            .answers::<Accepted>(202, "Accepted; `thread_id` is the conversation's root, which keeps the budget")
            .errors(&[400, 404, 409, 503]),
        post("/threads/{id}/close", "closeThread")
            .about("threads", "Closes the thread (`tree`: with its open children)")
            .optional_body::<TreeOption>()
            .answers::<Accepted>(202, "Accepted")
            .errors(&[400, 404, 409, 503]),
        get("/threads/{id}/schedules", "listSchedules")
            .about("schedules", "The thread's recurring schedules")
            .answers::<Vec<Schedule>>(200, "The schedules")
            .errors(&[400, 404, 500]),
        post("/threads/{id}/schedules", "createSchedule")
            .about("schedules", "Creates a recurring schedule, as the `schedule_create` tool would")
            .body_from(schedule_arguments)
            .answers::<ScheduleCreated>(202, "Accepted: its id and next occurrences")
            .errors(&[400, 404, 409, 503]),
        delete("/threads/{id}/schedules/{schedule}", "deleteSchedule")
            .about("schedules", "Deletes a schedule")
            .answers::<Accepted>(202, "Accepted")
            .errors(&[400, 404, 409, 503]),
        post("/markdown", "renderMarkdown")
            .about("web", "Markdown texts as safe HTML")
            .body::<Texts>()
            .answers::<Html>(200, "Each text's HTML, in order")
            .errors(&[400, 413])
            .answers_with(503, "Not rendered within the time limit (10 s, the wait for a turn included): the server is busy, or the texts are many and large; send fewer at once, or try again", Some(Content::Json(super::schema::<crate::api::ErrorBody>))),
        post("/threads/{id}/migration", "startMigration")
            .about("migration", "Starts moving a session away: its bundle (embedded host with a store only; 409 otherwise)")
            .body::<StartRequest>()
            .answers::<Bundle>(200, "The session's bundle")
            .errors(&[400, 404, 409, 502, 503]),
        post("/threads/{id}/migration/finish", "finishMigration")
            .about("migration", "Ends a move: the session here forwards to its new host")
            .body::<FinishRequest>()
            .answers::<Finished>(200, "Finished")
            .errors(&[400, 404, 409, 502, 503]),
        post("/threads/{id}/migration/abort", "abortMigration")
            .about("migration", "Gives up a move: the session runs here again")
            .answers::<Aborted>(200, "Aborted")
            .errors(&[400, 404, 409, 502, 503]),
        post("/threads/{id}/migration/forwarding", "migrationForwarding")
            .about("migration", "Where a moved session's tool servers now send")
            .answers::<FinishRequest>(200, "The forwarding addresses")
            .errors(&[400, 404, 409, 502, 503]),
        post("/migration/import", "importMigration")
            .about("migration", "Takes in a session's bundle")
            .body::<Bundle>()
            .answers::<Imported>(200, "The threads taken in, and where their tool servers now send")
            .errors(&[400, 404, 409, 413, 502, 503]),
        get("/a", "listPages")
            .about("pages", "The public pages agents published")
            .answers_with(200, "An index page", Some(HTML))
            .errors(&[503])
            .open(),
        get("/a/{id}", "getPage")
            .about("pages", "A published page, framed, with its comments (private pages need the token)")
            .query::<crate::artifacts::Access>()
            .answers_with(200, "The page", Some(HTML))
            .errors(&[400, 401, 404, 503])
            .open(),
        get("/a/{id}/{key}/{version}/page", "getPageContent")
            .about("pages", "A page's own content, from its sandboxed origin")
            .answers_with(200, "The content", Some(HTML))
            .answers_with(303, "Loaded as a tab's page: to its frame page (`Location`)", None)
            .answers_with(403, "Loaded otherwise than in its frame (an object, a script, ...)", Some(Content::Other("text/plain; charset=utf-8")))
            .errors(&[404, 503])
            .open(),
        get("/a/{id}/{key}/{version}/files/{name}", "getPageFile")
            .about("pages", "A file of a page")
            .answers_with(200, "The file", Some(Content::Other("application/octet-stream")))
            .errors(&[404, 503])
            .open(),
        get("/a/{id}/comments", "listComments")
            .about("pages", "A page's comments")
            .query::<crate::artifacts::Access>()
            .answers::<Vec<Comment>>(200, "The comments, oldest first")
            .errors(&[400, 401, 404, 503])
            .open(),
        post("/a/{id}/comments", "postComment")
            .about("pages", "Comments on a page; the thread that published it gets the comment")
            .query::<crate::artifacts::Access>()
            .body::<crate::artifacts::NewComment>()
            .answers::<Comment>(201, "The comment, kept")
            .errors(&[400, 401, 404, 409, 429, 503])
            .open(),
        post("/remotes", "connectRemote")
            .about("remotes", "A machine connects (`infinity remote`)")
            .body::<Connect>()
            .answers::<Connected>(201, "The remote's id")
            .errors(&[400, 503]),
        get("/remotes", "listRemotes")
            .about("remotes", "The connected machines")
            .answers::<Remotes>(200, "The remotes")
            .errors(&[503]),
        get("/remotes/{id}/orders", "pollOrders")
            .about("remotes", "A remote waits for its orders (long poll)")
            .query::<Wait>()
            .answers::<Orders>(200, "The orders, perhaps none")
            .errors(&[400, 404, 503]),
        delete("/remotes/{id}", "disconnectRemote")
            .about("remotes", "A remote goes away: its runs in flight are answered as disconnected")
            .answers_with(204, "Gone", None)
            .errors(&[404, 503]),
        post("/remotes/{id}/runs/{run}", "reportRun")
            .about("remotes", "A remote reports a run's end")
            .body::<Report>()
            .answers_with(204, "Taken", None)
            .errors(&[400, 404, 503]),
        post("/remotes/approvals/{token}", "approveCommand")
            .about("remotes", "A person answers a remote command's approval (the token in the path is the credential)")
            .body::<Approval>()
            .answers_with(204, "Taken", None)
            .errors(&[400, 404, 503])
            .open(),
    ]
}
