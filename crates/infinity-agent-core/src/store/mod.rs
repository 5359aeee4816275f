//! Where threads live: the [`ThreadStore`] trait, history views, and two stores: in memory
//! ([`MemoryStore`]) and on disk ([`FileStore`]).
//!
//! A [`FileStore`] keeps threads, histories, outboxes and processed-input markers across a
//! restart; one process holds its folder at a time (a second `open` is an error naming the
//! holder).
//!
//! ```
//! use std::sync::Arc;
//!
//! use infinity_agent_core::runtime::AgentSystemBuilder;
//! use infinity_agent_core::store::FileStore;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let store = FileStore::open(dir.path())?;
//! // A second process (or a second open) on the same folder is refused, naming the holder.
//! let again = FileStore::open(dir.path()).unwrap_err();
//! assert!(again.to_string().contains("is in use by"), "{again}");
//! let builder = AgentSystemBuilder::new().with_store(Arc::new(store));
//! # let _ = builder;
//! # Ok(())
//! # }
//! ```

mod answers;
mod file;
mod listing;
mod memory;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;

pub use answers::AnswerBook;
pub use file::FileStore;
pub use memory::MemoryStore;

use crate::commit::Commit;
use crate::effect::PendingEffect;
use crate::history::HistoryEntry;
use crate::ids::{EffectId, InputId, ThreadId};
use crate::input::Input;
use crate::state::ThreadRecord;

/// Why a store operation failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another writer committed first; reload and run the slice again.
    #[error("thread {thread_id}: version conflict (expected {expected:?}, found {found:?}); another slice committed first")]
    Conflict {
        /// The thread.
        thread_id: ThreadId,
        /// The version the commit started from.
        expected: Option<u64>,
        /// The version in the store.
        found: Option<u64>,
    },
    /// The store could not be reached or written; retrying may help.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Stored data could not be read back.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// Another process has the store open.
    #[error("the store {path} is in use by {holder}; stop it, or use another store")]
    Locked {
        /// The store.
        path: String,
        /// Who holds it (its process id, command and since when).
        holder: String,
    },
}

impl StoreError {
    /// True when the operation may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        !matches!(self, StoreError::Corrupt(_) | StoreError::Locked { .. })
    }
}

/// A backend for thread state. Small on purpose: hosts add caching and batching around it.
#[async_trait]
pub trait ThreadStore: Send + Sync + std::fmt::Debug {
    /// The thread's record, if the thread exists.
    async fn load_record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError>;

    /// The thread's own committed entries with `seq < upto`, in order.
    async fn load_entries(
        &self,
        thread_id: &ThreadId,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError>;

    /// The thread's own committed entries with `from <= seq < upto`, in order. By default
    /// [`ThreadStore::load_entries`] with the older ones dropped; a store that can read a range
    /// reads only it.
    async fn load_entries_between(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        let mut entries = self.load_entries(thread_id, upto).await?;
        let older = usize::try_from(from)
            .unwrap_or(usize::MAX)
            .min(entries.len());
        entries.drain(..older);
        Ok(entries)
    }

    /// Which of `input_ids` the thread has already processed.
    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError>;

    /// Writes a slice's result atomically: the record (checking `expected_version`), the new
    /// entries, the processed input ids and the outbox effects. All of it or none of it.
    async fn commit(&self, commit: &Commit) -> Result<(), StoreError>;

    /// A page of the threads `query` asks for, newest activity first. A store answers from what
    /// it keeps for lists (never by reading every record); a cursor it did not make is a
    /// [`StoreError::Corrupt`] naming it.
    async fn list_threads(
        &self,
        query: &crate::state::ThreadQuery,
    ) -> Result<crate::state::ThreadPage, StoreError>;

    /// The thread's kept output events numbered after `after`, oldest first, at most `limit`
    /// (for clients that resume a stream). A store keeps them for a while (each says how long):
    /// when the first one returned is numbered past `after + 1`, the ones between are no
    /// longer kept.
    async fn events_after(
        &self,
        thread_id: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<crate::effect::OutputEvent>, StoreError>;

    /// Removes performed effects from a thread's outbox. Unknown ids are ignored.
    async fn complete_effects(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError>;

    /// Marks done all the effects one commit (`version`) put in the outbox; `effect_ids` are
    /// all of them. A store that keeps a commit's effects together may drop them in one request;
    /// by default this is [`ThreadStore::complete_effects`].
    async fn complete_commit_effects(
        &self,
        thread_id: &ThreadId,
        version: u64,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        let _ = version;
        self.complete_effects(thread_id, effect_ids).await
    }

    /// [`ThreadStore::load_entries_between`] as [`Entries`]: a store that keeps the thread's
    /// entries in memory hands out a share of its list (no copy, however long the history);
    /// by default a list of their own.
    async fn load_entries_shared(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<Entries, StoreError> {
        Ok(self
            .load_entries_between(thread_id, from, upto)
            .await?
            .into())
    }

    /// Everything a slice reads of its thread before it runs: the record, the entries of its
    /// view from [`ThreadRecord::view_start`] on, which of `input_ids` it has processed, and
    /// with `with_outbox` its outbox. By default piece by piece; a store may read it in fewer
    /// requests, or keep what it read for the thread's next slice (checked against the
    /// record's version, so never stale).
    async fn load_slice(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
        with_outbox: bool,
    ) -> Result<SliceState, StoreError> {
        let record = self.load_record(thread_id).await?;
        let (view, view_start) = match &record {
            Some(record) => {
                let from = record.view_start();
                let inherited = record.parent.as_ref().map_or(0, |p| p.fork_at);
                let view = if from >= inherited {
                    // The window lies in the thread's own entries: read as the store can share
                    // them, without a copy.
                    self.load_entries_shared(thread_id, from - inherited, record.history_len)
                        .await?
                } else {
                    load_view_from(self, record, from).await?.into()
                };
                (view, from)
            }
            None => (Entries::default(), 0),
        };
        let processed = self.processed(thread_id, input_ids).await?;
        let outbox = match with_outbox {
            true => Some(self.thread_outbox(thread_id).await?),
            false => None,
        };
        Ok(SliceState {
            record,
            view,
            view_start,
            processed,
            outbox,
        })
    }

    /// Every thread's outbox: effects committed but not yet marked done (for recovery).
    async fn outbox(&self) -> Result<Vec<(ThreadId, PendingEffect)>, StoreError>;

    /// One thread's outbox. By default [`ThreadStore::outbox`] filtered; a store that keeps
    /// each thread's outbox apart reads only that thread's.
    async fn thread_outbox(&self, thread_id: &ThreadId) -> Result<Vec<PendingEffect>, StoreError> {
        Ok(self
            .outbox()
            .await?
            .into_iter()
            .filter(|(thread, _)| thread == thread_id)
            .map(|(_, effect)| effect)
            .collect())
    }

    /// The ids of all threads, in creation order where the store knows it.
    async fn thread_ids(&self) -> Result<Vec<ThreadId>, StoreError>;

    /// Keeps an input a front door accepted (the inbox) until its thread has handled it
    /// ([`ThreadStore::release`]); returns once the input is durable. A door acknowledges an
    /// input only after this returned, and a host replays [`ThreadStore::inbox`] when it
    /// starts, so a crash before the thread commits the input loses nothing; the thread's
    /// processed-input markers drop a replayed input it had committed. Accepting an input
    /// already kept keeps it once.
    ///
    /// By default nothing is kept: for a store whose inputs reach the host through a durable
    /// queue of their own (SQS on AWS), or that keeps nothing across a restart (memory).
    async fn accept(&self, input: &Input) -> Result<(), StoreError> {
        let _ = input;
        Ok(())
    }

    /// The inputs accepted and not released, oldest first (see [`ThreadStore::accept`]).
    async fn inbox(&self) -> Result<Vec<Input>, StoreError> {
        Ok(Vec::new())
    }

    /// Forgets accepted inputs whose threads have handled them (committed them, or dropped them
    /// with a reason). Ids never accepted are ignored.
    async fn release(&self, input_ids: &[InputId]) -> Result<(), StoreError> {
        let _ = input_ids;
        Ok(())
    }

    /// Keeps `answer` as the one that stands for its call on `thread_id`, unless the call has
    /// one already: then keeps nothing and returns that one. Of two claims at once, exactly one
    /// wins (see [`Answer`](crate::input::Answer): the first answer to a call stands).
    async fn claim_answer(
        &self,
        thread_id: &ThreadId,
        answer: &crate::input::Answer,
    ) -> Result<Option<crate::input::Answer>, StoreError>;

    /// The answer that stands for what `call_id` waits for (`to`) on `thread_id`, if one does.
    async fn standing_answer(
        &self,
        thread_id: &ThreadId,
        call_id: &crate::ids::CallId,
        to: crate::input::AnswerTo,
    ) -> Result<Option<crate::input::Answer>, StoreError>;

    /// Forgets `answer` if it is still the one that stands (it never reached its thread: its
    /// input could not be queued, or its tool server did not take it), so the call may be
    /// answered again. Nothing happens when another answer stands.
    async fn withdraw_answer(
        &self,
        thread_id: &ThreadId,
        answer: &crate::input::Answer,
    ) -> Result<(), StoreError>;

    /// Writes a thread moved here from another host: its record (written as it is), the history
    /// entries this store lacks (`entries`, from the first seq it lacks) and the effects that arm
    /// its timers again. `expected_version` is `None` for a thread new here, or the version of
    /// the tombstone it left when it moved away ([`StoreError::Conflict`] if the store has
    /// another). By default one [`ThreadStore::commit`]; a store whose commits are bounded
    /// writes a long history in several steps, the record last, so the thread changes whole or
    /// not at all.
    async fn import_thread(
        &self,
        record: &ThreadRecord,
        entries: &[HistoryEntry],
        effects: &[PendingEffect],
        expected_version: Option<u64>,
    ) -> Result<(), StoreError> {
        self.commit(&Commit {
            thread_id: record.id.clone(),
            expected_version,
            record: record.clone(),
            new_entries: entries.to_vec(),
            processed_inputs: Vec::new(),
            effects: effects.to_vec(),
            // The events it showed stay where it showed them.
            events: Vec::new(),
        })
        .await
    }
}

/// History entries as a store hands them out: a range of a list it may share with its own copy,
/// so that reading a long history costs no copy of it. Reads as a slice of entries.
///
/// A store that shares its list appends to it with [`Arc::make_mut`]: while nobody holds a
/// share, in place; while a share is held, on a copy (a slice drops its view before it commits,
/// so a slice's own commit never copies).
#[derive(Debug, Clone, Default)]
pub struct Entries {
    list: Arc<Vec<Arc<HistoryEntry>>>,
    start: usize,
    end: usize,
}

impl Entries {
    /// Entries `from..upto` of `list` (cut to its length).
    pub fn shared(list: &Arc<Vec<Arc<HistoryEntry>>>, from: u64, upto: u64) -> Self {
        let end = usize::try_from(upto).unwrap_or(usize::MAX).min(list.len());
        let start = usize::try_from(from).unwrap_or(usize::MAX).min(end);
        Self {
            list: Arc::clone(list),
            start,
            end,
        }
    }
}

impl From<Vec<Arc<HistoryEntry>>> for Entries {
    fn from(list: Vec<Arc<HistoryEntry>>) -> Self {
        let end = list.len();
        Self {
            list: Arc::new(list),
            start: 0,
            end,
        }
    }
}

impl FromIterator<Arc<HistoryEntry>> for Entries {
    fn from_iter<I: IntoIterator<Item = Arc<HistoryEntry>>>(entries: I) -> Self {
        Self::from(entries.into_iter().collect::<Vec<_>>())
    }
}

impl std::ops::Deref for Entries {
    type Target = [Arc<HistoryEntry>];

    fn deref(&self) -> &Self::Target {
        &self.list[self.start..self.end]
    }
}

/// What [`ThreadStore::load_slice`] read.
#[derive(Debug, Default)]
pub struct SliceState {
    /// The record, if the thread exists.
    pub record: Option<ThreadRecord>,
    /// The entries of its view from `view_start` on.
    pub view: Entries,
    /// The index in the whole view of `view`'s first entry.
    pub view_start: u64,
    /// Which of the slice's inputs the thread has processed already.
    pub processed: HashSet<InputId>,
    /// The thread's outbox, when asked for.
    pub outbox: Option<Vec<PendingEffect>>,
}

/// The most threads [`waiting`] reads: a tree bigger than that is cut, the rest named by the
/// threads that list them.
pub const WAITING_THREADS: usize = 500;

/// What would wake `thread_id` and each open thread below it (children and theirs, in breadth
/// order), the thread first, each with its outbox counted
/// ([`Waits`](crate::state::waits::Waits)). `None`: no such thread.
pub async fn waiting(
    store: &dyn ThreadStore,
    thread_id: &ThreadId,
) -> Result<Option<Vec<crate::state::waits::Waits>>, StoreError> {
    let mut found = Vec::new();
    let mut next = std::collections::VecDeque::from([thread_id.clone()]);
    while let Some(id) = next.pop_front() {
        if found.len() >= WAITING_THREADS {
            break;
        }
        let Some(record) = store.load_record(&id).await? else {
            if found.is_empty() {
                return Ok(None);
            }
            continue;
        };
        let mut waits = crate::state::waits::Waits::of(&record);
        waits.outbox = store.thread_outbox(&id).await?.len();
        next.extend(waits.children.iter().cloned());
        found.push(waits);
    }
    Ok(Some(found))
}

/// The history a thread sees: its ancestors' entries up to each fork point, then its own.
pub async fn load_view(
    store: &dyn ThreadStore,
    record: &ThreadRecord,
) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
    load_view_from(store, record, 0).await
}

/// The entries of a thread's view from index `from` on (what a slice needs:
/// `from` = [`ThreadRecord::view_start`]), reading nothing older.
pub async fn load_view_from<S: ThreadStore + ?Sized>(
    store: &S,
    record: &ThreadRecord,
    from: u64,
) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
    let inherited = record.parent.as_ref().map_or(0, |p| p.fork_at);
    let mut segments = vec![(record.id.clone(), record.history_len)];
    match &record.parent {
        // Nothing inherited is needed: the view's own part starts at `inherited`.
        _ if from >= inherited => return assemble(store, segments, from - inherited).await,
        Some(parent) => {
            collect_segments(store, &parent.thread_id, inherited, &mut segments).await?;
        }
        None => {}
    }
    assemble(store, segments, from).await
}

/// The first `limit` entries of a thread's view (what a child forked at `limit` inherits).
pub async fn load_view_prefix(
    store: &dyn ThreadStore,
    thread_id: &ThreadId,
    limit: u64,
) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
    let mut segments = Vec::new();
    collect_segments(store, thread_id, limit, &mut segments).await?;
    assemble(store, segments, 0).await
}

/// Walks up from `thread_id`, pushing `(thread, own entries to take)` for the first `limit`
/// entries of its view, innermost first.
async fn collect_segments<S: ThreadStore + ?Sized>(
    store: &S,
    thread_id: &ThreadId,
    mut limit: u64,
    segments: &mut Vec<(ThreadId, u64)>,
) -> Result<(), StoreError> {
    let mut current = thread_id.clone();
    loop {
        let record = store
            .load_record(&current)
            .await?
            .ok_or_else(|| StoreError::Corrupt(format!("ancestor thread {current} is missing")))?;
        let inherited = record.parent.as_ref().map_or(0, |p| p.fork_at);
        let own = limit
            .min(inherited + record.history_len)
            .saturating_sub(inherited);
        segments.push((record.id.clone(), own));
        limit = limit.min(inherited);
        match record.parent {
            Some(parent) if limit > 0 => current = parent.thread_id,
            _ => return Ok(()),
        }
    }
}

/// Reads the segments (innermost first) oldest first, skipping the view's first `from` entries.
async fn assemble<S: ThreadStore + ?Sized>(
    store: &S,
    segments: Vec<(ThreadId, u64)>,
    from: u64,
) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
    let mut view = Vec::new();
    // Where the current segment starts in the view.
    let mut start = 0;
    for (thread_id, upto) in segments.into_iter().rev() {
        let skip = from.saturating_sub(start).min(upto);
        if skip == 0 {
            view.extend(store.load_entries(&thread_id, upto).await?);
        } else if skip < upto {
            view.extend(store.load_entries_between(&thread_id, skip, upto).await?);
        }
        start += upto;
    }
    Ok(view)
}

/// Checks a commit's version against the stored record's.
pub(crate) fn check_version(
    commit: &Commit,
    stored: Option<&ThreadRecord>,
) -> Result<(), StoreError> {
    let found = stored.map(|r| r.version);
    if found != commit.expected_version {
        return Err(StoreError::Conflict {
            thread_id: commit.thread_id.clone(),
            expected: commit.expected_version,
            found,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Item;
    use crate::ids::CallId;
    use crate::state::ParentLink;

    fn thread(name: &str, parent: Option<(&str, u64)>, own: u64) -> Commit {
        let link = parent.map(|(p, fork_at)| {
            let link = ParentLink {
                thread_id: ThreadId::new(p).unwrap(),
                call_id: CallId::new("c").unwrap(),
                tool: "spawn_thread".into(),
                args: serde_json::Value::Null,
                fork_at,
                summary: None,
            };
            (link, vec![ThreadId::new(p).unwrap()])
        });
        let id = ThreadId::new(name).unwrap();
        let mut record = ThreadRecord::new(id.clone(), "a", link, jiff::Timestamp::UNIX_EPOCH);
        record.history_len = own;
        record.version = 1;
        Commit {
            thread_id: id,
            expected_version: None,
            record,
            new_entries: (0..own)
                .map(|seq| HistoryEntry {
                    seq,
                    at: jiff::Timestamp::UNIX_EPOCH,
                    input_id: None,
                    item: Item::user(format!("{name} {seq}")),
                })
                .collect(),
            processed_inputs: Vec::new(),
            effects: Vec::new(),
            events: Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_window_of_a_view_is_its_tail_whatever_thread_holds_the_entries() {
        let store = MemoryStore::new();
        // root (5 own) <- mid forks at 3, has 4 own <- leaf forks at 6 of mid's view, has 3 own.
        for commit in [
            thread("root", None, 5),
            thread("mid", Some(("root", 3)), 4),
            thread("leaf", Some(("mid", 6)), 3),
        ] {
            store.commit(&commit).await.unwrap();
        }
        for name in ["root", "mid", "leaf"] {
            let record = store
                .load_record(&ThreadId::new(name).unwrap())
                .await
                .unwrap()
                .unwrap();
            let whole = load_view(&store, &record).await.unwrap();
            assert_eq!(whole.len() as u64, record.view_len());
            for from in 0..=whole.len() + 1 {
                let window = load_view_from(&store, &record, from as u64).await.unwrap();
                let texts = |v: &[Arc<HistoryEntry>]| -> Vec<String> {
                    v.iter().map(|e| format!("{:?}", e.item)).collect()
                };
                assert_eq!(
                    texts(&window),
                    texts(&whole[from.min(whole.len())..]),
                    "{name} from {from}"
                );
            }
        }
    }
}
