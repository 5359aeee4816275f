//! The knowledge registry: entries that outlive conversations (skills, concepts, observations,
//! preferences, references, people, projects), searched by ranked full text.
//!
//! - [`KnowledgeEntry`] and [`EntryType`]: the entry model and its limits
//!   ([`KnowledgeEntry::validate`]); an entry's key is its name lowercased.
//! - [`Knowledge`]: the entries in memory with a [`TextIndex`] over them; [`Knowledge::search`]
//!   ranks by BM25F over name (×3), tags (×2), description (×2) and content (×1).
//! - [`KnowledgeStore`]: where entries are kept, with an optimistic version check on each write;
//!   [`MemoryKnowledgeStore`] and [`FileKnowledgeStore`] (one JSON file per entry).
//!
//! A write goes to the store first, then to the registry with the version the store gave it:
//!
//! ```
//! use infinity_library::knowledge::{
//!     EntryType, Knowledge, KnowledgeEntry, KnowledgeStore, MemoryKnowledgeStore,
//! };
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let store = MemoryKnowledgeStore::new();
//! let mut knowledge = Knowledge::from_entries(store.load_all().await?);
//!
//! let now = jiff::Timestamp::now();
//! let mut entry = KnowledgeEntry::new("Deploy checklist", EntryType::Skill, now);
//! entry.content = "Run the migrations before deploying the API.".into();
//! let expected = knowledge.get(&entry.name).map(|old| old.version);
//! entry.version = store.put(&entry, expected).await?;
//! knowledge.upsert(entry)?;
//!
//! let hits = knowledge.search("deploy migrations", None, 5);
//! assert_eq!(hits[0].name, "Deploy checklist");
//! assert!(hits[0].snippet.contains("migrations"));
//! # Ok::<_, Box<dyn std::error::Error>>(())
//! # })
//! # }
//! ```

mod entry;
mod file;
mod shelf;
mod store;
mod tools;

use std::collections::BTreeMap;

use serde::Serialize;

pub use entry::{
    key_of, validate_name, EntryType, InvalidEntry, KnowledgeEntry, UnknownEntryType,
    MAX_ALLOWED_TOOLS, MAX_CONTENT_BYTES, MAX_DESCRIPTION_CHARS, MAX_FILES, MAX_FILE_CHARS,
    MAX_NAME_CHARS, MAX_TAGS, MAX_TAG_CHARS, MAX_TOOL_CHARS,
};
pub use file::{BrokenEntry, FileKnowledgeStore};
pub use shelf::{KnowledgeOp, KnowledgeShelf, CATEGORY};
pub use store::{KnowledgeStore, KnowledgeStoreError, MemoryKnowledgeStore};
pub use tools::KNOWLEDGE_SEARCH;

use infinity_agent_core::tools::internal::{CategoryDef, InternalToolDef};

use crate::search::{tokenize, Query, TextIndex};

/// The `knowledge` category (opt-in): `knowledge_search`, `knowledge_get` and `knowledge_save`
/// over the host's knowledge ([`KnowledgeShelf`]).
pub fn category() -> CategoryDef {
    CategoryDef::new(
        CATEGORY,
        "The deployment's knowledge: search, read and save entries that outlive conversations.",
        vec![
            InternalToolDef {
                name: KNOWLEDGE_SEARCH,
                make: |_| std::sync::Arc::new(tools::KnowledgeSearch),
            },
            InternalToolDef {
                name: "knowledge_get",
                make: |_| std::sync::Arc::new(tools::KnowledgeGet),
            },
            InternalToolDef {
                name: "knowledge_save",
                make: |_| std::sync::Arc::new(tools::KnowledgeSave),
            },
        ],
    )
}

/// The weights of the indexed fields: name, tags, description, content.
const WEIGHTS: [f32; 4] = [3.0, 2.0, 2.0, 1.0];
/// The longest snippet, in characters (ellipses included).
pub const SNIPPET_CHARS: usize = 200;
/// How much of the content before the first match a snippet shows, in characters.
const SNIPPET_LEAD_CHARS: usize = 60;

/// A search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// The entry's name.
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub entry_type: EntryType,
    /// Its description.
    pub description: String,
    /// How well it matches (BM25F; only the order means anything).
    pub score: f32,
    /// Up to [`SNIPPET_CHARS`] characters of its content around the first word matching the
    /// query (from the start when no word of the content does), spaces collapsed, `…` where
    /// it was cut.
    pub snippet: String,
}

/// The knowledge registry in memory: entries by key and a full-text index over them.
#[derive(Debug, Clone)]
pub struct Knowledge {
    entries: BTreeMap<String, KnowledgeEntry>,
    index: TextIndex<Indexed, 4>,
}

/// An entry as the index knows it: its key (which orders equal scores), and its type, so a
/// search of one type filters without looking entries up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Indexed {
    key: String,
    entry_type: EntryType,
}

impl Default for Knowledge {
    fn default() -> Self {
        Self::new()
    }
}

impl Knowledge {
    /// An empty registry.
    pub fn new() -> Self {
        Self {
            entries: BTreeMap::new(),
            index: TextIndex::new(WEIGHTS),
        }
    }

    /// A registry of `entries` (as a store's `load_all` returns them). An entry that breaks a
    /// limit is left out and logged; of two with one key, the later wins.
    pub fn from_entries(entries: impl IntoIterator<Item = KnowledgeEntry>) -> Self {
        let mut knowledge = Self::new();
        for entry in entries {
            let name = entry.name.clone();
            if let Err(err) = knowledge.upsert(entry) {
                tracing::warn!(entry = %name, %err, "knowledge entry left out: it breaks a limit");
            }
        }
        knowledge
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when it holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry named `name`, in any case.
    pub fn get(&self, name: &str) -> Option<&KnowledgeEntry> {
        self.entries.get(&key_of(name))
    }

    /// Adds `entry`, or replaces the entry with its key (its name in any case), and returns the
    /// one it replaced. The entry is validated first and left out if it breaks a limit.
    pub fn upsert(
        &mut self,
        entry: KnowledgeEntry,
    ) -> Result<Option<KnowledgeEntry>, InvalidEntry> {
        entry.validate()?;
        let key = entry.key();
        if let Some(old) = self.entries.get(&key) {
            // Another type is another index key: the old one must go.
            self.index.remove(&Indexed {
                key: key.clone(),
                entry_type: old.entry_type,
            });
        }
        let tags = entry.tags.join("\n");
        let indexed = Indexed {
            key: key.clone(),
            entry_type: entry.entry_type,
        };
        self.index.upsert(
            indexed,
            [&entry.name, &tags, &entry.description, &entry.content],
        );
        Ok(self.entries.insert(key, entry))
    }

    /// Removes the entry named `name` (in any case) and returns it.
    pub fn remove(&mut self, name: &str) -> Option<KnowledgeEntry> {
        let key = key_of(name);
        let entry = self.entries.remove(&key)?;
        self.index.remove(&Indexed {
            key,
            entry_type: entry.entry_type,
        });
        Some(entry)
    }

    /// The entries, of one type or all, in key order.
    pub fn list(&self, entry_type: Option<EntryType>) -> Vec<&KnowledgeEntry> {
        self.entries
            .values()
            .filter(|e| entry_type.is_none_or(|t| e.entry_type == t))
            .collect()
    }

    /// The entries (of one type, or all) best matching `query`, at most `limit` of them, best
    /// first; equal scores in key order. A query of stop words only finds nothing.
    pub fn search(&self, query: &str, entry_type: Option<EntryType>, limit: usize) -> Vec<Hit> {
        self.search_where(
            query,
            |t| entry_type.is_none_or(|wanted| t == wanted),
            limit,
        )
    }

    /// [`Knowledge::search`] over the entries whose type passes `types`.
    pub fn search_where(
        &self,
        query: &str,
        types: impl Fn(EntryType) -> bool,
        limit: usize,
    ) -> Vec<Hit> {
        let query = Query::parse(query);
        self.index
            .search_query(&query, limit, |indexed| types(indexed.entry_type))
            .into_iter()
            .filter_map(|(indexed, score)| {
                let entry = self.entries.get(&indexed.key)?;
                Some(Hit {
                    name: entry.name.clone(),
                    entry_type: entry.entry_type,
                    description: entry.description.clone(),
                    score,
                    snippet: snippet(&entry.content, &query),
                })
            })
            .collect()
    }
}

/// Up to [`SNIPPET_CHARS`] characters of `content` from a little before the first word matching
/// `query` (see [`Hit::snippet`]).
fn snippet(content: &str, query: &Query) -> String {
    let first = tokenize(content)
        .find(|t| query.matches(&t.term))
        .map_or(0, |t| t.span.start);
    let from = window_start(content, first);
    let mut out = String::new();
    let mut chars = 0;
    if from > 0 {
        out.push('…');
        chars += 1;
    }
    let mut space = false;
    let mut cut = false;
    for c in content.get(from..).unwrap_or_default().chars() {
        if c.is_whitespace() {
            space = chars > usize::from(from > 0);
            continue;
        }
        // One character is kept back for a closing ellipsis.
        if chars + usize::from(space) + 1 > SNIPPET_CHARS - 1 {
            cut = true;
            break;
        }
        if space {
            out.push(' ');
            chars += 1;
            space = false;
        }
        out.push(c);
        chars += 1;
    }
    if cut {
        // End on a whole word when one ends near the cut.
        if let Some(at) = out.rfind(' ').filter(|&at| out.len() - at < 40) {
            out.truncate(at);
        }
        out.push('…');
    }
    out
}

/// Where a snippet showing the byte `first` starts: up to [`SNIPPET_LEAD_CHARS`] characters
/// before it, moved on to the start of a word.
fn window_start(content: &str, first: usize) -> usize {
    let before = content.get(..first).unwrap_or_default();
    let Some((from, _)) = before.char_indices().rev().take(SNIPPET_LEAD_CHARS).last() else {
        return first;
    };
    if from == 0 || before[..from].ends_with(char::is_whitespace) {
        return from;
    }
    before[from..]
        .char_indices()
        .find(|(_, c)| c.is_whitespace())
        .map_or(from, |(at, c)| from + at + c.len_utf8())
}

#[cfg(test)]
mod tests;
