use super::*;

fn keys(hits: &[(&'static str, f32)]) -> Vec<&'static str> {
    hits.iter().map(|(k, _)| *k).collect()
}

/// Name (x3) and body (x1).
fn index(docs: &[(&'static str, &str, &str)]) -> TextIndex<&'static str, 2> {
    let mut index = TextIndex::new([3.0, 1.0]);
    for (key, name, body) in docs {
        index.upsert(*key, [*name, *body]);
    }
    index
}

#[test]
fn the_stop_words_are_sorted_for_binary_search() {
    let mut sorted = STOP_WORDS.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted, STOP_WORDS);
    assert_eq!(
        STOP_WORDS.iter().map(|w| w.len()).max(),
        Some(LONGEST_STOP_WORD)
    );
}

#[test]
fn inflections_fold_to_one_term() {
    let groups: &[&[&str]] = &[
        &["deploy", "deploys", "deploying", "deployed"],
        &["create", "creates", "creating", "created"],
        &["run", "runs", "running"],
        &["stop", "stops", "stopped", "stopping"],
        &["policy", "policies"],
        &["study", "studies", "studied", "studying"],
        &["class", "classes"],
        &["process", "processes", "processing", "processed"],
        &["index", "indexes", "indexing"],
        &["staff", "staffing"],
        &["embed", "embeds", "embedded", "embedding"],
        &["agree", "agreed"],
        &["speed", "speeding"],
        &["need", "needs", "needed"],
        &["use", "uses", "using", "used"],
        &["cache", "caches", "caching", "cached"],
        &["kubernetes"],
        &["api", "apis"],
    ];
    for group in groups {
        let stems: Vec<String> = group.iter().map(|w| stem(w)).collect();
        assert!(
            stems.iter().all(|s| *s == stems[0]),
            "{group:?} -> {stems:?}"
        );
    }
    // Different words stay apart.
    for (a, b) in [
        ("deploy", "develop"),
        ("running", "ruin"),
        ("status", "state"),
    ] {
        assert_ne!(stem(a), stem(b), "{a} / {b}");
    }
    // Left alone: short words, words with digits, -ss / -us / -sis, rings and sheds.
    for word in [
        "as", "k8s", "v2", "status", "analysis", "ring", "shed", "bed", "string",
    ] {
        assert_eq!(stem(word), word);
    }
}

#[test]
fn words_are_lowercased_split_on_anything_but_letters_and_digits_and_keep_their_place() {
    let text = "Deploy the K8s-cluster; Straße_und ДАННЫЕ! ".to_owned() + &"x".repeat(65);
    let tokens: Vec<Token> = tokenize(&text).collect();
    let terms: Vec<&str> = tokens.iter().map(|t| t.term.as_str()).collect();
    assert_eq!(
        terms,
        ["deploy", "k8s", "cluster", "straße", "und", "данные"]
    );
    assert_eq!(&text[tokens[0].span.clone()], "Deploy");
    assert_eq!(&text[tokens[5].span.clone()], "ДАННЫЕ");
}

#[test]
fn a_single_match_scores_the_textbook_bm25() {
    let index = index(&[("a", "", "alpha")]);
    let hits = index.search("alpha", 10, |_| true);
    // N = 1, df = 1: idf = ln(1 + 0.5 / 1.5); tf = 1 in a field of average length: 1 × 2.2 / 2.2.
    let expected = (1.0f32 + 0.5 / 1.5).ln();
    assert_eq!(hits.len(), 1);
    assert!((hits[0].1 - expected).abs() < 1e-6, "{hits:?}");
}

#[test]
fn a_rare_term_outranks_a_common_one() {
    // The rare document's key sorts last: only its score can put it first.
    let mut docs = vec![("z-kube", "", "kubernetes notes for the cluster")];
    let keys_of_common = ["c0", "c1", "c2", "c3", "c4"];
    for key in keys_of_common {
        docs.push((key, "", "deploy notes for the cluster"));
    }
    let index = index(&docs);
    let hits = index.search("deploy kubernetes", 10, |_| true);
    assert_eq!(hits.first().map(|h| h.0), Some("z-kube"), "{hits:?}");
    assert_eq!(hits.len(), 6);
}

#[test]
fn a_name_match_outranks_a_body_match() {
    let index = index(&[
        ("a", "Release notes", "how we tag a deploy"),
        ("b", "Deploy", "steps we follow before the release"),
    ]);
    assert_eq!(keys(&index.search("deploy", 10, |_| true)), ["b", "a"]);
}

#[test]
fn a_term_repeated_in_a_body_saturates() {
    let spam = "deploy ".repeat(50);
    let index = index(&[("a", "", &spam), ("b", "", "deploy and other words")]);
    let hits = index.search("deploy", 10, |_| true);
    assert_eq!(keys(&hits), ["a", "b"]);
    // Fifty occurrences score less than (k1 + 1) times the idf, the most any count reaches.
    assert!(hits[0].1 < index.idf(2) * (K1 + 1.0), "{hits:?}");
}

#[test]
fn stems_match_across_inflections() {
    let index = index(&[("a", "", "we deploy on fridays"), ("b", "", "we test")]);
    assert_eq!(keys(&index.search("deploying", 10, |_| true)), ["a"]);
    assert_eq!(keys(&index.search("Deployed!", 10, |_| true)), ["a"]);
}

#[test]
fn equal_scores_come_out_in_key_order() {
    let index = index(&[
        ("c", "", "same text"),
        ("a", "", "same text"),
        ("b", "", "same text"),
    ]);
    for _ in 0..3 {
        let hits = index.search("text", 10, |_| true);
        assert_eq!(keys(&hits), ["a", "b", "c"]);
        assert!(hits.windows(2).all(|w| w[0].1 == w[1].1));
    }
}

#[test]
fn the_filter_and_the_limit_apply() {
    let index = index(&[
        ("a", "", "x deploy"),
        ("b", "", "deploy"),
        ("c", "", "deploy y"),
    ]);
    assert_eq!(keys(&index.search("deploy", 10, |k| *k != "b")), ["a", "c"]);
    assert_eq!(index.search("deploy", 1, |_| true).len(), 1);
    assert!(index.search("deploy", 0, |_| true).is_empty());
}

#[test]
fn empty_and_stop_word_queries_find_nothing() {
    let index = index(&[("a", "the", "and of the")]);
    for query in ["", "   ", "the and of", "!?"] {
        assert!(index.search(query, 10, |_| true).is_empty(), "{query:?}");
    }
}

#[test]
fn the_last_word_matches_as_a_prefix_below_a_whole_word() {
    let index = index(&[
        ("a", "", "kubernetes cluster"),
        ("b", "", "kube is short for it"),
        ("c", "", "cluster of knowledge"),
    ]);
    assert_eq!(keys(&index.search("kube", 10, |_| true)), ["b", "a"]);
    // Only the last word expands: in "kube cluster", `a` and `c` match `cluster` alike.
    let hits = index.search("kube cluster", 10, |_| true);
    assert_eq!(keys(&hits), ["b", "a", "c"]);
    assert_eq!(hits[1].1, hits[2].1, "{hits:?}");
    // Too short to expand.
    assert!(index.search("ku", 10, |_| true).is_empty());
}

#[test]
fn removed_documents_are_gone_and_replaced_text_is_forgotten() {
    let mut index = index(&[("a", "alpha", "old words"), ("b", "beta", "old words")]);
    assert!(index.remove(&"a"));
    assert!(!index.remove(&"a"));
    assert_eq!(keys(&index.search("alpha old", 10, |_| true)), ["b"]);

    index.upsert("b", ["beta", "new text"]);
    assert!(index.search("old", 10, |_| true).is_empty());
    assert_eq!(keys(&index.search("new", 10, |_| true)), ["b"]);
    assert_eq!(index.len(), 1);

    // Nothing is left behind once the last document goes.
    index.remove(&"b");
    assert!(index.vocabulary.is_empty() && index.sorted_terms.is_empty());
    assert_eq!(index.total_lengths, [0, 0]);
    assert_eq!(index.field_docs, [0, 0]);
    assert!(index.terms.iter().all(Option::is_none));
    // Slots are reused.
    index.upsert("c", ["gamma", "delta"]);
    assert_eq!(index.docs.len(), 2);
    assert_eq!(keys(&index.search("delta", 10, |_| true)), ["c"]);
}

#[test]
fn a_query_knows_which_indexed_terms_it_matches() {
    let query = Query::parse("Deploying to kube");
    assert_eq!(query.terms(), ["deploy", "kub"]);
    assert!(query.matches("deploy"));
    assert!(query.matches("kubernet"));
    assert!(!query.matches("deployment"));
    assert!(Query::parse("the of").is_empty());
    // A stop word last: nothing expands.
    assert!(!Query::parse("kube the").matches("kubernet"));
}
