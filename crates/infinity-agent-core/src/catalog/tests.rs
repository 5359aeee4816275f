use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::*;
use crate::agent::{Agent, AgentLookup, PrepareError};
use crate::tools::internal::Categories;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).unwrap()
}

fn stored(name: &str, text: &str) -> StoredAgent {
    StoredAgent {
        name: name.to_owned(),
        version: 0,
        text: text.to_owned(),
        files: BTreeMap::new(),
        source_dir: None,
        description: None,
        saved_at: Timestamp::UNIX_EPOCH,
    }
}

async fn versions_count_up_per_agent(catalog: &dyn AgentCatalog) {
    assert_eq!(catalog.get("helper", None).await.unwrap(), None);
    assert!(catalog.versions("helper").await.unwrap().is_empty());
    let one = catalog.save(stored("helper", "v1"), at(1)).await.unwrap();
    let two = catalog.save(stored("helper", "v2"), at(2)).await.unwrap();
    let other = catalog.save(stored("other", "o1"), at(3)).await.unwrap();
    assert_eq!((one.version, two.version, other.version), (1, 2, 1));
    assert_eq!(two.saved_at, at(2));
    assert_eq!(
        catalog.get("helper", None).await.unwrap().unwrap().text,
        "v2"
    );
    assert_eq!(
        catalog.get("helper", Some(1)).await.unwrap().unwrap().text,
        "v1"
    );
    assert_eq!(catalog.get("helper", Some(3)).await.unwrap(), None);
    assert_eq!(catalog.versions("helper").await.unwrap(), vec![1, 2]);
    let listed: Vec<String> = catalog
        .list()
        .await
        .unwrap()
        .iter()
        .map(StoredAgent::reference)
        .collect();
    assert_eq!(listed, vec!["helper@2", "other@1"]);
}

#[tokio::test]
async fn memory_catalog_versions() {
    versions_count_up_per_agent(&MemoryCatalog::new()).await;
}

#[tokio::test]
async fn file_catalog_versions_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    versions_count_up_per_agent(&FileCatalog::new(dir.path())).await;
    // Another process opening the folder sees the same versions, and a stray temporary file
    // (a save that crashed before linking its version) is not a version.
    std::fs::write(dir.path().join("agents/helper/.3.999.tmp"), "{").unwrap();
    let again = FileCatalog::new(dir.path());
    assert_eq!(again.versions("helper").await.unwrap(), vec![1, 2]);
    assert_eq!(again.get("helper", None).await.unwrap().unwrap().version, 2);
    // Names that are not agents' names read as absent, never as paths.
    assert_eq!(again.get("../helper", None).await.unwrap(), None);
    assert_eq!(again.get("..", None).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_saves_get_distinct_versions() {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Arc::new(FileCatalog::new(dir.path()));
    let saves = (0..8).map(|i| {
        let catalog = Arc::clone(&catalog);
        tokio::spawn(async move {
            catalog
                .save(stored("busy", &format!("text {i}")), at(i))
                .await
                .unwrap()
                .version
        })
    });
    let mut versions: Vec<u32> = futures_util::future::join_all(saves)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    versions.sort_unstable();
    assert_eq!(versions, (1..=8).collect::<Vec<_>>());
    let texts: std::collections::HashSet<String> =
        futures_util::future::join_all((1..=8).map(|v| {
            let catalog = Arc::clone(&catalog);
            async move { catalog.get("busy", Some(v)).await.unwrap().unwrap().text }
        }))
        .await
        .into_iter()
        .collect();
    assert_eq!(texts.len(), 8, "every save kept its own text");
}

#[test]
fn a_stored_version_carries_its_skill_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("style.md"), "Write short sentences.").unwrap();
    let path = dir.path().join("writer.yaml");
    std::fs::write(
        &path,
        "name: writer\nmodel: script:none.yaml\ndescription: Writes.\nskills:\n  - {name: style, description: House style, path: style.md}\n",
    )
    .unwrap();
    let mut version = StoredAgent::read(&path).unwrap();
    version.version = 4;
    assert_eq!(version.description.as_deref(), Some("Writes."));
    // The file on disk changes after the save; the stored version does not.
    std::fs::write(dir.path().join("style.md"), "Changed.").unwrap();
    let file = version.agent_file().unwrap();
    let skills = file.load_skills(&BTreeMap::new()).unwrap();
    assert_eq!(skills[0].content, "Write short sentences.");
    assert_eq!(
        file.path.parent().unwrap(),
        Path::new(&std::path::absolute(dir.path()).unwrap())
    );
}

#[test]
fn agent_refs() {
    let r = AgentRef::parse("helper@3").unwrap();
    assert_eq!((r.name.as_str(), r.version), ("helper", Some(3)));
    assert_eq!(r.to_string(), "helper@3");
    assert_eq!(AgentRef::parse("helper").unwrap().version, None);
    for bad in [
        "helper@",
        "helper@0",
        "helper@x",
        "@2",
        "a b",
        "helper/2@1",
        &"a".repeat(65),
    ] {
        let err = AgentRef::parse(bad).unwrap_err();
        assert_eq!(err.reference, bad);
        assert!(err.to_string().starts_with(&format!("`{bad}`: ")), "{err}");
    }
}

#[test]
fn the_name_in_a_kept_reference() {
    for (reference, name) in [
        ("helper@3", "helper"),
        ("helper", "helper"),
        ("h.e-l_p@12", "h.e-l_p"),
        ("@2", ""),
        ("", ""),
    ] {
        assert_eq!(AgentRef::name_in(reference), name, "{reference}");
    }
}

fn file(yaml: &str) -> AgentFile {
    AgentFile::parse(yaml, Path::new("a.yaml")).unwrap()
}

#[test]
fn names_of_the_agents_tools_may_not_take_internal_or_built_in_ones() {
    let servers = vec![
        ("plan_create".to_owned(), "http://tools".to_owned()),
        ("lookup".to_owned(), "http://tools".to_owned()),
    ];
    let on = file("name: a\nmodel: script:x.yaml\nagents: [memory_get, sleep, researcher]\n");
    let clashes = check_names(&on, &Categories::core(), &servers);
    let names: Vec<(&str, Option<&str>)> = clashes
        .iter()
        .map(|c| (c.name.as_str(), c.category))
        .collect();
    assert_eq!(
        names,
        vec![
            ("memory_get", Some("memory")),
            ("sleep", None),
            ("plan_create", Some("plan")),
        ]
    );
    let message = clashes[0].to_string();
    assert!(
        message.contains("internal_tools: {memory: false}"),
        "{message}"
    );
    assert!(clashes[1].to_string().contains("rename it"));
    // A category that is off frees its names; an opt-in category is off unless turned on.
    let off = file(
        "name: a\nmodel: script:x.yaml\ninternal_tools: {memory: false, plan: false}\nagents: [memory_get]\n",
    );
    assert!(check_names(&off, &Categories::core(), &servers).is_empty());
    let opt_in = file("name: a\nmodel: script:x.yaml\nagents: [agent]\n");
    assert!(check_names(&opt_in, &Categories::core(), &[]).is_empty());
    let client = file(
        "name: a\nmodel: script:x.yaml\nclient_tools: [{name: plan_create, description: d}]\n",
    );
    let clash = &check_names(&client, &Categories::core(), &[])[0];
    assert_eq!(
        (clash.name.as_str(), clash.source.as_str(), clash.category),
        ("plan_create", "client_tools:", Some("plan"))
    );
    let turned_on =
        file("name: a\nmodel: script:x.yaml\ninternal_tools: {agent: true}\nagents: [agent]\n");
    assert_eq!(
        check_names(&turned_on, &Categories::core(), &[])[0].category,
        Some("agent")
    );
}

#[test]
fn configured_agents_are_checked_when_the_file_is_read() {
    for (agents, what) in [
        ("[a/b]", "not an agent's name"),
        ("[x.y, x_y]", "listed twice"),
    ] {
        let err = AgentFile::parse(
            &format!("name: a\nmodel: script:x.yaml\nagents: {agents}\n"),
            Path::new("a.yaml"),
        )
        .unwrap_err();
        assert!(err.to_string().contains(what), "{err}");
    }
}

/// Builds stored agents with the scripted model, counting builds.
#[derive(Default)]
struct Builds(AtomicU32);

#[async_trait]
impl AgentBuilder for Builds {
    async fn build(&self, stored: &StoredAgent) -> Result<Agent, BuildError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        match stored.text.as_str() {
            "broken" => return Err(BuildError::invalid("no model")),
            "unreachable" => return Err(BuildError::Unavailable("no key yet".to_owned())),
            _ => {}
        }
        let model = crate::scripted::ScriptedModel::parse("rules: []", Path::new("s.yaml"))
            .map_err(BuildError::invalid)?;
        let mut agent = Agent::new(
            stored.name.clone(),
            stored.text.clone(),
            Arc::new(model),
            crate::tools::ToolRegistry::empty(),
        );
        agent.version = Some(stored.version);
        Ok(agent)
    }
}

#[tokio::test]
async fn the_lookup_builds_versions_once_and_bare_names_follow_the_newest() {
    let catalog = Arc::new(MemoryCatalog::new());
    let builds = Arc::new(Builds::default());
    let own = Arc::new(Agent::new(
        "local",
        "given",
        Arc::new(crate::scripted::ScriptedModel::parse("rules: []", Path::new("s")).unwrap()),
        crate::tools::ToolRegistry::empty(),
    ));
    let agents = CatalogAgents::new(
        HashMap::from([("local".to_owned(), own)]),
        Arc::clone(&catalog) as Arc<dyn AgentCatalog>,
        Arc::clone(&builds) as Arc<dyn AgentBuilder>,
    );
    catalog
        .save(stored("helper", "first"), at(1))
        .await
        .unwrap();
    assert!(agents.agent("helper").is_none(), "not ready before prepare");
    agents.prepare("helper").await.unwrap();
    assert_eq!(agents.agent("helper").unwrap().system_prompt, "first");
    catalog
        .save(stored("helper", "second"), at(2))
        .await
        .unwrap();
    // A pinned version stays; a bare name moves to the newest once prepared again.
    agents.prepare("helper@1").await.unwrap();
    agents.prepare("helper").await.unwrap();
    assert_eq!(agents.agent("helper@1").unwrap().system_prompt, "first");
    assert_eq!(agents.agent("helper").unwrap().system_prompt, "second");
    assert_eq!(agents.agent("helper").unwrap().version, Some(2));
    agents.prepare("helper@1").await.unwrap();
    assert_eq!(
        builds.0.load(Ordering::SeqCst),
        2,
        "each version built once"
    );
    // The host's own agent answers to its bare name without the catalog.
    agents.prepare("local").await.unwrap();
    assert_eq!(agents.agent("local").unwrap().system_prompt, "given");
    // Unknown agents are left to the engine to report; a broken one says why.
    agents.prepare("nobody").await.unwrap();
    assert!(agents.agent("nobody").is_none());
    catalog.save(stored("bad", "broken"), at(3)).await.unwrap();
    let err = agents.prepare("bad").await.unwrap_err();
    assert_eq!(err, PrepareError::Broken("bad@1: no model".to_owned()));
    // One whose builder could not read what it needs yet is tried again later, not broken.
    catalog
        .save(stored("later", "unreachable"), at(4))
        .await
        .unwrap();
    let err = agents.prepare("later").await.unwrap_err();
    assert_eq!(
        err,
        PrepareError::Unavailable("later@1: no key yet".to_owned())
    );
}

#[tokio::test]
async fn a_hosts_own_pinned_version_answers_for_its_threads() {
    let catalog = Arc::new(MemoryCatalog::new());
    catalog
        .save(stored("pinned", "from the store"), at(1))
        .await
        .unwrap();
    let mut own = Agent::new(
        "pinned",
        "given, with another model",
        Arc::new(crate::scripted::ScriptedModel::parse("rules: []", Path::new("s")).unwrap()),
        crate::tools::ToolRegistry::empty(),
    );
    own.version = Some(1);
    let builds = Arc::new(Builds::default());
    let agents = CatalogAgents::new(
        HashMap::from([("pinned".to_owned(), Arc::new(own))]),
        catalog as Arc<dyn AgentCatalog>,
        Arc::clone(&builds) as Arc<dyn AgentBuilder>,
    );
    agents.prepare("pinned@1").await.unwrap();
    let found = agents.agent("pinned@1").unwrap();
    assert_eq!(found.system_prompt, "given, with another model");
    assert_eq!(
        builds.0.load(Ordering::SeqCst),
        0,
        "nothing built from the store"
    );
}
