//! A conversation's notes (the `memory` tools), kept on its root thread's record, and the rules a
//! write must follow wherever it comes from (a tool call, or a child's `memory_write` input).

use std::collections::BTreeMap;

/// A conversation's notes, by key.
pub type Memory = BTreeMap<String, String>;

/// The longest key, in characters.
pub const MAX_KEY_CHARS: usize = 100;
/// The longest value, in characters.
pub const MAX_VALUE_CHARS: usize = 10_000;
/// The most keys.
pub const MAX_KEYS: usize = 200;

/// Why a note was not stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// The key is empty or too long.
    #[error("a key must be 1 to {MAX_KEY_CHARS} characters")]
    BadKey,
    /// The value is too long.
    #[error("the value is {chars} characters; the most a note holds is {MAX_VALUE_CHARS}")]
    ValueTooLong {
        /// Its length.
        chars: usize,
    },
    /// A new key would pass [`MAX_KEYS`].
    #[error("memory holds {MAX_KEYS} notes already; overwrite one or store less")]
    Full,
}

/// Stores `value` under `key`, or says why not.
pub fn write(memory: &mut Memory, key: &str, value: &str) -> Result<(), MemoryError> {
    if key.is_empty() || key.chars().count() > MAX_KEY_CHARS {
        return Err(MemoryError::BadKey);
    }
    let chars = value.chars().count();
    if chars > MAX_VALUE_CHARS {
        return Err(MemoryError::ValueTooLong { chars });
    }
    if !memory.contains_key(key) && memory.len() >= MAX_KEYS {
        return Err(MemoryError::Full);
    }
    memory.insert(key.to_owned(), value.to_owned());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_bounded_with_reasons() {
        let mut m = Memory::new();
        assert!(write(&mut m, "", "x")
            .unwrap_err()
            .to_string()
            .contains("1 to 100"));
        assert!(write(&mut m, "k", &"x".repeat(MAX_VALUE_CHARS + 1))
            .unwrap_err()
            .to_string()
            .contains("10001 characters"));
        for i in 0..MAX_KEYS {
            write(&mut m, &format!("k{i}"), "v").unwrap();
        }
        assert_eq!(write(&mut m, "one more", "v"), Err(MemoryError::Full));
        write(&mut m, "k0", "overwrite is fine").unwrap();
    }
}
