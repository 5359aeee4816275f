//! `infinity migrate`: moves a live conversation between hosts (an `infinity serve` and an AWS
//! stack, either way, or two `serve`s); `serve`'s side of it is `infinity_server::migration`.
//!
//! A host is named `aws` (the stack the `INFINITY_*` variables describe, reached with this
//! process's AWS credentials) or by the URL of an `infinity serve`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use infinity_agent_core::ids::ThreadId;
use infinity_aws::config::Clients;
use infinity_aws::migration::StackSide;
use infinity_aws::queue::SqsInputSender;
use infinity_aws::store::DynamoThreadStore;
use infinity_rap_runtime::migration::{self, Destination, Remote, Source, StartRequest};

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The root thread of the conversation to move.
    thread: String,
    /// Where the conversation runs now: `aws` (the stack of the INFINITY_* variables) or the URL
    /// of an `infinity serve`.
    #[arg(long, default_value = "aws")]
    from: String,
    /// Where it moves to: `aws` or the URL of an `infinity serve`.
    #[arg(long, required_unless_present = "abort")]
    to: Option<String>,
    /// A tool server's base URL at the source and the same server's at the destination
    /// (FROM=TO). Required for each server that keeps state per conversation (`needsMigration`);
    /// repeatable.
    #[arg(long = "server", value_name = "FROM=TO")]
    servers: Vec<String>,
    /// The bearer token of the `serve` at --from (default: $INFINITY_SERVE_TOKEN).
    #[arg(long)]
    from_token: Option<String>,
    /// The bearer token of the `serve` at --to (default: $INFINITY_SERVE_TOKEN).
    #[arg(long)]
    to_token: Option<String>,
    /// Undo a move that stopped before the destination took the conversation: it runs at --from
    /// again.
    #[arg(long, conflicts_with = "finish")]
    abort: bool,
    /// Finish a move whose last step did not reach --from: the conversation runs at --to, and
    /// --from leaves its forwarding tombstones.
    #[arg(long)]
    finish: bool,
    /// One endpoint for every AWS service, for `aws` hosts.
    #[arg(long)]
    endpoint: Option<String>,
}

/// Runs `infinity migrate`.
pub async fn run(args: MigrateArgs) -> Result<u8> {
    let root = ThreadId::new(&args.thread)
        .map_err(|e| anyhow!("{e}"))
        .context("the thread")?;
    let mut servers = BTreeMap::new();
    for pair in &args.servers {
        let Some((from, to)) = pair.split_once('=') else {
            bail!("--server {pair}: expected FROM=TO (two base URLs)");
        };
        servers.insert(from.to_owned(), to.to_owned());
    }
    let token = |flag: &Option<String>| {
        flag.clone().or_else(|| {
            std::env::var(infinity_server::TOKEN_VAR)
                .ok()
                .filter(|t| !t.is_empty())
        })
    };
    let aws = if args.from == "aws" || args.to.as_deref() == Some("aws") {
        Some(stack_from_env(args.endpoint.as_deref()).await?)
    } else {
        None
    };
    let aws_host = aws.as_ref().map(StackSide::host);
    let remote_from = Remote::new(&args.from, token(&args.from_token));
    let source: &dyn Source = match &aws_host {
        Some(host) if args.from == "aws" => host,
        _ => &remote_from,
    };
    if args.abort {
        source.abort(&root).await?;
        eprintln!("the session {root} runs at {} again", args.from);
        return Ok(0);
    }
    let to = args.to.clone().unwrap_or_default();
    if to == args.from {
        bail!("--from and --to are the same host ({to})");
    }
    let remote_to = Remote::new(&to, token(&args.to_token));
    let destination: &dyn Destination = match &aws_host {
        Some(host) if to == "aws" => host,
        _ => &remote_to,
    };
    if args.finish {
        migration::finish_move(source, destination, &root).await?;
        eprintln!(
            "the move of {root} to {to} is finished; {} forwards what reaches it",
            args.from
        );
        return Ok(0);
    }
    let request = StartRequest {
        to: to.clone(),
        servers,
    };
    let moved = migration::move_conversation(source, destination, &root, &request).await?;
    eprintln!(
        "moved the session {root} ({} thread(s)) from {} to {to}; what still reaches {} for it \
         is forwarded",
        moved.threads, args.from, args.from
    );
    Ok(0)
}

/// The stack the `INFINITY_*` variables describe, reached with this process's credentials.
async fn stack_from_env(endpoint: Option<&str>) -> Result<StackSide> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                anyhow!("{name} is not set (for the local stack: source infra/local/env.sh)")
            })
    };
    let clients = Clients::from_env_with_endpoint(endpoint).await;
    let table = var("INFINITY_TABLE")?;
    let store = || DynamoThreadStore::new(clients.dynamodb.clone(), table.clone(), DEDUP_TTL);
    let queue = SqsInputSender::new(clients.sqs.clone(), var("INFINITY_INPUT_QUEUE_URL")?)
        .with_stash(store());
    let signer = infinity_aws::tool_servers::signer_from_env()
        .await
        .context("the stack's callback URL and secret (to sign forwarding URLs)")?;
    let side = StackSide::new(store(), queue, signer);
    // The stack's agent, when its file is known here (the local stack's env.sh names it).
    Ok(match std::env::var_os("INFINITY_AGENT_FILE") {
        Some(path) => {
            let file = infinity_agent_core::agent::AgentFile::load(std::path::Path::new(&path))?;
            side.with_agents(vec![file.name])
        }
        None => side,
    })
}

/// How long the stack keeps processed-input markers (as the CLI's other commands assume).
const DEDUP_TTL: Duration = Duration::from_secs(86_400);
