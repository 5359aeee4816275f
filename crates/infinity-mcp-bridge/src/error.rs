//! Why a bridge could not be set up.

use std::io;
use std::time::Duration;

use infinity_rap::kit::KitError;
use rmcp::service::ClientInitializeError;
use rmcp::ServiceError;

/// Why connecting to the MCP server or serving its tools failed.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The stdio server's command could not be started (not found, not executable). Terminal:
    /// fix the command.
    #[error("could not start the MCP server {command}: {source}")]
    Spawn {
        /// The command line, as [`crate::McpSource`] shows it.
        command: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The Streamable HTTP source's URL is not an absolute http(s) URL. Terminal.
    #[error("the MCP server URL `{url}` is not an absolute http(s) URL")]
    InvalidUrl {
        /// The URL given.
        url: String,
    },
    /// The MCP handshake (`initialize`) failed: the server was unreachable, exited, or answered
    /// something else than an initialize result. Connecting again later may work.
    #[error("the MCP handshake with {server} failed: {source}")]
    Initialize {
        /// The server, as [`crate::McpSource`] shows it.
        server: String,
        /// What rmcp reported.
        #[source]
        source: Box<ClientInitializeError>,
    },
    /// `tools/list` failed after the handshake. Connecting again later may work.
    #[error("listing the tools of {server} failed: {source}")]
    ListTools {
        /// The server, as [`crate::McpSource`] shows it.
        server: String,
        /// What rmcp reported.
        #[source]
        source: Box<ServiceError>,
    },
    /// The handshake and the tool listing took longer than `after` (a stdio server is stopped).
    /// Connecting again later may work.
    #[error(
        "the MCP server {server} did not finish the handshake and list its tools within {after:?}"
    )]
    Timeout {
        /// The server, as [`crate::McpSource`] shows it.
        server: String,
        /// How long the bridge waited.
        after: Duration,
    },
    /// The server offers no tool that RAP can carry (none at all, or only ones with names or
    /// schemas RAP does not accept), and a RAP toolset needs at least one. Terminal.
    #[error("the MCP server `{server}` offers no tool usable over RAP")]
    NoUsableTools {
        /// The server's name.
        server: String,
    },
    /// The toolset or the public URL does not make a valid RAP manifest. Terminal.
    #[error(transparent)]
    Kit(#[from] KitError),
    /// The listener's address could not be read.
    #[error("could not serve the bridge: {0}")]
    Listener(#[source] io::Error),
    /// `infinity mcp-bridge` was given neither `--url` nor a command. Terminal.
    #[error("name the MCP server: --url URL, or its command after `--`")]
    NoServer,
    /// The bridge could not listen on the address given. Terminal until it is free.
    #[error("could not listen on {address}: {source}")]
    Listen {
        /// `HOST:PORT`.
        address: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// Serving stopped with an error.
    #[error("the bridge stopped serving: {0}")]
    Stopped(#[source] io::Error),
}

impl BridgeError {
    /// True when connecting again later may succeed (the server was not up yet, the network
    /// failed); false when the configuration must change first.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            BridgeError::Initialize { .. }
                | BridgeError::ListTools { .. }
                | BridgeError::Timeout { .. }
        )
    }
}
