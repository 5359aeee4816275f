//! Commands that talk to a deployed (or local) AWS stack: `send`, `thread show`,
//! `thread outbox`, `tail`, `choose`.
//!
//! Queue URLs and the table come from flags or from the `INFINITY_*` variables that
//! `infra/local/env.sh` (local stack) exports; endpoints from `--endpoint` or the standard
//! `AWS_ENDPOINT_URL[_<SERVICE>]` variables.

use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use infinity_agent_core::effect::OutputEvent;
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::{InputId, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::state::ThreadStatus;
use infinity_agent_core::store::{load_view, ThreadStore};
use infinity_aws::config::Clients;
use infinity_aws::queue::SqsInputSender;
use infinity_aws::store::DynamoThreadStore;

use crate::render::Renderer;

#[derive(Debug, Args)]
pub struct Endpoint {
    /// One endpoint for every AWS service (e.g. http://localhost:4566 for LocalStack).
    #[arg(long)]
    pub(crate) endpoint: Option<String>,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread (the message group); a new id creates a thread with the deployment's agent.
    #[arg(long)]
    thread: String,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// The input id, the deduplication key (default: a new one).
    #[arg(long)]
    id: Option<String>,
    /// The table (default: $INFINITY_TABLE). When it is known, a closed thread is refused here
    /// rather than dropped by the deployment.
    #[arg(long)]
    table: Option<String>,
    /// The message.
    #[arg(required_unless_present = "file")]
    message: Option<String>,
    /// Read the message from this file instead (`-`: standard input), for one longer than a
    /// command line holds.
    #[arg(long, conflicts_with = "message", value_name = "FILE")]
    file: Option<std::path::PathBuf>,
    /// What the message does if the thread is busy (a call it made has no result yet), instead
    /// of what its agent says: move_on, queue, interrupt or reject (refused here when the table
    /// is known and the thread is busy).
    #[arg(long, value_name = "POLICY")]
    while_busy: Option<infinity_agent_core::state::WhileBusy>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// The table (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
    /// Print the record and the history as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct OutboxArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// Put this failed effect (its id, or `all`) back into the outbox and nudge the thread, so
    /// the deployment performs it before the thread's next slice. Repeatable.
    #[arg(long, value_name = "EFFECT")]
    retry: Vec<String>,
    /// Delete this failed effect (its id, or `all`) for good. Repeatable.
    #[arg(long, value_name = "EFFECT", conflicts_with = "retry")]
    drop: Vec<String>,
    /// The table (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
    /// The input queue, for the nudge after --retry (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// Print the effects as JSON.
    #[arg(long)]
    json: bool,
}

/// `infinity tail` consumes the output queue: it deletes the events it shows. With `--thread`
/// it leaves the other threads' events on the queue for other readers (it makes them visible
/// again at once). Copies of an event (same `id`) are shown once.
#[derive(Debug, Args)]
pub struct TailArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// Only this thread's events.
    #[arg(long)]
    thread: Option<String>,
    /// The output queue (default: $INFINITY_OUTPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// Print JSON lines.
    #[arg(long)]
    json: bool,
    /// Stop after this many seconds without events (default: run until Ctrl-C).
    #[arg(long)]
    idle_exit: Option<u64>,
}

/// Answers a tool server's question (`user_choice`) on a thread.
#[derive(Debug, Args)]
pub struct ChooseArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// The call that asked (see `infinity thread show`).
    call: String,
    /// The option, from 0; leave out with --dismiss to send the question's default.
    index: Option<usize>,
    /// Dismiss the question: the tool server gets its default option.
    #[arg(long, conflicts_with = "index")]
    dismiss: bool,
    /// The table (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
}

pub async fn choose(args: ChooseArgs) -> Result<u8> {
    if args.index.is_none() && !args.dismiss {
        anyhow::bail!("give the option's index, or --dismiss to send the default");
    }
    let table = setting(args.table, "INFINITY_TABLE", "table")?;
    let queue_url = setting(
        args.queue_url,
        "INFINITY_INPUT_QUEUE_URL",
        "input queue URL",
    )?;
    let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
    let store =
        DynamoThreadStore::new(clients.dynamodb.clone(), table, Duration::from_secs(86_400));
    let sender = SqsInputSender::new(clients.sqs, queue_url);
    let thread = ThreadId::new(args.thread.as_str())?;
    let chosen =
        infinity_aws::tool_servers::answer_choice(&store, &sender, &thread, &args.call, args.index)
            .await?;
    crate::out!(
        "answered {} with {}: {}",
        chosen.question.call_id,
        chosen.selected,
        chosen.choice()
    );
    Ok(0)
}

/// The table's store, and the named thread's id and record (an error if it does not exist).
pub(crate) async fn load_thread(
    clients: &Clients,
    table: String,
    thread: &str,
) -> Result<(
    DynamoThreadStore,
    ThreadId,
    infinity_agent_core::state::ThreadRecord,
)> {
    let store =
        DynamoThreadStore::new(clients.dynamodb.clone(), table, Duration::from_secs(86_400));
    let thread = ThreadId::new(thread)?;
    let record = store
        .load_record(&thread)
        .await?
        .with_context(|| format!("thread {thread} does not exist"))?;
    Ok((store, thread, record))
}

pub(crate) fn setting(flag: Option<String>, var: &str, what: &str) -> Result<String> {
    flag.or_else(|| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .ok_or_else(|| {
            anyhow!("no {what}: pass it as a flag or set {var} (for the local stack: source infra/local/env.sh)")
        })
}

pub async fn send(args: SendArgs) -> Result<u8> {
    let queue_url = setting(
        args.queue_url,
        "INFINITY_INPUT_QUEUE_URL",
        "input queue URL",
    )?;
    let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
    let thread = ThreadId::new(args.thread.as_str())?;
    // Sending needs only the queue; when the table is known too, a closed thread is refused
    // here instead of dropped silently by the deployment, and a message too big for the queue
    // is stored in the table for the deployment to read.
    let mut sender = SqsInputSender::new(clients.sqs.clone(), queue_url);
    if let Some(table) = args
        .table
        .or_else(|| std::env::var("INFINITY_TABLE").ok())
        .filter(|t| !t.trim().is_empty())
    {
        let store =
            DynamoThreadStore::new(clients.dynamodb.clone(), table, Duration::from_secs(86_400));
        if let Some(record) = store.load_record(&thread).await? {
            if record.status == ThreadStatus::Closed {
                anyhow::bail!("thread {thread} is closed; it takes no more messages");
            }
            if record.refuses_message(args.while_busy) {
                anyhow::bail!(
                    "{}",
                    infinity_agent_core::runtime::PostError::Busy(thread.clone())
                );
            }
        }
        sender = sender.with_stash(store);
    }
    let message = match (args.message, args.file) {
        (Some(message), _) => message,
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .context("reading the message from standard input")?;
            text
        }
        (None, Some(path)) => std::fs::read_to_string(&path)
            .with_context(|| format!("reading the message from {}", path.display()))?,
        (None, None) => anyhow::bail!("give the message, or --file FILE"),
    };
    if infinity_agent_core::text::is_blank(&message) {
        anyhow::bail!("the message is empty (or only whitespace); write some text");
    }
    let mut input = Input::user_message(thread.clone(), message);
    if let InputBody::UserMessage { while_busy, .. } = &mut input.body {
        *while_busy = args.while_busy;
    }
    if let Some(id) = args.id {
        input.id = InputId::new(id)?;
    }
    sender.send_to_input_queue(&input).await?;
    crate::out!("sent {} to thread {thread}", input.id);
    Ok(0)
}

pub async fn show(args: ShowArgs) -> Result<u8> {
    let table = setting(args.table, "INFINITY_TABLE", "table")?;
    let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
    let (store, _, record) = load_thread(&clients, table, &args.thread).await?;
    let view = load_view(&store, &record).await?;
    if args.json {
        let out = serde_json::json!({
            "record": record,
            "history": view.iter().map(|e| &**e).collect::<Vec<_>>(),
        });
        crate::out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    crate::out!(
        "thread {}{}",
        record.id,
        record
            .title
            .as_deref()
            .map(|t| format!(" \"{t}\""))
            .unwrap_or_default()
    );
    crate::out!(
        "  agent {}, {:?}, version {}",
        record.agent,
        record.status,
        record.version
    );
    if let Some(m) = &record.migration {
        let state = match m.state {
            infinity_agent_core::state::MigrationState::Moving => "moving",
            infinity_agent_core::state::MigrationState::Moved { .. } => {
                "moved (what reaches it here is forwarded)"
            }
        };
        crate::out!("  {state} to {} since {}", m.to, m.since);
    }
    crate::out!(
        "  stack {}",
        record
            .lineage
            .iter()
            .map(ThreadId::as_str)
            .collect::<Vec<_>>()
            .join(" > ")
    );
    crate::out!(
        "  usage: {} ({} input, {} read from cache, {} written to cache, {} output)",
        crate::activity::spent(&record.usage),
        record.usage.input_tokens,
        record.usage.cache_read_tokens,
        record.usage.cache_write_tokens,
        record.usage.output_tokens
    );
    if let Some(conversation) = crate::activity::conversation_spent(&record) {
        crate::out!("  conversation: {conversation}");
    }
    if let Some(suspension) = &record.suspended {
        crate::out!(
            "  stopped since {}: {}",
            suspension.since,
            suspension.reason
        );
    }
    for p in &record.pending_calls {
        let waits = if p.approval.is_some() {
            " (waiting for a person's approval: the question below)".to_owned()
        } else if p.client.is_some() {
            format!(
                " (a client tool's: its application answers, or `infinity tool-result {} {} TEXT`)",
                record.id, p.call_id
            )
        } else {
            p.due.map(|d| format!("until {d}")).unwrap_or_default()
        };
        crate::out!("  pending {} {} {waits}", p.tool, p.call_id);
    }
    for c in &record.children {
        crate::out!(
            "  child {}{}",
            c.thread_id,
            if c.closed { " (closed)" } else { "" }
        );
    }
    for s in &record.subscriptions {
        crate::out!("  subscription {} {}", s.tool, s.call_id);
    }
    for c in &record.open_choices {
        let options: Vec<String> = c
            .choices
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{i}) {o}"))
            .collect();
        crate::out!(
            "  question from call {}: {} {} (default {}; answer with `infinity choose {} {} INDEX`)",
            c.call_id,
            c.prompt,
            options.join("  "),
            c.default,
            record.id,
            c.call_id
        );
    }
    for (view_type, content) in &record.views {
        crate::out!(
            "  view {view_type}: {}",
            crate::render::clip(&serde_json::Value::Object(content.clone()).to_string(), 200)
        );
    }
    if let Some(toolset) = &record.conversation.toolset {
        let names: Vec<&str> = toolset.tools.iter().map(|t| t.spec.name.as_str()).collect();
        crate::out!("  tool server tools: {}", names.join(", "));
        for problem in &toolset.problems {
            crate::out!("  tool server problem: {problem}");
        }
    }
    let failed = store.failed_effects(&record.id).await?;
    if !failed.is_empty() {
        crate::out!(
            "  {} effect(s) failed and were set aside: `infinity thread outbox {}`",
            failed.len(),
            record.id
        );
    }
    crate::out!(
        "history ({} entries, {} inherited):",
        view.len(),
        view.len() as u64 - record.history_len
    );
    Renderer::new(false).show_view(&record, &view);
    Ok(0)
}

/// The ids `--retry`/`--drop` name among the failed effects (`all`: every one); an id that is
/// not among them is an error naming it.
fn chosen_effects(
    asked: &[String],
    failed: &[infinity_aws::store::FailedEffect],
) -> Result<Vec<infinity_agent_core::ids::EffectId>> {
    if asked.iter().any(|a| a == "all") {
        return Ok(failed.iter().map(|f| f.effect.id.clone()).collect());
    }
    asked
        .iter()
        .map(|a| {
            failed
                .iter()
                .find(|f| f.effect.id.as_str() == a)
                .map(|f| f.effect.id.clone())
                .ok_or_else(|| {
                    anyhow!(
                        "no failed effect {a} on this thread (see `infinity thread outbox THREAD`)"
                    )
                })
        })
        .collect()
}

/// One line about an effect: its id, kind and what it carries.
fn describe_effect(effect: &infinity_agent_core::effect::PendingEffect) -> String {
    use infinity_agent_core::effect::Effect;
    let what = match &effect.effect {
        Effect::Send { input } => format!("{} to thread {}", input.body.kind(), input.thread_id),
        Effect::SendAt { input, due } => {
            format!(
                "{} to thread {} at {due}",
                input.body.kind(),
                input.thread_id
            )
        }
        Effect::Dispatch { invocation } => {
            format!("call {} of {}", invocation.call_id, invocation.tool)
        }
        Effect::Notify { .. } => "a notice to tool servers".to_owned(),
        Effect::Output { event } => format!("{} event", event.kind.kind()),
        Effect::Forward { url, input } => {
            let host = url.split("/rap/").next().unwrap_or(url);
            format!("{} forwarded to {host}", input.body.kind())
        }
        library @ Effect::Library { op, .. } => {
            describe_library_write(library.library_category().unwrap_or_default(), op)
        }
    };
    format!("{} {} ({what})", effect.id, effect.effect.kind())
}

/// A write of a category's shelf, said in the category's words where this CLI knows them.
fn describe_library_write(category: &str, op: &serde_json::Value) -> String {
    use infinity_library::artifact::ArtifactOp;
    use infinity_library::knowledge::KnowledgeOp;
    let known = match category {
        "knowledge" => match serde_json::from_value(op.clone()) {
            Ok(KnowledgeOp::SaveKnowledge { entry }) => {
                Some(format!("saving knowledge `{}`", entry.name))
            }
            Err(_) => None,
        },
        "artifact" => match serde_json::from_value(op.clone()) {
            Ok(ArtifactOp::PublishArtifact { meta, .. }) => Some(format!(
                "publishing page {} version {}",
                meta.id, meta.version
            )),
            Ok(ArtifactOp::AnswerComment {
                artifact_id,
                comment_id,
                ..
            }) => Some(format!(
                "answering comment {comment_id} on page {artifact_id}"
            )),
            Err(_) => None,
        },
        _ => None,
    };
    known.unwrap_or_else(|| {
        let what = op
            .get("op")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?");
        format!("a write of the {category} category ({what})")
    })
}

pub async fn outbox(args: OutboxArgs) -> Result<u8> {
    let table = setting(args.table, "INFINITY_TABLE", "table")?;
    let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
    let store =
        DynamoThreadStore::new(clients.dynamodb.clone(), table, Duration::from_secs(86_400));
    let thread = ThreadId::new(args.thread.as_str())?;
    // Messages kept aside may be all a thread has (its first message was unusable), so a
    // thread with no record is not an error here unless nothing is kept for it either.
    let unusable = store.unusable_inputs(&thread).await?;
    if store.load_record(&thread).await?.is_none() && unusable.is_empty() {
        anyhow::bail!("thread {thread} does not exist");
    }
    let failed = store.failed_effects(&thread).await?;
    if !args.drop.is_empty() {
        let ids = chosen_effects(&args.drop, &failed)?;
        let dropped = store.drop_failed(&thread, &ids).await?;
        crate::out!("dropped {dropped} failed effect(s) of thread {thread}");
        return Ok(0);
    }
    if !args.retry.is_empty() {
        let ids = chosen_effects(&args.retry, &failed)?;
        let queue_url = setting(
            args.queue_url,
            "INFINITY_INPUT_QUEUE_URL",
            "input queue URL",
        )?;
        let moved = store.retry_failed(&thread, &ids).await?;
        // The deployment performs a thread's outbox when the thread next runs: make it run.
        let nudge = Input {
            id: InputId::generate(),
            thread_id: thread.clone(),
            body: infinity_agent_core::input::InputBody::Nudge {},
        };
        SqsInputSender::new(clients.sqs, queue_url)
            .send_to_input_queue(&nudge)
            .await?;
        crate::out!(
            "put {moved} effect(s) back into thread {thread}'s outbox and nudged it; `infinity thread outbox {thread}` shows what is left"
        );
        return Ok(0);
    }
    let pending = store.thread_outbox(&thread).await?;
    if args.json {
        let out = serde_json::json!({ "pending": pending, "failed": failed, "unusable_inputs": unusable });
        crate::out!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    if pending.is_empty() && failed.is_empty() && unusable.is_empty() {
        crate::out!("thread {thread}: the outbox is empty and no effect has failed");
        return Ok(0);
    }
    if !unusable.is_empty() {
        crate::out!(
            "unusable input messages (kept aside, not run; kept {} days):",
            infinity_aws::store::STASH_TTL.as_secs() / 86_400
        );
        for u in &unusable {
            let cut = if u.body.len() < u.body_bytes {
                format!(" (first {} of {} bytes)", u.body.len(), u.body_bytes)
            } else {
                String::new()
            };
            crate::out!(
                "  message {} kept {}: {}\n    body{cut}: {}",
                u.message_id,
                u.kept_at,
                crate::render::printable(&u.reason),
                crate::render::printable(&crate::render::clip(&u.body, 500))
            );
        }
    }
    if !pending.is_empty() {
        crate::out!("pending (performed when the thread next runs):");
        for effect in &pending {
            crate::out!("  {}", describe_effect(effect));
        }
    }
    if !failed.is_empty() {
        crate::out!("failed (set aside; --retry EFFECT|all puts them back, --drop EFFECT|all deletes them):");
        for f in &failed {
            crate::out!(
                "  {} — {} attempts, set aside {}: {}",
                describe_effect(&f.effect),
                f.attempts,
                f.failed_at,
                crate::render::printable(&f.reason)
            );
        }
    }
    Ok(0)
}

pub async fn tail(args: TailArgs) -> Result<u8> {
    let queue_url = setting(
        args.queue_url,
        "INFINITY_OUTPUT_QUEUE_URL",
        "output queue URL",
    )?;
    let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
    let mut renderer = Renderer::new(args.json);
    let mut seen = infinity_aws::queue::SeenEvents::new(10_000);
    let mut idle = Duration::ZERO;
    loop {
        let got = clients
            .sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(5)
            .send()
            .await
            .map_err(|e| anyhow!("reading the output queue: {e:?}"))?;
        let mut ours = 0;
        for m in got.messages() {
            let body = m.body().unwrap_or("");
            let event = serde_json::from_str::<OutputEvent>(body);
            let mine = match &event {
                Ok(event) => args
                    .thread
                    .as_deref()
                    .is_none_or(|t| t == event.thread_id.as_str()),
                // Unreadable: not for this reader to judge when it follows one thread.
                Err(_) => args.thread.is_none(),
            };
            let Some(receipt) = m.receipt_handle() else {
                continue;
            };
            if !mine {
                // Another thread's event: back on the queue for its readers, now.
                if let Err(err) = clients
                    .sqs
                    .change_message_visibility()
                    .queue_url(&queue_url)
                    .receipt_handle(receipt)
                    .visibility_timeout(0)
                    .send()
                    .await
                {
                    eprintln!("an event of another thread stays hidden until the queue's visibility timeout: {err:?}");
                }
                continue;
            }
            ours += 1;
            match event {
                Ok(event) if seen.first_time(body) => {
                    if args.json {
                        // As published: with its `id` and what the event type does not carry
                        // (a `truncated` flag).
                        match serde_json::from_str::<serde_json::Value>(body) {
                            Ok(value) => crate::out!("{value}"),
                            Err(_) => renderer.show(&event),
                        }
                    } else {
                        renderer.show(&event);
                    }
                }
                Ok(_) => {} // a copy of an event shown already
                Err(err) => eprintln!("skipping an unreadable output message: {err}"),
            }
            clients
                .sqs
                .delete_message()
                .queue_url(&queue_url)
                .receipt_handle(receipt)
                .send()
                .await
                .ok();
        }
        if ours == 0 {
            if !got.messages().is_empty() {
                // Only others' events: give their readers a moment before reading again.
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            idle += Duration::from_secs(if got.messages().is_empty() { 5 } else { 1 });
            if args
                .idle_exit
                .is_some_and(|limit| idle >= Duration::from_secs(limit))
            {
                return Ok(0);
            }
            continue;
        }
        idle = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn library_writes_are_described_by_their_category() {
        let old_outbox: infinity_agent_core::effect::Effect = serde_json::from_value(json!({
            "effect": "library",
            "op": {"op": "answer_comment", "artifact_id": "art-1", "comment_id": "cm-2",
                   "answer": {"id": "a1", "text": "thanks", "at": "2026-12-01T00:00:00Z"}}
        }))
        .unwrap();
        let infinity_agent_core::effect::Effect::Library { op, .. } = &old_outbox else {
            panic!("{old_outbox:?}")
        };
        assert_eq!(
            describe_library_write(old_outbox.library_category().unwrap_or_default(), op),
            "answering comment cm-2 on page art-1"
        );
        assert_eq!(
            describe_library_write("notes", &json!({"op": "add_note", "text": "x"})),
            "a write of the notes category (add_note)"
        );
        assert_eq!(
            describe_library_write("knowledge", &json!({"op": "forget"})),
            "a write of the knowledge category (forget)"
        );
    }
}
