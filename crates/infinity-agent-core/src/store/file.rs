//! A store on disk, for the CLI: `infinity chat --store DIR` stops and starts where it left off.
//!
//! Layout, one folder per thread under `DIR/threads/<thread id>/`:
//! - `entries.jsonl`: the thread's own history entries, one JSON object per line, appended;
//! - `processed.txt`: processed input ids, one per line, appended;
//! - `state.json`: the record, the outbox, and how many bytes of the two files above are
//!   committed. It is replaced atomically (write a temporary file, then rename), and that rename
//!   is the commit point: bytes past the recorded lengths are leftovers of a commit that did not
//!   finish, ignored on load and overwritten by the next commit.
//!
//! Everything is also kept in memory, so reads never touch the disk. One process owns a store
//! folder at a time.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::memory::{ThreadData, Threads};
use super::{check_version, StoreError, ThreadStore};
use crate::commit::Commit;
use crate::effect::PendingEffect;
use crate::history::HistoryEntry;
use crate::ids::{EffectId, InputId, ThreadId};
use crate::state::ThreadRecord;

#[derive(Debug, Serialize, Deserialize)]
struct StateFile {
    record: ThreadRecord,
    #[serde(default)]
    outbox: Vec<PendingEffect>,
    entries_bytes: u64,
    processed_bytes: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Lengths {
    entries_bytes: u64,
    processed_bytes: u64,
}

#[derive(Debug, Default)]
struct Inner {
    threads: Threads,
    lengths: HashMap<ThreadId, Lengths>,
}

/// A [`ThreadStore`] in a folder. See the module docs for the layout and the commit protocol.
#[derive(Debug, Clone)]
pub struct FileStore {
    root: PathBuf,
    inner: Arc<Mutex<Inner>>,
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{}: {e}", path.display()))
}

fn corrupt(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{}: {e}", path.display()))
}

/// Reads the first `len` bytes of a file (missing file: empty).
fn read_prefix(path: &Path, len: u64) -> Result<Vec<u8>, StoreError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && len == 0 => return Ok(Vec::new()),
        Err(e) => return Err(io_err(path, e)),
    };
    let mut buf = Vec::with_capacity(len as usize);
    file.take(len)
        .read_to_end(&mut buf)
        .map_err(|e| io_err(path, e))?;
    if (buf.len() as u64) < len {
        return Err(corrupt(
            path,
            format!("shorter than the committed {len} bytes"),
        ));
    }
    Ok(buf)
}

/// Appends `data` at byte `at` (dropping anything after it) and returns the new length.
fn append_at(path: &Path, at: u64, data: &[u8]) -> Result<u64, StoreError> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    file.set_len(at).map_err(|e| io_err(path, e))?;
    file.seek(SeekFrom::Start(at))
        .map_err(|e| io_err(path, e))?;
    file.write_all(data).map_err(|e| io_err(path, e))?;
    file.sync_data().map_err(|e| io_err(path, e))?;
    Ok(at + data.len() as u64)
}

impl FileStore {
    /// Opens (or creates) a store in `root` and loads it.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        let threads_dir = root.join("threads");
        fs::create_dir_all(&threads_dir).map_err(|e| io_err(&threads_dir, e))?;
        let mut inner = Inner::default();
        let mut loaded = Vec::new();
        for dir in fs::read_dir(&threads_dir).map_err(|e| io_err(&threads_dir, e))? {
            let dir = dir.map_err(|e| io_err(&threads_dir, e))?.path();
            let state_path = dir.join("state.json");
            if !state_path.exists() {
                continue; // a thread whose first commit never finished
            }
            let state: StateFile =
                serde_json::from_slice(&fs::read(&state_path).map_err(|e| io_err(&state_path, e))?)
                    .map_err(|e| corrupt(&state_path, e))?;
            let entries_path = dir.join("entries.jsonl");
            let mut entries = Vec::new();
            for line in read_prefix(&entries_path, state.entries_bytes)?
                .lines()
                .filter(|l| !l.as_ref().is_ok_and(|l| l.is_empty()))
            {
                let line = line.map_err(|e| corrupt(&entries_path, e))?;
                let entry: HistoryEntry =
                    serde_json::from_str(&line).map_err(|e| corrupt(&entries_path, e))?;
                entries.push(Arc::new(entry));
            }
            if entries.len() as u64 != state.record.history_len {
                return Err(corrupt(
                    &entries_path,
                    format!(
                        "holds {} committed entries, the record says {}",
                        entries.len(),
                        state.record.history_len
                    ),
                ));
            }
            let processed_path = dir.join("processed.txt");
            let processed: HashSet<InputId> =
                BufReader::new(&read_prefix(&processed_path, state.processed_bytes)?[..])
                    .lines()
                    .map_while(Result::ok)
                    .filter_map(|l| InputId::new(l).ok())
                    .collect();
            inner.lengths.insert(
                state.record.id.clone(),
                Lengths {
                    entries_bytes: state.entries_bytes,
                    processed_bytes: state.processed_bytes,
                },
            );
            loaded.push(ThreadData {
                record: state.record,
                entries,
                processed,
                outbox: state.outbox,
            });
        }
        loaded.sort_by_key(|d| d.record.created_at);
        for data in loaded {
            inner.threads.order.push(data.record.id.clone());
            inner.threads.by_id.insert(data.record.id.clone(), data);
        }
        Ok(Self {
            root,
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn thread_dir(&self, thread_id: &ThreadId) -> PathBuf {
        self.root.join("threads").join(thread_id.as_str())
    }

    fn write_state(
        &self,
        thread_id: &ThreadId,
        record: &ThreadRecord,
        outbox: &[PendingEffect],
        lengths: Lengths,
    ) -> Result<(), StoreError> {
        #[derive(Serialize)]
        struct StateRef<'a> {
            record: &'a ThreadRecord,
            outbox: &'a [PendingEffect],
            entries_bytes: u64,
            processed_bytes: u64,
        }
        let dir = self.thread_dir(thread_id);
        let tmp = dir.join("state.json.tmp");
        let bytes = serde_json::to_vec(&StateRef {
            record,
            outbox,
            entries_bytes: lengths.entries_bytes,
            processed_bytes: lengths.processed_bytes,
        })
        .map_err(|e| corrupt(&tmp, e))?;
        let mut file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
        file.write_all(&bytes).map_err(|e| io_err(&tmp, e))?;
        file.sync_data().map_err(|e| io_err(&tmp, e))?;
        fs::rename(&tmp, dir.join("state.json")).map_err(|e| io_err(&tmp, e))
    }
}

#[async_trait]
impl ThreadStore for FileStore {
    async fn load_record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(self
            .lock()
            .threads
            .by_id
            .get(thread_id)
            .map(|d| d.record.clone()))
    }

    async fn load_entries(
        &self,
        thread_id: &ThreadId,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        Ok(self.lock().threads.entries(thread_id, upto))
    }

    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError> {
        Ok(self.lock().threads.processed(thread_id, input_ids))
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        let mut inner = self.lock();
        let existing = inner.threads.by_id.get(&commit.thread_id);
        check_version(commit, existing.map(|d| &d.record))?;
        let outbox: Vec<PendingEffect> = existing
            .map(|d| d.outbox.iter().chain(&commit.effects).cloned().collect())
            .unwrap_or_else(|| commit.effects.clone());
        let dir = self.thread_dir(&commit.thread_id);
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let before = inner
            .lengths
            .get(&commit.thread_id)
            .copied()
            .unwrap_or_default();
        let mut entries = Vec::new();
        for entry in &commit.new_entries {
            serde_json::to_writer(&mut entries, entry).map_err(|e| corrupt(&dir, e))?;
            entries.push(b'\n');
        }
        let mut processed = String::new();
        for id in &commit.processed_inputs {
            processed.push_str(id.as_str());
            processed.push('\n');
        }
        let after = Lengths {
            entries_bytes: append_at(&dir.join("entries.jsonl"), before.entries_bytes, &entries)?,
            processed_bytes: append_at(
                &dir.join("processed.txt"),
                before.processed_bytes,
                processed.as_bytes(),
            )?,
        };
        self.write_state(&commit.thread_id, &commit.record, &outbox, after)?;
        inner.lengths.insert(commit.thread_id.clone(), after);
        inner.threads.commit(commit)
    }

    async fn complete_effects(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        let mut inner = self.lock();
        if !inner.threads.complete(thread_id, effect_ids) {
            return Ok(());
        }
        let lengths = inner.lengths.get(thread_id).copied().unwrap_or_default();
        if let Some(data) = inner.threads.by_id.get(thread_id) {
            self.write_state(thread_id, &data.record, &data.outbox, lengths)?;
        }
        Ok(())
    }

    async fn outbox(&self) -> Result<Vec<(ThreadId, PendingEffect)>, StoreError> {
        Ok(self.lock().threads.outbox())
    }

    async fn thread_ids(&self) -> Result<Vec<ThreadId>, StoreError> {
        Ok(self.lock().threads.order.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Item;
    use crate::ids::ThreadId;
    use jiff::Timestamp;

    fn commit(version: Option<u64>, seq: u64, text: &str) -> Commit {
        let id = ThreadId::new("t1").unwrap();
        let mut record = ThreadRecord::new(id.clone(), "a", None, Timestamp::UNIX_EPOCH);
        record.version = version.map_or(1, |v| v + 1);
        record.history_len = seq + 1;
        Commit {
            thread_id: id,
            expected_version: version,
            record,
            new_entries: vec![HistoryEntry {
                seq,
                at: Timestamp::UNIX_EPOCH,
                input_id: None,
                item: Item::user(text),
            }],
            processed_inputs: vec![InputId::new(format!("in{seq}")).unwrap()],
            effects: Vec::new(),
        }
    }

    #[tokio::test]
    async fn leftovers_of_an_unfinished_commit_are_ignored_and_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        store.commit(&commit(None, 0, "first")).await.unwrap();
        // A crash after appending an entry but before replacing state.json.
        let entries = dir.path().join("threads/t1/entries.jsonl");
        let mut f = OpenOptions::new().append(true).open(&entries).unwrap();
        f.write_all(b"{\"half\": tr").unwrap();
        drop(store);

        let store = FileStore::open(dir.path()).unwrap();
        let id = ThreadId::new("t1").unwrap();
        assert_eq!(store.load_entries(&id, 10).await.unwrap().len(), 1);
        store.commit(&commit(Some(1), 1, "second")).await.unwrap();
        drop(store);
        let store = FileStore::open(dir.path()).unwrap();
        let texts: Vec<String> = store
            .load_entries(&id, 10)
            .await
            .unwrap()
            .iter()
            .map(|e| format!("{:?}", e.item))
            .collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[1].contains("second"));
        let seen = store
            .processed(
                &id,
                &[InputId::new("in0").unwrap(), InputId::new("in9").unwrap()],
            )
            .await
            .unwrap();
        assert_eq!(seen.len(), 1);
    }

    #[tokio::test]
    async fn a_stale_version_is_a_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        store.commit(&commit(None, 0, "first")).await.unwrap();
        let err = store.commit(&commit(None, 0, "again")).await.unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
        assert!(err.to_string().contains("version conflict"));
    }
}
