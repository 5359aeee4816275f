//! Internal tools: categories of tools an agent file switches on and off (`internal_tools:`).
//!
//! A category plugs in through [`CategoryDef`] and a host runs agents with the [`Categories`] it
//! registered. The core's own are `plan`, `memory`, `widget`, `finish` and
//! `skills` (on unless set false) and `agent` (off unless set true); product categories (meta,
//! artifact, remote, knowledge) come from the `infinity-library` crate. An explicit `true` or
//! `false` always wins; a flag that is not set takes its category's default (so
//! `{finish: false}` leaves `plan` on). The old name `spawn` is read as `agent`.

mod categories;
pub mod delegation;
mod finish;
mod memory;
mod plan;
mod skills;
mod widget;

use std::sync::Arc;

pub use categories::{
    no_settings, AgentInternalTool, Categories, CategoryDef, CategoryError, InternalToolDef,
    InternalTools, InternalToolsBuilder, InternalToolsConfig, ListedTool, Making, Offered,
    ToolSettings,
};
pub use finish::MAX_RESULT_BYTES as MAX_FINISH_RESULT_BYTES;

/// The name of the tool that ends a turn with the thread's result.
pub const FINISH: &str = "finish";
pub(crate) use finish::TURN_ENDED as FINISH_TURN_ENDED;
pub use skills::Skill;
pub use widget::{render_text as render_widget, WIDGET_SCHEMA};

/// The core's categories, in listing order.
fn core_categories() -> Vec<CategoryDef> {
    vec![
        CategoryDef::new(
            "plan",
            "A plan of steps with statuses.",
            vec![
                InternalToolDef {
                    name: "plan_create",
                    make: |_| Arc::new(plan::PlanCreate),
                },
                InternalToolDef {
                    name: "plan_update",
                    make: |_| Arc::new(plan::PlanUpdate),
                },
                InternalToolDef {
                    name: "plan_load",
                    make: |_| Arc::new(plan::PlanLoad),
                },
            ],
        )
        .on_by_default(),
        CategoryDef::new(
            "memory",
            "Scratch notes shared by a conversation's threads.",
            vec![
                InternalToolDef {
                    name: "memory_set",
                    make: |_| Arc::new(memory::MemorySet),
                },
                InternalToolDef {
                    name: "memory_get",
                    make: |_| Arc::new(memory::MemoryGet),
                },
                InternalToolDef {
                    name: "memory_getall",
                    make: |_| Arc::new(memory::MemoryGetAll),
                },
            ],
        )
        .on_by_default(),
        CategoryDef::new(
            "widget",
            "UI widgets for top-level threads.",
            vec![InternalToolDef {
                name: "widget",
                make: |_| Arc::new(widget::Widget::new()),
            }],
        )
        .on_by_default(),
        CategoryDef {
            offered: Offered::Always,
            ..CategoryDef::new(
                "finish",
                "`finish`: the thread's result.",
                vec![InternalToolDef {
                    name: FINISH,
                    make: |making| Arc::new(finish::Finish::new(making)),
                }],
            )
            .on_by_default()
        },
        CategoryDef {
            offered: Offered::WhenOnOrLent,
            ..CategoryDef::new(
                "skills",
                "Skills loaded on demand.",
                vec![InternalToolDef {
                    name: "skill_get",
                    make: |making| Arc::new(skills::SkillGet::new(making)),
                }],
            )
            .on_by_default()
        },
        CategoryDef::new(
            "agent",
            "`agent`: delegating to a copy of the agent.",
            vec![InternalToolDef {
                name: "agent",
                make: |_| Arc::new(delegation::DelegateTool::copy()),
            }],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(yaml: &str) -> InternalTools {
        serde_yaml_ng::from_str::<InternalToolsConfig>(yaml).unwrap()
    }

    fn on(tools: &InternalTools, flag: &str) -> bool {
        let categories = Categories::core();
        Categories::enabled(tools, categories.get(flag).unwrap())
    }

    const CORE: [&str; 6] = ["plan", "memory", "widget", "finish", "skills", "agent"];

    #[test]
    fn defaults_and_explicit_flags() {
        let none_set = parse("{}");
        for def in Categories::core().iter() {
            assert_eq!(on(&none_set, def.flag), def.default_enabled, "{}", def.flag);
        }
        // Unset is not false: turning off finish leaves plan, memory, widget, skills on.
        let t = parse("{finish: false}");
        assert!(!on(&t, "finish"));
        for flag in ["plan", "memory", "widget", "skills"] {
            assert!(on(&t, flag), "{flag}");
        }
        assert!(!on(&t, "agent"));
        // An explicit true turns on an opt-in category.
        assert!(on(&parse("{agent: true}"), "agent"));
    }

    #[test]
    fn spawn_is_read_as_agent() {
        assert!(on(&parse("{spawn: true}"), "agent"));
        assert!(!on(&parse("{spawn: true, agent: false}"), "agent"));
    }

    #[test]
    fn flags_no_category_has_and_settings_it_cannot_use_are_named() {
        let core = Categories::core();
        let err = core.check(&parse("{plans: true}")).unwrap_err().to_string();
        assert!(
            err.contains("`plans`") && err.contains("plan, memory"),
            "{err}"
        );
        let err = core
            .check(&parse("{plan: {steps: 3}}"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`plan`") && err.contains("no settings"),
            "{err}"
        );
        let err = serde_yaml_ng::from_str::<InternalToolsConfig>("{plan: 3}").unwrap_err();
        assert!(
            err.to_string().contains("`plan` must be true, false"),
            "{err}"
        );
        assert!(core.check(&parse("{plan: false, agent: true}")).is_ok());
    }

    #[derive(Debug)]
    struct Named(String);

    impl crate::tools::Tool for Named {
        fn spec(&self) -> crate::model::ToolSpec {
            crate::model::ToolSpec::new(&self.0, "d", json!({"type": "object"}))
        }

        fn call(
            &self,
            _: &serde_json::Value,
            _: &mut crate::tools::ToolContext<'_>,
        ) -> crate::tools::ToolOutcome {
            crate::tools::ToolOutcome::ok("")
        }
    }

    /// A category from outside the core, as a product crate registers one.
    fn notes() -> CategoryDef {
        let mut def = CategoryDef::new(
            "notes",
            "Notes.",
            vec![InternalToolDef {
                name: "notes_list",
                make: |making| {
                    let limit = making.own["limit"].as_u64().unwrap_or(10);
                    Arc::new(Named(format!("notes_list_{limit}")))
                },
            }],
        );
        def.skills = || {
            vec![Skill {
                name: "note-taking".to_owned(),
                description: "d".to_owned(),
                content: "c".to_owned(),
            }]
        };
        def.check_settings = |settings| match settings.get("limit") {
            None => Ok(()),
            Some(limit) if limit.is_u64() => Ok(()),
            Some(other) => Err(format!("limit: {other} is not a count")),
        };
        def
    }

    #[test]
    fn a_category_registered_from_outside_brings_its_tools_settings_and_skills() {
        let categories = Categories::core().with(notes());
        let flags = InternalTools::builder()
            .skills(false)
            .settings("notes", json!({"limit": 3}))
            .build();
        categories.check(&flags).unwrap();
        let tools = categories.agent_tools(&flags, &ToolSettings::default());
        let names: Vec<String> = tools.iter().map(|t| t.tool.spec().name).collect();
        assert!(names.contains(&"notes_list_3".to_owned()), "{names:?}");
        // The skill it lends brings `skill_get` though `skills` is off.
        let skill_get = tools.iter().find(|t| t.name == "skill_get").unwrap();
        assert!(!skill_get.on);
        assert!(skill_get.tool.spec().description.contains("note-taking"));
        // Without the category the skill is not lent, and `skill_get` stays off.
        let off = InternalTools::builder().skills(false).build();
        let tools = categories.agent_tools(&off, &ToolSettings::default());
        assert!(tools
            .iter()
            .all(|t| t.name != "skill_get" && t.name != "notes_list"));
        // Its settings check runs; the core alone does not know it.
        let bad = InternalTools::builder()
            .settings("notes", json!({"limit": "many"}))
            .build();
        let err = categories.check(&bad).unwrap_err().to_string();
        assert!(
            err.contains("`notes`") && err.contains("not a count"),
            "{err}"
        );
        assert!(Categories::core().check(&flags).is_err());
        // Registering a flag again replaces the category.
        let again = categories.with(notes());
        assert_eq!(again.iter().filter(|d| d.flag == "notes").count(), 1);
    }

    #[test]
    fn builder_all_and_none() {
        let b = InternalTools::builder().plan(false).agent(true).build();
        assert!(!on(&b, "plan") && on(&b, "agent") && on(&b, "memory"));
        let all = InternalTools::all();
        for flag in CORE {
            let expect = matches!(flag, "plan" | "memory" | "widget" | "finish");
            assert_eq!(on(&all, flag), expect, "{flag}");
        }
        assert!(CORE.iter().all(|f| !on(&InternalTools::none(), f)));
    }

    #[test]
    fn the_listing_comes_from_the_categories() {
        let categories = Categories::core();
        let listed: Vec<String> = categories
            .listing()
            .iter()
            .map(|l| l.spec.name.clone())
            .collect();
        let defined: Vec<&str> = categories
            .iter()
            .flat_map(|d| d.tools.iter().map(|t| t.name))
            .collect();
        assert_eq!(listed, defined);
        for tool in categories.agent_tools(&InternalTools::all(), &ToolSettings::default()) {
            assert_eq!(tool.tool.spec().name, tool.name);
        }
    }
}
