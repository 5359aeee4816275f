//! The MCP client session and the RAP tool server built on it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use infinity_rap::kit::{Call, CallbackError, ToolServer};
use infinity_rap::wire::ToolDefinition;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::ServiceExt;
use tokio::process::Command;

use crate::results::{answer, Answer};
use crate::source::is_http_url;
use crate::tools::{rap_tools, toolset_identity};
use crate::{BridgeError, McpSource};

/// The MCP client session: rmcp's running client, whose handler only states who the bridge is.
type McpClient = RunningService<RoleClient, ClientConfig>;

/// How long [`Bridge::connect`] may take, from starting or reaching the server to the end of
/// its tool list.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(120);

/// How long [`Bridge::close`] waits for the MCP session to end cleanly.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected MCP server and the RAP tools that stand for its tools.
///
/// Built once by [`Bridge::connect`], which keeps the MCP session open; every RAP call of a
/// tool becomes one MCP `tools/call` on that session. The tool list is read once: tools the
/// server adds later are not offered, and tools it removes answer with an error result.
pub struct Bridge {
    client: Arc<McpClient>,
    name: String,
    description: String,
    tools: Vec<ToolDefinition>,
}

impl Bridge {
    /// Connects to the MCP server as a client (the `initialize` handshake), lists its tools
    /// (every page) and keeps the session.
    ///
    /// Tools RAP cannot carry (a name outside `[A-Za-z0-9_-]{1,128}`, an input schema that is
    /// not an object) are left out with a warning naming them.
    ///
    /// The handshake and the listing must be done within [`CONNECT_TIMEOUT`] (a stdio server
    /// started with `npx -y` may first have to download its package); a stdio server that takes
    /// longer is stopped.
    pub async fn connect(source: McpSource) -> Result<Bridge, BridgeError> {
        let shown = source.to_string();
        tokio::time::timeout(CONNECT_TIMEOUT, Bridge::connect_now(source, &shown))
            .await
            .map_err(|_| BridgeError::Timeout {
                server: shown,
                after: CONNECT_TIMEOUT,
            })?
    }

    async fn connect_now(source: McpSource, shown: &str) -> Result<Bridge, BridgeError> {
        let identity = client_identity();
        let connected = match source {
            McpSource::Stdio { command, args, env } => {
                let mut child = Command::new(&command);
                child.args(&args).envs(env).kill_on_drop(true);
                let transport =
                    TokioChildProcess::new(child).map_err(|source| BridgeError::Spawn {
                        command: shown.to_owned(),
                        source,
                    })?;
                identity.serve(transport).await
            }
            McpSource::Http { url } => {
                if !is_http_url(&url) {
                    return Err(BridgeError::InvalidUrl { url });
                }
                identity
                    .serve(StreamableHttpClientTransport::from_uri(url))
                    .await
            }
        };
        let client = connected.map_err(|source| BridgeError::Initialize {
            server: shown.to_owned(),
            source: Box::new(source),
        })?;
        let (name, description) = toolset_identity(client.peer_info().as_deref());
        let mcp_tools = client
            .list_all_tools()
            .await
            .map_err(|source| BridgeError::ListTools {
                server: shown.to_owned(),
                source: Box::new(source),
            })?;
        let tools = rap_tools(&name, &mcp_tools);
        tracing::info!(
            server = %shown, toolset = %name, listed = mcp_tools.len(), offered = tools.len(),
            "connected to the MCP server"
        );
        Ok(Bridge {
            client: Arc::new(client),
            name,
            description,
            tools,
        })
    }

    /// The toolset's name: the MCP server's name, made a valid RAP toolset name.
    pub fn server_name(&self) -> &str {
        &self.name
    }

    /// The toolset's description: the MCP server's name and version, and its instructions.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The RAP definitions of the tools offered, in the MCP server's order.
    pub fn tools(&self) -> &[ToolDefinition] {
        &self.tools
    }

    /// A RAP tool server with one tool per usable MCP tool. Each call is forwarded as an MCP
    /// `tools/call` and answered with one `tool_result`: text, text and images, or an error
    /// result (`isError`, or an MCP protocol error). A call the runtime cancels is abandoned
    /// (rmcp tells the MCP server with `notifications/cancelled`) and answered with nothing.
    ///
    /// A server with no usable tool gives a [`ToolServer`] that cannot be served;
    /// [`Bridge::router`] says so more clearly.
    pub fn tool_server(&self) -> ToolServer {
        let mut server = ToolServer::new(&self.name, &self.description);
        for tool in &self.tools {
            let client = Arc::clone(&self.client);
            server = server.tool(tool.clone(), move |call| {
                forward_call(Arc::clone(&client), call)
            });
        }
        server
    }

    /// The router of [`Bridge::tool_server`] for a bridge reachable at `public_url`.
    pub fn router(&self, public_url: &str) -> Result<axum::Router, BridgeError> {
        if self.tools.is_empty() {
            return Err(BridgeError::NoUsableTools {
                server: self.name.clone(),
            });
        }
        Ok(self.tool_server().router(public_url)?)
    }

    /// Ends the MCP session (a stdio server's process is asked to exit, then stopped) once no
    /// router built from this bridge is left; with routers still alive, only asks the session
    /// to stop.
    pub async fn close(self) {
        match Arc::try_unwrap(self.client) {
            Ok(mut client) => {
                if let Err(error) = client.close_with_timeout(CLOSE_TIMEOUT).await {
                    tracing::warn!(%error, "the MCP session did not end cleanly");
                }
            }
            Err(client) => client.cancellation_token().cancel(),
        }
    }
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|tool| tool.name.as_str()).collect();
        f.debug_struct("Bridge")
            .field("name", &self.name)
            .field("tools", &tools)
            .finish_non_exhaustive()
    }
}

/// Who the bridge says it is in the handshake; it offers the server no client capability.
fn client_identity() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION")),
    )
}

/// Handles one RAP call: one MCP `tools/call`, then one `tool_result`, unless the runtime
/// cancels the call first.
async fn forward_call(client: Arc<McpClient>, call: Call) -> Result<(), CallbackError> {
    let request =
        CallToolRequestParams::new(call.operation().to_owned()).with_arguments(call.args().clone());
    let outcome = tokio::select! {
        // Dropping the request makes rmcp send `notifications/cancelled` to the server.
        () = call.cancelled() => {
            tracing::info!("call cancelled by the runtime; MCP request abandoned");
            return Ok(());
        }
        outcome = client.call_tool(request) => outcome,
    };
    match outcome {
        Ok(result) => match answer(call.operation(), result) {
            Answer::Text(text) => call.result_text(text).await,
            Answer::Content(content) => call.result_content(content).await,
            Answer::Error(text) => call.result_error(text).await,
        },
        Err(error) => {
            tracing::warn!(%error, "the MCP tools/call failed");
            call.result_error(format!(
                "the MCP server failed the call of `{}`: {error}",
                call.operation()
            ))
            .await
        }
    }
}
