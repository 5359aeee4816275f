//! The `infinity mcp-bridge` command, and the bridge started inside a host process.

use clap::ArgGroup;
use tokio::net::TcpListener;

use crate::{Bridge, BridgeError, McpSource};

/// The port `infinity mcp-bridge` listens on by default.
pub const DEFAULT_PORT: u16 = 8710;

/// The arguments of `infinity mcp-bridge`: where to listen, and the MCP server to bridge,
/// either `--url URL` or a command after `--`.
///
/// ```text
/// infinity mcp-bridge --port 8710 -- npx -y @modelcontextprotocol/server-everything
/// infinity mcp-bridge --url http://127.0.0.1:3000/mcp
/// ```
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
#[command(group(ArgGroup::new("mcp_server").required(true).args(["url", "command"])))]
pub struct BridgeArgs {
    /// The port to listen on (0: any free port).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// The address to listen on (0.0.0.0 to accept connections from other hosts).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The base URL runtimes reach the bridge at, when it is not http://HOST:PORT (behind a
    /// proxy, or when listening on 0.0.0.0).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// The MCP endpoint of a server speaking Streamable HTTP, e.g. http://127.0.0.1:3000/mcp.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// An environment variable for the MCP server's process; repeatable.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env_var, conflicts_with = "url")]
    pub env: Vec<(String, String)>,
    /// The command that starts a stdio MCP server, and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

impl BridgeArgs {
    /// The MCP server the arguments name: `--url`, or else the command after `--`.
    pub fn source(&self) -> Result<McpSource, BridgeError> {
        if let Some(url) = &self.url {
            return Ok(McpSource::http(url.clone()));
        }
        let Some((command, args)) = self.command.split_first() else {
            return Err(BridgeError::NoServer);
        };
        Ok(McpSource::Stdio {
            command: command.clone(),
            args: args.to_vec(),
            env: self.env.clone(),
        })
    }
}

/// `KEY=VALUE` as `(KEY, VALUE)`; the value may be empty or hold `=`.
fn parse_env_var(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got `{text}`")),
    }
}

/// Runs `infinity mcp-bridge`: connects to the MCP server, listens on `--host`/`--port`,
/// prints one line `mcp-bridge: <n> tools from <server name> at <public url>` on stdout, and
/// serves until Ctrl-C, then ends the MCP session.
pub async fn run(args: BridgeArgs) -> Result<(), BridgeError> {
    let source = args.source()?;
    let bridge = Bridge::connect(source).await?;
    let address = format!("{}:{}", args.host, args.port);
    let cannot_listen = |source| BridgeError::Listen {
        address: address.clone(),
        source,
    };
    let listener = TcpListener::bind((args.host.as_str(), args.port))
        .await
        .map_err(cannot_listen)?;
    let local = listener.local_addr().map_err(cannot_listen)?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{local}"));
    let router = bridge.router(&public_url)?;
    println!(
        "mcp-bridge: {} tools from {} at {public_url}",
        bridge.tools().len(),
        bridge.server_name()
    );
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            // Without a signal handler, serving until the process is killed is right.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
        .map_err(BridgeError::Stopped)?;
    bridge.close().await;
    Ok(())
}

/// Connects to the MCP server and serves its bridge on `listener`, on a task of its own; the
/// bridge's base URL (`http://` and the listener's address) once it is ready.
///
/// For a host that runs the bridge in-process; bind the listener to `127.0.0.1` (port 0 picks a
/// free one) so the URL is one a local runtime can reach. The bridge serves until the Tokio
/// runtime shuts down; a stdio MCP server's process is killed then.
pub async fn serve_in_background(
    source: McpSource,
    listener: TcpListener,
) -> Result<String, BridgeError> {
    let base_url = format!(
        "http://{}",
        listener.local_addr().map_err(BridgeError::Listener)?
    );
    let bridge = Bridge::connect(source).await?;
    let router = bridge.router(&base_url)?;
    tracing::info!(
        toolset = %bridge.server_name(), tools = bridge.tools().len(), %base_url,
        "serving an MCP bridge"
    );
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, router).await {
            tracing::error!(%error, "the MCP bridge stopped serving");
        }
    });
    Ok(base_url)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        bridge: BridgeArgs,
    }

    fn parse(args: &[&str]) -> Result<BridgeArgs, clap::Error> {
        let args = std::iter::once("mcp-bridge").chain(args.iter().copied());
        Cli::try_parse_from(args).map(|cli| cli.bridge)
    }

    #[test]
    fn a_stdio_server_is_the_command_after_the_double_dash() {
        let args = parse(&[
            "--port",
            "9000",
            "--env",
            "TOKEN=a=b",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-everything",
        ])
        .unwrap();
        assert_eq!((args.host.as_str(), args.port), ("127.0.0.1", 9000));
        assert_eq!(args.public_url, None);
        assert_eq!(
            args.source().unwrap(),
            McpSource::Stdio {
                command: "npx".to_owned(),
                args: vec![
                    "-y".to_owned(),
                    "@modelcontextprotocol/server-everything".to_owned()
                ],
                env: vec![("TOKEN".to_owned(), "a=b".to_owned())],
            }
        );
    }

    #[test]
    fn an_http_server_is_a_url() {
        let args = parse(&["--url", "http://127.0.0.1:3000/mcp"]).unwrap();
        assert_eq!(args.port, DEFAULT_PORT);
        assert_eq!(
            args.source().unwrap(),
            McpSource::http("http://127.0.0.1:3000/mcp")
        );
    }

    #[test]
    fn exactly_one_server_is_named() {
        assert!(parse(&["--port", "9000"]).is_err());
        assert!(parse(&["--url", "http://127.0.0.1:3000/mcp", "--", "npx"]).is_err());
        assert!(parse(&["--url", "http://127.0.0.1:3000/mcp", "--env", "A=1"]).is_err());
        assert!(parse(&["--env", "NOEQUALS", "--", "server"]).is_err());
    }
}
