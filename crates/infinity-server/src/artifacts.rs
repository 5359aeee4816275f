//! The pages agents publish (the `artifact` category), served on every host that keeps them:
//!
//! | Route | What |
//! |---|---|
//! | `GET /a` | the public pages |
//! | `GET /a/{id}[?v=N]` | the page in a frame, with its comments and a form to leave one |
//! | `GET /a/{id}/{key}/v{N}/page` | version N's content, sandboxed (what the frame shows) |
//! | `GET /a/{id}/{key}/v{N}/files/{name}` | a file published with version N (pages with `assets`) |
//! | `GET /a/{id}/comments`, `POST /a/{id}/comments` | the comments; `{"text", "author"?}` leaves one, which reaches the publishing thread |
//!
//! Unlisted and public pages need no token; private ones need the deployment's (`?access_token=`
//! or `Authorization: Bearer`). The frame's own requests cannot carry it, and must not (the page's
//! script could read it): they carry `{key}`, derived from the token for that page alone
//! (HMAC-SHA256 of its id), so a private page can load its own files and nothing else. Every
//! response of a page's content is sandboxed (`Content-Security-Policy: sandbox`, an origin of
//! its own: no cookies, no API) and may load nothing but inline code and, with `assets`, its own
//! files.
//!
//! The content runs only as the frame of its page: its scripts, run as a tab's top document,
//! could navigate the tab and carry data out in the URL, which the frame page's policy stops
//! inside it. The browser says what a request loads (`Sec-Fetch-Dest`): the content is served
//! with its scripts for `iframe`/`frame` only (and only into a page of this server,
//! `frame-ancestors 'self'`); a top-level load (`document`) is sent to the frame page; other
//! loads are refused; a client that says nothing gets it with no scripts at all.
//!
//! A page's files answer `fetch()` from its frame, whose origin is `null` (sandboxed), with
//! `Access-Control-Allow-Origin: *`. That lets any page read them, and adds nothing to what
//! their link already gives: a file is served on its URL alone (the page's random id and, for a
//! private page, its key), never on a cookie or a token the browser adds, so CORS exposes only
//! what whoever holds the link can fetch anyway. Nothing else here (the content, the frame page,
//! comments, the API) sends CORS headers, and none allows credentials.

use askama::Template;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use hmac::{Hmac, Mac};
use infinity_agent_core::ids::IdSource;
use infinity_agent_core::input::Input;
use infinity_library::artifact::{
    content_type, limits, ArtifactError, ArtifactMeta, Artifacts, Comment, CommentEvent, Format,
    Visibility,
};
use infinity_library::LibraryExt;
use serde::Deserialize;
use serde_json::json;

use crate::api::{ApiError, Json, Path, Query, Shared};
use crate::Guard;

/// The key of the pages that need none (not private, or a server without a token).
const OPEN: &str = "open";

#[derive(Clone)]
struct Pages {
    host: Shared,
    token: Option<String>,
}

/// The routes, on `host`'s artifacts, behind `guard`'s Host and Origin checks (the token is
/// checked here, for private pages only).
pub fn routes(host: Shared, guard: &Guard) -> Router {
    let pages = Pages {
        host,
        token: guard.token.clone(),
    };
    let checks = |any_origin| Guard {
        any_origin,
        ..guard.without_token()
    };
    // What a page loads itself comes from its sandboxed origin (`null`).
    let content = Router::new()
        .route("/a/{id}/{key}/{version}/page", get(content))
        .route("/a/{id}/{key}/{version}/files/{name}", get(file))
        .with_state(pages.clone())
        .layer(checks(true));
    Router::new()
        .route("/a", get(index))
        .route("/a/{id}", get(frame))
        .route("/a/{id}/comments", get(comments).post(comment))
        .with_state(pages)
        .layer(checks(false))
        .merge(content)
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> ApiError {
    crate::api::error(status, message)
}

fn store_error(e: ArtifactError) -> ApiError {
    match e {
        ArtifactError::Refused(why) => error(StatusCode::TOO_MANY_REQUESTS, why),
        ArtifactError::Unavailable(why) => error(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

impl Pages {
    fn artifacts(&self) -> Result<&Artifacts, ApiError> {
        self.host
            .library()
            .and_then(LibraryExt::artifacts)
            .ok_or_else(|| {
                error(
                    StatusCode::NOT_FOUND,
                    "this server keeps no published pages",
                )
            })
    }

    /// The page `id`, or 404 (a private one without the token is a 404 too: its existence is not
    /// told).
    async fn page(
        &self,
        id: &str,
        headers: &HeaderMap,
        query: &Access,
    ) -> Result<ArtifactMeta, ApiError> {
        if !is_page_id(id) {
            return Err(error(StatusCode::NOT_FOUND, format!("no page {id}")));
        }
        let meta = self.artifacts()?.meta(id).await.map_err(store_error)?;
        match meta {
            Some(meta)
                if meta.visibility != Visibility::Private || self.authorized(headers, query) =>
            {
                Ok(meta)
            }
            _ => Err(error(StatusCode::NOT_FOUND, format!("no page {id}"))),
        }
    }

    fn authorized(&self, headers: &HeaderMap, query: &Access) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let bearer = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        [bearer, query.access_token.as_deref()]
            .into_iter()
            .flatten()
            .any(|given| crate::guard::constant_time_eq(given.as_bytes(), token.as_bytes()))
    }

    /// The key a page's frame loads its content and files with.
    fn key(&self, meta: &ArtifactMeta) -> String {
        match (&self.token, meta.visibility) {
            (Some(token), Visibility::Private) => {
                // Any key length is valid for HMAC.
                let mut mac = Hmac::<sha2::Sha256>::new_from_slice(token.as_bytes())
                    .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
                mac.update(b"artifact:");
                mac.update(meta.id.as_bytes());
                hex::encode(&mac.finalize().into_bytes()[..16])
            }
            _ => OPEN.to_owned(),
        }
    }

    /// The page `id` at `version` (`vN`) for a frame's request with `key`.
    async fn framed(
        &self,
        id: &str,
        key: &str,
        version: &str,
    ) -> Result<(ArtifactMeta, u32), ApiError> {
        let missing = || {
            error(
                StatusCode::NOT_FOUND,
                format!("no page {id} version {version}"),
            )
        };
        if !is_page_id(id) {
            return Err(missing());
        }
        let meta = self
            .artifacts()?
            .meta(id)
            .await
            .map_err(store_error)?
            .ok_or_else(missing)?;
        if !crate::guard::constant_time_eq(key.as_bytes(), self.key(&meta).as_bytes()) {
            return Err(missing());
        }
        let version = version
            .strip_prefix('v')
            .and_then(|n| n.parse::<u32>().ok())
            .filter(|n| (1..=meta.version).contains(n))
            .ok_or_else(missing)?;
        Ok((meta, version))
    }
}

/// Whether `id` may be a page's (`art-...`: 1 to 128 ASCII letters, digits, `_` and `-`, as
/// every id): anything else names no page, and never reaches the store as a key.
fn is_page_id(id: &str) -> bool {
    (1..=infinity_agent_core::ids::MAX_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// A page's query: its version, and for a private page the token (the guard's scheme in the
/// document).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Access {
    #[schemars(skip)]
    access_token: Option<String>,
    /// The version to show, from 1 (default: the newest, which a version past it shows too).
    v: Option<std::num::NonZeroU32>,
}

/// `text` as a URL query value (every byte but unreserved ones percent-encoded), also safe in
/// an HTML attribute.
fn query_value(text: &str) -> String {
    /// Every byte but the unreserved ones (RFC 3986): letters, digits, `-`, `.`, `_`, `~`.
    const RESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(text, RESERVED).to_string()
}

/// A response with the headers every route here sends: its type, its policy (the strictest one
/// when `policy` cannot be a header: never none), no referrer, no sniffing.
fn served(body: impl IntoResponse, content_type: &str, policy: &str) -> Response {
    const STRICTEST: &str = "sandbox; default-src 'none'";
    let mut response = body.into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_str(policy).unwrap_or(HeaderValue::from_static(STRICTEST)),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

const HTML: &str = "text/html; charset=utf-8";

/// Our own pages (the frame, the index): scripts and styles from this server only.
fn own_page(html: String) -> Response {
    served(
        html,
        HTML,
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
         frame-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'none'",
    )
}

/// The list of public pages.
#[derive(Template)]
#[template(path = "pages/index.html")]
struct IndexPage<'a> {
    pages: Vec<&'a ArtifactMeta>,
}

/// A page in its frame, with its comments and the form to leave one.
#[derive(Template)]
#[template(path = "pages/frame.html")]
struct FramePage<'a> {
    id: &'a str,
    title: &'a str,
    visibility: &'a str,
    /// The version shown, and the newest (links to every version when there are several).
    version: u32,
    newest: u32,
    /// A private page opened with `?access_token=` keeps it in its version links (a request
    /// with the token in a header is not a browser's: its links need none), percent-encoded.
    access_token: Option<String>,
    key: String,
    comments: &'a [Comment],
    author_max: usize,
    text_max: usize,
}

/// A Markdown page as an HTML document: `body` is what the Markdown renderer made (raw HTML in
/// the text already turned into text).
#[derive(Template)]
#[template(path = "pages/markdown.html")]
struct MarkdownPage<'a> {
    title: &'a str,
    body: &'a str,
}

/// `page` rendered, or a 500 naming the template (a template that fails on its own fields is a
/// bug here, not the request's).
fn rendered(page: &impl Template) -> Result<String, ApiError> {
    page.render().map_err(|e| {
        error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("rendering a page: {e}"),
        )
    })
}

async fn index(State(pages): State<Pages>) -> Result<Response, ApiError> {
    let all = pages.artifacts()?.all().await.map_err(store_error)?;
    let page = IndexPage {
        pages: all
            .iter()
            .filter(|m| m.visibility == Visibility::Public)
            .collect(),
    };
    Ok(own_page(rendered(&page)?))
}

async fn frame(
    State(pages): State<Pages>,
    Path(id): Path<String>,
    Query(access): Query<Access>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let meta = pages.page(&id, &headers, &access).await?;
    let version = access
        .v
        .map(std::num::NonZeroU32::get)
        .filter(|v| *v <= meta.version)
        .unwrap_or(meta.version);
    let comments = pages
        .artifacts()?
        .comments(&id)
        .await
        .map_err(store_error)?;
    let page = FramePage {
        id: &id,
        title: &meta.title,
        visibility: meta.visibility.as_str(),
        version,
        newest: meta.version,
        access_token: match (&access.access_token, meta.visibility) {
            (Some(token), Visibility::Private) => Some(query_value(token)),
            _ => None,
        },
        key: pages.key(&meta),
        comments: &comments,
        author_max: limits::AUTHOR_CHARS,
        text_max: limits::COMMENT_CHARS,
    };
    Ok(own_page(rendered(&page)?))
}

/// How a request loads a page's content, from the `Sec-Fetch-Dest` the browser sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Load {
    /// Into a frame (`iframe`, `frame`): the content, its scripts allowed.
    Frame,
    /// As a tab's top document: sent to the frame page instead.
    TopLevel,
    /// Anything else a browser says (`empty` for `fetch()`, `object`, `embed`, `script`, ...):
    /// refused, the content is a frame's only.
    Other,
    /// No header (an older browser, a script): the content without scripts, inert wherever it
    /// lands.
    Unsaid,
}

impl Load {
    fn of(headers: &HeaderMap) -> Self {
        match headers
            .get("sec-fetch-dest")
            .map(|v| v.to_str().unwrap_or("").to_ascii_lowercase())
            .as_deref()
        {
            None => Self::Unsaid,
            Some("iframe" | "frame") => Self::Frame,
            Some("document") => Self::TopLevel,
            Some(_) => Self::Other,
        }
    }
}

/// The policy of a page's content: sandboxed, inline code only (none unless `scripts`), and
/// with `assets` its own files at `files` (an absolute URL prefix); framed by this server's
/// pages only.
fn content_policy(meta: &ArtifactMeta, files: &str, scripts: bool) -> String {
    let own = if meta.assets {
        format!(" {files}")
    } else {
        String::new()
    };
    format!(
        "{sandbox}; default-src 'none'; script-src 'unsafe-inline'{own}; \
         style-src 'unsafe-inline'{own}; img-src data:{own}; font-src data:{own}; \
         media-src data:{own}; connect-src{own_connect}; base-uri 'none'; form-action 'none'; \
         frame-ancestors 'self'",
        sandbox = if scripts {
            "sandbox allow-scripts"
        } else {
            "sandbox"
        },
        own_connect = if meta.assets {
            own.clone()
        } else {
            " 'none'".to_owned()
        },
    )
}

/// `scheme://host` of the request (Function URLs say `https` in `X-Forwarded-Proto`).
fn origin(headers: &HeaderMap) -> String {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let host = header("host")
        .filter(|h| {
            h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '-' | '[' | ']'))
        })
        .unwrap_or("localhost");
    let scheme = match header("x-forwarded-proto") {
        Some("https") => "https",
        _ => "http",
    };
    format!("{scheme}://{host}")
}

async fn content(
    State(pages): State<Pages>,
    Path((id, key, version)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (meta, version) = pages.framed(&id, &key, &version).await?;
    let load = Load::of(&headers);
    match load {
        Load::TopLevel => {
            // Nothing of the page in this answer: the tab goes to the frame page (a private
            // page's asks for the token again).
            let to = format!("/a/{id}?v={version}");
            return Ok(by_dest(served(
                (StatusCode::SEE_OTHER, [(header::LOCATION, to)]),
                "text/plain; charset=utf-8",
                "sandbox; default-src 'none'",
            )));
        }
        Load::Other => {
            return Ok(by_dest(served(
                (
                    StatusCode::FORBIDDEN,
                    format!("page {id}'s content is shown only in its frame, at /a/{id}"),
                ),
                "text/plain; charset=utf-8",
                "sandbox; default-src 'none'",
            )));
        }
        Load::Frame | Load::Unsaid => {}
    }
    let text = pages
        .artifacts()?
        .content(&id, version)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            error(
                StatusCode::NOT_FOUND,
                format!("no page {id} version {version}"),
            )
        })?;
    let html = match meta.format {
        Format::Html => text,
        Format::Markdown => markdown(&meta.title, &text)?,
    };
    let files = format!("{}/a/{id}/{key}/v{version}/files/", origin(&headers));
    let policy = content_policy(&meta, &files, load == Load::Frame);
    Ok(by_dest(served(html, HTML, &policy)))
}

/// Marks an answer that depends on `Sec-Fetch-Dest`, so no cache gives one load's answer to
/// another.
fn by_dest(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::VARY, HeaderValue::from_static("sec-fetch-dest"));
    response
}

/// A Markdown page as an HTML document; raw HTML in it is shown as text.
fn markdown(title: &str, text: &str) -> Result<String, ApiError> {
    use pulldown_cmark::{Event, Options, Parser};
    let parser = Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH).map(
        |event| match event {
            Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
            other => other,
        },
    );
    let mut body = String::new();
    pulldown_cmark::html::push_html(&mut body, parser);
    rendered(&MarkdownPage { title, body: &body })
}

async fn file(
    State(pages): State<Pages>,
    Path((id, key, version, name)): Path<(String, String, String, String)>,
) -> Result<Response, ApiError> {
    let (meta, version) = pages.framed(&id, &key, &version).await?;
    if !meta.assets {
        return Err(error(
            StatusCode::FORBIDDEN,
            format!("page {id} was published without assets: it loads no files"),
        ));
    }
    let bytes = pages
        .artifacts()?
        .file(&id, version, &name)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            error(
                StatusCode::NOT_FOUND,
                format!("page {id} has no file {name}"),
            )
        })?;
    let mut response = served(bytes, content_type(&name), "sandbox; default-src 'none'");
    // Readable by the page's own `fetch()` (its origin is `null`); see the module docs for why
    // `*` tells nobody more than the link does. Never with credentials.
    response.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    Ok(response)
}

async fn comments(
    State(pages): State<Pages>,
    Path(id): Path<String>,
    Query(access): Query<Access>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    pages.page(&id, &headers, &access).await?;
    let comments = pages
        .artifacts()?
        .comments(&id)
        .await
        .map_err(store_error)?;
    Ok(Json(comments).into_response())
}

/// A comment on a page.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewComment {
    /// The text (not blank; at most 4,000 characters, leading and trailing spaces aside).
    #[schemars(regex(pattern = infinity_agent_core::text::NOT_BLANK))]
    #[schemars(length(min = 1, max = limits::COMMENT_CHARS))]
    text: String,
    /// Who wrote it (at most 80 characters; `anonymous` when left out or blank).
    #[serde(default)]
    #[schemars(length(max = limits::AUTHOR_CHARS))]
    author: Option<String>,
}

/// `POST /a/{id}/comments`: stores the comment, then hands it to the publishing thread (201).
async fn comment(
    State(pages): State<Pages>,
    Path(id): Path<String>,
    Query(access): Query<Access>,
    headers: HeaderMap,
    Json(NewComment { text, author }): Json<NewComment>,
) -> Result<Response, ApiError> {
    let meta = pages.page(&id, &headers, &access).await?;
    let text = text.trim().to_owned();
    if infinity_agent_core::text::is_blank(&text) || text.chars().count() > limits::COMMENT_CHARS {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("`text` must have 1 to {} characters", limits::COMMENT_CHARS),
        ));
    }
    let author = author
        .map(|a| a.trim().to_owned())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| "anonymous".to_owned());
    if author.chars().count() > limits::AUTHOR_CHARS {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("`author` has more than {} characters", limits::AUTHOR_CHARS),
        ));
    }
    let record = pages
        .host
        .threads()
        .load_record(&meta.thread_id)
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?;
    if !record.is_some_and(|r| r.status != infinity_agent_core::state::ThreadStatus::Closed) {
        return Err(error(
            StatusCode::CONFLICT,
            "the conversation that published this page has ended; it takes no more comments",
        ));
    }
    let comment = Comment {
        id: format!(
            "cm-{:012x}",
            infinity_agent_core::ids::RandomIds.next_bits() & 0xffff_ffff_ffff
        ),
        author,
        text,
        version: meta.version,
        at: jiff::Timestamp::now(),
        answers: Vec::new(),
    };
    pages
        .artifacts()?
        .add_comment(&id, &comment)
        .await
        .map_err(store_error)?;
    // Stored first: a comment whose input is lost still shows on the page, and posting it again
    // is a new comment, never a lost one.
    let input = Input::new(
        meta.thread_id.clone(),
        CommentEvent {
            artifact_id: id.clone(),
            comment_id: comment.id.clone(),
            author: comment.author.clone(),
            text: comment.text.clone(),
            at: comment.at,
        }
        .input(),
    );
    pages
        .host
        .post(input)
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?;
    Ok((StatusCode::CREATED, Json(json!(comment))).into_response())
}

#[cfg(test)]
mod tests;
