//! [`StoredDirectory`]: the meta catalog of a deployment, read from its agent catalog: the stored
//! agents (newest versions), their skills, and the tool servers they name.
//!
//! A tool server is in the catalog because a stored agent uses it: to offer one to every agent
//! with `meta`, store an agent that lists it (an agent kept for that, with its servers and a
//! description, is enough). MCP servers are not in it: their bridges belong to the process that
//! runs the agent naming them.

use std::sync::Arc;

use async_trait::async_trait;

use crate::meta::{
    DirectoryAgent, DirectoryContents, DirectorySkill, DirectorySource, DirectoryToolServer,
};
use infinity_agent_core::catalog::AgentCatalog;
use infinity_agent_core::library::ShelfError;
use infinity_agent_core::tools::servers::{ToolDiscovery, ToolServerConfig, ToolServerEntry};

/// The catalog of a deployment's stored agents and their tool servers.
#[derive(Debug)]
pub struct StoredDirectory {
    catalog: Arc<dyn AgentCatalog>,
    discovery: Option<Arc<dyn ToolDiscovery>>,
}

impl StoredDirectory {
    /// Reads `catalog`; asks `discovery` for the tool servers' manifests (without it the catalog
    /// has no tool servers).
    pub fn new(catalog: Arc<dyn AgentCatalog>, discovery: Option<Arc<dyn ToolDiscovery>>) -> Self {
        Self { catalog, discovery }
    }
}

#[async_trait]
impl DirectorySource for StoredDirectory {
    async fn load(&self) -> Result<DirectoryContents, ShelfError> {
        let mut stored = self
            .catalog
            .list()
            .await
            .map_err(|e| ShelfError::Unavailable(e.to_string()))?;
        stored.sort_by(|a, b| a.name.cmp(&b.name));
        let mut contents = DirectoryContents::default();
        let mut servers: Vec<ToolServerConfig> = Vec::new();
        for agent in stored {
            let file = match agent.agent_file() {
                Ok(file) => file,
                Err(err) => {
                    tracing::warn!(agent = %agent.reference(), %err, "a stored agent left out of the meta directory");
                    continue;
                }
            };
            for skill in &file.skills {
                if let Some(content) = &skill.content {
                    contents.skills.push(DirectorySkill {
                        agent: agent.name.clone(),
                        name: skill.name.clone(),
                        description: skill.description.clone(),
                        content: content.clone(),
                    });
                }
            }
            for entry in &file.tool_servers {
                if let ToolServerEntry::Rap(server) = entry {
                    if !servers.iter().any(|s| s.url == server.url) {
                        servers.push(server.clone());
                    }
                }
            }
            contents.agents.push(DirectoryAgent {
                name: agent.name,
                version: agent.version,
                description: file.description.unwrap_or_default(),
            });
        }
        let Some(discovery) = &self.discovery else {
            return Ok(contents);
        };
        for found in discovery.discover(&servers).await {
            match found.result {
                Ok((endpoint, tools)) if !tools.is_empty() => {
                    let (name, description) = found.about.unzip();
                    contents.tool_servers.push(DirectoryToolServer::new(
                        &found.server,
                        name.as_deref(),
                        description.flatten().as_deref(),
                        endpoint,
                        tools,
                    ));
                }
                Ok(_) => {}
                Err(why) => {
                    tracing::warn!(server = %found.server, %why, "a tool server left out of the meta directory")
                }
            }
        }
        Ok(contents)
    }
}
