//! Agents: what runs a thread (system prompt, model, tools, limits), and the agent file.
//!
//! One way in, for every host: an [`AgentFile`] (or code) gives an [`AgentSpec`], and
//! [`Agent::from_spec`] adds the application's tools and compiles the registry.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

use crate::ids::ThreadId;
use crate::model::ModelProvider;
use crate::state::Toolset;
use crate::tools::internal::{InternalTools, Skill, ToolSettings};
use crate::tools::remote::{session_registry, ToolServerConfig};
use crate::tools::{RegistryError, Tool, ToolRegistry};

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
    /// Internal tool categories.
    pub internal_tools: InternalTools,
    /// What `finish` results must match, if anything.
    pub output_schema: Option<serde_json::Value>,
    /// Skills for `skill_get`.
    pub skills: Vec<Skill>,
    /// Tool servers whose tools each new session discovers.
    pub tool_servers: Vec<ToolServerConfig>,
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
            internal_tools: InternalTools::default(),
            output_schema: None,
            skills: Vec::new(),
            tool_servers: Vec::new(),
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
        Ok(Self {
            name: file.name.clone(),
            system_prompt: file.system.clone(),
            model,
            limits: file.limits,
            internal_tools: file.internal_tools.resolve(),
            output_schema: file.output_schema.clone(),
            skills: file.load_skills(fetched)?,
            tool_servers: file.rap_servers()?,
        })
    }
}

/// A runnable agent: its definition with the tool registry compiled.
pub struct Agent {
    /// Its name; threads refer to their agent by it.
    pub name: String,
    /// The system prompt.
    pub system_prompt: String,
    /// The model.
    pub model: Arc<dyn ModelProvider>,
    /// Its tools (built-ins, internal tools, application tools).
    pub tools: Arc<ToolRegistry>,
    /// Its limits.
    pub limits: Limits,
    /// Tool servers whose tools each new session discovers.
    pub tool_servers: Vec<ToolServerConfig>,
    /// The compiled tools of recent sessions, by root thread (see [`Agent::session_tools`]).
    sessions: Mutex<HashMap<ThreadId, (Toolset, Arc<ToolRegistry>)>>,
}

/// How many sessions' compiled tools an agent keeps.
const SESSIONS_KEPT: usize = 256;

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
            system_prompt: system_prompt.into(),
            model,
            tools: Arc::new(tools),
            limits: Limits::default(),
            tool_servers: Vec::new(),
            sessions: Mutex::default(),
        }
    }

    /// The agent `spec` defines, with the application's tools next to its built-in and internal
    /// ones. Fails when a tool's name clashes or its schema does not compile.
    pub fn from_spec(spec: AgentSpec, app_tools: &[Arc<dyn Tool>]) -> Result<Self, RegistryError> {
        let settings = ToolSettings {
            output_schema: spec.output_schema,
            skills: spec.skills,
        };
        let tools = ToolRegistry::for_agent(&spec.internal_tools, &settings, app_tools)?;
        let mut agent = Self::new(spec.name, spec.system_prompt, spec.model, tools);
        agent.limits = spec.limits;
        agent.tool_servers = spec.tool_servers;
        Ok(agent)
    }

    /// The compiled registry of a session's tools (`toolset`, kept on the root thread `root`).
    /// A session's toolset does not change, so its schemas are compiled once and kept for the
    /// next slices (of the most recent sessions).
    pub fn session_tools(&self, root: &ThreadId, toolset: &Toolset) -> Arc<ToolRegistry> {
        let mut sessions = self
            .sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((kept, registry)) = sessions.get(root) {
            if kept == toolset {
                return Arc::clone(registry);
            }
        }
        let registry = Arc::new(session_registry(toolset));
        if sessions.len() >= SESSIONS_KEPT {
            sessions.clear();
        }
        sessions.insert(root.clone(), (toolset.clone(), Arc::clone(&registry)));
        registry
    }
}

/// Finds agents by name.
pub trait AgentLookup: Send + Sync {
    /// The agent with this name.
    fn agent(&self, name: &str) -> Option<Arc<Agent>>;
}

impl AgentLookup for HashMap<String, Arc<Agent>> {
    fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        self.get(name).cloned()
    }
}

/// An agent file (`agent.yaml`) as written.
///
/// ```yaml
/// name: demo
/// model: script:demo.script.yaml   # PROVIDER:MODEL; script paths are relative to this file
/// system: You are a helpful agent.
/// limits:
///   max_completions_per_slice: 16
/// internal_tools: {plan: true, finish: false}
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentFile {
    /// Letters, digits, `_`, `-` and `.`.
    pub name: String,
    /// `PROVIDER:MODEL`, e.g. `script:demo.script.yaml`.
    pub model: String,
    /// The system prompt.
    #[serde(default)]
    pub system: String,
    /// A line for people reading a list of agents.
    #[serde(default)]
    pub description: Option<String>,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
    /// Which internal tool categories are on (see [`crate::tools::internal`]).
    #[serde(default)]
    pub internal_tools: crate::tools::internal::InternalToolsConfig,
    /// A JSON Schema that a successful `finish` result must match.
    #[serde(default)]
    pub output_schema: Option<serde_json::Value>,
    /// Skills the model can load with `skill_get`.
    #[serde(default)]
    pub skills: Vec<SkillFile>,
    /// Tool servers: RAP base URLs, `{url, auth}`, or MCP servers (`{mcp: ...}`) the host
    /// bridges. Their tools are discovered when a session starts.
    #[serde(default)]
    pub tool_servers: Vec<crate::tools::remote::ToolServerEntry>,
    /// The file this was read from (set by [`AgentFile::load`]).
    #[serde(skip)]
    pub path: PathBuf,
}

/// A skill as an agent file lists it: `content` inline, or a `path` (relative to the agent file).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillFile {
    /// The name the model asks for.
    pub name: String,
    /// What it is for (listed in `skill_get`'s description).
    pub description: String,
    /// The content.
    #[serde(default)]
    pub content: Option<String>,
    /// A file with the content.
    #[serde(default)]
    pub path: Option<String>,
    /// A URL with the content (read by hosts that can fetch; not by the core).
    #[serde(default)]
    pub url: Option<String>,
}

/// Why an agent file could not be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum AgentFileError {
    /// The file could not be read.
    #[error("{path}: cannot read the agent file: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The YAML is malformed, or a key is unknown or has a bad type.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What serde said, with the line and column.
        reason: String,
    },
    /// A value is well-typed but not acceptable.
    #[error("{path}: key `{key}`: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The key.
        key: &'static str,
        /// Why.
        reason: String,
    },
}

/// A model spec split into its provider and the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// `script`, `anthropic`, `openai`, `bedrock`, ...
    pub provider: String,
    /// The model id, or for `script` the script's path.
    pub model: String,
}

/// A model spec that is not `PROVIDER:MODEL`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not of the form PROVIDER:MODEL (e.g. script:demo.script.yaml)")]
pub struct ModelSpecError(pub String);

/// Why a model spec could not be turned into a model by the core.
#[derive(Debug, thiserror::Error)]
pub enum CoreModelError {
    /// The script could not be loaded.
    #[error(transparent)]
    Script(#[from] crate::scripted::ScriptError),
    /// The provider lives in an adapter crate (or nowhere).
    #[error("model provider `{0}` is not available in this build; use script:PATH")]
    UnknownProvider(String),
}

impl ModelSpec {
    /// Parses `PROVIDER:MODEL`.
    pub fn parse(spec: &str) -> Result<Self, ModelSpecError> {
        match spec.split_once(':') {
            Some((provider, model)) if !provider.is_empty() && !model.is_empty() => Ok(Self {
                provider: provider.to_owned(),
                model: model.to_owned(),
            }),
            _ => Err(ModelSpecError(spec.to_owned())),
        }
    }
}

/// Resolves a model spec that the core knows how to build: `script:PATH` (relative to `base`).
/// Other providers live in adapter crates; for them this returns an error naming the provider.
pub fn resolve_core_model(
    spec: &ModelSpec,
    base: &Path,
) -> Result<Arc<dyn ModelProvider>, CoreModelError> {
    match spec.provider.as_str() {
        "script" => Ok(crate::scripted::ScriptedModel::load_arc(
            &base.join(&spec.model),
        )?),
        other => Err(CoreModelError::UnknownProvider(other.to_owned())),
    }
}

impl AgentFile {
    /// Reads and checks an agent file.
    pub fn load(path: &Path) -> Result<Self, AgentFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| AgentFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses and checks agent file text; `path` is used in errors and to resolve relative paths.
    pub fn parse(text: &str, path: &Path) -> Result<Self, AgentFileError> {
        let mut file: AgentFile =
            serde_yaml_ng::from_str(text).map_err(|e| AgentFileError::Parse {
                path: path.to_owned(),
                reason: e.to_string(),
            })?;
        file.path = path.to_owned();
        let invalid = |key, reason: String| AgentFileError::Invalid {
            path: path.to_owned(),
            key,
            reason,
        };
        let name_ok = !file.name.is_empty()
            && file.name.len() <= 64
            && file
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !name_ok {
            return Err(invalid(
                "name",
                format!(
                    "`{}` must be 1 to 64 ASCII letters, digits, `_`, `-` or `.`",
                    file.name
                ),
            ));
        }
        ModelSpec::parse(&file.model).map_err(|e| invalid("model", e.to_string()))?;
        let mut names = std::collections::HashSet::new();
        for skill in &file.skills {
            let sources = [&skill.content, &skill.path, &skill.url]
                .iter()
                .filter(|s| s.is_some())
                .count();
            if sources != 1 {
                return Err(invalid(
                    "skills",
                    format!(
                        "skill `{}` needs exactly one of content, path or url",
                        skill.name
                    ),
                ));
            }
            if !names.insert(skill.name.clone()) {
                return Err(invalid(
                    "skills",
                    format!("skill `{}` is listed twice", skill.name),
                ));
            }
        }
        if let Some(schema) = &file.output_schema {
            jsonschema::validator_for(schema)
                .map_err(|e| invalid("output_schema", format!("not a valid JSON Schema: {e}")))?;
        }
        if !(1..=100).contains(&file.limits.compact_at_percent) {
            return Err(invalid(
                "limits.compact_at_percent",
                format!(
                    "{} is not between 1 and 100",
                    file.limits.compact_at_percent
                ),
            ));
        }
        let limits = &file.limits;
        for (key, value) in [
            (
                "limits.max_completions_per_slice",
                u64::from(limits.max_completions_per_slice),
            ),
            (
                "limits.completions_per_hour",
                u64::from(limits.completions_per_hour),
            ),
            ("limits.tokens_per_hour", limits.tokens_per_hour),
            (
                "limits.conversation_completions_per_hour",
                u64::from(limits.conversation_completions_per_hour),
            ),
            (
                "limits.conversation_tokens_per_hour",
                limits.conversation_tokens_per_hour,
            ),
            (
                "limits.conversation_threads_per_hour",
                u64::from(limits.conversation_threads_per_hour),
            ),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1".to_owned()));
            }
        }
        Ok(file)
    }

    /// The model spec.
    pub fn model_spec(&self) -> Result<ModelSpec, AgentFileError> {
        ModelSpec::parse(&self.model).map_err(|e| AgentFileError::Invalid {
            path: self.path.clone(),
            key: "model",
            reason: e.to_string(),
        })
    }

    /// The RAP tool servers of the file. An MCP entry is an error naming it: a host that can
    /// start MCP bridges replaces those entries with the bridges' URLs first.
    pub fn rap_servers(
        &self,
    ) -> Result<Vec<crate::tools::remote::ToolServerConfig>, AgentFileError> {
        use crate::tools::remote::ToolServerEntry;
        self.tool_servers
            .iter()
            .map(|entry| match entry {
                ToolServerEntry::Rap(config) => Ok(config.clone()),
                ToolServerEntry::Mcp { mcp } => Err(AgentFileError::Invalid {
                    path: self.path.clone(),
                    key: "tool_servers",
                    reason: format!(
                        "the MCP server `{mcp}` needs the MCP bridge, which this host cannot \
                         start: run `infinity mcp-bridge` next to it and list the bridge's URL"
                    ),
                }),
            })
            .collect()
    }

    /// The `url`s of the skills that load from one, for the host to fetch (the core has no HTTP
    /// client) and pass to [`AgentFile::load_skills`].
    pub fn skill_urls(&self) -> Vec<&str> {
        self.skills
            .iter()
            .filter_map(|s| s.url.as_deref())
            .collect()
    }

    /// The skills with their content: inline, read from their `path`, or for a `url` skill the
    /// text the host fetched (`fetched`, by url; see [`AgentFile::skill_urls`]). A url missing
    /// from `fetched` is an error naming the skill.
    pub fn load_skills(
        &self,
        fetched: &std::collections::BTreeMap<String, String>,
    ) -> Result<Vec<crate::tools::internal::Skill>, AgentFileError> {
        let invalid = |reason: String| AgentFileError::Invalid {
            path: self.path.clone(),
            key: "skills",
            reason,
        };
        self.skills
            .iter()
            .map(|s| {
                let content = match (&s.content, &s.path, &s.url) {
                    (Some(content), _, _) => content.clone(),
                    (_, Some(path), _) => std::fs::read_to_string(self.resolve_path(path))
                        .map_err(|e| {
                            invalid(format!("skill `{}`: cannot read {path}: {e}", s.name))
                        })?,
                    (_, _, Some(url)) => fetched.get(url).cloned().ok_or_else(|| {
                        invalid(format!(
                            "skill `{}`: {url} was not fetched (this host cannot load skills from urls)",
                            s.name
                        ))
                    })?,
                    // `parse` checked that every skill has exactly one source.
                    (None, None, None) => String::new(),
                };
                Ok(crate::tools::internal::Skill {
                    name: s.name.clone(),
                    description: s.description.clone(),
                    content,
                })
            })
            .collect()
    }

    /// Resolves a path written in the file relative to the file's folder.
    pub fn resolve_path(&self, relative: &str) -> PathBuf {
        let p = Path::new(relative);
        if p.is_absolute() {
            return p.to_owned();
        }
        self.path
            .parent()
            .map(|dir| dir.join(p))
            .unwrap_or_else(|| p.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AgentFile, AgentFileError> {
        AgentFile::parse(text, Path::new("agents/a.yaml"))
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
