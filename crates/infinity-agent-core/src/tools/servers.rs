//! Tools from tool servers (the Reactive Agent Protocol): how an agent file names its servers,
//! the toolset of a conversation, and the seam through which a host discovers it.
//!
//! A conversation is what a person's first message (or a delegation) starts: a root thread and
//! the threads under it. When a conversation starts, the host asks its [`ToolDiscovery`] for
//! every configured server's tools; [`assemble`] applies the loading rules and the result is
//! kept on the root thread's record, so every slice of the conversation (children included) sees
//! the same tools, and a new conversation fetches them afresh. In a slice they are registry
//! tools like the agent's own ([`ServerTool`], compiled once per conversation by
//! [`conversation_registry`]): the registry checks their arguments against their `inputSchema`,
//! and a call becomes an `Effect::Dispatch` naming the server, performed after the commit;
//! results come back as `tool_result` inputs.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{Tool, ToolContext, ToolOutcome, ToolRegistry, BUILTIN_TOOL_NAMES};
use crate::effect::{Effect, ServerTarget};
use crate::history::INJECTED_TOOL;
use crate::input::Input;
use crate::model::ToolSpec;
use crate::state::{Deadline, DiscoveredTool, Toolset};

/// How requests to a tool server are authenticated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolServerAuth {
    /// The environment variable holding a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_env: Option<String>,
    /// The SSM parameter (SecureString) holding a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_ssm: Option<String>,
    /// Sign requests with AWS SigV4 (a Lambda Function URL with IAM auth).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sigv4: bool,
}

/// One entry of `tool_servers:` in an agent file: a base URL, or `{url, auth}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolServerConfig {
    /// The server's base URL (its manifest is at `{url}/.well-known/rap-toolset`).
    pub url: String,
    /// How to authenticate to it.
    #[serde(default, skip_serializing_if = "is_default")]
    pub auth: ToolServerAuth,
    /// How long a call of its tools may wait for a result; then it gets an error result and
    /// the server is told to cancel it. None: calls wait as long as it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
}

fn is_default(auth: &ToolServerAuth) -> bool {
    auth == &ToolServerAuth::default()
}

impl<'de> Deserialize<'de> for ToolServerConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            url: String,
            #[serde(default)]
            auth: ToolServerAuth,
            #[serde(default)]
            deadline: Option<Deadline>,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Url(String),
            Full(Full),
        }
        let value = serde_json::Value::deserialize(deserializer)?;
        let (url, auth, deadline) = match Either::deserialize(&value) {
            Ok(Either::Url(url)) => (url, ToolServerAuth::default(), None),
            Ok(Either::Full(Full {
                url,
                auth,
                deadline,
            })) => (url, auth, deadline),
            Err(_) => {
                // Say what is wrong with an object that is almost right (a bad deadline).
                let detail = match Full::deserialize(&value) {
                    Err(e) if value.is_object() => format!(": {e}"),
                    _ => String::new(),
                };
                return Err(serde::de::Error::custom(format!(
                    "a tool server is a base URL, or {{url, auth?: {{bearer_env | bearer_ssm | \
                     sigv4}}, deadline?}}{detail}"
                )));
            }
        };
        let url = url.trim_end_matches('/').to_owned();
        if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
            return Err(serde::de::Error::custom(format!(
                "tool server `{url}` is not an http(s) URL"
            )));
        }
        if [
            auth.bearer_env.is_some(),
            auth.bearer_ssm.is_some(),
            auth.sigv4,
        ]
        .iter()
        .filter(|on| **on)
        .count()
            > 1
        {
            return Err(serde::de::Error::custom(format!(
                "tool server `{url}`: choose one of bearer_env, bearer_ssm and sigv4"
            )));
        }
        Ok(Self {
            url,
            auth,
            deadline,
        })
    }
}

/// An MCP server an agent file lists (`{mcp: {command, args?, env?}}` or `{mcp: {url}}`): the
/// host starts the MCP bridge for it (`infinity-mcp-bridge`) and uses the bridge's URL as a
/// tool server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The command that starts a stdio MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables for its process.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Or the endpoint of a Streamable HTTP MCP server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl std::fmt::Display for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.command, &self.url) {
            (Some(command), _) => write!(f, "{command} {}", self.args.join(" ")),
            (None, Some(url)) => f.write_str(url),
            (None, None) => f.write_str("(no command or url)"),
        }
    }
}

/// One entry of `tool_servers:`: a RAP tool server, or an MCP server reached through the bridge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ToolServerEntry {
    /// A RAP tool server.
    Rap(ToolServerConfig),
    /// An MCP server, bridged by the host.
    Mcp {
        /// The server.
        mcp: McpServerConfig,
    },
}

impl<'de> Deserialize<'de> for ToolServerEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(deserializer)?;
        if value.get("mcp").is_some() {
            #[derive(Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Wrapper {
                mcp: McpServerConfig,
            }
            let Wrapper { mcp } =
                serde_json::from_value(value).map_err(|e| D::Error::custom(format!("mcp: {e}")))?;
            if mcp.command.is_some() == mcp.url.is_some() {
                return Err(D::Error::custom(
                    "an mcp server needs exactly one of `command` (stdio) or `url` (Streamable HTTP)",
                ));
            }
            if mcp.url.is_some() && (!mcp.args.is_empty() || !mcp.env.is_empty()) {
                return Err(D::Error::custom(
                    "`args` and `env` are for an mcp server started by `command`, not one at a `url`",
                ));
            }
            return Ok(ToolServerEntry::Mcp { mcp });
        }
        ToolServerConfig::deserialize(value)
            .map(ToolServerEntry::Rap)
            .map_err(|e| D::Error::custom(e.to_string()))
    }
}

/// Why a tool server contributes no tool to a conversation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// The host cannot reach tool servers at all.
    #[error("this host has no tool server client")]
    NoClient,
    /// The server could not be reached (no connection, a timeout, a body cut short): it may
    /// answer next time.
    #[error("{0}")]
    Unreachable(String),
    /// The server answered the manifest's request with an error status.
    #[error("{0}")]
    Refused(String),
    /// The server's manifest is not one RAP accepts (what is wrong with it).
    #[error("{0}")]
    InvalidManifest(String),
}

/// One server's answer to discovery: its manifest's `endpoint` and tools, already validated
/// whole, or why it contributes none.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered {
    /// The server's base URL.
    pub server: String,
    /// Its endpoint and tools, or the reason it has none.
    pub result: Result<(String, Vec<ToolSpec>), DiscoveryError>,
    /// The manifest's `name` and `description`, when it was read (the meta catalog shows them).
    pub about: Option<(String, Option<String>)>,
}

/// Fetches tool servers' manifests. `infinity-rap` implements it over HTTP.
#[async_trait]
pub trait ToolDiscovery: Send + Sync + std::fmt::Debug {
    /// One entry per server, in order. Never fails as a whole: a server that cannot be reached
    /// or whose manifest is invalid contributes no tool and says why.
    async fn discover(&self, servers: &[ToolServerConfig]) -> Vec<Discovered>;
}

/// Gives each tool the deadline its server has in `servers` (the agent file's `tool_servers`).
pub fn apply_deadlines(toolset: &mut Toolset, servers: &[ToolServerConfig]) {
    for tool in &mut toolset.tools {
        tool.deadline = servers
            .iter()
            .find(|s| s.url == tool.server)
            .and_then(|s| s.deadline.clone());
    }
}

/// The toolset of a new conversation from what discovery found, by the loading rules: a server that
/// failed contributes nothing; a name offered by two servers loads from neither; a name the
/// agent already has (built-in, an internal tool it has on, its own tool) or the reserved
/// injection name is refused, naming both; a schema that does not compile is refused. Every
/// refusal is logged as a warning and kept in [`Toolset::problems`].
pub fn assemble(agent_tools: &ToolRegistry, discovered: Vec<Discovered>) -> Toolset {
    let mut problems = Vec::new();
    let mut offered: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in &discovered {
        if let Ok((_, tools)) = &d.result {
            for t in tools {
                offered
                    .entry(t.name.clone())
                    .or_default()
                    .push(d.server.clone());
            }
        }
    }
    let mut tools = Vec::new();
    for d in discovered {
        let (endpoint, specs) = match d.result {
            Ok(found) => found,
            Err(why) => {
                problems.push(format!("tool server {}: no tools loaded: {why}", d.server));
                continue;
            }
        };
        for spec in specs {
            let servers = offered.get(&spec.name).map(Vec::as_slice).unwrap_or(&[]);
            let refusal = if servers.len() > 1 {
                Some(format!(
                    "tool `{}` is offered by {}; tool names must be unique, so neither is loaded",
                    spec.name,
                    servers.join(" and ")
                ))
            } else if spec.name == INJECTED_TOOL {
                Some(format!(
                    "tool `{}` of {}: the name is reserved for events the runtime injects",
                    spec.name, d.server
                ))
            } else if agent_tools.get(&spec.name).is_some() {
                let theirs = if BUILTIN_TOOL_NAMES.contains(&spec.name.as_str()) {
                    "the built-in tool"
                } else if agent_tools.is_internal(&spec.name) {
                    "the internal tool"
                } else {
                    "the agent's own tool"
                };
                Some(format!(
                    "tool `{}` of {} has the name of {theirs} `{}`; it is left out (rename it on \
                     the server, or turn off the internal tool's category)",
                    spec.name, d.server, spec.name
                ))
            } else if let Err(e) = jsonschema::validator_for(&spec.input_schema) {
                Some(format!(
                    "tool `{}` of {} has an invalid inputSchema: {e}",
                    spec.name, d.server
                ))
            } else {
                None
            };
            match refusal {
                Some(why) => {
                    tracing::warn!(server = %d.server, tool = %spec.name, %why, "tool server tool refused");
                    if !problems.contains(&why) {
                        problems.push(why);
                    }
                }
                None => tools.push(DiscoveredTool {
                    server: d.server.clone(),
                    endpoint: endpoint.clone(),
                    spec,
                    deadline: None,
                }),
            }
        }
    }
    Toolset { tools, problems }
}

/// A tool server's tool, as a registry tool: a call dispatches to its server.
#[derive(Debug, Clone)]
pub struct ServerTool {
    tool: DiscoveredTool,
}

/// The argument a tool server's tool gets from the runtime for calls that subscribe: the
/// `wake_if` expression ([`crate::tools::wake_if`]), unless the server's own schema already has
/// an argument by that name (it is then the server's).
pub const WAKE_IF_ARG: &str = "wake_if";

/// True when the runtime, not the server, owns `wake_if` for this tool.
pub fn runtime_owns_wake_if(tool: &DiscoveredTool) -> bool {
    tool.spec
        .input_schema
        .get("properties")
        .and_then(|p| p.get(WAKE_IF_ARG))
        .is_none()
}

/// The `wake_if` expression of a call of `tool` with `args`, when the runtime owns it.
pub fn wake_if_of<'a>(tool: &DiscoveredTool, args: &'a serde_json::Value) -> Option<&'a str> {
    if !runtime_owns_wake_if(tool) {
        return None;
    }
    args.get(WAKE_IF_ARG).and_then(serde_json::Value::as_str)
}

impl Tool for ServerTool {
    fn spec(&self) -> ToolSpec {
        let mut spec = self.tool.spec.clone();
        if runtime_owns_wake_if(&self.tool) {
            if let Some(schema) = spec.input_schema.as_object_mut() {
                let properties = schema
                    .entry("properties")
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(properties) = properties.as_object_mut() {
                    properties.insert(
                        WAKE_IF_ARG.to_owned(),
                        serde_json::json!({
                            "type": "string",
                            "description": "Only for a call that subscribes to events: an expression over each event's JSON; events that do not match do not wake you (they are counted and summarized). Example: price < 100 && symbol == \"ACME\". Operators: == != < <= > >= && || ! and parentheses; paths like quote.bid or levels[0]; $ is the whole event."
                        }),
                    );
                }
            }
        }
        spec
    }

    fn call(&self, args: &serde_json::Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let mut args = args.clone();
        if runtime_owns_wake_if(&self.tool) {
            if let Some(expr) = args.as_object_mut().and_then(|a| a.remove(WAKE_IF_ARG)) {
                let checked = expr
                    .as_str()
                    .ok_or_else(|| "wake_if must be a string".to_owned())
                    .and_then(|e| {
                        crate::tools::wake_if::WakeIf::parse(e).map_err(|e| e.to_string())
                    });
                if let Err(why) = checked {
                    return ToolOutcome::error(format!(
                        "Error: {why}. The call was not made; fix the expression and call again."
                    ));
                }
            }
        }
        ctx.dispatch(
            ServerTarget {
                base_url: self.tool.server.clone(),
                endpoint: self.tool.endpoint.clone(),
            },
            &self.tool.spec.name,
            args,
        );
        if let Some(deadline) = &self.tool.deadline {
            if let Some(due) = deadline.due_from(ctx.now) {
                ctx.emit(Effect::SendAt {
                    input: Input::call_deadline(&ctx.record.id, &ctx.call.id, deadline.as_str()),
                    due,
                });
            }
        }
        ToolOutcome::Dispatched
    }
}

/// The registry of a conversation's tools, their argument schemas compiled. [`assemble`] already
/// refused tools whose schema does not compile, so none is expected to fail here; one that does
/// (a record written by an older version) is left out with a warning.
pub fn conversation_registry(toolset: &Toolset) -> ToolRegistry {
    let mut registry = ToolRegistry::empty();
    for tool in &toolset.tools {
        let server_tool = Arc::new(ServerTool { tool: tool.clone() });
        if let Err(err) = registry.register(server_tool) {
            tracing::warn!(server = %tool.server, %err, "tool server tool left out");
        }
    }
    registry
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: "d".to_owned(),
            input_schema: json!({"type": "object"}),
        }
    }

    fn server(url: &str, names: &[&str]) -> Discovered {
        Discovered {
            server: url.to_owned(),
            result: Ok((
                format!("{url}/invoke"),
                names.iter().map(|n| spec(n)).collect(),
            )),
            about: None,
        }
    }

    #[test]
    fn the_loading_rules() {
        let registry = ToolRegistry::for_agent(
            &crate::tools::internal::Categories::core(),
            &crate::tools::internal::InternalTools::builder()
                .plan(false)
                .build(),
            &Default::default(),
            &[],
        )
        .unwrap();
        let toolset = assemble(
            &registry,
            vec![
                server("http://a", &["get_time", "search", "sleep", "memory_get"]),
                server("http://b", &["search", "plan_create"]),
                Discovered {
                    server: "http://c".to_owned(),
                    result: Err(DiscoveryError::Refused("HTTP 500".to_owned())),
                    about: None,
                },
            ],
        );
        let names: Vec<&str> = toolset.tools.iter().map(|t| t.spec.name.as_str()).collect();
        // `plan` is off, so its names are free.
        assert_eq!(names, ["get_time", "plan_create"]);
        assert_eq!(toolset.tools[0].endpoint, "http://a/invoke");
        let problems = toolset.problems.join("\n");
        assert!(
            problems.contains("`search` is offered by http://a and http://b"),
            "{problems}"
        );
        assert!(
            problems.contains("`sleep` of http://a has the name of the built-in tool `sleep`"),
            "{problems}"
        );
        assert!(
            problems.contains("`memory_get` of http://a has the name of the internal tool"),
            "{problems}"
        );
        assert!(
            problems.contains("http://c: no tools loaded: HTTP 500"),
            "{problems}"
        );
        assert_eq!(toolset.problems.len(), 4, "{problems}");
    }

    #[test]
    fn mcp_entries_name_a_command_or_a_url() {
        let entries: Vec<ToolServerEntry> = serde_yaml_ng::from_str(
            "- http://localhost:8080\n- {mcp: {command: npx, args: [-y, server], env: {K: v}}}\n- {mcp: {url: 'http://127.0.0.1:3000/mcp'}}\n",
        )
        .unwrap();
        assert!(matches!(&entries[0], ToolServerEntry::Rap(c) if c.url == "http://localhost:8080"));
        assert!(
            matches!(&entries[1], ToolServerEntry::Mcp { mcp } if mcp.command.as_deref() == Some("npx") && mcp.args == ["-y", "server"])
        );
        assert!(matches!(&entries[2], ToolServerEntry::Mcp { mcp } if mcp.url.is_some()));
        for (bad, says) in [
            ("- {mcp: {}}\n", "exactly one of"),
            ("- {mcp: {command: x, url: 'http://y'}}\n", "exactly one of"),
            (
                "- {mcp: {url: 'http://y', args: [a]}}\n",
                "`args` and `env`",
            ),
            ("- {mcp: {cmd: x}}\n", "cmd"),
            ("- ftp://x\n", "not an http(s) URL"),
        ] {
            let err = serde_yaml_ng::from_str::<Vec<ToolServerEntry>>(bad).unwrap_err();
            assert!(err.to_string().contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn server_entries_are_urls_or_objects() {
        let servers: Vec<ToolServerConfig> = serde_yaml_ng::from_str(
            "- http://localhost:8080/\n- {url: 'https://x.lambda-url.us-east-1.on.aws', auth: {sigv4: true}}\n",
        )
        .unwrap();
        assert_eq!(servers[0].url, "http://localhost:8080");
        assert!(servers[1].auth.sigv4);
        let bad = serde_yaml_ng::from_str::<Vec<ToolServerConfig>>("- ftp://x\n").unwrap_err();
        assert!(bad.to_string().contains("not an http(s) URL"), "{bad}");
        let two = serde_yaml_ng::from_str::<Vec<ToolServerConfig>>(
            "- {url: 'http://x:1', auth: {sigv4: true, bearer_env: T}}\n",
        )
        .unwrap_err();
        assert!(two.to_string().contains("choose one"), "{two}");
    }
}
