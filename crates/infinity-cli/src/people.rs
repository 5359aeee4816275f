//! What a person sends to a thread of a deployed (or local) AWS stack from outside it:
//! `interrupt`, `close`, `use-agent`, `budget`, `tool-result`, and the thread's recurring schedules (`schedules add|list|rm`; `list`
//! reads a store folder too).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use infinity_agent_core::cost::{Budget, Usd};
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::{InputId, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::state::{ThreadRecord, ThreadStatus};
use infinity_agent_core::store::{FileStore, ThreadStore};
use infinity_aws::config::Clients;
use infinity_aws::queue::SqsInputSender;
use infinity_aws::store::DynamoThreadStore;

use crate::aws::{load_thread, setting, Endpoint};

#[derive(Debug, Args)]
pub struct InterruptArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// The table (default: $INFINITY_TABLE), to refuse an unknown or closed thread.
    #[arg(long)]
    table: Option<String>,
    /// The thread's open descendants too (required to close a thread with open children).
    #[arg(long)]
    tree: bool,
}

/// `infinity interrupt THREAD`: queues an `interrupt` input; the deployment cancels the thread's
/// calls in flight.
pub async fn interrupt(args: InterruptArgs) -> Result<u8> {
    let target = OpenThread::find(&args.endpoint, args.queue_url, args.table, &args.thread).await?;
    let id = target
        .send(InputBody::Interrupt { tree: args.tree })
        .await?;
    let calls = target.record.pending_calls.len();
    let below = if args.tree {
        " and every open thread below it"
    } else {
        ""
    };
    crate::out!(
        "sent interrupt {id} to thread {}{below} ({calls} call(s) in flight)",
        target.thread
    );
    Ok(0)
}

#[derive(Debug, Args)]
pub struct ToolResultArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// The client tool's call (the `client_tool_call` event's `call_id`).
    call: String,
    /// The result, as the model reads it.
    #[arg(required_unless_present = "file")]
    text: Option<String>,
    /// Read the result from this file instead (`-`: standard input).
    #[arg(long, conflicts_with = "text", value_name = "FILE")]
    file: Option<PathBuf>,
    /// The call failed: the model reads the text as its error.
    #[arg(long)]
    error: bool,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// The table (default: $INFINITY_TABLE), to refuse a call that does not wait for a result.
    #[arg(long)]
    table: Option<String>,
}

/// `infinity tool-result THREAD CALL TEXT`: the result of a client tool's call, as the
/// application that runs the tool would post it (`POST /threads/{id}/tool_results/{call}` on
/// `infinity serve`).
pub async fn tool_result(args: ToolResultArgs) -> Result<u8> {
    let target = OpenThread::find(&args.endpoint, args.queue_url, args.table, &args.thread).await?;
    let call = infinity_agent_core::ids::CallId::new(&args.call)?;
    let text = match (args.text, args.file) {
        (Some(text), _) => text,
        (None, Some(path)) if path.as_os_str() == "-" => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| anyhow!("reading the result from standard input: {e}"))?;
            text
        }
        (None, Some(path)) => std::fs::read_to_string(&path)
            .map_err(|e| anyhow!("reading the result from {}: {e}", path.display()))?,
        (None, None) => anyhow::bail!("give the result, or --file FILE"),
    };
    infinity_agent_core::runtime::give_tool_result(
        &target.store,
        &target.sender.poster(),
        &target.record,
        &call,
        text,
        args.error,
        jiff::Timestamp::now(),
    )
    .await?;
    crate::out!("sent the result of call {call} to thread {}", target.thread);
    Ok(0)
}

#[derive(Debug, Args)]
pub struct BudgetArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// A thread of the conversation (its root keeps the budget).
    thread: String,
    /// Dollars the conversation's completions may cost over its life, all its threads together.
    #[arg(long)]
    usd: Option<f64>,
    /// Tokens (prompt, cache and output) they may use over its life.
    #[arg(long)]
    tokens: Option<u64>,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// The table (default: $INFINITY_TABLE), to find the conversation's root.
    #[arg(long)]
    table: Option<String>,
}

/// `infinity budget THREAD --usd N [--tokens N]`: sets the lifetime budget of the thread's
/// conversation (what is left out stays); threads stopped at the budget go on once it is no
/// longer reached.
pub async fn budget(args: BudgetArgs) -> Result<u8> {
    let usd = args
        .usd
        .map(|usd| {
            Usd::from_dollars(usd).ok_or_else(|| anyhow!("--usd {usd} is not an amount of dollars"))
        })
        .transpose()?;
    let budget = Budget {
        usd,
        tokens: args.tokens,
    };
    budget
        .check()
        .map_err(|why| anyhow!("{why} (--usd, --tokens)"))?;
    let named = OpenThread::find(
        &args.endpoint,
        args.queue_url.clone(),
        args.table.clone(),
        &args.thread,
    )
    .await?;
    let root = named.record.root().clone();
    let target = match root == named.thread {
        true => named,
        false => {
            OpenThread::find(&args.endpoint, args.queue_url, args.table, root.as_str()).await?
        }
    };
    let id = target
        .send(InputBody::SetBudget {
            usd: budget.usd,
            tokens: budget.tokens,
        })
        .await?;
    let spent = &target.record.conversation.total;
    crate::out!(
        "sent budget {id} to conversation {root} (spent so far: {}, {} tokens)",
        spent.cost_text(),
        spent.tokens()
    );
    Ok(0)
}

/// `infinity close THREAD [--tree]`: closes a thread of the stack, and every thread below it.
pub async fn close(args: InterruptArgs) -> Result<u8> {
    let target = OpenThread::find(&args.endpoint, args.queue_url, args.table, &args.thread).await?;
    let open: Vec<&str> = target
        .record
        .children
        .iter()
        .filter(|c| !c.closed)
        .map(|c| c.thread_id.as_str())
        .collect();
    if !open.is_empty() && !args.tree {
        anyhow::bail!(
            "thread {} has open children ({}); closing it closes them too: pass --tree",
            target.thread,
            open.join(", ")
        );
    }
    let id = target.send(InputBody::Close {}).await?;
    crate::out!(
        "sent close {id} to thread {} ({} open child thread(s) close with it)",
        target.thread,
        open.len()
    );
    Ok(0)
}

/// A thread of the stack that takes a person's input: its input queue and its record (an
/// unknown or closed thread is refused).
#[derive(Debug, Args)]
pub struct UseAgentArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// The version to move it to: NAME (the newest stored one) or NAME@VERSION.
    agent: String,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// The table (default: $INFINITY_TABLE): the thread and the stored agents.
    #[arg(long)]
    table: Option<String>,
}

/// `infinity use-agent THREAD NAME[@VERSION]`: moves a thread of the stack to another stored
/// version of its agent, from its next slice on (refused here for another agent's name or a
/// version the table does not hold).
pub async fn use_agent(args: UseAgentArgs) -> Result<u8> {
    let reference =
        infinity_agent_core::catalog::AgentRef::parse(&args.agent).map_err(anyhow::Error::msg)?;
    let table = setting(args.table, "INFINITY_TABLE", "table")?;
    let target = OpenThread::find(
        &args.endpoint,
        args.queue_url,
        Some(table.clone()),
        &args.thread,
    )
    .await?;
    let current = target.record.agent.clone();
    if infinity_agent_core::catalog::AgentRef::name_in(&current) != reference.name {
        anyhow::bail!(
            "thread {} runs the agent {current} and can only move to another version of it, not \
             to `{}`",
            target.thread,
            reference.name
        );
    }
    let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
    let catalog = infinity_aws::catalog::DynamoAgentCatalog::new(clients.dynamodb.clone(), table);
    let stored = infinity_agent_core::catalog::AgentCatalog::get(
        &catalog,
        &reference.name,
        reference.version,
    )
    .await?
    .ok_or_else(|| anyhow!("no stored agent {reference} (`infinity agents list` shows them)"))?;
    let id = target
        .send(InputBody::UseAgent {
            agent: stored.reference(),
        })
        .await?;
    crate::out!(
        "sent use_agent {id} to thread {}: {current} -> {}",
        target.thread,
        stored.reference()
    );
    Ok(0)
}

struct OpenThread {
    sender: SqsInputSender,
    store: DynamoThreadStore,
    thread: ThreadId,
    record: ThreadRecord,
}

impl OpenThread {
    async fn find(
        endpoint: &Endpoint,
        queue_url: Option<String>,
        table: Option<String>,
        thread: &str,
    ) -> Result<Self> {
        let queue_url = setting(queue_url, "INFINITY_INPUT_QUEUE_URL", "input queue URL")?;
        let table = setting(table, "INFINITY_TABLE", "table")?;
        let clients = Clients::from_env_with_endpoint(endpoint.endpoint.as_deref()).await;
        let (store, thread, record) = load_thread(&clients, table, thread).await?;
        if record.status == ThreadStatus::Closed {
            anyhow::bail!("thread {thread} is closed");
        }
        Ok(Self {
            // An input too big for a message (a long result) is stored in the table.
            sender: SqsInputSender::new(clients.sqs.clone(), queue_url).with_stash(store.clone()),
            store,
            thread,
            record,
        })
    }

    /// Queues `body` for the thread; returns the input's id.
    async fn send(&self, body: InputBody) -> Result<InputId> {
        let input = Input::new(self.thread.clone(), body);
        self.sender.send_to_input_queue(&input).await?;
        Ok(input.id)
    }
}

#[derive(Debug, Args)]
pub struct ScheduleRmArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// The schedule's id (`sch-...`, from `infinity schedules list`).
    schedule: String,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// The table (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
    /// The stack's EventBridge Scheduler group, where the next occurrence's timer may wait
    /// (default: $INFINITY_SCHEDULE_GROUP).
    #[arg(long)]
    schedule_group: Option<String>,
}

/// A thread's record from the stack of `$INFINITY_TABLE`.
async fn record(thread: &ThreadId) -> Result<Option<ThreadRecord>> {
    let table = setting(None, "INFINITY_TABLE", "table")?;
    let clients = Clients::from_env_with_endpoint(None).await;
    let store =
        DynamoThreadStore::new(clients.dynamodb.clone(), table, Duration::from_secs(86_400));
    Ok(store.load_record(thread).await?)
}

/// `infinity schedules rm THREAD SCHEDULE`: deletes a schedule through the thread's queue.
pub async fn remove_schedule(args: ScheduleRmArgs) -> Result<u8> {
    let target = OpenThread::find(&args.endpoint, args.queue_url, args.table, &args.thread).await?;
    let schedules = &target.record.schedules;
    if !schedules.iter().any(|s| s.id == args.schedule) {
        let ids: Vec<&str> = schedules.iter().map(|s| s.id.as_str()).collect();
        anyhow::bail!(
            "thread {} has no schedule {} (it has: {})",
            target.thread,
            args.schedule,
            if ids.is_empty() {
                "none".to_owned()
            } else {
                ids.join(", ")
            }
        );
    }
    target
        .send(InputBody::ScheduleDelete {
            schedule_id: args.schedule.clone(),
        })
        .await?;
    crate::out!(
        "sent: delete schedule {} of thread {}",
        args.schedule,
        target.thread
    );
    // The next occurrence's timer may be a Scheduler schedule (more than the relay threshold
    // ahead): delete it too, after the delete is queued (the thread would drop the occurrence,
    // but the schedule would stay until it fired). Deleted only once the delete is on the queue,
    // so a failed send never leaves a schedule without its timer.
    let Some(next) = schedules.iter().find(|s| s.id == args.schedule) else {
        return Ok(0);
    };
    let Ok(group) = setting(
        args.schedule_group,
        "INFINITY_SCHEDULE_GROUP",
        "schedule group",
    ) else {
        crate::out!(
            "(no --schedule-group or INFINITY_SCHEDULE_GROUP: an EventBridge schedule for its next \
             occurrence at {} stays until then, and the thread ignores it)",
            next.next
        );
        return Ok(0);
    };
    {
        let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
        match infinity_aws::queue::delete_timer_schedule(
            &clients.scheduler,
            &group,
            &next.next_input_id(),
        )
        .await
        {
            Ok(true) => crate::out!(
                "deleted the EventBridge schedule of its next occurrence ({})",
                next.next
            ),
            Ok(false) => {}
            Err(why) => anyhow::bail!(
                "the schedule is deleted, but the EventBridge schedule of its next occurrence ({}) \
                 could not be: {why} (it fires once, and the thread ignores it)",
                next.next
            ),
        }
    }
    Ok(0)
}

#[derive(Debug, Args)]
pub struct ScheduleAddArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The thread.
    thread: String,
    /// What the thread receives at each occurrence.
    #[arg(long)]
    message: String,
    /// An RFC 5545 RRULE (e.g. FREQ=WEEKLY;BYDAY=MO,WE;BYHOUR=8;BYMINUTE=30).
    #[arg(long, required_unless_present = "cron", conflicts_with = "cron")]
    rrule: Option<String>,
    /// A five-field cron expression (minute hour day-of-month month day-of-week).
    #[arg(long)]
    cron: Option<String>,
    /// The IANA time zone the rule is read in (default UTC).
    #[arg(long)]
    timezone: Option<String>,
    /// The local start (YYYY-MM-DDTHH:MM; default now).
    #[arg(long)]
    start: Option<String>,
    /// The local time after which it stops.
    #[arg(long)]
    until: Option<String>,
    /// Stop after this many occurrences.
    #[arg(long)]
    count: Option<u64>,
    /// The input queue (default: $INFINITY_INPUT_QUEUE_URL).
    #[arg(long)]
    queue_url: Option<String>,
    /// The table (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
}

/// `infinity schedules add THREAD --message M (--rrule R | --cron C) ...`: checks the schedule
/// against the thread now and sends it through the thread's queue.
pub async fn add_schedule(args: ScheduleAddArgs) -> Result<u8> {
    let target = OpenThread::find(&args.endpoint, args.queue_url, args.table, &args.thread).await?;
    let mut schedule = serde_json::json!({"message": args.message});
    for (key, value) in [
        ("rrule", args.rrule),
        ("cron", args.cron),
        ("timezone", args.timezone),
        ("start", args.start),
        ("until", args.until),
    ] {
        if let Some(value) = value {
            schedule[key] = serde_json::Value::String(value);
        }
    }
    if let Some(count) = args.count {
        schedule["count"] = serde_json::json!(count);
    }
    let (id, text) = infinity_agent_core::runtime::check_schedule(
        &target.record,
        jiff::Timestamp::now(),
        &schedule,
    )
    .map_err(|why| anyhow!("{why}"))?;
    target
        .send(InputBody::ScheduleCreate {
            schedule_id: id,
            args: schedule,
        })
        .await?;
    crate::out!("sent to thread {}: {text}", target.thread);
    Ok(0)
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// The thread's schedules with their next occurrence.
    List {
        /// The thread.
        thread: String,
        /// Read this store folder (default: the AWS stack of $INFINITY_TABLE).
        #[arg(long)]
        store: Option<PathBuf>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Create a schedule on a thread of an AWS (or local) stack, as `schedule_create` does.
    Add(ScheduleAddArgs),
    /// Delete a schedule of a thread of an AWS (or local) stack.
    Rm(ScheduleRmArgs),
}

/// `infinity schedules add|list|rm`.
pub async fn schedules(command: ScheduleCommand) -> Result<u8> {
    match command {
        ScheduleCommand::List {
            thread,
            store,
            json,
        } => list_schedules(&thread, store, json).await,
        ScheduleCommand::Add(args) => add_schedule(args).await,
        ScheduleCommand::Rm(args) => remove_schedule(args).await,
    }
}

/// `infinity schedules list THREAD [--store DIR] [--json]`.
async fn list_schedules(thread: &str, store: Option<PathBuf>, json: bool) -> Result<u8> {
    let id = ThreadId::new(thread).map_err(|e| anyhow::anyhow!("{e}"))?;
    let record = match store {
        Some(dir) => FileStore::open_read_only(&dir)?.load_record(&id).await?,
        None => record(&id).await?,
    };
    let Some(record) = record else {
        anyhow::bail!("no thread {id}");
    };
    if json {
        crate::out!("{}", serde_json::to_string_pretty(&record.schedules)?);
        return Ok(0);
    }
    if record.schedules.is_empty() {
        crate::out!("thread {id} has no schedules");
    }
    for s in &record.schedules {
        crate::out!(
            "{} {} ({}) next {} fired {}: {}",
            s.id,
            s.rrule.as_deref().or(s.cron.as_deref()).unwrap_or_default(),
            s.timezone,
            s.next,
            s.fired,
            s.message
        );
    }
    Ok(0)
}
