//! The core's parsers on damaged and arbitrary input: agent files, scripts, inputs and history
//! entries as stored, and store folders whose files were damaged. None may panic or hang; bad
//! input is an error value (and a broken thread is left out of its store, named).
//!
//! `PROPTEST_CASES=100000 cargo test -p infinity-agent-core --test integration fuzz::` runs
//! longer.

use std::path::Path;

use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::history::HistoryEntry;
use infinity_agent_core::input::Input;
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::store::FileStore;
use infinity_agent_core::testing::{cases, mutated, noise};
use proptest::prelude::*;

const AGENT_FILES: &[&str] = &[
    "name: a\nmodel: script:s.yaml\n",
    "name: planner\nmodel: anthropic:claude\nsystem: |\n  You plan.\nlimits:\n  max_completions_per_slice: 4\n  completions_per_hour: 10\ninternal_tools: {finish: false, agent: true}\noutput_schema: {type: object, required: [x]}\nskills:\n  - {name: tea, description: d, content: steep}\ntool_servers: [http://127.0.0.1:8701, {url: 'https://x.example', auth: {bearer_env: T}}, {mcp: {command: npx, args: [srv]}}]\n",
];

const SCRIPTS: &[&str] = &[
    "rules:\n  - reply: {text: hi}\n",
    "context_window: 1000\nrules:\n  - when: \"^plan (.+)$\"\n    thread: root\n    scope: all\n    reply:\n      text: \"ok $1 ${thread_id}\"\n      tool_calls: [{name: spawn_thread, args: {instructions: x, child_of: \"${stack}\"}}]\n  - reply: {text: done}\n",
];

const INPUTS: &[&str] = &[
    r#"{"type":"user_message","thread_id":"t","text":"hi","id":"m1"}"#,
    r#"{"type":"tool_result","thread_id":"t","id":"r","call_id":"c","text":"x","is_error":true,"subscription":true,"images":[{"media_type":"image/png","data":"AAAA"}]}"#,
    r#"{"type":"child_seed","thread_id":"c","id":"s","agent":"a","parent":{"thread_id":"p","call_id":"c","tool":"spawn_thread","args":{},"fork_at":3},"parent_stack":["p"],"seed":[{"type":"message","text":"x","from":{"kind":"user"}}],"depth":1}"#,
    r#"{"type":"conversation_usage","thread_id":"r","id":"u","usage":{"hour":"2026-03-07T17:00:00Z","completions":2,"tokens":9,"threads":1}}"#,
    r#"{"type":"view_update","thread_id":"t","id":"v","view_type":"diff","content":{"a":1}}"#,
];

const ENTRIES: &[&str] = &[
    r#"{"seq":0,"at":"2026-03-07T17:00:00Z","input_id":"m1","item":{"type":"message","text":"hi","from":{"kind":"user"}}}"#,
    r#"{"seq":1,"at":"2026-03-07T17:00:00Z","item":{"type":"assistant","text":"x","tool_calls":[{"id":"c","name":"sleep","args":{"seconds":1}}],"synthetic":true}}"#,
    r#"{"seq":2,"at":"2026-03-07T17:00:00Z","item":{"type":"summary","text":"s","covers":4}}"#,
];

proptest! {
    #![proptest_config(cases(1500))]

    #[test]
    fn agent_files(bytes in prop_oneof![mutated(AGENT_FILES), noise(400)]) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(err) = AgentFile::parse(&text, Path::new("fuzz/agent.yaml")) {
            prop_assert!(err.to_string().contains("fuzz/agent.yaml"), "{err}");
        }
    }

    #[test]
    fn scripts(bytes in prop_oneof![mutated(SCRIPTS), noise(400)]) {
        let text = String::from_utf8_lossy(&bytes);
        if let Err(err) = ScriptedModel::parse(&text, Path::new("fuzz/script.yaml")) {
            prop_assert!(err.to_string().contains("fuzz/script.yaml"), "{err}");
        }
    }

    #[test]
    fn inputs_and_entries(bytes in prop_oneof![mutated(INPUTS), mutated(ENTRIES), noise(400)]) {
        let _ = serde_json::from_slice::<Input>(&bytes);
        let _ = serde_json::from_slice::<HistoryEntry>(&bytes);
    }
}

/// A store with one thread of each kind of file, written by the store itself.
fn valid_store(dir: &Path) {
    use infinity_agent_core::commit::Commit;
    use infinity_agent_core::effect::{Effect, OutputEvent, OutputKind, PendingEffect};
    use infinity_agent_core::ids::{CallId, EffectId, InputId, ThreadId};
    use infinity_agent_core::state::{ChildLink, ThreadRecord};
    use infinity_agent_core::store::ThreadStore;
    let id = ThreadId::new("t").unwrap();
    let at = jiff::Timestamp::UNIX_EPOCH;
    let mut record = ThreadRecord::new(id.clone(), "a", None, at);
    record.version = 1;
    record.history_len = 1;
    record.children.push(ChildLink {
        thread_id: ThreadId::new("child").unwrap(),
        call_id: CallId::new("c").unwrap(),
        tool: "spawn_thread".into(),
        args: serde_json::json!({}),
        closed: false,
    });
    let commit = Commit {
        thread_id: id.clone(),
        expected_version: None,
        record,
        new_entries: vec![serde_json::from_str(ENTRIES[0]).unwrap()],
        processed_inputs: vec![InputId::new("m1").unwrap()],
        effects: vec![PendingEffect {
            id: EffectId::new("fx-1").unwrap(),
            effect: Effect::Output {
                event: OutputEvent::new(id, at, OutputKind::Error { text: "x".into() }),
            },
        }],
        events: Vec::new(),
    };
    let store = FileStore::open(dir).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(store.commit(&commit))
        .unwrap();
}

const STORE_FILES: &[&str] = &[
    "state.json",
    "entries.jsonl",
    "processed.txt",
    "children.jsonl",
    "outbox.jsonl",
];

proptest! {
    #![proptest_config(cases(300))]

    #[test]
    fn store_files(which in 0..STORE_FILES.len(), damage in proptest::collection::vec(any::<(usize, u8)>(), 1..6), cut in any::<Option<usize>>()) {
        let dir = tempfile::tempdir().unwrap();
        valid_store(dir.path());
        let file = dir.path().join("threads/t").join(STORE_FILES[which]);
        let mut bytes = std::fs::read(&file).unwrap_or_default();
        for (at, byte) in damage {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = byte;
            }
        }
        if let Some(cut) = cut {
            bytes.truncate(cut % (bytes.len() + 1));
        }
        std::fs::write(&file, &bytes).unwrap();
        // Opening never fails for one thread's damage: the thread loads, or is named as broken.
        let store = FileStore::open(dir.path()).unwrap();
        let broken = store.broken();
        let loaded = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(infinity_agent_core::store::ThreadStore::thread_ids(&store))
            .unwrap();
        prop_assert_eq!(loaded.len() + broken.len(), 1, "{:?}", broken);
    }
}
