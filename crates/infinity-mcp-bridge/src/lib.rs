//! Serves the tools of an MCP server (Model Context Protocol) as a RAP toolset.
//!
//! The bridge is an MCP client (through rmcp, the official Rust SDK) and a RAP tool server
//! (through [`infinity_rap::kit`]). [`Bridge::connect`] starts or reaches the MCP server
//! ([`McpSource`]: a child process over stdio, or Streamable HTTP), runs the handshake and
//! lists its tools; [`Bridge::tool_server`] makes one RAP tool per MCP tool, each call forwarded
//! as an MCP `tools/call` and answered with one `tool_result`.
//!
//! - [`run`] is the `infinity mcp-bridge` command ([`BridgeArgs`]): connect, serve, print one
//!   line, stop on Ctrl-C.
//! - [`serve_in_background`] starts a bridge inside a host process and returns its base URL,
//!   to list among an agent's tool servers.
//!
//! ```no_run
//! use infinity_mcp_bridge::{serve_in_background, McpSource};
//!
//! # async fn start() -> Result<(), Box<dyn std::error::Error>> {
//! let source = McpSource::stdio(
//!     "npx",
//!     ["-y".to_owned(), "@modelcontextprotocol/server-everything".to_owned()],
//! );
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let base_url = serve_in_background(source, listener).await?;
//! // A runtime finds the toolset at `{base_url}/.well-known/rap-toolset`.
//! println!("{base_url}");
//! # Ok(())
//! # }
//! ```
//!
//! Only MCP tools are bridged (not resources, prompts or sampling), and results keep only text
//! and images, the two content kinds RAP defines; the README lists the other limits.
#![warn(missing_docs)]

mod bridge;
mod cli;
mod error;
mod results;
mod source;
#[cfg(feature = "test-util")]
pub mod test_server;
mod tools;

pub use bridge::{Bridge, CONNECT_TIMEOUT};
pub use cli::{run, serve_in_background, BridgeArgs, DEFAULT_PORT};
pub use error::BridgeError;
pub use source::McpSource;
