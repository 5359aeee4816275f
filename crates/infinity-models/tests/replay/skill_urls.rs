//! Skills an agent file loads from a `url`: fetched with retries on 5xx, not on 4xx.

use std::path::Path;

use infinity_agent_core::agent::AgentFile;
use infinity_models::fetch::fetch_skills;

use crate::replay::server::{Reply, Server};

fn agent_with_skill(url: &str) -> AgentFile {
    let text = format!(
        "name: baker\nmodel: script:s.yaml\nskills:\n  - {{name: bread, description: How to bake bread., url: '{url}'}}\n  - {{name: tea, description: Tea., content: Steep.}}\n"
    );
    AgentFile::parse(&text, Path::new("agents/baker.yaml")).unwrap()
}

#[tokio::test]
async fn a_url_skill_is_fetched_after_a_server_error() {
    let server = Server::start(vec![
        Reply::text(503, "busy"),
        Reply::text(200, "Knead the dough for ten minutes."),
    ])
    .await;
    let file = agent_with_skill(&format!("{}/skills/bread.md", server.url));
    let fetched = fetch_skills(&file).await.unwrap();
    let skills = file.load_skills(&fetched).unwrap();
    assert_eq!(skills[0].name, "bread");
    assert_eq!(skills[0].content, "Knead the dough for ten minutes.");
    assert_eq!(skills[1].content, "Steep.");
    let received = server.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[1].path, "/skills/bread.md");
}

#[tokio::test]
async fn a_missing_skill_fails_at_once_naming_the_file_and_url() {
    let server = Server::start(vec![Reply::text(404, "not found")]).await;
    let url = format!("{}/skills/bread.md", server.url);
    let err = fetch_skills(&agent_with_skill(&url))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("agents/baker.yaml"), "{err}");
    assert!(err.contains(&url) && err.contains("404"), "{err}");
    assert_eq!(server.requests(), 1, "a 4xx is not retried");
}
