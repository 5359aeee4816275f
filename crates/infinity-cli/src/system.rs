//! Putting the embedded runtime together for `run`, `chat` and `serve`: the agent (a file, or a
//! stored one), the store folder, stored agents, the knowledge, tool servers.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::catalog::{describe_sub_agents, AgentCatalog, AgentRef, FileCatalog};
use infinity_agent_core::library::{AllowedModels, Library, ALLOWED_MODELS_VAR};
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder};
use infinity_agent_core::store::FileStore;
use infinity_agent_core::tools::SetTitle;
use infinity_library::artifact::{Artifacts, Blobs, FileBlobs, MemoryBlobs};
use infinity_library::knowledge::{KnowledgeStore, MemoryKnowledgeStore};
use infinity_library::meta::{StoredDirectory, DIRECTORY_REFRESH};
use infinity_library::LibraryExt;

use crate::{agents, knowledge, tool_servers, AgentArgs};

/// The longest one completion may take under `run --timeout`: a slice starts another only
/// while this much is left before the run gives up.
const RUN_COMPLETION_TIME: Duration = Duration::from_secs(120);

/// How a command takes its store folder when another process has it open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreAccess {
    /// Wait for it (a one-shot `run`).
    Wait,
    /// Fail at once, naming the holder (`chat`, `serve`: they would hold it for long).
    FailFast,
}

pub(crate) async fn build_system(args: &AgentArgs, access: StoreAccess) -> Result<AgentSystem> {
    Ok(build_system_with_receiver(args, access).await?.0)
}

/// [`build_system`], and its link to tool servers and other hosts when it has one: when the
/// agent has tool servers, or with a store. A store keeps the link (and its callback listener)
/// without tool servers on purpose: its stored agents may have servers, and a conversation moved
/// here (which only a store keeps) gets inputs forwarded from the host it left. Without either
/// there is nothing to call back, and no port is opened.
pub(crate) async fn build_system_with_receiver(
    args: &AgentArgs,
    access: StoreAccess,
) -> Result<(AgentSystem, Option<tool_servers::Links>)> {
    build_system_full(args, access, None, None).await
}

/// [`build_system_with_receiver`], taking remote machines' connections into `remotes` (the
/// `remote` category; `serve` has one), and keeping the pages agents publish (the `artifact`
/// category) when they are served at `pages` (`serve`'s address).
pub(crate) async fn build_system_full(
    args: &AgentArgs,
    access: StoreAccess,
    remotes: Option<Arc<infinity_server::remotes::MemoryRemotes>>,
    pages: Option<&str>,
) -> Result<(AgentSystem, Option<tool_servers::Links>)> {
    // With a store, its stored agents run too, and --agent may name one of them.
    let catalog: Option<Arc<dyn AgentCatalog>> = args
        .store
        .as_ref()
        .map(|dir| Arc::new(FileCatalog::new(dir)) as Arc<dyn AgentCatalog>);
    let (mut file, stored) = match &catalog {
        Some(catalog) if !args.agent.exists() => {
            let named = args.agent.to_string_lossy();
            let reference = AgentRef::parse(&named).map_err(anyhow::Error::msg)?;
            let found = catalog
                .get(&reference.name, reference.version)
                .await?
                .with_context(|| {
                    format!(
                        "--agent {named}: no such file, and no agent stored as {reference} in {}",
                        args.store.as_deref().unwrap_or(Path::new(".")).display()
                    )
                })?;
            (found.agent_file()?, Some((reference, found)))
        }
        _ => (AgentFile::load(&args.agent)?, None),
    };
    // Its categories, checked before anything starts: the error names the file.
    infinity_library::categories()
        .check(&file.internal_tools())
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.path.display()))?;
    // MCP servers in `tool_servers:` are reached through bridges this process starts.
    let has_mcp = file.tool_servers.iter().any(|entry| {
        matches!(
            entry,
            infinity_agent_core::tools::servers::ToolServerEntry::Mcp { .. }
        )
    });
    tool_servers::start_mcp_bridges(&mut file).await?;
    let spec = args.model.clone().unwrap_or_else(|| file.model.clone());
    let mut options = infinity_models::LoadOptions::default();
    if let Some(model) = &args.model {
        options = options.with_model(model);
    }
    let mut agent = match &stored {
        // MCP entries were bridged above, in `file`: a stored version with them loads from it.
        Some((_, found)) if file.tool_servers == found.agent_file()?.tool_servers => {
            infinity_models::stored::load_stored_agent(found, options).await?
        }
        Some((_, found)) => {
            let mut spec = infinity_models::load_agent(&file, options).await?;
            spec.version = Some(found.version);
            spec
        }
        None => infinity_models::load_agent(&file, options).await?,
    };
    if let Some(catalog) = &catalog {
        describe_sub_agents(catalog.as_ref(), &mut agent).await;
    }
    // A stored agent named without a version (and without --model) is not pinned at start:
    // each new conversation takes its newest version.
    // (Not with MCP servers: their bridges belong to this process and to this version.)
    let follow_newest =
        !has_mcp && matches!(&stored, Some((r, _)) if r.version.is_none() && args.model.is_none());
    if spec.starts_with("script:") {
        let keys: Vec<&str> = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
            .into_iter()
            .filter(|k| std::env::var_os(k).is_some())
            .collect();
        if keys.is_empty() {
            eprintln!(
                "note: running offline with the scripted model ({spec}); no model key is set"
            );
        } else {
            eprintln!(
                "note: running the scripted model ({spec}); {} is set: pass --model \
                 anthropic:MODEL or --model openai:MODEL to use a real model",
                keys.join(" and ")
            );
        }
    }
    let mut builder = AgentSystemBuilder::new()
        .with_tool(Arc::new(SetTitle))
        .with_tokio_sleep_tools();
    if let Some(deadline) = args.deadline {
        builder = builder.with_deadline(deadline, RUN_COMPLETION_TIME);
    }
    builder = if follow_newest {
        builder.with_default_agent(agent.name.clone())
    } else {
        builder.with_agent(agent)
    };
    // The knowledge registry: the store folder's (which `infinity knowledge` may write to while
    // this runs, so it is read again when older than 10 s), or one in memory.
    let knowledge: (Arc<dyn KnowledgeStore>, Option<Duration>) = match &args.store {
        Some(dir) => (
            Arc::new(knowledge::file_store(dir)?),
            Some(Duration::from_secs(10)),
        ),
        None => (Arc::new(MemoryKnowledgeStore::new()), None),
    };
    // Threads people switch to another model get it from the same providers (scripts relative
    // to the agent file).
    let models = infinity_models::stored::SpecModels::new(
        file.path.parent().map(Path::to_owned).unwrap_or_default(),
    );
    // ... only those the deployment lists: a spec comes from a request, and would otherwise
    // make a thread read any file (`script:PATH`).
    let listed = std::env::var(ALLOWED_MODELS_VAR).unwrap_or_default();
    let allowed = AllowedModels::new(
        args.allow_model
            .iter()
            .cloned()
            .chain(AllowedModels::split_list(&listed)),
        format!("`--allow-model SPEC` or `{ALLOWED_MODELS_VAR}`"),
    );
    let mut library = Library::new()
        .with_knowledge(knowledge.0, knowledge.1)
        .with_models(Arc::new(models), allowed);
    if let Some(hub) = &remotes {
        library = library.with_remotes(Arc::clone(hub) as _);
    }
    if let Some(url) = pages {
        // Published pages live in the store folder, or as long as the process without one.
        let blobs: Arc<dyn Blobs> = match &args.store {
            Some(dir) => Arc::new(FileBlobs::new(dir.join("artifacts"))),
            None => Arc::new(MemoryBlobs::default()),
        };
        library = library.with_artifacts(Artifacts::new(blobs, url));
    }
    if let Some(catalog) = &catalog {
        let stored_agents = agents::CliAgentBuilder {
            catalog: Arc::clone(catalog),
        };
        builder = builder.with_catalog(Arc::clone(catalog), Arc::new(stored_agents));
    }
    if let Some(dir) = &args.store {
        let store = match access {
            StoreAccess::FailFast => FileStore::open(dir),
            StoreAccess::Wait => FileStore::open_waiting(dir, |holder| {
                eprintln!(
                    "note: waiting for the store {}, in use by {holder}",
                    dir.display()
                )
            }),
        };
        let store = store?; // its errors name the folder
        for (thread, why) in store.broken() {
            eprintln!(
                "warning: thread {thread} of the store cannot be read and is left out: {why}"
            );
        }
        builder = builder.with_store(Arc::new(store));
    }
    let options = tool_servers::CallbackOptions {
        port: args.callback_port,
        public_url: args.callback_url.clone(),
    };
    let (builder, receiver) = tool_servers::prepare(
        &file,
        args.store.as_deref(),
        &options,
        builder,
        args.store.is_some(),
        remotes,
    )
    .await?;
    // The `meta` category's directory: the stored agents, their skills and tool servers.
    if let Some(catalog) = catalog {
        let discovery = receiver.as_ref().map(tool_servers::Receiver::discovery);
        let source = StoredDirectory::new(catalog, discovery);
        library = library.with_directory(Arc::new(source), DIRECTORY_REFRESH);
    }
    let builder = builder
        .with_library(library)
        .with_categories(infinity_library::categories());
    let system = builder.build().await?;
    let links = receiver.map(|receiver| receiver.serve(&system));
    Ok((system, links))
}
