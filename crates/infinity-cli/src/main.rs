//! `infinity`: run and chat with agents on the embedded runtime.

mod activity;
mod agents;
mod aws;
mod commands;
mod display;
mod dlq;
mod knowledge;
mod lists;
mod migrate;
mod people;
mod place;
mod remote;
mod render;
mod system;
mod tool_servers;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
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
    Run(commands::run::RunArgs),
    /// Talk to an agent interactively.
    Chat(commands::chat::ChatArgs),
    /// Serve the embedded runtime over HTTP (messages, records, event streams, answers).
    Serve(commands::serve::ServeArgs),
    /// Show the threads of a store.
    Threads(commands::threads::ThreadsArgs),
    /// What would wake a thread and each open thread below it (timers, calls in flight,
    /// subscriptions, questions, children, limits, effects to perform); stuck ones flagged (exit
    /// 1). A store folder, or an AWS (or local) stack.
    Status(commands::status::StatusArgs),
    /// Send a user message to a thread on an AWS (or local) stack.
    Send(aws::SendArgs),
    /// Threads on an AWS (or local) stack.
    #[command(subcommand)]
    Thread(ThreadCommand),
    /// Print output events from an AWS (or local) stack's output queue as they arrive.
    Tail(aws::TailArgs),
    /// An AWS (or local) stack's dead-letter queues: what is there and why, send it back, drop it.
    #[command(subcommand)]
    Dlq(dlq::DlqCommand),
    /// Answer a tool server's question on a thread of an AWS (or local) stack.
    Choose(aws::ChooseArgs),
    /// Send the result of a client tool's call (an agent file's `client_tools:`) to a thread of
    /// an AWS (or local) stack, as the application that runs the tool would.
    ToolResult(people::ToolResultArgs),
    /// Interrupt a thread of an AWS (or local) stack: cancel its calls in flight.
    Interrupt(people::InterruptArgs),
    /// Close a thread of an AWS (or local) stack, and every thread below it.
    Close(people::InterruptArgs),
    /// Set the lifetime budget (dollars, tokens) of a conversation on an AWS (or local) stack:
    /// at the budget its threads stop until it is raised (`infinity serve` has
    /// `POST /threads/{id}/budget`).
    Budget(people::BudgetArgs),
    /// Move a thread of an AWS (or local) stack to another stored version of its agent
    /// (`infinity run --move-to-agent` and `serve`'s `POST /threads/{id}/agent` do it on the
    /// embedded runtime).
    UseAgent(people::UseAgentArgs),
    /// A thread's recurring schedules: list them (a store folder or an AWS stack), add or delete
    /// one (an AWS stack; `infinity serve` has `POST` and `DELETE /threads/{id}/schedules`).
    #[command(subcommand)]
    Schedules(people::ScheduleCommand),
    /// Move a live conversation to another host: between an `infinity serve` and an AWS stack,
    /// either way, with its threads, pending calls, subscriptions and timers.
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
    /// Put the threads written before this version in lists (`GET /threads`, the web app's
    /// conversations): once, after upgrading a stack.
    Index(lists::IndexArgs),
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
    /// one). A store opens it even without tool servers: a conversation moved here gets inputs
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

/// The exit status of a command line that cannot be understood (sysexits' EX_USAGE).
pub(crate) const USAGE_ERROR: u8 = 64;

/// An error and its causes, each said once: many errors already name their cause in their own
/// message, and repeating it ("No such file or directory (os error 2): No such file or directory
/// (os error 2)") only makes the message harder to read.
pub(crate) fn report(err: &anyhow::Error) -> String {
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
    use tracing_subscriber::Layer;
    // Logs on stderr; traces over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT says where (docs/traces.md).
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        );
    // (Started as the stack's API function, the service is the function.)
    let service = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "infinity".into());
    infinity_agent_core::telemetry::install(logs, &service);
    let code = run_cli();
    infinity_agent_core::telemetry::shutdown();
    code
}

fn run_cli() -> std::process::ExitCode {
    // Lambda starts the binary without arguments: it is then the stack's API function.
    if std::env::args_os().len() == 1 && infinity_server::stack::in_lambda() {
        return match tokio::runtime::Runtime::new()
            .map_err(anyhow::Error::from)
            .and_then(|rt| {
                rt.block_on(infinity_server::stack::lambda())
                    .map_err(anyhow::Error::from)
            }) {
            Ok(()) => std::process::ExitCode::SUCCESS,
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
            Command::Run(args) => commands::run::run(args).await,
            Command::Chat(args) => commands::chat::chat(args).await,
            Command::Threads(args) => commands::threads::threads(args).await,
            Command::Status(args) => commands::status::status(args).await,
            Command::Serve(args) => commands::serve::serve(args).await,
            Command::Send(args) => aws::send(args).await,
            Command::ToolResult(args) => people::tool_result(args).await,
            Command::Thread(ThreadCommand::Show(args)) => aws::show(args).await,
            Command::Thread(ThreadCommand::Outbox(args)) => aws::outbox(args).await,
            Command::Thread(ThreadCommand::Index(args)) => lists::index(args).await,
            Command::Tail(args) => aws::tail(args).await,
            Command::Dlq(command) => dlq::run(command).await,
            Command::Choose(args) => aws::choose(args).await,
            Command::Interrupt(args) => people::interrupt(args).await,
            Command::Budget(args) => people::budget(args).await,
            Command::Close(args) => people::close(args).await,
            Command::UseAgent(args) => people::use_agent(args).await,
            Command::Remote(RemoteCommand::Connect(args)) => remote::client::connect(args).await,
            Command::Remote(RemoteCommand::Check(args)) => remote::check::check(&args),
            Command::Schedules(command) => people::schedules(command).await,
            Command::Migrate(args) => migrate::run(args).await,
            Command::McpBridge(args) => infinity_mcp_bridge::run(args)
                .await
                .map(|()| 0)
                .map_err(anyhow::Error::from),
            Command::Tools(ToolsCommand::Internal { json }) => {
                commands::tools::tools_internal(json)
            }
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
