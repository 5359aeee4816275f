//! The meta catalog: what an agent with the `meta` category can find and use without having it
//! listed: **tool servers** (one item per server, its tools the item's functions), **agents**
//! (stored agents, each delegated to in a fresh conversation), **skills** (stored agents'
//! skills, and knowledge entries of type skill) and **knowledge** (the other knowledge entries).
//!
//! A tool server is an item of the kind `app`: that is the word models read in the meta tools'
//! descriptions and results and pass as `kind` ([`Kind::ToolServer`]), and it stays as it is,
//! since changing it would change what running agents are told. In the code and the docs it is a
//! tool server.
//!
//! Every item has a reference `namespace/name`: a tool server `HOST/TOOLSET` (the server's host
//! and port, its manifest's name as a slug), with `HOST/TOOLSET:FUNCTION` for a function other than
//! the default (the first the server lists); an agent `agents/NAME`; a stored agent's skill
//! `AGENT/SKILL`; a knowledge entry `knowledge/NAME`. A bare name (no namespace) finds the one
//! item of its kind with that name, and is an error naming the candidates when there are more.
//!
//! The host builds a [`Directory`] from its [`DirectorySource`] (see [`super::Library`]); the
//! knowledge part is the library's knowledge copy, searched through its own index.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;

use crate::fresh;
use infinity_agent_core::library::{Shelf, ShelfError};

use crate::knowledge::{EntryType, Knowledge, KnowledgeEntry};
use crate::search::TextIndex;
use infinity_agent_core::model::ToolSpec;

/// Field weights of the catalog's index: name, description, body (functions, skill text).
const WEIGHTS: [f32; 3] = [3.0, 2.0, 1.0];

/// The namespace of stored agents' references.
pub const AGENTS_NAMESPACE: &str = "agents";
/// The namespace of knowledge entries' references.
pub const KNOWLEDGE_NAMESPACE: &str = "knowledge";

/// A kind of catalog item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A tool server's tools (`app` to models).
    #[serde(rename = "app")]
    ToolServer,
    /// A stored agent.
    Agent,
    /// A skill.
    Skill,
    /// A knowledge entry.
    Knowledge,
}

impl Kind {
    /// Every kind, in the order `execute_tool` tries them when no kind is given.
    pub const ALL: [Kind; 4] = [Kind::ToolServer, Kind::Agent, Kind::Skill, Kind::Knowledge];

    /// Its name in tool arguments and results.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ToolServer => "app",
            Kind::Agent => "agent",
            Kind::Skill => "skill",
            Kind::Knowledge => "knowledge",
        }
    }

    /// Every kind's name.
    pub fn names() -> Vec<&'static str> {
        Kind::ALL.iter().map(|k| k.as_str()).collect()
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Kind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let flows = if s == "flow" {
                    " (this runtime has no flows: a multi-step procedure is a skill, or an agent)"
                } else {
                    ""
                };
                format!(
                    "unknown kind `{s}`{flows}; the kinds are {}",
                    Kind::names().join(", ")
                )
            })
    }
}

/// A tool server in the catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct DirectoryToolServer {
    /// The server's host (and port).
    pub namespace: String,
    /// Its manifest's name as a slug.
    pub name: String,
    /// What its manifest says it is for.
    pub description: String,
    /// The server's base URL.
    pub base_url: String,
    /// Where its invocations go (the manifest's `endpoint`).
    pub endpoint: String,
    /// Its tools, the default (the first the server lists) first.
    pub functions: Vec<ToolSpec>,
}

impl DirectoryToolServer {
    /// The server at `base_url`, its manifest named `toolset`.
    pub fn new(
        base_url: &str,
        toolset: Option<&str>,
        description: Option<&str>,
        endpoint: String,
        functions: Vec<ToolSpec>,
    ) -> Self {
        let host = base_url
            .split_once("://")
            .map_or(base_url, |(_, rest)| rest)
            .split('/')
            .next()
            .unwrap_or_default();
        let name = slug(toolset.unwrap_or_default());
        Self {
            namespace: host.to_owned(),
            // A manifest without a name: the server is `HOST/app` to models.
            name: if name.is_empty() {
                "app".to_owned()
            } else {
                name
            },
            description: description.unwrap_or_default().to_owned(),
            base_url: base_url.to_owned(),
            endpoint,
            functions,
        }
    }

    /// `namespace/name`.
    pub fn reference(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The reference of one of its functions: the bare reference for the default.
    pub fn function_reference(&self, index: usize) -> String {
        match (index, self.functions.get(index)) {
            (0, _) | (_, None) => self.reference(),
            (_, Some(f)) => format!("{}:{}", self.reference(), f.name),
        }
    }

    /// Its description, or else the default function's.
    pub fn summary(&self) -> String {
        if !self.description.is_empty() {
            return self.description.clone();
        }
        let names: Vec<&str> = self.functions.iter().map(|f| f.name.as_str()).collect();
        let first = self
            .functions
            .first()
            .map(|f| f.description.as_str())
            .unwrap_or_default();
        format!("{first} (functions: {})", names.join(", "))
    }
}

/// Lowercase letters, digits, `_` and `-`; anything else becomes `-`.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.trim().chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

/// A stored agent in the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryAgent {
    /// Its name.
    pub name: String,
    /// Its newest version.
    pub version: u32,
    /// Its file's `description:`.
    pub description: String,
}

/// A skill of a stored agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectorySkill {
    /// The agent whose file lists it.
    pub agent: String,
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its text.
    pub content: String,
}

/// What a [`DirectorySource`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DirectoryContents {
    /// The tool servers.
    pub tool_servers: Vec<DirectoryToolServer>,
    /// The stored agents, newest versions.
    pub agents: Vec<DirectoryAgent>,
    /// Their skills.
    pub skills: Vec<DirectorySkill>,
}

/// Where a host's catalog comes from (hosts implement it over their agent catalog and tool
/// servers; see `infinity_agent_core::catalog::StoredDirectory`).
#[async_trait]
pub trait DirectorySource: Send + Sync + fmt::Debug {
    /// Everything the catalog holds now. A tool server that cannot be reached is left out
    /// (and logged); an error is for a source that cannot be read at all
    /// ([`ShelfError::Unavailable`]).
    async fn load(&self) -> Result<DirectoryContents, ShelfError>;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Slot {
    kind: Kind,
    index: usize,
}

/// The catalog as a host holds it: its items and a full-text index over them.
#[derive(Debug, Clone)]
pub struct Directory {
    contents: DirectoryContents,
    index: TextIndex<Slot, 3>,
}

impl Default for Directory {
    fn default() -> Self {
        Self::new(DirectoryContents::default())
    }
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    /// The item's reference (`namespace/name`).
    pub name: String,
    /// Its kind.
    pub source: Kind,
    /// What it is.
    pub description: String,
    /// How well it matched (only the order means anything).
    #[serde(skip)]
    pub score: f32,
}

/// A catalog item found by its reference.
#[derive(Debug, Clone, PartialEq)]
pub enum Item<'a> {
    /// A function of a tool server.
    ToolServer {
        /// The server.
        server: &'a DirectoryToolServer,
        /// Which of its functions.
        function: usize,
    },
    /// A stored agent.
    Agent(&'a DirectoryAgent),
    /// A stored agent's skill.
    Skill(&'a DirectorySkill),
    /// A knowledge entry (of type skill when found as a skill).
    Entry(&'a KnowledgeEntry),
}

impl Item<'_> {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Item::ToolServer { .. } => Kind::ToolServer,
            Item::Agent(_) => Kind::Agent,
            Item::Skill(_) => Kind::Skill,
            Item::Entry(e) if e.entry_type == EntryType::Skill => Kind::Skill,
            Item::Entry(_) => Kind::Knowledge,
        }
    }

    /// Its reference.
    pub fn reference(&self) -> String {
        match self {
            Item::ToolServer { server, function } => server.function_reference(*function),
            Item::Agent(a) => format!("{AGENTS_NAMESPACE}/{}", a.name),
            Item::Skill(s) => format!("{}/{}", s.agent, s.name),
            Item::Entry(e) => format!("{KNOWLEDGE_NAMESPACE}/{}", e.name),
        }
    }
}

/// Why a reference found nothing of a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    /// Nothing of that kind has the name.
    Missing,
    /// A problem to tell the caller (an ambiguous name, an unknown function).
    Problem(String),
}

impl Directory {
    /// A catalog of `contents`. Two tool servers that would share a reference (one host, two
    /// servers with one toolset name) are told apart by a suffix (`-2`, `-3`, ...).
    pub fn new(mut contents: DirectoryContents) -> Self {
        let mut seen = std::collections::HashSet::new();
        for server in &mut contents.tool_servers {
            let base = server.name.clone();
            let mut n = 1;
            while !seen.insert(server.reference()) {
                n += 1;
                server.name = format!("{base}-{n}");
            }
        }
        let mut index = TextIndex::new(WEIGHTS);
        for (i, server) in contents.tool_servers.iter().enumerate() {
            let names: Vec<&str> = server.functions.iter().map(|f| f.name.as_str()).collect();
            let bodies: Vec<&str> = server
                .functions
                .iter()
                .map(|f| f.description.as_str())
                .collect();
            index.upsert(
                Slot {
                    kind: Kind::ToolServer,
                    index: i,
                },
                [
                    &format!("{} {} {}", server.namespace, server.name, names.join(" ")),
                    &server.description,
                    &bodies.join("\n"),
                ],
            );
        }
        for (i, agent) in contents.agents.iter().enumerate() {
            index.upsert(
                Slot {
                    kind: Kind::Agent,
                    index: i,
                },
                [&agent.name, &agent.description, ""],
            );
        }
        for (i, skill) in contents.skills.iter().enumerate() {
            index.upsert(
                Slot {
                    kind: Kind::Skill,
                    index: i,
                },
                [&skill.name, &skill.description, &skill.content],
            );
        }
        Self { contents, index }
    }

    /// The tool servers.
    pub fn tool_servers(&self) -> &[DirectoryToolServer] {
        &self.contents.tool_servers
    }

    /// The stored agents.
    pub fn agents(&self) -> &[DirectoryAgent] {
        &self.contents.agents
    }

    /// The stored agents' skills.
    pub fn skills(&self) -> &[DirectorySkill] {
        &self.contents.skills
    }

    /// The items best matching `query` (of one kind, or all), at most `per_kind` of each kind,
    /// best first. Knowledge entries (skills among them) come from `knowledge`'s own index;
    /// both indexes score with BM25F, so their scores are of one scale, not equal.
    pub fn search(
        &self,
        query: &str,
        kind: Option<Kind>,
        per_kind: usize,
        knowledge: Option<&Knowledge>,
    ) -> Vec<Found> {
        let mut found = Vec::new();
        for k in Kind::ALL
            .into_iter()
            .filter(|k| kind.is_none_or(|w| w == *k))
        {
            let mut of_kind: Vec<Found> = self
                .index
                .search(query, per_kind, |slot| slot.kind == k)
                .into_iter()
                .map(|(slot, score)| {
                    let (name, description) = self.describe(slot);
                    Found {
                        name,
                        source: k,
                        description,
                        score,
                    }
                })
                .collect();
            if let (Some(knowledge), Kind::Skill | Kind::Knowledge) = (knowledge, k) {
                let skills = k == Kind::Skill;
                let hits =
                    knowledge.search_where(query, |t| (t == EntryType::Skill) == skills, per_kind);
                of_kind.extend(hits.into_iter().map(|h| Found {
                    name: format!("{KNOWLEDGE_NAMESPACE}/{}", h.name),
                    source: k,
                    description: h.description,
                    score: h.score,
                }));
            }
            // Agents' skills and knowledge skills share the kind's cap.
            of_kind.sort_by(|a, b| b.score.total_cmp(&a.score));
            of_kind.truncate(per_kind);
            found.append(&mut of_kind);
        }
        found.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.name.cmp(&b.name)));
        found
    }

    fn describe(&self, slot: Slot) -> (String, String) {
        match slot.kind {
            Kind::ToolServer => {
                let server = &self.contents.tool_servers[slot.index];
                (server.reference(), server.summary())
            }
            Kind::Agent => {
                let agent = &self.contents.agents[slot.index];
                (
                    format!("{AGENTS_NAMESPACE}/{}", agent.name),
                    agent.description.clone(),
                )
            }
            Kind::Skill | Kind::Knowledge => {
                let skill = &self.contents.skills[slot.index];
                (
                    format!("{}/{}", skill.agent, skill.name),
                    skill.description.clone(),
                )
            }
        }
    }

    /// The item of `kind` that `reference` names (see the module's reference forms).
    pub fn find<'a>(
        &'a self,
        kind: Kind,
        reference: &str,
        knowledge: Option<&'a Knowledge>,
    ) -> Result<Item<'a>, Miss> {
        match kind {
            Kind::ToolServer => self.find_tool_server(reference),
            Kind::Agent => {
                let name = reference
                    .strip_prefix(&format!("{AGENTS_NAMESPACE}/"))
                    .unwrap_or(reference);
                self.contents
                    .agents
                    .iter()
                    .find(|a| a.name == name)
                    .map(Item::Agent)
                    .ok_or(Miss::Missing)
            }
            Kind::Skill => {
                let entry = knowledge
                    .and_then(|k| k.get(strip_knowledge(reference)))
                    .filter(|e| e.entry_type == EntryType::Skill);
                let (agent, name) = match reference.split_once('/') {
                    Some((agent, name)) => (Some(agent), name),
                    None => (None, reference),
                };
                let skills: Vec<&DirectorySkill> = self
                    .contents
                    .skills
                    .iter()
                    .filter(|s| s.name == name && agent.is_none_or(|a| a == s.agent))
                    .collect();
                let explicit_knowledge = agent == Some(KNOWLEDGE_NAMESPACE);
                match (skills.as_slice(), entry) {
                    (_, Some(entry)) if explicit_knowledge => Ok(Item::Entry(entry)),
                    ([one], None) => Ok(Item::Skill(one)),
                    ([], Some(entry)) => Ok(Item::Entry(entry)),
                    ([], None) => Err(Miss::Missing),
                    (many, entry) => {
                        let mut names: Vec<String> = many
                            .iter()
                            .map(|s| format!("{}/{}", s.agent, s.name))
                            .collect();
                        if let Some(e) = entry {
                            names.push(format!("{KNOWLEDGE_NAMESPACE}/{}", e.name));
                        }
                        Err(Miss::Problem(format!(
                            "the skill name `{reference}` is ambiguous: it could be {}; use one \
                             of these references",
                            names.join(", ")
                        )))
                    }
                }
            }
            Kind::Knowledge => knowledge
                .and_then(|k| k.get(strip_knowledge(reference)))
                .map(Item::Entry)
                .ok_or(Miss::Missing),
        }
    }

    fn find_tool_server(&self, reference: &str) -> Result<Item<'_>, Miss> {
        let (server_part, function) = match reference.rsplit_once(':') {
            // A port (`127.0.0.1:8080/tools`) is not a function: a function follows the name.
            Some((server, f)) if !f.contains('/') => (server, Some(f)),
            _ => (reference, None),
        };
        let candidates: Vec<&DirectoryToolServer> = self
            .contents
            .tool_servers
            .iter()
            .filter(|s| {
                if server_part.contains('/') {
                    s.reference() == server_part
                } else {
                    s.name == server_part
                }
            })
            .collect();
        let server = match candidates.as_slice() {
            [] => return Err(Miss::Missing),
            [one] => *one,
            many => {
                let names: Vec<String> = many.iter().map(|s| s.reference()).collect();
                return Err(Miss::Problem(format!(
                    "the app name `{server_part}` is ambiguous: it could be {}; use one of these \
                     references",
                    names.join(", ")
                )));
            }
        };
        let function = match function {
            None => 0,
            Some(f) => match server.functions.iter().position(|s| s.name == f) {
                Some(i) => i,
                None => {
                    let names: Vec<&str> =
                        server.functions.iter().map(|s| s.name.as_str()).collect();
                    return Err(Miss::Problem(format!(
                        "the app `{}` has no function `{f}`; its functions are {}",
                        server.reference(),
                        names.join(", ")
                    )));
                }
            },
        };
        Ok(Item::ToolServer { server, function })
    }
}

fn strip_knowledge(reference: &str) -> &str {
    reference
        .strip_prefix(&format!("{KNOWLEDGE_NAMESPACE}/"))
        .unwrap_or(reference)
}

/// The `meta` category's shelf: the directory its tools search, read again from its source when
/// older than its refresh interval.
#[derive(Debug)]
pub struct DirectoryShelf {
    source: Arc<dyn DirectorySource>,
    copy: RwLock<Option<Arc<Directory>>>,
    loaded_at: Mutex<Option<Instant>>,
    refresh: Duration,
}

impl DirectoryShelf {
    /// The directory `source` finds, read again when older than `refresh`.
    pub fn new(source: Arc<dyn DirectorySource>, refresh: Duration) -> Self {
        Self {
            source,
            copy: RwLock::new(None),
            loaded_at: Mutex::new(None),
            refresh,
        }
    }

    /// The directory as loaded last (`None`: not yet).
    pub fn copy(&self) -> Option<Arc<Directory>> {
        self.copy
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[async_trait]
impl Shelf for DirectoryShelf {
    fn category(&self) -> &'static str {
        "meta"
    }

    async fn prepare(&self) -> Result<(), ShelfError> {
        if fresh(&self.loaded_at, Some(self.refresh)) {
            return Ok(());
        }
        // Stamped first: a source that fails is not asked again by every slice until `refresh`.
        *self
            .loaded_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        let contents = self.source.load().await?;
        *self.copy.write().unwrap_or_else(PoisonError::into_inner) =
            Some(Arc::new(Directory::new(contents)));
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
