//! The agent catalog: agents stored as numbered versions in a deployment's store, so one
//! deployment holds many agents and a thread keeps the version it started with.
//!
//! A version is the agent file's text as written, with the skill files and the scripted model's
//! script it names read in beside it (a stored version does not change when the files on disk
//! do, and runs where they are not, as on Lambda), and the folder it was saved from.
//! Versions count from 1 per agent and are never rewritten.
//!
//! Threads name their agent as `NAME@VERSION` once they run a stored one (see
//! [`AgentRef`]): a thread created by a first message, a delegation to a configured agent or a
//! meta `execute_tool` takes the newest version then and keeps it; its children and delegated
//! copies run the same version. [`CatalogAgents`] is the [`crate::agent::AgentLookup`] hosts
//! give the engine over a catalog.

mod file;
mod lookup;
mod rules;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

pub use file::FileCatalog;
pub use lookup::{AgentBuilder, BuildError, CatalogAgents};
pub use rules::{check_names, NameClash};

use crate::agent::{AgentFile, AgentFileError};

/// One stored version of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StoredAgent {
    /// The agent's name (the file's `name:`).
    pub name: String,
    /// Its version, from 1.
    pub version: u32,
    /// The agent file as written.
    pub text: String,
    /// The skill files the agent file names by `path`, and a scripted model's script, by that
    /// path, as they were when saved.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    /// The folder the file was saved from: its other relative paths resolve against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_dir: Option<String>,
    /// The file's `description:`, for listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When it was saved.
    #[schemars(with = "crate::schema::Rfc3339")]
    pub saved_at: Timestamp,
}

impl StoredAgent {
    /// The version to store for the agent file at `path`: its text, and the skill files it
    /// names read in. `version` and `saved_at` are set by the catalog that stores it.
    pub fn read(path: &Path) -> Result<Self, AgentFileError> {
        let file = AgentFile::load(path)?;
        let text = std::fs::read_to_string(path).map_err(|source| AgentFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut files = BTreeMap::new();
        for skill in &file.skills {
            if let Some(relative) = &skill.path {
                let at = file.resolve_path(relative);
                let content =
                    std::fs::read_to_string(&at).map_err(|e| AgentFileError::Invalid {
                        path: path.to_owned(),
                        key: "skills",
                        reason: format!("skill `{}`: cannot read {relative}: {e}", skill.name),
                    })?;
                files.insert(relative.clone(), content);
            }
        }
        // A scripted model's script goes with the version too (when it can be read here).
        if let Some(script) = file.model.strip_prefix("script:") {
            if let Ok(text) = std::fs::read_to_string(file.resolve_path(script)) {
                files.insert(script.to_owned(), text);
            }
        }
        let folder = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let source_dir = Some(
            std::path::absolute(folder)
                .unwrap_or_else(|_| folder.to_owned())
                .display()
                .to_string(),
        );
        Ok(Self {
            name: file.name,
            version: 0,
            text,
            files,
            source_dir,
            description: file.description,
            saved_at: Timestamp::UNIX_EPOCH,
        })
    }

    /// The version as a parsed agent file, its skills' `path`s replaced by the contents stored
    /// with it. Errors name the agent and version.
    pub fn agent_file(&self) -> Result<AgentFile, AgentFileError> {
        let dir = self
            .source_dir
            .as_deref()
            .map_or_else(|| PathBuf::from("."), PathBuf::from);
        let path = dir.join(format!("{}@{}", self.name, self.version));
        let mut file = AgentFile::parse(&self.text, &path)?;
        for skill in &mut file.skills {
            if let Some(relative) = skill.path.take() {
                match self.files.get(&relative) {
                    Some(content) => skill.content = Some(content.clone()),
                    None => skill.path = Some(relative),
                }
            }
        }
        Ok(file)
    }

    /// `NAME@VERSION`.
    pub fn reference(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }
}

/// An agent named in a thread, a command line or an agent file: `NAME` (the newest version) or
/// `NAME@VERSION`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AgentRef {
    /// The agent.
    pub name: String,
    /// The version; `None` for the newest.
    pub version: Option<u32>,
}

impl AgentRef {
    /// A JSON Schema `pattern` of what [`AgentRef::parse`] reads (the API's document gives it to
    /// the agents requests name): `NAME` or `NAME@VERSION`, a version from 1.
    pub const PATTERN: &str = "^[A-Za-z0-9_.-]{1,64}(@[1-9][0-9]{0,8})?$";

    /// The agent's name in a reference as a thread keeps it (`NAME` or `NAME@VERSION`), without
    /// judging it: what is before the first `@`, or all of it.
    pub fn name_in(reference: &str) -> &str {
        reference
            .split_once('@')
            .map_or(reference, |(name, _)| name)
    }

    /// Reads `NAME` or `NAME@VERSION`; an error says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, AgentRefError> {
        let refused = |problem| AgentRefError {
            reference: text.to_owned(),
            problem,
        };
        let (name, version) = match text.split_once('@') {
            Some((name, version)) => {
                let version = version
                    .parse::<u32>()
                    .ok()
                    .filter(|v| *v > 0)
                    .ok_or_else(|| refused(AgentRefProblem::BadVersion))?;
                (name, Some(version))
            }
            None => (text, None),
        };
        if name.is_empty() {
            return Err(refused(AgentRefProblem::NoName));
        }
        if !crate::agent::is_agent_name(name) {
            return Err(refused(AgentRefProblem::BadName));
        }
        Ok(Self {
            name: name.to_owned(),
            version,
        })
    }
}

/// Why a text is not an agent reference ([`AgentRef::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{reference}`: {problem}")]
pub struct AgentRefError {
    /// The text as given.
    pub reference: String,
    /// What is wrong with it.
    pub problem: AgentRefProblem,
}

/// What is wrong with an agent reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentRefProblem {
    /// What follows `@` is not a version (a number from 1).
    #[error("the version after `@` must be a number from 1, as `infinity agents list` shows")]
    BadVersion,
    /// Nothing before `@`.
    #[error("the agent's name is missing")]
    NoName,
    /// The name has characters an agent's name may not, or is too long.
    #[error("an agent's name is 1 to 64 ASCII letters, digits, `_`, `-` or `.`")]
    BadName,
}

impl fmt::Display for AgentRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.version {
            Some(v) => write!(f, "{}@{v}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Why the catalog could not do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// The store could not be reached or written; retrying may help.
    #[error("agent catalog unavailable: {0}")]
    Unavailable(String),
    /// A stored version could not be read back.
    #[error("agent catalog: stored data is corrupt: {0}")]
    Corrupt(String),
    /// Another save took the version first, too many times in a row.
    #[error("agent `{0}`: other saves kept taking the next version; try again")]
    Contended(String),
}

/// Where a deployment's agents are stored: the file store's folder, DynamoDB, memory.
#[async_trait]
pub trait AgentCatalog: Send + Sync + fmt::Debug {
    /// Stores `agent` as its name's next version; returns it as stored (version, time).
    async fn save(&self, agent: StoredAgent, now: Timestamp) -> Result<StoredAgent, CatalogError>;

    /// A version of an agent (`None`: the newest); `None` when there is no such agent or version.
    async fn get(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<StoredAgent>, CatalogError>;

    /// The newest version of every agent, by name.
    async fn list(&self) -> Result<Vec<StoredAgent>, CatalogError>;

    /// The versions of one agent, oldest first (empty when there is no such agent).
    async fn versions(&self, name: &str) -> Result<Vec<u32>, CatalogError>;
}

/// A catalog in memory (tests, and hosts without a store).
#[derive(Debug, Default)]
pub struct MemoryCatalog {
    agents: Mutex<BTreeMap<String, Vec<StoredAgent>>>,
}

impl MemoryCatalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    fn agents(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<StoredAgent>>> {
        self.agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl AgentCatalog for MemoryCatalog {
    async fn save(
        &self,
        mut agent: StoredAgent,
        now: Timestamp,
    ) -> Result<StoredAgent, CatalogError> {
        let mut agents = self.agents();
        let versions = agents.entry(agent.name.clone()).or_default();
        agent.version = versions.last().map_or(1, |v| v.version + 1);
        agent.saved_at = now;
        versions.push(agent.clone());
        Ok(agent)
    }

    async fn get(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<StoredAgent>, CatalogError> {
        let agents = self.agents();
        let Some(versions) = agents.get(name) else {
            return Ok(None);
        };
        Ok(match version {
            Some(v) => versions.iter().find(|a| a.version == v).cloned(),
            None => versions.last().cloned(),
        })
    }

    async fn list(&self) -> Result<Vec<StoredAgent>, CatalogError> {
        Ok(self
            .agents()
            .values()
            .filter_map(|v| v.last().cloned())
            .collect())
    }

    async fn versions(&self, name: &str) -> Result<Vec<u32>, CatalogError> {
        Ok(self
            .agents()
            .get(name)
            .map(|v| v.iter().map(|a| a.version).collect())
            .unwrap_or_default())
    }
}

/// Fills in the descriptions of the configured agents of `spec` (`agents:`) from their newest
/// stored versions, for their tools' descriptions. An agent not stored (yet) keeps none: its
/// tool says so when called.
pub async fn describe_sub_agents(catalog: &dyn AgentCatalog, spec: &mut crate::agent::AgentSpec) {
    for sub in &mut spec.sub_agents {
        match catalog.get(&sub.name, None).await {
            Ok(Some(stored)) => sub.description = stored.description,
            Ok(None) => {}
            Err(err) => {
                tracing::warn!(agent = %spec.name, configured = %sub.name, %err, "cannot read a configured agent's description")
            }
        }
    }
}

#[cfg(test)]
mod tests;
