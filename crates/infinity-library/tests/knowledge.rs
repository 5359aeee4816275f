//! The knowledge registry's stores (in memory and in a folder) and its search, end to end:
//! versions and conflicts, names in any case, files that cannot be read, and a property test of
//! the index against a brute-force scan.

use std::collections::BTreeMap;
use std::sync::Arc;

use infinity_agent_core::testing::cases;
use infinity_library::knowledge::{
    EntryType, FileKnowledgeStore, Knowledge, KnowledgeEntry, KnowledgeStore, KnowledgeStoreError,
    MemoryKnowledgeStore,
};
use infinity_library::search::{tokenize, Query, TextIndex};
use jiff::Timestamp;
use proptest::prelude::*;

fn entry(name: &str, content: &str) -> KnowledgeEntry {
    let mut e = KnowledgeEntry::new(name, EntryType::Observation, Timestamp::UNIX_EPOCH);
    e.content = content.to_owned();
    e
}

/// What every store must do, whatever it keeps entries in.
async fn versions_names_and_removal(store: &dyn KnowledgeStore) {
    assert_eq!(store.put(&entry("Deploy", "v1"), None).await.unwrap(), 1);
    // `None` overwrites whatever is there.
    assert_eq!(store.put(&entry("Deploy", "v2"), None).await.unwrap(), 2);
    assert_eq!(store.put(&entry("Deploy", "v3"), Some(2)).await.unwrap(), 3);

    let err = store
        .put(&entry("Deploy", "stale"), Some(2))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        KnowledgeStoreError::Conflict {
            name: "Deploy".into(),
            expected: 2,
            found: Some(3)
        }
    );
    assert!(!err.is_retryable());
    assert!(
        err.to_string()
            .contains("expected version 2, found version 3"),
        "{err}"
    );
    let err = store
        .put(&entry("Missing", "x"), Some(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no such entry"), "{err}");

    // Names in any case are one entry, stored as last written.
    assert_eq!(store.put(&entry("DEPLOY", "v4"), Some(3)).await.unwrap(), 4);
    let got = store.get("deploy").await.unwrap().unwrap();
    assert_eq!(
        (got.name.as_str(), got.content.as_str(), got.version),
        ("DEPLOY", "v4", 4)
    );

    let mut bad = entry("Bad", "");
    bad.tags = vec!["t".repeat(51)];
    match store.put(&bad, None).await.unwrap_err() {
        KnowledgeStoreError::Invalid(invalid) => assert_eq!(invalid.field, "tags[0]"),
        other => panic!("{other}"),
    }
    assert!(store.get("bad").await.unwrap().is_none());

    store.put(&entry("alpha", "a"), None).await.unwrap();
    let names: Vec<String> = store
        .load_all()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["alpha", "DEPLOY"], "key order");

    assert!(store.remove("Deploy").await.unwrap());
    assert!(!store.remove("deploy").await.unwrap());
    assert!(store.get("DEPLOY").await.unwrap().is_none());
    // Removed: a versioned write finds no entry; a new one starts again at 1.
    assert!(store.put(&entry("Deploy", "x"), Some(4)).await.is_err());
    assert_eq!(store.put(&entry("Deploy", "x"), None).await.unwrap(), 1);
}

#[tokio::test]
async fn the_memory_store_keeps_versions_and_names_in_any_case() {
    versions_names_and_removal(&MemoryKnowledgeStore::new()).await;
}

#[tokio::test]
async fn the_file_store_keeps_versions_and_names_in_any_case() {
    let dir = tempfile::tempdir().unwrap();
    versions_names_and_removal(&FileKnowledgeStore::open(dir.path().join("k")).unwrap()).await;
}

#[tokio::test]
async fn the_file_store_survives_a_reopen_entry_for_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileKnowledgeStore::open(dir.path()).unwrap();
    let mut skill = KnowledgeEntry::new("Deploy checklist", EntryType::Skill, Timestamp::now());
    skill.description = "Before a release".into();
    skill.content = "Run the migrations.\nThen deploy.".into();
    skill.tags = vec!["ops".into(), "release".into()];
    skill.files = vec!["scripts/deploy.sh".into()];
    skill.allowed_tools = vec!["bash".into()];
    skill.version = store.put(&skill, None).await.unwrap();
    let person = KnowledgeEntry::new("Ådne", EntryType::Person, Timestamp::now());
    store.put(&person, None).await.unwrap();

    // One readable file per entry, named by its key.
    let text = std::fs::read_to_string(dir.path().join("deploy%20checklist.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        (json["format"].as_u64(), json["type"].as_str()),
        (Some(1), Some("skill"))
    );
    assert!(dir.path().join("%C3%A5dne.json").is_file());

    let reopened = FileKnowledgeStore::open(dir.path()).unwrap();
    let loaded = reopened.load_all().await.unwrap();
    assert_eq!(loaded.len(), 2);
    assert_eq!(loaded[0], skill);
    assert_eq!(loaded[1].name, "Ådne");
    assert!(reopened.broken().is_empty());

    // The registry loads from it and finds the skill.
    let knowledge = Knowledge::from_entries(loaded);
    let hits = knowledge.search("deploying", Some(EntryType::Skill), 5);
    assert_eq!(hits[0].name, "Deploy checklist");
}

#[tokio::test]
async fn a_file_that_cannot_be_read_is_left_out_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileKnowledgeStore::open(dir.path()).unwrap();
    store.put(&entry("good", "fine"), None).await.unwrap();
    store.put(&entry("moved", "x"), None).await.unwrap();
    std::fs::rename(
        dir.path().join("moved.json"),
        dir.path().join("elsewhere.json"),
    )
    .unwrap();
    std::fs::write(dir.path().join("garbage.json"), b"{not json").unwrap();
    std::fs::write(dir.path().join("empty.json"), b"").unwrap();
    let too_long = serde_json::json!({
        "name": "x".repeat(101), "created_at": "2026-12-01T00:00:00Z", "updated_at": "2026-12-01T00:00:00Z"
    });
    std::fs::write(dir.path().join("toolong.json"), too_long.to_string()).unwrap();
    // Leftovers of an unfinished write and unrelated files are not entries.
    std::fs::write(dir.path().join("good.json.tmp"), b"{half").unwrap();
    std::fs::write(dir.path().join("README"), b"notes").unwrap();

    let loaded = store.load_all().await.unwrap();
    assert_eq!(
        loaded.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["good"]
    );
    let broken = store.broken();
    let files: Vec<String> = broken
        .iter()
        .map(|b| b.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        [
            "elsewhere.json",
            "empty.json",
            "garbage.json",
            "toolong.json"
        ]
    );
    for b in &broken {
        assert!(b.reason.contains(&b.path.display().to_string()), "{b:?}");
    }
    assert!(broken[0].reason.contains("moved.json"), "{:?}", broken[0]);
    assert!(
        broken[3].reason.contains("name is 101 characters"),
        "{:?}",
        broken[3]
    );

    // Reading it is an error naming the file; a versioned write cannot go over it, a plain one
    // repairs it.
    std::fs::write(dir.path().join("good.json"), b"[]").unwrap();
    let err = store.get("good").await.unwrap_err();
    assert!(
        matches!(err, KnowledgeStoreError::Corrupt(_)) && err.to_string().contains("good.json"),
        "{err}"
    );
    assert!(store.put(&entry("good", "again"), Some(1)).await.is_err());
    assert_eq!(store.put(&entry("good", "again"), None).await.unwrap(), 1);
    assert_eq!(store.get("GOOD").await.unwrap().unwrap().content, "again");
}

#[test]
fn concurrent_writers_of_one_version_see_one_win() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let store = Arc::new(FileKnowledgeStore::open(dir.path()).unwrap());
    runtime
        .block_on(store.put(&entry("shared", "v1"), None))
        .unwrap();
    let writers: Vec<_> = (0..8)
        .map(|i| {
            // Each writer opens the folder itself, as another process would.
            let root = dir.path().to_owned();
            std::thread::spawn(move || {
                let store = FileKnowledgeStore::open(root).unwrap();
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                runtime.block_on(store.put(&entry("shared", &format!("writer {i}")), Some(1)))
            })
        })
        .collect();
    let results: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(|e| matches!(e, KnowledgeStoreError::Conflict { found: Some(2), .. })));
    let stored = runtime.block_on(store.get("shared")).unwrap().unwrap();
    assert_eq!(stored.version, 2);
}

/// An operation on the registry in the property test.
#[derive(Debug, Clone)]
enum Op {
    Upsert {
        key: usize,
        words: Vec<usize>,
        name_word: usize,
    },
    Remove {
        key: usize,
    },
}

const WORDS: &[&str] = &[
    "deploy",
    "deploying",
    "kubernetes",
    "cluster",
    "billing",
    "invoice",
    "the",
    "and",
    "tea",
    "green",
    "runs",
    "running",
    "cache",
    "cached",
    "migrations",
    "kube",
];
const KEYS: &[&str] = &["Alpha", "beta", "GAMMA", "delta", "alpha", "Beta", "eps"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..KEYS.len(), proptest::collection::vec(0..WORDS.len(), 0..8), 0..WORDS.len())
            .prop_map(|(key, words, name_word)| Op::Upsert { key, words, name_word }),
        1 => (0..KEYS.len()).prop_map(|key| Op::Remove { key }),
    ]
}

fn text_matches(query: &Query, text: &str) -> bool {
    tokenize(text).any(|t| query.matches(&t.term))
}

proptest! {
    #![proptest_config(cases(300))]

    /// After any mix of writes and removals, a search returns exactly the live entries with a
    /// matching word in their current text (never a removed key, never old text), scores
    /// positive and sorted, ties in key order: the registry, and the bare index under it.
    #[test]
    fn search_agrees_with_a_scan_of_the_live_entries(
        ops in proptest::collection::vec(op(), 1..40),
        query in proptest::collection::vec(0..WORDS.len(), 1..4),
    ) {
        let mut knowledge = Knowledge::new();
        let mut index: TextIndex<String, 2> = TextIndex::new([2.0, 1.0]);
        // The model: the live entries by key, with their name and text.
        let mut live: BTreeMap<String, (String, String)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Upsert { key, words, name_word } => {
                    // KEYS has "Alpha" and "alpha": one entry, renamed by the later write.
                    let name = KEYS[key];
                    let content: Vec<&str> = words.iter().map(|&w| WORDS[w]).collect();
                    let mut e = entry(name, &content.join(" "));
                    e.description = WORDS[name_word].to_owned();
                    knowledge.upsert(e).unwrap();
                    index.upsert(name.to_lowercase(), [WORDS[name_word], &content.join(" ")]);
                    let text = format!("{} {}", WORDS[name_word], content.join(" "));
                    live.insert(name.to_lowercase(), (name.to_owned(), text));
                }
                Op::Remove { key } => {
                    let removed = knowledge.remove(KEYS[key]).is_some();
                    prop_assert_eq!(index.remove(&KEYS[key].to_lowercase()), removed);
                    prop_assert_eq!(removed, live.remove(&KEYS[key].to_lowercase()).is_some());
                }
            }
        }
        let query_text: Vec<&str> = query.iter().map(|&w| WORDS[w]).collect();
        let query_text = query_text.join(" ");
        let hits = knowledge.search(&query_text, None, 100);

        let parsed = Query::parse(&query_text);
        let mut expected: Vec<String> = live
            .values()
            .filter(|(name, text)| text_matches(&parsed, name) || text_matches(&parsed, text))
            .map(|(name, _)| name.clone())
            .collect();
        expected.sort();
        let mut found: Vec<String> = hits.iter().map(|h| h.name.clone()).collect();
        found.sort();
        prop_assert_eq!(&found, &expected);
        let index_hits = index.search(&query_text, 100, |_| true);
        let mut index_found: Vec<String> = index_hits.iter().map(|(k, _)| k.clone()).collect();
        index_found.sort();
        let mut expected_keys: Vec<String> = expected.iter().map(|n| n.to_lowercase()).collect();
        expected_keys.sort();
        prop_assert_eq!(index_found, expected_keys);
        for pair in index_hits.windows(2) {
            prop_assert!(pair[0].1 > pair[1].1 || (pair[0].1 == pair[1].1 && pair[0].0 < pair[1].0));
        }

        for pair in hits.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            prop_assert!(a.score > 0.0 && b.score > 0.0);
            prop_assert!(
                a.score > b.score || (a.score == b.score && a.name.to_lowercase() < b.name.to_lowercase()),
                "{:?} before {:?}", a, b
            );
        }
        prop_assert_eq!(knowledge.len(), live.len());
    }
}
