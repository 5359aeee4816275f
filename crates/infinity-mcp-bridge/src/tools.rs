//! MCP tool definitions as RAP tool definitions, and the toolset's name and description.

use std::collections::HashSet;

use infinity_rap::kit::tool_definition;
use infinity_rap::wire::ToolDefinition;
use rmcp::model::{ServerPeerInfo, Tool};
use serde_json::Value;

/// The longest toolset name RAP allows, in characters.
const MAX_TOOLSET_NAME_CHARS: usize = 128;

/// The toolset name when the server did not say its name.
const UNNAMED_SERVER: &str = "mcp-server";

/// The RAP definitions of the MCP tools RAP can carry, in the server's order. Each tool that
/// cannot be carried is skipped, with a warning that names it and says why.
pub(crate) fn rap_tools(server: &str, tools: &[Tool]) -> Vec<ToolDefinition> {
    let mut seen = HashSet::new();
    let mut usable = Vec::new();
    for tool in tools {
        match rap_tool(server, tool) {
            Ok(definition) if seen.insert(definition.name.clone()) => usable.push(definition),
            Ok(definition) => tracing::warn!(
                tool = %definition.name, server,
                "skipping an MCP tool: the server lists its name twice"
            ),
            Err(reason) => tracing::warn!(
                tool = %tool.name, server, %reason,
                "skipping an MCP tool RAP cannot carry"
            ),
        }
    }
    usable
}

/// The RAP definition of one MCP tool: same name and input schema, and its description (or a
/// placeholder naming it); or why RAP cannot carry it.
fn rap_tool(server: &str, tool: &Tool) -> Result<ToolDefinition, String> {
    let name = tool.name.as_ref();
    let description = tool
        .description
        .as_deref()
        .map(str::trim)
        .filter(|description| !description.is_empty())
        .map(str::to_owned)
        .or_else(|| tool.title.clone().filter(|title| !title.trim().is_empty()))
        .unwrap_or_else(|| format!("The `{name}` tool of the MCP server `{server}`."));
    let schema = Value::Object(tool.input_schema.as_ref().clone());
    if let Some(kind) = schema.get("type").filter(|kind| *kind != "object") {
        return Err(format!(
            "its inputSchema describes {kind}, but RAP arguments are always an object"
        ));
    }
    let definition = tool_definition(name, description, schema);
    // Checks the name's length and characters, and that the schema is an object.
    definition.validate().map_err(|error| error.to_string())?;
    Ok(definition)
}

/// The toolset name for a server called `server_name`: 1 to 128 characters of letters, digits,
/// `-`, `_` and `.`, every run of other characters made one `-`.
pub(crate) fn toolset_name(server_name: &str) -> String {
    let mut name = String::new();
    for c in server_name.trim().chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            name.push(c);
        } else if !name.ends_with('-') {
            name.push('-');
        }
    }
    let name: String = name
        .trim_matches('-')
        .chars()
        .take(MAX_TOOLSET_NAME_CHARS)
        .collect();
    if name.is_empty() {
        UNNAMED_SERVER.to_owned()
    } else {
        name
    }
}

/// The toolset name and description from what the server said at the handshake.
pub(crate) fn toolset_identity(info: Option<&ServerPeerInfo>) -> (String, String) {
    let implementation = info.and_then(|info| info.server_info.as_ref());
    let name = toolset_name(implementation.map_or("", |implementation| &implementation.name));
    let mut description = match implementation {
        Some(implementation) => {
            let shown = implementation
                .title
                .as_deref()
                .filter(|title| !title.trim().is_empty())
                .unwrap_or(&implementation.name);
            format!("Tools of the MCP server {shown} {}", implementation.version)
                .trim_end()
                .to_owned()
        }
        None => "Tools of an MCP server".to_owned(),
    };
    description.push('.');
    if let Some(instructions) = info
        .and_then(|info| info.instructions.as_deref())
        .map(str::trim)
        .filter(|instructions| !instructions.is_empty())
    {
        description.push(' ');
        description.push_str(instructions);
    }
    (name, description)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rmcp::model::{Implementation, ProtocolVersion, ServerCapabilities};
    use serde_json::json;

    use super::*;

    fn tool(name: &str, description: &str, schema: Value) -> Tool {
        let Value::Object(schema) = schema else {
            panic!("schemas are objects")
        };
        Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema))
    }

    #[test]
    fn tools_keep_their_name_description_and_schema() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "number"}}});
        let tools = rap_tools("calc", &[tool("add", "Adds", schema.clone())]);
        assert_eq!(tools, vec![tool_definition("add", "Adds", schema)]);
    }

    #[test]
    fn an_empty_description_becomes_a_placeholder_naming_the_tool() {
        let tools = rap_tools("calc", &[tool("fail", " ", json!({"type": "object"}))]);
        assert_eq!(
            tools[0].description,
            "The `fail` tool of the MCP server `calc`."
        );
    }

    #[test]
    fn tools_rap_cannot_carry_are_skipped() {
        let object = json!({"type": "object"});
        let tools = rap_tools(
            "calc",
            &[
                tool("files.read", "Dotted", object.clone()),
                tool("list", "Takes an array", json!({"type": "array"})),
                tool("add", "Adds", object.clone()),
                tool("add", "Adds again", object),
            ],
        );
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
        assert_eq!(names, ["add"]);
        assert_eq!(tools[0].description, "Adds");
    }

    #[test]
    fn toolset_names_are_sanitized() {
        assert_eq!(toolset_name("tiny test server"), "tiny-test-server");
        assert_eq!(toolset_name("@scope/server (v2)"), "scope-server-v2");
        assert_eq!(
            toolset_name("mcp-servers/everything"),
            "mcp-servers-everything"
        );
        assert_eq!(toolset_name(" ✨ "), "mcp-server");
        assert_eq!(toolset_name(&"x".repeat(200)).len(), 128);
    }

    #[test]
    fn the_description_names_the_server_and_carries_its_instructions() {
        let info = ServerPeerInfo::new(ProtocolVersion::default(), ServerCapabilities::default())
            .with_server_info(Implementation::new("tiny test server", "0.1.0"))
            .with_instructions("Adds numbers.");
        let (name, description) = toolset_identity(Some(&info));
        assert_eq!(name, "tiny-test-server");
        assert_eq!(
            description,
            "Tools of the MCP server tiny test server 0.1.0. Adds numbers."
        );
        let (name, description) = toolset_identity(None);
        assert_eq!(
            (name.as_str(), description.as_str()),
            ("mcp-server", "Tools of an MCP server.")
        );
    }
}
