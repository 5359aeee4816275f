//! The API's contract: an OpenAPI 3.1 document of every route, served at `GET /openapi.json`
//! (docs/api.md). Its schemas come from the Rust types the handlers read and write
//! (`schemars::JsonSchema`, derived), its routes from one table ([`operations`]), which a test
//! holds to the routes the routers register. With `INFINITY_CHECK_API=1` a server checks
//! itself against it ([`check`]): that is how the API's tests validate what they send and get.
//!
//! The committed copy, `clients/openapi.json`, is what the Python and TypeScript clients are
//! generated from, and `docs/api-reference.md` its Markdown for people ([`reference`](mod@reference));
//! `make openapi` writes both again (a test fails while either differs).

pub mod check;
pub mod operations;
pub mod reference;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::response::{IntoResponse, Response};
use schemars::generate::SchemaSettings;
use schemars::transform::RemoveRefSiblings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

/// Where the document's schemas are: `#/components/schemas/NAME`.
const SCHEMAS: &str = "#/components/schemas/";

/// A schema of a type, made by a generator (which keeps the definitions it refers to).
pub type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

/// What a request or response carries.
#[derive(Debug, Clone, Copy)]
pub enum Content {
    /// JSON of a type.
    Json(SchemaOf),
    /// Another media type (`text/html; charset=utf-8`, `text/plain`, ...) described in words.
    Other(&'static str),
    /// Server-Sent Events whose `data` is JSON of a type (`x-event-schema`).
    Events(SchemaOf),
}

/// One route and method: what it takes and what it answers.
#[derive(Debug, Clone)]
pub struct Operation {
    /// `get`, `post` or `delete`.
    pub method: &'static str,
    /// The path, with its parameters in braces as the routers write it.
    pub path: &'static str,
    /// The operation's id, which the clients' methods are named after.
    pub id: &'static str,
    /// Its group (`threads`, `agents`, ...).
    pub tag: &'static str,
    /// What it does, in a line.
    pub summary: &'static str,
    /// A type whose fields are the query's parameters.
    pub query: Option<SchemaOf>,
    /// The body it takes, and whether it may be left out.
    pub body: Option<(Content, bool)>,
    /// Its answers, by status.
    pub responses: Vec<(u16, &'static str, Option<Content>)>,
    /// Whether it needs no token (its own credential is in its path, or it has nothing to guard).
    pub open: bool,
}

/// The schema of `T` as a reference into the document's schemas.
pub fn schema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

impl Operation {
    fn new(method: &'static str, path: &'static str, id: &'static str) -> Self {
        Self {
            method,
            path,
            id,
            tag: "",
            summary: "",
            query: None,
            body: None,
            responses: Vec::new(),
            open: false,
        }
    }

    /// Its group and line.
    pub fn about(mut self, tag: &'static str, summary: &'static str) -> Self {
        self.tag = tag;
        self.summary = summary;
        self
    }

    /// Its query's parameters: the fields of `T`.
    pub fn query<T: JsonSchema>(mut self) -> Self {
        self.query = Some(|g| T::json_schema(g));
        self
    }

    /// A JSON body of `T`.
    pub fn body<T: JsonSchema>(mut self) -> Self {
        self.body = Some((Content::Json(schema::<T>), true));
        self
    }

    /// A JSON body of `T` that may be left out.
    pub fn optional_body<T: JsonSchema>(mut self) -> Self {
        self.body = Some((Content::Json(schema::<T>), false));
        self
    }

    /// A body whose schema is made by `of`.
    pub fn body_from(mut self, of: SchemaOf) -> Self {
        self.body = Some((Content::Json(of), true));
        self
    }

    /// An answer of JSON of `T`.
    pub fn answers<T: JsonSchema>(mut self, status: u16, what: &'static str) -> Self {
        self.responses
            .push((status, what, Some(Content::Json(schema::<T>))));
        self
    }

    /// An answer of another content, or of none.
    pub fn answers_with(
        mut self,
        status: u16,
        what: &'static str,
        content: Option<Content>,
    ) -> Self {
        self.responses.push((status, what, content));
        self
    }

    /// Error answers (`{"error": ...}`) with these statuses.
    pub fn errors(mut self, statuses: &[u16]) -> Self {
        for &status in statuses {
            self.responses.push((
                status,
                error_meaning(status),
                Some(Content::Json(schema::<crate::api::ErrorBody>)),
            ));
        }
        self
    }

    /// Needs no token.
    pub fn open(mut self) -> Self {
        self.open = true;
        self
    }

    /// Its answers: those it names, and those every route of its kind may give: the guard's
    /// 400 (two `Host` headers, or a path parameter that is not text; every route), 403 (a
    /// wrong `Host` or `Origin`; every route but `/health` and `/openapi.json`) and 401 (no
    /// token; the routes that need one); for a JSON body 408 (too slow to arrive), 413 (too
    /// big), 415 (not JSON) and 422 (not the shape); 503 (past the connection cap, `infinity
    /// serve`; every route); and for every route the HTTP server's own 414 (with no body: it
    /// answers before any route).
    pub fn all_responses(&self) -> Vec<(u16, &'static str, Option<Content>)> {
        let mut all = self.responses.clone();
        let mut implied = vec![400, 503];
        if !matches!(self.path, "/health" | "/openapi.json") {
            implied.push(403);
        }
        if !self.open {
            implied.push(401);
        }
        if self.path.contains('{') {
            implied.push(400);
        }
        if matches!(self.body, Some((Content::Json(_), _))) {
            implied.extend([408, 413, 415, 422]);
        }
        for status in implied {
            if !all.iter().any(|(s, _, _)| *s == status) {
                all.push((
                    status,
                    error_meaning(status),
                    Some(Content::Json(schema::<crate::api::ErrorBody>)),
                ));
            }
        }
        all.push((414, error_meaning(414), None));
        all.sort_by_key(|(s, _, _)| *s);
        all
    }

    /// Whether `path` (a request's, without its query) is this operation's path.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if !self.method.eq_ignore_ascii_case(method) {
            return false;
        }
        let mut want = self.path.split('/');
        let mut got = path.split('/');
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some(w), Some(g)) if w.starts_with('{') => {
                    if g.is_empty() {
                        return false;
                    }
                }
                (Some(w), Some(g)) if w == g => {}
                _ => return false,
            }
        }
    }
}

/// `GET path`.
pub fn get(path: &'static str, id: &'static str) -> Operation {
    Operation::new("get", path, id)
}

/// `POST path`.
pub fn post(path: &'static str, id: &'static str) -> Operation {
    Operation::new("post", path, id)
}

/// `DELETE path`.
pub fn delete(path: &'static str, id: &'static str) -> Operation {
    Operation::new("delete", path, id)
}

fn error_meaning(status: u16) -> &'static str {
    match status {
        400 => "The request is not one this route takes; the error names what is wrong",
        401 => "No token, or a wrong one",
        403 => {
            "Refused: a `Host` that is not this server's, or an `Origin` that is not its own pages'"
        }
        404 => "Nothing by that name or id",
        408 => "The body did not arrive in time (see docs/api.md, \"Connections\"); the connection is closed",
        409 => "Not in this state (a closed thread, open children, a move under way)",
        413 => "The body is too big",
        414 => "The URI is over 64 KiB: the HTTP server refuses it before any route, with no body",
        415 => "The body is not JSON (`Content-Type: application/json`)",
        422 => "The body's JSON is not the shape this route takes; the error names what is wrong",
        429 => "Refused for now: a limit is reached (a page's comments); the error says which",
        502 => "A tool server or remote did not take the answer",
        503 => "The store or queue is unavailable, or the server holds as many connections as it takes; nothing was accepted, try again",
        _ => "Failed",
    }
}

/// What a path parameter of `path` is.
fn parameter_meaning(path: &str, name: &str) -> &'static str {
    match (path.split('/').nth(1).unwrap_or_default(), name) {
        ("a", "id") => "The page's id",
        ("a", "key") => "The page's key",
        ("a", "version") => "The page's version",
        ("a", "name") => "The file's name",
        ("remotes", "id") => "The remote's id",
        ("remotes", "token") => "The approval's token, from the question's link",
        ("remotes", "run") => "The run's id, from the order",
        ("app", "name") => "The file's name",
        ("agents", "name") => "A stored agent: `NAME` (its newest version) or `NAME@VERSION`",
        (_, "id") => "The thread's id",
        (_, "call") => "The id of the tool call that asked",
        (_, "schedule") => "The schedule's id",
        _ => "",
    }
}

/// What a path parameter of `path` takes, as the server reads it: the ids of threads, calls,
/// schedules and pages as ids are ([`ThreadId`](infinity_agent_core::ids::ThreadId)), an
/// agent as [`AgentRef::parse`](infinity_agent_core::catalog::AgentRef::parse) reads it, and
/// text for the rest. An id that is not one is a 400 for a thread or a call and a 404 (nothing
/// has it) for a schedule and a page.
fn parameter_schema(path: &str, name: &str, generator: &mut SchemaGenerator) -> Value {
    let id_like = match (path.split('/').nth(1).unwrap_or_default(), name) {
        ("threads", "id" | "call" | "schedule") | ("a", "id") => true,
        ("agents", "name") => {
            return json!({"type": "string",
                          "pattern": infinity_agent_core::catalog::AgentRef::PATTERN});
        }
        _ => false,
    };
    if !id_like {
        return json!({"type": "string"});
    }
    let mut schema = generator
        .subschema_for::<infinity_agent_core::ids::ThreadId>()
        .to_value();
    if let Some(fields) = schema.as_object_mut() {
        fields.remove("description");
    }
    schema
}

/// The operations, as the document lists them.
pub fn listed() -> &'static [Operation] {
    static LISTED: LazyLock<Vec<Operation>> = LazyLock::new(operations::all);
    &LISTED
}

/// The document, as served.
pub fn document() -> &'static Value {
    static DOCUMENT: LazyLock<Value> = LazyLock::new(|| build(listed()));
    &DOCUMENT
}

/// `GET /openapi.json`.
pub async fn serve() -> Response {
    axum::Json(document()).into_response()
}

fn generator(serializing: bool) -> SchemaGenerator {
    let base = if serializing {
        SchemaSettings::draft2020_12().for_serialize()
    } else {
        SchemaSettings::draft2020_12().for_deserialize()
    };
    // Boolean schemas stay (`additionalProperties: false`): OpenAPI 3.1 takes them, and
    // generators read `false` as "no other fields", as the routes do.
    let mut settings = base.with_transform(RemoveRefSiblings::default());
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    settings.into_generator()
}

/// The document of `operations`. What requests carry is described as it is read (a field
/// with a default may be left out), what responses carry as it is written; a type that reads
/// otherwise than it writes gets two schemas, the one for requests named `NAMEInput`.
pub fn build(operations: &[Operation]) -> Value {
    let mut writes = generator(true);
    let mut reads = generator(false);
    let mut paths: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();
    for op in operations {
        let mut item = Map::new();
        item.insert("operationId".into(), json!(op.id));
        item.insert("tags".into(), json!([op.tag]));
        item.insert("summary".into(), json!(op.summary));
        let mut parameters: Vec<Value> = op
            .path
            .split('/')
            .filter_map(|p| p.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                json!({"name": name, "in": "path", "required": true,
                       "description": parameter_meaning(op.path, name),
                       "schema": parameter_schema(op.path, name, &mut reads)})
            })
            .collect();
        if let Some(query) = op.query {
            parameters.extend(query_parameters(query(&mut reads)));
        }
        if !parameters.is_empty() {
            item.insert("parameters".into(), Value::Array(parameters));
        }
        if let Some((content, required)) = op.body {
            let mut body = content_of(content, &mut reads);
            body.insert("required".into(), json!(required));
            item.insert("requestBody".into(), Value::Object(body));
        }
        let mut responses = Map::new();
        for (status, what, content) in &op.all_responses() {
            let mut response = match content {
                Some(content) => content_of(*content, &mut writes),
                None => Map::new(),
            };
            response.insert("description".into(), json!(what));
            if op.path == "/threads/{id}/history" && *status == 200 {
                response.insert(
                    "headers".into(),
                    json!({"Last-Event-ID": {"required": true, "description": "The number of the last event the history includes: stream `GET /threads/{id}/events` after it", "schema": {"type": "string", "pattern": "^[0-9]+$"}}}),
                );
            }
            responses.insert(status.to_string(), Value::Object(response));
        }
        item.insert("responses".into(), Value::Object(responses));
        if op.open {
            item.insert("security".into(), json!([]));
        }
        paths
            .entry(op.path)
            .or_default()
            .insert(op.method.into(), Value::Object(item));
    }
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Infinity",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The HTTP API of Infinity's hosts: `infinity serve` (the embedded runtime) and a stack's API function. See docs/api.md.",
        },
        "paths": paths,
        "components": {
            "schemas": {},
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "The server's token: the one `infinity serve` prints or reads from INFINITY_SERVE_TOKEN, or a stack's API token (the SSM parameter INFINITY_API_TOKEN_PARAMETER names); not needed on a loopback address"},
                "access_token": {"type": "apiKey", "in": "query", "name": "access_token", "description": "The token in the query, for clients that cannot set headers (EventSource)"},
            },
        },
        "security": [{}, {"bearer": []}, {"access_token": []}],
    });
    let written = writes.take_definitions(true);
    let mut read = reads.take_definitions(true);
    // A type read otherwise than written: its request schema gets a name of its own.
    let renamed: Vec<String> = read
        .iter()
        .filter(|(name, schema)| written.get(*name).is_some_and(|w| w != *schema))
        .map(|(name, _)| name.clone())
        .collect();
    for name in &renamed {
        if let Some(schema) = read.remove(name) {
            read.insert(format!("{name}Input"), schema);
        }
    }
    let mut schemas = written;
    for (name, schema) in read {
        schemas.entry(name).or_insert(schema);
    }
    let mut schemas = Value::Object(schemas);
    if !renamed.is_empty() {
        // Point the request side at the renamed schemas: the request bodies, the query
        // parameters and the renamed schemas themselves.
        for (_, item) in document["paths"].as_object_mut().into_iter().flatten() {
            for (_, op) in item.as_object_mut().into_iter().flatten() {
                for part in ["requestBody", "parameters"] {
                    if let Some(part) = op.get_mut(part) {
                        rename_refs(part, &renamed);
                    }
                }
            }
        }
        for name in &renamed {
            if let Some(schema) = schemas.get_mut(format!("{name}Input")) {
                rename_refs(schema, &renamed);
            }
        }
    }
    document["components"]["schemas"] = schemas;
    tidy(&mut document);
    document
}

/// The document as its readers take it: descriptions without rustdoc's links (`` [`X`] `` and
/// `[text](path)` read as their text), and integers with the bounds of their Rust type as
/// `minimum` and `maximum` (what the server reads; a schema's own bounds stay), without the
/// formats OpenAPI does not name (`uint64`, ...).
fn tidy(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(text)) = map.get_mut("description") {
                *text = unlinked(text);
            }
            let format = map
                .get("format")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_default();
            if let Some((low, high)) = integer_bounds(&format) {
                if format.starts_with("uint") || format == "int8" || format == "int16" {
                    map.remove("format");
                }
                map.entry("minimum").or_insert(low);
                map.entry("maximum").or_insert(high);
            }
            map.values_mut().for_each(tidy);
        }
        Value::Array(items) => items.iter_mut().for_each(tidy),
        _ => {}
    }
}

/// The least and greatest values of the integers of a schemars `format` (`usize` is `uint`).
fn integer_bounds(format: &str) -> Option<(Value, Value)> {
    let (low, high): (i128, i128) = match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" | "uint" => (0, u64::MAX.into()),
        _ => return None,
    };
    let number = |n: i128| {
        i64::try_from(n)
            .map(Value::from)
            .or_else(|_| u64::try_from(n).map(Value::from))
            .unwrap_or(Value::Null)
    };
    Some((number(low), number(high)))
}

/// `text` with each rustdoc link (`[shown]` or `[shown](target)`) left as what it shows; a link
/// to a web page keeps its address in parentheses.
fn unlinked(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push_str(&rest[open..]);
            return out;
        };
        out.push_str(&after[..close]);
        rest = &after[close + 1..];
        if let Some(target) = rest.strip_prefix('(') {
            if let Some(end) = target.find(')') {
                let address = &target[..end];
                if address.starts_with("http") {
                    out.push_str(&format!(" ({address})"));
                }
                rest = &target[end + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn rename_refs(value: &mut Value, renamed: &[String]) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(target)) = map.get_mut("$ref") {
                if let Some(name) = target.strip_prefix(SCHEMAS) {
                    if renamed.iter().any(|r| r == name) {
                        *target = format!("{SCHEMAS}{name}Input");
                    }
                }
            }
            map.values_mut().for_each(|v| rename_refs(v, renamed));
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_refs(v, renamed)),
        _ => {}
    }
}

/// `content` as an OpenAPI media type map.
fn content_of(content: Content, generator: &mut SchemaGenerator) -> Map<String, Value> {
    let mut out = Map::new();
    let media = match content {
        Content::Json(of) => json!({"application/json": {"schema": of(generator)}}),
        Content::Other(media) => json!({ media: {} }),
        Content::Events(of) => json!({"text/event-stream": {
            "schema": {"type": "string"},
            "x-event-schema": of(generator),
        }}),
    };
    out.insert("content".into(), media);
    out
}

/// The parameters of a query type's schema: one per property.
fn query_parameters(schema: Schema) -> Vec<Value> {
    let value = schema.to_value();
    let required: Vec<&str> = value["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut out = Vec::new();
    for (name, property) in value["properties"].as_object().into_iter().flatten() {
        let mut property = property.clone();
        let description = property
            .as_object_mut()
            .and_then(|p| p.remove("description"))
            .unwrap_or(json!(""));
        present(&mut property);
        out.push(json!({
            "name": name,
            "in": "query",
            "required": required.contains(&name.as_str()),
            "description": description,
            "schema": property,
        }));
    }
    out
}

/// A query parameter's schema without its `null`: a parameter left out is absent, never null.
fn present(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    if map.get("default").is_some_and(Value::is_null) {
        map.remove("default");
    }
    if let Some(Value::Array(types)) = map.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            map.insert("type".into(), only);
        }
    }
    let single = match map.get_mut("anyOf") {
        Some(Value::Array(branches)) => {
            branches.retain(|b| b.get("type").is_none_or(|t| t != "null"));
            (branches.len() == 1).then(|| branches.remove(0))
        }
        _ => None,
    };
    if let (Some(Value::Object(branch)), Some(_)) = (single, map.remove("anyOf")) {
        map.extend(branch);
    }
}

#[cfg(test)]
mod tests;
