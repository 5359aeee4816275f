//! The document as Markdown for people: `docs/api-reference.md`, written with
//! `clients/openapi.json` by `make openapi` (a test fails while either differs from the code).

use std::fmt::Write;

use serde_json::Value;

use super::SCHEMAS;

/// The groups of routes, in the order the reference gives them.
const TAGS: &[&str] = &[
    "threads",
    "schedules",
    "agents",
    "models",
    "web",
    "pages",
    "remotes",
    "migration",
    "host",
];

/// The reference of `document`: each route with its parameters, body and answers, then each
/// schema with its fields.
pub fn markdown(document: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HTTP API reference\n\n\
         Generated from the API's OpenAPI document ([`clients/openapi.json`](../clients/openapi.json), \
         served at `GET /openapi.json`) by `make openapi`: do not edit. The guide is \
         [api.md](api.md).\n"
    );
    // The groups applications use most first; any other after them.
    let mut tags: Vec<&str> = TAGS.to_vec();
    for item in document["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, i)| i)
    {
        for op in item.as_object().into_iter().flatten().map(|(_, o)| o) {
            if let Some(tag) = op["tags"][0].as_str() {
                if !tags.contains(&tag) {
                    tags.push(tag);
                }
            }
        }
    }
    for tag in tags {
        let in_group = |op: &Value| op["tags"][0].as_str() == Some(tag);
        let routes = document["paths"].as_object().into_iter().flatten();
        if !routes.clone().any(|(_, item)| {
            item.as_object()
                .into_iter()
                .flatten()
                .any(|(_, op)| in_group(op))
        }) {
            continue;
        }
        let _ = writeln!(out, "## {}\n", capitalized(tag));
        for (path, item) in document["paths"].as_object().into_iter().flatten() {
            for (method, op) in item.as_object().into_iter().flatten() {
                if op["tags"][0].as_str() == Some(tag) {
                    operation(&mut out, method, path, op);
                }
            }
        }
    }
    let _ = writeln!(out, "## Schemas\n");
    for (name, schema) in document["components"]["schemas"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let _ = writeln!(out, "### {name}\n");
        if let Some(text) = schema["description"].as_str() {
            let _ = writeln!(out, "{}\n", one_line(text));
        }
        fields(&mut out, schema);
        for key in ["oneOf", "anyOf"] {
            for variant in schema[key].as_array().into_iter().flatten() {
                let shown = variant["properties"]["type"]["const"]
                    .as_str()
                    .map(|t| format!("`type: {t}`"))
                    .or_else(|| variant["title"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| type_of(variant));
                let about = variant["description"]
                    .as_str()
                    .map(one_line)
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "- **{shown}**{}",
                    if about.is_empty() {
                        String::new()
                    } else {
                        format!(": {about}")
                    }
                );
                // Its fields as a list under it (a table does not nest in a list).
                let required: Vec<&str> = variant["required"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                for (name, property) in variant["properties"].as_object().into_iter().flatten() {
                    if name == "type" && property.get("const").is_some() {
                        continue;
                    }
                    let about = one_line(property["description"].as_str().unwrap_or_default());
                    let _ = writeln!(
                        out,
                        "  - `{name}` ({}{}){}",
                        type_of(property),
                        if required.contains(&name.as_str()) {
                            ""
                        } else {
                            ", optional"
                        },
                        if about.is_empty() {
                            String::new()
                        } else {
                            format!(": {about}")
                        }
                    );
                }
            }
        }
        out.push('\n');
    }
    out.trim_end().to_owned() + "\n"
}

fn operation(out: &mut String, method: &str, path: &str, op: &Value) {
    let _ = writeln!(out, "### `{} {path}`\n", method.to_uppercase());
    let _ = writeln!(out, "{}\n", op["summary"].as_str().unwrap_or_default());
    if op["security"].as_array().is_some_and(Vec::is_empty) {
        let _ = writeln!(out, "No token needed.\n");
    }
    let parameters: Vec<&Value> = op["parameters"].as_array().into_iter().flatten().collect();
    if !parameters.is_empty() {
        let _ = writeln!(out, "| Parameter | In | Type | |\n|---|---|---|---|");
        for p in parameters {
            let _ = writeln!(
                out,
                "| `{}`{} | {} | {} | {} |",
                p["name"].as_str().unwrap_or_default(),
                if p["required"] == true {
                    ""
                } else {
                    " (optional)"
                },
                p["in"].as_str().unwrap_or_default(),
                type_of(&p["schema"]),
                one_line(p["description"].as_str().unwrap_or_default())
            );
        }
        out.push('\n');
    }
    if let Some(body) = op.get("requestBody") {
        let _ = writeln!(
            out,
            "Body{}: {}\n",
            if body["required"] == true {
                ""
            } else {
                " (optional)"
            },
            content_type(&body["content"])
        );
        // A body described in place (not a named schema): its fields here.
        fields(out, &body["content"]["application/json"]["schema"]);
    }
    let _ = writeln!(out, "| Status | Answer | |\n|---|---|---|");
    for (status, answer) in op["responses"].as_object().into_iter().flatten() {
        let _ = writeln!(
            out,
            "| {status} | {} | {} |",
            content_type(&answer["content"]),
            one_line(answer["description"].as_str().unwrap_or_default())
        );
    }
    out.push('\n');
}

/// A property table of an object schema.
fn fields(out: &mut String, schema: &Value) {
    let Some(properties) = schema["properties"].as_object() else {
        return;
    };
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let _ = writeln!(out, "| Field | Type | |\n|---|---|---|");
    for (name, property) in properties {
        let _ = writeln!(
            out,
            "| `{name}`{} | {} | {} |",
            if required.contains(&name.as_str()) {
                ""
            } else {
                " (optional)"
            },
            type_of(property),
            one_line(property["description"].as_str().unwrap_or_default())
        );
    }
    out.push('\n');
}

/// What a media type map carries, in a few words.
fn content_type(content: &Value) -> String {
    let Some((media, inner)) = content.as_object().and_then(|c| c.iter().next()) else {
        return "none".to_owned();
    };
    if let Some(events) = inner.get("x-event-schema") {
        return format!("`{media}`, each event's data {}", type_of(events));
    }
    match inner.get("schema") {
        Some(schema) if media == "application/json" => type_of(schema),
        _ => format!("`{media}`"),
    }
}

/// A schema's type in a few words: a link to a named schema, `[T]`, `T or null`, ...
fn type_of(schema: &Value) -> String {
    if let Some(target) = schema["$ref"].as_str() {
        let name = target.strip_prefix(SCHEMAS).unwrap_or(target);
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(value) = schema.get("const") {
        return format!("`{value}`");
    }
    if let Some(values) = schema["enum"].as_array() {
        let shown: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
        return shown.join(", ");
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = schema[key].as_array() {
            let shown: Vec<String> = branches.iter().map(type_of).collect();
            return shown.join(if key == "allOf" { " and " } else { " or " });
        }
    }
    let kinds: Vec<String> = match &schema["type"] {
        Value::String(kind) => vec![kind.clone()],
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(|k| k.as_str().map(str::to_owned))
            .collect(),
        _ => return "any".to_owned(),
    };
    let shown: Vec<String> = kinds
        .iter()
        .map(|kind| match kind.as_str() {
            "array" => format!("[{}]", type_of(&schema["items"])),
            "string" => match schema["format"].as_str() {
                Some(format) => format!("string ({format})"),
                None => "string".to_owned(),
            },
            other => other.to_owned(),
        })
        .collect();
    shown.join(" or ")
}

fn one_line(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
