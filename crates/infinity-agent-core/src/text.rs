//! Text shown to people that others wrote (a model, a tool server, a remote's name): characters
//! that would act on a terminal or a page instead of being read are shown in a visible form.

use std::borrow::Cow;

/// True when `text` says nothing: empty, or only whitespace and [`is_hidden`] characters. A
/// person's message like that is refused (a model is never asked to answer nothing, and the
/// providers refuse an empty text block).
pub fn is_blank(text: &str) -> bool {
    text.chars()
        .all(|c| c.is_whitespace() || is_hidden(c) || c == '\u{200B}' || c == '\u{FEFF}')
}

/// A JSON Schema `pattern` (ECMA 262) that a text matches when it is not [`is_blank`]: it has a
/// character that is neither whitespace (Unicode `White_Space`), nor [`is_hidden`], nor U+200B or
/// U+FEFF. The API's document gives it to the texts the server refuses blank.
pub const NOT_BLANK: &str = concat!(
    "[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200b\\u200e\\u200f",
    "\\u2028-\\u202f\\u205f\\u2066-\\u2069\\u3000\\ufeff]",
);

/// True for the characters [`visible`] rewrites: C0 controls other than newline and tab, DEL,
/// C1 controls, and the Unicode marks that reorder the text around them (bidi overrides,
/// embeddings, isolates and the LRM/RLM marks).
pub fn is_hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every [`is_hidden`] character in visible form: `^[` for escape (caret notation
/// for C0), `^?` for DEL, `<U+202E>` for the others. A carriage return or an escape sequence then
/// cannot overwrite what a person reads, nor reversed text hide it. The result has only
/// printable characters, newlines and tabs, so applying it twice changes nothing more.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !is_hidden(c) => out.push(c),
            '\u{7f}' => out.push_str("^?"),
            c if u32::from(c) < 0x20 => {
                out.push('^');
                // C0 in caret notation: 0x1B is `^[`, 0x0D is `^M`.
                out.push(char::from_u32(u32::from(c) + 0x40).unwrap_or('?'));
            }
            c => out.push_str(&format!("<U+{:04X}>", u32::from(c))),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_of_a_text_that_is_not_blank_names_every_blank_character() {
        // The pattern's class read back (`\\uXXXX` and `\\uXXXX-\\uXXXX`), then every character
        // checked against `is_blank`.
        let mut class = NOT_BLANK
            .strip_prefix("[^")
            .and_then(|c| c.strip_suffix(']'))
            .unwrap();
        let point = |class: &mut &str| {
            let hex = class.strip_prefix("\\u").unwrap();
            *class = &hex[4..];
            u32::from_str_radix(&hex[..4], 16).unwrap()
        };
        let mut ranges = Vec::new();
        while !class.is_empty() {
            let low = point(&mut class);
            let high = match class.strip_prefix('-') {
                Some(rest) => {
                    class = rest;
                    point(&mut class)
                }
                None => low,
            };
            ranges.push(low..=high);
        }
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let listed = ranges.iter().any(|r| r.contains(&u32::from(c)));
            assert_eq!(listed, is_blank(&c.to_string()), "U+{:04X}", u32::from(c));
        }
    }

    #[test]
    fn hidden_characters_are_shown_and_the_rest_is_left_alone() {
        let hostile = "echo spoofed > F \u{1b}[2K\rgit status\u{7f}\u{9b}\u{202e}cod.exe";
        let shown = visible(hostile);
        assert_eq!(
            shown,
            "echo spoofed > F ^[[2K^Mgit status^?<U+009B><U+202E>cod.exe"
        );
        assert!(!shown.chars().any(is_hidden));
        assert_eq!(visible(&shown), shown, "a second pass changes nothing");
        let plain = "two\nlines\twith a tab — ok";
        assert!(matches!(visible(plain), Cow::Borrowed(_)));
    }
}
