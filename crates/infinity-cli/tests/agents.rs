//! `infinity agents save|list|show` on a store folder, the name rule on save, running a stored
//! agent that delegates to a configured one, and `serve`'s `/agents` routes.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{infinity, serve_in};
use infinity_test_support::get_json;

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A folder with a store, a researcher that finishes with what it was asked (`VERSION` in its
/// answer) and a lead that delegates to it.
fn agents(version: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("store")).unwrap();
    write_researcher(dir.path(), version);
    std::fs::write(
        dir.path().join("lead.yaml"),
        "name: lead\nmodel: script:lead.script.yaml\nagents: [researcher]\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("lead.script.yaml"),
        r#"rules:
  - when: "^ask (.+)"
    reply:
      tool_calls: [{name: researcher, args: {task: "$1"}}]
  - when: "-> (.*)"
    reply: {text: "Lead heard: $1"}
"#,
    )
    .unwrap();
    dir
}

fn write_researcher(dir: &Path, version: &str) {
    std::fs::write(
        dir.join("researcher.yaml"),
        "name: researcher\nmodel: script:researcher.script.yaml\ndescription: Finds facts.\nskills:\n  - {name: method, description: How to look, path: method.md}\n",
    )
    .unwrap();
    std::fs::write(dir.join("method.md"), format!("Look twice ({version}).")).unwrap();
    std::fs::write(
        dir.join("researcher.script.yaml"),
        format!(
            "rules:\n  - when: \"Task: ([^\\n]+)\"\n    reply:\n      tool_calls: [{{name: finish, args: {{status: succeeded, result: \"found $1 ({version})\"}}}}]\n"
        ),
    )
    .unwrap();
}

#[test]
fn saved_versions_are_listed_shown_and_run() {
    let dir = agents("v1");
    let d = dir.path();
    let out = infinity(d, &["agents", "list", "--store", "store"]);
    assert!(
        text(&out).0.contains("no stored agents"),
        "{:?}",
        text(&out)
    );
    for file in ["researcher.yaml", "lead.yaml"] {
        let out = infinity(d, &["agents", "save", "--store", "store", file]);
        assert!(out.status.success(), "{:?}", text(&out));
    }
    // The second version of the researcher; its skill file is read in with it.
    write_researcher(d, "v2");
    let out = infinity(
        d,
        &["agents", "save", "--store", "store", "researcher.yaml"],
    );
    assert_eq!(text(&out).0.trim(), "saved researcher@2");
    // The same file again is no new version.
    let out = infinity(
        d,
        &["agents", "save", "--store", "store", "researcher.yaml"],
    );
    assert!(out.status.success(), "{:?}", text(&out));
    assert_eq!(
        text(&out).0.trim(),
        "unchanged: researcher@2 is already this file"
    );
    let (list, _) = text(&infinity(
        d,
        &["agents", "list", "--store", "store", "--json"],
    ));
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(list[0]["name"], "lead");
    assert_eq!(list[1]["name"], "researcher");
    assert_eq!(list[1]["version"], 2);
    assert_eq!(list[1]["description"], "Finds facts.");
    let (shown, _) = text(&infinity(
        d,
        &[
            "agents",
            "show",
            "--store",
            "store",
            "researcher@1",
            "--json",
        ],
    ));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["files"]["method.md"], "Look twice (v1).");
    // The scripted model's script is stored with the version, so it runs where it is loaded.
    let script = shown["files"]["researcher.script.yaml"].as_str().unwrap();
    assert!(script.contains("(v1)"), "{script}");
    let out = infinity(d, &["agents", "show", "--store", "store", "researcher@9"]);
    assert!(!out.status.success());
    assert!(
        text(&out)
            .1
            .contains("no stored agent researcher@9 (its versions: 1, 2)"),
        "{:?}",
        text(&out)
    );
    // The stored lead runs; its configured researcher runs its newest version.
    let out = infinity(
        d,
        &[
            "run",
            "--store",
            "store",
            "--agent",
            "lead",
            "--thread",
            "t1",
            "ask tides",
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(
            "Lead heard: The delegated agent finished (succeeded). Result: found tides (v2)"
        ),
        "{stdout}"
    );
    let (threads, _) = text(&infinity(d, &["threads", "--store", "store"]));
    assert!(threads.contains("t1 [idle] agent lead@1"), "{threads}");
    assert!(threads.contains("agent researcher@2"), "{threads}");
}

#[test]
fn a_tool_named_like_an_internal_tool_that_is_on_is_not_saved() {
    let dir = agents("v1");
    let d = dir.path();
    std::fs::write(
        d.join("clash.yaml"),
        "name: clash\nmodel: script:lead.script.yaml\nagents: [plan_create, sleep]\n",
    )
    .unwrap();
    let out = infinity(d, &["agents", "save", "--store", "store", "clash.yaml"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("`plan_create`") && stderr.contains("internal_tools: {plan: false}"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`sleep`") && stderr.contains("built-in"),
        "{stderr}"
    );
    assert!(
        stderr.contains("not saved: 2 tool name(s) taken"),
        "{stderr}"
    );
    assert!(!d.join("store/agents/clash").exists());
    // Turning the category off frees the name.
    std::fs::write(
        d.join("clash.yaml"),
        "name: clash\nmodel: script:lead.script.yaml\ninternal_tools: {plan: false}\nagents: [plan_create]\n",
    )
    .unwrap();
    let out = infinity(d, &["agents", "save", "--store", "store", "clash.yaml"]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(text(&out)
        .1
        .contains("`plan_create`, which is not stored yet"));
    // A flag no category has is refused by saving and by running, naming it and the known ones.
    std::fs::write(
        d.join("typo.yaml"),
        "name: typo\nmodel: script:lead.script.yaml\ninternal_tools: {plans: true}\n",
    )
    .unwrap();
    for args in [
        &["agents", "save", "--store", "store", "typo.yaml"][..],
        &["run", "--agent", "typo.yaml", "hi"][..],
    ] {
        let out = infinity(d, args);
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            stderr.contains("`plans` is not a category this host has")
                && stderr.contains("knowledge"),
            "{args:?}: {stderr}"
        );
    }
    assert!(!d.join("store/agents/typo").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_lists_stored_agents_and_internal_tools() {
    let dir = agents("v1");
    let d = dir.path();
    for file in ["researcher.yaml", "lead.yaml"] {
        assert!(infinity(d, &["agents", "save", "--store", "store", file])
            .status
            .success());
    }
    let (_server, api) = serve_in(d, &["--agent", "lead", "--store", "store"]).await;
    let (status, agents) = get_json(&format!("{api}/agents")).await;
    assert_eq!(status, 200, "{agents}");
    assert_eq!(agents["default"], "lead");
    assert_eq!(agents["stored"][1]["name"], "researcher");
    let (status, one) = get_json(&format!("{api}/agents/researcher@1")).await;
    assert_eq!((status, one["version"].as_u64()), (200, Some(1)));
    let (status, _) = get_json(&format!("{api}/agents/nobody")).await;
    assert_eq!(status, 404);
    let (status, _) = get_json(&format!("{api}/agents/researcher@x")).await;
    assert_eq!(status, 400);
    let (status, tools) = get_json(&format!("{api}/agents/internal-tools")).await;
    assert_eq!(status, 200);
    let plan = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "plan_create")
        .unwrap();
    assert_eq!(
        (plan["category"].as_str(), plan["default_enabled"].as_bool()),
        (Some("plan"), Some(true))
    );
    // Every tool of the opt-in meta and knowledge categories, off by default.
    for (name, category) in [
        ("search_tools", "meta"),
        ("list_tools", "meta"),
        ("execute_tool", "meta"),
        ("knowledge_search", "knowledge"),
        ("knowledge_get", "knowledge"),
        ("knowledge_save", "knowledge"),
    ] {
        let tool = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not listed: {tools}"));
        assert_eq!(
            (tool["category"].as_str(), tool["default_enabled"].as_bool()),
            (Some(category), Some(false)),
            "{name}"
        );
    }
}

#[test]
fn people_manage_knowledge_that_agents_find() {
    let dir = agents("v1");
    let d = dir.path();
    let add = infinity(
        d,
        &[
            "knowledge",
            "add",
            "--store",
            "store",
            "Boat schedule",
            "--type",
            "reference",
            "--description",
            "When the ferry leaves",
            "--content",
            "The ferry leaves at 7 and 19 daily.",
            "--tag",
            "ferry",
        ],
    );
    assert_eq!(
        text(&add).0.trim(),
        "saved reference `Boat schedule` (version 1)"
    );
    // Refused with the field and the reason; nothing written.
    let bad = infinity(
        d,
        &[
            "knowledge",
            "add",
            "--store",
            "store",
            "x",
            "--content",
            "y",
            "--skill-file",
            "a.md",
        ],
    );
    assert!(!bad.status.success());
    assert!(
        text(&bad).1.contains("files are for skills only"),
        "{:?}",
        text(&bad)
    );
    let bad_type = infinity(
        d,
        &[
            "knowledge",
            "add",
            "--store",
            "store",
            "x",
            "--type",
            "gossip",
            "--content",
            "y",
        ],
    );
    assert!(text(&bad_type)
        .1
        .contains("unknown knowledge type `gossip`"));
    std::fs::write(
        d.join("keeper.yaml"),
        "name: keeper\nmodel: script:keeper.script.yaml\ninternal_tools: {knowledge: true}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("keeper.script.yaml"),
        "rules:\n  - when: \"^find (.+)$\"\n    reply:\n      tool_calls: [{name: knowledge_search, args: {query: \"$1\"}}]\n  - reply: {text: ok}\n",
    )
    .unwrap();
    let run = infinity(
        d,
        &[
            "run",
            "--store",
            "store",
            "--agent",
            "keeper.yaml",
            "find ferry departures",
        ],
    );
    let (stdout, stderr) = text(&run);
    assert!(run.status.success(), "{stderr}");
    assert!(stdout.contains("\"name\":\"Boat schedule\""), "{stdout}");
    let (shown, _) = text(&infinity(
        d,
        &[
            "knowledge",
            "show",
            "--store",
            "store",
            "boat SCHEDULE",
            "--json",
        ],
    ));
    let shown: serde_json::Value = serde_json::from_str(&shown).unwrap();
    assert_eq!(shown["tags"][0], "ferry");
    let (found, _) = text(&infinity(
        d,
        &["knowledge", "search", "--store", "store", "ferry"],
    ));
    assert!(found.contains("Boat schedule"), "{found}");
    assert!(
        infinity(d, &["knowledge", "rm", "--store", "store", "Boat Schedule"])
            .status
            .success()
    );
    let (listed, _) = text(&infinity(d, &["knowledge", "list", "--store", "store"]));
    assert!(listed.contains("no knowledge entries"), "{listed}");
    assert!(
        !infinity(d, &["knowledge", "rm", "--store", "store", "Boat Schedule"])
            .status
            .success()
    );
}
