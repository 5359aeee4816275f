//! Tool servers on the embedded runtime: the RAP client (discovery, invocations,
//! notifications) and the callback receiver on a local port, started when the agent file lists
//! `tool_servers:`.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder};
use infinity_agent_core::tools::servers::{ToolServerConfig, ToolServerEntry};
use infinity_library::remote::RemoteDispatcher;
use infinity_mcp_bridge::McpSource;
use infinity_rap::signing::CallbackSigner;
use infinity_rap_runtime::client::RapClient;
use tokio::net::TcpListener;

// The environment variable holding the callback secret (at least 32 bytes), as on AWS.
use infinity_aws::tool_servers::CALLBACK_SECRET_VAR as SECRET_VAR;

/// A bound receiver, ready to serve once the system exists.
pub struct Receiver {
    listener: TcpListener,
    signer: CallbackSigner,
    client: Arc<RapClient>,
    tool_servers: bool,
}

impl Receiver {
    /// The RAP client, as what discovers tool servers' tools.
    pub fn discovery(&self) -> Arc<dyn infinity_agent_core::tools::servers::ToolDiscovery> {
        self.client.clone()
    }
}

/// A running receiver's signer and the RAP client: what a served runtime needs to move
/// conversations.
#[derive(Debug, Clone)]
pub struct Links {
    /// Signs callback and forwarding URLs of the receiver.
    pub signer: CallbackSigner,
    /// Reaches tool servers and forwards inputs.
    pub client: Arc<RapClient>,
    /// True when the agent has tool servers (their callbacks may follow what they finished);
    /// false when the receiver is there for forwarded inputs only.
    pub tool_servers: bool,
}

/// Where callbacks are received and how to reach the servers.
#[derive(Debug, Clone, Default)]
pub struct CallbackOptions {
    /// Local port for the receiver (0: any free one).
    pub port: u16,
    /// The receiver's URL as tool servers reach it (default `http://127.0.0.1:PORT`).
    pub public_url: Option<String>,
}

/// The callback secret: `INFINITY_CALLBACK_SECRET`, else one kept in the store folder (so
/// callback URLs issued by an earlier run, e.g. of a subscription, stay valid), else a fresh
/// one for this process.
fn secret(store: Option<&Path>) -> Result<Vec<u8>> {
    if let Ok(secret) = std::env::var(SECRET_VAR) {
        return Ok(secret.into_bytes());
    }
    let fresh = || {
        format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        )
    };
    let Some(dir) = store else {
        return Ok(fresh().into_bytes());
    };
    let path = dir.join("callback-secret");
    match std::fs::read_to_string(&path) {
        Ok(s) if !s.trim().is_empty() => Ok(s.trim().as_bytes().to_vec()),
        _ => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let s = fresh();
            std::fs::write(&path, &s)
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(s.into_bytes())
        }
    }
}

/// Starts an MCP bridge (in this process, on a free local port) for every MCP server the agent
/// file lists, and puts the bridge's URL in its place.
pub async fn start_mcp_bridges(file: &mut AgentFile) -> Result<()> {
    for entry in &mut file.tool_servers {
        let ToolServerEntry::Mcp { mcp } = entry else {
            continue;
        };
        let source = match (&mcp.command, &mcp.url) {
            (Some(command), _) => McpSource::Stdio {
                command: command.clone(),
                args: mcp.args.clone(),
                env: mcp.env.clone().into_iter().collect(),
            },
            (None, Some(url)) => McpSource::http(url.clone()),
            (None, None) => anyhow::bail!("the MCP server entry names no command or url"),
        };
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let url = infinity_mcp_bridge::serve_in_background(source, listener)
            .await
            .with_context(|| format!("agent `{}`: the MCP server `{mcp}`", file.name))?;
        eprintln!("note: MCP server `{mcp}` bridged at {url}");
        *entry = ToolServerEntry::Rap(ToolServerConfig {
            url,
            auth: Default::default(),
            deadline: None,
        });
    }
    Ok(())
}

/// For an agent with tool servers, or when `always`: binds the receiver (callbacks, and inputs
/// forwarded from a host a conversation moved away from), and gives the builder the RAP client as
/// discovery and dispatcher. `None` when the agent has no tool servers and not `always`.
pub async fn prepare(
    file: &AgentFile,
    store: Option<&Path>,
    options: &CallbackOptions,
    builder: AgentSystemBuilder,
    always: bool,
    remotes: Option<Arc<infinity_server::remotes::MemoryRemotes>>,
) -> Result<(AgentSystemBuilder, Option<Receiver>)> {
    if file.tool_servers.is_empty() && !always {
        let builder = match remotes {
            Some(hub) => builder.with_dispatcher(Arc::new(RemoteDispatcher { hub, rest: None })),
            None => builder,
        };
        return Ok((builder, None));
    }
    let listener = TcpListener::bind(("127.0.0.1", options.port))
        .await
        .with_context(|| format!("cannot bind the callback receiver to port {}", options.port))?;
    let local = listener.local_addr()?;
    let public = options
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local}"));
    let signer = CallbackSigner::new(secret(store)?, &public)
        .with_context(|| format!("{SECRET_VAR} is too short"))?;
    let servers = file.rap_servers()?;
    let client = RapClient::new(signer.clone())
        .with_configured(&servers)
        .with_context(|| format!("agent `{}`", file.name))?;
    let client = Arc::new(client);
    if servers.is_empty() {
        eprintln!("note: inputs forwarded to this host are received at {public}");
    } else {
        eprintln!(
            "note: tool servers {}; callbacks received at {public}",
            servers
                .iter()
                .map(|s| s.url.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // `remote_exec` calls go to the remotes' hub, every other call to the tool servers.
    let dispatcher: Arc<dyn infinity_agent_core::host::ToolDispatcher> = match remotes {
        Some(hub) => Arc::new(RemoteDispatcher {
            hub,
            rest: Some(client.clone()),
        }),
        None => client.clone(),
    };
    let builder = builder
        .with_discovery(client.clone())
        .with_dispatcher(dispatcher);
    Ok((
        builder,
        Some(Receiver {
            listener,
            signer,
            client,
            tool_servers: !file.tool_servers.is_empty(),
        }),
    ))
}

impl Receiver {
    /// Serves callbacks (and forwarded inputs) into `system` until the process ends.
    pub fn serve(self, system: &AgentSystem) -> Links {
        let app =
            infinity_rap_runtime::receiver::router(self.signer.clone(), Arc::new(system.clone()));
        tokio::spawn(async move {
            if let Err(err) = axum::serve(self.listener, app).await {
                tracing::error!(%err, "the callback receiver stopped");
            }
        });
        Links {
            signer: self.signer,
            client: self.client,
            tool_servers: self.tool_servers,
        }
    }
}
