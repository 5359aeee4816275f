//! JSON values cut down to fit a size: an output event for a queue with a message limit, a
//! call's arguments kept in the thread record as a preview.

use serde_json::Value;

/// Strings are never cut shorter than this many bytes (plus the note).
const KEEP_AT_LEAST: usize = 64;

/// The serialized length of `value`, in bytes.
pub fn json_len(value: &Value) -> usize {
    serde_json::to_string(value).map_or(0, |s| s.len())
}

/// Cuts `value` down until its JSON is at most `max_bytes` long. The longest strings go first,
/// each cut to its head followed by `note(bytes_left_out)`; when cutting strings is not enough,
/// the largest arrays and objects are replaced by a note; when even that is not enough, the whole
/// value becomes one. Returns whether anything was cut. Keys, numbers and the shape of what stays
/// are untouched, so a reader still finds every field it knows.
pub fn shrink(value: &mut Value, max_bytes: usize, note: &dyn Fn(usize) -> String) -> bool {
    let mut size = json_len(value);
    if size <= max_bytes {
        return false;
    }
    // Strings, longest first, while one is long enough to be worth cutting.
    while size > max_bytes {
        let Some(longest) = longest_string(value) else {
            break;
        };
        let len = longest.len();
        let mark = note(0).len() + 24; // room for the note and its number
        if len <= KEEP_AT_LEAST + mark {
            break;
        }
        let excess = size - max_bytes;
        let keep = len.saturating_sub(excess + mark).max(KEEP_AT_LEAST);
        let cut = floor_char_boundary(longest, keep);
        let left_out = len - cut;
        let mut shorter = longest[..cut].to_owned();
        shorter.push_str(&note(left_out));
        *longest = shorter;
        size = json_len(value);
    }
    // Then whole arrays and objects, largest first.
    while size > max_bytes {
        let Some((container, container_len)) = largest_container(value) else {
            break;
        };
        *container = Value::String(note(container_len));
        size = json_len(value);
    }
    if size > max_bytes {
        *value = Value::String(note(size));
    }
    true
}

/// The longest string in `value` (by bytes), if any.
fn longest_string(value: &mut Value) -> Option<&mut String> {
    let mut best: Option<&mut String> = None;
    let mut stack: Vec<&mut Value> = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if best.as_ref().is_none_or(|b| s.len() > b.len()) => best = Some(s),
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
    best
}

/// The largest array or object below the top (the top itself only when it has no children worth
/// replacing), with its serialized length.
fn largest_container(value: &mut Value) -> Option<(&mut Value, usize)> {
    let mut best: Option<(&mut Value, usize)> = None;
    let mut stack: Vec<&mut Value> = match value {
        Value::Array(items) => items.iter_mut().collect(),
        Value::Object(map) => map.values_mut().collect(),
        _ => return None,
    };
    while let Some(v) = stack.pop() {
        if !matches!(v, Value::Array(_) | Value::Object(_)) {
            continue;
        }
        let len = json_len(v);
        if best.as_ref().is_none_or(|(_, b)| len > *b) {
            best = Some((v, len));
        }
    }
    best
}

fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn note(n: usize) -> String {
        format!(" [… {n} bytes left out]")
    }

    #[test]
    fn a_value_that_fits_is_left_alone() {
        let mut v = json!({"text": "short", "n": 3});
        let before = v.clone();
        assert!(!shrink(&mut v, 100, &note));
        assert_eq!(v, before);
    }

    #[test]
    fn the_longest_string_is_cut_and_says_how_much_went() {
        let mut v = json!({"type": "assistant_text", "text": "x".repeat(10_000), "id": "abc"});
        assert!(shrink(&mut v, 1_000, &note));
        assert!(json_len(&v) <= 1_000, "{}", json_len(&v));
        let text = v["text"].as_str().unwrap();
        assert!(text.starts_with("xxxx"), "{text}");
        let left_out: usize = text
            .rsplit("[… ")
            .next()
            .and_then(|t| t.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(left_out + text.find(" [").unwrap(), 10_000);
        assert_eq!(v["type"], "assistant_text");
        assert_eq!(v["id"], "abc");
    }

    #[test]
    fn strings_are_cut_on_character_boundaries() {
        let mut v = json!({"text": "é".repeat(5_000)});
        assert!(shrink(&mut v, 777, &note));
        assert!(json_len(&v) <= 777);
        assert!(v["text"].as_str().unwrap().starts_with("éé"));
    }

    #[test]
    fn many_small_values_are_replaced_by_a_note() {
        let mut v = json!({"items": (0..5_000).collect::<Vec<u32>>(), "name": "n"});
        assert!(shrink(&mut v, 500, &note));
        assert!(json_len(&v) <= 500);
        assert!(v["items"].as_str().unwrap().contains("bytes left out"));
        assert_eq!(v["name"], "n");
    }

    #[test]
    fn a_limit_below_any_shape_leaves_one_note() {
        let mut v = json!([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
        assert!(shrink(&mut v, 30, &note));
        assert!(v.is_string());
    }
}
