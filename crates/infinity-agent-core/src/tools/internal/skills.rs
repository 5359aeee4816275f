//! The `skills` category: `skill_get(skill)`. The agent file lists skills by name and
//! description; the tool's description names them, and a skill's content enters the conversation
//! only when the model asks for it (progressive disclosure).

use serde_json::{json, Value};

use super::Making;
use crate::model::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// A skill with its content loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name.
    pub name: String,
    /// What it is for (shown to the model up front).
    pub description: String,
    /// Its content (given to the model when it asks).
    pub content: String,
}

#[derive(Debug)]
pub(super) struct SkillGet {
    skills: Vec<Skill>,
}

impl SkillGet {
    /// The agent's skills, and those its categories lend (`artifact`'s guidance) unless a skill
    /// of the agent's has the name.
    pub(super) fn new(making: &Making<'_>) -> Self {
        let mut skills = if making.on {
            making.settings.skills.clone()
        } else {
            Vec::new()
        };
        for lent in making.lent_skills {
            if !skills.iter().any(|s| s.name == lent.name) {
                skills.push(lent.clone());
            }
        }
        Self { skills }
    }

    fn names(&self) -> String {
        if self.skills.is_empty() {
            return "none".to_owned();
        }
        self.skills
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Tool for SkillGet {
    fn spec(&self) -> ToolSpec {
        let mut description =
            "Load the instructions of a skill by name. Available skills:".to_owned();
        if self.skills.is_empty() {
            description.push_str(" none.");
        }
        for skill in &self.skills {
            description.push_str(&format!("\n- {}: {}", skill.name, skill.description));
        }
        ToolSpec {
            name: "skill_get".to_owned(),
            description,
            input_schema: json!({
                "type": "object",
                "properties": {"skill": {"type": "string"}},
                "required": ["skill"],
                "additionalProperties": false
            }),
        }
    }

    fn call(&self, args: &Value, _ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let name = args["skill"].as_str().unwrap_or_default();
        match self.skills.iter().find(|s| s.name == name) {
            Some(skill) => ToolOutcome::ok(skill.content.clone()),
            None => ToolOutcome::error(format!(
                "Error: there is no skill `{name}`. Available skills: {}.",
                self.names()
            )),
        }
    }
}
