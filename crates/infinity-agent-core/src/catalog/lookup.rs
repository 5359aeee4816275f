//! [`CatalogAgents`]: the agents a host runs, from its own list and from a catalog.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use super::{AgentCatalog, AgentRef, StoredAgent};
use crate::agent::{Agent, AgentLookup, PrepareError};

/// Makes a runnable agent from a stored version: its model, skills and tools. Hosts implement
/// it with the model adapters they have (the core has none).
#[async_trait]
pub trait AgentBuilder: Send + Sync {
    /// The agent `stored` defines, its [`Agent::version`] set. An error says why it cannot run.
    async fn build(&self, stored: &StoredAgent) -> Result<Agent, BuildError>;
}

/// Why a stored agent could not be built: a kind to match on, with the text a person reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Something it needs could not be read now (its model key's parameter): building it again
    /// later may work, and the slice that needed it is tried again.
    #[error("{0}")]
    Unavailable(String),
    /// The version cannot run as it is (its file, its model, a tool it names): the thread is
    /// told, or the caller of a delegation.
    #[error("{0}")]
    Invalid(String),
}

impl BuildError {
    /// [`BuildError::Invalid`], saying `why`.
    pub fn invalid(why: impl fmt::Display) -> Self {
        Self::Invalid(why.to_string())
    }
}

/// The agents of a host: the ones it was given (an agent file on the command line, agents
/// registered in code), which answer to their bare name, and every version in a catalog, built
/// on first use and kept.
///
/// A bare name that is not one of the host's own is the catalog's newest version, read again
/// each time a thread is created with it; `NAME@VERSION` is that version, which never changes,
/// so it is read once.
pub struct CatalogAgents {
    own: HashMap<String, Arc<Agent>>,
    catalog: Arc<dyn AgentCatalog>,
    builder: Arc<dyn AgentBuilder>,
    built: Mutex<HashMap<(String, u32), Arc<Agent>>>,
    newest: Mutex<HashMap<String, u32>>,
}

impl fmt::Debug for CatalogAgents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogAgents")
            .field("own", &self.own.keys().collect::<Vec<_>>())
            .field("catalog", &self.catalog)
            .finish_non_exhaustive()
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CatalogAgents {
    /// The host's own agents (by name), then `catalog`'s, built with `builder`.
    pub fn new(
        own: HashMap<String, Arc<Agent>>,
        catalog: Arc<dyn AgentCatalog>,
        builder: Arc<dyn AgentBuilder>,
    ) -> Self {
        Self {
            own,
            catalog,
            builder,
            built: Mutex::default(),
            newest: Mutex::default(),
        }
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<dyn AgentCatalog> {
        &self.catalog
    }

    /// The host's own agents.
    pub fn own(&self) -> &HashMap<String, Arc<Agent>> {
        &self.own
    }

    /// The host's own agent when it is the version named (a host given `NAME@VERSION`, with
    /// its own model, runs its threads with that agent, not a second one built from the store).
    fn own_version(&self, reference: &AgentRef) -> Option<Arc<Agent>> {
        let version = reference.version?;
        self.own
            .get(&reference.name)
            .filter(|a| a.version == Some(version))
            .cloned()
    }
}

#[async_trait]
impl AgentLookup for CatalogAgents {
    fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        let reference = AgentRef::parse(name).ok()?;
        if let Some(own) = self.own_version(&reference) {
            return Some(own);
        }
        let version = match reference.version {
            Some(v) => v,
            None => {
                if let Some(own) = self.own.get(name) {
                    return Some(Arc::clone(own));
                }
                *locked(&self.newest).get(name)?
            }
        };
        locked(&self.built).get(&(reference.name, version)).cloned()
    }

    async fn prepare(&self, name: &str) -> Result<(), PrepareError> {
        let Ok(reference) = AgentRef::parse(name) else {
            return Ok(());
        };
        if (reference.version.is_none() && self.own.contains_key(name))
            || self.own_version(&reference).is_some()
        {
            return Ok(());
        }
        if let Some(v) = reference.version {
            if locked(&self.built).contains_key(&(reference.name.clone(), v)) {
                return Ok(());
            }
        }
        let stored = self
            .catalog
            .get(&reference.name, reference.version)
            .await
            .map_err(|e| PrepareError::Unavailable(e.to_string()))?;
        // No such agent: the engine says so when it looks the agent up.
        let Some(stored) = stored else {
            return Ok(());
        };
        let key = (stored.name.clone(), stored.version);
        if !locked(&self.built).contains_key(&key) {
            let agent = self.builder.build(&stored).await.map_err(|why| {
                let text = format!("{}: {why}", stored.reference());
                match why {
                    BuildError::Unavailable(_) => PrepareError::Unavailable(text),
                    BuildError::Invalid(_) => PrepareError::Broken(text),
                }
            })?;
            locked(&self.built).insert(key, Arc::new(agent));
        }
        if reference.version.is_none() {
            locked(&self.newest).insert(stored.name.clone(), stored.version);
        }
        Ok(())
    }
}
