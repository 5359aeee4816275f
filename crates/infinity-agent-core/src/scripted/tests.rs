use super::play::newest_text;
use super::*;
use crate::history::{HistoryEntry, HistoryView, Item, ToolCall};
use crate::ids::{CallId, ThreadId};
use crate::model::{Completion, CompletionRequest, ModelError, ModelErrorKind};
use jiff::Timestamp;

fn entry(item: Item) -> Arc<HistoryEntry> {
    Arc::new(HistoryEntry {
        seq: 0,
        at: Timestamp::UNIX_EPOCH,
        input_id: None,
        item,
    })
}

#[test]
fn a_file_that_is_not_a_script_is_refused_without_quoting_it() {
    let path = Path::new("secret.yaml");
    for (text, says) in [
        ("root:x:0:0:root:/root:/bin/bash\n", "not a script"),
        ("token: s3cr3t-value\n", "an unknown key, expected"),
        (
            "rules:\n  - when: ok\n    secret_key: x\n",
            "an unknown key, expected",
        ),
        ("rules: \"s3cr3t-value\"\n", "a value of the wrong type"),
        ("rules:\n  - when: x\n", "`reply` is missing"),
        (
            "rules:\n  - when: \"(s3cr3t-value\"\n    reply: {text: hi}\n",
            "`when` is not a valid regex",
        ),
        ("{ s3cr3t-value: [\n", "not a script"),
    ] {
        let error = ScriptedModel::parse(text, path).unwrap_err().to_string();
        assert!(error.contains(says), "{text}: {error}");
        assert!(error.starts_with("secret.yaml: "), "{error}");
        for secret in ["root:x", "/bin/bash", "s3cr3t", "token", "secret_key"] {
            assert!(!error.contains(secret), "{text}: {error}");
        }
    }
}

async fn ask(
    script: &str,
    history: &[Arc<HistoryEntry>],
    is_root: bool,
) -> Result<Completion, ModelError> {
    let model = ScriptedModel::parse(script, Path::new("t.yaml")).unwrap();
    let id = ThreadId::new("t").unwrap();
    let stack = [ThreadId::new("root").unwrap(), id.clone()];
    model
        .complete(CompletionRequest {
            thread_id: &id,
            is_root,
            lineage: &stack,
            system: "",
            tools: &[],
            history: HistoryView::from_slice(history),
        })
        .await
}

#[tokio::test]
async fn a_break_after_rule_breaks_its_first_stream_once() {
    let model = ScriptedModel::parse(
        "rules: [{reply: {text: 'one two three four', break_after: 2}}]",
        Path::new("t.yaml"),
    )
    .unwrap();
    let id = ThreadId::new("t").unwrap();
    let history = [entry(Item::user("hi"))];
    let stream = || async {
        let seen = std::sync::Mutex::new(String::new());
        let sink = |piece: crate::model::Streamed<'_>| {
            if let crate::model::Streamed::Text(piece) = piece {
                seen.lock().unwrap().push_str(piece);
            }
        };
        let request = CompletionRequest {
            thread_id: &id,
            is_root: true,
            lineage: std::slice::from_ref(&id),
            system: "",
            tools: &[],
            history: HistoryView::from_slice(&history),
        };
        let result = model.complete_streaming(request, &sink).await;
        (result, seen.into_inner().unwrap())
    };
    let (first, shown) = stream().await;
    match first {
        Err(ModelError::Retryable { kind, text }) => {
            assert_eq!(kind, ModelErrorKind::Network);
            assert!(text.contains("broke off"), "{text}");
        }
        other => panic!("the first stream did not break: {other:?}"),
    }
    assert_eq!(shown, "one two ");
    let (second, shown) = stream().await;
    assert_eq!(second.unwrap().text.as_deref(), Some("one two three four"));
    assert_eq!(shown, "one two three four");
}

#[tokio::test(start_paused = true)]
async fn a_script_s_latency_paces_its_replies_like_a_model() {
    // 800 ms to the first token, then 10 tokens (40 characters) a second.
    let script = r#"
latency: {first_token_ms: 800, tokens_per_second: 10}
rules:
  - when: "slow"
    reply: {text: "fixed", delay_ms: 50}
  - reply: {text: "forty characters of text, eight pieces.."}
"#;
    let started = tokio::time::Instant::now();
    ask(script, &[entry(Item::user("hi"))], true).await.unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(1800));
    // A rule's own delay wins.
    let started = tokio::time::Instant::now();
    ask(script, &[entry(Item::user("slow"))], true)
        .await
        .unwrap();
    assert_eq!(started.elapsed(), Duration::from_millis(50));
    // Streamed: the first piece at the first-token time, each next one as long after as
    // the one before takes to write.
    let model = ScriptedModel::parse(script, Path::new("t.yaml")).unwrap();
    let id = ThreadId::new("t").unwrap();
    let history = [entry(Item::user("hi"))];
    let started = tokio::time::Instant::now();
    let seen = std::sync::Mutex::new(Vec::new());
    let sink = |piece: crate::model::Streamed<'_>| {
        let crate::model::Streamed::Text(piece) = piece else {
            panic!("nothing broke, yet the stream restarted");
        };
        seen.lock()
            .unwrap()
            .push((started.elapsed(), piece.to_owned()));
    };
    let request = CompletionRequest {
        thread_id: &id,
        is_root: true,
        lineage: std::slice::from_ref(&id),
        system: "",
        tools: &[],
        history: HistoryView::from_slice(&history),
    };
    model.complete_streaming(request, &sink).await.unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(seen[0].0, Duration::from_millis(800));
    assert_eq!(seen[5].0, Duration::from_millis(1600), "{seen:?}");
    assert_eq!(started.elapsed(), Duration::from_millis(1800));
}

#[tokio::test]
async fn first_matching_rule_answers_with_captures() {
    let script = r#"
rules:
  - when: "remind me in (\\d+)s"
    reply:
      text: "Okay, $1 seconds; costs $$0."
      tool_calls: [{name: sleep, args: {seconds: "$1", nested: ["$1"], me: "${thread_id}", up: "${stack}"}}]
  - reply: {text: "fallback"}
"#;
    let c = ask(script, &[entry(Item::user("please remind me in 5s"))], true)
        .await
        .unwrap();
    assert_eq!(c.text.as_deref(), Some("Okay, 5 seconds; costs $0."));
    assert_eq!(c.tool_calls[0].args["seconds"], "5");
    assert_eq!(c.tool_calls[0].args["nested"][0], "5");
    assert_eq!(c.tool_calls[0].args["me"], "t");
    assert_eq!(c.tool_calls[0].args["up"], serde_json::json!(["root", "t"]));
    let c = ask(script, &[entry(Item::user("hello"))], true)
        .await
        .unwrap();
    assert_eq!(c.text.as_deref(), Some("fallback"));
}

#[tokio::test]
async fn tool_results_render_with_name_and_args() {
    let call = ToolCall {
        id: CallId::new("c1").unwrap(),
        name: "spawn_thread".into(),
        args: serde_json::json!({"instructions": "x"}),
    };
    let history = vec![
        entry(Item::user("go")),
        entry(Item::Assistant {
            text: None,
            tool_calls: vec![call.clone()],
            synthetic: false,
        }),
        entry(Item::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            text: "Child thread spawned with ID: t-1".into(),
            is_error: false,
            images: Vec::new(),
            display_as: Vec::new(),
        }),
    ];
    assert_eq!(
        newest_text(HistoryView::from_slice(&history)),
        r#"spawn_thread {"instructions":"x"} -> Child thread spawned with ID: t-1"#
    );
    let script = "rules:\n  - when: 'ID: (\\S+)'\n    reply: {text: 'child $1'}\n";
    let c = ask(script, &history, true).await.unwrap();
    assert_eq!(c.text.as_deref(), Some("child t-1"));
}

#[tokio::test]
async fn thread_filter_and_scope_all() {
    let script = r#"
rules:
  - thread: child
    reply: {text: "child rule"}
  - when: "first"
    scope: all
    reply: {text: "saw all"}
"#;
    let history = vec![
        entry(Item::user("first")),
        entry(Item::Assistant {
            text: Some("ok".into()),
            tool_calls: vec![],
            synthetic: false,
        }),
        entry(Item::user("second")),
    ];
    assert_eq!(
        ask(script, &history, false).await.unwrap().text.as_deref(),
        Some("child rule")
    );
    assert_eq!(
        ask(script, &history, true).await.unwrap().text.as_deref(),
        Some("saw all")
    );
}

#[tokio::test]
async fn no_match_names_the_text() {
    let script = "rules:\n  - when: nope\n    reply: {text: x}\n";
    let err = ask(script, &[entry(Item::user("hello there"))], true)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"hello there\""), "{err}");
}

#[test]
fn bad_scripts_are_rejected_with_location() {
    let err = ScriptedModel::parse(
        "rules:\n  - when: '('\n    reply: {}\n",
        Path::new("s.yaml"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("rule 1"), "{err}");
    let err =
        ScriptedModel::parse("rules:\n  - reply: {txt: x}\n", Path::new("s.yaml")).unwrap_err();
    // Where, and what was expected; the unknown key itself is the file's text, not quoted.
    let err = err.to_string();
    assert!(
        err.contains("an unknown key, expected one of `text`")
            && err.contains("line 2 column 13")
            && !err.contains("txt"),
        "{err}"
    );
}
