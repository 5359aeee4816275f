//! A server checking itself against its document, with `INFINITY_CHECK_API=1`: every API test
//! runs so, and so can the developers of a client. For each request it finds the operation
//! ([`Operation::matches`]) and answers 500, naming the difference, when
//!
//! - a route answers that the document does not list (anything but 404 and 405, which must be
//!   errors as the API's are, `{"error": ...}`);
//! - a route accepts (2xx) a JSON body that its schema refuses, or a query its parameters
//!   refuse (one it does not list, or a value not of its type);
//! - a route answers with a status the document does not list for it;
//! - an answer the document says is JSON (every error) is not `application/json`, or does not
//!   match the schema of its status.
//!
//! Event streams are checked by the tests that read them (each event's `data` against
//! `x-event-schema`).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use super::{document, listed, Content, Operation};

/// Set to `1` to check every request and answer against the document.
pub const CHECK_VAR: &str = "INFINITY_CHECK_API";

/// Whether this process checks itself.
pub fn enabled() -> bool {
    std::env::var(CHECK_VAR).is_ok_and(|v| v == "1")
}

/// Bodies larger than this (by their `Content-Length`) are passed on unchecked: a
/// conversation's bundle may be a gigabyte.
const MAX_CHECKED: usize = 16 << 20;

fn too_big(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > MAX_CHECKED)
}

/// Where `value` breaks `schema`, one of the document's (`None`: it matches).
pub fn problems(schema: &'static Value, value: &Value) -> Option<String> {
    type Compiled = Arc<jsonschema::Validator>;
    static COMPILED: LazyLock<Mutex<HashMap<usize, Compiled>>> = LazyLock::new(Default::default);
    // The document is never dropped: a schema's address names it.
    let key = std::ptr::from_ref(schema) as usize;
    let cached = COMPILED.lock().ok().and_then(|c| c.get(&key).cloned());
    let validator = match cached {
        Some(validator) => validator,
        None => {
            // The schema refers into the document's components: give it them.
            let mut root = json!({"components": document()["components"].clone()});
            if let (Some(root), Some(schema)) = (root.as_object_mut(), schema.as_object()) {
                root.extend(schema.clone());
            }
            match jsonschema::validator_for(&root) {
                Ok(validator) => {
                    let validator = Arc::new(validator);
                    if let Ok(mut compiled) = COMPILED.lock() {
                        compiled.insert(key, Arc::clone(&validator));
                    }
                    validator
                }
                Err(err) => return Some(format!("the document's schema does not compile: {err}")),
            }
        }
    };
    let found: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| format!("at `{}`: {e}", e.instance_path()))
        .collect();
    (!found.is_empty()).then(|| found.join("; "))
}

/// The schema of the operation's JSON request body, or of its answer with `status`, as the
/// document has it.
pub fn schema_in_document(op: &Operation, status: Option<u16>) -> Option<&'static Value> {
    let item = &document()["paths"][op.path][op.method];
    let at = match status {
        None => &item["requestBody"],
        Some(status) => &item["responses"][status.to_string()],
    };
    at["content"]["application/json"]
        .get("schema")
        .filter(|s| !s.is_null())
}

/// Where the `data` of an event of `GET /threads/{id}/events` breaks the document's
/// `x-event-schema` (`None`: it matches).
pub fn event_problems(data: &Value) -> Option<String> {
    let schema = &document()["paths"]["/threads/{id}/events"]["get"]["responses"]["200"]["content"]
        ["text/event-stream"]["x-event-schema"];
    problems(schema, data)
}

/// The query parameters of each operation as one object schema (`additionalProperties: false`:
/// a parameter the document does not list is refused), by operation id.
fn query_schemas() -> &'static HashMap<&'static str, Value> {
    static SCHEMAS: LazyLock<HashMap<&'static str, Value>> = LazyLock::new(|| {
        listed()
            .iter()
            .map(|op| {
                let parameters = document()["paths"][op.path][op.method]["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|p| p["in"] == "query");
                let properties: serde_json::Map<String, Value> = parameters
                    .filter_map(|p| Some((p["name"].as_str()?.to_owned(), p["schema"].clone())))
                    .collect();
                let schema = json!({"type": "object", "properties": properties,
                                    "additionalProperties": false});
                (op.id, schema)
            })
            .collect()
    });
    &SCHEMAS
}

/// Where `query` breaks the operation's query parameters (`None`: it matches). Each value is
/// read as its parameter's type says (a number, `true`/`false`, or text); the token
/// (`access_token`) is the guard's, not a parameter.
fn query_problems(op: &Operation, query: &str) -> Option<String> {
    let schema = query_schemas().get(op.id)?;
    let mut given = serde_json::Map::new();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if name == "access_token" {
            continue;
        }
        let kind = &schema["properties"][name.as_ref()]["type"];
        let read = match kind.as_str() {
            Some("integer") => value.parse::<i64>().map_or(json!(value), |n| json!(n)),
            Some("boolean") => match value.as_ref() {
                "true" => json!(true),
                "false" => json!(false),
                _ => json!(value),
            },
            _ => json!(value),
        };
        given.insert(name.into_owned(), read);
    }
    problems(schema, &Value::Object(given))
}

fn content_type(headers: &axum::http::HeaderMap) -> String {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .map_or("no Content-Type".to_owned(), |v| {
            format!("`{}`", String::from_utf8_lossy(v.as_bytes()))
        })
}

fn says_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/json")
        })
}

/// A 404 or 405 of a path the document does not list, passed on when it is an error as the
/// API's are (`{"error": "..."}` as JSON).
async fn unrouted(named: &str, answer: Response) -> Response {
    let status = answer.status();
    if !says_json(answer.headers()) {
        return contract_broken(format!(
            "{named} answered {status} as {}, not as an error (`{{\"error\": ...}}`)",
            content_type(answer.headers())
        ));
    }
    let (parts, body) = answer.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_CHECKED).await else {
        return contract_broken(format!("{named}: its answer could not be read"));
    };
    let error = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .is_some_and(|v| v["error"].is_string());
    if !error {
        return contract_broken(format!(
            "{named} answered {status} with a body that is not `{{\"error\": ...}}`"
        ));
    }
    Response::from_parts(parts, Body::from(bytes))
}

fn contract_broken(what: String) -> Response {
    tracing::error!(problem = %what, "the API broke its document");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        axum::Json(json!({ "error": format!("the API broke its document: {what}") })),
    )
        .into_response()
}

/// The middleware.
pub async fn check(request: Request, next: Next) -> Response {
    static OPERATIONS: LazyLock<&'static [Operation]> = LazyLock::new(listed);
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let named = format!("{method} {path}");
    let Some(op) = OPERATIONS.iter().find(|o| o.matches(&method, &path)) else {
        let answer = next.run(request).await;
        let status = answer.status();
        if status == StatusCode::NOT_FOUND || status == StatusCode::METHOD_NOT_ALLOWED {
            return unrouted(&named, answer).await;
        }
        return contract_broken(format!(
            "{named} answered {status}, and is not in the document"
        ));
    };
    let query = query_problems(op, request.uri().query().unwrap_or_default());
    if too_big(request.headers()) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_CHECKED).await else {
        return contract_broken(format!(
            "{named}: the request's body could not be read (over {MAX_CHECKED} bytes without a \
             Content-Length, which the check does not take)"
        ));
    };
    let outside = match (schema_in_document(op, None), op.body) {
        (Some(schema), _) if !bytes.iter().all(u8::is_ascii_whitespace) => {
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) => problems(schema, &value),
                Err(err) => Some(format!("not JSON: {err}")),
            }
        }
        (Some(_), Some((_, true))) => Some("no body, and one is required".to_owned()),
        _ => None,
    };
    let answer = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let status = answer.status();
    if let (Some(why), true) = (&query, status.is_success()) {
        return contract_broken(format!(
            "{named} accepted ({status}) a query its parameters refuse: {why}"
        ));
    }
    if let (Some(why), true) = (&outside, status.is_success()) {
        return contract_broken(format!(
            "{named} accepted ({status}) a body its schema refuses: {why}"
        ));
    }
    let responses = op.all_responses();
    let Some((_, _, content)) = responses.iter().find(|(s, _, _)| *s == status.as_u16()) else {
        return contract_broken(format!(
            "{named} answered {status}, which the document does not list for `{}`",
            op.id
        ));
    };
    if !matches!(content, Some(Content::Json(_))) || too_big(answer.headers()) {
        return answer;
    }
    if !says_json(answer.headers()) {
        return contract_broken(format!(
            "{named} answered {status} as {}, where the document says JSON",
            content_type(answer.headers())
        ));
    }
    let (parts, body) = answer.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_CHECKED).await else {
        return contract_broken(format!("{named}: its answer could not be read"));
    };
    let broken = match serde_json::from_slice::<Value>(&bytes) {
        Err(err) => Some(format!("not JSON: {err}")),
        Ok(value) => schema_in_document(op, Some(status.as_u16()))
            .and_then(|schema| problems(schema, &value)),
    };
    if let Some(why) = broken {
        return contract_broken(format!(
            "{named} answered {status} with a body its schema refuses: {why}"
        ));
    }
    Response::from_parts(parts, Body::from(bytes))
}
