//! [`Library`]: what a host holds for tools that reach beyond a conversation: the deployment's
//! knowledge (the `knowledge` category) and the directory of apps, agents and skills the `meta`
//! category searches ([`directory`]), the machines people connect (the `remote` category), the
//! models people switch threads to, and the pages agents publish ([`artifacts`]).
//!
//! Tools run inside a slice and cannot wait, so they read an in-memory copy the host keeps
//! ([`Library::prepare`] loads it before a slice that may need it, and reloads it when it is
//! older than the host's refresh interval). Writes are effects ([`LibraryOp`]): committed with
//! the slice, performed after it (the store first, then the copy), retried from the outbox until
//! they are done, so a crash loses none and the thread never waits on the store.

pub mod artifacts;
pub mod directory;
mod models;
pub mod remotes;

use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

pub use crate::effect::LibraryOp;
use crate::knowledge::{Knowledge, KnowledgeStore, KnowledgeStoreError};
use directory::{Directory, DirectorySource};
pub use models::{AllowedModels, ModelSource, ALLOWED_MODELS_VAR};
use remotes::{RemoteDirectory, RemoteInfo};

/// How stale a host's copy of the meta directory may get: agents saved and servers changed
/// meanwhile show from the next reload on.
pub const DIRECTORY_REFRESH: Duration = Duration::from_secs(60);

/// The host's library. Cheap to share (`Arc`).
#[derive(Debug, Default)]
pub struct Library {
    knowledge: Option<Shelf>,
    directory: Option<DirectoryShelf>,
    remotes: Option<RemoteShelf>,
    models: Option<models::ModelShelf>,
    artifacts: Option<artifacts::Artifacts>,
}

/// The remotes' directory and the copy of its list the tools read (reloaded before every slice
/// that may use it: remotes come and go by the second).
#[derive(Debug)]
struct RemoteShelf {
    directory: Arc<dyn RemoteDirectory>,
    copy: RwLock<Vec<RemoteInfo>>,
}

#[derive(Debug)]
struct DirectoryShelf {
    source: Arc<dyn DirectorySource>,
    copy: RwLock<Option<Arc<Directory>>>,
    loaded_at: Mutex<Option<Instant>>,
    refresh: Duration,
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

#[derive(Debug)]
struct Shelf {
    store: Arc<dyn KnowledgeStore>,
    copy: RwLock<Knowledge>,
    loaded_at: Mutex<Option<Instant>>,
    /// Reload the copy when it is older than this (another process may have written); `None`:
    /// this process is the only writer, so the copy is loaded once.
    refresh: Option<Duration>,
}

impl Library {
    /// A library with nothing in it (knowledge tools then say the host has none).
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps knowledge in `store`. `refresh`: how stale the in-memory copy may get when other
    /// processes write to the store too (`None` when this one is the only writer).
    pub fn with_knowledge(
        mut self,
        store: Arc<dyn KnowledgeStore>,
        refresh: Option<Duration>,
    ) -> Self {
        self.knowledge = Some(Shelf {
            store,
            copy: RwLock::new(Knowledge::new()),
            loaded_at: Mutex::new(None),
            refresh,
        });
        self
    }

    /// True when the host keeps knowledge.
    pub fn has_knowledge(&self) -> bool {
        self.knowledge.is_some()
    }

    /// Loads the knowledge copy if it was never loaded or is stale. A failure leaves the old
    /// copy (or none) and is returned for the host to log; tools then work on what is there.
    pub async fn prepare(&self) -> Result<(), KnowledgeStoreError> {
        let Some(shelf) = &self.knowledge else {
            return Ok(());
        };
        if fresh(&shelf.loaded_at, shelf.refresh) {
            return Ok(());
        }
        let entries = shelf.store.load_all().await?;
        let copy = Knowledge::from_entries(entries);
        *shelf.copy.write().unwrap_or_else(PoisonError::into_inner) = copy;
        *shelf
            .loaded_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        Ok(())
    }

    /// Keeps the directory `source` finds for the `meta` category, read again when older than
    /// `refresh` (agents are saved and servers change while a host runs).
    pub fn with_directory(mut self, source: Arc<dyn DirectorySource>, refresh: Duration) -> Self {
        self.directory = Some(DirectoryShelf {
            source,
            copy: RwLock::new(None),
            loaded_at: Mutex::new(None),
            refresh,
        });
        self
    }

    /// Loads the directory if it was never loaded or is stale. A failure leaves the old copy (or
    /// none) and is returned for the host to log.
    pub async fn prepare_directory(&self) -> Result<(), String> {
        let Some(shelf) = &self.directory else {
            return Ok(());
        };
        if fresh(&shelf.loaded_at, Some(shelf.refresh)) {
            return Ok(());
        }
        // Stamped first: a source that fails is not asked again by every slice until `refresh`.
        *shelf
            .loaded_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        let contents = shelf.source.load().await?;
        *shelf.copy.write().unwrap_or_else(PoisonError::into_inner) =
            Some(Arc::new(Directory::new(contents)));
        Ok(())
    }

    /// The directory as this host holds it now (`None`: it keeps none, or could not load it yet).
    pub fn directory(&self) -> Option<Arc<Directory>> {
        let shelf = self.directory.as_ref()?;
        shelf
            .copy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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

    /// Lists the machines people connect to this host (the `remote` category).
    pub fn with_remotes(mut self, remotes: Arc<dyn RemoteDirectory>) -> Self {
        self.remotes = Some(RemoteShelf {
            directory: remotes,
            copy: RwLock::new(Vec::new()),
        });
        self
    }

    /// Lists the remotes again for the tools. A failure leaves the last list and is returned
    /// for the host to log.
    pub async fn prepare_remotes(&self) -> Result<(), remotes::HubError> {
        let Some(shelf) = &self.remotes else {
            return Ok(());
        };
        let listed = shelf.directory.remotes().await?;
        *shelf.copy.write().unwrap_or_else(PoisonError::into_inner) = listed;
        Ok(())
    }

    /// Keeps the pages agents publish (the `artifact` category) in `artifacts`.
    pub fn with_artifacts(mut self, artifacts: artifacts::Artifacts) -> Self {
        self.artifacts = Some(artifacts);
        self
    }

    /// Where this host keeps published pages (`None`: it keeps none).
    pub fn artifacts(&self) -> Option<&artifacts::Artifacts> {
        self.artifacts.as_ref()
    }

    /// The connected remotes as last listed (`None`: this host takes no remote connections).
    pub fn remotes(&self) -> Option<Vec<RemoteInfo>> {
        self.remotes.as_ref().map(|shelf| {
            shelf
                .copy
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
    }

    /// The knowledge as this host holds it now (`None`: the host keeps none, or could not load
    /// it yet).
    pub fn knowledge(&self) -> Option<RwLockReadGuard<'_, Knowledge>> {
        let shelf = self.knowledge.as_ref()?;
        shelf
            .loaded_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()?;
        Some(shelf.copy.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The knowledge store, for people's commands and hosts.
    pub fn knowledge_store(&self) -> Option<&Arc<dyn KnowledgeStore>> {
        self.knowledge.as_ref().map(|s| &s.store)
    }

    /// Performs a write: the store, then the copy. An error leaves the effect in the outbox (a
    /// store that cannot be reached) or is final (an entry that breaks a limit, which the tool
    /// checked already).
    pub async fn perform(&self, op: &LibraryOp) -> Result<(), KnowledgeStoreError> {
        let artifacts = || {
            self.artifacts.as_ref().ok_or_else(|| {
                KnowledgeStoreError::Unavailable("this host keeps no artifacts".to_owned())
            })
        };
        let artifact_error = |e: artifacts::ArtifactError| match e {
            artifacts::ArtifactError::Unavailable(why) => KnowledgeStoreError::Unavailable(why),
            artifacts::ArtifactError::Refused(why) => KnowledgeStoreError::Corrupt(why),
        };
        match op {
            LibraryOp::PublishArtifact {
                meta,
                content,
                files,
            } => artifacts()?
                .publish(meta, content, files)
                .await
                .map_err(artifact_error),
            LibraryOp::AnswerComment {
                artifact_id,
                comment_id,
                answer,
            } => artifacts()?
                .answer(artifact_id, comment_id, answer)
                .await
                .map_err(artifact_error),
            LibraryOp::SaveKnowledge { entry } => {
                let Some(shelf) = &self.knowledge else {
                    return Err(KnowledgeStoreError::Unavailable(
                        "this host keeps no knowledge".to_owned(),
                    ));
                };
                let mut entry = entry.clone();
                // A re-performed save keeps the first write's creation time.
                if let Some(old) = shelf.store.get(&entry.name).await? {
                    entry.created_at = old.created_at;
                }
                entry.version = shelf.store.put(&entry, None).await?;
                let mut copy = shelf.copy.write().unwrap_or_else(PoisonError::into_inner);
                copy.upsert(entry)?;
                Ok(())
            }
        }
    }
}
