//! Agent files (`agent.yaml`): what they may say, how they are read and checked, and model
//! specs (`PROVIDER:MODEL`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::Limits;
use crate::model::ModelProvider;

/// Whether `name` may name an agent (an agent file's `name:`, one it delegates to): 1 to 64
/// ASCII letters, digits, `_`, `-` or `.`.
pub fn is_agent_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
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
    /// What the model charges, in dollars per million tokens (`input`, `output`, and
    /// `cache_read`, `cache_write` when they differ from `input`), in place of the prices the
    /// runtime knows for it: for models it does not know (a local server, a script) and rates of
    /// your own. Without prices, a completion counts as unpriced.
    #[serde(default)]
    pub prices: Option<crate::cost::Prices>,
    /// A line for people reading a list of agents.
    #[serde(default)]
    pub description: Option<String>,
    /// Limits.
    #[serde(default)]
    pub limits: Limits,
    /// What a person's message does when it arrives while a call the thread made has no result
    /// yet: `move_on` (the default), `queue`, `interrupt` or `reject` (see
    /// [`crate::state::WhileBusy`]). A message may say otherwise.
    #[serde(default)]
    pub while_busy: crate::state::WhileBusy,
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
    /// bridges. Their tools are discovered when a conversation starts.
    #[serde(default)]
    pub tool_servers: Vec<crate::tools::servers::ToolServerEntry>,
    /// Stored agents offered as tools that delegate to them (see [`crate::catalog`]).
    #[serde(default)]
    pub agents: Vec<String>,
    /// Tools the calling application runs (see [`crate::tools::client`]).
    #[serde(default)]
    pub client_tools: Vec<crate::tools::client::ClientToolFile>,
    /// Tools whose calls wait for a person's approval (see [`crate::tools::approval`]).
    #[serde(default)]
    pub approvals: Vec<crate::tools::approval::ApprovalRule>,
    /// The older spelling of `internal_tools: {remote: {allow: ...}}`: commands the `remote`
    /// category's `remote_exec` runs without asking a person first. Read into that category's
    /// settings ([`AgentFile::internal_tools`]), which check it when the agent is built.
    #[serde(default)]
    pub remote_allow: Option<serde_json::Value>,
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
    /// Its internal tool categories with their settings, `remote_allow:` read as the `remote`
    /// category's `allow` (where `internal_tools:` does not give one).
    pub fn internal_tools(&self) -> crate::tools::internal::InternalTools {
        let mut tools = self.internal_tools.clone();
        if let Some(allow) = &self.remote_allow {
            tools.settle("remote", "allow", allow.clone());
        }
        tools
    }

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
        if !is_agent_name(&file.name) {
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
        let mut listed = std::collections::HashSet::new();
        for agent in &file.agents {
            if !is_agent_name(agent) {
                return Err(invalid(
                    "agents",
                    format!("`{agent}` is not an agent's name (1 to 64 ASCII letters, digits, `_`, `-` or `.`; the newest version runs)"),
                ));
            }
            if !listed.insert(crate::tools::internal::delegation::agent_tool_name(agent)) {
                return Err(invalid("agents", format!("`{agent}` is listed twice")));
            }
        }
        let mut clients = std::collections::HashSet::new();
        for tool in &file.client_tools {
            let ok = !tool.name.is_empty()
                && tool.name.len() <= 64
                && tool
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
            if !ok {
                return Err(invalid(
                    "client_tools",
                    format!(
                        "`{}` is not a tool name (1 to 64 ASCII letters, digits, `_` or `-`)",
                        tool.name
                    ),
                ));
            }
            if !clients.insert(tool.name.as_str()) {
                return Err(invalid(
                    "client_tools",
                    format!("`{}` is listed twice", tool.name),
                ));
            }
            if tool
                .input_schema
                .get("type")
                .and_then(serde_json::Value::as_str)
                != Some("object")
            {
                return Err(invalid(
                    "client_tools",
                    format!(
                        "the input_schema of `{}` must be an object schema (`type: object`)",
                        tool.name
                    ),
                ));
            }
            jsonschema::validator_for(&tool.input_schema).map_err(|e| {
                invalid(
                    "client_tools",
                    format!(
                        "the input_schema of `{}` is not a valid JSON Schema: {e}",
                        tool.name
                    ),
                )
            })?;
        }
        if let Some(problem) = file.approvals.iter().find_map(|rule| rule.problem()) {
            return Err(invalid("approvals", problem));
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
        if limits.conversation_budget_tokens == Some(0) {
            return Err(invalid(
                "limits.conversation_budget_tokens",
                "must be at least 1 (leave it out for no budget)".to_owned(),
            ));
        }
        if limits.conversation_budget_usd == Some(crate::cost::Usd::ZERO) {
            return Err(invalid(
                "limits.conversation_budget_usd",
                "must be more than 0 (leave it out for no budget)".to_owned(),
            ));
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
    ) -> Result<Vec<crate::tools::servers::ToolServerConfig>, AgentFileError> {
        use crate::tools::servers::ToolServerEntry;
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
