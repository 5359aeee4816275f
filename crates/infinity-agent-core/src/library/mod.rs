//! [`Library`]: what a host holds for tools that reach beyond a conversation. Each category
//! that needs such a part plugs it in as a [`Shelf`] (the `infinity-library` crate's: the
//! deployment's knowledge, the directory the `meta` category searches, the machines people
//! connect, the pages agents publish). The models people switch threads to are the host's own,
//! not a category's.
//!
//! Tools run inside a slice and cannot wait, so they read an in-memory copy a shelf keeps
//! ([`Shelf::prepare`] loads it before a slice whose agent has a category that reads it). Writes
//! are one kind of effect for every shelf ([`crate::effect::Effect::Library`]: the shelf's
//! category and its own operation): committed with the slice, performed after it by the shelf
//! ([`Shelf::perform`]), retried from the outbox until they are done, so a crash loses none and
//! the thread never waits on a store. The host, the engine and the record know shelves only by
//! this trait; a category's tools find their own by type ([`Library::shelf`]).

mod models;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

pub use models::{AllowedModels, ModelSource, ModelSourceError, ALLOWED_MODELS_VAR};

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
    async fn prepare(&self) -> Result<(), ShelfError> {
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
    /// model is shown, or why the input is dropped ([`ShelfError::Refused`]).
    fn on_event(
        &self,
        notes: &mut serde_json::Value,
        event: &serde_json::Value,
    ) -> Result<String, ShelfError> {
        let _ = (notes, event);
        Err(ShelfError::Refused(format!(
            "the {} category takes no inputs",
            self.category()
        )))
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

    /// What went wrong, without its kind.
    pub fn text(&self) -> &str {
        match self {
            ShelfError::Unavailable(text) | ShelfError::Refused(text) => text,
        }
    }
}

/// The host's library. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct Library {
    shelves: Vec<Arc<dyn Shelf>>,
    models: Option<models::ModelShelf>,
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
    ) -> Vec<(&'static str, ShelfError)> {
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
    ) -> Result<String, ShelfError> {
        match self.shelves.iter().find(|s| s.category() == category) {
            Some(shelf) => shelf.on_event(notes, event),
            None => Err(ShelfError::Refused(format!(
                "an input of the {category} category, which this host does not keep"
            ))),
        }
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
    pub async fn prepare_model(&self, spec: &str) -> Result<(), ModelSourceError> {
        match &self.models {
            Some(shelf) => shelf.prepare(spec).await,
            None => Err(ModelSourceError::NoSource),
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
    use std::sync::{Mutex, PoisonError};

    use crate::effect::Effect;

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

        async fn prepare(&self) -> Result<(), ShelfError> {
            self.prepared.fetch_add(1, Ordering::SeqCst);
            Err(ShelfError::Unavailable(
                "the notes server is down".to_owned(),
            ))
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

        // Loaded only for an agent with the category on; a failure is reported, not fatal.
        assert!(library.prepare_for(|c| c == "knowledge").await.is_empty());
        assert_eq!(notes.prepared.load(Ordering::SeqCst), 0);
        let failed = library.prepare_for(|c| c == "notes").await;
        assert_eq!(
            failed,
            vec![(
                "notes",
                ShelfError::Unavailable("the notes server is down".to_owned())
            )]
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
}
