//! `GET /threads/{id}/events`: a thread's output events as Server-Sent Events, resumable.
//!
//! Every event a thread keeps carries its number in the thread ([`OutputEvent::seq`]); its SSE
//! `id` is that number once the event is kept, and `N.B.D` for one its running slice showed
//! before committing it (see `events/position.rs`: a resume from it checks that the client's
//! copies are the ones kept). A client that saw up to an id comes back with `Last-Event-ID` (a browser's
//! `EventSource` does so by itself) or `?after=`, and gets exactly what it missed: first what
//! the store kept after it ([`ThreadStore::events_after`](infinity_agent_core::store::ThreadStore::events_after)), then what the thread's running
//! slice showed and has not committed yet, then the reply the model is streaming so far (one
//! `assistant_delta`), then live events, each once (numbers already sent are skipped; a gap in
//! the live numbers is filled from the store).
//!
//! A client that gives no position gets the thread as it stands: its views, its open questions
//! and the calls of client tools that wait for their application, then `attached`
//! (`{"after": N}`, SSE id `N`), then everything after `N` as above. `GET
//! /threads/{id}/history` answers with the same position in its `Last-Event-ID` header, so a
//! client that loads the history and then streams from there sees each event once.
//!
//! When the events after the position are no longer all kept (a stack keeps them for its
//! event retention, 7 days by default), or the position is past anything the thread showed,
//! the stream says `reset` (`{"after": N}`, SSE id `N`: reload the history, the stream goes on
//! from `N`). A host that cannot follow live events (the stack's API function) ends each stream
//! with `reconnect`, and the client's next request resumes where it ended.
//!
//! Events shown live only carry no id: the streamed text (`assistant_delta`,
//! `assistant_restarted`) and a host's own errors. `withdrawn` (`{"after": N}`: the events after
//! `N` the client has are not kept, by a failed slice, or by one that ran again after a crash)
//! has the SSE id `N`, so a reconnect resumes from there.

mod position;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{Following, Live};
use position::{Chain, Resume};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::{error, ApiError, Path, Query, Shared};

/// How soon a client of a host without live events reconnects to its event stream.
pub const RECONNECT: Duration = Duration::from_secs(2);

/// How many kept events one read of the store brings.
const PAGE: usize = 200;

/// `?after=N`: the position to resume after, for clients that cannot set `Last-Event-ID` (the
/// query may carry the page's `access_token` too).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Position {
    /// The SSE id of the last event the client has (as `Last-Event-ID`, which wins): a number,
    /// or `N.B.D` for an event shown before it was kept.
    #[serde(default)]
    #[schemars(
        with = "Option<String>",
        regex(pattern = r"^[0-9]+(\.[0-9]+\.[0-9a-f]{16})?$")
    )]
    after: Option<String>,
    /// The token, for clients that cannot set headers (read by the guard; in the document as
    /// a security scheme).
    #[serde(default, rename = "access_token")]
    #[schemars(skip)]
    _access_token: Option<String>,
}

/// The stream's own events, beside the thread's: where it stands, and when to come back.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Notice {
    /// Without a position: the thread's views and open questions were sent, and the events
    /// after `after` follow (the SSE id is `after`).
    Attached {
        /// The thread.
        thread_id: ThreadId,
        /// The number of the last event before the ones that follow.
        after: u64,
    },
    /// The events after the position asked for are no longer all kept, or the position is
    /// past anything the thread showed: reload the history; the stream goes on after `after`.
    Reset {
        /// The thread.
        thread_id: ThreadId,
        /// The number of the last event before the ones that follow.
        after: u64,
    },
    /// The host cannot follow live events (the stack's API function): the stream ends here;
    /// reconnect with the last id after `after_ms`.
    Reconnect {
        /// How long to wait, in milliseconds.
        after_ms: u64,
    },
}

/// The `data` of an event of the stream: one of the thread's events, or the stream's own.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum StreamData {
    /// One of the thread's events (`type` says which, and is the SSE event's name).
    Output(OutputEvent),
    /// The stream's own.
    Notice(Notice),
}

/// The event as SSE: its type, its JSON, and `id` when it has one.
fn sse_with(event: &OutputEvent, data: String, id: Option<String>) -> Event {
    let sent = Event::default().event(event.kind.kind()).data(data);
    match id {
        Some(id) => sent.id(id),
        None => sent,
    }
}

/// An event as SSE with its own id: its number, or for `withdrawn` the number it goes back to.
fn sse(event: &OutputEvent) -> Event {
    let id = match (event.seq, &event.kind) {
        (Some(seq), _) => Some(seq),
        (None, OutputKind::Withdrawn { after }) => Some(*after),
        _ => None,
    };
    let data = serde_json::to_string(event).unwrap_or_default();
    sse_with(event, data, id.map(|id| id.to_string()))
}

/// `withdrawn` for thread `id`: forget what you have after `after`.
fn withdrawn(id: &ThreadId, after: u64) -> Event {
    sse(&OutputEvent::new(
        id.clone(),
        jiff::Timestamp::now(),
        OutputKind::Withdrawn { after },
    ))
}

/// A marker of the stream's own (`attached`, `reset`): where it stands, as data and id.
fn marker(kind: &str, id: &ThreadId, after: u64) -> Event {
    let thread_id = id.clone();
    let notice = if kind == "reset" {
        Notice::Reset { thread_id, after }
    } else {
        Notice::Attached { thread_id, after }
    };
    Event::default()
        .event(kind)
        .id(after.to_string())
        .data(serde_json::to_string(&notice).unwrap_or_default())
}

async fn events(
    State(system): State<Shared>,
    Path(id): Path<String>,
    Query(query): Query<Position>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let id = ThreadId::new(&id).map_err(|e| error(StatusCode::BAD_REQUEST, e))?;
    let after = match headers.get("last-event-id") {
        Some(value) => Some(Resume::parse(
            value.to_str().unwrap_or_default(),
            "`Last-Event-ID`",
        )?),
        None => match &query.after {
            Some(raw) => Some(Resume::parse(raw, "`after`")?),
            None => None,
        },
    };
    // Follow first, so nothing falls between what is read now and the live events.
    let following = system.follow(&id);
    let record = system
        .threads()
        .load_record(&id)
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?;
    let kept = record.as_ref().map_or(0, |r| r.last_event_seq);
    let shown_up_to = following
        .as_ref()
        .and_then(|f| f.shown.last())
        .and_then(|e| e.seq)
        .unwrap_or(0);
    let mut head = VecDeque::new();
    let mut chain = None;
    let frontier = kept.max(shown_up_to);
    let last = match after {
        // Shown before it was kept: on from there if the client's copies are the ones kept.
        Some(Resume::Shown { seq, base, digest }) if base <= frontier => {
            let shown = following.as_ref().map_or(&[][..], |f| f.shown.as_slice());
            match shown_events(system.as_ref(), &id, base, seq, shown).await? {
                // What the client has is what is kept (or still shown): on from there.
                Some((theirs, still_shown)) if theirs.digest == digest => {
                    chain = still_shown.then_some(theirs);
                    seq
                }
                // Not what is kept: forget it, and have it again.
                _ => {
                    head.push_back(withdrawn(&id, base));
                    base
                }
            }
        }
        // Past anything the thread showed: that client's numbers are not this thread's.
        Some(after) if after.seq() > frontier => {
            head.push_back(marker("reset", &id, kept));
            kept
        }
        Some(after) => after.seq(),
        None => {
            if let Some(record) = &record {
                for (view_type, content) in &record.views {
                    head.push_back(sse(&OutputEvent::new(
                        id.clone(),
                        record.updated_at,
                        OutputKind::ViewUpdated {
                            view_type: view_type.clone(),
                            content: content.clone(),
                        },
                    )));
                }
                for choice in &record.open_choices {
                    head.push_back(sse(&OutputEvent::new(
                        id.clone(),
                        record.updated_at,
                        OutputKind::ChoiceRequested {
                            call_id: choice.call_id.clone(),
                            prompt: choice.prompt.clone(),
                            choices: choice.choices.clone(),
                            default: choice.default,
                        },
                    )));
                }
                // A client tool's calls still waiting, so that an application that attaches
                // (again, after a crash) runs what it owes.
                for kind in record
                    .pending_calls
                    .iter()
                    .filter_map(infinity_agent_core::tools::client::call_event)
                {
                    head.push_back(sse(&OutputEvent::new(id.clone(), record.updated_at, kind)));
                }
            }
            head.push_back(marker("attached", &id, kept));
            kept
        }
    };
    let live = following.is_some();
    let stream = Stream {
        system,
        id,
        last,
        chain,
        kept,
        first_page: true,
        head,
        stage: Stage::Kept,
        following,
    };
    let events = futures_util::stream::unfold(stream, |mut s| async move {
        s.next().await.map(|event| (Ok::<_, Infallible>(event), s))
    });
    let sse = Sse::new(events);
    Ok(if live {
        sse.keep_alive(KeepAlive::default()).into_response()
    } else {
        sse.into_response()
    })
}

/// Where the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Reading what the store kept.
    Kept,
    /// Handing out what the running slice showed, and its reply so far.
    Shown,
    /// Following live events.
    Live,
    /// Ended (a host without live events: after `reconnect`).
    Done,
}

/// One client's stream: see the module docs for the order of what it sends.
struct Stream {
    system: Shared,
    id: ThreadId,
    /// The last numbered event sent.
    last: u64,
    /// The events sent past the last kept one, while there are any (their ids carry it).
    chain: Option<Chain>,
    /// How many events the record counted when the stream began.
    kept: u64,
    first_page: bool,
    /// Events to send before anything else.
    head: VecDeque<Event>,
    stage: Stage,
    following: Option<Following>,
}

impl Stream {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.head.pop_front() {
                return Some(event);
            }
            match self.stage {
                Stage::Kept => {
                    let done = self.read_kept(None).await;
                    if done {
                        self.stage = Stage::Shown;
                    }
                }
                Stage::Shown => {
                    self.stage = Stage::Live;
                    match self.following.as_mut() {
                        Some(following) => {
                            let shown = std::mem::take(&mut following.shown);
                            let partial = std::mem::take(&mut following.partial);
                            for event in shown {
                                self.numbered(event, false);
                            }
                            if !partial.is_empty() {
                                self.head.push_back(sse(&OutputEvent::new(
                                    self.id.clone(),
                                    jiff::Timestamp::now(),
                                    OutputKind::AssistantDelta { text: partial },
                                )));
                            }
                        }
                        None => {
                            self.stage = Stage::Done;
                            self.head.push_back(
                                Event::default()
                                    .event("reconnect")
                                    .data(
                                        serde_json::to_string(&Notice::Reconnect {
                                            after_ms: RECONNECT.as_millis() as u64,
                                        })
                                        .unwrap_or_default(),
                                    )
                                    .retry(RECONNECT),
                            );
                        }
                    }
                }
                Stage::Live => {
                    let following = self.following.as_mut()?;
                    let live = following.live.recv().await?;
                    if live.thread_id() != &self.id {
                        continue;
                    }
                    let (event, kept) = match live {
                        Live::Shown(event) => (event, false),
                        Live::Kept(event) => (event, true),
                        // What the running slice showed holds now.
                        Live::Committed(_) => {
                            self.chain = None;
                            continue;
                        }
                    };
                    match (event.seq, &event.kind) {
                        (Some(seq), _) if seq > self.last + 1 => {
                            // Numbers were skipped (events that reached this host out of order):
                            // the store has them, as they were committed before being sent.
                            while self.last + 1 < seq {
                                let before = self.last;
                                self.read_kept(Some(seq - 1)).await;
                                if self.last == before {
                                    break;
                                }
                            }
                            self.numbered(event, kept);
                        }
                        (Some(_), _) => self.numbered(event, kept),
                        (None, OutputKind::Withdrawn { after }) => {
                            self.last = (*after).min(self.last);
                            self.chain = None;
                            self.head.push_back(sse(&event));
                        }
                        (None, _) => self.head.push_back(sse(&event)),
                    }
                }
                Stage::Done => return None,
            }
        }
    }

    /// Queues a numbered event unless it was sent already: with its number as its id when it
    /// is `kept`, else with the chain of the events sent since the last kept one.
    fn numbered(&mut self, event: OutputEvent, kept: bool) {
        let Some(seq) = event.seq else { return };
        if seq <= self.last {
            return;
        }
        self.last = seq;
        let data = serde_json::to_string(&event).unwrap_or_default();
        let id = if kept {
            self.chain = None;
            seq.to_string()
        } else {
            let chain = self.chain.get_or_insert(Chain::after(seq - 1));
            chain.add(&data);
            chain.id(seq)
        };
        self.head.push_back(sse_with(&event, data, Some(id)));
    }

    /// Queues one page of the kept events after the last one sent (up to `upto`, when given);
    /// true when no more are kept. A first page that does not begin right after the position
    /// while the thread counted more says `reset`.
    async fn read_kept(&mut self, upto: Option<u64>) -> bool {
        let page = match self
            .system
            .threads()
            .events_after(&self.id, self.last, PAGE)
            .await
        {
            Ok(page) => page,
            Err(err) => {
                tracing::warn!(thread = %self.id, %err, "could not read the thread's kept events");
                self.head.push_back(sse(&OutputEvent::new(
                    self.id.clone(),
                    jiff::Timestamp::now(),
                    OutputKind::Error {
                        text: format!("the kept events could not be read: {err}"),
                    },
                )));
                return true;
            }
        };
        let complete = page.len() < PAGE;
        if std::mem::take(&mut self.first_page) && upto.is_none() && self.kept > self.last {
            let first = page.first().and_then(|e| e.seq);
            if first != Some(self.last + 1) {
                // Not kept any more: say so, and go on from what is.
                let from = first.map_or(self.kept, |f| f - 1);
                self.head.push_back(marker("reset", &self.id, from));
                self.last = from;
            }
        }
        for event in page {
            if upto.is_some_and(|upto| event.seq.is_some_and(|s| s > upto)) {
                return true;
            }
            self.numbered(event, true);
        }
        complete
    }
}

/// The events after `base` up to `upto` as the thread has them now, kept or still shown by its
/// running slice (`shown`), as a [`Chain`], and whether any is only shown; `None` when they are
/// not all there (the client's were not kept, or are not this thread's).
async fn shown_events(
    system: &dyn infinity_agent_core::runtime::Front,
    id: &ThreadId,
    base: u64,
    upto: u64,
    shown: &[OutputEvent],
) -> Result<Option<(Chain, bool)>, ApiError> {
    let mut events = Vec::new();
    let mut last = base;
    while last < upto {
        let page = system
            .threads()
            .events_after(id, last, PAGE.min((upto - last) as usize))
            .await
            .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, e))?;
        let Some(end) = page.last().and_then(|e| e.seq) else {
            break;
        };
        if end <= last {
            break;
        }
        last = end;
        events.extend(
            page.into_iter()
                .take_while(|e| e.seq.is_some_and(|s| s <= upto)),
        );
    }
    let kept = events.len();
    let kept_upto = events.last().and_then(|e| e.seq).unwrap_or(base);
    events.extend(
        shown
            .iter()
            .filter(|e| e.seq.is_some_and(|s| s > kept_upto && s <= upto))
            .cloned(),
    );
    let still_shown = events.len() > kept;
    Ok(Chain::over(base, upto, &events).map(|chain| (chain, still_shown)))
}

/// The event stream's route, on `host`.
pub fn routes(host: Shared) -> axum::Router {
    axum::Router::new()
        .route("/threads/{id}/events", axum::routing::get(events))
        .with_state(host)
}
