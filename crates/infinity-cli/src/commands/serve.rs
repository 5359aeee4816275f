//! `infinity serve`: the embedded runtime (or, with `--aws`, a stack's threads) behind the HTTP
//! API and the web app of [`infinity_server`], which lists the routes.

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use infinity_server::{Guard, TOKEN_VAR};

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
        infinity_server::stack::serve(args.endpoint.as_deref(), (listener, access)).await?;
        return Ok(0);
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
    let remotes = infinity_server::remotes::MemoryRemotes::new();
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
        Some(links) => {
            infinity_server::migration::routes(Arc::new(system.clone()), links.signer, links.client)
        }
        None => infinity_server::migration::refused(),
    };
    let app = infinity_server::remotes::mount(
        infinity_server::router(Arc::new(system), access.clone(), moves),
        remotes,
        &access,
    );
    infinity_server::serve_until_interrupted(listener, app).await?;
    Ok(0)
}
