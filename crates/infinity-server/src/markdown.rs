//! Markdown as the web app shows an agent's text: rendered by `pulldown-cmark`, then cleaned by
//! the `ammonia` sanitizer, so whatever a model writes (raw HTML, `javascript:` links, event
//! handlers, remote images) cannot run in the page or reach out of it. `POST /markdown` renders
//! texts for the page (see docs/web.md, "Markdown").
//!
//! A text is untrusted, and so is a request: neither may stall the server. A request carries
//! at most [`MAX_TEXTS`] texts of at most [`MAX_TEXT_CHARS`] characters each, in a body of at
//! most [`MAX_BODY_BYTES`]; nesting deeper than 32 levels is flattened before the sanitizer's
//! parser sees it (whose time grows with the square of the nesting, see `markdown/depth.rs`). Texts are rendered on a blocking thread, never on the threads that answer
//! requests, by at most [`RENDERERS`] requests at once (so hostile requests cannot take every
//! blocking thread), within [`RENDER_LIMIT`] including the wait for a turn (503 after it). A
//! rendering stops before its next text once its request is answered or its client gone.

mod depth;
mod urls;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::api::{error, ApiError};

/// The most texts one request renders.
pub const MAX_TEXTS: usize = 500;

/// The most characters one text may have (the bytes its rendering reads are at most four times
/// as many).
pub const MAX_TEXT_CHARS: usize = 100_000;

/// The most bytes a request's body may have (413 past it).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// How many requests render at once; others wait their turn (within [`RENDER_LIMIT`]).
pub const RENDERERS: usize = 2;

/// How long a request may take to render, its wait for a turn included (503 past it).
pub const RENDER_LIMIT: Duration = Duration::from_secs(10);

/// `text`, Markdown, as safe HTML: headings, emphasis, lists, task lists, tables, code, quotes
/// and links (which open elsewhere, without a referrer) are kept; scripts, styles, frames,
/// forms, event handlers, `javascript:` and other schemes but `http`, `https` and `mailto` are
/// removed.
pub fn to_html(text: &str) -> String {
    one_to_html(&sanitizer(), text)
}

fn sanitizer() -> ammonia::Builder<'static> {
    let mut sanitizer = ammonia::Builder::default();
    sanitizer
        .url_schemes(HashSet::from(["http", "https", "mailto", "data"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"))
        .set_tag_attribute_value("a", "target", "_blank")
        .add_tag_attributes("input", ["type", "checked", "disabled"])
        .add_tags(["input"])
        .attribute_filter(urls::keep);
    sanitizer
}

fn one_to_html(sanitizer: &ammonia::Builder<'_>, text: &str) -> String {
    use pulldown_cmark::{html, Options, Parser};
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let mut raw = String::new();
    html::push_html(&mut raw, depth::bounded(Parser::new_ext(text, options)));
    sanitizer.clean(&raw).to_string()
}

/// Each of `texts` as HTML, or `None` once `stop` is set (checked before each text).
fn to_html_until(texts: &[String], stop: &AtomicBool) -> Option<Vec<String>> {
    let sanitizer = sanitizer();
    let mut html = Vec::with_capacity(texts.len());
    for text in texts {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        html.push(one_to_html(&sanitizer, text));
    }
    Some(html)
}

/// Who renders: the turns requests take (a blocking thread each) and how long one may take.
#[derive(Debug, Clone)]
pub struct Renderer {
    turns: Arc<Semaphore>,
    limit: Duration,
}

impl Default for Renderer {
    fn default() -> Self {
        Self::new(RENDERERS, RENDER_LIMIT)
    }
}

/// Set when the request that asked for a rendering is answered or gone (its future dropped):
/// the rendering stops before its next text.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Renderer {
    /// `turns` requests rendering at once, each within `limit`.
    pub fn new(turns: usize, limit: Duration) -> Self {
        Self {
            turns: Arc::new(Semaphore::new(turns.max(1))),
            limit,
        }
    }

    /// `texts` as HTML, rendered on a blocking thread when a turn is free, within the limit;
    /// dropping the future stops the rendering before its next text.
    async fn render(&self, texts: Vec<String>) -> Result<Vec<String>, ApiError> {
        let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
        let flag = Arc::clone(&stop.0);
        let turns = Arc::clone(&self.turns);
        let rendering = async move {
            let turn = turns.acquire_owned().await.ok()?;
            // The turn is held until the thread is done, not only until the answer: a
            // rendering past its time limit still counts against the others.
            let task = tokio::task::spawn_blocking(move || {
                let _turn = turn;
                to_html_until(&texts, &flag)
            });
            task.await.ok().flatten()
        };
        match tokio::time::timeout(self.limit, rendering).await {
            Ok(Some(html)) => Ok(html),
            Ok(None) => Err(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the texts could not be rendered",
            )),
            Err(_) => Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "the texts were not rendered within {} s (the server is busy, or they are \
                     many and large): send fewer at once, or try again",
                    self.limit.as_secs_f32()
                ),
            )),
        }
    }
}

/// Markdown texts to render.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Texts {
    /// The texts: at most 500, each at most 100,000 characters, in a body of at most 1 MiB
    /// (1,048,576 bytes).
    #[schemars(length(max = MAX_TEXTS), inner(length(max = MAX_TEXT_CHARS)))]
    texts: Vec<String>,
}

/// Rendered texts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Html {
    /// Each text as safe HTML, in the order given.
    html: Vec<String>,
}

/// `POST /markdown` (`{"texts": [...]}`): each text as safe HTML (`{"html": [...]}`).
async fn render(
    State(renderer): State<Renderer>,
    body: Result<Json<Texts>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(Texts { texts }) = body.map_err(|e| error(e.status(), e.body_text()))?;
    if texts.len() > MAX_TEXTS {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("{} texts; at most {MAX_TEXTS} at once", texts.len()),
        ));
    }
    for (index, text) in texts.iter().enumerate() {
        // Cheap before counting: a text of at most that many bytes has at most that many
        // characters.
        let chars = if text.len() > MAX_TEXT_CHARS {
            text.chars().count()
        } else {
            0
        };
        if chars > MAX_TEXT_CHARS {
            return Err(error(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("`texts[{index}]` has {chars} characters; at most {MAX_TEXT_CHARS} each"),
            ));
        }
    }
    let html = renderer.render(texts).await?;
    Ok(Json(Html { html }).into_response())
}

/// The route, rendering with a [`Renderer::default`].
pub fn routes() -> Router {
    routes_with(Renderer::default())
}

/// The route, rendering with `renderer`.
pub fn routes_with(renderer: Renderer) -> Router {
    Router::new()
        .route("/markdown", post(render))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(renderer)
}

#[cfg(test)]
mod tests;
