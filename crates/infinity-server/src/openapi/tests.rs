use super::*;
use serde_json::json;

/// The committed copies: the document the clients are generated from, and its Markdown.
/// `make openapi` writes them.
const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/openapi.json");
const REFERENCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api-reference.md");

#[test]
fn the_committed_document_is_the_one_the_code_makes() {
    let made = serde_json::to_string_pretty(document()).unwrap() + "\n";
    let reference = reference::markdown(document());
    if std::env::var_os("INFINITY_WRITE_OPENAPI").is_some() {
        std::fs::write(COMMITTED, &made).unwrap();
        std::fs::write(REFERENCE, &reference).unwrap();
    }
    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    assert!(
        committed == made,
        "clients/openapi.json is not the document the code makes: run `make openapi` and \
         regenerate the clients"
    );
    let written = std::fs::read_to_string(REFERENCE).unwrap_or_default();
    assert!(
        written == reference,
        "docs/api-reference.md is not the document's: run `make openapi`"
    );
    // Every route is in the reference, under its method.
    for op in listed() {
        let heading = format!("### `{} {}`", op.method.to_uppercase(), op.path);
        assert!(reference.contains(&heading), "{heading} is missing");
    }
}

/// The `(method, path)` of every route the server's routers register, read from their sources
/// (test modules left out).
fn routed() -> std::collections::BTreeSet<(String, String)> {
    let methods = named_methods(&["get", "post", "delete", "put", "patch"]);
    let mut found = std::collections::BTreeSet::new();
    let mut files = vec![std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src"
    ))];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        // A module's tests in a file of their own are test modules too.
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (at, _) in code.match_indices(".route(") {
            let rest = &code[at + ".route(".len()..];
            let Some(path) = rest
                .trim_start()
                .strip_prefix('"')
                .and_then(|r| r.split('"').next())
            else {
                continue;
            };
            // The call's text, to its closing parenthesis.
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(rest.len(), |(i, _)| i);
            for method in methods(&rest[..end]) {
                found.insert((method, path.to_owned()));
            }
        }
    }
    found
}

/// The methods named in a route's handler text: `get(`, `.post(`, `routing::delete(`, ...
fn named_methods(names: &'static [&'static str]) -> impl Fn(&str) -> Vec<String> {
    move |text: &str| {
        let mut out = Vec::new();
        for name in names {
            for (at, _) in text.match_indices(&format!("{name}(")) {
                let before = text[..at].chars().next_back();
                if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_')) {
                    out.push((*name).to_owned());
                }
            }
        }
        out
    }
}

#[test]
fn every_route_the_routers_register_is_in_the_document_and_no_other() {
    let routed = routed();
    assert!(routed.len() > 30, "the routes were not found: {routed:?}");
    let listed: std::collections::BTreeSet<(String, String)> = listed()
        .iter()
        .map(|op| (op.method.to_owned(), op.path.to_owned()))
        .collect();
    let missing: Vec<_> = routed.difference(&listed).collect();
    let extra: Vec<_> = listed.difference(&routed).collect();
    assert!(
        missing.is_empty(),
        "routed but not in the document: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "in the document but not routed: {extra:?}"
    );
}

#[test]
fn operation_ids_are_unique_and_paths_match_their_templates() {
    let mut ids: Vec<&str> = listed().iter().map(|op| op.id).collect();
    ids.sort_unstable();
    let before = ids.len();
    ids.dedup();
    assert_eq!(before, ids.len(), "an operationId is used twice");
    let op = listed().iter().find(|o| o.id == "answerChoice").unwrap();
    assert!(op.matches("POST", "/threads/t1/choices/c1"));
    assert!(!op.matches("POST", "/threads/t1/choices/"));
    assert!(!op.matches("GET", "/threads/t1/choices/c1"));
    assert!(!op.matches("POST", "/threads/t1/choices/c1/x"));
}

#[test]
fn the_stream_schema_takes_the_events_a_thread_shows_and_refuses_others() {
    let shown = json!({"thread_id": "t1", "seq": 3, "at": "2026-05-01T21:07:09Z",
                       "type": "assistant_text", "text": "hi"});
    assert_eq!(check::event_problems(&shown), None);
    let attached = json!({"thread_id": "t1", "type": "attached", "after": 3});
    assert_eq!(check::event_problems(&attached), None);
    for broken in [
        json!({"thread_id": "t1", "type": "assistant_text", "text": "no time"}),
        json!({"thread_id": "t1", "at": "2026-05-01T21:07:09Z", "type": "nonsense"}),
        json!({"thread_id": "t 1", "type": "reset", "after": 3}),
    ] {
        assert!(check::event_problems(&broken).is_some(), "{broken}");
    }
}

/// A router checked against the document whose routes break it in each way the check knows.
async fn checked_answer(method: &str, uri: &str, body: &str) -> (u16, String) {
    use axum::routing::{get, post};
    use tower::ServiceExt;
    let app = axum::Router::new()
        .route(
            "/threads/{id}",
            get(|| async { axum::Json(json!({"id": "t1"})) }),
        )
        .route(
            "/models",
            get(|| async { axum::Json(json!({"allowed": [], "set_in": "x"})) }),
        )
        .route("/undocumented", get(|| async { "hi" }))
        .route(
            "/threads",
            get(|| async { axum::Json(json!({"threads": [], "next": null})) }),
        )
        .route(
            "/threads/{id}/messages",
            post(|| async {
                (
                    axum::http::StatusCode::ACCEPTED,
                    axum::Json(json!({"thread_id": "t1", "input_id": "i1"})),
                )
            }),
        )
        .route(
            "/threads/{id}/close",
            post(|| async { axum::http::StatusCode::IM_A_TEAPOT }),
        )
        .route(
            "/threads/{id}/interrupt",
            post(|| async { (axum::http::StatusCode::CONFLICT, "closed") }),
        )
        .layer(axum::middleware::from_fn(check::check));
    let request = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(axum::body::Body::from(body.to_owned()))
        .unwrap();
    let answer = app.oneshot(request).await.unwrap();
    let status = answer.status().as_u16();
    let bytes = axum::body::to_bytes(answer.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn the_check_answers_500_naming_each_break_of_the_document() {
    assert_eq!(checked_answer("GET", "/models", "").await.0, 200);
    assert_eq!(
        checked_answer("POST", "/threads/t1/messages", r#"{"text": "hi"}"#)
            .await
            .0,
        202
    );
    let (status, body) = checked_answer("GET", "/threads/t1", "").await;
    assert_eq!(status, 500);
    assert!(
        body.contains("GET /threads/t1 answered 200 OK with a body its schema refuses"),
        "{body}"
    );
    let (status, body) = checked_answer("GET", "/undocumented", "").await;
    assert_eq!(status, 500);
    assert!(body.contains("is not in the document"), "{body}");
    let (status, body) = checked_answer("POST", "/threads/t1/messages", r#"{"txt": "hi"}"#).await;
    assert_eq!(status, 500);
    assert!(
        body.contains("accepted (202 Accepted) a body its schema refuses"),
        "{body}"
    );
    assert_eq!(
        checked_answer("GET", "/models?access_token=x", "").await.0,
        200
    );
    assert_eq!(
        checked_answer("GET", "/threads?limit=10&roots=true&kind=child", "")
            .await
            .0,
        200
    );
    for query in ["limit=abc", "limit=0", "roots=yes", "kind=grandchild"] {
        let (status, body) = checked_answer("GET", &format!("/threads?{query}"), "").await;
        assert_eq!(status, 500, "{query}: {body}");
    }
    let (status, body) = checked_answer("GET", "/models?verbose=1", "").await;
    assert_eq!(status, 500);
    assert!(body.contains("a query its parameters refuse"), "{body}");
    let (status, body) = checked_answer("POST", "/threads/t1/close", "").await;
    assert_eq!(status, 500);
    assert!(
        body.contains("which the document does not list for `closeThread`"),
        "{body}"
    );
    // Every error is JSON: one in plain text breaks the document, listed or not.
    let (status, body) = checked_answer("POST", "/threads/t1/interrupt", "").await;
    assert_eq!(status, 500);
    assert!(
        body.contains(
            "answered 409 Conflict as `text/plain; charset=utf-8`, where the document says JSON"
        ),
        "{body}"
    );
    let (status, body) = checked_answer("GET", "/nowhere", "").await;
    assert_eq!(status, 500);
    assert!(body.contains("not as an error"), "{body}");
    // A body past what the check reads (a bundle may be a gigabyte) is passed on unchecked.
    let huge = format!("{{\"txt\": \"{}\"}}", "x".repeat(16 << 20));
    assert_eq!(
        checked_answer("POST", "/threads/t1/messages", &huge)
            .await
            .0,
        202
    );
}

#[test]
fn every_part_of_every_operation_is_there_or_absent_never_null() {
    for (path, item) in document()["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            for (key, value) in op.as_object().unwrap() {
                assert!(!value.is_null(), "{method} {path}: `{key}` is null");
            }
        }
    }
    // The schedule's body is the built-in tool's own schema, so the check holds requests to it.
    let body = &document()["paths"]["/threads/{id}/schedules"]["post"]["requestBody"];
    let schema = &body["content"]["application/json"]["schema"];
    assert_eq!(schema["required"], json!(["message"]), "{schema}");
    assert_eq!(schema["additionalProperties"], json!(false));
    // Descriptions read without rustdoc's links.
    assert_eq!(
        unlinked("see [`Waits::of`] and [the seq](crate::effect::X)"),
        "see `Waits::of` and the seq"
    );
    assert_eq!(
        unlinked("[RFC 3339](https://x.example/r)"),
        "RFC 3339 (https://x.example/r)"
    );
    let text = serde_json::to_string(document()).unwrap();
    assert!(
        !text.contains("](crate::") && !text.contains("\"uint64\""),
        "rustdoc links or uint formats are left"
    );
}

/// The schema of the parameter `name` of `method path`.
fn parameter(method: &str, path: &str, name: &str) -> &'static Value {
    document()["paths"][path][method]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .map(|p| &p["schema"])
        .unwrap_or_else(|| panic!("{method} {path} has no parameter {name}"))
}

/// The schema of the JSON body of the operation `id`.
fn body_of(id: &str) -> &'static Value {
    let op = listed().iter().find(|o| o.id == id).unwrap();
    check::schema_in_document(op, None).unwrap()
}

#[test]
fn the_document_says_what_the_server_takes() {
    let takes = |schema: &'static Value, value: Value| check::problems(schema, &value).is_none();
    // Ids in paths, as the server reads them.
    let thread = parameter("get", "/threads/{id}", "id");
    assert!(takes(thread, json!("web-1_a")));
    for refused in ["", "a b", "ü", &"t".repeat(129)] {
        assert!(!takes(thread, json!(refused)), "{refused}");
    }
    let call = parameter("post", "/threads/{id}/tool_results/{call}", "call");
    assert!(takes(call, json!("toolu_01")) && !takes(call, json!("a/b")));
    let schedule = parameter("delete", "/threads/{id}/schedules/{schedule}", "schedule");
    assert!(takes(schedule, json!("sch-0a1b2c3d4e5f")) && !takes(schedule, json!("sch 1")));
    let agent = parameter("get", "/agents/{name}", "name");
    for (name, taken) in [
        ("helper", true),
        ("helper.v2@12", true),
        ("helper@0", false),
        ("@2", false),
        ("a b", false),
    ] {
        assert_eq!(takes(agent, json!(name)), taken, "{name}");
        assert_eq!(
            infinity_agent_core::catalog::AgentRef::parse(name).is_ok(),
            taken,
            "{name}"
        );
    }
    // Queries: bounds the server holds.
    let wait = parameter("get", "/remotes/{id}/orders", "wait");
    assert!(takes(wait, json!(25)) && !takes(wait, json!(26)));
    let version = parameter("get", "/a/{id}", "v");
    assert!(!takes(version, json!(0)) && takes(version, json!(u32::MAX)));
    assert!(!takes(version, json!(u64::from(u32::MAX) + 1)));
    let after = parameter("get", "/threads/{id}/events", "after");
    assert!(takes(after, json!(u64::MAX.to_string())) && !takes(after, json!("-1")));
    assert!(takes(after, json!("6.4.00112233aabbccdd")) && !takes(after, json!("6.4")));
    let cursor = parameter("get", "/threads", "cursor");
    assert!(takes(cursor, json!("1764781234000000000.web-0f9e")));
    for refused in [
        "-1.x",
        "1.a b",
        "nowhere",
        &format!("1.{}", "x".repeat(129)),
    ] {
        assert!(!takes(cursor, json!(refused)), "{refused}");
    }
    // Bodies: what is refused is refused by the document too.
    let message = body_of("postMessage");
    assert!(takes(message, json!({"text": "hi"})));
    for refused in [
        json!({"text": ""}),
        json!({"text": " \n\t\u{200b}\u{202e}"}),
        json!({"text": "hi", "agent": "a b"}),
    ] {
        assert!(!takes(message, refused.clone()), "{refused}");
    }
    assert!(!takes(body_of("pressWidget"), json!({"action": "  "})));
    assert!(!takes(body_of("connectRemote"), json!({"name": " "})));
    assert!(!takes(
        body_of("connectRemote"),
        json!({"name": "x".repeat(101)})
    ));
    assert!(!takes(body_of("postComment"), json!({"text": "\t"})));
    let budget = body_of("setBudget");
    assert!(takes(budget, json!({"usd": 2.5})) && takes(budget, json!({"tokens": 1})));
    // The least amount the document takes is one the server keeps as more than nothing.
    let least = document()["components"]["schemas"]["NewBudget"]["properties"]["usd"]["minimum"]
        .as_f64()
        .unwrap();
    assert!(infinity_agent_core::cost::Usd::from_dollars(least).is_some_and(|u| u.nanos() > 0));
    for refused in [
        json!({}),
        json!({"usd": 0}),
        json!({"tokens": 0}),
        json!({"usd": null}),
        json!({"usd": 1e300}),
        json!({"usd": 5e-324}),
    ] {
        assert!(!takes(budget, refused.clone()), "{refused}");
    }
    let approval = body_of("approveCommand");
    assert!(!takes(approval, json!({"selected": -1})));
    assert!(takes(approval, json!({"selected": u64::MAX})));
    // The HTTP server's own answer to a URI too long is listed, with no body.
    for op in listed() {
        let answers = op.all_responses();
        assert!(
            answers.iter().any(|(s, _, c)| *s == 414 && c.is_none()),
            "{} {} does not list 414",
            op.method,
            op.path
        );
    }
}

#[test]
fn a_text_the_document_calls_blank_is_one_the_server_refuses() {
    // The pattern as the document's validator reads it, against the server's rule, for every
    // character of the Basic Multilingual Plane and a few past it.
    let schema: &'static Value = Box::leak(Box::new(
        json!({"type": "string", "pattern": infinity_agent_core::text::NOT_BLANK}),
    ));
    for c in (0..0x1_0000)
        .chain([0x1_F600, 0xE_0001, 0x10_FFFF])
        .filter_map(char::from_u32)
    {
        let text = format!(" {c} ");
        assert_eq!(
            check::problems(schema, &json!(text)).is_some(),
            infinity_agent_core::text::is_blank(&text),
            "U+{:04X}",
            u32::from(c)
        );
    }
}
