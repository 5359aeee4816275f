//! A local HTTP server that records every request and answers with scripted replies, in order.
//! The last reply repeats once the script runs out, so one reply can answer every retry.
//!
//! Every body sent to a model endpoint is first judged by the provider's own definitions
//! ([`crate::common::validate`]): one the provider would refuse is answered with the 400 it
//! would send, and fails the test when the server is dropped.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::Router;
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::common::validate::{self, Provider, Refusals};

/// One scripted answer: a status, headers and a body written in pieces.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    /// The body: each piece written after its pause.
    pieces: Vec<(Duration, Vec<u8>)>,
    /// Waited before the status line is sent.
    delay: Duration,
}

impl Reply {
    /// A 200 event stream with this body, written at once.
    pub fn sse(body: &str) -> Self {
        Self::sse_pieces(vec![body.as_bytes().to_vec()], Duration::ZERO)
    }

    /// A 200 event stream written piece by piece, `pause` before each piece.
    pub fn sse_pieces(pieces: Vec<Vec<u8>>, pause: Duration) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            pieces: pieces.into_iter().map(|piece| (pause, piece)).collect(),
            delay: Duration::ZERO,
        }
    }

    /// An error status with a JSON body.
    pub fn error(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            pieces: vec![(Duration::ZERO, body.as_bytes().to_vec())],
            delay: Duration::ZERO,
        }
    }

    /// A plain-text reply with this status.
    pub fn text(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "text/plain".into())],
            pieces: vec![(Duration::ZERO, body.as_bytes().to_vec())],
            delay: Duration::ZERO,
        }
    }

    /// The same reply with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The same reply, with the body's piece `index` written only after `pause`.
    pub fn pause_before_piece(mut self, index: usize, pause: Duration) -> Self {
        self.pieces[index].0 = pause;
        self
    }

    /// The same reply, sent only after `delay`.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    /// The body as JSON (`Null` if it was not JSON).
    pub body: Value,
}

impl Received {
    /// A header's value, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Debug)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
    refusals: Arc<Refusals>,
}

impl Shared {
    fn next_reply(&self) -> Reply {
        let mut script = self.script.lock().unwrap();
        if script.len() > 1 {
            script.pop_front().unwrap()
        } else {
            script.front().cloned().unwrap()
        }
    }
}

/// A running server on 127.0.0.1; it stops with the test's runtime.
#[derive(Debug)]
pub struct Server {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    shared: Arc<Shared>,
}

impl Server {
    /// Starts a server that answers the n-th request with `script[n]` (the last one repeats).
    pub async fn start(script: Vec<Reply>) -> Self {
        assert!(!script.is_empty(), "a server needs at least one reply");
        validate::start();
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            received: Mutex::new(Vec::new()),
            refusals: Arc::default(),
        });
        let app = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, shared }
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// How many requests arrived.
    pub fn requests(&self) -> usize {
        self.shared.received.lock().unwrap().len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.refusals.assert_none();
    }
}

/// The provider whose endpoint `path` is, if it is a model endpoint.
fn provider_of(path: &str) -> Option<Provider> {
    if path.ends_with("/v1/messages") {
        Some(Provider::Anthropic)
    } else if path.ends_with("/chat/completions") {
        Some(Provider::OpenAi)
    } else {
        None
    }
}

/// The 400 `provider` answers a body it refuses with, saying `why`.
fn refusal(provider: Provider, why: &str) -> Reply {
    let body = match provider {
        Provider::OpenAi => json!({"error": {
            "message": why, "type": "invalid_request_error", "param": null, "code": null
        }}),
        _ => json!({"type": "error", "error": {"type": "invalid_request_error", "message": why}}),
    };
    Reply::error(400, &body.to_string())
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let refused = match provider_of(uri.path()) {
        Some(provider) => {
            let (refusals, judged) = (Arc::clone(&shared.refusals), body.clone());
            tokio::task::spawn_blocking(move || refusals.judge(provider, &judged))
                .await
                .unwrap()
                .map(|why| refusal(provider, &why))
        }
        None => None,
    };
    shared.received.lock().unwrap().push(Received {
        path: uri.path().to_owned(),
        headers,
        body,
    });
    let reply = refused.unwrap_or_else(|| shared.next_reply());
    tokio::time::sleep(reply.delay).await;
    let mut response = Response::builder().status(reply.status);
    for (name, value) in &reply.headers {
        response = response.header(name, value);
    }
    let body = futures_util::stream::iter(reply.pieces).then(|(pause, piece)| async move {
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
        Ok::<_, Infallible>(Bytes::from(piece))
    });
    response.body(Body::from_stream(body)).unwrap()
}

/// Cuts an event stream where parsers tend to break: inside every `data:` prefix, between every
/// `\r` and `\n`, inside every multi-byte character, in the middle of every line, and every 16
/// bytes besides.
pub fn awkward_pieces(body: &str) -> Vec<Vec<u8>> {
    let bytes = body.as_bytes();
    let mut cuts: Vec<usize> = (16..bytes.len()).step_by(16).collect();
    for (at, _) in body.match_indices("data:") {
        cuts.push(at + 2);
    }
    for (at, byte) in bytes.iter().enumerate() {
        if *byte == b'\r' {
            cuts.push(at + 1);
        }
        if byte & 0b1100_0000 == 0b1000_0000 {
            cuts.push(at); // before a UTF-8 continuation byte
        }
    }
    let mut line_start = 0;
    for (at, _) in body.match_indices('\n') {
        cuts.push(line_start + (at - line_start) / 2);
        line_start = at + 1;
    }
    cuts.retain(|&c| c > 0 && c < bytes.len());
    cuts.sort_unstable();
    cuts.dedup();
    let mut pieces = Vec::new();
    let mut from = 0;
    for cut in cuts {
        pieces.push(bytes[from..cut].to_vec());
        from = cut;
    }
    pieces.push(bytes[from..].to_vec());
    pieces
}
