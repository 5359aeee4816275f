//! The store's inbox, `DIR/inbox.jsonl`: the inputs a front door accepted, kept from the moment
//! it acknowledged them until their thread has handled them (committed them, or dropped them
//! with a reason). Without it an input acknowledged with `202` would live only in a worker's
//! queue until its slice commits, which with a real model is the whole completion.
//!
//! The file is appended: `{"add": input}` when a door accepts an input (fsynced before the door
//! answers) and `{"done": [ids]}` when their slice is over. When nothing is pending the file is
//! emptied, so it holds only the inputs in flight. On open the pending inputs are read and the
//! file is written afresh holding only them; a torn last line (a crash while appending) is one
//! that was never acknowledged, and is dropped.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::io::{io_err, json_lines, read_all, sync_dir, write_at};
use crate::ids::InputId;
use crate::input::Input;
use crate::store::StoreError;

/// A line of `inbox.jsonl`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum InboxLine {
    Add(Box<Input>),
    Done(Vec<InputId>),
}

/// The inbox as it is on disk.
#[derive(Debug)]
pub(super) struct Inbox {
    path: PathBuf,
    /// Where the next line goes.
    end: u64,
    /// Pending inputs in the order they were accepted.
    pending: BTreeMap<u64, Input>,
    /// Each pending input's place in `pending`.
    places: HashMap<InputId, u64>,
    next_place: u64,
}

impl Inbox {
    /// Reads `root/inbox.jsonl` and writes it afresh with only its pending inputs.
    pub(super) fn open(root: &Path) -> Result<Self, StoreError> {
        let mut inbox = Self::read(root)?;
        inbox.rewrite(root)?;
        Ok(inbox)
    }

    /// Reads `root/inbox.jsonl` (missing: empty) without writing.
    pub(super) fn read(root: &Path) -> Result<Self, StoreError> {
        let path = root.join("inbox.jsonl");
        let bytes = read_all(&path)?;
        let mut inbox = Self {
            path,
            end: 0,
            pending: BTreeMap::new(),
            places: HashMap::new(),
            next_place: 0,
        };
        let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let last = lines.len().saturating_sub(1);
        for (i, line) in lines.iter().enumerate() {
            if line.is_empty() {
                continue;
            }
            match serde_json::from_slice::<InboxLine>(line) {
                Ok(InboxLine::Add(input)) => inbox.insert(*input),
                Ok(InboxLine::Done(ids)) => {
                    inbox.remove(&ids);
                }
                // A crash while appending leaves a torn last line: its door never answered.
                Err(_) if i == last => {
                    tracing::warn!(path = %inbox.path.display(), "inbox: a torn last line (never acknowledged) is dropped");
                }
                Err(err) => {
                    tracing::error!(path = %inbox.path.display(), line = i + 1, %err, "inbox: a line cannot be read; it is left out");
                }
            }
        }
        Ok(inbox)
    }

    /// Writes the file afresh with the pending inputs only (a temporary file, fsync, rename).
    fn rewrite(&mut self, root: &Path) -> Result<(), StoreError> {
        let body = json_lines(
            &self.path,
            self.pending
                .values()
                .map(|input| InboxLine::Add(Box::new(input.clone()))),
        )?;
        let tmp = root.join("inbox.jsonl.tmp");
        let mut file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        file.write_all(&body).map_err(|e| io_err(&tmp, e))?;
        file.sync_data().map_err(|e| io_err(&tmp, e))?;
        fs::rename(&tmp, &self.path).map_err(|e| io_err(&tmp, e))?;
        sync_dir(root)?;
        self.end = body.len() as u64;
        Ok(())
    }

    fn insert(&mut self, input: Input) {
        if self.places.contains_key(&input.id) {
            return;
        }
        self.places.insert(input.id.clone(), self.next_place);
        self.pending.insert(self.next_place, input);
        self.next_place += 1;
    }

    /// Forgets these ids; true when any of them was pending.
    fn remove(&mut self, ids: &[InputId]) -> bool {
        let mut any = false;
        for id in ids {
            if let Some(place) = self.places.remove(id) {
                self.pending.remove(&place);
                any = true;
            }
        }
        any
    }

    /// Keeps `input` durably (returns once it is on disk). An input already pending (a sender
    /// that tried again) is kept once.
    pub(super) fn accept(&mut self, input: &Input) -> Result<(), StoreError> {
        if self.places.contains_key(&input.id) {
            return Ok(());
        }
        let line = json_lines(&self.path, [InboxLine::Add(Box::new(input.clone()))])?;
        // On failure nothing changes here, and the next write starts at the same place,
        // overwriting whatever part of the line reached the disk.
        self.end = write_at(&self.path, self.end, &line)?;
        self.insert(input.clone());
        Ok(())
    }

    /// Forgets the inputs their threads have handled. Ids that are not pending (inputs that
    /// came another way: an outbox, a timer) cost nothing.
    pub(super) fn release(&mut self, ids: &[InputId]) -> Result<(), StoreError> {
        if !self.remove(ids) {
            return Ok(());
        }
        if self.pending.is_empty() {
            self.end = write_at(&self.path, 0, &[])?;
            return Ok(());
        }
        let done: Vec<InputId> = ids.to_vec();
        let line = json_lines(&self.path, [InboxLine::Done(done)])?;
        self.end = write_at(&self.path, self.end, &line)?;
        Ok(())
    }

    /// The pending inputs, oldest first.
    pub(super) fn pending(&self) -> Vec<Input> {
        self.pending.values().cloned().collect()
    }
}
