//! Where the MCP server is, and how the bridge reaches it.

use std::fmt;

/// An MCP server to bridge: a local process spoken to over stdio, or a remote server speaking
/// Streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpSource {
    /// Starts `command` with `args` as a child process, with `env` added to the bridge's own
    /// environment, and speaks MCP over its stdin and stdout. The child's stderr goes to the
    /// bridge's stderr; the child is stopped when the bridge's MCP session ends.
    Stdio {
        /// The program, found on `PATH` unless it is a path.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Environment variables set for it, as `(name, value)`.
        env: Vec<(String, String)>,
    },
    /// Speaks MCP's Streamable HTTP transport to the server at `url` (e.g.
    /// `http://127.0.0.1:3000/mcp`).
    Http {
        /// The server's MCP endpoint, an absolute http(s) URL.
        url: String,
    },
}

impl McpSource {
    /// A source that starts `command` with `args` and no extra environment.
    pub fn stdio(command: impl Into<String>, args: impl IntoIterator<Item = String>) -> Self {
        McpSource::Stdio {
            command: command.into(),
            args: args.into_iter().collect(),
            env: Vec::new(),
        }
    }

    /// A source that speaks Streamable HTTP to `url`.
    pub fn http(url: impl Into<String>) -> Self {
        McpSource::Http { url: url.into() }
    }
}

/// The command line or the URL, for logs and error messages (environment values are left out:
/// they may be secrets).
impl fmt::Display for McpSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpSource::Stdio { command, args, .. } => {
                write!(f, "`{command}")?;
                for arg in args {
                    write!(f, " {arg}")?;
                }
                write!(f, "`")
            }
            McpSource::Http { url } => write!(f, "{url}"),
        }
    }
}

/// True for an absolute `http://` or `https://` URL with something after the scheme.
pub(crate) fn is_http_url(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["http://", "https://"].iter().any(|scheme| {
        lower
            .strip_prefix(scheme)
            .is_some_and(|rest| !rest.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_show_their_command_line_or_url_but_no_environment() {
        let stdio = McpSource::Stdio {
            command: "npx".to_owned(),
            args: vec![
                "-y".to_owned(),
                "@modelcontextprotocol/server-everything".to_owned(),
            ],
            env: vec![("API_KEY".to_owned(), "secret".to_owned())],
        };
        assert_eq!(
            stdio.to_string(),
            "`npx -y @modelcontextprotocol/server-everything`"
        );
        assert_eq!(
            McpSource::http("http://127.0.0.1:3000/mcp").to_string(),
            "http://127.0.0.1:3000/mcp"
        );
    }

    #[test]
    fn only_http_urls_are_urls() {
        assert!(is_http_url("http://127.0.0.1:3000/mcp"));
        assert!(is_http_url("HTTPS://mcp.example.com"));
        assert!(!is_http_url("http://"));
        assert!(!is_http_url("127.0.0.1:3000/mcp"));
        assert!(!is_http_url("ws://mcp.example.com"));
    }
}
