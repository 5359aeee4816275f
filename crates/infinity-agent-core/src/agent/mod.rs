//! Agents: what runs a thread (system prompt, model, tools, limits), and the agent file.
//!
//! One way in, for every host: an [`AgentFile`] (or code) gives an [`AgentSpec`], and
//! [`Agent::from_spec`] adds the application's tools and compiles the registry.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use crate::cost::{Budget, Usd};
use crate::ids::ThreadId;
use crate::model::{ModelProvider, Priced};
use crate::state::{Toolset, WhileBusy};
use crate::tools::approval::ApprovalRule;
use crate::tools::client::{ClientTool, ClientToolFile};
use crate::tools::internal::delegation::{DelegateTool, SubAgent};
use crate::tools::internal::{Categories, InternalTools, Skill, ToolSettings};
use crate::tools::servers::{conversation_registry, ToolServerConfig};
use crate::tools::{RegistryError, Tool, ToolRegistry};

mod file;

pub use file::{
    is_agent_name, resolve_core_model, AgentFile, AgentFileError, CoreModelError, ModelSpec,
    ModelSpecError, SkillFile,
};

/// Bounds on what one thread may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Completions one slice may run before the engine stops the loop with a recorded error.
    pub max_completions_per_slice: u32,
    /// Compaction starts when a prompt passes this share (in percent) of the model's context
    /// window. Default 75.
    pub compact_at_percent: u8,
    /// Completions one thread may run in an hour (the hour on the clock); then it stops until a
    /// person writes to it. Default 120.
    pub completions_per_hour: u32,
    /// Tokens (prompt, cache and output) one thread's completions may use in an hour.
    /// Default 4,000,000.
    pub tokens_per_hour: u64,
    /// Completions all the threads of one conversation (a root thread and its children) may run
    /// in an hour. Default 600.
    pub conversation_completions_per_hour: u32,
    /// Tokens all the threads of one conversation may use in an hour. Default 20,000,000.
    pub conversation_tokens_per_hour: u64,
    /// Threads one conversation may start in an hour (children, threads for subscription
    /// events, delegations). Default 100.
    pub conversation_threads_per_hour: u32,
    /// Dollars all the threads of one conversation may spend over its whole life (each
    /// completion priced at its model's prices; see [`crate::cost`]). At the budget every thread
    /// of the conversation stops before its next completion until a person raises it. Default:
    /// none.
    pub conversation_budget_usd: Option<Usd>,
    /// Tokens (prompt, cache and output) all the threads of one conversation may use over its
    /// whole life, with the same stop. Default: none.
    pub conversation_budget_tokens: Option<u64>,
}

impl Limits {
    /// The lifetime budget these limits set for a conversation.
    pub fn budget(&self) -> Budget {
        Budget {
            usd: self.conversation_budget_usd,
            tokens: self.conversation_budget_tokens,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_completions_per_slice: 16,
            compact_at_percent: 75,
            completions_per_hour: 120,
            tokens_per_hour: 4_000_000,
            conversation_completions_per_hour: 600,
            conversation_tokens_per_hour: 20_000_000,
            conversation_threads_per_hour: 100,
            conversation_budget_usd: None,
            conversation_budget_tokens: None,
        }
    }
}

/// An agent as defined (by an agent file or by code), before the application's tools join it.
#[derive(Clone)]
pub struct AgentSpec {
    /// Its name.
    pub name: String,
    /// The system prompt.
    pub system_prompt: String,
    /// The model.
    pub model: Arc<dyn ModelProvider>,
    /// Limits.
    pub limits: Limits,
    /// What a person's message does while the thread is busy (`while_busy:`).
    pub while_busy: WhileBusy,
    /// Internal tool categories, with their settings.
    pub internal_tools: InternalTools,
    /// What `finish` results must match, if anything.
    pub output_schema: Option<serde_json::Value>,
    /// Skills for `skill_get`.
    pub skills: Vec<Skill>,
    /// Tool servers whose tools each new conversation discovers.
    pub tool_servers: Vec<ToolServerConfig>,
    /// Stored agents offered as tools that delegate to them (`agents:` of the file).
    pub sub_agents: Vec<SubAgent>,
    /// Tools the calling application runs (`client_tools:`).
    pub client_tools: Vec<ClientToolFile>,
    /// Tools whose calls wait for a person's approval (`approvals:`).
    pub approvals: Vec<ApprovalRule>,
    /// The stored version this is, if it is one.
    pub version: Option<u32>,
}

impl fmt::Debug for AgentSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentSpec")
            .field("name", &self.name)
            .field("model", &self.model.name())
            .finish_non_exhaustive()
    }
}

impl AgentSpec {
    /// An agent with default limits and internal tools.
    pub fn new(
        name: impl Into<String>,
        system_prompt: impl Into<String>,
        model: Arc<dyn ModelProvider>,
    ) -> Self {
        Self {
            name: name.into(),
            system_prompt: system_prompt.into(),
            model,
            limits: Limits::default(),
            while_busy: WhileBusy::default(),
            internal_tools: InternalTools::default(),
            output_schema: None,
            skills: Vec::new(),
            tool_servers: Vec::new(),
            sub_agents: Vec::new(),
            client_tools: Vec::new(),
            approvals: Vec::new(),
            version: None,
        }
    }

    /// The agent an agent file describes, with its model already resolved. Reads the skills'
    /// files; `fetched` holds the text of skills loaded from a url (see
    /// [`AgentFile::skill_urls`]).
    pub fn from_file(
        file: &AgentFile,
        model: Arc<dyn ModelProvider>,
        fetched: &BTreeMap<String, String>,
    ) -> Result<Self, AgentFileError> {
        let model = match file.prices {
            Some(prices) => Arc::new(Priced::new(model, prices)),
            None => model,
        };
        Ok(Self {
            name: file.name.clone(),
            system_prompt: file.system.clone(),
            model,
            limits: file.limits,
            while_busy: file.while_busy,
            internal_tools: file.internal_tools(),
            output_schema: file.output_schema.clone(),
            skills: file.load_skills(fetched)?,
            tool_servers: file.rap_servers()?,
            sub_agents: file
                .agents
                .iter()
                .map(|name| SubAgent {
                    name: name.clone(),
                    description: None,
                })
                .collect(),
            client_tools: file.client_tools.clone(),
            approvals: file.approvals.clone(),
            version: None,
        })
    }
}

/// A runnable agent: its definition with the tool registry compiled.
pub struct Agent {
    /// Its name; threads refer to their agent by it.
    pub name: String,
    /// The stored version it is (see [`crate::catalog`]); `None` for an agent a host was given
    /// directly. Threads created with a stored agent record `NAME@VERSION` and keep it.
    pub version: Option<u32>,
    /// The system prompt.
    pub system_prompt: String,
    /// The model.
    pub model: Arc<dyn ModelProvider>,
    /// Its tools (built-ins, internal tools, application tools).
    pub tools: Arc<ToolRegistry>,
    /// Its limits.
    pub limits: Limits,
    /// What a person's message does while the thread is busy (`while_busy:`).
    pub while_busy: WhileBusy,
    /// Tool servers whose tools each new conversation discovers.
    pub tool_servers: Vec<ToolServerConfig>,
    /// Tools whose calls wait for a person's approval (`approvals:`), first rule first.
    pub approvals: Vec<ApprovalRule>,
    /// The compiled tools of recent conversations, by root thread (see
    /// [`Agent::conversation_tools`]).
    conversations: Mutex<HashMap<ThreadId, (Toolset, Arc<ToolRegistry>)>>,
}

/// How many conversations' compiled tools an agent keeps.
const CONVERSATIONS_KEPT: usize = 256;

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("model", &self.model.name())
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .finish()
    }
}

impl Agent {
    /// An agent with these tools, default limits and no tool servers.
    pub fn new(
        name: impl Into<String>,
        system_prompt: impl Into<String>,
        model: Arc<dyn ModelProvider>,
        tools: ToolRegistry,
    ) -> Self {
        Self {
            name: name.into(),
            version: None,
            system_prompt: system_prompt.into(),
            model,
            tools: Arc::new(tools),
            limits: Limits::default(),
            while_busy: WhileBusy::default(),
            tool_servers: Vec::new(),
            approvals: Vec::new(),
            conversations: Mutex::default(),
        }
    }

    /// The agent `spec` defines, with the application's tools next to its built-in and internal
    /// ones (of the host's `categories`). Fails when `internal_tools:` names a category the host
    /// does not have, a tool's name clashes or its schema does not compile.
    pub fn from_spec(
        spec: AgentSpec,
        categories: &Categories,
        app_tools: &[Arc<dyn Tool>],
    ) -> Result<Self, RegistryError> {
        let settings = ToolSettings {
            output_schema: spec.output_schema,
            skills: spec.skills,
        };
        let mut tools: Vec<Arc<dyn Tool>> = app_tools.to_vec();
        for sub in spec.sub_agents {
            let name = crate::tools::internal::delegation::agent_tool_name(&sub.name);
            let taken = crate::tools::BUILTIN_TOOL_NAMES.contains(&name.as_str())
                || categories
                    .enabled_tool(&spec.internal_tools, &name)
                    .is_some()
                || app_tools.iter().any(|t| t.spec().name == name);
            if taken {
                // Saving checks this (see `catalog::check_names`); a version saved before a
                // default changed runs without the one tool.
                tracing::warn!(agent = %spec.name, tool = %name, "the configured agent's tool has the name of another tool of this agent; it is left out");
                continue;
            }
            tools.push(Arc::new(DelegateTool::to(sub)));
        }
        for tool in spec.client_tools {
            tools.push(Arc::new(ClientTool::new(tool)));
        }
        let tools = ToolRegistry::for_agent(categories, &spec.internal_tools, &settings, &tools)?;
        // A rule for a tool the agent cannot call would ask nothing, ever: a typo. (A tool
        // server's tools are known only when a conversation starts: with servers, any name goes.)
        if spec.tool_servers.is_empty() {
            let unknown = spec
                .approvals
                .iter()
                .flat_map(|rule| &rule.tools)
                .find(|name| !name.contains('*') && tools.get(name).is_none());
            if let Some(name) = unknown {
                let mut known: Vec<&str> = tools.specs().iter().map(|t| t.name.as_str()).collect();
                known.sort_unstable();
                return Err(RegistryError::UnknownApproval {
                    name: name.clone(),
                    known: known.join(", "),
                });
            }
        }
        let mut agent = Self::new(spec.name, spec.system_prompt, spec.model, tools);
        agent.limits = spec.limits;
        agent.while_busy = spec.while_busy;
        agent.tool_servers = spec.tool_servers;
        agent.approvals = spec.approvals;
        agent.version = spec.version;
        for warning in agent.warnings() {
            tracing::warn!(agent = %agent.name, "{warning}");
        }
        Ok(agent)
    }

    /// What a person running this agent should know before it runs, as sentences: a dollar
    /// budget (`limits.conversation_budget_usd`) on a model without prices, which never
    /// stops anything, since its completions cost nothing the runtime can count.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some(usd) = self.limits.conversation_budget_usd {
            if self.model.prices().is_none() {
                warnings.push(format!(
                    "agent `{}` has a budget of {usd} (limits.conversation_budget_usd), but its \
                     model {} has no prices: its completions count as unpriced and the budget \
                     never stops them; give the model's `prices:` in the agent file, or a token \
                     budget (limits.conversation_budget_tokens)",
                    self.name,
                    self.model.name()
                ));
            }
        }
        warnings
    }

    /// The compiled registry of a conversation's tools (`toolset`, kept on the root thread
    /// `root`). A conversation's toolset does not change, so its schemas are compiled once and
    /// kept for the next slices (of the most recent conversations).
    pub fn conversation_tools(&self, root: &ThreadId, toolset: &Toolset) -> Arc<ToolRegistry> {
        let mut conversations = self
            .conversations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((kept, registry)) = conversations.get(root) {
            if kept == toolset {
                return Arc::clone(registry);
            }
        }
        let registry = Arc::new(conversation_registry(toolset));
        if conversations.len() >= CONVERSATIONS_KEPT {
            conversations.clear();
        }
        conversations.insert(root.clone(), (toolset.clone(), Arc::clone(&registry)));
        registry
    }
}

/// Finds agents by the name a thread records: `NAME`, or `NAME@VERSION` for a stored version
/// (see [`crate::catalog`]).
#[async_trait::async_trait]
pub trait AgentLookup: Send + Sync {
    /// The agent with this name, if it is ready (the engine cannot wait).
    fn agent(&self, name: &str) -> Option<Arc<Agent>>;

    /// Makes the agent `name` ready for [`AgentLookup::agent`], reading and building it when it
    /// is stored. Hosts call it before a slice. A name no one has is not an error here: the
    /// engine reports it. Default: every agent is always ready.
    async fn prepare(&self, name: &str) -> Result<(), PrepareError> {
        let _ = name;
        Ok(())
    }
}

/// Why an agent could not be made ready.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    /// Its store could not be read; try again later.
    #[error("{0}")]
    Unavailable(String),
    /// It is stored but cannot run (its model cannot be built, its file no longer parses).
    #[error("{0}")]
    Broken(String),
}

impl AgentLookup for HashMap<String, Arc<Agent>> {
    fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        self.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(text: &str) -> Result<AgentFile, AgentFileError> {
        AgentFile::parse(text, Path::new("agents/a.yaml"))
    }

    #[test]
    fn client_tools_and_approvals_are_read_and_what_is_wrong_with_them_is_named() {
        let file = parse(
            "name: a\nmodel: script:s\nclient_tools:\n  - {name: pick, description: d, deadline: 5m}\n\
             approvals:\n  - {tools: [pick, \"send_*\"], deadline: 1d, default: approve}\n",
        )
        .unwrap();
        assert_eq!(file.client_tools[0].name, "pick");
        assert_eq!(file.client_tools[0].input_schema["type"], "object");
        assert_eq!(file.approvals[0].pattern_for("send_mail"), Some("send_*"));
        for (text, named) in [
            (
                "client_tools: [{name: \"a b\", description: d}]",
                "`a b` is not a tool name",
            ),
            (
                "client_tools: [{name: x, description: d}, {name: x, description: e}]",
                "`x` is listed twice",
            ),
            (
                "client_tools: [{name: x, description: d, input_schema: {type: string}}]",
                "must be an object schema",
            ),
            (
                "client_tools: [{name: x, description: d, deadline: soon}]",
                "deadline `soon`",
            ),
            ("approvals: [{tools: []}]", "lists no tools"),
            (
                "approvals: [{tools: [x], default: approve}]",
                "without a `deadline`",
            ),
            ("approvals: [{tools: [x], default: maybe}]", "maybe"),
        ] {
            let err = parse(&format!("name: a\nmodel: script:s\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(named), "{text}: {err}");
        }
    }

    #[test]
    fn while_busy_is_read_and_a_policy_it_does_not_know_is_named() {
        let file = parse("name: a\nmodel: script:s\nwhile_busy: queue\n").unwrap();
        assert_eq!(file.while_busy, WhileBusy::Queue);
        assert_eq!(
            parse("name: a\nmodel: script:s\n").unwrap().while_busy,
            WhileBusy::MoveOn
        );
        let bad = parse("name: a\nmodel: script:s\nwhile_busy: later\n")
            .unwrap_err()
            .to_string();
        assert!(bad.contains("while_busy") && bad.contains("later"), "{bad}");
        assert!(bad.contains("move_on") && bad.contains("reject"), "{bad}");
    }

    #[test]
    fn skills_need_one_source_and_paths_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bake.md"), "Knead.").unwrap();
        let path = dir.path().join("a.yaml");
        let ok = AgentFile::parse(
            "name: a\nmodel: script:s\nskills:\n  - {name: bake, description: d, path: bake.md}\n  - {name: tea, description: d, content: Steep.}\n",
            &path,
        )
        .unwrap();
        let skills = ok.load_skills(&Default::default()).unwrap();
        assert_eq!(
            (skills[0].content.as_str(), skills[1].content.as_str()),
            ("Knead.", "Steep.")
        );
        let two = AgentFile::parse(
            "name: a\nmodel: script:s\nskills: [{name: x, description: d, content: c, path: p}]\n",
            &path,
        )
        .unwrap_err()
        .to_string();
        assert!(two.contains("exactly one of content, path or url"), "{two}");
        let dup = AgentFile::parse("name: a\nmodel: script:s\nskills: [{name: x, description: d, content: c}, {name: x, description: d, content: c}]\n", &path)
            .unwrap_err()
            .to_string();
        assert!(dup.contains("listed twice"), "{dup}");
        let missing = AgentFile::parse(
            "name: a\nmodel: script:s\nskills: [{name: x, description: d, path: nope.md}]\n",
            &path,
        )
        .unwrap()
        .load_skills(&Default::default())
        .unwrap_err()
        .to_string();
        assert!(
            missing.contains("skill `x`") && missing.contains("nope.md"),
            "{missing}"
        );
        // A url skill takes what the host fetched, and names the skill when it was not.
        let remote = AgentFile::parse(
            "name: a\nmodel: script:s\nskills: [{name: r, description: d, url: 'http://x/r.md'}]\n",
            &path,
        )
        .unwrap();
        assert_eq!(remote.skill_urls(), ["http://x/r.md"]);
        let fetched = [("http://x/r.md".to_owned(), "Remote.".to_owned())].into();
        assert_eq!(remote.load_skills(&fetched).unwrap()[0].content, "Remote.");
        let err = remote
            .load_skills(&Default::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("skill `r`") && err.contains("http://x/r.md"),
            "{err}"
        );
    }

    #[test]
    fn mcp_servers_need_a_host_that_bridges_them() {
        let file = parse(
            "name: a\nmodel: script:s\ntool_servers:\n  - http://127.0.0.1:8701\n  - {mcp: {command: npx, args: [srv]}}\n",
        )
        .unwrap();
        let err = file.rap_servers().unwrap_err().to_string();
        assert!(
            err.contains("npx srv") && err.contains("infinity mcp-bridge"),
            "{err}"
        );
        let rap_only =
            parse("name: a\nmodel: script:s\ntool_servers: [http://127.0.0.1:8701]\n").unwrap();
        assert_eq!(
            rap_only.rap_servers().unwrap()[0].url,
            "http://127.0.0.1:8701"
        );
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let a = parse("name: a\nmodel: script:s.yaml\n").unwrap();
        assert_eq!(a.limits, Limits::default());
        assert_eq!(a.resolve_path("s.yaml"), Path::new("agents/s.yaml"));
    }

    #[test]
    fn unknown_key_is_named_with_the_file() {
        let err = parse("name: a\nmodel: script:s.yaml\ntemprature: 1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("agents/a.yaml"), "{err}");
        assert!(err.contains("temprature"), "{err}");
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = parse("name: a b\nmodel: script:s.yaml\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("key `name`"), "{err}");
        let err = parse("name: a\nmodel: gpt4\n").unwrap_err().to_string();
        assert!(err.contains("key `model`"), "{err}");
        let err = parse("name: a\nmodel: script:x\nlimits: {max_completions_per_slice: 0}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_completions_per_slice"), "{err}");
        let err = parse("name: a\nmodel: script:x\nlimits: {max_completions_per_slice: many}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("max_completions_per_slice"), "{err}");
    }
}
