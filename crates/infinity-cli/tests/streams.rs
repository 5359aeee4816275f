//! Event streams that resume (`GET /threads/{id}/events` with `Last-Event-ID` or `?after=N`) on
//! a real `infinity serve` over a file store: every kept event carries its number, a client
//! that comes back gets exactly what it missed (also after the server restarts), and one that
//! attaches in the middle of a streamed reply sees the reply so far.

use crate::common;

use std::time::Duration;

use common::{serve_in, until};
use infinity_test_support::{get_json, Api};
use serde_json::Value;

/// One Server-Sent Event: its type, its id (if any) and its data as JSON.
#[derive(Debug, Clone)]
struct Sse {
    event: String,
    id: Option<String>,
    data: Value,
}

/// An open event stream, read a chunk at a time.
struct Reader {
    response: reqwest::Response,
    buffer: String,
    events: Vec<Sse>,
}

impl Reader {
    async fn open(url: &str, last_event_id: Option<&str>) -> Self {
        let mut request = reqwest::Client::new().get(url);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200, "{url}");
        Self {
            response,
            buffer: String::new(),
            events: Vec::new(),
        }
    }

    /// Reads until `done` holds for the events so far (10 s at most).
    async fn until(&mut self, what: &str, done: impl Fn(&[Sse]) -> bool) -> &[Sse] {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !done(&self.events) {
            let chunk = tokio::time::timeout_at(deadline, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("waiting for {what}; got {:#?}", self.events))
                .unwrap()
                .unwrap_or_else(|| panic!("the stream ended before {what}: {:#?}", self.events));
            self.take(&chunk);
        }
        &self.events
    }

    /// Reads for `time`, or until the stream ends or breaks (its server killed).
    async fn read_for(&mut self, time: Duration) -> &[Sse] {
        let deadline = tokio::time::Instant::now() + time;
        while let Ok(Ok(Some(chunk))) =
            tokio::time::timeout_at(deadline, self.response.chunk()).await
        {
            self.take(&chunk);
        }
        &self.events
    }

    /// Adds the whole events of `chunk` (with what was left of the last one).
    fn take(&mut self, chunk: &[u8]) {
        self.buffer.push_str(&String::from_utf8_lossy(chunk));
        while let Some(end) = self.buffer.find("\n\n") {
            let block: String = self.buffer.drain(..end + 2).collect();
            let mut sse = Sse {
                event: "message".into(),
                id: None,
                data: Value::Null,
            };
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event: ") {
                    sse.event = v.to_owned();
                } else if let Some(v) = line.strip_prefix("id: ") {
                    sse.id = Some(v.to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    sse.data = serde_json::from_str(v).unwrap_or(Value::String(v.into()));
                }
            }
            // Comments (keep-alives) carry no event.
            if block.lines().any(|l| !l.starts_with(':')) {
                // Each event's data is what the API's document says the stream carries.
                if let Some(why) = infinity_server::openapi::check::event_problems(&sse.data) {
                    panic!("an event the document does not describe: {why}: {sse:?}");
                }
                assert_eq!(sse.data["type"], sse.event.as_str(), "{sse:?}");
                self.events.push(sse);
            }
        }
    }
}

/// The event number an SSE id names: `N` for a kept event, `N.B.D` for one shown before its
/// slice committed.
fn number(id: &str) -> u64 {
    id.split('.').next().unwrap().parse().unwrap()
}

/// The numbered events' numbers, in order.
fn ids(events: &[Sse]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.data.get("seq").is_some())
        .map(|e| {
            let id = number(e.id.as_deref().unwrap());
            assert_eq!(
                e.data["seq"], id,
                "the SSE id names the event's number: {e:?}"
            );
            id
        })
        .collect()
}

fn has_text(events: &[Sse], kind: &str, text: &str) -> bool {
    events
        .iter()
        .any(|e| e.event == kind && e.data["text"].as_str() == Some(text))
}

/// The history's length and the last event it includes (its `Last-Event-ID`).
async fn history_length_and_end(api: &str, thread: &str) -> (usize, u64) {
    let response = reqwest::get(format!("{api}/threads/{thread}/history"))
        .await
        .unwrap();
    let position: u64 = response.headers()["last-event-id"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let entries: Vec<Value> = response.json().await.unwrap();
    (entries.len(), position)
}

const AGENT: &str = "name: streamer\nmodel: script:script.yaml\n";

/// Quick answers, and one slow streamed reply (a few words a second).
const SCRIPT: &str = "\
latency: {first_token_ms: 50, tokens_per_second: 4}
rules:
  - when: \"^slow$\"
    reply: {text: \"alpha beta gamma delta epsilon zeta eta theta iota kappa\"}
  - when: \"^(.*)$\"
    reply: {text: \"echo $1\", delay_ms: 1}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_comes_back_gets_exactly_what_it_missed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent.yaml"), AGENT).unwrap();
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    let store = dir.path().join("store");
    let args = ["--agent", "agent.yaml", "--store", store.to_str().unwrap()];
    let (server, api) = serve_in(dir.path(), &args).await;
    let events = format!("{api}/threads/r1/events");

    // A fresh thread: the stream from the start sees each event once, numbered 1, 2, ...
    let mut first = Reader::open(&format!("{events}?after=0"), None).await;
    Api::new(&api, None).say("r1", "one").await;
    first
        .until("the first answer", |e| {
            has_text(e, "assistant_text", "echo one")
        })
        .await;
    Api::new(&api, None).say("r1", "two").await;
    let seen = first
        .until("the second answer", |e| {
            has_text(e, "assistant_text", "echo two")
        })
        .await
        .to_vec();
    let numbers = ids(&seen);
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    let last = *numbers.last().unwrap();
    // The history says where it ends: streaming after it repeats nothing.
    until("the thread to settle", || async {
        history_length_and_end(&api, "r1").await.1 == last
    })
    .await;
    drop(first);

    // Gone after "one" was answered; meanwhile "three" is sent: back with Last-Event-ID, the
    // client gets what came after, and nothing it had.
    let upto_one = seen
        .iter()
        .position(|e| has_text(std::slice::from_ref(e), "assistant_text", "echo one"))
        .unwrap();
    let had_id = seen[upto_one].id.clone().unwrap();
    let had = number(&had_id);
    Api::new(&api, None).say("r1", "three").await;
    until("three answered", || async {
        history_length_and_end(&api, "r1").await.0 == 6
    })
    .await;
    let mut back = Reader::open(&events, Some(&had_id)).await;
    let resumed = back
        .until("the third answer", |e| {
            has_text(e, "assistant_text", "echo three")
        })
        .await
        .to_vec();
    let numbers = ids(&resumed);
    assert_eq!(numbers.first(), Some(&(had + 1)), "{resumed:#?}");
    assert_eq!(
        numbers,
        (had + 1..=*numbers.last().unwrap()).collect::<Vec<_>>(),
        "no gap, no duplicate"
    );
    assert!(!has_text(&resumed, "user_message", "one"), "{resumed:#?}");
    assert!(has_text(&resumed, "user_message", "two"), "{resumed:#?}");
    // ... and what comes next, live.
    Api::new(&api, None).say("r1", "four").await;
    let live = back
        .until("the fourth answer", |e| {
            has_text(e, "assistant_text", "echo four")
        })
        .await
        .to_vec();
    let numbers = ids(&live);
    assert_eq!(
        numbers,
        (had + 1..=*numbers.last().unwrap()).collect::<Vec<_>>()
    );
    let total = *numbers.last().unwrap();
    drop(back);

    // The events are kept with the thread: after a restart, the same numbers, the same events.
    drop(server);
    let (_server, api) = serve_in(dir.path(), &args).await;
    let events = format!("{api}/threads/r1/events");
    let mut again = Reader::open(&format!("{events}?after={had}"), None).await;
    let replayed = again
        .until("the replay", |e| ids(e).last() == Some(&total))
        .await
        .to_vec();
    let texts = |events: &[Sse]| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.data.get("seq").is_some())
            .map(|e| format!("{} {}", e.data["seq"], e.data["type"]))
            .collect()
    };
    assert_eq!(texts(&replayed), texts(&live));

    // A position that is not a number is refused with why; one past anything the thread
    // showed says `reset` and goes on from where the thread is.
    let bad = reqwest::Client::new()
        .get(&events)
        .header("Last-Event-ID", "seven")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.text().await.unwrap().contains("`seven`"));
    let mut ahead = Reader::open(&events, Some("100000")).await;
    let reset = ahead
        .until("reset", |e| e.iter().any(|e| e.event == "reset"))
        .await;
    assert_eq!(reset[0].data["after"], total, "{reset:#?}");
    assert_eq!(reset[0].id.as_deref(), Some(total.to_string().as_str()));

    // Without a position: the thread as it stands, then `attached` with where it is.
    let mut fresh = Reader::open(&events, None).await;
    let attached = fresh
        .until("attached", |e| e.iter().any(|e| e.event == "attached"))
        .await;
    let marker = attached.iter().find(|e| e.event == "attached").unwrap();
    assert_eq!(marker.data["after"], total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_attaching_mid_reply_sees_the_reply_so_far() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent.yaml"), AGENT).unwrap();
    std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
    let (_server, api) = serve_in(dir.path(), &["--agent", "agent.yaml"]).await;
    let events = format!("{api}/threads/m1/events");
    let mut watcher = Reader::open(&format!("{events}?after=0"), None).await;
    Api::new(&api, None).say("m1", "slow").await;
    // The reply is streaming: a second client attaches after its first words.
    watcher
        .until("two words of the reply", |e| {
            e.iter().filter(|e| e.event == "assistant_delta").count() >= 2
        })
        .await;
    let mut late = Reader::open(&format!("{events}?after=0"), None).await;
    let whole = "alpha beta gamma delta epsilon zeta eta theta iota kappa";
    let got = late
        .until("the whole reply", |e| has_text(e, "assistant_text", whole))
        .await
        .to_vec();
    let deltas: Vec<&str> = got
        .iter()
        .filter(|e| e.event == "assistant_delta")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert!(
        deltas.first().is_some_and(|d| d.starts_with("alpha beta")),
        "the first delta is the reply so far: {deltas:?}"
    );
    assert_eq!(deltas.concat(), whole, "the deltas add up to the reply");
    assert!(
        deltas.len() < whole.split(' ').count(),
        "attached mid-reply, not at its start: {deltas:?}"
    );
    assert!(has_text(&got, "user_message", "slow"), "{got:#?}");
    let numbers = ids(&got);
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
}

/// A client's copy of a thread's events, as the stream's rules say to keep one: each numbered
/// event by its number (a second copy of a number is a duplicate), `withdrawn` forgets what is
/// after its position; the last SSE id is where it resumes.
#[derive(Debug, Default)]
struct Copy {
    events: std::collections::BTreeMap<u64, Value>,
    last_id: Option<String>,
    withdrawn: usize,
    /// After a `reset`: the copy is to be reloaded up to this event.
    reload: Option<u64>,
}

impl Copy {
    fn apply(&mut self, events: &[Sse]) {
        for e in events {
            if let Some(id) = &e.id {
                self.last_id = Some(id.clone());
            }
            match e.event.as_str() {
                "withdrawn" => {
                    let after = e.data["after"].as_u64().unwrap();
                    self.events.retain(|seq, _| *seq <= after);
                    self.withdrawn += 1;
                }
                // Reload the history (the kept events up to `after`); the stream goes on.
                "reset" => {
                    self.events.clear();
                    self.reload = e.data["after"].as_u64();
                }
                _ => {
                    if let Some(seq) = e.data["seq"].as_u64() {
                        let before = self.events.insert(seq, e.data.clone());
                        assert!(before.is_none(), "event {seq} twice: {before:?} and {e:?}");
                    }
                }
            }
        }
    }
}

/// The kept events up to `upto`, read from the start.
async fn kept_upto(url: &str, upto: u64) -> std::collections::BTreeMap<u64, Value> {
    let mut reader = Reader::open(url, Some("0")).await;
    if upto > 0 {
        reader
            .until("the kept events", |events| {
                events.iter().any(|e| e.data["seq"].as_u64() == Some(upto))
            })
            .await;
    }
    reader
        .events
        .iter()
        .filter_map(|e| Some((e.data["seq"].as_u64()?, e.data.clone())))
        .filter(|(seq, _)| *seq <= upto)
        .collect()
}

/// Slices that show a dozen events each before they commit: `go` sets the title eight times
/// (each step a completion of 120 ms), then answers.
fn steps() -> String {
    let mut script = String::from(
        "rules:\n  - when: \"(?m)^go$\"\n    reply: {tool_calls: [{name: set_title, args: {title: \"step 1\"}}], delay_ms: 120}\n",
    );
    for step in 1..8 {
        script.push_str(&format!(
            "  - when: 'step {step}\"'\n    reply: {{tool_calls: [{{name: set_title, args: {{title: \"step {}\"}}}}], delay_ms: 120}}\n",
            step + 1
        ));
    }
    script.push_str("  - when: 'step 8\"'\n    reply: {text: \"done\", delay_ms: 120}\n");
    script.push_str("  - reply: {text: \"ok\"}\n");
    script
}

/// `kill -9` of `serve --store` at random points while a client streams a thread whose slices
/// show many events before they commit. After each restart the slice runs again, and shows
/// other events (other times) under the numbers the client was shown. Resuming each time from
/// the last id it got, the client ends with exactly the events the store keeps: no gap, no
/// duplicate, no stale copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cut_off_by_kill_9_at_random_ends_with_exactly_what_is_kept() {
    let seed: u64 = std::env::var("INFINITY_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| jiff::Timestamp::now().as_millisecond() as u64);
    eprintln!("INFINITY_KILL_SEED={seed}");
    let mut state = seed;
    let mut next = move |below: u64| {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (state >> 33) % below
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("agent.yaml"), AGENT).unwrap();
    std::fs::write(dir.path().join("script.yaml"), steps()).unwrap();
    let args = ["--agent", "agent.yaml", "--store", "state"];
    let mut copy = Copy::default();
    let rounds: usize = 6;
    for round in 0..rounds {
        let (server, api) = serve_in(dir.path(), &args).await;
        if round % 2 == 0 {
            Api::new(&api, None).say("k", "go").await;
        }
        let url = format!("{api}/threads/k/events");
        let mut reader = Reader::open(&url, Some(copy.last_id.as_deref().unwrap_or("0"))).await;
        let cut = Duration::from_millis(150 + next(1_200));
        copy.apply(reader.read_for(cut).await);
        if let Some(upto) = copy.reload.take() {
            copy.events = kept_upto(&url, upto).await;
        }
        drop(server); // SIGKILL, wherever the slice is
    }
    // The last life: every `go` answered, and the client follows to the end.
    let (_server, api) = serve_in(dir.path(), &args).await;
    // (Two `go`s that wait together are answered by one slice.)
    until("every go answered", || async {
        let (_, history) = get_json(&format!("{api}/threads/k/history")).await;
        history.as_array().is_some_and(|entries| {
            let goes = entries.iter().filter(|e| e["item"]["text"] == "go").count();
            goes == rounds.div_ceil(2) && entries.last().unwrap()["item"]["text"] == "done"
        })
    })
    .await;
    let (_, record) = get_json(&format!("{api}/threads/k")).await;
    let kept = record["events"].as_u64().unwrap();
    let url = format!("{api}/threads/k/events");
    let mut reader = Reader::open(&url, copy.last_id.as_deref()).await;
    reader
        .until("the last kept event", |events| {
            events.iter().any(|e| e.data["seq"].as_u64() == Some(kept))
                || copy.events.contains_key(&kept) && !events.iter().any(|e| e.event == "withdrawn")
        })
        .await;
    copy.apply(&reader.events);
    if let Some(upto) = copy.reload.take() {
        let mut reloaded = kept_upto(&url, upto).await;
        reloaded.extend(std::mem::take(&mut copy.events));
        copy.events = reloaded;
    }
    let truth = kept_upto(&url, kept).await;
    assert_eq!(
        copy.events, truth,
        "seed {seed}: the client's copy differs from what is kept ({} withdrawn)",
        copy.withdrawn
    );
    eprintln!(
        "seed {seed}: {kept} events, {} withdrawn on the way",
        copy.withdrawn
    );
}
