//! What the in-process stores keep for lists of threads: every thread's place in list order
//! (newest activity first) with what the filters look at, small enough to keep for every thread,
//! also the ones the file store puts away (about 150 bytes each). A page walks about its own
//! length of places whatever the store holds, then has the store make a summary of each thread
//! on it (docs/benchmarks.md, "Lists of threads").

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use jiff::Timestamp;

use crate::ids::ThreadId;
use crate::state::thread_list::{cursor_of, read_cursor};
use crate::state::{
    ThreadKind, ThreadPage, ThreadQuery, ThreadRecord, ThreadStatus, ThreadSummary,
};
use crate::store::StoreError;

/// A thread's place in list order.
type Place = (Reverse<Timestamp>, Reverse<ThreadId>);

/// What the filters of a list look at.
#[derive(Debug)]
struct Listed {
    kind: ThreadKind,
    status: ThreadStatus,
    /// Shared by every thread of the agent.
    agent: Arc<str>,
    /// The title in lower case (a thread without one is searched by its id).
    title: Option<Box<str>>,
}

/// Every thread's place in list order.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    order: BTreeMap<Place, Listed>,
    agents: HashSet<Arc<str>>,
}

impl Listing {
    /// Puts a thread in the list, or moves it there from where it was when it changed at
    /// `before`.
    pub(crate) fn put(&mut self, before: Option<Timestamp>, record: &ThreadRecord) {
        if let Some(before) = before {
            self.order
                .remove(&(Reverse(before), Reverse(record.id.clone())));
        }
        let agent = match self.agents.get(record.agent.as_str()) {
            Some(agent) => Arc::clone(agent),
            None => {
                let agent: Arc<str> = Arc::from(record.agent.as_str());
                self.agents.insert(Arc::clone(&agent));
                agent
            }
        };
        let summary_title = ThreadSummary::title_of(record);
        self.order.insert(
            (Reverse(record.updated_at), Reverse(record.id.clone())),
            Listed {
                kind: ThreadKind::of(record),
                status: record.status,
                agent,
                title: summary_title.map(|t| t.to_lowercase().into_boxed_str()),
            },
        );
    }

    /// A page of the threads `query` asks for, each summed up by `summary_of` (the store's
    /// record of it); an error names a cursor this list did not make.
    pub(crate) fn page(
        &self,
        query: &ThreadQuery,
        mut summary_of: impl FnMut(&ThreadId) -> Result<Option<ThreadSummary>, StoreError>,
    ) -> Result<ThreadPage, StoreError> {
        let start = match &query.cursor {
            Some(cursor) => {
                let (at, id) = read_cursor(cursor).ok_or_else(|| {
                    StoreError::Corrupt(format!("`{cursor}` is not a cursor of this list"))
                })?;
                Bound::Excluded((Reverse(at), Reverse(id)))
            }
            None => Bound::Unbounded,
        };
        let limit = query.limit.clamp(1, ThreadQuery::MAX_LIMIT);
        let search = query.title.as_ref().map(|t| t.to_lowercase());
        let on_page: Vec<&ThreadId> = self
            .order
            .range((start, Bound::Unbounded))
            // Newest first: a time filter ends the walk at the first older thread.
            .take_while(|((Reverse(at), _), _)| {
                query.updated_since.is_none_or(|since| *at >= since)
            })
            .filter(|((_, Reverse(id)), listed)| {
                (!query.roots || listed.kind.is_root())
                    && query.kind.is_none_or(|k| k == listed.kind)
                    && query.status.is_none_or(|s| s == listed.status)
                    && query.agent.as_deref().is_none_or(|a| a == &*listed.agent)
                    && search.as_deref().is_none_or(|q| match &listed.title {
                        Some(title) => title.contains(q),
                        None => id.as_str().to_lowercase().contains(q),
                    })
            })
            .map(|((_, Reverse(id)), _)| id)
            .take(limit + 1)
            .collect();
        let more = on_page.len() > limit;
        let mut threads = Vec::with_capacity(limit);
        for id in on_page.into_iter().take(limit) {
            if let Some(summary) = summary_of(id)? {
                threads.push(summary);
            }
        }
        Ok(ThreadPage {
            next: if more {
                threads.last().map(cursor_of)
            } else {
                None
            },
            threads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::thread_list::tests::record;
    use crate::state::ParentLink;

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
        child.lineage = vec![ThreadId::new("a").unwrap(), ThreadId::new("a-1").unwrap()];
        records.push(child);
        records[2].status = ThreadStatus::Closed;
        records[3].agent = "other".into();
        let mut listing = Listing::default();
        for record in &records {
            listing.put(None, record);
        }
        let summary_of =
            |id: &ThreadId| Ok(records.iter().find(|r| &r.id == id).map(ThreadSummary::of));
        let page = |query: ThreadQuery| listing.page(&query, summary_of).unwrap();

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
            .page(
                &ThreadQuery {
                    cursor: Some("not-a-cursor".into()),
                    limit: 10,
                    ..ThreadQuery::default()
                },
                summary_of
            )
            .is_err());
    }

    #[test]
    fn a_thread_that_changes_moves_to_the_top_once() {
        let mut listing = Listing::default();
        let mut a = record("a", 1, None);
        let b = record("b", 2, None);
        listing.put(None, &a);
        listing.put(None, &b);
        let before = a.updated_at;
        a.updated_at = Timestamp::from_second(3).unwrap();
        listing.put(Some(before), &a);
        let records = [a, b];
        let all = listing
            .page(
                &ThreadQuery {
                    limit: 10,
                    ..ThreadQuery::default()
                },
                |id| Ok(records.iter().find(|r| &r.id == id).map(ThreadSummary::of)),
            )
            .unwrap();
        assert_eq!(ids(&all), ["a", "b"]);
    }
}
