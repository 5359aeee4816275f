//! A store in memory: fast, shared by tasks, gone when the process ends.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::{check_version, Entries, StoreError, ThreadStore};
use crate::commit::Commit;
use crate::effect::{OutputEvent, PendingEffect};
use crate::history::HistoryEntry;
use crate::ids::{CallId, EffectId, InputId, ThreadId};
use crate::input::{Answer, AnswerTo};
use crate::state::ThreadRecord;

#[derive(Debug)]
pub(crate) struct ThreadData {
    pub(crate) record: ThreadRecord,
    /// Shared with the slices that read them ([`super::Entries`]).
    pub(crate) entries: Arc<Vec<Arc<HistoryEntry>>>,
    pub(crate) processed: HashSet<InputId>,
    pub(crate) outbox: Vec<PendingEffect>,
}

impl ThreadData {
    pub(crate) fn apply(&mut self, commit: &Commit) {
        self.record = commit.record.clone();
        append(
            Arc::make_mut(&mut self.entries),
            commit.new_entries.iter().cloned().map(Arc::new),
        );
        self.processed
            .extend(commit.processed_inputs.iter().cloned());
        self.outbox.extend(commit.effects.iter().cloned());
    }

    pub(crate) fn new(commit: &Commit) -> Self {
        let mut data = ThreadData {
            record: commit.record.clone(),
            entries: Arc::default(),
            processed: HashSet::new(),
            outbox: Vec::new(),
        };
        data.apply(commit);
        data
    }
}

/// Appends `new` to `list`, keeping room to grow: a list that must grow gets half its length
/// again, so the turn after a long history was written (or read from disk) appends in place
/// instead of copying every entry's pointer into a list twice the size (amortized the same;
/// see docs/benchmarks.md, "Where the embedded turn grows with the history").
pub(crate) fn append(
    list: &mut Vec<Arc<HistoryEntry>>,
    new: impl ExactSizeIterator<Item = Arc<HistoryEntry>>,
) {
    let needed = list.len() + new.len();
    if needed > list.capacity() {
        list.reserve_exact(needed + needed / 2 - list.len());
    }
    list.extend(new);
}

/// The shared state of [`MemoryStore`] and the cache of [`super::FileStore`].
#[derive(Debug, Default)]
pub(crate) struct Threads {
    pub(crate) by_id: HashMap<ThreadId, ThreadData>,
    pub(crate) order: Vec<ThreadId>,
    /// The output events each thread showed ([`MemoryStore`] only: the file store keeps them on
    /// disk).
    pub(crate) events: HashMap<ThreadId, Vec<OutputEvent>>,
    /// Every thread's place in list order (the file store's threads put away too).
    pub(crate) listing: super::listing::Listing,
}

impl Threads {
    pub(crate) fn commit(&mut self, commit: &Commit) -> Result<(), StoreError> {
        check_version(commit, self.by_id.get(&commit.thread_id).map(|d| &d.record))?;
        let before = self
            .by_id
            .get(&commit.thread_id)
            .map(|d| d.record.updated_at);
        self.listing.put(before, &commit.record);
        match self.by_id.get_mut(&commit.thread_id) {
            Some(data) => data.apply(commit),
            None => {
                self.order.push(commit.thread_id.clone());
                self.by_id
                    .insert(commit.thread_id.clone(), ThreadData::new(commit));
            }
        }
        Ok(())
    }

    /// The thread's entries with `from <= seq < upto`.
    pub(crate) fn entries(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Vec<Arc<HistoryEntry>> {
        self.by_id
            .get(thread_id)
            .map(|d| {
                let n = usize::try_from(upto)
                    .unwrap_or(usize::MAX)
                    .min(d.entries.len());
                let first = usize::try_from(from).unwrap_or(usize::MAX).min(n);
                d.entries[first..n].to_vec()
            })
            .unwrap_or_default()
    }

    /// The thread's entries with `from <= seq < upto`, sharing the list.
    pub(crate) fn shared(&self, thread_id: &ThreadId, from: u64, upto: u64) -> Entries {
        self.by_id
            .get(thread_id)
            .map(|d| Entries::shared(&d.entries, from, upto))
            .unwrap_or_default()
    }

    pub(crate) fn processed(&self, thread_id: &ThreadId, ids: &[InputId]) -> HashSet<InputId> {
        match self.by_id.get(thread_id) {
            Some(d) => ids
                .iter()
                .filter(|id| d.processed.contains(*id))
                .cloned()
                .collect(),
            None => HashSet::new(),
        }
    }

    pub(crate) fn complete(&mut self, thread_id: &ThreadId, ids: &[EffectId]) -> bool {
        match self.by_id.get_mut(thread_id) {
            Some(d) => {
                let before = d.outbox.len();
                d.outbox.retain(|e| !ids.contains(&e.id));
                d.outbox.len() != before
            }
            None => false,
        }
    }

    pub(crate) fn outbox(&self) -> Vec<(ThreadId, PendingEffect)> {
        self.order
            .iter()
            .filter_map(|id| self.by_id.get(id))
            .flat_map(|d| d.outbox.iter().map(|e| (d.record.id.clone(), e.clone())))
            .collect()
    }
}

/// A [`ThreadStore`] in memory.
#[derive(Debug, Default, Clone)]
pub struct MemoryStore {
    threads: Arc<Mutex<Threads>>,
    answers: Arc<super::AnswerBook>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Threads> {
        // A panic while holding the lock cannot leave a half-applied commit (apply does not
        // panic), so a poisoned lock still holds consistent data.
        self.threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl ThreadStore for MemoryStore {
    async fn load_record(&self, thread_id: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
        Ok(self.lock().by_id.get(thread_id).map(|d| d.record.clone()))
    }

    async fn load_entries(
        &self,
        thread_id: &ThreadId,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        Ok(self.lock().entries(thread_id, 0, upto))
    }

    async fn load_entries_between(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<Vec<Arc<HistoryEntry>>, StoreError> {
        Ok(self.lock().entries(thread_id, from, upto))
    }

    async fn load_entries_shared(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<Entries, StoreError> {
        Ok(self.lock().shared(thread_id, from, upto))
    }

    async fn processed(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<HashSet<InputId>, StoreError> {
        Ok(self.lock().processed(thread_id, input_ids))
    }

    async fn commit(&self, commit: &Commit) -> Result<(), StoreError> {
        let mut threads = self.lock();
        threads.commit(commit)?;
        if !commit.events.is_empty() {
            threads
                .events
                .entry(commit.thread_id.clone())
                .or_default()
                .extend(commit.events.iter().cloned());
        }
        Ok(())
    }

    async fn list_threads(
        &self,
        query: &crate::state::ThreadQuery,
    ) -> Result<crate::state::ThreadPage, StoreError> {
        let threads = self.lock();
        threads.listing.page(query, |id| {
            Ok(threads
                .by_id
                .get(id)
                .map(|d| crate::state::ThreadSummary::of(&d.record)))
        })
    }

    /// Every event the thread showed is kept, for as long as the store.
    async fn events_after(
        &self,
        thread_id: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<OutputEvent>, StoreError> {
        let threads = self.lock();
        let Some(events) = threads.events.get(thread_id) else {
            return Ok(Vec::new());
        };
        // In order of their numbers (which start past 1 for a thread moved here).
        let from = events.partition_point(|e| e.seq.is_some_and(|seq| seq <= after));
        Ok(events[from..].iter().take(limit).cloned().collect())
    }

    async fn complete_effects(
        &self,
        thread_id: &ThreadId,
        effect_ids: &[EffectId],
    ) -> Result<(), StoreError> {
        self.lock().complete(thread_id, effect_ids);
        Ok(())
    }

    async fn outbox(&self) -> Result<Vec<(ThreadId, PendingEffect)>, StoreError> {
        Ok(self.lock().outbox())
    }

    async fn thread_ids(&self) -> Result<Vec<ThreadId>, StoreError> {
        Ok(self.lock().order.clone())
    }

    async fn claim_answer(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<Option<Answer>, StoreError> {
        Ok(self.answers.claim(thread_id, answer))
    }

    async fn standing_answer(
        &self,
        thread_id: &ThreadId,
        call_id: &CallId,
        to: AnswerTo,
    ) -> Result<Option<Answer>, StoreError> {
        Ok(self.answers.standing(thread_id, call_id, to))
    }

    async fn withdraw_answer(
        &self,
        thread_id: &ThreadId,
        answer: &Answer,
    ) -> Result<(), StoreError> {
        self.answers.withdraw(thread_id, answer);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Item;

    fn entries(from: u64, count: u64) -> std::vec::IntoIter<Arc<HistoryEntry>> {
        let list: Vec<_> = (from..from + count)
            .map(|seq| {
                Arc::new(HistoryEntry {
                    seq,
                    at: jiff::Timestamp::UNIX_EPOCH,
                    input_id: None,
                    item: Item::user("hi"),
                })
            })
            .collect();
        list.into_iter()
    }

    #[tokio::test]
    async fn events_are_found_by_number_also_when_they_do_not_start_at_one() {
        // A thread moved here had shown 50 events elsewhere.
        let store = MemoryStore::new();
        let id = ThreadId::new("moved").unwrap();
        let mut record = ThreadRecord::new(id.clone(), "a", None, jiff::Timestamp::UNIX_EPOCH);
        record.version = 1;
        record.last_event_seq = 52;
        let events: Vec<OutputEvent> = [51, 52]
            .into_iter()
            .map(|seq| OutputEvent {
                seq: Some(seq),
                ..OutputEvent::new(
                    id.clone(),
                    jiff::Timestamp::UNIX_EPOCH,
                    crate::effect::OutputKind::ThreadClosed {},
                )
            })
            .collect();
        store
            .commit(&Commit {
                thread_id: id.clone(),
                expected_version: None,
                record,
                new_entries: Vec::new(),
                processed_inputs: Vec::new(),
                effects: Vec::new(),
                events,
            })
            .await
            .unwrap();
        let seqs = |after| {
            let store = store.clone();
            let id = id.clone();
            async move {
                store
                    .events_after(&id, after, 10)
                    .await
                    .unwrap()
                    .iter()
                    .map(|e| e.seq.unwrap())
                    .collect::<Vec<_>>()
            }
        };
        assert_eq!(seqs(0).await, [51, 52]);
        assert_eq!(seqs(50).await, [51, 52]);
        assert_eq!(seqs(51).await, [52]);
        assert!(seqs(52).await.is_empty());
    }

    #[test]
    fn the_turn_after_a_long_history_appends_in_place() {
        let mut list = Vec::new();
        append(&mut list, entries(0, 10_000));
        assert_eq!(list.len(), 10_000);
        assert!(
            list.capacity() >= 15_000,
            "no room kept: {}",
            list.capacity()
        );
        let before = list.as_ptr();
        append(&mut list, entries(10_000, 2));
        assert_eq!(list.as_ptr(), before, "the list was copied to grow");
        assert_eq!(list[10_001].seq, 10_001);
        // Room runs out at half again the length; then it grows by half again once more.
        append(&mut list, entries(10_002, 4_998));
        assert_eq!(list.as_ptr(), before);
        append(&mut list, entries(15_000, 1));
        assert!(list.capacity() >= 15_001 + 7_500, "{}", list.capacity());
    }
}
