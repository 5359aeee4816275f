//! The toolset manifest a tool server serves at `/.well-known/rap-toolset`.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{is_absolute_url, WireError, WireMessage};

/// The longest toolset or tool name the spec allows, in characters.
const MAX_NAME_CHARS: usize = 128;

/// A toolset: the tools one server offers and where to invoke them.
///
/// A runtime exposes all of a manifest's tools or none: [`Manifest::validate`] (run by
/// [`super::parse_manifest`]) rejects the whole manifest for one bad tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The toolset's name, 1 to 128 characters.
    pub name: String,
    /// What the toolset is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The URL that receives every [`super::Invocation`] for these tools.
    pub endpoint: String,
    /// The tools; at least one, names unique.
    pub tools: Vec<ToolDefinition>,
    /// `true` when the server keeps per-session state and must be called at `/migrate` when a
    /// session moves host; absent means `false`.
    #[serde(rename = "needsMigration", skip_serializing_if = "Option::is_none")]
    pub needs_migration: Option<bool>,
}

impl Manifest {
    /// True when the runtime must call the server's `/migrate` during a session migration.
    pub fn needs_migration(&self) -> bool {
        self.needs_migration.unwrap_or(false)
    }

    /// The tool called `name` (the `operation` of an invocation), if the toolset has it.
    pub fn tool(&self, name: &str) -> Option<&ToolDefinition> {
        self.tools.iter().find(|tool| tool.name == name)
    }

    /// Checks the rules a runtime must check before exposing any tool: the name's length, an
    /// absolute http(s) `endpoint`, at least one tool, each tool valid, no name twice.
    pub fn validate(&self) -> Result<(), WireError> {
        let length = self.name.chars().count();
        if !(1..=MAX_NAME_CHARS).contains(&length) {
            return Err(WireError::invalid(
                "manifest",
                format!("`name` must be 1 to {MAX_NAME_CHARS} characters, is {length}"),
            ));
        }
        if !is_absolute_url(&self.endpoint, &["http", "https"]) {
            return Err(WireError::invalid(
                "manifest",
                format!(
                    "`endpoint` must be an absolute http(s) URL, got `{}`",
                    self.endpoint
                ),
            ));
        }
        if self.tools.is_empty() {
            return Err(WireError::invalid(
                "manifest",
                "`tools` must hold at least one tool",
            ));
        }
        let mut seen = HashSet::new();
        for tool in &self.tools {
            tool.validate()?;
            if !seen.insert(tool.name.as_str()) {
                return Err(WireError::invalid(
                    "manifest",
                    format!(
                        "tool name `{}` appears more than once in `tools`",
                        tool.name
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl WireMessage for Manifest {
    const NAME: &'static str = "manifest";

    fn validate(&self) -> Result<(), WireError> {
        Manifest::validate(self)
    }
}

/// One tool of a [`Manifest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name, sent as an invocation's `operation`: 1 to 128 of `A-Z a-z 0-9 _ -`,
    /// case-sensitive.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the arguments (`inputSchema` on the wire); must be an object.
    #[serde(rename = "inputSchema")]
    pub input_schema: Value,
    /// Opaque metadata: the spec defines no keys and runtimes must not reject unknown ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Map<String, Value>>,
    /// A Rhai script over `args` that renders the call for people (`displayScript` on the wire).
    #[serde(rename = "displayScript", skip_serializing_if = "Option::is_none")]
    pub display_script: Option<String>,
}

impl ToolDefinition {
    /// Checks the name (length and characters) and that `inputSchema` is a JSON object.
    ///
    /// The spec forbids "spaces or special characters" and recommends `A-Z a-z 0-9 _ -`; that
    /// set is enforced, as it is also what model APIs accept for tool names.
    pub fn validate(&self) -> Result<(), WireError> {
        let length = self.name.chars().count();
        if !(1..=MAX_NAME_CHARS).contains(&length) {
            return Err(WireError::invalid(
                "manifest",
                format!(
                    "tool name `{}` must be 1 to {MAX_NAME_CHARS} characters, is {length}",
                    self.name
                ),
            ));
        }
        if let Some(bad) = self
            .name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            return Err(WireError::invalid(
                "manifest",
                format!(
                    "tool name `{}` contains {bad:?}; names use only A-Z, a-z, 0-9, `_` and `-`",
                    self.name
                ),
            ));
        }
        if !self.input_schema.is_object() {
            return Err(WireError::invalid(
                "manifest",
                format!(
                    "tool `{}`: `inputSchema` must be a JSON object, got {}",
                    self.name,
                    json_kind(&self.input_schema)
                ),
            ));
        }
        Ok(())
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.to_owned(),
            description: "d".to_owned(),
            input_schema: json!({"type": "object"}),
            annotations: None,
            display_script: None,
        }
    }

    #[test]
    fn tool_names_follow_the_spec() {
        for good in ["get_pull_request", "deploy-service", "RunPipeline", "a"] {
            assert!(tool(good).validate().is_ok(), "{good}");
        }
        let too_long = "x".repeat(129);
        for bad in [
            "",
            "get pull request",
            "github.get_pr",
            "naïve",
            too_long.as_str(),
        ] {
            assert!(tool(bad).validate().is_err(), "{bad}");
        }
        assert!(tool(&"x".repeat(128)).validate().is_ok());
    }

    #[test]
    fn input_schema_must_be_an_object() {
        let mut schema_as_string = tool("t");
        schema_as_string.input_schema = json!("object");
        let error = schema_as_string.validate().unwrap_err().to_string();
        assert!(
            error.contains("`inputSchema`") && error.contains("a string"),
            "{error}"
        );
    }
}
