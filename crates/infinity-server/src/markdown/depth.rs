//! How deep a text's HTML may nest before the sanitizer parses it.
//!
//! The sanitizer's HTML parser (html5ever, inside ammonia) looks through the elements open
//! around each tag it reads, so its time grows with the square of the nesting: `> ` 32,000
//! times (64 kB, as many nested quotes) took 10 s, four times longer for each doubling, and
//! `<div>` or `1. ` repeated alike. The Markdown parser itself takes linear time. So
//! [`bounded`] keeps the HTML it writes at most [`MAX_DEPTH`] levels deep, counting Markdown's
//! containers (quotes, lists, emphasis, ...) and the raw HTML elements a text opens:
//!
//! - a Markdown container deeper than that is flattened: its content stays, its markup goes;
//! - a raw HTML start tag that would open an element deeper than that is shown as text (its
//!   `<` escaped).
//!
//! Raw HTML is counted without building its tree: a start tag opens an element (but for void
//! ones, `<br>`, `<img>`, ...), an end tag closes the innermost open element only when it
//! names that one, and starting a list item, paragraph or table cell closes an innermost one of
//! its kind. The parser closes at least as much as that, and each tag adds at most a few
//! levels (a table's implied body and row), so the depth it builds stays within a small
//! multiple of the count, whatever the HTML.

use pulldown_cmark::{CowStr, Event, Tag, TagEnd};

/// The deepest nesting a text keeps (Markdown containers and raw HTML elements together).
pub const MAX_DEPTH: usize = 32;

/// Elements that never hold others.
const VOID: [&str; 14] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// What starting an element of a name closes first, innermost first, each only if it is the
/// innermost element open then: a list item or paragraph another of its kind; a table cell,
/// row or section the cell, row or section it follows.
fn closed_by(name: &str) -> &'static [&'static [&'static str]] {
    const CELL: &[&str] = &["td", "th"];
    match name {
        "li" => &[&["li"]],
        "p" => &[&["p"]],
        "dt" | "dd" => &[&["dt", "dd"]],
        "option" => &[&["option"]],
        "td" | "th" => &[CELL],
        "tr" => &[CELL, &["tr"]],
        "thead" | "tbody" | "tfoot" => &[CELL, &["tr"], &["thead", "tbody", "tfoot"]],
        _ => &[],
    }
}

/// `events` (one text's) with their nesting kept at most [`MAX_DEPTH`] deep (see the module
/// docs).
pub fn bounded<'a>(events: impl Iterator<Item = Event<'a>>) -> impl Iterator<Item = Event<'a>> {
    let mut depth = Depth::default();
    events.filter_map(move |event| depth.pass(event))
}

/// The nesting so far.
#[derive(Debug, Default)]
struct Depth {
    /// For each Markdown container open, whether its markup was kept.
    containers: Vec<bool>,
    /// How many of those were kept.
    kept: usize,
    /// The raw HTML elements open, innermost last (lowercase names).
    raw: Vec<String>,
}

impl Depth {
    fn full(&self) -> bool {
        self.kept + self.raw.len() >= MAX_DEPTH
    }

    /// `event` as it is written: `None` for a container's start or end dropped.
    fn pass<'a>(&mut self, event: Event<'a>) -> Option<Event<'a>> {
        match event {
            // An HTML block writes no element of its own: its lines are raw HTML, counted below.
            Event::Start(Tag::HtmlBlock) | Event::End(TagEnd::HtmlBlock) => Some(event),
            Event::Start(tag) => {
                // Inside a flattened container, everything is flattened.
                let keep = !self.full() && self.containers.last() != Some(&false);
                self.containers.push(keep);
                self.kept += usize::from(keep);
                keep.then_some(Event::Start(tag))
            }
            Event::End(tag) => {
                let keep = self.containers.pop().unwrap_or(true);
                self.kept = self.kept.saturating_sub(usize::from(keep));
                keep.then_some(Event::End(tag))
            }
            Event::Html(html) => Some(Event::Html(self.raw_html(html))),
            Event::InlineHtml(html) => Some(Event::InlineHtml(self.raw_html(html))),
            other => Some(other),
        }
    }

    /// `html` with the `<` of each start tag that would open an element too deep escaped.
    fn raw_html<'a>(&mut self, html: CowStr<'a>) -> CowStr<'a> {
        let mut escaped = String::new();
        let mut copied = 0;
        let mut at = 0;
        while let Some(found) = html[at..].find('<') {
            let open = at + found;
            let rest = &html[open + 1..];
            let closing = rest.starts_with('/');
            let name_at = usize::from(closing);
            // A tag's name runs to a space, `/` or `>` (`<a<b` is one tag, named `a<b`).
            let name_len = rest[name_at..]
                .find(|c: char| c.is_ascii_whitespace() || c == '/' || c == '>')
                .unwrap_or(rest.len() - name_at);
            let name = &rest[name_at..name_at + name_len];
            at = open + 1 + name_at + name_len;
            if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
                continue;
            }
            let name = name.to_ascii_lowercase();
            if closing {
                if self.raw.last() == Some(&name) {
                    self.raw.pop();
                }
            } else if !self.open(name) {
                escaped.push_str(&html[copied..open]);
                escaped.push_str("&lt;");
                copied = open + 1;
            }
        }
        if copied == 0 {
            return html;
        }
        escaped.push_str(&html[copied..]);
        CowStr::from(escaped)
    }

    /// Counts a raw start tag of `name`; false when it would open an element too deep.
    fn open(&mut self, name: String) -> bool {
        if VOID.contains(&name.as_str()) {
            return true;
        }
        let closes = self.closes(&name);
        if self.kept + self.raw.len() - closes >= MAX_DEPTH {
            return false;
        }
        self.raw.truncate(self.raw.len() - closes);
        self.raw.push(name);
        true
    }

    /// How many of the innermost raw elements starting `name` closes.
    fn closes(&self, name: &str) -> usize {
        let mut closed = 0;
        for kinds in closed_by(name) {
            let innermost = self.raw.len().checked_sub(closed + 1);
            if innermost.is_some_and(|i| kinds.contains(&self.raw[i].as_str())) {
                closed += 1;
            }
        }
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pulldown_cmark::{html, Parser};

    fn rendered(text: &str) -> String {
        let mut out = String::new();
        html::push_html(&mut out, bounded(Parser::new(text)));
        out
    }

    #[test]
    fn markdown_deeper_than_the_bound_is_flattened_and_keeps_its_text() {
        let html = rendered(&format!("{}deep", "> ".repeat(1000)));
        assert_eq!(html.matches("<blockquote>").count(), MAX_DEPTH);
        assert_eq!(
            html.matches("<blockquote>").count(),
            html.matches("</blockquote>").count()
        );
        assert!(html.contains("deep"), "{html}");
        let shallow = rendered("> > quoted\n\n- a\n  - b");
        assert_eq!(shallow.matches("<blockquote>").count(), 2);
        assert!(shallow.contains("<li>b</li>"), "{shallow}");
    }

    #[test]
    fn raw_html_deeper_than_the_bound_is_shown_as_text() {
        let html = rendered(&"<div>".repeat(100));
        assert_eq!(html.matches("<div>").count(), MAX_DEPTH);
        assert_eq!(html.matches("&lt;div>").count(), 100 - MAX_DEPTH);
        // Closed elements do not count, nor void ones, nor a list item or cell another closes.
        let flat = "<div>x</div>".repeat(100) + &"<br>".repeat(100);
        assert_eq!(rendered(&flat).matches("&lt;").count(), 0);
        let items = format!("<ul>{}</ul>", "<li>x".repeat(100));
        assert_eq!(rendered(&items).matches("&lt;").count(), 0);
        let table = format!("<table>{}</table>", "<tr><td>a<td>b".repeat(100));
        assert_eq!(rendered(&table).matches("&lt;").count(), 0);
        // An end tag that does not close the innermost element closes nothing.
        let misnested = "<span><div></span>".repeat(100);
        assert!(rendered(&misnested).matches("<div>").count() < MAX_DEPTH);
        // Markdown containers and raw HTML count together.
        let both = format!("{}{}", "> ".repeat(20), "<div>".repeat(20));
        let html = rendered(&both);
        assert!(html.matches("<div>").count() <= MAX_DEPTH - 20, "{html}");
    }

    #[test]
    fn a_long_run_of_tag_openings_is_read_once() {
        // `<a<a<a...` is one tag; reading it must not start again at each `<`. (The first
        // line starts an HTML block, so the second reaches the count as raw HTML.)
        let text = format!("<div\n{}", "<a".repeat(50_000));
        let started = std::time::Instant::now();
        let _ = rendered(&text);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
