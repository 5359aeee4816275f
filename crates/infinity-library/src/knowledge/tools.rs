//! The `knowledge` category (opt-in): `knowledge_search`, `knowledge_get`, `knowledge_save` over
//! the deployment's knowledge registry, which outlives conversations (see [`crate::knowledge`]
//! and [`infinity_agent_core::library`]).
//!
//! Reads go to the copy the host keeps in memory, so they answer within the slice. A save is
//! checked here (every limit, named) and written after the slice commits, as an effect: it is
//! found by searches from the next slice on. `skill_get` keeps serving the agent's own skills
//! only; these tools reach every entry of the deployment, skills included.

use serde_json::{json, Value};

use crate::knowledge::{EntryType, KnowledgeEntry};
use crate::knowledge::{KnowledgeOp, CATEGORY};
use infinity_agent_core::effect::Effect;
use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::{Tool, ToolContext, ToolOutcome};

use crate::LibraryExt;

/// The name of the search tool (hosts load the knowledge for agents that have it).
pub const KNOWLEDGE_SEARCH: &str = "knowledge_search";
/// Results a search returns unless it asks for fewer or more.
const DEFAULT_LIMIT: u64 = 8;
/// The most results a search returns.
const MAX_LIMIT: u64 = 25;

fn types() -> Vec<&'static str> {
    EntryType::ALL.iter().map(|t| t.as_str()).collect()
}

fn unavailable() -> ToolOutcome {
    ToolOutcome::error(
        "Error: the knowledge registry is not available on this host right now (it keeps none, \
         or could not read it). Go on without it, or try again later.",
    )
}

/// Reads `type`, when given.
fn entry_type(args: &Value) -> Result<Option<EntryType>, ToolOutcome> {
    match args["type"].as_str() {
        None => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|e| ToolOutcome::error(format!("Error: {e}."))),
    }
}

#[derive(Debug)]
pub(crate) struct KnowledgeSearch;

impl Tool for KnowledgeSearch {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            KNOWLEDGE_SEARCH,
            "Search the knowledge registry this deployment keeps across conversations (skills, \
             concepts, observations, preferences, references, people, projects) by words. \
             Returns the best matches, best first, each with its name, type, description and a \
             snippet; load one whole with knowledge_get.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1,
                              "description": "Words to look for."},
                    "type": {"type": "string", "enum": types(),
                             "description": "Only entries of this type."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                              "description": "At most this many results (default 8)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let entry_type = match entry_type(args) {
            Ok(t) => t,
            Err(err) => return err,
        };
        let Some(knowledge) = ctx.library.and_then(|l| l.knowledge()) else {
            return unavailable();
        };
        let limit = args["limit"]
            .as_u64()
            .unwrap_or(DEFAULT_LIMIT)
            .min(MAX_LIMIT);
        let query = args["query"].as_str().unwrap_or_default();
        let hits = knowledge.search(query, entry_type, usize::try_from(limit).unwrap_or(8));
        if hits.is_empty() {
            return ToolOutcome::ok(format!(
                "No knowledge entry matches `{query}` ({} entries in all).",
                knowledge.len()
            ));
        }
        let results: Vec<Value> = hits
            .iter()
            .map(|h| {
                json!({"name": h.name, "type": h.entry_type, "description": h.description,
                       "snippet": h.snippet})
            })
            .collect();
        ToolOutcome::ok(json!({"results": results}).to_string())
    }
}

#[derive(Debug)]
pub(crate) struct KnowledgeGet;

impl Tool for KnowledgeGet {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "knowledge_get",
            "Load a knowledge entry whole by its name (any case): its type, description, \
             content, tags, and for skills its files and allowed tools.",
            json!({
                "type": "object",
                "properties": {"name": {"type": "string", "minLength": 1}},
                "required": ["name"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let Some(knowledge) = ctx.library.and_then(|l| l.knowledge()) else {
            return unavailable();
        };
        let name = args["name"].as_str().unwrap_or_default();
        match knowledge.get(name) {
            Some(entry) => ToolOutcome::ok(
                json!({
                    "name": entry.name, "type": entry.entry_type,
                    "description": entry.description, "content": entry.content,
                    "tags": entry.tags, "files": entry.files,
                    "allowed_tools": entry.allowed_tools, "updated_at": entry.updated_at,
                })
                .to_string(),
            ),
            None => ToolOutcome::error(format!(
                "Error: there is no knowledge entry named `{name}`; knowledge_search finds \
                 entries by words."
            )),
        }
    }
}

#[derive(Debug)]
pub(crate) struct KnowledgeSave;

impl Tool for KnowledgeSave {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "knowledge_save",
            "Save an entry in the knowledge registry, for later conversations too: a new one, or \
             a replacement of the entry with that name (any case). Keep entries small and \
             specific; search before saving so you update rather than duplicate.",
            json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 100},
                    "type": {"type": "string", "enum": types(),
                             "description": "Default: observation."},
                    "description": {"type": "string", "maxLength": 1000,
                                    "description": "What it is about, in a sentence or two."},
                    "content": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
                    "files": {"type": "array", "items": {"type": "string"},
                              "description": "Skills only: files the skill uses."},
                    "allowed_tools": {"type": "array", "items": {"type": "string"},
                                      "description": "Skills only: tools the skill may call."}
                },
                "required": ["name", "content"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let entry_type = match entry_type(args) {
            Ok(t) => t.unwrap_or_default(),
            Err(err) => return err,
        };
        if !ctx.library.is_some_and(LibraryExt::has_knowledge) {
            return unavailable();
        }
        let strings = |key: &str| -> Vec<String> {
            args[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut entry = KnowledgeEntry::new(
            args["name"].as_str().unwrap_or_default(),
            entry_type,
            ctx.now,
        );
        entry.description = args["description"].as_str().unwrap_or_default().to_owned();
        entry.content = args["content"].as_str().unwrap_or_default().to_owned();
        entry.tags = strings("tags");
        entry.files = strings("files");
        entry.allowed_tools = strings("allowed_tools");
        if let Err(why) = entry.validate() {
            return ToolOutcome::error(format!("Error: not saved: {why}."));
        }
        let replaces = ctx
            .library
            .and_then(|l| l.knowledge())
            .is_some_and(|k| k.get(&entry.name).is_some());
        let text = format!(
            "Saved {} `{}`{}; searches find it from the next turn on (once this one is stored).",
            entry.entry_type,
            entry.name,
            if replaces {
                " (it replaces the entry of that name)"
            } else {
                ""
            }
        );
        ctx.emit(Effect::library(
            CATEGORY,
            &KnowledgeOp::SaveKnowledge { entry },
        ));
        ToolOutcome::ok(text)
    }
}
