//! The web app `infinity serve` serves at `/`: a page that lists conversations, shows one with
//! its live event stream, and answers what the agent asks (see `docs/web.md`).
//!
//! The app is plain ES modules and one stylesheet under `crates/infinity-server/web/`, compiled into
//! the binary: no build step, nothing fetched from elsewhere at run time. Every answer carries a
//! Content-Security-Policy that allows this server's own scripts, styles and API only (images
//! also from `data:` URLs, which tool results carry inline), so no inline script runs.
//!
//! These files are public: the same bytes ship in every copy of the binary, and none holds data.
//! They pass the same [`Guard`] as the API for its `Host` and `Origin` checks (no DNS rebinding,
//! no other site's page), but without its token: a browser loads `/app/app.js` and the modules it
//! imports with no way to add a header, and relative imports drop the query a page was opened
//! with. The page reads the token from its own URL (`/?access_token=T`) and sends it with every
//! API request instead.
//!
//! One module is made here rather than read from a file: `status-words.js`, the words a
//! thread's status is said in, from the core's [`Phrase::ALL`], their one source (the CLI says
//! them too).

use std::sync::LazyLock;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use infinity_agent_core::state::Phrase;
use serde_json::json;

use crate::api::Path;
use crate::Guard;

/// What the page may load: this server only; images also inline (`data:`), as tool results
/// carry them.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// A file of the app: its name under `/app/`, its media type and its text.
struct Asset {
    name: &'static str,
    media_type: &'static str,
    text: &'static str,
}

const JS: &str = "text/javascript; charset=utf-8";

const INDEX: &str = include_str!("../web/index.html");

const ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        media_type: "text/css; charset=utf-8",
        text: include_str!("../web/style.css"),
    },
    Asset {
        name: "app.js",
        media_type: JS,
        text: include_str!("../web/app.js"),
    },
    Asset {
        name: "api.js",
        media_type: JS,
        text: include_str!("../web/api.js"),
    },
    Asset {
        name: "dom.js",
        media_type: JS,
        text: include_str!("../web/dom.js"),
    },
    Asset {
        name: "status.js",
        media_type: JS,
        text: include_str!("../web/status.js"),
    },
    Asset {
        name: "sidebar.js",
        media_type: JS,
        text: include_str!("../web/sidebar.js"),
    },
    Asset {
        name: "transcript.js",
        media_type: JS,
        text: include_str!("../web/transcript.js"),
    },
    Asset {
        name: "panels.js",
        media_type: JS,
        text: include_str!("../web/panels.js"),
    },
    Asset {
        name: "artifact.js",
        media_type: JS,
        text: include_str!("../web/artifact.js"),
    },
    Asset {
        name: "artifact.css",
        media_type: "text/css; charset=utf-8",
        text: include_str!("../web/artifact.css"),
    },
    Asset {
        name: "widget.js",
        media_type: JS,
        text: include_str!("../web/widget.js"),
    },
];

/// The module of the words a thread's status is said in, made from [`Phrase::ALL`]: `PHRASES`,
/// each by its name, as `{state, text}`.
const STATUS_WORDS: &str = "status-words.js";

fn status_words() -> &'static str {
    static MODULE: LazyLock<String> = LazyLock::new(|| {
        let phrases: serde_json::Map<String, serde_json::Value> = Phrase::ALL
            .iter()
            .map(|p| (p.name.to_owned(), json!({"state": p.state, "text": p.text})))
            .collect();
        let phrases = serde_json::Value::Object(phrases);
        format!(
            "// The words of a thread's status, each with `{{name}}` where a value goes: the \
             runtime's own\n// (`infinity_agent_core::state::Phrase`), sent by the server.\n\
             export const PHRASES = Object.freeze({phrases:#});\n"
        )
    });
    &MODULE
}

/// The page at `/` and its files at `/app/{name}`, behind `guard` without its token (see the
/// module doc).
pub fn routes(guard: &Guard) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { page("text/html; charset=utf-8", INDEX) }),
        )
        .route("/app/{name}", get(asset))
        .layer(guard.without_token())
}

async fn asset(Path(name): Path<String>) -> Response {
    if name == STATUS_WORDS {
        return page(JS, status_words());
    }
    match ASSETS.iter().find(|a| a.name == name) {
        Some(asset) => page(asset.media_type, asset.text),
        None => crate::api::error(
            StatusCode::NOT_FOUND,
            format!("the web app has no file `{name}`"),
        )
        .into_response(),
    }
}

/// `text` as `media_type`, with the page's security headers. The files change only with the
/// binary, so the browser checks with the server before using a cached copy (`no-cache`).
fn page(media_type: &'static str, text: &'static str) -> Response {
    let mut response = text.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The page's URL may hold the token: no other request should carry it as a referrer.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_app_imports_is_served() {
        let mut served: Vec<&str> = ASSETS.iter().map(|a| a.name).collect();
        served.push(STATUS_WORDS);
        let loaded = loaded_files(INDEX)
            .into_iter()
            .chain(ASSETS.iter().flat_map(|a| loaded_files(a.text)));
        for name in loaded {
            assert!(served.contains(&name.as_str()), "`{name}` is not served");
        }
    }

    #[test]
    fn the_status_words_are_the_runtimes_and_the_app_takes_each_from_them() {
        let module = status_words();
        let object = module
            .split_once("Object.freeze(")
            .and_then(|(_, rest)| rest.rsplit_once(");"))
            .map(|(object, _)| object)
            .unwrap();
        let phrases: serde_json::Value = serde_json::from_str(object).unwrap();
        assert_eq!(phrases.as_object().unwrap().len(), Phrase::ALL.len());
        let scripts: String = ASSETS.iter().map(|a| a.text).collect();
        for phrase in Phrase::ALL {
            assert_eq!(
                phrases[phrase.name],
                json!({"state": phrase.state, "text": phrase.text})
            );
            let used = format!("PHRASES.{}", phrase.name);
            assert!(scripts.contains(&used), "the web app never says `{used}`");
        }
    }

    /// The file names after `./` or `/app/` in quotes: what the page and modules load.
    fn loaded_files(text: &str) -> Vec<String> {
        let mut names = Vec::new();
        for quote in ['"', '\''] {
            for part in text.split(quote).skip(1).step_by(2) {
                let name = part
                    .strip_prefix("./")
                    .or_else(|| part.strip_prefix("/app/"))
                    .filter(|n| n.ends_with(".js") || n.ends_with(".css"));
                if let Some(name) = name {
                    names.push(name.to_owned());
                }
            }
        }
        names
    }
}
