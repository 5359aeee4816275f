//! Markdown as the web app shows an agent's text: rendered by `pulldown-cmark`, then cleaned by
//! the `ammonia` sanitizer, so whatever a model writes (raw HTML, `javascript:` links, event
//! handlers, remote images) cannot run in the page or reach out of it. `POST /markdown` renders
//! texts for the page (see docs/web.md, "Markdown").

mod urls;

use std::collections::HashSet;

use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{error, ApiError};

/// The most texts one request renders.
const MAX_TEXTS: usize = 500;

/// `text`, Markdown, as safe HTML: headings, emphasis, lists, task lists, tables, code, quotes
/// and links (which open elsewhere, without a referrer) are kept; scripts, styles, frames,
/// forms, event handlers, `javascript:` and other schemes but `http`, `https` and `mailto` are
/// removed.
pub fn to_html(text: &str) -> String {
    to_html_all(std::iter::once(text)).pop().unwrap_or_default()
}

fn to_html_all<'a>(texts: impl Iterator<Item = &'a str>) -> Vec<String> {
    use pulldown_cmark::{html, Options, Parser};
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_FOOTNOTES;
    let mut sanitizer = ammonia::Builder::default();
    sanitizer
        .url_schemes(HashSet::from(["http", "https", "mailto", "data"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"))
        .set_tag_attribute_value("a", "target", "_blank")
        .add_tag_attributes("input", ["type", "checked", "disabled"])
        .add_tags(["input"])
        .attribute_filter(urls::keep);
    texts
        .map(|text| {
            let mut raw = String::new();
            html::push_html(&mut raw, Parser::new_ext(text, options));
            sanitizer.clean(&raw).to_string()
        })
        .collect()
}

/// Markdown texts to render.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Texts {
    /// The texts.
    texts: Vec<String>,
}

/// Rendered texts.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Html {
    /// Each text as safe HTML, in the order given.
    html: Vec<String>,
}

/// `POST /markdown` (`{"texts": [...]}`): each text as safe HTML (`{"html": [...]}`).
async fn render(body: Result<Json<Texts>, JsonRejection>) -> Result<Response, ApiError> {
    let Json(Texts { texts }) = body.map_err(|e| error(e.status(), e.body_text()))?;
    if texts.len() > MAX_TEXTS {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!("{} texts; at most {MAX_TEXTS} at once", texts.len()),
        ));
    }
    let html = to_html_all(texts.iter().map(String::as_str));
    Ok(Json(Html { html }).into_response())
}

/// The route.
pub fn routes() -> Router {
    Router::new().route("/markdown", post(render))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_kept_as_markup() {
        let html = to_html(
            "# Plan\n\n**bold** and *soft* and `code`\n\n- [x] done\n- [ ] next\n\n\
             | a | b |\n|---|---|\n| 1 | 2 |\n\n```\nfn main() {}\n```\n\n> quoted",
        );
        for kept in [
            "<h1>Plan</h1>",
            "<strong>bold</strong>",
            "<em>soft</em>",
            "<code>code</code>",
            "<table>",
            "<td>1</td>",
            "<pre><code>fn main() {}",
            "<blockquote>",
            "type=\"checkbox\"",
        ] {
            assert!(html.contains(kept), "{kept} missing from {html}");
        }
    }

    #[test]
    fn links_open_elsewhere_and_only_with_safe_schemes() {
        let html = to_html("[docs](https://example.com/a?b=1) [mail](mailto:a@example.com)");
        assert!(
            html.contains("href=\"https://example.com/a?b=1\""),
            "{html}"
        );
        assert!(
            html.contains("rel=\"noopener noreferrer nofollow\""),
            "{html}"
        );
        assert!(html.contains("target=\"_blank\""), "{html}");
        assert!(html.contains("href=\"mailto:a@example.com\""), "{html}");
        for bad in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x](  javascript:alert(1))",
            "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
            "[x](vbscript:msgbox(1))",
            "[x](/threads/t/close)",
            "<a href=\"javascript:alert(1)\">x</a>",
        ] {
            let html = to_html(bad);
            assert!(!html.contains("href"), "{bad} kept a link: {html}");
        }
    }

    #[test]
    fn raw_html_that_could_run_or_reach_out_is_removed() {
        for (bad, gone) in [
            ("<script>alert(1)</script>", "<script"),
            ("<img src=x onerror=alert(1)>", "onerror"),
            ("<svg onload=alert(1)></svg>", "onload"),
            ("<iframe src=\"https://evil.example\"></iframe>", "<iframe"),
            ("<style>body{display:none}</style>", "<style"),
            (
                "<form action=\"https://evil.example\"><input></form>",
                "<form",
            ),
            ("<div style=\"position:fixed\">x</div>", "style="),
            ("<b onclick=\"alert(1)\">x</b>", "onclick"),
            ("<object data=\"x\"></object>", "<object"),
            (
                "<math><mi xlink:href=\"javascript:alert(1)\">x</mi></math>",
                "javascript",
            ),
        ] {
            let html = to_html(bad);
            assert!(!html.to_lowercase().contains(gone), "{bad}: {html}");
        }
        // Harmless raw HTML stays.
        assert!(to_html("<b>bold</b>").contains("<b>bold</b>"));
    }

    #[test]
    fn images_show_inline_data_only_and_never_load_from_elsewhere() {
        let inline = to_html("![dot](data:image/png;base64,iVBORw0KGgo=)");
        assert!(
            inline.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""),
            "{inline}"
        );
        let remote = to_html("![tracker](https://evil.example/pixel.png)");
        assert!(!remote.contains("src="), "{remote}");
        assert!(remote.contains("alt=\"tracker\""), "{remote}");
        let svg = to_html("![x](data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=)");
        assert!(!svg.contains("src="), "{svg}");
    }

    #[test]
    fn urls_are_judged_as_a_browser_reads_them() {
        // A browser's URL parser drops leading and trailing control characters and spaces, and
        // ASCII tabs and newlines anywhere, before it reads the scheme.
        for bad in [
            "<a href=\"da&#x09;ta:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==\">x</a>",
            "<a href=\"&#x01;data:text/html,hi\">x</a>",
            "<a href=\"java&#x0A;script:alert(1)\">x</a>",
            "<a href=\"&#x20;&#x1F;javascript:alert(1)\">x</a>",
            "<a href=\"data:text/html,hi&#x00;\">x</a>",
            "<img src=\"da&#x0D;ta:image/svg+xml;base64,PHN2Zz48L3N2Zz4=\">",
            "<img src=\"&#x01;https://evil.example/pixel.png\">",
        ] {
            let html = to_html(bad);
            assert!(
                !html.contains("href=") && !html.contains("src="),
                "{bad} kept a URL: {html}"
            );
        }
        // Every attribute that holds a URL is judged, not only links' and images'.
        for bad in [
            "<blockquote cite=\"javascript:alert(1)\">q</blockquote>",
            "<q cite=\"data:text/html,hi\">q</q>",
            "<del cite=\"vbscript:x\">d</del>",
            "<ins cite=\"ja&#x09;vascript:alert(1)\">i</ins>",
            "<blockquote cite=\"/threads/t/close\">q</blockquote>",
        ] {
            let html = to_html(bad);
            assert!(!html.contains("cite="), "{bad} kept a URL: {html}");
        }
        // What is kept is what the browser will read.
        let html = to_html("<a href=\"https://exa&#x09;mple.com/a\">x</a>");
        assert!(html.contains("href=\"https://example.com/a\""), "{html}");
        let html = to_html("<blockquote cite=\"https://example.com/q\">q</blockquote>");
        assert!(html.contains("cite=\"https://example.com/q\""), "{html}");
        let html = to_html("<img src=\" data:image/png;base64,iVBORw0KGgo=\">");
        assert!(
            html.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""),
            "{html}"
        );
    }
}
