//! What the in-process stores keep for lists of threads: every thread's summary, and the
//! threads in list order (newest activity first), so a page costs about its own length to
//! read, whatever the store holds (docs/benchmarks.md, "Lists of threads").

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use jiff::Timestamp;

use crate::ids::ThreadId;
use crate::state::summary::{cursor_of, read_cursor};
use crate::state::{ThreadPage, ThreadQuery, ThreadSummary};

/// A thread's place in list order.
type Place = (Reverse<Timestamp>, Reverse<ThreadId>);

fn place(summary: &ThreadSummary) -> Place {
    (Reverse(summary.updated_at), Reverse(summary.id.clone()))
}

/// Every thread's summary, in list order (each kept once, under its place).
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// When each thread last changed: where its summary is in `order`.
    changed: HashMap<ThreadId, Timestamp>,
    order: BTreeMap<Place, ThreadSummary>,
}

impl Listing {
    /// Puts (or moves) a thread in the list.
    pub(crate) fn put(&mut self, summary: ThreadSummary) {
        if let Some(old) = self.changed.insert(summary.id.clone(), summary.updated_at) {
            self.order
                .remove(&(Reverse(old), Reverse(summary.id.clone())));
        }
        self.order.insert(place(&summary), summary);
    }

    /// A page of the threads `query` asks for; an error names a cursor this list did not make.
    pub(crate) fn page(&self, query: &ThreadQuery) -> Result<ThreadPage, String> {
        let start = match &query.cursor {
            Some(cursor) => {
                let (at, id) = read_cursor(cursor)
                    .ok_or_else(|| format!("`{cursor}` is not a cursor of this list"))?;
                Bound::Excluded((Reverse(at), Reverse(id)))
            }
            None => Bound::Unbounded,
        };
        let limit = query.limit.clamp(1, ThreadQuery::MAX_LIMIT);
        let mut found: Vec<&ThreadSummary> = self
            .order
            .range((start, Bound::Unbounded))
            // Newest first: a time filter ends the walk at the first older thread.
            .take_while(|((Reverse(at), _), _)| {
                query.updated_since.is_none_or(|since| *at >= since)
            })
            .map(|(_, summary)| summary)
            .filter(|summary| query.admits(summary))
            .take(limit + 1)
            .collect();
        let more = found.len() > limit;
        found.truncate(limit);
        Ok(ThreadPage {
            next: if more {
                found.last().map(|s| cursor_of(s))
            } else {
                None
            },
            threads: found.into_iter().cloned().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ParentLink, ThreadKind, ThreadRecord, ThreadStatus};

    fn record(id: &str, at: i64, title: Option<&str>) -> ThreadRecord {
        let mut r = ThreadRecord::new(
            ThreadId::new(id).unwrap(),
            "helper",
            None,
            Timestamp::from_second(at).unwrap(),
        );
        r.title = title.map(str::to_owned);
        r
    }

    fn ids(page: &ThreadPage) -> Vec<&str> {
        page.threads.iter().map(|s| s.id.as_str()).collect()
    }

    #[test]
    fn a_list_pages_newest_first_with_each_thread_once_and_filters_as_asked() {
        let mut records = vec![
            record("a", 10, Some("Launch party")),
            record("b", 30, None),
            record("c", 20, Some("Budget review")),
            record("d", 30, Some("launch checklist")),
        ];
        let mut child = record("a-1", 40, None);
        child.parent = Some(ParentLink {
            thread_id: ThreadId::new("a").unwrap(),
            call_id: crate::ids::CallId::new("spawn").unwrap(),
            tool: "spawn_thread".into(),
            args: serde_json::json!({}),
            fork_at: 0,
            summary: None,
        });
        child.stack = vec![ThreadId::new("a").unwrap(), ThreadId::new("a-1").unwrap()];
        records.push(child);
        records[2].status = ThreadStatus::Closed;
        records[3].agent = "other".into();
        let mut listing = Listing::default();
        for record in &records {
            listing.put(ThreadSummary::of(record));
        }
        let page = |query: ThreadQuery| listing.page(&query).unwrap();

        // Newest first; at the same instant the greater id first. Two at a time, each once.
        let mut query = ThreadQuery {
            limit: 2,
            ..ThreadQuery::default()
        };
        let mut seen = Vec::new();
        loop {
            let p = page(query.clone());
            seen.extend(ids(&p).into_iter().map(str::to_owned));
            match p.next {
                Some(next) => query.cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(seen, ["a-1", "d", "b", "c", "a"]);

        let roots = page(ThreadQuery {
            roots: true,
            limit: 10,
            ..ThreadQuery::default()
        });
        assert_eq!(ids(&roots), ["d", "b", "c", "a"]);
        assert_eq!(roots.next, None);
        let children = page(ThreadQuery {
            kind: Some(ThreadKind::Child),
            limit: 10,
            ..ThreadQuery::default()
        });
        assert_eq!(ids(&children), ["a-1"]);
        assert_eq!(children.threads[0].root.as_str(), "a");
        let launch = page(ThreadQuery {
            title: Some("LAUNCH".into()),
            limit: 10,
            ..ThreadQuery::default()
        });
        assert_eq!(ids(&launch), ["d", "a"]);
        // Without a title, the id is searched ("b"; "c" has a `b` in its title).
        let by_id = page(ThreadQuery {
            title: Some("b".into()),
            roots: true,
            limit: 10,
            ..ThreadQuery::default()
        });
        assert_eq!(ids(&by_id), ["b", "c"]);
        let open_helpers = page(ThreadQuery {
            status: Some(ThreadStatus::Open),
            agent: Some("helper".into()),
            roots: true,
            limit: 10,
            ..ThreadQuery::default()
        });
        assert_eq!(ids(&open_helpers), ["b", "a"]);
        let recent = page(ThreadQuery {
            updated_since: Some(Timestamp::from_second(30).unwrap()),
            limit: 10,
            ..ThreadQuery::default()
        });
        assert_eq!(ids(&recent), ["a-1", "d", "b"]);
        assert!(listing
            .page(&ThreadQuery {
                cursor: Some("not-a-cursor".into()),
                limit: 10,
                ..ThreadQuery::default()
            })
            .is_err());
    }

    #[test]
    fn a_thread_that_changes_moves_to_the_top_once() {
        let mut listing = Listing::default();
        let mut a = record("a", 1, None);
        listing.put(ThreadSummary::of(&a));
        listing.put(ThreadSummary::of(&record("b", 2, None)));
        a.updated_at = Timestamp::from_second(3).unwrap();
        listing.put(ThreadSummary::of(&a));
        let all = listing
            .page(&ThreadQuery {
                limit: 10,
                ..ThreadQuery::default()
            })
            .unwrap();
        assert_eq!(ids(&all), ["a", "b"]);
    }
}
