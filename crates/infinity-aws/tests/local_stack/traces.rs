//! Traces from the AWS host: the agent function's binary, started as Lambda starts it under a
//! stand-in of Lambda's runtime API, runs an SQS batch on the emulated stack and has sent the
//! slice's spans over OTLP by the time it answers the invocation (its environment may freeze
//! right after), though its exporter would otherwise wait a minute before sending.

use std::process::{Command, Stdio};
use std::time::Duration;

use infinity_agent_core::testing::otlp::{int, receiver, string, strings};
use infinity_aws::testing as runtime_api;
use serde_json::json;

use crate::harness;

/// Kills the function's process when the test ends.
struct Process(std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_function_sends_an_invocations_spans_before_it_answers() {
    let Some(env) = harness::fresh_env() else {
        return;
    };
    let (otlp, received) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - reply: {text: \"traced\"}\n",
    )
    .unwrap();
    let agent = dir.path().join("agent.yaml");
    std::fs::write(&agent, "name: tester\nmodel: script:script.yaml\n").unwrap();

    let (address, runtime) = runtime_api::start(
        "arn:aws:lambda:us-east-1:123456789012:function:agent",
        Duration::from_secs(60),
    )
    .await;
    let _function = Process(
        Command::new(env!("CARGO_BIN_EXE_infinity-agent-lambda"))
            .envs(&env)
            .env("INFINITY_AGENT_FILE", &agent)
            .env("AWS_LAMBDA_RUNTIME_API", &address)
            .env("AWS_LAMBDA_FUNCTION_NAME", "agent")
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
            // Batches would wait a minute: only the flush before the answer sends them in time.
            .env("OTEL_BSP_SCHEDULE_DELAY", "60000")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // An SQS batch of one message, as the event source mapping hands it over.
    let body = json!({"type": "user_message", "thread_id": "traced", "text": "hello",
                      "id": "msg-traced-1"});
    let event = json!({"Records": [{
        "messageId": "m-1",
        "receiptHandle": "r-1",
        "body": body.to_string(),
        "attributes": {"MessageGroupId": "traced", "ApproximateReceiveCount": "1",
                       "SentTimestamp": "0", "SenderId": "s",
                       "ApproximateFirstReceiveTimestamp": "0"},
        "messageAttributes": {},
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:input.fifo",
        "awsRegion": "us-east-1"
    }]});
    let answer = runtime_api::ask(runtime, "inv-1".to_owned(), event).await;
    assert_eq!(answer["batchItemFailures"], json!([]), "{answer}");

    // At the answer, the spans are there already.
    let received = received.lock().unwrap();
    assert!(
        received.services.iter().all(|s| s == "agent"),
        "{:?}",
        received.services
    );
    let slice = received
        .spans
        .iter()
        .find(|s| s.name == "invoke_agent tester")
        .unwrap_or_else(|| panic!("no slice span in {:?}", received.spans));
    assert_eq!(string(slice, "infinity.thread.id"), "traced");
    assert_eq!(string(slice, "gen_ai.conversation.id"), "traced");
    assert_eq!(string(slice, "infinity.input.ids"), "msg-traced-1");
    assert_eq!(strings(slice, "infinity.input.types"), ["user_message"]);
    assert_eq!(int(slice, "infinity.thread.version"), 1);
    let chat = received
        .spans
        .iter()
        .find(|s| s.name.starts_with("chat ") && s.parent_span_id == slice.span_id)
        .expect("the completion's span under the slice");
    assert_eq!(strings(chat, "gen_ai.response.finish_reasons"), ["stop"]);
    assert!(
        received
            .spans
            .iter()
            .any(|s| s.name == "effect output" && s.parent_span_id == slice.span_id),
        "the reply published on the output queue, under the slice"
    );
}
