//! `set_title`: an example of an application tool registered next to the built-ins.

use serde_json::{json, Value};

use super::{Tool, ToolContext, ToolOutcome};
use crate::effect::OutputKind;
use crate::model::ToolSpec;

/// Sets the thread's title (shown by the `infinity` CLI). Register it with
/// [`crate::runtime::AgentSystemBuilder::with_tool`].
#[derive(Debug, Default, Clone, Copy)]
pub struct SetTitle;

/// The longest title kept, in characters.
const MAX_TITLE_CHARS: usize = 120;

impl Tool for SetTitle {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "set_title".to_owned(),
            description: "Set a short title for this thread, shown to the user.".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {"title": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE_CHARS}},
                "required": ["title"],
                "additionalProperties": false
            }),
        }
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let title = args
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_owned();
        ctx.record.title = Some(title.clone());
        ctx.output(OutputKind::TitleChanged {
            title: title.clone(),
        });
        ToolOutcome::ok(format!("Title set to \"{title}\"."))
    }
}
