//! Event streams that resume (`GET /threads/{id}/events` with `Last-Event-ID` or `?after=N`) on
//! a real `infinity serve` over a file store: every kept event carries its number, a client
//! that comes back gets exactly what it missed (also after the server restarts), and one that
//! attaches in the middle of a streamed reply sees the reply so far.

use crate::common;

use std::time::Duration;

use common::{serve_in, until};
use serde_json::{json, Value};

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
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
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
        &self.events
    }
}

/// The numbered events' ids, in order.
fn ids(events: &[Sse]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.data.get("seq").is_some())
        .map(|e| {
            let id: u64 = e.id.as_deref().unwrap().parse().unwrap();
            assert_eq!(e.data["seq"], id, "the SSE id is the event's number: {e:?}");
            id
        })
        .collect()
}

fn has_text(events: &[Sse], kind: &str, text: &str) -> bool {
    events
        .iter()
        .any(|e| e.event == kind && e.data["text"].as_str() == Some(text))
}

async fn send(api: &str, thread: &str, text: &str) {
    let status = reqwest::Client::new()
        .post(format!("{api}/threads/{thread}/messages"))
        .json(&json!({ "text": text }))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
}

/// The history's length and the last event it includes.
async fn history(api: &str, thread: &str) -> (usize, u64) {
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
    send(&api, "r1", "one").await;
    first
        .until("the first answer", |e| {
            has_text(e, "assistant_text", "echo one")
        })
        .await;
    send(&api, "r1", "two").await;
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
        history(&api, "r1").await.1 == last
    })
    .await;
    drop(first);

    // Gone after "one" was answered; meanwhile "three" is sent: back with Last-Event-ID, the
    // client gets what came after, and nothing it had.
    let upto_one = seen
        .iter()
        .position(|e| has_text(std::slice::from_ref(e), "assistant_text", "echo one"))
        .unwrap();
    let had: u64 = seen[upto_one].id.as_deref().unwrap().parse().unwrap();
    send(&api, "r1", "three").await;
    until("three answered", || async {
        history(&api, "r1").await.0 == 6
    })
    .await;
    let mut back = Reader::open(&events, Some(&had.to_string())).await;
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
    send(&api, "r1", "four").await;
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
    send(&api, "m1", "slow").await;
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
