//! Traces: `infinity run` with `OTEL_EXPORTER_OTLP_ENDPOINT` set sends its spans over OTLP/HTTP
//! to a receiver here, which decodes them with OpenTelemetry's own protobuf definitions
//! (`opentelemetry-proto`) the way a collector does; the spans' parents, links and attributes
//! are checked against the semantic conventions. Without the variable, nothing is sent.

use std::collections::HashMap;

use infinity_agent_core::testing::otlp::{attributes, int, receiver, string, strings, Any, Span};

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "report back"
    reply:
      tool_calls: [{name: report_to_parent, args: {report: "the child is done"}}]
  - thread: child
    reply: {text: "reported"}
  - when: "^go$"
    reply:
      tool_calls: [{name: spawn_thread, args: {instructions: "report back", child_of: "${stack}"}}]
  - reply: {text: "noted"}
"#;

fn run(dir: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    std::fs::write(dir.join("s.yaml"), SCRIPT).unwrap();
    std::fs::write(
        dir.join("a.yaml"),
        "name: tracer\nmodel: script:s.yaml\nprices: {input: 2, output: 10}\n",
    )
    .unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_infinity"));
    command
        .args(["run", "--agent"])
        .arg(dir.join("a.yaml"))
        .args(["--thread", "main", "--grace", "0", "go"])
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_SERVICE_NAME");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sends_its_slices_completions_tool_calls_and_effects_as_linked_spans() {
    let (url, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let out = {
        let (dir, url) = (dir.path().to_owned(), url.clone());
        tokio::task::spawn_blocking(move || {
            run(&dir, &[("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str())])
        })
        .await
        .unwrap()
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The process sent what it had before it exited.
    let received = received.lock().unwrap();
    assert!(
        received
            .content_types
            .iter()
            .all(|t| t == "application/x-protobuf"),
        "{:?}",
        received.content_types
    );
    assert!(received.services.iter().all(|s| s == "infinity"));
    let spans = &received.spans;
    let by_id: HashMap<&[u8], &Span> = spans.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    let parent = |span: &Span| by_id.get(span.parent_span_id.as_slice()).copied();
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };

    // A slice per batch of a thread's inputs, each a trace of its own: the root's first (the
    // message), the child's, the root's on the child's report, the child's on its call's
    // result.
    let slices = named("invoke_agent tracer");
    assert!(
        slices.len() >= 4,
        "{:#?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    for slice in &slices {
        assert!(slice.parent_span_id.is_empty(), "a slice is a root span");
        assert_eq!(string(slice, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(string(slice, "gen_ai.agent.name"), "tracer");
        assert_eq!(string(slice, "gen_ai.conversation.id"), "main");
        assert!(!string(slice, "infinity.input.ids").is_empty());
        assert!(int(slice, "infinity.thread.version") >= 1);
    }
    let first = slices
        .iter()
        .find(|s| strings(s, "infinity.input.types") == ["user_message"])
        .expect("the slice of the person's message");
    assert_eq!(string(first, "infinity.thread.id"), "main");
    let child_id = slices
        .iter()
        .map(|s| string(s, "infinity.thread.id"))
        .find(|t| t != "main")
        .expect("a slice of the child");
    assert!(child_id.starts_with("t-"), "{child_id}");

    // Completions: under their slice, after GenAI's conventions, priced.
    // (A script's model is named by its path.)
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat ") && s.name.ends_with("/s.yaml"))
        .collect();
    assert!(chats.len() >= 4, "{}", chats.len());
    for chat in &chats {
        let slice = parent(chat).expect("a completion's parent is in the export");
        assert_eq!(slice.name, "invoke_agent tracer");
        assert_eq!(slice.trace_id, chat.trace_id);
        assert_eq!(string(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(string(chat, "gen_ai.provider.name"), "infinity.script");
        assert_eq!(
            chat.name,
            format!("chat {}", string(chat, "gen_ai.request.model"))
        );
        assert!(int(chat, "gen_ai.usage.input_tokens") >= 0);
        assert_eq!(int(chat, "gen_ai.usage.output_tokens"), 0);
        assert_eq!(int(chat, "gen_ai.usage.cache_read.input_tokens"), 0);
        assert!(matches!(
            attributes(chat).get("infinity.cost.usd"),
            Some(Any::DoubleValue(cost)) if *cost >= 0.0
        ));
        let reasons = strings(chat, "gen_ai.response.finish_reasons");
        assert!(
            reasons == ["tool_calls"] || reasons == ["stop"],
            "{reasons:?}"
        );
        // OpenTelemetry's client kind.
        assert_eq!(chat.kind, 3, "SPAN_KIND_CLIENT");
    }
    let first_chat = chats
        .iter()
        .find(|c| c.parent_span_id == first.span_id)
        .expect("the first slice's completion");
    assert_eq!(
        strings(first_chat, "gen_ai.response.finish_reasons"),
        ["tool_calls"]
    );

    // Tool calls: under the slice that ran them; the child's report is dispatched, and the
    // span of its result, in a later slice (another trace), links back to it.
    let spawn = named("execute_tool spawn_thread");
    assert_eq!(spawn.len(), 1);
    assert_eq!(parent(spawn[0]).unwrap().span_id, first.span_id);
    assert_eq!(string(spawn[0], "gen_ai.tool.name"), "spawn_thread");
    assert_eq!(string(spawn[0], "infinity.tool.outcome"), "result");
    assert!(string(spawn[0], "gen_ai.tool.call.id").starts_with("call-"));
    let report = named("execute_tool report_to_parent");
    assert_eq!(report.len(), 1);
    assert_eq!(string(report[0], "infinity.tool.outcome"), "dispatched");
    let call_id = string(report[0], "gen_ai.tool.call.id");
    let results = named("tool_result report_to_parent");
    assert_eq!(results.len(), 1, "the result's arrival");
    let result = results[0];
    assert_eq!(string(result, "gen_ai.tool.call.id"), call_id);
    assert_ne!(result.trace_id, report[0].trace_id, "a later slice");
    assert_eq!(result.links.len(), 1, "{:?}", result.links);
    assert_eq!(result.links[0].trace_id, report[0].trace_id);
    assert_eq!(result.links[0].span_id, report[0].span_id);
    assert_eq!(
        string(parent(result).unwrap(), "infinity.thread.id"),
        child_id
    );

    // Effects: under the slice that committed them; the first slice sends the child its seed.
    let sends = named("effect send");
    assert!(!sends.is_empty());
    let seeded = sends
        .iter()
        .find(|s| strings(s, "infinity.input.types").contains(&"child_seed".to_owned()))
        .expect("the child's seed sent");
    assert_eq!(parent(seeded).unwrap().span_id, first.span_id);
    assert!(!strings(seeded, "infinity.effect.ids").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_endpoint_or_with_traces_turned_off_nothing_is_sent() {
    let (url, received) = receiver().await;
    for env in [
        vec![],
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
            ("OTEL_SDK_DISABLED", "true"),
        ],
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", url.as_str()),
            ("OTEL_TRACES_EXPORTER", "none"),
        ],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let env: Vec<(String, String)> = env
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let path = dir.path().to_owned();
        let out = tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            run(&path, &env)
        })
        .await
        .unwrap();
        assert!(out.status.success());
    }
    // (The same run with the endpoint alone sends its spans: the test above.)
    assert!(received.lock().unwrap().spans.is_empty());
}

/// A collector that is not there (nothing listens on its port) costs the run nothing but the
/// spans: it answers as usual and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_does_not_fail_the_run() {
    let nowhere = format!("http://127.0.0.1:{}", crate::common::free_port());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let out = tokio::task::spawn_blocking(move || {
        run(
            &path,
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", nowhere.as_str()),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ],
        )
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("noted"), "{stdout}");
}
