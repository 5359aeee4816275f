//! The `widget` category: `widget(ui)` shows a UI to the user (top-level threads only). The UI
//! is validated against `schemas/widget.schema.json`, shipped with the project; an invalid one is
//! an error result naming the bad node. Button presses come back as `widget_action` inputs.

use serde_json::{json, Value};

use crate::effect::OutputKind;
use crate::model::ToolSpec;
use crate::state::ThreadRecord;
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// The JSON Schema of a widget's UI description.
pub const WIDGET_SCHEMA: &str = include_str!("../../../schemas/widget.schema.json");

#[derive(Debug)]
pub(super) struct Widget {
    schema: Value,
}

impl Widget {
    pub(super) fn new() -> Self {
        // The schema is ours and parses (a unit test checks it); `Null` would accept anything.
        Self {
            schema: serde_json::from_str(WIDGET_SCHEMA).unwrap_or(Value::Null),
        }
    }
}

impl Tool for Widget {
    fn spec(&self) -> ToolSpec {
        // The widget schema's `$defs` move to the top of the arguments' schema, where its
        // `#/$defs/...` references resolve.
        let mut ui = self.schema.clone();
        let defs = ui
            .as_object_mut()
            .and_then(|o| {
                o.remove("$schema");
                o.remove("$defs")
            })
            .unwrap_or_else(|| json!({}));
        ToolSpec {
            name: "widget".to_owned(),
            description: "Show the user a small UI: {type: ui, title, children: [nodes]} with \
                          nodes text, badge, row, column, button (label, action), input, select, \
                          card; or {type: html, html}. Button presses come back to you as \
                          messages."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {"ui": ui},
                "required": ["ui"],
                "additionalProperties": false,
                "$defs": defs
            }),
        }
    }

    fn offered_to(&self, record: &ThreadRecord) -> bool {
        record.is_top_level()
    }

    fn not_offered(&self, _record: &ThreadRecord) -> String {
        "Error: `widget` shows UI to a person, so only the top-level thread of a conversation \
         has it. Report to your parent instead."
            .to_owned()
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        ctx.output(OutputKind::Widget {
            ui: args["ui"].clone(),
        });
        ToolOutcome::ok("The widget is shown to the user.")
    }
}

/// A text rendering of a widget, for terminals.
pub fn render_text(ui: &Value) -> String {
    let mut out = String::new();
    if let Some(title) = ui["title"].as_str() {
        out.push_str(&format!("== {title} ==\n"));
    }
    if ui["type"] == "html" {
        out.push_str("(an HTML widget; open it in a browser client)\n");
        return out;
    }
    for node in ui["children"].as_array().into_iter().flatten() {
        render_node(node, 0, &mut out);
    }
    out
}

fn render_node(node: &Value, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    let s = |k: &str| node[k].as_str().unwrap_or("");
    let line = match node["type"].as_str().unwrap_or("") {
        "text" => s("text").to_owned(),
        "badge" => format!("[{}]", s("text")),
        "button" => format!("( {} )  -> action `{}`", s("label"), s("action")),
        "input" => format!(
            "{}: ________",
            if s("label").is_empty() {
                s("name")
            } else {
                s("label")
            }
        ),
        "select" => {
            let options: Vec<&str> = node["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "{}: ({})",
                if s("label").is_empty() {
                    s("name")
                } else {
                    s("label")
                },
                options.join(" | ")
            )
        }
        "card" => format!("+ {}", s("title")),
        _ => String::new(),
    };
    if !line.is_empty() {
        out.push_str(&format!("{pad}{line}\n"));
    }
    let inner = if node["type"] == "card" {
        depth + 1
    } else {
        depth
    };
    for child in node["children"].as_array().into_iter().flatten() {
        render_node(child, inner, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_schema_compiles_and_checks() {
        let schema: Value = serde_json::from_str(WIDGET_SCHEMA).unwrap();
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(v.is_valid(&json!({"type": "ui", "title": "t", "children": [
            {"type": "row", "children": [{"type": "text", "text": "hi"}, {"type": "badge", "text": "new"}]},
            {"type": "button", "label": "Go", "action": "go"}
        ]})));
        assert!(
            !v.is_valid(&json!({"type": "ui", "children": [{"type": "button", "label": "Go"}]}))
        );
        assert!(v.is_valid(&json!({"type": "html", "html": "<b>hi</b>"})));
    }

    #[test]
    fn text_rendering() {
        let text = render_text(&json!({"type": "ui", "title": "Order", "children": [
            {"type": "card", "title": "Cake", "children": [{"type": "select", "name": "flavour", "options": ["chocolate", "lemon"]}]},
            {"type": "button", "label": "Order", "action": "order"}
        ]}));
        assert_eq!(
            text,
            "== Order ==\n+ Cake\n  flavour: (chocolate | lemon)\n( Order )  -> action `order`\n"
        );
    }
}
