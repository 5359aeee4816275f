//! Where knowledge is kept: the [`KnowledgeStore`] trait, its error, and the in-memory store.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;

use super::entry::{key_of, InvalidEntry, KnowledgeEntry};

/// Why a knowledge store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KnowledgeStoreError {
    /// The entry is not at the version the write expected: someone else wrote or removed it
    /// first. Read it again and reapply the change; retrying the same write fails again.
    #[error("knowledge entry `{name}` changed: expected version {expected}, {}; read it again and reapply the change", found_text(.found))]
    Conflict {
        /// The entry's name, as the write had it.
        name: String,
        /// The version the write expected.
        expected: u64,
        /// The stored version (`None`: no such entry).
        found: Option<u64>,
    },
    /// The entry breaks a limit; it was not written.
    #[error("knowledge entry not written: {0}")]
    Invalid(#[from] InvalidEntry),
    /// The store could not be reached or written; retrying may help.
    #[error("knowledge store unavailable: {0}")]
    Unavailable(String),
    /// A stored entry could not be read back.
    #[error("stored knowledge is corrupt: {0}")]
    Corrupt(String),
}

fn found_text(found: &Option<u64>) -> String {
    match found {
        Some(version) => format!("found version {version}"),
        None => "but there is no such entry".to_owned(),
    }
}

impl KnowledgeStoreError {
    /// True when the same operation may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, KnowledgeStoreError::Unavailable(_))
    }
}

/// A backend for the knowledge registry: entries by key (the name lowercased), each written
/// whole with an optimistic version check. Small on purpose, like the thread store; the
/// in-memory [`super::Knowledge`] does the searching.
#[async_trait]
pub trait KnowledgeStore: Send + Sync + std::fmt::Debug {
    /// Every readable entry, in key order. A store that finds an unreadable entry leaves it out
    /// and reports it (each store says how) rather than failing the whole load.
    async fn load_all(&self) -> Result<Vec<KnowledgeEntry>, KnowledgeStoreError>;

    /// The entry named `name` (in any case), if there is one.
    async fn get(&self, name: &str) -> Result<Option<KnowledgeEntry>, KnowledgeStoreError>;

    /// Writes `entry` (validated first) under its key and returns its new version: 1 for a new
    /// entry, the stored version plus one otherwise; the stored entry carries it. With
    /// `expected_version` the stored entry must be at that version, or the write is a
    /// [`KnowledgeStoreError::Conflict`] (a missing entry is at no version); `None` creates the
    /// entry or overwrites it, whatever its version.
    async fn put(
        &self,
        entry: &KnowledgeEntry,
        expected_version: Option<u64>,
    ) -> Result<u64, KnowledgeStoreError>;

    /// Removes the entry named `name` (in any case); false if there was none.
    async fn remove(&self, name: &str) -> Result<bool, KnowledgeStoreError>;
}

/// The version a write of `name` gets, given the stored version, or the conflict.
pub(super) fn next_version(
    name: &str,
    stored: Option<u64>,
    expected: Option<u64>,
) -> Result<u64, KnowledgeStoreError> {
    match expected {
        Some(expected) if stored != Some(expected) => Err(KnowledgeStoreError::Conflict {
            name: name.to_owned(),
            expected,
            found: stored,
        }),
        _ => Ok(stored.map_or(1, |v| v + 1)),
    }
}

/// A [`KnowledgeStore`] in memory, for tests and for runs that keep nothing.
#[derive(Debug, Default)]
pub struct MemoryKnowledgeStore {
    entries: Mutex<BTreeMap<String, KnowledgeEntry>>,
}

impl MemoryKnowledgeStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> MutexGuard<'_, BTreeMap<String, KnowledgeEntry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl KnowledgeStore for MemoryKnowledgeStore {
    async fn load_all(&self) -> Result<Vec<KnowledgeEntry>, KnowledgeStoreError> {
        Ok(self.entries().values().cloned().collect())
    }

    async fn get(&self, name: &str) -> Result<Option<KnowledgeEntry>, KnowledgeStoreError> {
        Ok(self.entries().get(&key_of(name)).cloned())
    }

    async fn put(
        &self,
        entry: &KnowledgeEntry,
        expected_version: Option<u64>,
    ) -> Result<u64, KnowledgeStoreError> {
        entry.validate()?;
        let mut entries = self.entries();
        let key = entry.key();
        let version = next_version(
            &entry.name,
            entries.get(&key).map(|e| e.version),
            expected_version,
        )?;
        let mut stored = entry.clone();
        stored.version = version;
        entries.insert(key, stored);
        Ok(version)
    }

    async fn remove(&self, name: &str) -> Result<bool, KnowledgeStoreError> {
        Ok(self.entries().remove(&key_of(name)).is_some())
    }
}
