//! The `skills` internal tool: names up front, content on request.

use crate::behaviour::harness::{assert_in_order, Setup};
use infinity_agent_core::tools::internal::Skill;

#[tokio::test(start_paused = true)]
async fn skills_are_listed_and_loaded_on_request() {
    let mut setup = Setup::new(
        r#"
rules:
  - when: "^which$"
    reply: {tool_calls: [{name: skill_get, args: {skill: "baking"}}]}
  - when: "^bad$"
    reply: {tool_calls: [{name: skill_get, args: {skill: "juggling"}}]}
  - reply: {text: "ok"}
"#,
    );
    setup.skills = vec![
        Skill {
            name: "baking".into(),
            description: "How to bake bread.".into(),
            content: "Knead for ten minutes.".into(),
        },
        Skill {
            name: "brewing".into(),
            description: "How to brew tea.".into(),
            content: "Steep for three minutes.".into(),
        },
    ];
    let mut h = setup.start().await;
    h.say("main", "which").await;
    assert_in_order(
        &h.lines("main"),
        &["result skill_get: Knead for ten minutes.", "assistant: ok"],
    );
    h.say("main", "bad").await;
    assert_in_order(&h.lines("main"), &["error skill_get: Error: there is no skill `juggling`. Available skills: baking, brewing."]);
    assert!(!h
        .history("main")
        .await
        .iter()
        .any(|l| l.contains("Steep for three minutes")));
}

#[test]
fn the_description_names_every_skill() {
    use infinity_agent_core::tools::internal::{Categories, InternalTools, ToolSettings};
    let settings = ToolSettings {
        output_schema: None,
        skills: vec![Skill {
            name: "baking".into(),
            description: "How to bake bread.".into(),
            content: "secret".into(),
        }],
    };
    let categories = Categories::core();
    let tool = categories
        .agent_tools(&InternalTools::default(), &settings)
        .into_iter()
        .find(|t| t.name == "skill_get")
        .unwrap();
    let spec = tool.tool.spec();
    assert!(
        spec.description.contains("- baking: How to bake bread."),
        "{}",
        spec.description
    );
    assert!(!spec.description.contains("secret"));
}
