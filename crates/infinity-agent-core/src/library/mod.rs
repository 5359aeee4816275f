//! [`Library`]: what a host holds for tools that reach beyond a conversation. Each category
//! that needs such a part plugs it in as a [`Shelf`]: the deployment's knowledge (the
//! `knowledge` category, [`knowledge`]), the directory of apps, agents and skills the `meta`
//! category searches ([`directory`]), the machines people connect (the `remote` category,
//! [`remotes`]) and the pages agents publish ([`artifacts`]). The models people switch threads
//! to are the host's own, not a category's.
//!
//! Tools run inside a slice and cannot wait, so they read an in-memory copy a shelf keeps
//! ([`Shelf::prepare`] loads it before a slice whose agent has a category that reads it). Writes
//! are one kind of effect for every shelf ([`crate::effect::Effect::Library`]: the shelf's
//! category and its own operation): committed with the slice, performed after it by the shelf
//! ([`Shelf::perform`]), retried from the outbox until they are done, so a crash loses none and
//! the thread never waits on a store. The host, the engine and the record know shelves only by
//! this trait; a category's tools find their own by type ([`Library::shelf`]).

pub mod artifacts;
pub mod directory;
pub mod knowledge;
mod models;
pub mod remotes;

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLockReadGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::knowledge::{Knowledge, KnowledgeStore};
use directory::{Directory, DirectoryShelf, DirectorySource};
use knowledge::KnowledgeShelf;
pub use models::{AllowedModels, ModelSource, ALLOWED_MODELS_VAR};
use remotes::{RemoteDirectory, RemoteInfo, RemoteShelf};

/// How stale a host's copy of the meta directory may get: agents saved and servers changed
/// meanwhile show from the next reload on.
pub const DIRECTORY_REFRESH: Duration = Duration::from_secs(60);

/// One category's part of a host's library: the copy its tools read, loaded before a slice that
/// needs it, and the writes its effects ask for.
#[async_trait]
pub trait Shelf: Send + Sync + fmt::Debug + 'static {
    /// The category whose writes it performs: the `category` of its effects.
    fn category(&self) -> &'static str;

    /// The categories (`internal_tools:` flags) whose tools read its copy: a slice of an agent
    /// with one of them on loads it first. Empty (the default) means its own category only.
    fn read_by(&self) -> &'static [&'static str] {
        &[]
    }

    /// Loads the copy its tools read, if it is not fresh. An error leaves the old copy (or
    /// none) and is logged by the host; the tools then work on what is there.
    async fn prepare(&self) -> Result<(), String> {
        Ok(())
    }

    /// Performs one of its writes, `op` as its tool put it in the effect.
    async fn perform(&self, op: &serde_json::Value) -> Result<(), ShelfError> {
        Err(ShelfError::Refused(format!(
            "the {} category has no writes, and was asked for {op}",
            self.category()
        )))
    }

    /// Applies an input of its category (a person's comment on a page, for `artifact`) to what
    /// the category keeps on the thread (`notes`, `Null` at first), inside the slice: what the
    /// model is shown, or why the input is dropped.
    fn on_event(
        &self,
        notes: &mut serde_json::Value,
        event: &serde_json::Value,
    ) -> Result<String, String> {
        let _ = (notes, event);
        Err(format!("the {} category takes no inputs", self.category()))
    }

    /// Itself, for [`Library::shelf`].
    fn as_any(&self) -> &dyn Any;
}

/// Why a shelf's write failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShelfError {
    /// Its store cannot be reached: the effect stays in the outbox and is tried again.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The write can never succeed (it breaks a limit its tool checked, or names a category
    /// this host does not keep): logged and dropped.
    #[error("refused: {0}")]
    Refused(String),
}

impl ShelfError {
    /// True when the same write may succeed if tried again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, ShelfError::Unavailable(_))
    }
}

/// The host's library. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct Library {
    shelves: Vec<Arc<dyn Shelf>>,
    models: Option<models::ModelShelf>,
}

/// True when a copy loaded at `loaded_at` needs no reload yet (`refresh` `None`: loaded once).
fn fresh(loaded_at: &Mutex<Option<Instant>>, refresh: Option<Duration>) -> bool {
    let loaded = loaded_at.lock().unwrap_or_else(PoisonError::into_inner);
    match (*loaded, refresh) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(at), Some(every)) => at.elapsed() < every,
    }
}

impl Library {
    /// A library with nothing in it (knowledge tools then say the host has none).
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `shelf` in, in place of one of the same category.
    pub fn with_shelf(mut self, shelf: Arc<dyn Shelf>) -> Self {
        self.shelves.retain(|s| s.category() != shelf.category());
        self.shelves.push(shelf);
        self
    }

    /// The shelf of type `T`, for its category's tools.
    pub fn shelf<T: Shelf>(&self) -> Option<&T> {
        self.shelves
            .iter()
            .find_map(|s| s.as_any().downcast_ref::<T>())
    }

    /// Loads, before a slice, every shelf that a category the agent has on reads
    /// (`has_category`). The errors, each with its shelf's category, are for the host to log.
    pub async fn prepare_for(
        &self,
        has_category: impl Fn(&str) -> bool,
    ) -> Vec<(&'static str, String)> {
        let mut failed = Vec::new();
        for shelf in &self.shelves {
            let read_by = shelf.read_by();
            let wanted = if read_by.is_empty() {
                has_category(shelf.category())
            } else {
                read_by.iter().any(|c| has_category(c))
            };
            if wanted {
                if let Err(why) = shelf.prepare().await {
                    failed.push((shelf.category(), why));
                }
            }
        }
        failed
    }

    /// Performs a write of `category`'s shelf.
    pub async fn perform(&self, category: &str, op: &serde_json::Value) -> Result<(), ShelfError> {
        match self.shelves.iter().find(|s| s.category() == category) {
            Some(shelf) => shelf.perform(op).await,
            None => Err(ShelfError::Unavailable(format!(
                "this host keeps nothing for the {category} category"
            ))),
        }
    }

    /// Applies an input of `category` to its `notes` on a thread ([`Shelf::on_event`]).
    pub fn on_event(
        &self,
        category: &str,
        notes: &mut serde_json::Value,
        event: &serde_json::Value,
    ) -> Result<String, String> {
        match self.shelves.iter().find(|s| s.category() == category) {
            Some(shelf) => shelf.on_event(notes, event),
            None => Err(format!(
                "an input of the {category} category, which this host does not keep"
            )),
        }
    }

    /// Keeps knowledge in `store`. `refresh`: how stale the in-memory copy may get when other
    /// processes write to the store too (`None` when this one is the only writer).
    pub fn with_knowledge(self, store: Arc<dyn KnowledgeStore>, refresh: Option<Duration>) -> Self {
        self.with_shelf(Arc::new(KnowledgeShelf::new(store, refresh)))
    }

    /// True when the host keeps knowledge.
    pub fn has_knowledge(&self) -> bool {
        self.shelf::<KnowledgeShelf>().is_some()
    }

    /// The knowledge as this host holds it now (`None`: the host keeps none, or could not load
    /// it yet).
    pub fn knowledge(&self) -> Option<RwLockReadGuard<'_, Knowledge>> {
        self.shelf::<KnowledgeShelf>()?.copy()
    }

    /// The knowledge store, for people's commands and hosts.
    pub fn knowledge_store(&self) -> Option<&Arc<dyn KnowledgeStore>> {
        self.shelf::<KnowledgeShelf>().map(KnowledgeShelf::store)
    }

    /// Keeps the directory `source` finds for the `meta` category, read again when older than
    /// `refresh` (agents are saved and servers change while a host runs).
    pub fn with_directory(self, source: Arc<dyn DirectorySource>, refresh: Duration) -> Self {
        self.with_shelf(Arc::new(DirectoryShelf::new(source, refresh)))
    }

    /// The directory as this host holds it now (`None`: it keeps none, or could not load it yet).
    pub fn directory(&self) -> Option<Arc<Directory>> {
        self.shelf::<DirectoryShelf>()?.copy()
    }

    /// Lists the machines people connect to this host (the `remote` category).
    pub fn with_remotes(self, remotes: Arc<dyn RemoteDirectory>) -> Self {
        self.with_shelf(Arc::new(RemoteShelf::new(remotes)))
    }

    /// The connected remotes as last listed (`None`: this host takes no remote connections).
    pub fn remotes(&self) -> Option<Vec<RemoteInfo>> {
        self.shelf::<RemoteShelf>().map(RemoteShelf::copy)
    }

    /// Keeps the pages agents publish (the `artifact` category) in `artifacts`.
    pub fn with_artifacts(self, artifacts: artifacts::Artifacts) -> Self {
        self.with_shelf(Arc::new(artifacts))
    }

    /// Where this host keeps published pages (`None`: it keeps none).
    pub fn artifacts(&self) -> Option<&artifacts::Artifacts> {
        self.shelf::<artifacts::Artifacts>()
    }

    /// Makes the models people switch threads to with `source`, those `allowed` lists only.
    pub fn with_models(mut self, source: Arc<dyn ModelSource>, allowed: AllowedModels) -> Self {
        self.models = Some(models::ModelShelf::new(source, allowed));
        self
    }

    /// The models people may switch this host's threads to (`None`: it switches none).
    pub fn allowed_models(&self) -> Option<&AllowedModels> {
        self.models.as_ref().map(models::ModelShelf::allowed)
    }

    /// Makes the model `spec` names ready for [`Library::model`], if it is not yet and the
    /// allowed list has it. An error says why this host cannot use it.
    pub async fn prepare_model(&self, spec: &str) -> Result<(), String> {
        match &self.models {
            Some(shelf) => shelf.prepare(spec).await,
            None => Err("this host cannot switch a thread's model".to_owned()),
        }
    }

    /// The model `spec` names, once prepared.
    pub fn model(&self, spec: &str) -> Option<Arc<dyn crate::model::ModelProvider>> {
        self.models.as_ref()?.get(spec)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::effect::{Effect, PendingEffect};

    /// A category of a product outside the core, as it would plug in.
    #[derive(Debug, Default)]
    struct Notes {
        prepared: AtomicUsize,
        written: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl Shelf for Notes {
        fn category(&self) -> &'static str {
            "notes"
        }

        async fn prepare(&self) -> Result<(), String> {
            self.prepared.fetch_add(1, Ordering::SeqCst);
            Err("the notes server is down".to_owned())
        }

        async fn perform(&self, op: &serde_json::Value) -> Result<(), ShelfError> {
            match op.get("text").and_then(serde_json::Value::as_str) {
                Some(text) => {
                    self.written
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(text.to_owned());
                    Ok(())
                }
                None => Err(ShelfError::Refused("a note needs a text".to_owned())),
            }
        }

        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[tokio::test]
    async fn a_category_plugs_in_a_shelf_the_host_loads_and_writes_through() {
        let library = Library::new().with_shelf(Arc::new(Notes::default()));
        let notes = library.shelf::<Notes>().unwrap();
        assert!(library.shelf::<artifacts::Artifacts>().is_none());

        // Loaded only for an agent with the category on; a failure is reported, not fatal.
        assert!(library.prepare_for(|c| c == "knowledge").await.is_empty());
        assert_eq!(notes.prepared.load(Ordering::SeqCst), 0);
        let failed = library.prepare_for(|c| c == "notes").await;
        assert_eq!(
            failed,
            vec![("notes", "the notes server is down".to_owned())]
        );

        // Its writes come as the one library effect, routed by category.
        let effect = Effect::library("notes", &serde_json::json!({"text": "buy milk"}));
        let Effect::Library { category, op } = &effect else {
            panic!("{effect:?}")
        };
        library.perform(category, op).await.unwrap();
        assert_eq!(*notes.written.lock().unwrap(), vec!["buy milk".to_owned()]);
        let refused = library.perform("notes", &serde_json::json!({})).await;
        assert!(
            matches!(refused, Err(ShelfError::Refused(_))),
            "{refused:?}"
        );
        let missing = library.perform("knowledge", op).await;
        assert!(
            matches!(&missing, Err(e) if e.is_retryable()),
            "{missing:?}"
        );
    }

    #[test]
    fn a_record_that_kept_its_pages_in_a_field_of_their_own_loses_none() {
        let mut record = crate::state::ThreadRecord::new(
            crate::ids::ThreadId::new("t").unwrap(),
            "a",
            None,
            jiff::Timestamp::UNIX_EPOCH,
        );
        let page = serde_json::json!({
            "id": "art-1", "title": "T", "url": "http://h/a/art-1", "format": "html",
            "visibility": "unlisted", "version": 1, "created_at": "2026-12-01T00:00:00Z"
        });
        let mut old = serde_json::to_value(&record).unwrap();
        old["artifacts"] = serde_json::json!([page]);
        record = serde_json::from_value(old).unwrap();
        // Written back as read while nothing touches it, so a slice of another kind keeps it.
        let again = serde_json::to_value(&record).unwrap();
        assert_eq!(again["artifacts"][0]["id"], "art-1", "{again}");
        assert_eq!(artifacts::pages_of(&record)[0].title, "T");
        // Changed, it moves to the category's notes.
        let mut pages = artifacts::pages_of(&record);
        pages[0].version = 2;
        artifacts::keep_pages(&mut record, &pages);
        let moved = serde_json::to_value(&record).unwrap();
        assert!(moved.get("artifacts").is_none(), "{moved}");
        assert_eq!(moved["category_notes"]["artifact"][0]["version"], 2);
        assert_eq!(artifacts::pages_of(&record)[0].version, 2);
    }

    #[test]
    fn an_outbox_written_before_categories_were_named_still_reads() {
        let old = serde_json::json!({
            "id": "fx-1",
            "effect": "library",
            "op": {"op": "answer_comment", "artifact_id": "art-1", "comment_id": "cm-1",
                   "answer": {"id": "a1", "text": "thanks", "at": "2026-12-01T00:00:00Z"}}
        });
        let pending: PendingEffect = serde_json::from_value(old).unwrap();
        assert_eq!(pending.effect.library_category(), Some("artifact"));
        let new = Effect::library(
            "knowledge",
            &knowledge::KnowledgeOp::SaveKnowledge {
                entry: crate::knowledge::KnowledgeEntry::new(
                    "n",
                    crate::knowledge::EntryType::default(),
                    jiff::Timestamp::UNIX_EPOCH,
                ),
            },
        );
        let text = serde_json::to_string(&new).unwrap();
        assert!(text.contains(r#""category":"knowledge""#), "{text}");
        let back: Effect = serde_json::from_str(&text).unwrap();
        assert_eq!(back.library_category(), Some("knowledge"));
    }
}
