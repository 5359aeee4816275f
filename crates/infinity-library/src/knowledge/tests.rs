use jiff::Timestamp;

use super::*;

fn entry(name: &str, entry_type: EntryType, description: &str, content: &str) -> KnowledgeEntry {
    let mut e = KnowledgeEntry::new(name, entry_type, Timestamp::UNIX_EPOCH);
    e.description = description.to_owned();
    e.content = content.to_owned();
    e
}

fn names(hits: &[Hit]) -> Vec<&str> {
    hits.iter().map(|h| h.name.as_str()).collect()
}

#[test]
fn a_name_match_outranks_a_content_match() {
    let mut k = Knowledge::new();
    // "A ..." sorts first by key: only the name weight can put "Terraform" first.
    k.upsert(entry(
        "A note",
        EntryType::Observation,
        "",
        "we moved state to terraform cloud",
    ))
    .unwrap();
    k.upsert(entry(
        "Terraform",
        EntryType::Concept,
        "",
        "infrastructure as code",
    ))
    .unwrap();
    assert_eq!(
        names(&k.search("terraform", None, 10)),
        ["Terraform", "A note"]
    );
}

#[test]
fn tags_and_descriptions_count_more_than_content() {
    let mut k = Knowledge::new();
    k.upsert(entry("a", EntryType::Observation, "", "about billing"))
        .unwrap();
    let mut tagged = entry("b", EntryType::Observation, "", "about something");
    tagged.tags = vec!["billing".into()];
    k.upsert(tagged).unwrap();
    k.upsert(entry("c", EntryType::Observation, "billing", "about it"))
        .unwrap();
    let hits = k.search("billing", None, 10);
    assert_eq!(names(&hits), ["b", "c", "a"]);
    // Tags and descriptions weigh the same; they differ here only by the key.
    assert_eq!(hits[0].score, hits[1].score);
}

#[test]
fn the_type_filter_keeps_one_type() {
    let mut k = Knowledge::new();
    k.upsert(entry(
        "Alice",
        EntryType::Person,
        "",
        "leads the deploy rota",
    ))
    .unwrap();
    k.upsert(entry("Deploys", EntryType::Skill, "", "how to deploy"))
        .unwrap();
    k.upsert(entry(
        "Friday",
        EntryType::Preference,
        "",
        "never deploy on friday",
    ))
    .unwrap();
    assert_eq!(names(&k.search("deploy", None, 10)).len(), 3);
    assert_eq!(
        names(&k.search("deploy", Some(EntryType::Person), 10)),
        ["Alice"]
    );
    assert!(k.search("deploy", Some(EntryType::Project), 10).is_empty());
    let people: Vec<&str> = k
        .list(Some(EntryType::Person))
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(people, ["Alice"]);
    assert_eq!(k.list(None).len(), 3);
}

#[test]
fn names_are_one_entry_in_any_case_and_keep_the_last_spelling() {
    let mut k = Knowledge::new();
    assert!(k
        .upsert(entry("Deploy Checklist", EntryType::Skill, "", "old steps"))
        .unwrap()
        .is_none());
    let old = k
        .upsert(entry("deploy checklist", EntryType::Skill, "", "new steps"))
        .unwrap();
    assert_eq!(old.map(|e| e.name), Some("Deploy Checklist".to_owned()));
    assert_eq!(k.len(), 1);
    assert_eq!(k.get("DEPLOY CHECKLIST").unwrap().name, "deploy checklist");
    assert!(k.search("old", None, 10).is_empty());
    assert_eq!(names(&k.search("new", None, 10)), ["deploy checklist"]);

    assert_eq!(k.remove("Deploy checklist").unwrap().content, "new steps");
    assert!(k.search("steps", None, 10).is_empty());
    assert!(k.is_empty());
}

#[test]
fn an_invalid_entry_is_refused_and_left_out_of_a_load() {
    let mut k = Knowledge::new();
    let mut bad = entry("Note", EntryType::Concept, "", "");
    bad.files = vec!["x".into()];
    assert_eq!(k.upsert(bad.clone()).unwrap_err().field, "files");
    let k = Knowledge::from_entries([bad, entry("Good", EntryType::Concept, "", "")]);
    assert_eq!(k.len(), 1);
    assert!(k.get("good").is_some());
}

#[test]
fn a_snippet_shows_the_content_around_the_first_match() {
    let filler = "lorem ipsum dolor sit amet ".repeat(20);
    let content =
        format!("{filler}\n\nThe   deployment of the API needs a migration first. {filler}");
    let mut k = Knowledge::new();
    k.upsert(entry("Runbook", EntryType::Reference, "", &content))
        .unwrap();
    let hit = &k.search("migrations", None, 1)[0];
    let snippet = &hit.snippet;
    assert!(snippet.chars().count() <= SNIPPET_CHARS, "{snippet}");
    assert!(
        snippet.contains("The deployment of the API needs a migration first."),
        "{snippet}"
    );
    assert!(
        snippet.starts_with('…') && snippet.ends_with('…'),
        "{snippet}"
    );
    // Cut on word boundaries: the first and last words are whole.
    let words: Vec<&str> = snippet.trim_matches('…').split(' ').collect();
    for word in [words[0], words[words.len() - 1]] {
        assert!(
            filler.split(' ').any(|w| w == word),
            "{word:?} in {snippet}"
        );
    }
}

#[test]
fn a_snippet_starts_at_the_beginning_when_the_content_does_not_match() {
    let mut k = Knowledge::new();
    k.upsert(entry(
        "Grafana",
        EntryType::Reference,
        "",
        "Dashboards live at grafana.example.",
    ))
    .unwrap();
    k.upsert(entry("Empty", EntryType::Reference, "grafana", ""))
        .unwrap();
    let hits = k.search("grafana", None, 10);
    assert_eq!(hits[0].snippet, "Dashboards live at grafana.example.");
    assert_eq!(hits[1].snippet, "");
    // The name matched, not the content: the snippet is the content's start.
    let hits = k.search("dashboards", None, 10);
    assert_eq!(hits[0].snippet, "Dashboards live at grafana.example.");
}

#[test]
fn a_snippet_is_bounded_in_characters_whatever_the_script() {
    let content = format!("{}мигра́ция {}", "ж".repeat(300), "字".repeat(300));
    let mut k = Knowledge::new();
    k.upsert(entry("Ru", EntryType::Reference, "", &content))
        .unwrap();
    let hit = &k.search("ru", None, 1)[0];
    assert_eq!(
        hit.snippet.chars().count(),
        SNIPPET_CHARS,
        "{}",
        hit.snippet
    );
    // A match far into a run of letters with no spaces: the window starts at the match.
    let content = format!("{} 字典 {}", "ж".repeat(300), "字".repeat(300));
    let snippet = snippet(&content, &Query::parse("字典"));
    assert!(snippet.starts_with("…字典 字字"), "{snippet}");
    assert!(snippet.ends_with('…'), "{snippet}");
    assert!(snippet.chars().count() <= SNIPPET_CHARS);
}

#[test]
fn hits_serialize_with_a_type_field() {
    let mut k = Knowledge::new();
    k.upsert(entry("Tea", EntryType::Preference, "green", "no sugar"))
        .unwrap();
    let value = serde_json::to_value(&k.search("tea", None, 1)[0]).unwrap();
    assert_eq!(value["type"], "preference");
    assert_eq!(value["name"], "Tea");
}

#[test]
fn a_new_type_replaces_the_old_in_searches() {
    let mut k = Knowledge::new();
    k.upsert(entry("Ada", EntryType::Concept, "", "analytical engine"))
        .unwrap();
    k.upsert(entry("ada", EntryType::Person, "", "analytical engine"))
        .unwrap();
    assert_eq!(names(&k.search("engine", None, 10)), ["ada"]);
    assert!(k.search("engine", Some(EntryType::Concept), 10).is_empty());
    assert_eq!(
        names(&k.search("engine", Some(EntryType::Person), 10)),
        ["ada"]
    );
    k.remove("ADA");
    assert!(k.search("engine", None, 10).is_empty());
}
