//! `infinity`: run and chat with agents on the embedded runtime.

mod agents;
mod api;
mod artifacts;
mod aws;
mod display;
mod knowledge;
mod migrate;
mod people;
mod place;
mod remote;
mod render;
mod serve;
mod stack_api;
mod status;
mod system;
mod tool_servers;
mod web;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use infinity_agent_core::effect::OutputKind;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystem, Front, WaitOutcome};
use infinity_agent_core::state::{FinishStatus, ThreadStatus};
use infinity_agent_core::store::{FileStore, ThreadStore};
use tokio::io::AsyncBufReadExt;

use render::Renderer;
pub(crate) use system::{build_system, build_system_with_receiver, StoreAccess};

/// Durable LLM agents: run them, chat with them.
#[derive(Debug, Parser)]
#[command(name = "infinity", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Send one message to an agent and run until its threads are idle or closed.
    Run(RunArgs),
    /// Talk to an agent interactively.
    Chat(ChatArgs),
    /// Serve the embedded runtime over HTTP (messages, records, event streams, answers).
    Serve(serve::ServeArgs),
    /// Show the threads of a store.
    Threads(ThreadsArgs),
    /// Send a user message to a thread on an AWS (or local) stack.
    Send(aws::SendArgs),
    /// Threads on an AWS (or local) stack.
    #[command(subcommand)]
    Thread(ThreadCommand),
    /// Print output events from an AWS (or local) stack's output queue as they arrive.
    Tail(aws::TailArgs),
    /// Answer a tool server's question on a thread of an AWS (or local) stack.
    Choose(aws::ChooseArgs),
    /// Interrupt a thread of an AWS (or local) stack: cancel its calls in flight.
    Interrupt(people::InterruptArgs),
    /// Close a thread of an AWS (or local) stack, and every thread below it.
    Close(people::InterruptArgs),
    /// Move a thread of an AWS (or local) stack to another stored version of its agent
    /// (`infinity run --move-to-agent` and `serve`'s `POST /threads/{id}/agent` do it on the
    /// embedded runtime).
    UseAgent(people::UseAgentArgs),
    /// A thread's recurring schedules: list them (a store folder or an AWS stack), add or delete
    /// one (an AWS stack; `infinity serve` has `POST` and `DELETE /threads/{id}/schedules`).
    #[command(subcommand)]
    Schedules(people::ScheduleCommand),
    /// Move a live session to another host: between an `infinity serve` and an AWS stack, either
    /// way, with its threads, pending calls, subscriptions and timers.
    Migrate(migrate::MigrateArgs),
    /// This machine as a remote of an `infinity serve`: agents with the `remote` category run
    /// shell commands on it (with --exec); and whether an agent's rules let a command run.
    #[command(subcommand)]
    Remote(RemoteCommand),
    /// Serve an MCP server's tools as a RAP tool server.
    McpBridge(infinity_mcp_bridge::BridgeArgs),
    /// Describe tools.
    #[command(subcommand)]
    Tools(ToolsCommand),
    /// Stored agents: save a version, list them, show one.
    #[command(subcommand)]
    Agents(agents::AgentsCommand),
    /// The knowledge registry agents search and save to (the `knowledge` category).
    #[command(subcommand)]
    Knowledge(knowledge::KnowledgeCommand),
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// Every internal tool with its category and whether it is on by default.
    Internal {
        /// Print the listing as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum RemoteCommand {
    /// Connect to a server and take its orders until Ctrl-C (outbound only: it polls).
    Connect(remote::client::ConnectArgs),
    /// Whether an agent file's `remote_allow:` rules let a command run at once (exit 0,
    /// `allowed (RULE)`) or make `remote_exec` ask a person first (exit 1, `asks: WHY`).
    Check(remote::check::CheckArgs),
}

#[derive(Debug, Subcommand)]
enum ThreadCommand {
    /// Show a thread's record and history from the DynamoDB table.
    Show(aws::ShowArgs),
    /// Show the effects a thread still has to perform and those set aside after failing; put
    /// failed ones back (--retry) or drop them (--drop).
    Outbox(aws::OutboxArgs),
}

#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    /// The agent file (agent.yaml); with --store, also NAME or NAME@VERSION of an agent stored
    /// there (`infinity agents save`).
    #[arg(long)]
    agent: PathBuf,
    /// Use this model instead of the file's (PROVIDER:MODEL, e.g. script:other.yaml).
    #[arg(long)]
    model: Option<String>,
    /// Keep threads in this folder (default: in memory, gone when the command ends).
    #[arg(long)]
    store: Option<PathBuf>,
    /// A model people may switch a thread to over the API and the web app (PROVIDER:MODEL, as
    /// written; `script:` paths relative to the agent file); repeat for more. Adds to
    /// INFINITY_ALLOWED_MODELS (comma separated). A thread's agent's own model needs none.
    #[arg(long = "allow-model", value_name = "SPEC")]
    allow_model: Vec<String>,
    /// With tool servers or --store: the local port that receives callbacks (default: any free
    /// one). A store opens it even without tool servers: a session moved here gets inputs
    /// forwarded to it from the host it left. Without either, no port is opened.
    #[arg(long, default_value_t = 0)]
    callback_port: u16,
    /// With tool servers or --store: the receiver's URL as others reach it (default
    /// http://127.0.0.1:PORT).
    #[arg(long)]
    callback_url: Option<String>,
    /// When the command gives up (`run --timeout`): slices commit what they did before it
    /// rather than lose it (see `AgentSystemBuilder::with_deadline`).
    #[arg(skip)]
    deadline: Option<tokio::time::Instant>,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The thread to send to (default: a new thread).
    #[arg(long)]
    thread: Option<String>,
    /// Print one JSON object per line instead of a transcript.
    #[arg(long)]
    json: bool,
    /// Give up after this many seconds. A slice that would still be asking the model then
    /// commits what it has before, and the thread goes on at the next start (with --store).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// With tool servers: once nothing is running or owed, keep taking their callbacks (a view
    /// update after a result) for this many seconds before exiting.
    #[arg(long, default_value_t = 2.0)]
    grace: f64,
    /// Before the message, move the thread (--thread, one that exists) to the version of its
    /// agent that --agent names: NAME (the newest stored one) or NAME@VERSION.
    #[arg(long, requires = "thread")]
    move_to_agent: bool,
    /// The message.
    message: String,
}

#[derive(Debug, Args)]
struct ChatArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The thread to talk to.
    #[arg(long, default_value = "chat")]
    thread: String,
}

#[derive(Debug, Args)]
struct ThreadsArgs {
    /// The store folder.
    #[arg(long)]
    store: PathBuf,
}

/// The exit status of a command line that cannot be understood (sysexits' EX_USAGE).
const USAGE_ERROR: u8 = 64;

/// An error and its causes, each said once: many errors already name their cause in their own
/// message, and repeating it ("No such file or directory (os error 2): No such file or directory
/// (os error 2)") only makes the message harder to read.
fn report(err: &anyhow::Error) -> String {
    let mut message = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !message.contains(&cause) {
            message.push_str(": ");
            message.push_str(&cause);
        }
    }
    render::printable(&message).into_owned()
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    // Lambda starts the binary without arguments: it is then the stack's API function.
    if std::env::args_os().len() == 1 && stack_api::in_lambda() {
        return match tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|rt| rt.block_on(stack_api::lambda()))
        {
            Ok(_) => std::process::ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print and succeed; a usage error exits 64 (EX_USAGE), apart from
        // the codes `run` gives its outcomes (2 is its timeout).
        Err(err) => {
            let _ = err.print();
            return std::process::ExitCode::from(if err.use_stderr() { USAGE_ERROR } else { 0 });
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the tokio runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run(args).await,
            Command::Chat(args) => chat(args).await,
            Command::Threads(args) => threads(args).await,
            Command::Serve(args) => serve::serve(args).await,
            Command::Send(args) => aws::send(args).await,
            Command::Thread(ThreadCommand::Show(args)) => aws::show(args).await,
            Command::Thread(ThreadCommand::Outbox(args)) => aws::outbox(args).await,
            Command::Tail(args) => aws::tail(args).await,
            Command::Choose(args) => aws::choose(args).await,
            Command::Interrupt(args) => people::interrupt(args).await,
            Command::Close(args) => people::close(args).await,
            Command::UseAgent(args) => people::use_agent(args).await,
            Command::Remote(RemoteCommand::Connect(args)) => remote::client::connect(args).await,
            Command::Remote(RemoteCommand::Check(args)) => remote::check::check(&args),
            Command::Schedules(command) => people::schedules(command).await,
            Command::Migrate(args) => migrate::run(args).await,
            Command::McpBridge(args) => infinity_mcp_bridge::run(args).await.map(|()| 0),
            Command::Tools(ToolsCommand::Internal { json }) => tools_internal(json),
            Command::Agents(command) => agents::run(command).await,
            Command::Knowledge(command) => knowledge::run(command).await,
        }
    });
    match result {
        Ok(code) => std::process::ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {}", report(&err));
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(mut args: RunArgs) -> Result<u8> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    args.agent.deadline = Some(deadline);
    let (system, links) = build_system_with_receiver(&args.agent, StoreAccess::Wait).await?;
    // The grace is for tool servers' late callbacks; a receiver kept only for forwarded inputs
    // (every run with --store has one) waits for nothing.
    let receives = links.as_ref().is_some_and(|l| l.tool_servers);
    if !(0.0..=600.0).contains(&args.grace) {
        eprintln!("error: --grace must be between 0 and 600 seconds");
        return Ok(USAGE_ERROR);
    }
    let thread = match &args.thread {
        Some(t) => ThreadId::new(t.as_str())?,
        None => ThreadId::generate(),
    };
    let mut events = system.subscribe();
    let mut renderer = Renderer::new(args.json);
    let mut output = None;
    let mut show = |renderer: &mut Renderer, event: &infinity_agent_core::effect::OutputEvent| {
        if let OutputKind::Finished { status, result } = &event.kind {
            if event.thread_id == thread {
                output = Some((*status, result.clone(), event.at));
            }
        }
        renderer.show(event);
    };
    if args.move_to_agent {
        let target = args.agent.agent.to_string_lossy();
        system.use_agent(&thread, &target).await?;
    }
    let usage_before = store_usage(&system).await;
    system
        .post_user_message(&thread, args.message.clone())
        .await?;
    let mut graced = !receives;
    let mut answered = std::collections::HashSet::new();
    // Idle is not done while the thread tree is owed tool results or subscription events:
    // those arrive through the callback receiver, so keep waiting for them until the deadline.
    let (outcome, owed) = loop {
        let wait = system.wait_idle(Some(deadline));
        tokio::pin!(wait);
        let outcome = loop {
            tokio::select! {
                outcome = &mut wait => break outcome,
                Some(event) = events.recv() => show(&mut renderer, &event),
            }
        };
        let WaitOutcome::Idle { next_timer: None } = outcome else {
            break (outcome, Owed::default());
        };
        let owed = owed(&system, &thread).await;
        // Nobody can answer a tool's question under `run`: it gets its default now, so the
        // call can go on.
        let mut answered_now = false;
        for (thread_id, choice) in &owed.questions {
            if !answered.insert(choice.call_id.clone()) {
                continue; // tried once; a failure was reported
            }
            match infinity_rap_runtime::client::answer_choice(thread_id, choice, None).await {
                Ok((selected, input)) => {
                    answered_now = true;
                    eprintln!(
                        "note: answered the question of call {} with its default, {selected}) {} \
                         (nobody can answer under `infinity run`; use `infinity chat` to choose)",
                        choice.call_id, choice.choices[selected]
                    );
                    if let Err(err) = system.accept(input).await {
                        eprintln!(
                            "warning: the answer to call {} was not kept: {err}",
                            choice.call_id
                        );
                    }
                }
                Err(err) => eprintln!(
                    "warning: the question of call {} could not be answered: {err}",
                    choice.call_id
                ),
            }
        }
        if answered_now {
            continue;
        }
        let now = tokio::time::Instant::now();
        if owed.is_empty() && !graced && now < deadline {
            // A tool server may still send a callback that belongs to what it just finished.
            graced = true;
            let until = deadline.min(now + Duration::from_secs_f64(args.grace));
            loop {
                tokio::select! {
                    Some(event) = events.recv() => show(&mut renderer, &event),
                    _ = tokio::time::sleep_until(until) => break,
                }
            }
            continue;
        }
        if owed.is_empty() || now >= deadline {
            break (outcome, owed);
        }
        tokio::select! {
            Some(event) = events.recv() => show(&mut renderer, &event),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    };
    while let Ok(event) = events.try_recv() {
        show(&mut renderer, &event);
    }
    print_usage(&system, &usage_before).await;
    // The thread's `finish` output comes last, and decides the exit status.
    if let Some((status, result, output_at)) = &output {
        if args.json {
            crate::out!(
                "{}",
                serde_json::json!({"type": "output", "thread_id": thread, "at": output_at, "status": status, "result": result})
            );
        } else {
            crate::out!("output: {}", serde_json::to_string_pretty(result)?);
        }
    }
    match outcome {
        WaitOutcome::TimedOut => {
            eprintln!(
                "error: timed out after {}s with work still running or due; the threads are {}",
                args.timeout,
                if args.agent.store.is_some() {
                    "saved in the store"
                } else {
                    "lost (no --store)"
                }
            );
            Ok(2)
        }
        WaitOutcome::Idle { .. } if !owed.calls.is_empty() => {
            eprintln!(
                "error: timed out after {}s waiting for tool results: {}",
                args.timeout,
                owed.calls.join("; ")
            );
            Ok(2)
        }
        WaitOutcome::Idle { next_timer } => {
            if !owed.subscriptions.is_empty() {
                eprintln!(
                    "note: stopping after {}s with subscriptions still active: {}",
                    args.timeout,
                    owed.subscriptions.join("; ")
                );
            }
            if let Some(due) = next_timer {
                eprintln!(
                    "note: a thread sleeps until {due}, after the {}s timeout; stopping here",
                    args.timeout
                );
            }
            if renderer.errors() > 0 {
                eprintln!("error: the run recorded {} error(s)", renderer.errors());
                return Ok(1);
            }
            Ok(match output.map(|(status, _, _)| status) {
                Some(FinishStatus::Failed) => 1,
                Some(FinishStatus::Cancelled) => 3,
                Some(FinishStatus::Succeeded) | None => 0,
            })
        }
    }
}

/// What a thread tree is still owed by tool servers.
#[derive(Debug, Default)]
struct Owed {
    /// Dispatched calls without their result, as `call ID (tool) in thread T`.
    calls: Vec<String>,
    /// Active subscriptions, the same way.
    subscriptions: Vec<String>,
    /// Tools' questions nobody has answered yet.
    questions: Vec<(ThreadId, infinity_agent_core::state::OpenChoice)>,
}

impl Owed {
    fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.subscriptions.is_empty()
    }
}

/// Walks the open threads from `root` down (children, not closed ones) and collects what they
/// still wait for.
async fn owed(system: &AgentSystem, root: &ThreadId) -> Owed {
    let mut owed = Owed::default();
    let mut queue = vec![root.clone()];
    while let Some(id) = queue.pop() {
        let Ok(Some(record)) = system.record(&id).await else {
            continue;
        };
        if record.status == ThreadStatus::Closed {
            continue;
        }
        for call in &record.pending_calls {
            if call.kind == infinity_agent_core::state::PendingKind::Dispatched {
                owed.calls.push(format!(
                    "call {} ({}) in thread {id}",
                    call.call_id, call.tool
                ));
            }
        }
        owed.questions.extend(
            record
                .open_choices
                .iter()
                .map(|c| (record.id.clone(), c.clone())),
        );
        for sub in &record.subscriptions {
            owed.subscriptions.push(format!(
                "call {} ({}) in thread {id}",
                sub.call_id, sub.tool
            ));
        }
        queue.extend(
            record
                .children
                .iter()
                .filter(|c| !c.closed)
                .map(|c| c.thread_id.clone()),
        );
    }
    owed
}

/// The usage recorded on every thread of the store.
async fn store_usage(system: &AgentSystem) -> infinity_agent_core::model::Usage {
    let mut total = infinity_agent_core::model::Usage::default();
    let Ok(ids) = system.store().thread_ids().await else {
        return total;
    };
    for id in ids {
        if let Ok(Some(record)) = system.record(&id).await {
            total.add(&record.usage);
        }
    }
    total
}

/// What this run used (the store's usage now, less what it had recorded before), on stderr.
async fn print_usage(system: &AgentSystem, before: &infinity_agent_core::model::Usage) {
    let now = store_usage(system).await;
    let completions = now.completions.saturating_sub(before.completions);
    let input = now.input_tokens.saturating_sub(before.input_tokens);
    let read = now
        .cache_read_tokens
        .saturating_sub(before.cache_read_tokens);
    let written = now
        .cache_write_tokens
        .saturating_sub(before.cache_write_tokens);
    let output = now.output_tokens.saturating_sub(before.output_tokens);
    eprintln!(
        "usage: {completions} completions, {} input tokens ({read} read from cache, {written} \
         written to cache), {output} output tokens (this run)",
        input + read + written,
    );
}

async fn chat(args: ChatArgs) -> Result<u8> {
    let system = build_system(&args.agent, StoreAccess::FailFast).await?;
    let thread = ThreadId::new(args.thread.as_str())?;
    let mut events = system.subscribe();
    let printer = tokio::spawn(async move {
        let mut renderer = Renderer::new(false);
        while let Some(event) = events.recv().await {
            renderer.show(&event);
        }
    });
    if args.agent.store.is_some() {
        print_threads(system.store().as_ref()).await?;
    }
    eprintln!("Talking to thread {thread}. /threads lists threads, /choose [CALL] INDEX or /dismiss [CALL] answers a tool's question, /interrupt cancels the calls in flight, /quit or Ctrl-C leaves (state is kept with --store).");
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line? else { break };
                let line = line.trim();
                match line {
                    "" => continue,
                    "/quit" | "/exit" => break,
                    "/threads" => print_threads(system.store().as_ref()).await?,
                    "/interrupt" => {
                        if let Err(err) = system.interrupt(&thread, false).await {
                            eprintln!("error: {err}");
                        }
                    }
                    command if command.starts_with("/choose") || command.starts_with("/dismiss") => {
                        if let Err(err) = chat_choose(&system, &thread, command).await {
                            eprintln!("error: {}", report(&err));
                        }
                    }
                    command if command.starts_with('/') => eprintln!(
                        "unknown command {command}: /threads, /choose [CALL] INDEX, /dismiss [CALL], \
                         /interrupt and /quit are known (a message that starts with / needs a \
                         space first)"
                    ),
                    text => {
                        if let Err(err) = system.post_user_message(&thread, text.to_owned()).await {
                            eprintln!("error: {err}");
                        }
                    }
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    // Let slices already running finish (and print) before leaving; timers stay in the store.
    let settle = tokio::time::Instant::now() + Duration::from_secs(5);
    system.wait_idle(Some(settle)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    printer.abort();
    Ok(0)
}

/// `/choose [CALL] INDEX` or `/dismiss [CALL]` in `infinity chat`.
async fn chat_choose(system: &AgentSystem, thread: &ThreadId, command: &str) -> Result<()> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let (call, index) = match words.as_slice() {
        ["/dismiss"] => (None, None),
        ["/dismiss", call] => (Some(*call), None),
        ["/choose", index] => (None, Some(index.parse::<usize>()?)),
        ["/choose", call, index] => (Some(*call), Some(index.parse::<usize>()?)),
        _ => bail!("usage: /choose [CALL] INDEX, or /dismiss [CALL]"),
    };
    let record = system
        .record(thread)
        .await?
        .with_context(|| format!("thread {thread} does not exist yet"))?;
    let choice = infinity_rap_runtime::client::find_choice(&record, call)?;
    let (selected, input) =
        infinity_rap_runtime::client::answer_choice(&record.id, choice, index).await?;
    system.accept(input).await?;
    eprintln!("answered {}: {}", choice.call_id, choice.choices[selected]);
    Ok(())
}

async fn print_threads(store: &dyn ThreadStore) -> Result<()> {
    let ids = store.thread_ids().await?;
    if ids.is_empty() {
        crate::out!("(no threads yet)");
    }
    for id in ids {
        let Some(r) = store.load_record(&id).await? else {
            continue;
        };
        let indent = "  ".repeat(r.stack.len().saturating_sub(1));
        let status = status::describe(&r);
        let delegated = r
            .delegated_by
            .as_ref()
            .map(|by| format!(" (delegated by {}, depth {})", by.thread_id, r.depth))
            .unwrap_or_default();
        crate::out!(
            "{indent}{id}{}{delegated} [{status}] agent {}, {} entries, {} completions",
            r.title
                .as_deref()
                .map(|t| format!(" \"{t}\""))
                .unwrap_or_default(),
            r.agent,
            r.history_len,
            r.usage.completions
        );
    }
    Ok(())
}

fn tools_internal(json: bool) -> Result<u8> {
    let listing = infinity_agent_core::tools::internal::listing();
    if json {
        crate::out!("{}", serde_json::to_string_pretty(&listing)?);
        return Ok(0);
    }
    for category in infinity_agent_core::tools::internal::Category::ALL {
        let tools: Vec<&str> = listing
            .iter()
            .filter(|t| t.category == category)
            .map(|t| t.spec.name.as_str())
            .collect();
        crate::out!(
            "{:<10} {:<4} {}",
            category.flag(),
            if category.default_enabled() {
                "on"
            } else {
                "off"
            },
            if tools.is_empty() {
                "(no tools yet)".to_owned()
            } else {
                tools.join(", ")
            }
        );
    }
    Ok(0)
}

async fn threads(args: ThreadsArgs) -> Result<u8> {
    // Read-only: listing works while another process runs the store, and a mistyped folder is
    // an error rather than a new empty store.
    let store = FileStore::open_read_only(&args.store)?;
    print_threads(&store).await?;
    for (thread, why) in store.broken() {
        crate::out!("{thread} [cannot be read: {why}]");
    }
    Ok(0)
}
