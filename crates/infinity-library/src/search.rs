//! Ranked full-text search over a few thousand documents: [`TextIndex`], kept up to date one
//! document at a time, knowing nothing of what it indexes (knowledge entries, tool catalogs).
//!
//! **Words.** A text is cut into words at every character that is not a letter or a digit
//! (Unicode-aware: `Straße`, `данные` and `k8s` are words; a run of CJK characters is one word).
//! Words are lowercased; a short list of English function words (`the`, `and`, `of`, ...) is
//! dropped, and so is a word of more than 64 characters (an encoded blob, not a word). What is
//! left goes through [`stem`], a light suffix stemmer, so `deploying`, `deployed` and `deploys`
//! are all the term `deploy`. [`tokenize`] does all of this and keeps each word's place in the
//! text (for snippets).
//!
//! **Ranking: BM25F.** Documents are made of fields with weights the caller chooses (a name
//! counting three times a body, say). For each query term a document gets one pseudo-frequency,
//! the sum over its fields of `weight × count / (1 − b + b × field length / average length of
//! that field)`, and one BM25 score from it, `idf × tf × (k1 + 1) / (k1 + tf)`, with k1 = 1.2,
//! b = 0.75 and `idf = ln(1 + (N − df + 0.5) / (df + 0.5))` (never negative, so a term found
//! in most documents still counts a little). A document's score is the sum over the query's
//! terms. Why BM25F rather than a BM25 per field, summed: summing saturates each field apart, so
//! a term found once in each of four fields scores about four times a term found once, however
//! often it occurs in any one field; BM25F saturates once over the weighted counts, so weights
//! say how much a field matters without letting a word repeated across fields run away, and each
//! field is still measured against the average length of its own kind (a 5-word name is long
//! for a name, short for a body). That average is over the documents that have the field, as
//! Lucene takes it: a field most documents leave empty (tags, say) would otherwise have a tiny
//! average, and a document using it would be punished for it.
//!
//! **Prefixes.** The query's last word, when it has at least three characters and is not a stop
//! word, also matches the indexed terms it begins (`kube` finds `kubernetes`, so a query typed
//! so far works), at half the score a whole-word match would get; a document gets the better of
//! the two for that word, not both.
//!
//! **Ties.** Results are sorted by score, then by key, so equal scores come out in the same order
//! every time.
//!
//! ```
//! use infinity_library::search::TextIndex;
//!
//! // Two fields: a title counting three times, a body once.
//! let mut index = TextIndex::new([3.0, 1.0]);
//! index.upsert("a", ["Deploy checklist", "Steps before a release."]);
//! index.upsert("b", ["Release notes", "What we deployed this week."]);
//! let hits = index.search("deploying", 10, |_| true);
//! assert_eq!(hits[0].0, "a"); // in the title: ranked above the body match
//! assert_eq!(hits.len(), 2);
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::{Bound, Range};
use std::sync::Arc;

/// BM25's saturation: how fast further occurrences of a term stop adding to a score.
pub const K1: f32 = 1.2;
/// BM25's length normalisation: 0 ignores a field's length, 1 divides by it outright.
pub const B: f32 = 0.75;
/// A longer word is not indexed (an encoded blob, a hash).
const MAX_WORD_CHARS: usize = 64;
/// The shortest last word of a query that also matches as a prefix.
const MIN_PREFIX_CHARS: usize = 3;
/// What a prefix match scores, against a whole-word match.
const PREFIX_DISCOUNT: f32 = 0.5;
/// The most indexed terms one prefix expands to (in alphabetical order), bounding a search's
/// cost whatever the vocabulary.
const MAX_PREFIX_TERMS: usize = 256;

/// Words that carry no meaning for a search, sorted (looked up by binary search).
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have", "he",
    "her", "his", "i", "if", "in", "into", "is", "it", "its", "of", "on", "or", "our", "s", "she",
    "so", "t", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this",
    "to", "was", "we", "were", "what", "when", "where", "which", "who", "will", "with", "you",
    "your",
];

/// The length of the longest stop word, in bytes (a longer word is not looked up).
const LONGEST_STOP_WORD: usize = 5;

/// A word of a text as it is indexed: where it stands in the text and the term it became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// Byte range of the word in the text.
    pub span: Range<usize>,
    /// The word lowercased and stemmed.
    pub term: String,
}

/// The indexed words of `text`, in order: lowercased, stop words and overlong words left out,
/// stemmed (see the module docs).
pub fn tokenize(text: &str) -> impl Iterator<Item = Token> + '_ {
    let mut words = Words::new(text);
    std::iter::from_fn(move || loop {
        let span = words.advance()?;
        if indexable(&words.word) {
            return Some(Token {
                span,
                term: stem(&words.word),
            });
        }
    })
}

/// [`tokenize`] without an allocation per word: calls `f` with each term.
fn each_term(text: &str, mut f: impl FnMut(&str)) {
    let mut words = Words::new(text);
    let mut term = String::new();
    while words.advance().is_some() {
        if indexable(&words.word) {
            stem_into(&words.word, &mut term);
            f(&term);
        }
    }
}

fn indexable(word: &str) -> bool {
    (word.len() > LONGEST_STOP_WORD || STOP_WORDS.binary_search(&word).is_err())
        && (word.len() <= MAX_WORD_CHARS || word.chars().count() <= MAX_WORD_CHARS)
}

/// The words of a text, each lowercased into a buffer that is reused.
struct Words<'a> {
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    /// The current word, lowercased.
    word: String,
}

impl<'a> Words<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            chars: text.char_indices().peekable(),
            word: String::new(),
        }
    }

    /// Moves to the next word and returns its byte range in the text.
    fn advance(&mut self) -> Option<Range<usize>> {
        let (start, first) = self.chars.by_ref().find(|(_, c)| c.is_alphanumeric())?;
        self.word.clear();
        let mut end = start;
        let mut next = Some((start, first));
        while let Some((at, c)) = next {
            if c.is_ascii() {
                self.word.push(c.to_ascii_lowercase());
            } else {
                self.word.extend(c.to_lowercase());
            }
            end = at + c.len_utf8();
            next = self.chars.next_if(|(_, c)| c.is_alphanumeric());
        }
        Some(start..end)
    }
}

/// Folds the regular English inflections of a lowercase word to one term, deterministically:
///
/// 1. plurals: `-ies` → `-y` (`policies`), else a final `-s` goes unless the word ends in `-ss`,
///    `-us`, `-sis` or `-xis` (`status`, `analysis` stay);
/// 2. up to twice, `-ied` → `-y`, `-eed` → `-ee` (words of five letters or more: `agreed`),
///    else `-ing` or `-ed` goes when at least two letters with a vowel remain (`deploying`,
///    `configured`; `ring`, `shed` stay), and a doubled final consonant is halved after it
///    (`running` → `run`);
/// 3. a final `-e` goes (`create`, `created` and `creating` all become `creat`);
/// 4. a doubled final consonant other than `l`, `s` or `z` is halved (`staff` and `staffing`
///    both become `staf`).
///
/// Words shorter than three letters and words with anything but the letters a-z are left as
/// they are (`k8s`, `straße`: the rules are English). Irregular forms (`ran`, `indices`) are not folded. The terms are not always words
/// (`creat`): they only have to agree between a document and a query.
pub fn stem(word: &str) -> String {
    let mut term = String::new();
    stem_into(word, &mut term);
    term
}

/// [`stem`] into a buffer.
fn stem_into(word: &str, w: &mut String) {
    w.clear();
    w.push_str(word);
    if w.len() < 3 || !w.bytes().all(|b| b.is_ascii_lowercase()) {
        return;
    }
    fold_plural(w);
    for _ in 0..2 {
        if !strip_verb_ending(w) {
            break;
        }
        halve_double_consonant(w);
    }
    if w.ends_with('e') && w.len() >= 3 {
        w.pop();
    }
    halve_double_consonant(w);
}

// The rules below see ASCII words only: a length in bytes is one in letters.

fn fold_plural(w: &mut String) {
    let len = w.len();
    if len >= 5 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if len >= 4
        && w.ends_with('s')
        && !["ss", "us", "sis", "xis"]
            .iter()
            .any(|end| w.ends_with(end))
    {
        w.pop();
    }
}

/// Strips one `-ied`, `-eed`, `-ing` or `-ed`; true if it did.
fn strip_verb_ending(w: &mut String) -> bool {
    let len = w.len();
    if len >= 5 && w.ends_with("ied") {
        w.truncate(w.len() - 3);
        w.push('y');
        return true;
    }
    if w.ends_with("eed") {
        if len >= 5 {
            w.pop();
            return true;
        }
        return false;
    }
    for ending in ["ing", "ed"] {
        if let Some(base) = w.strip_suffix(ending) {
            if base.len() >= 2 && base.chars().any(is_vowel) {
                w.truncate(base.len());
                return true;
            }
            return false;
        }
    }
    false
}

fn is_vowel(c: char) -> bool {
    matches!(c, 'a' | 'e' | 'i' | 'o' | 'u' | 'y')
}

fn halve_double_consonant(w: &mut String) {
    let mut last = w.chars().rev();
    let (Some(a), Some(b)) = (last.next(), last.next()) else {
        return;
    };
    let consonant = !is_vowel(a) && !matches!(a, 'l' | 's' | 'z');
    if a == b && consonant && w.len() >= 4 {
        w.pop();
    }
}

/// A query, analysed as documents are: its distinct terms, and the prefixes its last word also
/// matches as (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    terms: Vec<String>,
    /// The index in `terms` of the last word's term, and the prefixes it matches as (the word
    /// as typed and its stem, each of at least three characters).
    prefix: Option<(usize, Vec<String>)>,
}

impl Query {
    /// Analyses a query.
    pub fn parse(text: &str) -> Self {
        let mut query = Query::default();
        let mut last = None;
        let mut words = Words::new(text);
        while words.advance().is_some() {
            let word = &words.word;
            if !indexable(word) {
                last = None;
                continue;
            }
            let term = stem(word);
            let at = match query.terms.iter().position(|t| *t == term) {
                Some(at) => at,
                None => {
                    query.terms.push(term.clone());
                    query.terms.len() - 1
                }
            };
            last = Some((at, word.clone(), term));
        }
        if let Some((at, word, term)) = last {
            let mut prefixes: Vec<String> = [word, term]
                .into_iter()
                .filter(|p| p.chars().count() >= MIN_PREFIX_CHARS)
                .collect();
            prefixes.dedup();
            if !prefixes.is_empty() {
                query.prefix = Some((at, prefixes));
            }
        }
        query
    }

    /// True when nothing is left to search for (an empty query, or stop words only).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The distinct terms, in the order the query has them.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    /// True when an indexed term (a [`Token::term`]) matches the query: it is one of the
    /// query's terms, or it begins with the last word's prefix.
    pub fn matches(&self, term: &str) -> bool {
        self.terms.iter().any(|t| t == term)
            || self
                .prefix
                .as_ref()
                .is_some_and(|(_, prefixes)| prefixes.iter().any(|p| term.starts_with(p.as_str())))
    }
}

type TermId = u32;
type DocId = u32;

#[derive(Debug, Clone)]
struct Posting<const F: usize> {
    doc: DocId,
    counts: [u32; F],
}

#[derive(Debug, Clone)]
struct Term<const F: usize> {
    text: Arc<str>,
    /// Sorted by document.
    postings: Vec<Posting<F>>,
}

#[derive(Debug, Clone)]
struct Doc<K, const F: usize> {
    key: K,
    lengths: [u32; F],
    terms: Vec<TermId>,
}

/// An inverted index of documents with `F` weighted fields, ranked by BM25F (see the module
/// docs). Documents are added, replaced and removed one at a time; nothing is rebuilt.
///
/// Memory is about 4 × (F + 2) bytes per distinct term of each document, plus the vocabulary;
/// ids of removed documents and terms are reused.
#[derive(Debug, Clone)]
pub struct TextIndex<K, const F: usize> {
    weights: [f32; F],
    /// Term ids by text.
    vocabulary: HashMap<Arc<str>, TermId>,
    /// The same terms in order, for prefix matches.
    sorted_terms: BTreeSet<Arc<str>>,
    /// By term id; `None`: free for reuse.
    terms: Vec<Option<Term<F>>>,
    free_terms: Vec<TermId>,
    /// By document id; `None`: free for reuse.
    docs: Vec<Option<Doc<K, F>>>,
    free_docs: Vec<DocId>,
    ids: BTreeMap<K, DocId>,
    /// The sum of each field's length (in indexed words) over the documents.
    total_lengths: [u64; F],
    /// How many documents have each field (at least one indexed word in it).
    field_docs: [u64; F],
}

impl<K: Ord + Clone, const F: usize> TextIndex<K, F> {
    /// An empty index whose documents have `F` fields weighted by `weights` (a negative or NaN
    /// weight counts as 0: the field is indexed but never scores).
    pub fn new(weights: [f32; F]) -> Self {
        Self {
            weights: weights.map(|w| w.max(0.0)),
            vocabulary: HashMap::new(),
            sorted_terms: BTreeSet::new(),
            terms: Vec::new(),
            free_terms: Vec::new(),
            docs: Vec::new(),
            free_docs: Vec::new(),
            ids: BTreeMap::new(),
            total_lengths: [0; F],
            field_docs: [0; F],
        }
    }

    /// How many documents it holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when it holds no document.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// True when it holds a document under `key`.
    pub fn contains_key(&self, key: &K) -> bool {
        self.ids.contains_key(key)
    }

    /// Indexes `fields` (in the order of the weights) under `key`, replacing the document it
    /// held there.
    pub fn upsert(&mut self, key: K, fields: [&str; F]) {
        let doc = match self.ids.get(&key) {
            Some(&doc) => {
                self.unindex(doc);
                doc
            }
            None => {
                let doc = match self.free_docs.pop() {
                    Some(doc) => doc,
                    None => {
                        self.docs.push(None);
                        saturating_u32(self.docs.len() - 1)
                    }
                };
                self.ids.insert(key.clone(), doc);
                doc
            }
        };
        // Every occurrence as (term, field), sorted: the runs of one term are its counts.
        let mut occurrences: Vec<(TermId, usize)> = Vec::new();
        let mut lengths = [0u32; F];
        for (field, text) in fields.iter().enumerate() {
            let before = occurrences.len();
            each_term(text, |term| occurrences.push((self.intern(term), field)));
            lengths[field] = saturating_u32(occurrences.len() - before);
        }
        occurrences.sort_unstable();
        let mut terms: Vec<TermId> = Vec::new();
        for run in occurrences.chunk_by(|a, b| a.0 == b.0) {
            let term = run[0].0;
            let mut counts = [0u32; F];
            for &(_, field) in run {
                counts[field] += 1;
            }
            if let Some(Some(entry)) = self.terms.get_mut(term as usize) {
                let posting = Posting { doc, counts };
                // New documents take new, higher ids: most postings go at the end.
                match entry.postings.last() {
                    Some(last) if last.doc > doc => {
                        let at = entry.postings.partition_point(|p| p.doc < doc);
                        entry.postings.insert(at, posting);
                    }
                    _ => entry.postings.push(posting),
                }
            }
            terms.push(term);
        }
        self.count_lengths(&lengths, true);
        if let Some(slot) = self.docs.get_mut(doc as usize) {
            *slot = Some(Doc {
                key,
                lengths,
                terms,
            });
        }
    }

    /// Removes the document under `key`; false if there was none.
    pub fn remove(&mut self, key: &K) -> bool {
        let Some(doc) = self.ids.remove(key) else {
            return false;
        };
        self.unindex(doc);
        if let Some(slot) = self.docs.get_mut(doc as usize) {
            *slot = None;
        }
        self.free_docs.push(doc);
        true
    }

    /// The documents matching `query` for which `filter` holds, best first (score, then key),
    /// at most `limit` of them, with their scores (all positive). A query with no term left
    /// once analysed (empty, or stop words only) finds nothing.
    pub fn search(&self, query: &str, limit: usize, filter: impl Fn(&K) -> bool) -> Vec<(K, f32)> {
        self.search_query(&Query::parse(query), limit, filter)
    }

    /// [`TextIndex::search`] with a query already analysed.
    pub fn search_query(
        &self,
        query: &Query,
        limit: usize,
        filter: impl Fn(&K) -> bool,
    ) -> Vec<(K, f32)> {
        if query.is_empty() || limit == 0 || self.is_empty() {
            return Vec::new();
        }
        let averages: [f32; F] = std::array::from_fn(|field| match self.field_docs[field] {
            0 => 0.0,
            docs => self.total_lengths[field] as f32 / docs as f32,
        });
        let mut totals = vec![0.0f32; self.docs.len()];
        let mut matched: Vec<DocId> = Vec::new();
        // One query term's best score per document (the whole word, or a prefix match).
        let mut best = vec![0.0f32; self.docs.len()];
        let mut touched: Vec<DocId> = Vec::new();
        for (at, text) in query.terms.iter().enumerate() {
            let exact = self.vocabulary.get(text.as_str()).map(|&t| (t, 1.0));
            let prefixed = match &query.prefix {
                Some((prefix_at, prefixes)) if *prefix_at == at => self.expand(prefixes, text),
                _ => Vec::new(),
            };
            for (term, factor) in exact.into_iter().chain(prefixed) {
                let Some(Some(term)) = self.terms.get(term as usize) else {
                    continue;
                };
                let idf = self.idf(term.postings.len());
                for posting in &term.postings {
                    let score = factor * idf * self.saturated(posting, &averages);
                    let slot = &mut best[posting.doc as usize];
                    if score > *slot {
                        if *slot == 0.0 {
                            touched.push(posting.doc);
                        }
                        *slot = score;
                    }
                }
            }
            for doc in touched.drain(..) {
                let index = doc as usize;
                if totals[index] == 0.0 {
                    matched.push(doc);
                }
                totals[index] += best[index];
                best[index] = 0.0;
            }
        }
        let key = |doc: DocId| Some(&self.docs.get(doc as usize)?.as_ref()?.key);
        let mut hits: Vec<(DocId, f32)> = matched
            .into_iter()
            .filter(|&doc| key(doc).is_some_and(&filter))
            .map(|doc| (doc, totals[doc as usize]))
            .collect();
        // Best first: by score, then by key. Only the best `limit` are sorted and cloned.
        let order = |a: &(DocId, f32), b: &(DocId, f32)| {
            b.1.total_cmp(&a.1).then_with(|| key(a.0).cmp(&key(b.0)))
        };
        if hits.len() > limit {
            hits.select_nth_unstable_by(limit - 1, order);
            hits.truncate(limit);
        }
        hits.sort_unstable_by(order);
        hits.into_iter()
            .filter_map(|(doc, score)| Some((key(doc)?.clone(), score)))
            .collect()
    }

    /// The terms other than `exact` that begin with one of `prefixes`, each with the prefix
    /// discount.
    fn expand(&self, prefixes: &[String], exact: &str) -> Vec<(TermId, f32)> {
        let mut found = BTreeSet::new();
        for prefix in prefixes {
            found.extend(
                self.sorted_terms
                    .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
                    .take_while(|text| text.starts_with(prefix.as_str()))
                    .filter(|text| ***text != *exact)
                    .take(MAX_PREFIX_TERMS)
                    .filter_map(|text| self.vocabulary.get(text).copied()),
            );
        }
        found
            .into_iter()
            .map(|term| (term, PREFIX_DISCOUNT))
            .collect()
    }

    fn idf(&self, document_frequency: usize) -> f32 {
        let n = self.len() as f32;
        let df = document_frequency as f32;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }

    /// BM25F's saturated term frequency of one posting: `tf (k1 + 1) / (k1 + tf)` over the
    /// weighted, length-normalised counts of its fields.
    fn saturated(&self, posting: &Posting<F>, averages: &[f32; F]) -> f32 {
        let Some(Some(doc)) = self.docs.get(posting.doc as usize) else {
            return 0.0;
        };
        let fields = posting.counts.iter().zip(&doc.lengths).zip(averages);
        let tf: f32 = fields
            .zip(&self.weights)
            .filter(|(((&count, _), &average), _)| count > 0 && average > 0.0)
            .map(|(((&count, &length), &average), &weight)| {
                weight * count as f32 / (1.0 - B + B * length as f32 / average)
            })
            .sum();
        tf * (K1 + 1.0) / (K1 + tf)
    }

    /// Adds a document's field lengths to the totals (`add`), or takes them out.
    fn count_lengths(&mut self, lengths: &[u32; F], add: bool) {
        let totals = self.total_lengths.iter_mut().zip(&mut self.field_docs);
        for ((total, docs), &length) in totals.zip(lengths) {
            let (length, present) = (u64::from(length), u64::from(length > 0));
            if add {
                *total += length;
                *docs += present;
            } else {
                *total -= length;
                *docs -= present;
            }
        }
    }

    /// The id of a term, added to the vocabulary if new.
    fn intern(&mut self, text: &str) -> TermId {
        if let Some(&term) = self.vocabulary.get(text) {
            return term;
        }
        let text: Arc<str> = text.into();
        let entry = Term {
            text: text.clone(),
            postings: Vec::new(),
        };
        let term = match self.free_terms.pop() {
            Some(term) => {
                if let Some(slot) = self.terms.get_mut(term as usize) {
                    *slot = Some(entry);
                }
                term
            }
            None => {
                self.terms.push(Some(entry));
                saturating_u32(self.terms.len() - 1)
            }
        };
        self.sorted_terms.insert(text.clone());
        self.vocabulary.insert(text, term);
        term
    }

    /// Takes a document's postings and lengths out of the index (its slot stays).
    fn unindex(&mut self, doc: DocId) {
        let Some(Some(entry)) = self.docs.get_mut(doc as usize) else {
            return;
        };
        let terms = std::mem::take(&mut entry.terms);
        let lengths = std::mem::replace(&mut entry.lengths, [0; F]);
        self.count_lengths(&lengths, false);
        for term in terms {
            let Some(slot) = self.terms.get_mut(term as usize) else {
                continue;
            };
            let Some(entry) = slot else {
                continue;
            };
            if let Ok(at) = entry.postings.binary_search_by_key(&doc, |p| p.doc) {
                entry.postings.remove(at);
            }
            if entry.postings.is_empty() {
                self.vocabulary.remove(&entry.text);
                self.sorted_terms.remove(&entry.text);
                *slot = None;
                self.free_terms.push(term);
            }
        }
    }
}

/// A count or a table index as a `u32`: ids and counts stay far below `u32::MAX` in the
/// collections this serves (one id per document or distinct term, one count per word of a field).
fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
