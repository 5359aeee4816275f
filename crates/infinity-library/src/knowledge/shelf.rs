//! The `knowledge` category's shelf: the in-memory copy of the deployment's knowledge its tools
//! (and `meta`'s) search, and the one write they ask for ([`KnowledgeOp`]).

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::fresh;
use crate::knowledge::{Knowledge, KnowledgeEntry, KnowledgeStore, KnowledgeStoreError};
use infinity_agent_core::library::{Shelf, ShelfError};

/// The category's name, which its effects carry.
pub const CATEGORY: &str = "knowledge";

/// A write of the `knowledge` category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum KnowledgeOp {
    /// Creates or replaces a knowledge entry (by its name, in any case).
    SaveKnowledge {
        /// The entry.
        entry: KnowledgeEntry,
    },
}

/// The knowledge store and the copy the tools read.
#[derive(Debug)]
pub struct KnowledgeShelf {
    store: Arc<dyn KnowledgeStore>,
    copy: RwLock<Knowledge>,
    loaded_at: Mutex<Option<Instant>>,
    /// Reload the copy when it is older than this (another process may have written); `None`:
    /// this process is the only writer, so the copy is loaded once.
    refresh: Option<Duration>,
}

impl KnowledgeShelf {
    /// Knowledge kept in `store`, the copy reloaded when older than `refresh`.
    pub fn new(store: Arc<dyn KnowledgeStore>, refresh: Option<Duration>) -> Self {
        Self {
            store,
            copy: RwLock::new(Knowledge::new()),
            loaded_at: Mutex::new(None),
            refresh,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn KnowledgeStore> {
        &self.store
    }

    /// The copy (`None` until it was loaded once).
    pub fn copy(&self) -> Option<RwLockReadGuard<'_, Knowledge>> {
        self.loaded_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()?;
        Some(self.copy.read().unwrap_or_else(PoisonError::into_inner))
    }

    async fn save(&self, entry: &KnowledgeEntry) -> Result<(), KnowledgeStoreError> {
        let mut entry = entry.clone();
        // A re-performed save keeps the first write's creation time.
        if let Some(old) = self.store.get(&entry.name).await? {
            entry.created_at = old.created_at;
        }
        entry.version = self.store.put(&entry, None).await?;
        let mut copy = self.copy.write().unwrap_or_else(PoisonError::into_inner);
        copy.upsert(entry)?;
        Ok(())
    }
}

#[async_trait]
impl Shelf for KnowledgeShelf {
    fn category(&self) -> &'static str {
        CATEGORY
    }

    /// The `knowledge` tools and `meta`'s search read it.
    fn read_by(&self) -> &'static [&'static str] {
        &[CATEGORY, "meta"]
    }

    async fn prepare(&self) -> Result<(), ShelfError> {
        if fresh(&self.loaded_at, self.refresh) {
            return Ok(());
        }
        let entries = self
            .store
            .load_all()
            .await
            .map_err(|e| ShelfError::Unavailable(e.to_string()))?;
        let copy = Knowledge::from_entries(entries);
        *self.copy.write().unwrap_or_else(PoisonError::into_inner) = copy;
        *self
            .loaded_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        Ok(())
    }

    async fn perform(&self, op: &serde_json::Value) -> Result<(), ShelfError> {
        let op = KnowledgeOp::deserialize(op)
            .map_err(|e| ShelfError::Refused(format!("not a knowledge write: {e}")))?;
        match op {
            KnowledgeOp::SaveKnowledge { entry } => self.save(&entry).await.map_err(|e| match e {
                KnowledgeStoreError::Unavailable(why) => ShelfError::Unavailable(why),
                other => ShelfError::Refused(other.to_string()),
            }),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
