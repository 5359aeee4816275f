//! JSON over HTTP for tests, one way everywhere: [`get_json`] and [`post_json`] answer the
//! status and the body, and [`Api`] is a running API (`infinity serve`'s, or a stack's API
//! function behind its URL) as a person's client uses it: a message to a thread, its record, its
//! history.
//!
//! Not the raw-socket requests of `infinity_server::testing`, which send what a client library
//! would refuse to (two `Host` headers, a body cut short).

use serde_json::{json, Value};

/// The status and body of a GET of `url`; see [`answer`] for the body.
pub async fn get_json(url: &str) -> (u16, Value) {
    answer(reqwest::Client::new().get(url)).await
}

/// The status and body of a POST of `body`, as JSON, to `url`; see [`answer`] for the body.
pub async fn post_json(url: &str, body: &Value) -> (u16, Value) {
    answer(reqwest::Client::new().post(url).json(body)).await
}

/// Sends `request`: the answer's status and its body as JSON; a body that is not JSON (a plain
/// text error) as a JSON string, an empty one as `null`. `(0, null)` when nothing answers (a
/// server not up yet), so that a test can wait for it.
pub async fn answer(request: reqwest::RequestBuilder) -> (u16, Value) {
    let Ok(response) = request.send().await else {
        return (0, Value::Null);
    };
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let body = match text.is_empty() {
        true => Value::Null,
        false => serde_json::from_str(&text).unwrap_or(Value::String(text)),
    };
    (status, body)
}

/// A running API, at its base URL, with its bearer token when it needs one.
#[derive(Debug, Clone)]
pub struct Api {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    pub token: Option<String>,
    http: reqwest::Client,
}

impl Api {
    /// The API at `url`, sending `token` with every request when there is one.
    pub fn new(url: &str, token: Option<&str>) -> Self {
        Self {
            url: url.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
            http: reqwest::Client::new(),
        }
    }

    /// A request to `path` (`/threads/t`), with the token.
    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.url));
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// [`get_json`] of `path`, with the token.
    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        answer(self.request(reqwest::Method::GET, path)).await
    }

    /// [`post_json`] to `path`, with the token.
    pub async fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        answer(self.request(reqwest::Method::POST, path).json(body)).await
    }

    /// Sends a person's message to `thread`; fails the test, saying why, unless the API takes
    /// it (202).
    pub async fn say(&self, thread: &str, text: &str) {
        let path = format!("/threads/{thread}/messages");
        let (status, body) = self.post_json(&path, &json!({ "text": text })).await;
        assert_eq!(status, 202, "POST {path}: {body}");
    }

    /// The thread's record as the API answers it (its error, when it has no such thread).
    pub async fn record(&self, thread: &str) -> Value {
        self.get_json(&format!("/threads/{thread}")).await.1
    }

    /// The thread's history entries (none while it has no history, or no record yet).
    pub async fn history(&self, thread: &str) -> Vec<Value> {
        match self.get_json(&format!("/threads/{thread}/history")).await {
            (200, Value::Array(entries)) => entries,
            _ => Vec::new(),
        }
    }

    /// Whether an entry of the thread's history mentions `text` (anywhere in its JSON).
    pub async fn history_mentions(&self, thread: &str, text: &str) -> bool {
        let entries = self.history(thread).await;
        entries.iter().any(|entry| entry.to_string().contains(text))
    }
}
