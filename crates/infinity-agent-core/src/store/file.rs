//! A store on disk, for the CLI: `infinity chat --store DIR` stops and starts where it left off.
//!
//! One process owns a store folder at a time: opening it takes an exclusive lock on `DIR/lock`,
//! which names its holder; a second process gets [`StoreError::Locked`] naming the first, or with
//! [`FileStore::open_waiting`] waits its turn. [`FileStore::open_read_only`] reads without the
//! lock (listing threads while another process runs them) and refuses to write.
//!
//! Layout, one folder per thread under `DIR/threads/<thread id>/`, every file but one appended:
//! - `entries.jsonl`: the thread's own history entries, one JSON object per line;
//! - `processed.txt`: processed input ids, one per line;
//! - `children.jsonl`: its children's links, a line per new child and per change (the latest
//!   line of a child wins), so a parent of thousands writes one line per change, not the list;
//! - `events.jsonl`: the output events the thread showed, numbered, one per line (read only by
//!   [`ThreadStore::events_after`], for clients that resume a stream; kept for the thread's life);
//! - `outbox.jsonl`: `{"add": effect}` lines written by commits and `{"done": [ids]}` lines when
//!   effects are performed, so marking one effect of thousands done writes one line;
//! - `state.json`: the record (without its children) and how many bytes of each file above are
//!   committed. It is replaced atomically (write a temporary file, fsync, rename, fsync the
//!   folder), and that rename is the commit point. Bytes past a committed length are leftovers of
//!   a commit that did not finish, ignored on load and overwritten by the next commit; only
//!   `done` lines may follow the outbox's committed length (they are appended between commits,
//!   and a torn last one is ignored: the effect is then performed again, which receivers
//!   deduplicate).
//!
//! Beside the threads, `DIR/inbox.jsonl` keeps the inputs front doors accepted until their
//! threads have handled them ([`ThreadStore::accept`], `file/inbox.rs`).
//!
//! A commit writes what it adds, plus a `state.json` of constant size: writes per commit do not
//! grow with the history, the children or the outbox. The threads used lately are also kept in
//! memory, so their reads never touch the disk; the others are put away (`file/resident.rs`) and
//! cost memory for their id and file lengths only, so a store of 100,000 idle threads does not
//! hold 100,000 histories. A thread whose files cannot be read is left out with the reason
//! ([`FileStore::broken`]); the others load, and the broken one refuses to run rather than be
//! overwritten.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

mod answers;
mod events;
mod inbox;
mod io;
mod load;
mod lock;
mod resident;

use super::memory::{ThreadData, Threads};
use super::{check_version, StoreError, ThreadStore};
use crate::commit::Commit;
use crate::effect::PendingEffect;
use crate::history::HistoryEntry;
use crate::ids::{CallId, EffectId, InputId, ThreadId};
use crate::input::Input;
use crate::input::{Answer, AnswerTo};
use crate::state::{ChildLink, ThreadRecord};
use io::{
    committed, corrupt, io_err, json_lines, parse_lines, read_all, replace_state, sync_dir,
    write_at,
};
use load::load_thread;
use lock::HeldLock;

/// The current layout (see the module docs). Version 1 kept the children in the record and the
/// outbox in `state.json`; such a thread is read as it is and written in this layout from its
/// next commit on.
const FORMAT: u32 = 2;

#[derive(Debug, Deserialize)]
struct StateFile {
    #[serde(default = "format_one")]
    format: u32,
    record: ThreadRecord,
    /// Version 1 only.
    #[serde(default)]
    outbox: Vec<PendingEffect>,
    entries_bytes: u64,
    processed_bytes: u64,
    #[serde(default)]
    children_bytes: u64,
    #[serde(default)]
    outbox_bytes: u64,
    #[serde(default)]
    events_bytes: u64,
}

fn format_one() -> u32 {
    1
}

/// A line of `outbox.jsonl`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OutboxLine {
    Add(Box<PendingEffect>),
    Done(Vec<EffectId>),
}

/// Committed lengths of a thread's appended files.
#[derive(Debug, Default, Clone, Copy)]
struct Lengths {
    entries: u64,
    processed: u64,
    children: u64,
    outbox: u64,
    events: u64,
}

/// What is on disk for a thread besides what [`ThreadData`] holds.
#[derive(Debug, Default)]
struct OnDisk {
    lengths: Lengths,
    /// The end of `outbox.jsonl` (past the committed length when `done` lines followed).
    outbox_end: u64,
    /// The children as `children.jsonl` has them (empty for a version 1 thread).
    children: Vec<ChildLink>,
    /// False for a version 1 thread: its next commit writes its children and outbox out whole.
    current_format: bool,
    /// True: not in memory (`children` is then empty); its next use reads its folder.
    put_away: bool,
    /// For a thread put away: whether its outbox had effects pending.
    outbox_pending: bool,
}

#[derive(Debug, Default)]
struct Inner {
    threads: Threads,
    disk: HashMap<ThreadId, OnDisk>,
    /// Threads whose files could not be read, with why.
    broken: Vec<(String, String)>,
    broken_ids: HashSet<ThreadId>,
    recency: resident::Recency,
}

/// A [`ThreadStore`] in a folder. See the module docs for the layout and the commit protocol.
#[derive(Debug, Clone)]
pub struct FileStore {
    root: PathBuf,
    inner: Arc<Mutex<Inner>>,
    /// The held lock (`None`: opened read-only).
    lock: Option<Arc<HeldLock>>,
    /// The accepted inputs not yet handled (`None`: opened read-only).
    inbox: Option<Arc<Mutex<inbox::Inbox>>>,
}

impl FileStore {
    /// Opens (or creates) a store in `root`, taking its lock, and loads it. Fails with
    /// [`StoreError::Locked`], naming the holder, when another process (or another store in
    /// this process) has it open.
    ///
    /// A child process this process starts shares its open files, the lock's among them, until
    /// it runs its program; a lock that names this process while none of its stores holds the
    /// folder is such a moment, and is waited out (up to 10 s) rather than refused.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        Self::open_with(root.into(), None::<fn(&str)>)
    }

    /// Like [`FileStore::open`], but waits for another process to release the store; `waiting`
    /// is told who holds it before the wait begins.
    pub fn open_waiting(
        root: impl Into<PathBuf>,
        waiting: impl FnOnce(&str),
    ) -> Result<Self, StoreError> {
        Self::open_with(root.into(), Some(waiting))
    }

    /// Loads an existing store without taking its lock (to look at it while another process
    /// runs it). Commits are refused. Fails when `root` holds no store.
    pub fn open_read_only(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        if !root.join("threads").is_dir() {
            return Err(StoreError::Unavailable(format!(
                "{}: no store here (a store folder holds threads/)",
                root.display()
            )));
        }
        Self::load(root, None)
    }

    fn open_with(root: PathBuf, waiting: Option<impl FnOnce(&str)>) -> Result<Self, StoreError> {
        fs::create_dir_all(root.join("threads")).map_err(|e| io_err(&root, e))?;
        let held = lock::take(&root, waiting)?;
        Self::load(root, Some(Arc::new(held)))
    }

    fn load(root: PathBuf, lock: Option<Arc<HeldLock>>) -> Result<Self, StoreError> {
        let threads_dir = root.join("threads");
        let mut inner = Inner::default();
        let mut loaded = Vec::new();
        for dir in fs::read_dir(&threads_dir).map_err(|e| io_err(&threads_dir, e))? {
            let dir = dir.map_err(|e| io_err(&threads_dir, e))?.path();
            if !dir.join("state.json").exists() {
                continue; // a thread whose first commit never finished
            }
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            match load_thread(&dir) {
                Ok(thread) => loaded.push(thread),
                Err(err) => {
                    tracing::error!(thread = %name, %err, "thread left out: its files cannot be read");
                    if let Ok(id) = ThreadId::new(name.as_str()) {
                        inner.broken_ids.insert(id);
                    }
                    inner.broken.push((name, err.to_string()));
                }
            }
        }
        loaded.sort_by_key(|(d, _)| d.record.created_at);
        for (data, disk) in loaded {
            let id = data.record.id.clone();
            inner.threads.order.push(id.clone());
            inner.threads.listing.put(None, &data.record);
            inner.disk.insert(id.clone(), disk);
            inner.threads.by_id.insert(id, data);
        }
        inner.put_away_beyond(resident::RESIDENT_THREADS);
        let inbox = match lock {
            Some(_) => Some(Arc::new(Mutex::new(inbox::Inbox::open(&root)?))),
            None => None,
        };
        Ok(Self {
            root,
            inner: Arc::new(Mutex::new(inner)),
            lock,
            inbox,
        })
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Threads whose files could not be read (folder name, why). They are left out of the
    /// store, and refuse to run until repaired or removed.
    pub fn broken(&self) -> Vec<(String, String)> {
        self.lock_inner().broken.clone()
    }

    fn lock_inner(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn thread_dir(&self, thread_id: &ThreadId) -> PathBuf {
        self.root.join("threads").join(thread_id.as_str())
    }

    /// The store locked, with `thread_id` resident if the store has it.
    fn lock_with(&self, thread_id: &ThreadId) -> Result<MutexGuard<'_, Inner>, StoreError> {
        let mut inner = self.lock_inner();
        self.check_usable(&inner, thread_id)?;
        inner.resident(&self.root.join("threads"), thread_id)?;
        Ok(inner)
    }

    /// The store locked for a write about `thread_id`: refused when opened read-only.
    fn lock_writable(&self, thread_id: &ThreadId) -> Result<MutexGuard<'_, Inner>, StoreError> {
        if self.lock.is_none() {
            return Err(StoreError::Unavailable(format!(
                "{}: opened read-only",
                self.root.display()
            )));
        }
        let inner = self.lock_inner();
        self.check_usable(&inner, thread_id)?;
        Ok(inner)
    }

    fn check_usable(&self, inner: &Inner, thread_id: &ThreadId) -> Result<(), StoreError> {
        if inner.broken_ids.contains(thread_id) {
            return Err(StoreError::Corrupt(format!(
                "thread {thread_id} could not be read from {}; see the log",
                self.thread_dir(thread_id).display()
            )));
        }
        Ok(())
    }

    fn write_state(
        &self,
        dir: &Path,
        record: &ThreadRecord,
        lengths: Lengths,
    ) -> Result<(), StoreError> {
        #[derive(Serialize)]
        struct StateRef<'a> {
            format: u32,
            record: &'a ThreadRecord,
            entries_bytes: u64,
            processed_bytes: u64,
            children_bytes: u64,
            outbox_bytes: u64,
            events_bytes: u64,
        }
        let bytes = serde_json::to_vec(&StateRef {
            format: FORMAT,
            record,
            entries_bytes: lengths.entries,
            processed_bytes: lengths.processed,
            children_bytes: lengths.children,
            outbox_bytes: lengths.outbox,
            events_bytes: lengths.events,
        })
        .map_err(|e| corrupt(dir, e))?;
        replace_state(dir, &bytes)
    }
}

#[async_trait]
impl ThreadStore for FileStore {
    async fn load_record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        let inner = self.lock_with(thread_id)?;
        Ok(inner.threads.by_id.get(thread_id).map(|d| d.record.clone()))
    }

    async fn load_entries(
        &self,
        thread_id: &ThreadId,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        Ok(self
            .lock_with(thread_id)?
            .threads
            .entries(thread_id, 0, upto))
    }

    async fn load_entries_between(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        Ok(self
            .lock_with(thread_id)?
            .threads
            .entries(thread_id, from, upto))
    }

    async fn load_entries_shared(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<super::Entries, StoreError> {
        Ok(self
            .lock_with(thread_id)?
            .threads
            .shared(thread_id, from, upto))
    }

    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError> {
        Ok(self
            .lock_with(thread_id)?
            .threads
            .processed(thread_id, input_ids))
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        if self.lock.is_none() {
            return Err(StoreError::Unavailable(format!(
                "{}: opened read-only",
                self.root.display()
            )));
        }
        let mut inner = self.lock_with(&commit.thread_id)?;
        check_version(
            commit,
            inner
                .threads
                .by_id
                .get(&commit.thread_id)
                .map(|d| &d.record),
        )?;
        let dir = self.thread_dir(&commit.thread_id);
        let new_thread = !dir.exists();
        fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        if new_thread {
            sync_dir(&self.root.join("threads"))?;
        }
        let existing = inner.threads.by_id.get(&commit.thread_id);
        let disk = inner.disk.get(&commit.thread_id);
        let before = disk.map(|d| d.lengths).unwrap_or_default();
        let current = disk.is_none_or(|d| d.current_format);

        // Children: a line per new or changed link.
        let on_disk: &[ChildLink] = disk.map_or(&[], |d| &d.children);
        let changed = commit
            .record
            .children
            .iter()
            .enumerate()
            .filter(|(i, link)| on_disk.get(*i) != Some(link))
            .map(|(_, link)| link);
        let children_path = dir.join("children.jsonl");
        let children = json_lines(&children_path, changed)?;

        // Outbox: the commit's effects; a version 1 thread's pending ones first.
        let outbox_path = dir.join("outbox.jsonl");
        let legacy: &[PendingEffect] = match (current, existing) {
            (false, Some(data)) => &data.outbox,
            _ => &[],
        };
        let adds = json_lines(
            &outbox_path,
            legacy
                .iter()
                .chain(&commit.effects)
                .map(|e| OutboxLine::Add(Box::new(e.clone()))),
        )?;
        let outbox_at = if current {
            disk.map_or(0, |d| d.outbox_end)
        } else {
            0
        };

        let entries_path = dir.join("entries.jsonl");
        let entries = json_lines(&entries_path, &commit.new_entries)?;
        let events_path = dir.join(events::FILE);
        let events = json_lines(&events_path, &commit.events)?;
        let mut processed = String::new();
        for id in &commit.processed_inputs {
            processed.push_str(id.as_str());
            processed.push('\n');
        }
        let children_at = if current { before.children } else { 0 };
        let after = Lengths {
            entries: write_at(&entries_path, before.entries, &entries)?,
            processed: write_at(
                &dir.join("processed.txt"),
                before.processed,
                processed.as_bytes(),
            )?,
            children: if children.is_empty() && current {
                before.children
            } else {
                write_at(&children_path, children_at, &children)?
            },
            outbox: if adds.is_empty() && current {
                outbox_at
            } else {
                write_at(&outbox_path, outbox_at, &adds)?
            },
            events: if events.is_empty() {
                before.events
            } else {
                write_at(&events_path, before.events, &events)?
            },
        };
        let mut record = commit.record.clone();
        record.children.clear();
        self.write_state(&dir, &record, after)?;

        let converted = !current && existing.is_some();
        inner.threads.commit(commit)?;
        if converted {
            tracing::info!(thread = %commit.thread_id, "store thread written in the current layout");
        }
        let disk = inner.disk.entry(commit.thread_id.clone()).or_default();
        disk.lengths = after;
        disk.outbox_end = after.outbox;
        disk.children = commit.record.children.clone();
        disk.current_format = true;
        // A thread this commit created counts as used now.
        inner.resident(&self.root.join("threads"), &commit.thread_id)?;
        Ok(())
    }

    async fn list_threads(
        &self,
        query: &crate::state::ThreadQuery,
    ) -> Result<crate::state::ThreadPage, StoreError> {
        let inner = self.lock_inner();
        let threads_dir = self.root.join("threads");
        inner.threads.listing.page(query, |id| {
            // A thread put away is summed up from its record on disk.
            Ok(match inner.threads.by_id.get(id) {
                Some(data) => Some(crate::state::ThreadSummary::of(&data.record)),
                None => load::load_record(&threads_dir.join(id.as_str()))?
                    .map(|record| crate::state::ThreadSummary::of(&record)),
            })
        })
    }

    async fn events_after(
        &self,
        thread_id: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<crate::effect::OutputEvent>, StoreError> {
        let committed = {
            let inner = self.lock_with(thread_id)?;
            inner.disk.get(thread_id).map_or(0, |d| d.lengths.events)
        };
        events::after(&self.thread_dir(thread_id), committed, after, limit)
    }

    async fn complete_effects(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        if self.lock.is_none() {
            return Ok(());
        }
        let mut inner = self.lock_with(thread_id)?;
        if !inner.threads.complete(thread_id, effect_ids) {
            return Ok(());
        }
        let dir = self.thread_dir(thread_id);
        let remaining = inner
            .threads
            .by_id
            .get(thread_id)
            .map_or(0, |d| d.outbox.len());
        let Some(disk) = inner.disk.get(thread_id) else {
            return Ok(());
        };
        if !disk.current_format {
            // A version 1 thread keeps its outbox in state.json until its next commit.
            let Some(data) = inner.threads.by_id.get(thread_id) else {
                return Ok(());
            };
            let outbox = data.outbox.clone();
            let record = data.record.clone();
            return write_legacy_state(&dir, &record, &outbox, disk.lengths);
        }
        let outbox_path = dir.join("outbox.jsonl");
        let (lengths, outbox_end) = (disk.lengths, disk.outbox_end);
        if remaining == 0 {
            // Nothing is pending: start the file afresh (state.json first, so a crash between
            // the two leaves only `done` lines past the committed length).
            let record = inner.threads.by_id.get(thread_id).map(|d| {
                let mut r = d.record.clone();
                r.children.clear();
                r
            });
            if let Some(record) = record {
                let emptied = Lengths {
                    outbox: 0,
                    ..lengths
                };
                self.write_state(&dir, &record, emptied)?;
                write_at(&outbox_path, 0, &[])?;
                if let Some(disk) = inner.disk.get_mut(thread_id) {
                    disk.lengths = emptied;
                    disk.outbox_end = 0;
                }
            }
            return Ok(());
        }
        let line = json_lines(&outbox_path, [OutboxLine::Done(effect_ids.to_vec())])?;
        let end = write_at(&outbox_path, outbox_end, &line)?;
        if let Some(disk) = inner.disk.get_mut(thread_id) {
            disk.outbox_end = end;
        }
        Ok(())
    }

    async fn outbox(&self) -> Result<Vec<(ThreadId, PendingEffect)>, StoreError> {
        let inner = self.lock_inner();
        let threads_dir = self.root.join("threads");
        let mut out = Vec::new();
        for id in &inner.threads.order {
            let outbox = inner.outbox_of(&threads_dir, id)?;
            out.extend(outbox.into_iter().map(|e| (id.clone(), e)));
        }
        Ok(out)
    }

    async fn thread_outbox(&self, thread_id: &ThreadId) -> Result<Vec<PendingEffect>, StoreError> {
        self.lock_inner()
            .outbox_of(&self.root.join("threads"), thread_id)
    }

    async fn thread_ids(&self) -> Result<Vec<ThreadId>, StoreError> {
        Ok(self.lock_inner().threads.order.clone())
    }

    async fn accept(&self, input: &Input) -> Result<(), StoreError> {
        match &self.inbox {
            Some(inbox) => lock_inbox(inbox).accept(input),
            None => Err(StoreError::Unavailable(format!(
                "{}: opened read-only",
                self.root.display()
            ))),
        }
    }

    async fn inbox(&self) -> Result<Vec<Input>, StoreError> {
        match &self.inbox {
            Some(inbox) => Ok(lock_inbox(inbox).pending()),
            None => Ok(inbox::Inbox::read(&self.root)?.pending()),
        }
    }

    async fn release(&self, input_ids: &[InputId]) -> Result<(), StoreError> {
        match &self.inbox {
            Some(inbox) => lock_inbox(inbox).release(input_ids),
            None => Ok(()),
        }
    }

    async fn claim_answer(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<Option<Answer>, StoreError> {
        let _held = self.lock_writable(thread_id)?;
        answers::claim(&self.thread_dir(thread_id), answer)
    }

    async fn standing_answer(
        &self,
        thread_id: &ThreadId,
        call_id: &CallId,
        to: AnswerTo,
    ) -> Result<Option<Answer>, StoreError> {
        answers::standing(&self.thread_dir(thread_id), call_id, to)
    }

    async fn withdraw_answer(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<(), StoreError> {
        let _held = self.lock_writable(thread_id)?;
        answers::withdraw(&self.thread_dir(thread_id), answer)
    }
}

fn lock_inbox(inbox: &Mutex<inbox::Inbox>) -> MutexGuard<'_, inbox::Inbox> {
    inbox
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Rewrites a version 1 thread's `state.json` (its outbox inline) after effects were done.
fn write_legacy_state(
    dir: &Path,
    record: &ThreadRecord,
    outbox: &[PendingEffect],
    lengths: Lengths,
) -> Result<(), StoreError> {
    #[derive(Serialize)]
    struct Legacy<'a> {
        record: &'a ThreadRecord,
        outbox: &'a [PendingEffect],
        entries_bytes: u64,
        processed_bytes: u64,
    }
    let bytes = serde_json::to_vec(&Legacy {
        record,
        outbox,
        entries_bytes: lengths.entries,
        processed_bytes: lengths.processed,
    })
    .map_err(|e| corrupt(dir, e))?;
    replace_state(dir, &bytes)
}

#[cfg(test)]
mod tests;
