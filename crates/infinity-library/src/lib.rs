//! Infinity's product categories of internal tools, each plugged into the core's seam
//! ([`infinity_agent_core::tools::internal::Categories`]) with its tools and, where it keeps
//! something beyond a conversation, its shelf in the host's library
//! ([`infinity_agent_core::library::Shelf`]):
//!
//! - [`knowledge`]: the deployment's knowledge, searched by ranked full text ([`search`]).
//! - [`meta`]: a directory of tool servers, stored agents, skills and knowledge to search and
//!   use.
//! - [`artifact`]: pages agents publish and people comment on.
//! - [`remote`]: shell commands on machines people connect.
//!
//! A host runs agents with [`categories`] (the core's and these) and puts the shelves it keeps
//! in its library ([`LibraryExt`]).

#![warn(missing_docs)]

pub mod artifact;
pub mod knowledge;
pub mod meta;
pub mod remote;
pub mod search;

use std::sync::{Arc, Mutex, PoisonError, RwLockReadGuard};
use std::time::{Duration, Instant};

use infinity_agent_core::library::Library;
use infinity_agent_core::tools::internal::Categories;

use artifact::Artifacts;
use knowledge::{Knowledge, KnowledgeShelf, KnowledgeStore};
use meta::{Directory, DirectoryShelf, DirectorySource};
use remote::{RemoteDirectory, RemoteInfo, RemoteShelf};

/// The core's categories and this crate's: what the `infinity` hosts run agents with.
pub fn categories() -> Categories {
    register(Categories::core())
}

/// `categories` with this crate's added (replacing any of the same flag).
pub fn register(categories: Categories) -> Categories {
    categories
        .with(meta::category())
        .with(artifact::category())
        .with(remote::category())
        .with(knowledge::category())
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

/// This crate's shelves in a host's [`Library`]: putting them in, and reading them.
pub trait LibraryExt: Sized {
    /// Keeps knowledge in `store`. `refresh`: how stale the in-memory copy may get when other
    /// processes write to the store too (`None` when this one is the only writer).
    fn with_knowledge(self, store: Arc<dyn KnowledgeStore>, refresh: Option<Duration>) -> Self;

    /// Keeps the directory `source` finds for the `meta` category, read again when older than
    /// `refresh` (agents are saved and servers change while a host runs).
    fn with_directory(self, source: Arc<dyn DirectorySource>, refresh: Duration) -> Self;

    /// Lists the machines people connect to this host (the `remote` category).
    fn with_remotes(self, remotes: Arc<dyn RemoteDirectory>) -> Self;

    /// Keeps the pages agents publish (the `artifact` category) in `artifacts`.
    fn with_artifacts(self, artifacts: Artifacts) -> Self;

    /// True when the host keeps knowledge.
    fn has_knowledge(&self) -> bool;

    /// The knowledge as this host holds it now (`None`: the host keeps none, or could not load
    /// it yet).
    fn knowledge(&self) -> Option<RwLockReadGuard<'_, Knowledge>>;

    /// The knowledge store, for people's commands and hosts.
    fn knowledge_store(&self) -> Option<&Arc<dyn KnowledgeStore>>;

    /// The directory as this host holds it now (`None`: it keeps none, or could not load it yet).
    fn directory(&self) -> Option<Arc<Directory>>;

    /// The connected remotes as last listed (`None`: this host takes no remote connections).
    fn remotes(&self) -> Option<Vec<RemoteInfo>>;

    /// Where this host keeps published pages (`None`: it keeps none).
    fn artifacts(&self) -> Option<&Artifacts>;
}

impl LibraryExt for Library {
    fn with_knowledge(self, store: Arc<dyn KnowledgeStore>, refresh: Option<Duration>) -> Self {
        self.with_shelf(Arc::new(KnowledgeShelf::new(store, refresh)))
    }

    fn with_directory(self, source: Arc<dyn DirectorySource>, refresh: Duration) -> Self {
        self.with_shelf(Arc::new(DirectoryShelf::new(source, refresh)))
    }

    fn with_remotes(self, remotes: Arc<dyn RemoteDirectory>) -> Self {
        self.with_shelf(Arc::new(RemoteShelf::new(remotes)))
    }

    fn with_artifacts(self, artifacts: Artifacts) -> Self {
        self.with_shelf(Arc::new(artifacts))
    }

    fn has_knowledge(&self) -> bool {
        self.shelf::<KnowledgeShelf>().is_some()
    }

    fn knowledge(&self) -> Option<RwLockReadGuard<'_, Knowledge>> {
        self.shelf::<KnowledgeShelf>()?.copy()
    }

    fn knowledge_store(&self) -> Option<&Arc<dyn KnowledgeStore>> {
        self.shelf::<KnowledgeShelf>().map(KnowledgeShelf::store)
    }

    fn directory(&self) -> Option<Arc<Directory>> {
        self.shelf::<DirectoryShelf>()?.copy()
    }

    fn remotes(&self) -> Option<Vec<RemoteInfo>> {
        self.shelf::<RemoteShelf>().map(RemoteShelf::copy)
    }

    fn artifacts(&self) -> Option<&Artifacts> {
        self.shelf::<Artifacts>()
    }
}
