//! The name rule a version must pass to be saved: a tool the agent defines (a configured
//! sub-agent, a client tool, a tool server's tool) may not have the name of a built-in tool, nor
//! of an internal tool of a category the agent has on. A category that is off frees its names.
//!
//! A version saved before the rule caught something (a tool server added a tool, a category's
//! default changed) still runs: the clashing tool is left out with a warning and the rest stay
//! (see [`crate::tools::servers::assemble`] and [`crate::agent::Agent::from_spec`]). A clashing
//! client tool is the exception: the agent is refused, naming it, since an application that
//! runs the tool would otherwise wait for calls that never come.

use std::fmt;

use crate::agent::AgentFile;
use crate::tools::internal::Categories;
use crate::tools::BUILTIN_TOOL_NAMES;

/// A tool of the agent's own whose name is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameClash {
    /// The tool's name.
    pub name: String,
    /// Where the agent's tool comes from (`agents:`, `client_tools:` or a tool server's URL).
    pub source: String,
    /// The internal tool's category, or `None` for a built-in tool (which cannot be turned off).
    pub category: Option<&'static str>,
}

impl fmt::Display for NameClash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.category {
            Some(category) => write!(
                f,
                "tool `{}` ({}) has the name of an internal tool of the `{category}` category, \
                 which this agent has on: set `internal_tools: {{{category}: false}}` or rename \
                 the tool",
                self.name, self.source
            ),
            None => write!(
                f,
                "tool `{}` ({}) has the name of a built-in tool: rename it",
                self.name, self.source
            ),
        }
    }
}

/// Checks the names of the tools `file` defines: its configured sub-agents and `server_tools`,
/// the tools its servers offer as `(name, server)` (the host discovers them; an unreachable
/// server contributes none), against the internal tools of the host's `categories`. Every clash
/// is returned, not only the first.
pub fn check_names(
    file: &AgentFile,
    categories: &Categories,
    server_tools: &[(String, String)],
) -> Vec<NameClash> {
    let flags = file.internal_tools();
    let own = file
        .agents
        .iter()
        .map(|agent| {
            (
                crate::tools::internal::delegation::agent_tool_name(agent),
                "agents:".to_owned(),
            )
        })
        .chain(
            file.client_tools
                .iter()
                .map(|tool| (tool.name.clone(), "client_tools:".to_owned())),
        )
        .chain(server_tools.iter().cloned());
    let mut clashes = Vec::new();
    for (name, source) in own {
        if BUILTIN_TOOL_NAMES.contains(&name.as_str()) {
            clashes.push(NameClash {
                name,
                source,
                category: None,
            });
        } else if let Some(category) = categories.enabled_tool(&flags, &name) {
            clashes.push(NameClash {
                name,
                source,
                category: Some(category),
            });
        }
    }
    clashes
}
