//! The knowledge registry at 3,000 entries of 1-2 KB: building it, searching it, replacing one
//! entry, and the file store's writes and load. `cargo bench -p infinity-agent-core --bench
//! knowledge [-- PART]` (parts: `build`, `registry`, `file`); results in docs/benchmarks.md.
//!
//! The text is generated, the same on every run: words drawn with Zipf-like frequencies from a
//! vocabulary of 20,000 made-up words (some with English endings, so the stemmer works), with
//! function words mixed in as in prose.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a bench: a failed step should stop it

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use infinity_library::knowledge::{
    EntryType, FileKnowledgeStore, Knowledge, KnowledgeEntry, KnowledgeStore,
};
use jiff::Timestamp;

use infinity_agent_core::testing::{bench_runtime, rss_bytes};

fn runtime() -> tokio::runtime::Runtime {
    bench_runtime().expect("runtime")
}

const ENTRIES: usize = 3_000;
const VOCABULARY: u32 = 20_000;
const SYLLABLES: &[&str] = &[
    "ka", "lo", "mi", "ne", "ra", "to", "su", "vi", "den", "bar", "qu", "el", "op", "tri", "zan",
    "for", "ul", "pex", "dra", "mon",
];
const ENDINGS: &[&str] = &["", "", "", "s", "ing", "ed"];
const FUNCTION_WORDS: &[&str] = &["the", "and", "of", "to", "a", "in", "is", "for", "with"];

/// A small deterministic generator (xorshift64*), so every run indexes the same text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// A word rank from 1 to [`VOCABULARY`], log-uniform: rank r comes about 1/r as often as
    /// rank 1 (Zipf's law with s = 1).
    fn rank(&mut self) -> u32 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        (f64::from(VOCABULARY).powf(u) as u32).clamp(1, VOCABULARY)
    }
}

/// The made-up word of a rank, with an inflection that depends on the rank's use.
fn word(rank: u32, ending: &str) -> String {
    let mut w = String::new();
    let mut r = rank;
    loop {
        w.push_str(SYLLABLES[(r % SYLLABLES.len() as u32) as usize]);
        r /= SYLLABLES.len() as u32;
        if r == 0 {
            break;
        }
    }
    w.push_str(ending);
    w
}

fn prose(rng: &mut Rng, words: usize) -> String {
    let mut out = Vec::with_capacity(words);
    for _ in 0..words {
        if rng.below(10) < 3 {
            out.push(FUNCTION_WORDS[rng.below(FUNCTION_WORDS.len() as u64) as usize].to_owned());
        } else {
            let ending = ENDINGS[rng.below(ENDINGS.len() as u64) as usize];
            out.push(word(rng.rank(), ending));
        }
    }
    out.join(" ")
}

fn entries() -> Vec<KnowledgeEntry> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..ENTRIES)
        .map(|i| {
            let entry_type = EntryType::ALL[i % EntryType::ALL.len()];
            let name = format!("{} {i}", prose(&mut rng, 3));
            let mut e = KnowledgeEntry::new(name, entry_type, Timestamp::UNIX_EPOCH);
            e.description = prose(&mut rng, 15);
            // 1-2 KB: 170 to 340 words of about six bytes.
            let words = 170 + rng.below(170) as usize;
            e.content = prose(&mut rng, words);
            e.tags = (0..3).map(|_| word(rng.rank(), "")).collect();
            e
        })
        .collect()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Build time and memory of the registry (entries and index).
fn build(entries: &[KnowledgeEntry]) {
    let text: usize = entries
        .iter()
        .map(|e| e.name.len() + e.description.len() + e.content.len() + e.tags.concat().len())
        .sum();
    // Memory first, while the allocator has nothing freed to reuse.
    let before = rss_bytes();
    let copy = entries.to_vec();
    let copied = rss_bytes();
    let knowledge = Knowledge::from_entries(copy);
    let (entries_bytes, index_bytes) = (
        copied.saturating_sub(before),
        rss_bytes().saturating_sub(copied),
    );
    let times: Vec<Duration> = (0..5)
        .map(|_| {
            let copy = entries.to_vec();
            let start = Instant::now();
            let built = Knowledge::from_entries(copy);
            let took = start.elapsed();
            black_box(built);
            took
        })
        .collect();
    println!(
        "knowledge build: {} entries, {:.1} MB of text; median of 5 builds {:.1} ms; resident memory: entries +{:.1} MB, then index +{:.1} MB",
        knowledge.len(),
        text as f64 / 1e6,
        median(times).as_secs_f64() * 1e3,
        entries_bytes as f64 / 1e6,
        index_bytes as f64 / 1e6
    );
}

fn search(c: &mut Criterion, entries: &[KnowledgeEntry]) {
    let mut knowledge = Knowledge::from_entries(entries.to_vec());
    // A common, a middling and a rare word; three of the commonest; a prefix as typed.
    let mixed = format!("{} {} {}", word(3, ""), word(300, "ing"), word(6000, "s"));
    let common = format!("{} {} {}", word(1, ""), word(2, ""), word(3, ""));
    let typed = format!("{} {}", word(40, ""), &word(700, "")[..3]);
    for (name, query) in [("mixed", &mixed), ("common", &common), ("prefix", &typed)] {
        let hits = knowledge.search(query, None, 10);
        println!(
            "query {name} {query:?}: {} hits shown, best {:?}",
            hits.len(),
            hits.first().map(|h| (&h.name, h.score))
        );
    }
    c.bench_function("registry/search_mixed_3_words", |b| {
        b.iter(|| black_box(knowledge.search(black_box(&mixed), None, 10)))
    });
    c.bench_function("registry/search_common_3_words", |b| {
        b.iter(|| black_box(knowledge.search(black_box(&common), None, 10)))
    });
    c.bench_function("registry/search_prefix_2_words", |b| {
        b.iter(|| black_box(knowledge.search(black_box(&typed), None, 10)))
    });
    c.bench_function("registry/search_mixed_3_words_one_type", |b| {
        b.iter(|| black_box(knowledge.search(black_box(&mixed), Some(EntryType::Skill), 10)))
    });
    let mut replacement = entries[1_500].clone();
    c.bench_function("registry/upsert_replace_one_entry", |b| {
        b.iter(|| {
            replacement.version += 1;
            black_box(knowledge.upsert(replacement.clone()).unwrap())
        })
    });
}

/// The file store: 3,000 writes (each fsynced), then one load and index build.
fn file(entries: &[KnowledgeEntry]) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime();
    runtime.block_on(async {
        let store = FileKnowledgeStore::open(dir.path()).unwrap();
        let start = Instant::now();
        for entry in entries {
            store.put(entry, None).await.unwrap();
        }
        let writes = start.elapsed();
        let start = Instant::now();
        let loaded = store.load_all().await.unwrap();
        let load = start.elapsed();
        let start = Instant::now();
        let knowledge = Knowledge::from_entries(loaded);
        let index = start.elapsed();
        assert_eq!(knowledge.len(), ENTRIES);
        println!(
            "file store: {ENTRIES} puts {:.2} s ({:.2} ms each); load_all {:.0} ms; then indexing {:.0} ms",
            writes.as_secs_f64(),
            writes.as_secs_f64() * 1e3 / ENTRIES as f64,
            load.as_secs_f64() * 1e3,
            index.as_secs_f64() * 1e3
        );
    });
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    // `registry/search` selects the part and, in criterion, the benchmarks.
    let wants = |name: &str| {
        filter.is_empty()
            || filter
                .iter()
                .any(|f| name.contains(f.as_str()) || f.starts_with(name))
    };
    let entries = entries();
    if wants("build") {
        build(&entries);
    }
    if wants("registry") {
        let mut c = Criterion::default().configure_from_args();
        search(&mut c, &entries);
        c.final_summary();
    }
    if wants("file") {
        file(&entries);
    }
}
