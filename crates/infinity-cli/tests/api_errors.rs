//! Every error of the HTTP API is `{"error": "..."}` JSON naming what was wrong, with a status
//! the API's document lists: what axum's extractors refuse (a query, a path, a body), a route
//! or method that is not there, on every route alike. The server checks itself against its
//! document (INFINITY_CHECK_API), so a status it does not list, or an error that is not JSON,
//! would be a 500 here.

use reqwest::header::CONTENT_TYPE;
use reqwest::{Client, RequestBuilder};
use serde_json::{json, Value};

use crate::common::{serve_in, until};
use infinity_test_support::get_json;

/// An agent that answers every message at once (the scripted model: no keys).
fn quiet_agent(dir: &std::path::Path) {
    std::fs::write(
        dir.join("script.yaml"),
        "rules:\n  - reply: {text: \"ok\"}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("agent.yaml"),
        "name: quiet\nmodel: script:script.yaml\n",
    )
    .unwrap();
}

/// The status of `request`'s answer and its error, checked to be `{"error": "..."}` as JSON.
async fn refusal(request: RequestBuilder) -> (u16, String) {
    let answer = request.send().await.unwrap();
    let status = answer.status().as_u16();
    let json = answer
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let text = answer.text().await.unwrap();
    assert!(json, "{status} not as JSON: {text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    let error = body["error"].as_str();
    assert!(error.is_some(), "{status}: {text}");
    (status, error.unwrap_or_default().to_owned())
}

/// The status a GET of `path` gets, sent over TCP by hand: HTTP clients refuse to send a URI
/// as long as some of these.
fn raw_status(api: &str, path: &str) -> u16 {
    use std::io::{Read, Write};
    let host = api.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    // The server closes the connection after its answer: what arrived is all there is.
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_is_json_naming_what_was_wrong_with_a_status_the_document_lists() {
    let dir = tempfile::tempdir().unwrap();
    quiet_agent(dir.path());
    let (_server, api) = serve_in(dir.path(), &["--agent", "agent.yaml", "--store", "store"]).await;
    let http = Client::new();
    let get = |path: &str| http.get(format!("{api}{path}"));
    let post = |path: &str| http.post(format!("{api}{path}"));
    // A body as `curl -d` sends it: no JSON Content-Type.
    let form = |path: &str, body: &'static str| {
        post(path)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
    };
    let json_body = |path: &str, body: &'static str| {
        post(path)
            .header(CONTENT_TYPE, "application/json")
            .body(body)
    };
    let cases: Vec<(RequestBuilder, u16, &str)> = vec![
        // Queries.
        (
            get("/threads/x/events?after=1&after=2"),
            400,
            "duplicate field `after`",
        ),
        (get("/threads?cursor=-1.x"), 400, "`cursor`"),
        (get("/a/x?v=abc"), 400, "v: invalid digit"),
        (get("/a/art-1?v=0"), 400, "nonzero"),
        (get("/a/x/comments?v=abc"), 400, "v: invalid digit"),
        (get("/a/x/comments?page=2"), 400, "unknown field `page`"),
        (
            get("/remotes/r/orders?wait=abc"),
            400,
            "wait: invalid digit",
        ),
        (get("/remotes/r/orders?wait=26"), 400, "at most 25 seconds"),
        // Paths, routes and methods.
        (get("/threads/%FF"), 400, "UTF-8"),
        (get("/nowhere"), 404, "no route GET /nowhere"),
        (
            http.put(format!("{api}/threads/x")),
            405,
            "/threads/x takes no PUT",
        ),
        (get("/app/nothing.js"), 404, "no file `nothing.js`"),
        // Bodies: one rule for every route, JSON sent as JSON.
        (
            form("/threads/x/messages", r#"{"text": "hi"}"#),
            415,
            "Content-Type: application/json",
        ),
        (
            form("/threads/x/budget", r#"{"usd": 1}"#),
            415,
            "Content-Type: application/json",
        ),
        (
            form("/threads/x/agent", r#"{"agent": "quiet"}"#),
            415,
            "Content-Type",
        ),
        (
            form("/threads/x/model", r#"{"model": null}"#),
            415,
            "Content-Type",
        ),
        (
            form("/threads/x/close", r#"{"tree": true}"#),
            415,
            "Content-Type",
        ),
        (
            form("/threads/x/interrupt", r#"{"tree": true}"#),
            415,
            "Content-Type",
        ),
        (
            form("/a/x/comments", r#"{"text": "hi"}"#),
            415,
            "Content-Type",
        ),
        (
            form("/threads/x/migration", r#"{"to": "y"}"#),
            415,
            "Content-Type",
        ),
        (form("/migration/import", "{}"), 415, "Content-Type"),
        (
            json_body("/threads/x/migration", "{}"),
            422,
            "missing field `to`",
        ),
        (json_body("/threads/x/migration/finish", "{"), 400, "EOF"),
        (
            json_body("/threads/x/budget", r#"{"usd": 1e300}"#),
            422,
            "from 0 to 18,446,744,073",
        ),
        (
            json_body("/threads/x/budget", r#"{"usd": null}"#),
            422,
            "usd",
        ),
    ];
    for (request, status, says) in cases {
        let described = format!("{request:?}");
        let (got, error) = refusal(request).await;
        assert_eq!(got, status, "{described}: {error}");
        assert!(error.contains(says), "{described}: {error}");
        assert!(error.len() < 300, "{described}: {error}");
    }
    // A method a route does not take names the ones it does.
    let put = http.put(format!("{api}/threads/x")).send().await.unwrap();
    assert_eq!(put.headers()["allow"], "GET,HEAD");

    // A URI past what the HTTP server reads is refused before any route, with no body: the
    // document lists that answer for every route, and a cursor the document allows is far
    // shorter.
    assert_eq!(
        raw_status(&api, &format!("/threads?cursor={}", "1".repeat(100_000))),
        414
    );
    let (_, document) = get_json(&format!("{api}/openapi.json")).await;
    let listing = &document["paths"]["/threads"]["get"];
    assert!(
        listing["responses"]["414"]["description"].is_string(),
        "{listing}"
    );
    assert!(listing["responses"]["414"].get("content").is_none());

    // A conversation moving away has no forwarding addresses here: a conflict with its state (409),
    // not another host's failure.
    let said = json_body("/threads/mover/messages", r#"{"text": "hi"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(said.status(), 202);
    until("the answer", || async {
        get_json(&format!("{api}/threads/mover/history"))
            .await
            .1
            .to_string()
            .contains("ok")
    })
    .await;
    let started = json_body("/threads/mover/migration", r#"{"to": "http://elsewhere"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), 200);
    let (status, error) = refusal(post("/threads/mover/migration/forwarding")).await;
    assert_eq!(
        (status, error.contains("does not run here")),
        (409, true),
        "{error}"
    );
    let aborted = post("/threads/mover/migration/abort").send().await.unwrap();
    assert_eq!(aborted.status(), 200);
    let body: Value = aborted.json().await.unwrap();
    assert_eq!(body, json!({"aborted": "mover"}));
}
