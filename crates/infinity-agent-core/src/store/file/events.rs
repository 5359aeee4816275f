//! A thread's `events.jsonl`: the output events it showed, numbered, appended by each commit
//! and read by clients that resume a stream.

use std::path::Path;

use super::io::{committed, read_all};
use crate::effect::OutputEvent;
use crate::store::StoreError;

/// The file's name in a thread's folder.
pub(super) const FILE: &str = "events.jsonl";

/// The events numbered after `after` among the first `committed` bytes of the thread's file in
/// `dir`, at most `limit`. The file is read from the start: it is read when a client
/// (re)connects, never by a slice.
pub(super) fn after(
    dir: &Path,
    committed_len: u64,
    after: u64,
    limit: usize,
) -> Result<Vec<OutputEvent>, StoreError> {
    let path = dir.join(FILE);
    let bytes = read_all(&path)?;
    let head = committed(&path, &bytes, committed_len)?;
    let mut found = Vec::new();
    for line in head.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        if found.len() == limit {
            break;
        }
        // Only the number first: the events before `after` are skipped unparsed.
        #[derive(serde::Deserialize)]
        struct Numbered {
            seq: Option<u64>,
        }
        let numbered: Numbered =
            serde_json::from_slice(line).map_err(|e| super::io::corrupt(&path, e))?;
        if numbered.seq.is_some_and(|seq| seq > after) {
            found.push(serde_json::from_slice(line).map_err(|e| super::io::corrupt(&path, e))?);
        }
    }
    Ok(found)
}
