//! Which threads a [`super::FileStore`] keeps in memory: the ones used lately, up to
//! [`RESIDENT_THREADS`]. The others are on disk only, each remembered by the lengths of its
//! committed files (tens of bytes), so an idle thread costs memory for its id and those, not
//! for its history; its next use reads its folder again.

use std::collections::HashMap;
use std::path::Path;

use super::{load_thread, Inner};
use crate::effect::PendingEffect;
use crate::ids::ThreadId;
use crate::store::StoreError;

/// How many threads stay in memory after their last use.
pub(super) const RESIDENT_THREADS: usize = 512;

/// When each resident thread was last used.
#[derive(Debug, Default)]
pub(super) struct Recency {
    clock: u64,
    used: HashMap<ThreadId, u64>,
}

impl Inner {
    /// Makes a thread the store has resident (reading its folder if it was put away) and marks
    /// it used. False for a thread the store does not have.
    pub(super) fn resident(
        &mut self,
        threads_dir: &Path,
        id: &ThreadId,
    ) -> Result<bool, StoreError> {
        if !self.threads.by_id.contains_key(id) {
            let Some(disk) = self.disk.get(id) else {
                return Ok(false);
            };
            if !disk.put_away {
                return Ok(false);
            }
            let (data, disk) = load_thread(&threads_dir.join(id.as_str()))?;
            self.threads.by_id.insert(id.clone(), data);
            self.disk.insert(id.clone(), disk);
        }
        self.recency.clock += 1;
        self.recency.used.insert(id.clone(), self.recency.clock);
        self.put_away_beyond(RESIDENT_THREADS);
        Ok(true)
    }

    /// Puts the least recently used threads away until at most `limit` are resident.
    pub(super) fn put_away_beyond(&mut self, limit: usize) {
        while self.threads.by_id.len() > limit {
            let Some(oldest) = self
                .threads
                .by_id
                .keys()
                .min_by_key(|id| self.recency.used.get(*id).copied().unwrap_or(0))
                .cloned()
            else {
                return;
            };
            self.recency.used.remove(&oldest);
            let Some(data) = self.threads.by_id.remove(&oldest) else {
                return;
            };
            if let Some(disk) = self.disk.get_mut(&oldest) {
                disk.put_away = true;
                disk.outbox_pending = !data.outbox.is_empty();
                disk.children = Vec::new();
            }
        }
    }

    /// A thread's outbox: from memory, or for a thread put away with effects pending, from its
    /// folder (without making it resident).
    pub(super) fn outbox_of(
        &self,
        threads_dir: &Path,
        id: &ThreadId,
    ) -> Result<Vec<PendingEffect>, StoreError> {
        if let Some(data) = self.threads.by_id.get(id) {
            return Ok(data.outbox.clone());
        }
        match self.disk.get(id) {
            Some(disk) if disk.put_away && disk.outbox_pending => {
                Ok(load_thread(&threads_dir.join(id.as_str()))?.0.outbox)
            }
            _ => Ok(Vec::new()),
        }
    }
}
