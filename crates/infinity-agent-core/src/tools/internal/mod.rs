//! Internal tools: categories of tools an agent file switches on and off (`internal_tools:`).
//!
//! `plan`, `memory`, `widget`, `finish` and `skills` are on unless set false; `meta`, `artifact`,
//! `agent`, `remote` and `knowledge` are off unless set true. An explicit `true` or `false` always
//! wins; a flag that is not set takes its category's default (so `{finish: false}` leaves `plan`
//! on). The old name `spawn` is read as `agent`.
//!
//! [`TABLE`] is the one list of internal tools: the runtime builds agents' tools from it and
//! `infinity tools internal` lists it.

mod artifact;
pub mod delegation;
mod finish;
mod knowledge;
mod memory;
mod meta;
mod plan;
mod remote;
mod skills;
mod widget;

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use finish::MAX_RESULT_BYTES as MAX_FINISH_RESULT_BYTES;
pub use knowledge::KNOWLEDGE_SEARCH;
pub use meta::SEARCH_TOOLS;

/// The name of the tool that ends a turn with the thread's result.
pub const FINISH: &str = "finish";
pub(crate) use finish::TURN_ENDED as FINISH_TURN_ENDED;
pub use remote::{
    allowed as remote_allowed, check as remote_check, RemoteRule, Verdict as RemoteVerdict,
    DEFAULT_TIMEOUT_SECONDS as REMOTE_DEFAULT_TIMEOUT, OUTPUT_CHARS as REMOTE_OUTPUT_CHARS,
    REMOTE_EXEC, REMOTE_LIST,
};
pub use skills::Skill;
pub use widget::{render_text as render_widget, WIDGET_SCHEMA};

use super::Tool;
use crate::model::ToolSpec;

/// A category of internal tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// A plan of steps with statuses.
    Plan,
    /// Scratch notes shared by a conversation's threads.
    Memory,
    /// UI widgets for top-level threads.
    Widget,
    /// `finish`: the thread's result.
    Finish,
    /// Skills loaded on demand.
    Skills,
    /// A catalog of apps, agents, skills and knowledge to search and use.
    Meta,
    /// Artifacts.
    Artifact,
    /// `agent`: delegating to a copy of the agent.
    Agent,
    /// Shell commands on machines people connect.
    Remote,
    /// Knowledge bases.
    Knowledge,
}

impl Category {
    /// Every category, in listing order.
    pub const ALL: [Category; 10] = [
        Category::Plan,
        Category::Memory,
        Category::Widget,
        Category::Finish,
        Category::Skills,
        Category::Meta,
        Category::Artifact,
        Category::Agent,
        Category::Remote,
        Category::Knowledge,
    ];

    /// On when the agent file does not say.
    pub fn default_enabled(self) -> bool {
        matches!(
            self,
            Category::Plan
                | Category::Memory
                | Category::Widget
                | Category::Finish
                | Category::Skills
        )
    }

    /// The flag's name under `internal_tools:`.
    pub fn flag(self) -> &'static str {
        match self {
            Category::Plan => "plan",
            Category::Memory => "memory",
            Category::Widget => "widget",
            Category::Finish => "finish",
            Category::Skills => "skills",
            Category::Meta => "meta",
            Category::Artifact => "artifact",
            Category::Agent => "agent",
            Category::Remote => "remote",
            Category::Knowledge => "knowledge",
        }
    }

    fn index(self) -> usize {
        Category::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.flag())
    }
}

/// `internal_tools:` as written in an agent file: a flag per category, each optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InternalToolsConfig {
    #[serde(default)]
    plan: Option<bool>,
    #[serde(default)]
    memory: Option<bool>,
    #[serde(default)]
    widget: Option<bool>,
    #[serde(default)]
    finish: Option<bool>,
    #[serde(default)]
    skills: Option<bool>,
    #[serde(default)]
    meta: Option<bool>,
    #[serde(default)]
    artifact: Option<bool>,
    #[serde(default)]
    agent: Option<bool>,
    #[serde(default)]
    remote: Option<bool>,
    #[serde(default)]
    knowledge: Option<bool>,
    /// The old name of `agent`.
    #[serde(default)]
    spawn: Option<bool>,
}

impl InternalToolsConfig {
    /// The flags as the runtime uses them (`spawn` read as `agent`; `agent` wins if both are set).
    pub fn resolve(&self) -> InternalTools {
        InternalTools {
            flags: [
                self.plan,
                self.memory,
                self.widget,
                self.finish,
                self.skills,
                self.meta,
                self.artifact,
                self.agent.or(self.spawn),
                self.remote,
                self.knowledge,
            ],
        }
    }
}

/// Which internal tool categories an agent has. An unset flag takes the category's default; an
/// explicit one wins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InternalTools {
    flags: [Option<bool>; 10],
}

impl InternalTools {
    /// A builder with every flag unset (the defaults).
    pub fn builder() -> InternalToolsBuilder {
        InternalToolsBuilder::default()
    }

    /// Plan, memory, widget and finish on; skills and every opt-in category off.
    pub fn all() -> Self {
        let mut flags = [Some(false); 10];
        for c in [
            Category::Plan,
            Category::Memory,
            Category::Widget,
            Category::Finish,
        ] {
            flags[c.index()] = Some(true);
        }
        Self { flags }
    }

    /// Every category off.
    pub fn none() -> Self {
        Self {
            flags: [Some(false); 10],
        }
    }

    /// Whether a category is on.
    pub fn enabled(&self, category: Category) -> bool {
        self.flags[category.index()].unwrap_or(category.default_enabled())
    }

    /// The explicit flag, if any.
    pub fn explicit(&self, category: Category) -> Option<bool> {
        self.flags[category.index()]
    }
}

/// Builds [`InternalTools`] flag by flag.
#[derive(Debug, Clone, Copy, Default)]
pub struct InternalToolsBuilder {
    flags: [Option<bool>; 10],
}

macro_rules! flag_setters {
    ($($name:ident => $cat:ident),* $(,)?) => {
        impl InternalToolsBuilder {
            $(
                #[doc = concat!("Sets the `", stringify!($name), "` flag.")]
                pub fn $name(mut self, on: bool) -> Self {
                    self.flags[Category::$cat.index()] = Some(on);
                    self
                }
            )*

            /// The flags.
            pub fn build(self) -> InternalTools {
                InternalTools { flags: self.flags }
            }
        }
    };
}

flag_setters!(
    plan => Plan, memory => Memory, widget => Widget, finish => Finish, skills => Skills,
    meta => Meta, artifact => Artifact, agent => Agent, remote => Remote, knowledge => Knowledge,
);

/// What internal tools may need from the agent's definition.
#[derive(Debug, Clone, Default)]
pub struct ToolSettings {
    /// `output_schema:` of the agent file: what `finish` results must match.
    pub output_schema: Option<serde_json::Value>,
    /// `skills:` of the agent file, content loaded.
    pub skills: Vec<Skill>,
    /// `remote_allow:` of the agent file.
    pub remote_allow: Vec<RemoteRule>,
}

/// One internal tool: its name, its category, and how to make it.
#[derive(Clone, Copy)]
pub struct InternalToolDef {
    /// The tool's name.
    pub name: &'static str,
    /// Its category.
    pub category: Category,
    make: fn(&InternalTools, &ToolSettings) -> Arc<dyn Tool>,
}

impl fmt::Debug for InternalToolDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InternalToolDef")
            .field("name", &self.name)
            .field("category", &self.category)
            .finish()
    }
}

impl InternalToolDef {
    /// A new instance of the tool for an agent with these flags and settings.
    pub fn make(&self, flags: &InternalTools, settings: &ToolSettings) -> Arc<dyn Tool> {
        (self.make)(flags, settings)
    }
}

/// Every internal tool built so far. Categories without tools here have none yet.
pub const TABLE: &[InternalToolDef] = &[
    InternalToolDef {
        name: "plan_create",
        category: Category::Plan,
        make: |_, _| Arc::new(plan::PlanCreate),
    },
    InternalToolDef {
        name: "plan_update",
        category: Category::Plan,
        make: |_, _| Arc::new(plan::PlanUpdate),
    },
    InternalToolDef {
        name: "plan_load",
        category: Category::Plan,
        make: |_, _| Arc::new(plan::PlanLoad),
    },
    InternalToolDef {
        name: "memory_set",
        category: Category::Memory,
        make: |_, _| Arc::new(memory::MemorySet),
    },
    InternalToolDef {
        name: "memory_get",
        category: Category::Memory,
        make: |_, _| Arc::new(memory::MemoryGet),
    },
    InternalToolDef {
        name: "memory_getall",
        category: Category::Memory,
        make: |_, _| Arc::new(memory::MemoryGetAll),
    },
    InternalToolDef {
        name: "widget",
        category: Category::Widget,
        make: |_, _| Arc::new(widget::Widget::new()),
    },
    InternalToolDef {
        name: "skill_get",
        category: Category::Skills,
        make: |flags, settings| {
            let guidance = flags.enabled(Category::Artifact).then(artifact::guidance);
            Arc::new(skills::SkillGet::new(settings, guidance))
        },
    },
    InternalToolDef {
        name: "agent",
        category: Category::Agent,
        make: |_, _| Arc::new(delegation::AgentTool::copy()),
    },
    InternalToolDef {
        name: KNOWLEDGE_SEARCH,
        category: Category::Knowledge,
        make: |_, _| Arc::new(knowledge::KnowledgeSearch),
    },
    InternalToolDef {
        name: "knowledge_get",
        category: Category::Knowledge,
        make: |_, _| Arc::new(knowledge::KnowledgeGet),
    },
    InternalToolDef {
        name: "knowledge_save",
        category: Category::Knowledge,
        make: |_, _| Arc::new(knowledge::KnowledgeSave),
    },
    InternalToolDef {
        name: SEARCH_TOOLS,
        category: Category::Meta,
        make: |_, _| Arc::new(meta::SearchTools),
    },
    InternalToolDef {
        name: "list_tools",
        category: Category::Meta,
        make: |_, _| Arc::new(meta::ListTools),
    },
    InternalToolDef {
        name: "execute_tool",
        category: Category::Meta,
        make: |_, _| Arc::new(meta::ExecuteTool),
    },
    InternalToolDef {
        name: REMOTE_LIST,
        category: Category::Remote,
        make: |_, _| Arc::new(remote::RemoteList),
    },
    InternalToolDef {
        name: REMOTE_EXEC,
        category: Category::Remote,
        make: |_, settings| {
            Arc::new(remote::RemoteExec {
                rules: settings.remote_allow.clone(),
            })
        },
    },
    InternalToolDef {
        name: "artifact_publish",
        category: Category::Artifact,
        make: |_, _| Arc::new(artifact::Publish),
    },
    InternalToolDef {
        name: "artifact_update",
        category: Category::Artifact,
        make: |_, _| Arc::new(artifact::Update),
    },
    InternalToolDef {
        name: "artifact_list",
        category: Category::Artifact,
        make: |_, _| Arc::new(artifact::List),
    },
    InternalToolDef {
        name: "artifact_comments",
        category: Category::Artifact,
        make: |_, _| Arc::new(artifact::Comments),
    },
    InternalToolDef {
        name: "artifact_reply",
        category: Category::Artifact,
        make: |_, _| Arc::new(artifact::Reply),
    },
    InternalToolDef {
        name: "finish",
        category: Category::Finish,
        make: |flags, settings| Arc::new(finish::Finish::new(flags, settings)),
    },
];

/// The internal tools an agent with these flags gets, in table order: those of its enabled
/// categories, and `finish` always (threads spawned as sub-agents have it whatever the flag;
/// the tool itself decides which threads it is offered to).
pub fn agent_tools(
    flags: &InternalTools,
    settings: &ToolSettings,
) -> Vec<(&'static InternalToolDef, Arc<dyn Tool>)> {
    TABLE
        .iter()
        .filter(|d| {
            flags.enabled(d.category)
                || d.category == Category::Finish
                // The `artifact` category's guidance comes through `skill_get`.
                || (d.category == Category::Skills && flags.enabled(Category::Artifact))
        })
        .map(|d| (d, d.make(flags, settings)))
        .collect()
}

/// One row of the listing for editors and `infinity tools internal`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedTool {
    /// The category.
    pub category: Category,
    /// On unless the agent file turns it off.
    pub default_enabled: bool,
    /// The tool as models see it.
    #[serde(flatten)]
    pub spec: ToolSpec,
}

/// Every internal tool definition with its category and default, from [`TABLE`].
pub fn listing() -> Vec<ListedTool> {
    TABLE
        .iter()
        .map(|d| ListedTool {
            category: d.category,
            default_enabled: d.category.default_enabled(),
            spec: d
                .make(&InternalTools::default(), &ToolSettings::default())
                .spec(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> InternalTools {
        serde_yaml_ng::from_str::<InternalToolsConfig>(yaml)
            .unwrap()
            .resolve()
    }

    #[test]
    fn defaults_and_explicit_flags() {
        let none_set = parse("{}");
        for c in Category::ALL {
            assert_eq!(none_set.enabled(c), c.default_enabled(), "{c}");
        }
        // Unset is not false: turning off finish and meta leaves plan, memory, widget, skills on.
        let t = parse("{finish: false, meta: false}");
        assert!(!t.enabled(Category::Finish) && !t.enabled(Category::Meta));
        for c in [
            Category::Plan,
            Category::Memory,
            Category::Widget,
            Category::Skills,
        ] {
            assert!(t.enabled(c), "{c}");
        }
        assert!(!t.enabled(Category::Agent));
        // An explicit true turns on an opt-in category.
        assert!(parse("{knowledge: true}").enabled(Category::Knowledge));
    }

    #[test]
    fn spawn_is_read_as_agent() {
        assert!(parse("{spawn: true}").enabled(Category::Agent));
        assert!(!parse("{spawn: true, agent: false}").enabled(Category::Agent));
    }

    #[test]
    fn unknown_flags_are_rejected() {
        let err = serde_yaml_ng::from_str::<InternalToolsConfig>("{plans: true}").unwrap_err();
        assert!(err.to_string().contains("plans"), "{err}");
    }

    #[test]
    fn builder_all_and_none() {
        let b = InternalTools::builder().plan(false).agent(true).build();
        assert!(
            !b.enabled(Category::Plan) && b.enabled(Category::Agent) && b.enabled(Category::Memory)
        );
        let all = InternalTools::all();
        for c in Category::ALL {
            let expect = matches!(
                c,
                Category::Plan | Category::Memory | Category::Widget | Category::Finish
            );
            assert_eq!(all.enabled(c), expect, "{c}");
        }
        assert!(Category::ALL
            .iter()
            .all(|c| !InternalTools::none().enabled(*c)));
    }

    #[test]
    fn the_listing_comes_from_the_table() {
        let listed: Vec<String> = listing().iter().map(|l| l.spec.name.clone()).collect();
        let table: Vec<&str> = TABLE.iter().map(|d| d.name).collect();
        assert_eq!(listed, table);
        for (def, tool) in agent_tools(&InternalTools::all(), &ToolSettings::default()) {
            assert_eq!(tool.spec().name, def.name);
        }
    }
}
