//! A thread's `events.jsonl`: the output events it showed, numbered, appended by each commit
//! and read by clients that resume a stream.
//!
//! Clients mostly resume near the end (the page opens a conversation after its history's last
//! event), so the file is searched from its end backwards, a block at a time, for the first
//! event to send: what a resume reads depends on what it sends, not on the thread's life.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::io::{corrupt, io_err};
use crate::effect::OutputEvent;
use crate::store::StoreError;

/// The file's name in a thread's folder.
pub(super) const FILE: &str = "events.jsonl";

/// How much of the file one step of the backward search reads.
const BLOCK: u64 = 64 * 1024;

/// The number of an event's line, read without the rest of it.
#[derive(serde::Deserialize)]
struct Numbered {
    seq: Option<u64>,
}

/// The events numbered after `after` among the first `committed_len` bytes of the thread's
/// file in `dir`, at most `limit`.
pub(super) fn after(
    dir: &Path,
    committed_len: u64,
    after: u64,
    limit: usize,
) -> Result<Vec<OutputEvent>, StoreError> {
    after_in_blocks(dir, committed_len, after, limit, BLOCK)
}

fn after_in_blocks(
    dir: &Path,
    committed_len: u64,
    after: u64,
    limit: usize,
    block: u64,
) -> Result<Vec<OutputEvent>, StoreError> {
    let path = dir.join(FILE);
    if committed_len == 0 {
        return Ok(Vec::new());
    }
    let mut file = File::open(&path).map_err(|e| io_err(&path, e))?;
    let len = file.metadata().map_err(|e| io_err(&path, e))?.len();
    if len < committed_len {
        return Err(corrupt(
            &path,
            format!("holds {len} bytes, fewer than the committed {committed_len}"),
        ));
    }
    // Backwards from the end, a block at a time (kept in order, copied once at the end), until
    // a whole line numbered at or before `after` is seen, or the start: the events to send
    // begin after it.
    let mut blocks: VecDeque<Vec<u8>> = VecDeque::new();
    let mut start = committed_len;
    loop {
        let from = start.saturating_sub(block);
        let mut chunk = vec![0; usize::try_from(start - from).unwrap_or(0)];
        file.seek(SeekFrom::Start(from))
            .map_err(|e| io_err(&path, e))?;
        file.read_exact(&mut chunk).map_err(|e| io_err(&path, e))?;
        blocks.push_front(chunk);
        start = from;
        let reached = match first_whole_line(&blocks, start == 0) {
            Some(line) => serde_json::from_slice::<Numbered>(&line)
                .map_err(|e| corrupt(&path, e))?
                .seq
                .is_some_and(|seq| seq <= after),
            // No line begins in what was read yet.
            None => false,
        };
        if reached || start == 0 {
            let window: Vec<u8> = blocks.into_iter().flatten().collect();
            let whole = match (start, window.iter().position(|b| *b == b'\n')) {
                (0, _) => &window[..],
                (_, Some(end)) => &window[end + 1..],
                (_, None) => &[][..],
            };
            let mut found = Vec::new();
            for line in whole.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                if found.len() == limit {
                    break;
                }
                let numbered: Numbered =
                    serde_json::from_slice(line).map_err(|e| corrupt(&path, e))?;
                if numbered.seq.is_some_and(|seq| seq > after) {
                    found.push(serde_json::from_slice(line).map_err(|e| corrupt(&path, e))?);
                }
            }
            return Ok(found);
        }
    }
}

/// The first line that begins in `blocks` (read in order, from a place in the file that is the
/// start of the file when `at_start`, else maybe the middle of a line), without its newline;
/// `None` when no line begins there yet.
fn first_whole_line(blocks: &VecDeque<Vec<u8>>, at_start: bool) -> Option<Vec<u8>> {
    let mut bytes = blocks.iter().flatten().copied();
    if !at_start {
        bytes.position(|b| b == b'\n')?;
    }
    let line: Vec<u8> = bytes.take_while(|b| *b != b'\n').collect();
    (!line.is_empty()).then_some(line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effect::OutputKind;
    use crate::ids::ThreadId;

    #[test]
    fn a_resume_finds_its_events_from_the_end_whatever_the_block_size() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        for seq in 1..=300u64 {
            let event = OutputEvent {
                seq: Some(seq),
                ..OutputEvent::new(
                    ThreadId::new("t").unwrap(),
                    jiff::Timestamp::UNIX_EPOCH,
                    OutputKind::AssistantText {
                        text: "word ".repeat(seq as usize % 7),
                    },
                )
            };
            serde_json::to_writer(&mut bytes, &event).unwrap();
            bytes.push(b'\n');
        }
        let committed = bytes.len() as u64;
        // An unfinished commit's bytes after the committed length are never read.
        bytes.extend_from_slice(b"{\"seq\":301,\"half");
        std::fs::write(dir.path().join(FILE), &bytes).unwrap();
        for block in [13, 512, BLOCK] {
            for (after, limit, want) in [
                (0, 1000, 1..301),
                (0, 5, 1..6),
                (150, 3, 151..154),
                (297, 1000, 298..301),
                (300, 1000, 301..301),
            ] {
                let got: Vec<u64> = after_in_blocks(dir.path(), committed, after, limit, block)
                    .unwrap()
                    .iter()
                    .map(|e| e.seq.unwrap())
                    .collect();
                assert_eq!(
                    got,
                    want.collect::<Vec<_>>(),
                    "after {after}, limit {limit}, blocks of {block}"
                );
            }
        }
        assert!(after(dir.path(), 0, 0, 10).unwrap().is_empty());
    }
}
