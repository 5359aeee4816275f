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

mod file;
mod memory;

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;

pub use file::FileStore;
pub use memory::MemoryStore;

use crate::commit::Commit;
use crate::effect::PendingEffect;
use crate::history::HistoryEntry;
use crate::ids::{EffectId, InputId, ThreadId};
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

    /// Which of `input_ids` the thread has already processed.
    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError>;

    /// Writes a slice's result atomically: the record (checking `expected_version`), the new
    /// entries, the processed input ids and the outbox effects. All of it or none of it.
    async fn commit(&self, commit: &Commit) -> Result<(), StoreError>;

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
        })
        .await
    }
}

/// The history a thread sees: its ancestors' entries up to each fork point, then its own.
pub async fn load_view(
    store: &dyn ThreadStore,
    record: &ThreadRecord,
) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
    let inherited = record.parent.as_ref().map_or(0, |p| p.fork_at);
    let mut segments = vec![(record.id.clone(), record.history_len)];
    if let Some(parent) = &record.parent {
        collect_segments(store, &parent.thread_id, inherited, &mut segments).await?;
    }
    assemble(store, segments).await
}

/// The first `limit` entries of a thread's view (what a child forked at `limit` inherits).
pub async fn load_view_prefix(
    store: &dyn ThreadStore,
    thread_id: &ThreadId,
    limit: u64,
) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
    let mut segments = Vec::new();
    collect_segments(store, thread_id, limit, &mut segments).await?;
    assemble(store, segments).await
}

/// Walks up from `thread_id`, pushing `(thread, own entries to take)` for the first `limit`
/// entries of its view, innermost first.
async fn collect_segments(
    store: &dyn ThreadStore,
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

async fn assemble(
    store: &dyn ThreadStore,
    segments: Vec<(ThreadId, u64)>,
) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
    let mut view = Vec::new();
    for (thread_id, upto) in segments.into_iter().rev() {
        if upto > 0 {
            view.extend(store.load_entries(&thread_id, upto).await?);
        }
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
