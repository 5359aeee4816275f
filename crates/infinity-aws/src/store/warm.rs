//! What a slice reads, in as few requests as the layout allows, and what a warm Lambda instance
//! keeps of it for the thread's next slice.
//!
//! A slice needs the record, which of its inputs were processed, the entries of its view from
//! the newest summary's cut ([`ThreadRecord::view_start`]), and on Lambda the thread's outbox.
//! The record and the markers are one `BatchGetItem` (their keys are known before anything is
//! read). The entries are a query of `E#<from>..E#<history_len>`, and the outbox a query of
//! `O#`; a warm instance that kept the thread skips both when it can:
//!
//! - **Entries** never change once a commit wrote them (a commit is one transaction, and the
//!   record's `history_len` says which exist), so the entries kept from an earlier slice are
//!   still right; only those past them are read. At the version this instance committed last,
//!   none are.
//! - **The outbox** is known empty when the record is still at the version whose effects this
//!   instance performed: every outbox item comes from a commit (which changes the version) or
//!   from an operator's retry, whose nudge makes the handler [`DynamoThreadStore::forget`] the
//!   thread first.
//!
//! Everything kept is checked against the record read at the start of every slice, so nothing
//! kept is ever stale; what is kept is bounded by bytes, least recently used first out.
//!
//! **Outbox deletes batched.** When the handler asks for it, deleting a performed outbox item
//! (one request per slice) waits for the end of the Lambda batch and goes out with the other
//! threads' in `BatchWriteItem`s of 25 ([`DynamoThreadStore::flush_outbox_deletes`]). The next
//! message of a thread is not delivered before the batch ends (FIFO), so no slice of the thread
//! runs in between; an instance that stops before the flush leaves items whose effects are
//! performed again by the thread's next slice, as after any crash between performing and
//! deleting (effects are at least once, inputs dedupe by id).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use infinity_agent_core::commit::Commit;
use infinity_agent_core::history::HistoryEntry;
use infinity_agent_core::ids::{InputId, ThreadId};
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{load_view_from, SliceState, StoreError, ThreadStore};

use super::blob::Parts;
use super::{entry_sk, pk, sdk_error, unavailable, DynamoThreadStore};

/// DynamoDB's limit on keys in one `BatchGetItem`.
const MAX_BATCH_GET: usize = 100;

/// What an instance keeps of the threads it ran, and the outbox deletes it holds back.
#[derive(Debug, Default)]
pub(super) struct Warm {
    /// The most bytes of entries kept (0: nothing is kept).
    budget: usize,
    used: usize,
    clock: u64,
    threads: HashMap<ThreadId, Kept>,
    /// `Some` while outbox deletes wait for [`DynamoThreadStore::flush_outbox_deletes`].
    deferred: Option<Vec<(String, String)>>,
}

/// One thread as an instance last saw it.
#[derive(Debug)]
struct Kept {
    /// The record version this matches.
    version: u64,
    /// The thread's own seq of `entries[0]`.
    first: u64,
    /// The entries, each with its stored size.
    entries: Vec<(Arc<HistoryEntry>, usize)>,
    bytes: usize,
    /// True: the thread's outbox is empty at `version` (once its effects were performed).
    outbox_clear: bool,
    /// The outbox item `version`'s commit wrote, if any: whether it has parts.
    outbox_parts: Option<bool>,
    used_at: u64,
}

impl Warm {
    fn touch(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// Takes what is kept of a thread out (a slice reading it puts it back with [`Warm::keep`]).
    fn take(&mut self, thread_id: &ThreadId) -> Option<Kept> {
        let kept = self.threads.remove(thread_id)?;
        self.used -= kept.bytes;
        Some(kept)
    }

    fn forget(&mut self, thread_id: &ThreadId) {
        self.take(thread_id);
    }

    fn keep(&mut self, thread_id: &ThreadId, mut kept: Kept) {
        self.forget(thread_id);
        if kept.bytes > self.budget {
            return;
        }
        kept.used_at = self.touch();
        self.used += kept.bytes;
        self.threads.insert(thread_id.clone(), kept);
        while self.used > self.budget {
            let Some(oldest) = self
                .threads
                .iter()
                .min_by_key(|(_, k)| k.used_at)
                .map(|(id, _)| id.clone())
            else {
                break;
            };
            self.forget(&oldest);
        }
    }
}

impl Kept {
    /// Nothing kept yet of a thread whose entries from `first` on are to be read.
    fn empty(first: u64) -> Self {
        Self {
            version: 0,
            first,
            entries: Vec::new(),
            bytes: 0,
            outbox_clear: false,
            outbox_parts: None,
            used_at: 0,
        }
    }

    fn push(&mut self, entry: Arc<HistoryEntry>, bytes: usize) {
        self.bytes += bytes;
        self.entries.push((entry, bytes));
    }

    /// The seq after the last kept entry.
    fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }
}

impl DynamoThreadStore {
    /// Keeps up to `bytes` of the threads' views between slices (a Lambda instance does; 0, the
    /// default, keeps nothing).
    pub fn keeping_views(self, bytes: usize) -> Self {
        self.warm_lock().budget = bytes;
        self
    }

    /// Holds outbox deletes back until [`DynamoThreadStore::flush_outbox_deletes`].
    pub fn deferring_outbox_deletes(self) -> Self {
        self.warm_lock().deferred = Some(Vec::new());
        self
    }

    /// Drops what this store kept of a thread: its next slice reads everything (the handler does
    /// this when an operator nudges a thread after putting effects back in its outbox).
    pub fn forget(&self, thread_id: &ThreadId) {
        self.warm_lock().forget(thread_id);
    }

    /// Sends the outbox deletes held back, in batches of 25.
    pub async fn flush_outbox_deletes(&self) -> Result<(), StoreError> {
        let held = match self.warm_lock().deferred.as_mut() {
            Some(held) => std::mem::take(held),
            None => return Ok(()),
        };
        self.delete_keys(&held, "clearing outboxes").await
    }

    fn warm_lock(&self) -> std::sync::MutexGuard<'_, Warm> {
        self.warm
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// After a commit went through: what this instance keeps of the thread now. `sizes`: the
    /// stored size of each new entry; `outbox_parts`: whether the commit wrote an outbox item,
    /// and if so whether it has parts.
    pub(super) fn committed(&self, commit: &Commit, sizes: &[usize], outbox_parts: Option<bool>) {
        let mut warm = self.warm_lock();
        if warm.budget == 0 {
            return;
        }
        let kept = match warm.take(&commit.thread_id) {
            Some(kept) => Some(kept),
            // A thread this slice created: all of its own entries are in the commit.
            None if commit.expected_version.is_none() => Some(Kept::empty(0)),
            None => None,
        };
        let Some(mut kept) = kept.filter(|k| {
            k.entries.is_empty() && commit.expected_version.is_none()
                || Some(k.version) == commit.expected_version
        }) else {
            return;
        };
        if commit
            .new_entries
            .first()
            .is_some_and(|e| e.seq != kept.end())
        {
            return;
        }
        for (entry, size) in commit.new_entries.iter().zip(sizes) {
            kept.push(Arc::new(entry.clone()), *size);
        }
        kept.version = commit.record.version;
        kept.outbox_clear = outbox_parts.is_none();
        kept.outbox_parts = outbox_parts;
        trim(&mut kept, &commit.record);
        warm.keep(&commit.thread_id, kept);
    }

    /// After the effects of `version`'s commit were performed: true when the delete of its
    /// outbox item was held back (it has no parts, and deletes are deferred).
    pub(super) fn performed(&self, thread_id: &ThreadId, version: u64) -> bool {
        let mut warm = self.warm_lock();
        let mut parts = None;
        if let Some(kept) = warm.threads.get_mut(thread_id) {
            if kept.version == version {
                kept.outbox_clear = true;
                parts = kept.outbox_parts;
            }
        }
        match (parts, warm.deferred.as_mut()) {
            (Some(false), Some(held)) => {
                held.push((pk(thread_id), format!("O#{version:020}")));
                true
            }
            _ => false,
        }
    }

    /// [`ThreadStore::load_slice`]: the record and markers in one request, then what is not
    /// kept.
    pub(super) async fn read_slice(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
        with_outbox: bool,
    ) -> Result<SliceState, StoreError> {
        let (record, processed) = self.record_and_markers(thread_id, input_ids).await?;
        let Some(record) = record else {
            return Ok(SliceState {
                processed,
                outbox: with_outbox.then(Vec::new),
                ..SliceState::default()
            });
        };
        let view_start = record.view_start();
        let inherited = record.parent.as_ref().map_or(0, |p| p.fork_at);
        let kept = self.warm_lock().take(thread_id);
        let kept = kept.filter(|k| k.end() <= record.history_len);
        let outbox = match (&kept, with_outbox) {
            (Some(k), true) if k.version == record.version && k.outbox_clear => Some(Vec::new()),
            (_, true) => Some(self.thread_outbox(thread_id).await?),
            (_, false) => None,
        };
        if view_start < inherited || self.warm_lock().budget == 0 {
            // The window reaches into an ancestor's entries: read as every store does.
            let view = load_view_from(self, &record, view_start).await?;
            return Ok(SliceState {
                record: Some(record),
                view: view.into(),
                view_start,
                processed,
                outbox,
            });
        }
        let own_from = view_start - inherited;
        let mut kept = match kept {
            Some(k) if k.first <= own_from => k,
            _ => Kept::empty(own_from),
        };
        for (entry, size) in self
            .entries_between(thread_id, kept.end(), record.history_len)
            .await?
        {
            kept.push(entry, size);
        }
        if kept.version != record.version {
            kept.outbox_clear = outbox.as_ref().is_some_and(Vec::is_empty);
            kept.outbox_parts = None;
            kept.version = record.version;
        }
        trim(&mut kept, &record);
        let skip = (own_from - kept.first) as usize;
        let view = kept.entries[skip..]
            .iter()
            .map(|(e, _)| Arc::clone(e))
            .collect();
        self.warm_lock().keep(thread_id, kept);
        Ok(SliceState {
            record: Some(record),
            view,
            view_start,
            processed,
            outbox,
        })
    }

    /// The record and which of `input_ids` have markers: one `BatchGetItem` (more only for a
    /// hundred inputs or more).
    async fn record_and_markers(
        &self,
        thread_id: &ThreadId,
        input_ids: &[InputId],
    ) -> Result<(Option<ThreadRecord>, HashSet<InputId>), StoreError> {
        let pk = pk(thread_id);
        let key = |sk: String| {
            HashMap::from([
                ("pk".to_owned(), AttributeValue::S(pk.clone())),
                ("sk".to_owned(), AttributeValue::S(sk)),
            ])
        };
        let unique: HashSet<&InputId> = input_ids.iter().collect();
        let mut keys = vec![key("R".to_owned())];
        keys.extend(unique.into_iter().map(|id| key(format!("P#{id}"))));
        let mut record_item = None;
        let mut processed = HashSet::new();
        for item in self.get_keys(keys, "reading the thread").await? {
            match item.get("sk") {
                Some(AttributeValue::S(sk)) if sk == "R" => {
                    record_item = Some(item).filter(|item| !super::is_placeholder(item));
                }
                Some(AttributeValue::S(sk)) => {
                    if let Some(id) = sk.strip_prefix("P#").and_then(|s| InputId::new(s).ok()) {
                        processed.insert(id);
                    }
                }
                _ => {}
            }
        }
        let Some(item) = record_item else {
            return Ok((None, processed));
        };
        let record: ThreadRecord = self.read_body(&pk, &item, "thread record").await?;
        self.remember_record_parts(thread_id, record.version, Parts::of(&item));
        Ok((Some(record), processed))
    }

    /// The items of `keys` that exist (strongly consistent), in `BatchGetItem`s of 100.
    pub(super) async fn get_keys(
        &self,
        keys: Vec<HashMap<String, AttributeValue>>,
        what: &str,
    ) -> Result<Vec<HashMap<String, AttributeValue>>, StoreError> {
        let mut found = Vec::new();
        for chunk in keys.chunks(MAX_BATCH_GET) {
            let mut request = Some(
                KeysAndAttributes::builder()
                    .set_keys(Some(chunk.to_vec()))
                    .consistent_read(true)
                    .build()
                    .map_err(|e| unavailable("building a read", e))?,
            );
            while let Some(keys) = request.take() {
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(&*self.table, keys)
                    .send()
                    .await
                    .map_err(|e| sdk_error(what, e))?;
                if let Some(items) = out.responses().and_then(|r| r.get(&*self.table)) {
                    found.extend(items.iter().cloned());
                }
                request = out
                    .unprocessed_keys()
                    .and_then(|u| u.get(&*self.table))
                    .filter(|k| !k.keys().is_empty())
                    .cloned();
            }
        }
        Ok(found)
    }

    /// The own entries `from <= seq < upto`, each with its stored size: one query (paged for
    /// long ranges), none for an empty range.
    pub(super) async fn entries_between(
        &self,
        thread_id: &ThreadId,
        from: u64,
        upto: u64,
    ) -> Result<Vec<(Arc<HistoryEntry>, usize)>, StoreError> {
        if from >= upto {
            return Ok(Vec::new());
        }
        let pk = pk(thread_id);
        let items = self
            .query_all(&pk, &entry_sk(from), &entry_sk(upto - 1))
            .await?;
        let mut entries = Vec::with_capacity(items.len());
        for item in &items {
            let entry: HistoryEntry = self.read_body(&pk, item, "history entry").await?;
            let size = match item.get("body") {
                Some(AttributeValue::S(body)) => body.len(),
                _ => super::INLINE_LIMIT,
            };
            entries.push((Arc::new(entry), size));
        }
        if entries.len() as u64 != upto - from {
            return Err(super::corrupt(
                "history",
                format!(
                    "thread {thread_id} has {} entries from {from}, expected {}",
                    entries.len(),
                    upto - from
                ),
            ));
        }
        Ok(entries)
    }
}

/// Drops the kept entries older than the record's window.
fn trim(kept: &mut Kept, record: &ThreadRecord) {
    let inherited = record.parent.as_ref().map_or(0, |p| p.fork_at);
    let own_from = record.view_start().saturating_sub(inherited);
    if own_from > kept.first {
        let drop = ((own_from - kept.first) as usize).min(kept.entries.len());
        kept.bytes -= kept
            .entries
            .drain(..drop)
            .map(|(_, size)| size)
            .sum::<usize>();
        kept.first += drop as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infinity_agent_core::history::Item;

    fn kept(first: u64, n: u64, size: usize) -> Kept {
        let mut kept = Kept::empty(first);
        for seq in first..first + n {
            let entry = HistoryEntry {
                seq,
                at: jiff::Timestamp::UNIX_EPOCH,
                input_id: None,
                item: Item::user("x"),
            };
            kept.push(Arc::new(entry), size);
        }
        kept
    }

    #[test]
    fn the_bytes_kept_are_counted_once_and_the_oldest_go_first() {
        let mut warm = Warm {
            budget: 1_000,
            ..Warm::default()
        };
        let (a, b, c) = (
            ThreadId::new("a").unwrap(),
            ThreadId::new("b").unwrap(),
            ThreadId::new("c").unwrap(),
        );
        warm.keep(&a, kept(0, 4, 100));
        warm.keep(&b, kept(0, 4, 100));
        assert_eq!(warm.used, 800);
        // Read and kept again, slice after slice: the count does not creep.
        for _ in 0..50 {
            let mut again = warm.take(&a).unwrap();
            again.push(Arc::clone(&again.entries[0].0), 0);
            warm.keep(&a, again);
        }
        assert_eq!(warm.used, 800);
        // Over the budget: the least recently used (b) goes.
        warm.keep(&c, kept(0, 3, 100));
        assert!(!warm.threads.contains_key(&b));
        assert_eq!(warm.used, 700);
        // More than the whole budget is not kept at all.
        warm.keep(&b, kept(0, 11, 100));
        assert!(!warm.threads.contains_key(&b));
        assert_eq!(
            warm.used,
            warm.threads.values().map(|k| k.bytes).sum::<usize>()
        );
    }
}
