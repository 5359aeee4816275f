//! What the sanitizer keeps of an attribute: URLs judged as the browser will read them.
//!
//! ammonia checks the scheme of the URL attributes it knows (`href`, `src`, ...) with the `url`
//! crate, and leaves others (`cite`) alone; a browser, reading `href="da&#x09;ta:..."` or
//! `href="&#x01;data:..."`, drops the tab and the leading control character and follows a
//! `data:` link. So every attribute that may hold a URL is judged here, on the value a browser's
//! URL parser starts from (WHATWG URL: leading and trailing C0 controls and spaces removed, ASCII
//! tabs and newlines removed anywhere), and what is kept is that value.

use std::borrow::Cow;

/// The schemes a link (or a quote's source) may have.
const SCHEMES: [&str; 3] = ["http", "https", "mailto"];

/// The image types shown inline (from `data:` URLs, which the page's policy allows); others are
/// dropped, and an image from elsewhere keeps only its alt text (no request leaves the page).
const INLINE_IMAGES: [&str; 4] = [
    "data:image/png;base64,",
    "data:image/jpeg;base64,",
    "data:image/gif;base64,",
    "data:image/webp;base64,",
];

/// Attributes whose value is a URL (or, for `srcset` and `ping`, several), in HTML, SVG and
/// MathML. The sanitizer allows few of them; judging them all keeps that true if it allows more.
const URL_ATTRIBUTES: [&str; 16] = [
    "href",
    "src",
    "cite",
    "action",
    "formaction",
    "poster",
    "background",
    "longdesc",
    "xlink:href",
    "srcset",
    "ping",
    "data",
    "codebase",
    "manifest",
    "usemap",
    "icon",
];

/// What the sanitizer keeps of an attribute it allows: a URL only with a scheme of [`SCHEMES`]
/// (an image's only as an inline image of [`INLINE_IMAGES`]), as the browser reads it;
/// task-list checkboxes only.
pub fn keep<'v>(element: &str, attribute: &str, value: &'v str) -> Option<Cow<'v, str>> {
    if URL_ATTRIBUTES.contains(&attribute) {
        return judged_url(element, attribute, value);
    }
    match (element, attribute) {
        ("input", "type") => (value == "checkbox").then_some(Cow::Borrowed(value)),
        _ => Some(Cow::Borrowed(value)),
    }
}

fn judged_url<'v>(element: &str, attribute: &str, value: &'v str) -> Option<Cow<'v, str>> {
    if matches!(attribute, "srcset" | "ping") {
        // Lists of URLs: nothing the page renders needs them.
        return None;
    }
    let url = as_parsed(value);
    let scheme = scheme(&url)?;
    let image = element == "img" && attribute == "src";
    let allowed = if image {
        INLINE_IMAGES.iter().any(|prefix| url.starts_with(prefix))
    } else {
        SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme))
    };
    allowed.then_some(url)
}

/// `value` as a browser's URL parser starts from it.
fn as_parsed(value: &str) -> Cow<'_, str> {
    let trimmed = value.trim_matches(|c: char| c <= ' ');
    if trimmed.contains(['\t', '\n', '\r']) {
        Cow::Owned(trimmed.replace(['\t', '\n', '\r'], ""))
    } else {
        Cow::Borrowed(trimmed)
    }
}

/// The scheme `url` names (an ASCII letter, then letters, digits, `+`, `-` or `.`, then `:`);
/// `None` for a relative URL.
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_read_as_a_browser_reads_it() {
        assert_eq!(
            as_parsed(" \u{1}\u{1f}java\tscr\nipt:x \u{0} "),
            "javascript:x"
        );
        assert_eq!(
            as_parsed("https://example.com/a b"),
            "https://example.com/a b"
        );
        assert_eq!(scheme("JavaScript:x"), Some("JavaScript"));
        assert_eq!(scheme("web+app.x-1:y"), Some("web+app.x-1"));
        assert_eq!(scheme("/a:b"), None);
        assert_eq!(scheme("1a:b"), None);
        assert_eq!(scheme("a b:c"), None);
        assert_eq!(scheme("relative"), None);
    }

    #[test]
    fn only_safe_schemes_are_kept_in_any_url_attribute() {
        for attribute in ["href", "cite", "action", "formaction", "poster", "longdesc"] {
            assert_eq!(
                keep("a", attribute, "\thttps://example.com").as_deref(),
                Some("https://example.com"),
                "{attribute}"
            );
            assert!(keep("a", attribute, "MAILTO:a@example.com").is_some());
            for bad in [
                "javascript:x",
                "data:text/html,x",
                "vbscript:x",
                "/relative",
                "x",
            ] {
                assert_eq!(keep("a", attribute, bad), None, "{attribute}={bad}");
            }
        }
        assert_eq!(keep("img", "srcset", "https://example.com/a.png 1x"), None);
        assert_eq!(keep("img", "src", "https://example.com/a.png"), None);
        assert_eq!(
            keep("img", "src", "data:image/png;base64,AA==").as_deref(),
            Some("data:image/png;base64,AA==")
        );
        assert_eq!(keep("a", "href", "data:image/png;base64,AA=="), None);
        assert_eq!(keep("input", "type", "text"), None);
        assert_eq!(
            keep("b", "title", "javascript:x").as_deref(),
            Some("javascript:x")
        );
    }
}
