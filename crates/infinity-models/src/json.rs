//! JSON request bodies written by hand into one buffer: the structure as literal pieces, strings
//! escaped eight bytes at a time.
//!
//! A conversation is mostly text, and serde_json escapes text a byte at a time: written from
//! borrowed `#[derive(Serialize)]` structs with `serde_json::to_vec`, a 1,000-entry Anthropic
//! body took 2.1 M instructions, 46 % of them in that loop; written here, 0.69 M
//! (docs/benchmarks.md, "Model adapters"). Clean runs of text are found a word at a time and
//! copied whole; strings come out byte for byte as serde_json writes them.

use std::fmt::Write;

use serde_json::Value;

/// A JSON document being written.
#[derive(Debug, Default)]
pub(crate) struct JsonBuf {
    json: String,
}

impl JsonBuf {
    /// An empty buffer with room for `bytes`.
    pub(crate) fn with_capacity(bytes: usize) -> Self {
        Self {
            json: String::with_capacity(bytes),
        }
    }

    /// Appends `json` as it is: punctuation, keys and literals the caller knows are valid JSON
    /// where they land.
    pub(crate) fn raw(&mut self, json: &str) {
        self.json.push_str(json);
    }

    /// Appends `text` as a JSON string.
    pub(crate) fn string(&mut self, text: &str) {
        self.json.reserve(text.len() + 2);
        self.json.push('"');
        if needs_escape(text.as_bytes()) {
            self.escaped(text);
        } else {
            self.json.push_str(text);
        }
        self.json.push('"');
    }

    /// Appends `items` as a JSON array, each written by `write`.
    pub(crate) fn array<T>(
        &mut self,
        items: impl IntoIterator<Item = T>,
        mut write: impl FnMut(&mut Self, T),
    ) {
        self.raw("[");
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.raw(",");
            }
            write(self, item);
        }
        self.raw("]");
    }

    /// Appends a number.
    pub(crate) fn number(&mut self, n: u32) {
        self.raw(itoa::Buffer::new().format(n));
    }

    /// Appends `value` (a tool's schema or arguments).
    pub(crate) fn value(&mut self, value: &Value) {
        match value {
            Value::Null => self.raw("null"),
            Value::Bool(true) => self.raw("true"),
            Value::Bool(false) => self.raw("false"),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    self.raw(itoa::Buffer::new().format(u));
                } else if let Some(i) = n.as_i64() {
                    self.raw(itoa::Buffer::new().format(i));
                } else {
                    // A float, as serde_json writes it; writing to a `String` cannot fail.
                    _ = write!(self.json, "{n}");
                }
            }
            Value::String(s) => self.string(s),
            Value::Array(items) => self.array(items, Self::value),
            Value::Object(map) => {
                self.raw("{");
                for (i, (key, value)) in map.iter().enumerate() {
                    if i > 0 {
                        self.raw(",");
                    }
                    self.string(key);
                    self.raw(":");
                    self.value(value);
                }
                self.raw("}");
            }
        }
    }

    /// The document so far.
    pub(crate) fn as_str(&self) -> &str {
        &self.json
    }

    /// Empties the buffer, keeping its room.
    pub(crate) fn clear(&mut self) {
        self.json.clear();
    }

    /// The document.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.json.into_bytes()
    }

    /// `text` with what needs escaping escaped: clean words are skipped whole.
    fn escaped(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut copied = 0; // text[..copied] is written
        let mut at = 0;
        while at < bytes.len() {
            if bytes
                .get(at..at + 8)
                .is_some_and(|word| !needs_escape(word))
            {
                at += 8;
                continue;
            }
            let byte = bytes[at];
            if byte < 0x20 || byte == b'"' || byte == b'\\' {
                // An ASCII byte: `at` is a character boundary.
                self.json.push_str(&text[copied..at]);
                self.escape(byte);
                copied = at + 1;
            }
            at += 1;
        }
        self.json.push_str(&text[copied..]);
    }

    /// The escape of a byte that needs one, as serde_json writes it.
    fn escape(&mut self, byte: u8) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let short = match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'\n' => 'n',
            b'\r' => 'r',
            b'\t' => 't',
            0x08 => 'b',
            0x0c => 'f',
            _ => {
                self.json.push_str("\\u00");
                self.json.push(char::from(HEX[usize::from(byte >> 4)]));
                self.json.push(char::from(HEX[usize::from(byte & 0xf)]));
                return;
            }
        };
        self.json.push('\\');
        self.json.push(short);
    }
}

/// True when any byte of `bytes` is a quote, a backslash or a control character (below 0x20);
/// checked eight bytes at a time.
fn needs_escape(bytes: &[u8]) -> bool {
    match bytes.len().checked_sub(8) {
        // Whole words, then the last eight bytes (which overlap the last whole word).
        Some(last) => {
            bytes.chunks_exact(8).any(word_needs_escape) || word_needs_escape(&bytes[last..])
        }
        None => bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\'),
    }
}

/// [`needs_escape`] for one word of eight bytes.
fn word_needs_escape(word: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let Ok(word) = <[u8; 8]>::try_from(word).map(u64::from_le_bytes) else {
        return true;
    };
    // `has_zero` sets the high bit of each byte that is zero, and of no byte when none is;
    // `below_space` likewise for bytes below 0x20 (`!word` rules out 0x80 and above: the rest
    // of UTF-8).
    let has_zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGHS;
    let quote = has_zero(word ^ (ONES * u64::from(b'"')));
    let backslash = has_zero(word ^ (ONES * u64::from(b'\\')));
    below_space | quote | backslash != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn written(text: &str) -> String {
        let mut json = JsonBuf::default();
        json.string(text);
        String::from_utf8(json.into_bytes()).unwrap()
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        for text in [
            "",
            "plain",
            "exactly8",
            "a \"quoted\" word and a back\\slash, past eight bytes",
            "\n\r\t\u{8}\u{c}\u{0}\u{1f}\u{7f} and Zürich ☀ 𝄞",
            "\"\"\"\"\"\"\"\"\"",
        ] {
            assert_eq!(
                written(text),
                serde_json::to_string(text).unwrap(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        let value = serde_json::json!({
            "type": "object",
            "n": [0, -2, 2.5, 1e300, u64::MAX, null, true, false],
            "nested": {"a \"key\"\n": {}, "empty": [], "s": "x\u{1}"}
        });
        let mut json = JsonBuf::default();
        json.value(&value);
        assert_eq!(json.into_bytes(), serde_json::to_vec(&value).unwrap());
    }

    #[test]
    fn numbers() {
        for n in [0, 7, 10, 16384, u32::MAX] {
            let mut json = JsonBuf::default();
            json.number(n);
            assert_eq!(json.into_bytes(), n.to_string().into_bytes());
        }
    }

    proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(text in any::<String>()) {
            prop_assert_eq!(written(&text), serde_json::to_string(&text).unwrap());
        }

        #[test]
        fn escapes_anywhere_in_a_word_are_found(
            prefix in "[a-z]{0,17}",
            special in prop::sample::select(vec!['"', '\\', '\n', '\u{0}', '\u{1f}', '\u{7f}', 'é']),
            suffix in "[a-z]{0,17}",
        ) {
            let text = format!("{prefix}{special}{suffix}");
            prop_assert_eq!(written(&text), serde_json::to_string(&text).unwrap());
        }
    }
}
