//! `infinity knowledge list|add|show|rm|search`: the deployment's knowledge registry, in a store
//! folder (`--store`) or an AWS (or local) stack's table, for people.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use infinity_aws::knowledge::DynamoKnowledgeStore;
use infinity_library::knowledge::{
    EntryType, FileKnowledgeStore, Knowledge, KnowledgeEntry, KnowledgeStore,
};

use crate::place::{Opened, Place};

#[derive(Debug, Subcommand)]
pub enum KnowledgeCommand {
    /// Every entry (of a type), by name.
    List(ListArgs),
    /// Add an entry, or replace the one with its name (any case).
    Add(AddArgs),
    /// One entry, whole.
    Show(NameArgs),
    /// Remove an entry.
    Rm(NameArgs),
    /// The entries best matching some words, as the agents' `knowledge_search` finds them.
    Search(SearchArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    place: Place,
    /// Only entries of this type.
    #[arg(long = "type")]
    entry_type: Option<EntryType>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    #[command(flatten)]
    place: Place,
    /// The entry's name.
    name: String,
    /// skill, concept, observation (the default), preference, reference, person or project.
    #[arg(long = "type", default_value = "observation")]
    entry_type: EntryType,
    /// What it is about, in a sentence or two.
    #[arg(long, default_value = "")]
    description: String,
    /// The content.
    #[arg(long, required_unless_present = "file")]
    content: Option<String>,
    /// Read the content from this file instead (`-`: standard input).
    #[arg(long, conflicts_with = "content")]
    file: Option<PathBuf>,
    /// A tag (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Skills only: a file the skill uses (repeatable).
    #[arg(long = "skill-file")]
    files: Vec<String>,
    /// Skills only: a tool the skill may call (repeatable).
    #[arg(long = "allowed-tool")]
    allowed_tools: Vec<String>,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    #[command(flatten)]
    place: Place,
    /// The entry's name (any case).
    name: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    place: Place,
    /// The words.
    query: String,
    /// Only entries of this type.
    #[arg(long = "type")]
    entry_type: Option<EntryType>,
    /// At most this many results.
    #[arg(long, default_value_t = 10)]
    limit: usize,
}

/// The knowledge of a store folder.
pub fn file_store(store: &std::path::Path) -> Result<FileKnowledgeStore> {
    Ok(FileKnowledgeStore::open(store.join("knowledge"))?)
}

async fn open(place: &Place, create: bool) -> Result<Arc<dyn KnowledgeStore>> {
    Ok(match place.open(create).await? {
        Opened::Folder(dir) => Arc::new(file_store(&dir)?),
        Opened::Table { clients, table } => {
            Arc::new(DynamoKnowledgeStore::new(clients.dynamodb, table))
        }
    })
}

pub async fn run(command: KnowledgeCommand) -> Result<u8> {
    match command {
        KnowledgeCommand::List(args) => {
            let store = open(&args.place, false).await?;
            let mut entries = store.load_all().await?;
            entries.retain(|e| args.entry_type.is_none_or(|t| e.entry_type == t));
            if args.json {
                crate::out!("{}", serde_json::to_string_pretty(&entries)?);
            } else if entries.is_empty() {
                crate::out!("no knowledge entries");
            }
            if !args.json {
                for e in &entries {
                    crate::out!(
                        "{:<12} {}  {}",
                        e.entry_type.as_str(),
                        e.name,
                        e.description
                    );
                }
            }
            Ok(0)
        }
        KnowledgeCommand::Add(args) => {
            let store = open(&args.place, true).await?;
            let content = match (&args.content, &args.file) {
                (Some(text), _) => text.clone(),
                (None, Some(path)) if path.as_os_str() == "-" => {
                    std::io::read_to_string(std::io::stdin()).context("reading standard input")?
                }
                (None, Some(path)) => std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?,
                (None, None) => String::new(),
            };
            let now = jiff::Timestamp::now();
            let mut entry = KnowledgeEntry::new(args.name, args.entry_type, now);
            if let Some(old) = store.get(&entry.name).await? {
                entry.created_at = old.created_at;
            }
            entry.description = args.description;
            entry.content = content;
            entry.tags = args.tags;
            entry.files = args.files;
            entry.allowed_tools = args.allowed_tools;
            let version = store.put(&entry, None).await?;
            crate::out!(
                "saved {} `{}` (version {version})",
                entry.entry_type,
                entry.name
            );
            Ok(0)
        }
        KnowledgeCommand::Show(args) => {
            let store = open(&args.place, false).await?;
            let entry = store
                .get(&args.name)
                .await?
                .with_context(|| format!("no knowledge entry named `{}`", args.name))?;
            if args.json {
                crate::out!("{}", serde_json::to_string_pretty(&entry)?);
                return Ok(0);
            }
            crate::out!(
                "{} ({}, version {}, updated {})",
                entry.name,
                entry.entry_type,
                entry.version,
                entry.updated_at
            );
            if !entry.description.is_empty() {
                crate::out!("{}", entry.description);
            }
            if !entry.tags.is_empty() {
                crate::out!("tags: {}", entry.tags.join(", "));
            }
            if !entry.files.is_empty() {
                crate::out!("files: {}", entry.files.join(", "));
            }
            if !entry.allowed_tools.is_empty() {
                crate::out!("allowed tools: {}", entry.allowed_tools.join(", "));
            }
            crate::out!("---\n{}", entry.content);
            Ok(0)
        }
        KnowledgeCommand::Rm(args) => {
            let store = open(&args.place, false).await?;
            if !store.remove(&args.name).await? {
                anyhow::bail!("no knowledge entry named `{}`", args.name);
            }
            crate::out!("removed `{}`", args.name);
            Ok(0)
        }
        KnowledgeCommand::Search(args) => {
            let store = open(&args.place, false).await?;
            let knowledge = Knowledge::from_entries(store.load_all().await?);
            let hits = knowledge.search(&args.query, args.entry_type, args.limit);
            if hits.is_empty() {
                crate::out!("nothing matches `{}`", args.query);
            }
            for hit in hits {
                crate::out!(
                    "{:<12} {}  {}\n    {}",
                    hit.entry_type.as_str(),
                    hit.name,
                    hit.description,
                    hit.snippet
                );
            }
            Ok(0)
        }
    }
}
