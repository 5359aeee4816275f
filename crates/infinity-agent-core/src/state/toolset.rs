//! The tools a session got from tool servers, as its root thread's record keeps them.

use serde::{Deserialize, Serialize};

use crate::model::ToolSpec;

/// A tool a session got from a tool server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RemoteTool {
    /// The server's base URL, as configured.
    pub server: String,
    /// Where its invocations go (the manifest's `endpoint`).
    pub endpoint: String,
    /// The tool as the model sees it.
    #[serde(flatten)]
    pub spec: ToolSpec,
}

/// The tools of one session, kept on its root thread's record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Toolset {
    /// The tools loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<RemoteTool>,
    /// What was not loaded, and why (shown to the user when the session starts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl Toolset {
    /// The tool with this name.
    pub fn get(&self, name: &str) -> Option<&RemoteTool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }
}
