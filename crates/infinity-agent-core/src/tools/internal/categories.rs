//! The seam internal tool categories plug into: a category is a [`CategoryDef`] (its flag, its
//! default, its tools, the skills it lends `skill_get`, the settings it reads), and a host runs
//! agents with the [`Categories`] it registered. The core registers its own ([`Categories::core`]);
//! a crate of categories adds its own with [`Categories::with`].
//!
//! An agent file's `internal_tools:` is read without knowing the categories ([`InternalTools`]:
//! a flag, or a mapping of settings, per name); the categories check it when the agent is built
//! ([`Categories::check`]), so a flag no category has is a clear error there.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::skills::Skill;
use crate::model::ToolSpec;
use crate::tools::Tool;

/// What internal tools may need from the agent's definition.
#[derive(Debug, Clone, Default)]
pub struct ToolSettings {
    /// `output_schema:` of the agent file: what `finish` results must match.
    pub output_schema: Option<Value>,
    /// `skills:` of the agent file, content loaded.
    pub skills: Vec<Skill>,
}

/// What a category's tool is made from, for one agent.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Making<'a> {
    /// The category is on for this agent (tools of a category built whatever its flag, like
    /// `finish`, ask).
    pub on: bool,
    /// The agent's settings for every tool.
    pub settings: &'a ToolSettings,
    /// The category's own settings (`internal_tools: {FLAG: {...}}`), `Null` when none.
    pub own: &'a Value,
    /// The skills the agent's categories lend `skill_get` ([`CategoryDef::skills`]).
    pub lent_skills: &'a [Skill],
}

/// One internal tool: its name and how to make it.
#[derive(Clone, Copy)]
pub struct InternalToolDef {
    /// The tool's name.
    pub name: &'static str,
    /// A new instance of the tool for one agent.
    pub make: fn(&Making<'_>) -> Arc<dyn Tool>,
}

impl fmt::Debug for InternalToolDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InternalToolDef")
            .field("name", &self.name)
            .finish()
    }
}

/// When a category's tools are in an agent's registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// When its flag is on.
    WhenOn,
    /// Always; its tools decide from [`Making::on`] which threads they serve (`finish`: a
    /// sub-agent's thread has it whatever the flag).
    Always,
    /// When its flag is on, or when another category the agent has lends it skills (`skills`).
    WhenOnOrLent,
}

/// A category of internal tools. Made with [`CategoryDef::new`]; its fields may be set after.
#[derive(Clone)]
#[non_exhaustive]
pub struct CategoryDef {
    /// Its flag under `internal_tools:`.
    pub flag: &'static str,
    /// On when the agent file does not say.
    pub default_enabled: bool,
    /// One line for people choosing categories.
    pub summary: &'static str,
    /// Its tools, in listing order.
    pub tools: Vec<InternalToolDef>,
    /// When its tools are in an agent's registry.
    pub offered: Offered,
    /// Skills it lends `skill_get` while it is on (how to use its tools well).
    pub skills: fn() -> Vec<Skill>,
    /// Checks its settings (`internal_tools: {FLAG: {...}}`): what is wrong, if anything.
    pub check_settings: fn(&Value) -> Result<(), String>,
}

impl fmt::Debug for CategoryDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CategoryDef")
            .field("flag", &self.flag)
            .field("default_enabled", &self.default_enabled)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl CategoryDef {
    /// A category with these tools, off by default, lending no skills and taking no settings.
    pub fn new(flag: &'static str, summary: &'static str, tools: Vec<InternalToolDef>) -> Self {
        Self {
            flag,
            default_enabled: false,
            summary,
            tools,
            offered: Offered::WhenOn,
            skills: Vec::new,
            check_settings: no_settings,
        }
    }

    /// On unless the agent file turns it off.
    pub fn on_by_default(mut self) -> Self {
        self.default_enabled = true;
        self
    }
}

/// The settings check of a category that takes none.
pub fn no_settings(settings: &Value) -> Result<(), String> {
    if settings.is_null() {
        Ok(())
    } else {
        Err("the category takes no settings: write true or false".to_owned())
    }
}

/// Why an agent's `internal_tools:` cannot be used with a host's categories.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CategoryError {
    /// A flag no registered category has.
    #[error("internal_tools: `{flag}` is not a category this host has (it has: {known})")]
    Unknown {
        /// The flag.
        flag: String,
        /// The flags there are, comma-separated.
        known: String,
    },
    /// A category's settings it cannot use.
    #[error("internal_tools: `{flag}`: {reason}")]
    Settings {
        /// The category's flag.
        flag: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// The categories a host runs agents with. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Categories {
    defs: Arc<Vec<CategoryDef>>,
}

impl Default for Categories {
    fn default() -> Self {
        Self::core()
    }
}

impl Categories {
    /// No categories at all.
    pub fn empty() -> Self {
        Self {
            defs: Arc::new(Vec::new()),
        }
    }

    /// The core's categories: plan, memory, widget, finish, skills (on by default) and agent.
    pub fn core() -> Self {
        super::core_categories()
            .into_iter()
            .fold(Self::empty(), Self::with)
    }

    /// These and `def`, in place of one with its flag.
    pub fn with(self, def: CategoryDef) -> Self {
        let mut defs = Arc::unwrap_or_clone(self.defs);
        match defs.iter_mut().find(|d| d.flag == def.flag) {
            Some(slot) => *slot = def,
            None => defs.push(def),
        }
        Self {
            defs: Arc::new(defs),
        }
    }

    /// Every category, in listing order.
    pub fn iter(&self) -> impl Iterator<Item = &CategoryDef> {
        self.defs.iter()
    }

    /// The category with this flag.
    pub fn get(&self, flag: &str) -> Option<&CategoryDef> {
        self.defs.iter().find(|d| d.flag == flag)
    }

    /// Whether the agent has `def` on.
    pub fn enabled(flags: &InternalTools, def: &CategoryDef) -> bool {
        flags.explicit(def.flag).unwrap_or(def.default_enabled)
    }

    /// Every flag of `flags` names a category here, and each category's settings are ones it
    /// can use.
    pub fn check(&self, flags: &InternalTools) -> Result<(), CategoryError> {
        for flag in flags.named() {
            let Some(def) = self.get(flag) else {
                return Err(CategoryError::Unknown {
                    flag: flag.to_owned(),
                    known: self.iter().map(|d| d.flag).collect::<Vec<_>>().join(", "),
                });
            };
            (def.check_settings)(flags.settings(flag)).map_err(|reason| {
                CategoryError::Settings {
                    flag: def.flag,
                    reason,
                }
            })?;
        }
        Ok(())
    }

    /// The internal tools an agent with these flags gets, in listing order, each with its
    /// category and whether that is on (see [`Offered`]).
    pub fn agent_tools(
        &self,
        flags: &InternalTools,
        settings: &ToolSettings,
    ) -> Vec<AgentInternalTool<'_>> {
        let lent: Vec<Skill> = self
            .iter()
            .filter(|d| Self::enabled(flags, d))
            .flat_map(|d| (d.skills)())
            .collect();
        let mut tools = Vec::new();
        for def in self.iter() {
            let on = Self::enabled(flags, def);
            let offered = match def.offered {
                Offered::WhenOn => on,
                Offered::Always => true,
                Offered::WhenOnOrLent => on || !lent.is_empty(),
            };
            if !offered {
                continue;
            }
            let making = Making {
                on,
                settings,
                own: flags.settings(def.flag),
                lent_skills: &lent,
            };
            for tool in &def.tools {
                tools.push(AgentInternalTool {
                    category: def,
                    name: tool.name,
                    on,
                    tool: (tool.make)(&making),
                });
            }
        }
        tools
    }

    /// The category of the internal tool `name` when the agent has that category on.
    pub fn enabled_tool(&self, flags: &InternalTools, name: &str) -> Option<&'static str> {
        self.iter()
            .find(|d| Self::enabled(flags, d) && d.tools.iter().any(|t| t.name == name))
            .map(|d| d.flag)
    }

    /// Every internal tool with its category and default, for editors and
    /// `infinity tools internal`.
    pub fn listing(&self) -> Vec<ListedTool> {
        let settings = ToolSettings::default();
        self.iter()
            .flat_map(|def| {
                let making = Making {
                    on: def.default_enabled,
                    settings: &settings,
                    own: &Value::Null,
                    lent_skills: &[],
                };
                def.tools.iter().map(move |t| ListedTool {
                    category: def.flag,
                    default_enabled: def.default_enabled,
                    spec: (t.make)(&making).spec(),
                })
            })
            .collect()
    }
}

/// One internal tool of an agent ([`Categories::agent_tools`]).
#[derive(Debug)]
pub struct AgentInternalTool<'a> {
    /// Its category.
    pub category: &'a CategoryDef,
    /// Its name.
    pub name: &'static str,
    /// The agent has its category on.
    pub on: bool,
    /// The tool.
    pub tool: Arc<dyn Tool>,
}

/// One row of the listing for editors and `infinity tools internal`.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ListedTool {
    /// The category's flag.
    pub category: &'static str,
    /// On unless the agent file turns it off.
    pub default_enabled: bool,
    /// The tool as models see it.
    #[serde(flatten)]
    pub spec: ToolSpec,
}

/// Which internal tool categories an agent has, and their settings: `internal_tools:` of an
/// agent file, read. An unset flag takes the category's default; an explicit one wins. The old
/// name `spawn` is read as `agent` (`agent` wins if both are set).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(try_from = "BTreeMap<String, Value>")]
pub struct InternalTools {
    flags: BTreeMap<String, bool>,
    settings: BTreeMap<String, Value>,
    /// The flag of every category not named (`None`: each its default).
    rest: Option<bool>,
}

/// `internal_tools:` as an agent file writes it (the same as [`InternalTools`]).
pub type InternalToolsConfig = InternalTools;

impl TryFrom<BTreeMap<String, Value>> for InternalTools {
    type Error = String;

    fn try_from(written: BTreeMap<String, Value>) -> Result<Self, String> {
        let mut tools = Self::default();
        let mut spawn = None;
        for (flag, value) in written {
            let on = match value {
                Value::Bool(on) => on,
                Value::Object(settings) => {
                    tools.settings.insert(flag.clone(), Value::Object(settings));
                    true
                }
                other => {
                    return Err(format!(
                        "`{flag}` must be true, false or a mapping of the category's settings, \
                         not {other}"
                    ))
                }
            };
            if flag == "spawn" {
                spawn = Some(on);
            } else {
                tools.flags.insert(flag, on);
            }
        }
        if let Some(on) = spawn {
            tools.flags.entry("agent".to_owned()).or_insert(on);
        }
        Ok(tools)
    }
}

impl InternalTools {
    /// A builder with every flag unset (the defaults).
    pub fn builder() -> InternalToolsBuilder {
        InternalToolsBuilder::default()
    }

    /// Plan, memory, widget and finish on; every other category off.
    pub fn all() -> Self {
        let mut tools = Self::none();
        for flag in ["plan", "memory", "widget", "finish"] {
            tools.flags.insert(flag.to_owned(), true);
        }
        tools
    }

    /// Every category off.
    pub fn none() -> Self {
        Self {
            rest: Some(false),
            ..Self::default()
        }
    }

    /// The flag the agent gives the category `flag`, if it gives one.
    pub fn explicit(&self, flag: &str) -> Option<bool> {
        self.flags.get(flag).copied().or(self.rest)
    }

    /// The settings the agent gives the category `flag` (`Null`: none).
    pub fn settings(&self, flag: &str) -> &Value {
        self.settings.get(flag).unwrap_or(&Value::Null)
    }

    /// Gives the category `flag` settings where it has none (an agent file's older spelling,
    /// like `remote_allow:`, read into its category).
    pub fn settle(&mut self, flag: &str, key: &str, value: Value) {
        let settings = self
            .settings
            .entry(flag.to_owned())
            .or_insert_with(|| Value::Object(Default::default()));
        if let Value::Object(map) = settings {
            map.entry(key.to_owned()).or_insert(value);
        }
    }

    /// Every category named, by a flag or by settings.
    fn named(&self) -> impl Iterator<Item = &str> {
        self.flags
            .keys()
            .chain(
                self.settings
                    .keys()
                    .filter(|k| !self.flags.contains_key(*k)),
            )
            .map(String::as_str)
    }
}

/// Builds [`InternalTools`] flag by flag.
#[derive(Debug, Clone, Default)]
pub struct InternalToolsBuilder {
    tools: InternalTools,
}

impl InternalToolsBuilder {
    /// Sets the category `flag` on or off.
    pub fn flag(mut self, flag: &str, on: bool) -> Self {
        self.tools.flags.insert(flag.to_owned(), on);
        self
    }

    /// Turns the category `flag` on with these settings.
    pub fn settings(mut self, flag: &str, settings: Value) -> Self {
        self.tools.flags.insert(flag.to_owned(), true);
        self.tools.settings.insert(flag.to_owned(), settings);
        self
    }

    /// Sets the `plan` flag.
    pub fn plan(self, on: bool) -> Self {
        self.flag("plan", on)
    }

    /// Sets the `memory` flag.
    pub fn memory(self, on: bool) -> Self {
        self.flag("memory", on)
    }

    /// Sets the `widget` flag.
    pub fn widget(self, on: bool) -> Self {
        self.flag("widget", on)
    }

    /// Sets the `finish` flag.
    pub fn finish(self, on: bool) -> Self {
        self.flag("finish", on)
    }

    /// Sets the `skills` flag.
    pub fn skills(self, on: bool) -> Self {
        self.flag("skills", on)
    }

    /// Sets the `agent` flag.
    pub fn agent(self, on: bool) -> Self {
        self.flag("agent", on)
    }

    /// The flags.
    pub fn build(self) -> InternalTools {
        self.tools
    }
}
