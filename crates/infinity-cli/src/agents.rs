//! `infinity agents save|list|show`: a deployment's stored agents, in a store folder (`--store`)
//! or an AWS (or local) stack's table; and the builder that runs stored agents in this process.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use async_trait::async_trait;
use clap::{Args, Subcommand};
use infinity_agent_core::agent::Agent;
use infinity_agent_core::catalog::{
    check_names, describe_sub_agents, AgentBuilder, AgentCatalog, AgentRef, BuildError,
    FileCatalog, StoredAgent,
};
use infinity_agent_core::tools::servers::{ToolDiscovery, ToolServerEntry};
use infinity_agent_core::tools::{SetTitle, Tool};
use infinity_aws::catalog::DynamoAgentCatalog;

use crate::place::{Opened, Place};

#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Store a new version of an agent file (named by its `name:`), with the skill files it
    /// names. Threads keep the version they started with; new ones take the newest.
    Save(SaveArgs),
    /// The newest version of every stored agent.
    List(ListArgs),
    /// One stored version: NAME (the newest) or NAME@VERSION.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct SaveArgs {
    #[command(flatten)]
    catalog: Place,
    /// The agent file.
    file: PathBuf,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    catalog: Place,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    catalog: Place,
    /// NAME or NAME@VERSION.
    agent: String,
    /// Print the stored version as JSON.
    #[arg(long)]
    json: bool,
}

async fn open(place: &Place, create: bool) -> Result<Arc<dyn AgentCatalog>> {
    Ok(match place.open(create).await? {
        Opened::Folder(dir) => Arc::new(FileCatalog::new(&dir)),
        Opened::Table { clients, table } => {
            Arc::new(DynamoAgentCatalog::new(clients.dynamodb, table))
        }
    })
}

pub async fn run(command: AgentsCommand) -> Result<u8> {
    match command {
        AgentsCommand::Save(args) => save(args).await,
        AgentsCommand::List(args) => list(args).await,
        AgentsCommand::Show(args) => show(args).await,
    }
}

async fn save(args: SaveArgs) -> Result<u8> {
    let version = StoredAgent::read(&args.file)?;
    let file = version.agent_file()?;
    let server_tools = server_tools(&file).await;
    let categories = infinity_library::categories();
    categories
        .check(&file.internal_tools())
        .map_err(|e| anyhow::anyhow!("{}: not saved: {e}", args.file.display()))?;
    let clashes = check_names(&file, &categories, &server_tools);
    if !clashes.is_empty() {
        for clash in &clashes {
            eprintln!("error: {}: {clash}", args.file.display());
        }
        anyhow::bail!(
            "{}: not saved: {} tool name(s) taken",
            args.file.display(),
            clashes.len()
        );
    }
    let catalog = open(&args.catalog, true).await?;
    for sub in &file.agents {
        if catalog.get(sub, None).await?.is_none() {
            eprintln!(
                "warning: `agents:` names `{sub}`, which is not stored yet: calls of its tool \
                 return an error until it is"
            );
        }
    }
    // Saving the same file again adds no version: the newest one already is it.
    if let Some(newest) = catalog.get(&version.name, None).await? {
        if newest.text == version.text
            && newest.files == version.files
            && newest.source_dir == version.source_dir
        {
            crate::out!("unchanged: {} is already this file", newest.reference());
            return Ok(0);
        }
    }
    let saved = catalog.save(version, jiff::Timestamp::now()).await?;
    crate::out!("saved {}", saved.reference());
    Ok(0)
}

/// The tools the agent's RAP servers offer, as `(name, server)`, for the name rule. A server
/// that cannot be reached now is not checked (said on stderr); MCP servers are checked when the
/// bridge runs them.
async fn server_tools(file: &infinity_agent_core::agent::AgentFile) -> Vec<(String, String)> {
    let servers: Vec<_> = file
        .tool_servers
        .iter()
        .filter_map(|entry| match entry {
            ToolServerEntry::Rap(config) => Some(config.clone()),
            ToolServerEntry::Mcp { mcp } => {
                eprintln!("note: the tools of the MCP server `{mcp}` are not checked on save");
                None
            }
        })
        .collect();
    if servers.is_empty() {
        return Vec::new();
    }
    let secret = uuid::Uuid::new_v4().simple().to_string().repeat(2);
    let Ok(signer) = infinity_rap::signing::CallbackSigner::new(secret, "http://127.0.0.1:1")
    else {
        return Vec::new();
    };
    let client =
        match infinity_rap_runtime::client::RapClient::new(signer).with_configured(&servers) {
            Ok(client) => client,
            Err(err) => {
                eprintln!("note: tool servers not checked: {err}");
                return Vec::new();
            }
        };
    let mut tools = Vec::new();
    for found in client.discover(&servers).await {
        match found.result {
            Ok((_, specs)) => {
                tools.extend(specs.into_iter().map(|s| (s.name, found.server.clone())));
            }
            Err(why) => eprintln!(
                "note: tool server {} not reached, its tool names are not checked: {why}",
                found.server
            ),
        }
    }
    tools
}

async fn list(args: ListArgs) -> Result<u8> {
    let catalog = open(&args.catalog, false).await?;
    let agents = catalog.list().await?;
    if args.json {
        let rows: Vec<serde_json::Value> = agents
            .iter()
            .map(|a| {
                serde_json::json!({
                    "name": a.name,
                    "version": a.version,
                    "saved_at": a.saved_at,
                    "description": a.description,
                })
            })
            .collect();
        crate::out!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(0);
    }
    if agents.is_empty() {
        crate::out!("no stored agents (save one with `infinity agents save FILE`)");
    }
    for a in agents {
        crate::out!(
            "{:<24} v{:<4} {}  {}",
            a.name,
            a.version,
            a.saved_at.strftime("%Y-%m-%d %H:%M:%S"),
            a.description.as_deref().unwrap_or("")
        );
    }
    Ok(0)
}

async fn show(args: ShowArgs) -> Result<u8> {
    let reference = AgentRef::parse(&args.agent).map_err(anyhow::Error::msg)?;
    let catalog = open(&args.catalog, false).await?;
    let Some(agent) = catalog.get(&reference.name, reference.version).await? else {
        let versions = catalog.versions(&reference.name).await?;
        anyhow::bail!(
            "no stored agent {reference}{}",
            if versions.is_empty() {
                String::new()
            } else {
                format!(
                    " (its versions: {})",
                    versions
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    };
    if args.json {
        crate::out!("{}", serde_json::to_string_pretty(&agent)?);
        return Ok(0);
    }
    let versions = catalog.versions(&agent.name).await?;
    crate::out!(
        "{} (versions: {}), saved {}",
        agent.reference(),
        versions
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        agent.saved_at
    );
    if let Some(dir) = &agent.source_dir {
        crate::out!("from {dir}");
    }
    for path in agent.files.keys() {
        crate::out!("with {path}");
    }
    crate::out!("---\n{}", agent.text.trim_end());
    Ok(0)
}

/// Builds stored agents in this process, with the same tools and model keys as the command's
/// own agent (`--model` does not apply to them: each runs the model its file names).
pub struct CliAgentBuilder {
    pub catalog: Arc<dyn AgentCatalog>,
}

#[async_trait]
impl AgentBuilder for CliAgentBuilder {
    async fn build(&self, stored: &StoredAgent) -> Result<Agent, BuildError> {
        let mut spec = infinity_models::stored::load_stored_agent(
            stored,
            infinity_models::LoadOptions::default(),
        )
        .await
        .map_err(BuildError::invalid)?;
        describe_sub_agents(self.catalog.as_ref(), &mut spec).await;
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(SetTitle)];
        Agent::from_spec(spec, &infinity_library::categories(), &tools).map_err(BuildError::invalid)
    }
}
