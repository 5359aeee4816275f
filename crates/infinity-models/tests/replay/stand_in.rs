//! The three adapters against the provider stand-in (`infra/provider/stand_in.py`), which
//! answers as Anthropic, OpenAI and Bedrock do: at a real pace, with their rate limits, overload
//! and server errors, and streams that break off or stall. One stand-in serves the whole test
//! binary. Each request says what it meets in a `[[stand-in: ...]]` marker in its message, with
//! an `id=` under which the stand-in's `GET /_stats` counts its attempts by outcome.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use infinity_agent_core::history::Item;
use infinity_agent_core::model::{
    Completion, ModelError, ModelProvider, StopReason, Streamed as Piece,
};
use infinity_models::anthropic::{AnthropicConfig, AnthropicModel};
use infinity_models::bedrock::{BedrockConfig, BedrockModel};
use infinity_models::openai::{OpenAiConfig, OpenAiModel};
use infinity_models::transport::RequestPolicy;
use infinity_retry::RetryPolicy;
use infinity_test_support::{ready_or_skip, repo, Tools};
use serde_json::{json, Value};

use crate::replay::fixtures::{assistant, call, quick_retries, tool_result, Conversation, API_KEY};

/// A running stand-in. It exits when its stdin closes, that is when this test binary ends.
struct StandIn {
    url: String,
    _stdin: ChildStdin,
    /// Never waited for: it lives as long as the binary, and exits when its stdin closes.
    _child: Mutex<Child>,
    /// What it printed after its first line: a line per request.
    log: &'static Mutex<Vec<String>>,
}

/// The test venv's Python. Each test asks [`ready_or_skip`] first; when the venv is required
/// (`INFINITY_REQUIRE_TOOLS`) and missing, the test fails saying how to make it.
fn python() -> PathBuf {
    let python = repo().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make tools` (infra/local/install.sh) to make the test venv",
        python.display()
    );
    python
}

/// The stand-in this binary shares, started on first use. Quick unless a request asks
/// otherwise: 20 ms to the first token, 400 tokens a second.
fn stand_in() -> &'static StandIn {
    static STAND_IN: OnceLock<StandIn> = OnceLock::new();
    STAND_IN.get_or_init(|| {
        let script = repo().join("infra/provider/stand_in.py");
        let mut child = Command::new(python())
            .arg(&script)
            .args(["--port", "0", "--ttft", "0.02", "--tps", "400"])
            .arg("--exit-with-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", script.display()));
        let stdout = child.stdout.take().unwrap();
        let log: &'static Mutex<Vec<String>> = Box::leak(Box::default());
        let (first_line, first) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines().map_while(Result::ok);
            if let Some(line) = lines.next() {
                first_line.send(line).ok();
            }
            // Read on, so that the pipe never fills and holds the stand-in up.
            for line in lines {
                log.lock().unwrap().push(line);
            }
        });
        let line = first
            .recv_timeout(Duration::from_secs(60))
            .expect("the stand-in did not say where it listens within 60 s");
        let url = line
            .strip_prefix("stand-in: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from the stand-in: {line}"))
            .to_owned();
        StandIn {
            url,
            _stdin: child.stdin.take().unwrap(),
            _child: Mutex::new(child),
            log,
        }
    })
}

impl StandIn {
    /// How many attempts of the requests marked `id=ID` met each outcome (`ok`, `429`,
    /// `overloaded`, `500`, `reset`, `stall`, or an error status).
    async fn outcomes(&self, id: &str) -> BTreeMap<String, u64> {
        let stats: Value = reqwest::get(format!("{}/_stats", self.url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        serde_json::from_value(stats["ids"][id].clone()).unwrap_or_default()
    }

    /// What the stand-in printed about the requests marked `id=ID`.
    fn log_of(&self, id: &str) -> String {
        let tag = format!("[id={id}]");
        let log = self.log.lock().unwrap();
        let lines: Vec<&str> = log
            .iter()
            .filter(|l| l.ends_with(&tag))
            .map(String::as_str)
            .collect();
        lines.join("\n")
    }
}

fn outcomes(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

const PROVIDERS: [&str; 3] = ["anthropic", "openai", "bedrock"];

/// The adapter for `provider` pointed at the stand-in.
fn model(provider: &str, retry: RequestPolicy) -> Box<dyn ModelProvider> {
    let url = stand_in().url.clone();
    match provider {
        "anthropic" => Box::new(AnthropicModel::new(
            "claude-sonnet-4-5",
            AnthropicConfig {
                base_url: url,
                api_key: API_KEY.to_owned(),
                request: retry,
            },
        )),
        "openai" => Box::new(OpenAiModel::new(
            "gpt-4.1-mini",
            OpenAiConfig {
                base_url: format!("{url}/v1"),
                api_key: Some(API_KEY.to_owned()),
                request: retry,
            },
        )),
        _ => Box::new(BedrockModel::new(
            "anthropic.claude-sonnet-4-5-v1:0",
            BedrockConfig {
                region: Some("us-east-1".into()),
                endpoint_url: Some(url),
                credentials: Some(SharedCredentialsProvider::new(Credentials::new(
                    "AKIDSTANDIN",
                    "stand-in-secret",
                    None,
                    None,
                    "stand-in",
                ))),
                bearer_token: None,
                request: retry,
            },
        )),
    }
}

/// One user message that says what the stand-in should do.
fn asking(text: &str, directive: &str) -> Conversation {
    Conversation::new(vec![Item::user(format!(
        "{text} [[stand-in: {directive}]]"
    ))])
}

/// What a streamed completion handed on, each piece of text with when it came (those after
/// the last restart), and for each restart how many pieces it took back.
struct Streamed {
    result: Result<Completion, ModelError>,
    pieces: Vec<(Duration, String)>,
    restarts: Vec<usize>,
    elapsed: Duration,
}

impl Streamed {
    fn text(&self) -> String {
        self.pieces.iter().map(|(_, t)| t.as_str()).collect()
    }
}

async fn stream(model: &dyn ModelProvider, conversation: &Conversation) -> Streamed {
    let started = Instant::now();
    let pieces = Mutex::new(Vec::new());
    let restarts = Mutex::new(Vec::new());
    // The OpenAI adapter hands on the empty `content` of the first chunk too; only text counts.
    // A restart takes back what came before it, as a client's display does.
    let sink = |piece: Piece<'_>| match piece {
        Piece::Text("") => {}
        Piece::Text(t) => pieces
            .lock()
            .unwrap()
            .push((started.elapsed(), t.to_owned())),
        Piece::Restarted => {
            let mut pieces = pieces.lock().unwrap();
            restarts.lock().unwrap().push(pieces.len());
            pieces.clear();
        }
    };
    let result = model
        .complete_streaming(conversation.request(), &sink)
        .await;
    Streamed {
        result,
        pieces: pieces.into_inner().unwrap(),
        restarts: restarts.into_inner().unwrap(),
        elapsed: started.elapsed(),
    }
}

/// Runs `scenario` for the three providers at once and returns what each gave, in
/// [`PROVIDERS`] order.
async fn each_provider<F, T>(scenario: impl Fn(&'static str) -> F) -> Vec<T>
where
    F: std::future::Future<Output = T>,
{
    futures_util::future::join_all(PROVIDERS.map(scenario)).await
}

#[tokio::test]
async fn a_reply_streams_at_a_real_pace() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    // 300 ms to the first token, then 40 tokens a second: twelve tokens take ~575 ms.
    let runs = each_provider(|provider| async move {
        let conversation = asking(
            "Tell me about Paris.",
            &format!("ttft=0.3 tps=40 words=12 id=pace-{provider}"),
        );
        let model = model(provider, quick_retries(0));
        (provider, stream(model.as_ref(), &conversation).await)
    })
    .await;
    for (provider, run) in runs {
        let log = stand_in().log_of(&format!("pace-{provider}"));
        let completion = run
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("{provider}: {e}\n{log}"));
        let text = completion.text.clone().unwrap();
        assert!(
            text.starts_with("You said: Tell me about Paris."),
            "{provider}: {text}"
        );
        assert_eq!(text.split_whitespace().count(), 12, "{provider}: {text}");
        assert_eq!(
            completion.usage.output_tokens, 12,
            "{provider}: {completion:?}"
        );
        assert_eq!(completion.stop_reason, StopReason::EndTurn, "{provider}");
        if provider == "bedrock" {
            // Converse is not streamed: nothing comes before the whole reply, which takes as
            // long as the stream would have.
            assert!(run.pieces.is_empty(), "bedrock: {:?}", run.pieces);
            assert!(
                run.elapsed >= Duration::from_millis(550),
                "bedrock: {:?}",
                run.elapsed
            );
            continue;
        }
        assert_eq!(run.text(), text, "{provider}: the pieces make the text");
        assert_eq!(run.pieces.len(), 12, "{provider}: a piece per token");
        let (first, last) = (run.pieces[0].0, run.pieces[11].0);
        assert!(
            first >= Duration::from_millis(300),
            "{provider}: first piece at {first:?}"
        );
        assert!(
            last >= first + Duration::from_millis(200),
            "{provider}: the first piece ({first:?}) came well before the last ({last:?})"
        );
    }
}

#[tokio::test]
async fn a_tool_call_in_many_pieces_and_the_turn_after_it() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    let runs = each_provider(|provider| async move {
        let question = "What's the weather in Paris? Use get_weather.";
        let first = asking(question, &format!("id=tool-{provider}"));
        let model = model(provider, quick_retries(0));
        let completion = model.complete(first.request()).await;
        let Ok(completion) = completion else {
            return (provider, completion, None);
        };
        let Some(made) = completion.tool_calls.first().cloned() else {
            return (provider, Ok(completion), None);
        };
        let id = made.id.clone().unwrap_or_default();
        let second = Conversation::new(vec![
            Item::user(format!("{question} [[stand-in: id=tool-{provider}]]")),
            assistant(
                completion.text.as_deref(),
                vec![call(&id, &made.name, made.args.clone())],
            ),
            tool_result(&id, &made.name, "18°C and sunny", false),
        ]);
        let after = model.complete(second.request()).await;
        (provider, Ok(completion), Some(after))
    })
    .await;
    for (provider, first, after) in runs {
        let log = stand_in().log_of(&format!("tool-{provider}"));
        let first = first.unwrap_or_else(|e| panic!("{provider}: {e}\n{log}"));
        assert_eq!(
            first.stop_reason,
            StopReason::ToolUse,
            "{provider}: {first:?}"
        );
        assert_eq!(
            first.text.as_deref(),
            Some("Calling get_weather."),
            "{provider}"
        );
        assert_eq!(first.tool_calls.len(), 1, "{provider}: {first:?}");
        let made = &first.tool_calls[0];
        assert_eq!(made.name, "get_weather", "{provider}");
        assert!(
            made.id.as_deref().is_some_and(|id| !id.is_empty()),
            "{provider}: {made:?}"
        );
        // The stand-in fills the schema's required `city` from the question; its JSON came in
        // pieces of one to seven characters.
        assert_eq!(
            made.args,
            json!({"city": "What's the weather in Paris? Use get_weather."}),
            "{provider}"
        );
        let after = after
            .unwrap_or_else(|| panic!("{provider}: no second turn"))
            .unwrap_or_else(|e| panic!("{provider}: the turn after the call: {e}"));
        assert_eq!(
            after.text.as_deref(),
            Some("Got it: 18°C and sunny"),
            "{provider}"
        );
        assert_eq!(after.stop_reason, StopReason::EndTurn, "{provider}");
        assert!(after.tool_calls.is_empty(), "{provider}: {after:?}");
    }
}

#[tokio::test]
async fn a_429_is_waited_out_as_retry_after_asks() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    // Backoff so long (capped at 10 s) that a retry after about a second can only be
    // `retry-after: 1` honoured. Bedrock sends no retry-after: its retry follows the backoff.
    let patient = RequestPolicy {
        retry: RetryPolicy::new(3, Duration::from_secs(30), Duration::from_secs(10)).jittered(),
        timeout: Duration::from_secs(5),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
    };
    let runs = each_provider(|provider| async move {
        let policy = if provider == "bedrock" {
            quick_retries(2)
        } else {
            patient
        };
        let conversation = asking(
            "Hello.",
            &format!("fault=429 retry_after=1 id=429-{provider}"),
        );
        let model = model(provider, policy);
        let started = Instant::now();
        let result = model.complete(conversation.request()).await;
        (provider, result, started.elapsed())
    })
    .await;
    for (provider, result, elapsed) in runs {
        let id = format!("429-{provider}");
        let log = stand_in().log_of(&id);
        let completion = result.unwrap_or_else(|e| panic!("{provider}: {e}\n{log}"));
        assert_eq!(
            completion.text.as_deref(),
            Some("You said: Hello."),
            "{provider}"
        );
        assert_eq!(
            stand_in().outcomes(&id).await,
            outcomes(&[("429", 1), ("ok", 1)]),
            "{provider}\n{log}"
        );
        if provider == "bedrock" {
            assert!(elapsed < Duration::from_millis(900), "bedrock: {elapsed:?}");
        } else {
            assert!(
                elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(4),
                "{provider}: waited {elapsed:?}, not the second retry-after asked for"
            );
        }
    }
}

#[tokio::test]
async fn overload_and_server_errors_are_retried() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    // Anthropic's 529 overloaded_error twice; OpenAI's 500 and 503; Bedrock's
    // ServiceUnavailableException (503) and InternalServerException (500).
    let cases = [
        ("anthropic", "fault=529 times=2", "overloaded", 2),
        ("anthropic", "fault=500", "500", 1),
        ("openai", "fault=500", "500", 1),
        ("openai", "fault=503", "overloaded", 1),
        ("bedrock", "fault=503", "overloaded", 1),
        ("bedrock", "fault=500", "500", 1),
    ];
    let runs =
        futures_util::future::join_all(cases.map(|(provider, fault, outcome, times)| async move {
            let id = format!("5xx-{provider}-{outcome}");
            let conversation = asking("Hello.", &format!("{fault} id={id}"));
            let result = model(provider, quick_retries(3))
                .complete(conversation.request())
                .await;
            (id, result, outcome, times)
        }))
        .await;
    for (id, result, outcome, times) in runs {
        let log = stand_in().log_of(&id);
        let completion = result.unwrap_or_else(|e| panic!("{id}: {e}\n{log}"));
        assert_eq!(completion.text.as_deref(), Some("You said: Hello."), "{id}");
        assert_eq!(
            stand_in().outcomes(&id).await,
            outcomes(&[(outcome, times), ("ok", 1)]),
            "{id}\n{log}"
        );
    }
}

#[tokio::test]
async fn a_stream_reset_midway_is_retried() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    // Twenty tokens; the connection is reset before the ninth, on the first attempt only.
    let runs = each_provider(|provider| async move {
        let conversation = asking(
            "Hello.",
            &format!("fault=reset words=20 at=8 id=reset-{provider}"),
        );
        let model = model(provider, quick_retries(2));
        (provider, stream(model.as_ref(), &conversation).await)
    })
    .await;
    for (provider, run) in runs {
        let id = format!("reset-{provider}");
        let log = stand_in().log_of(&id);
        let completion = run
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("{provider}: {e}\n{log}"));
        let text = completion.text.clone().unwrap();
        assert_eq!(text.split_whitespace().count(), 20, "{provider}: {text}");
        assert_eq!(
            stand_in().outcomes(&id).await,
            outcomes(&[("reset", 1), ("ok", 1)]),
            "{provider}\n{log}"
        );
        if provider != "bedrock" {
            // What was streamed live: the eight pieces of the broken attempt, taken back when
            // the second attempt began, then the whole text.
            assert_eq!(run.restarts, [8], "{provider}");
            assert_eq!(run.pieces.len(), 20, "{provider}: {:?}", run.pieces);
            assert_eq!(run.text(), text, "{provider}");
        }
    }
}

#[tokio::test]
async fn a_stall_past_the_timeout_is_abandoned_and_retried() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    // A reply takes ~50 ms; the first attempt goes silent for 3 s halfway. Each attempt may
    // take 1 s.
    let policy = RequestPolicy {
        timeout: Duration::from_secs(1),
        ..quick_retries(1)
    };
    let runs = each_provider(|provider| async move {
        let conversation = asking(
            "Hello.",
            &format!("fault=stall stall=3 words=10 id=stall-{provider}"),
        );
        let model = model(provider, policy);
        (provider, stream(model.as_ref(), &conversation).await)
    })
    .await;
    for (provider, run) in runs {
        let id = format!("stall-{provider}");
        let log = stand_in().log_of(&id);
        let completion = run
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("{provider}: {e}\n{log}"));
        assert_eq!(
            completion
                .text
                .as_deref()
                .map(|t| t.split_whitespace().count()),
            Some(10),
            "{provider}"
        );
        assert!(
            run.elapsed >= Duration::from_secs(1) && run.elapsed < Duration::from_millis(2500),
            "{provider}: gave up on the stalled attempt after its timeout, took {:?}",
            run.elapsed
        );
        assert_eq!(
            stand_in().outcomes(&id).await,
            outcomes(&[("stall", 1), ("ok", 1)]),
            "{provider}\n{log}"
        );
    }
}

#[tokio::test]
async fn a_missing_key_is_refused_as_the_provider_would_and_not_retried() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    let url = stand_in().url.clone();
    let openai = OpenAiModel::new(
        "gpt-4.1-mini",
        OpenAiConfig {
            base_url: format!("{url}/v1"),
            api_key: None,
            request: quick_retries(2),
        },
    );
    let anthropic = AnthropicModel::new(
        "claude-sonnet-4-5",
        AnthropicConfig {
            base_url: url,
            api_key: String::new(),
            request: quick_retries(2),
        },
    );
    let conversation = asking("Hello.", "id=no-key");
    for (model, says) in [
        (
            &openai as &dyn ModelProvider,
            "You didn't provide an API key",
        ),
        (
            &anthropic,
            "authentication_error: x-api-key header is required",
        ),
    ] {
        let error = model.complete(conversation.request()).await.unwrap_err();
        let ModelError::Terminal { text: why, .. } = &error else {
            panic!("{}: expected a terminal error, got {error:?}", model.name());
        };
        assert!(
            why.contains("401") && why.contains(says),
            "{}: {why}",
            model.name()
        );
    }
}

#[test]
fn the_sdks_parse_what_the_stand_in_sends() {
    if !ready_or_skip(Tools::Venv) {
        return;
    }
    let url = &stand_in().url;
    let output = Command::new(python())
        .arg(repo().join("infra/provider/self_check.py"))
        .args(["--url", url])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "infra/provider/self_check.py failed:\n{report}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(report.contains(" passed, 0 failed"), "{report}");
}
