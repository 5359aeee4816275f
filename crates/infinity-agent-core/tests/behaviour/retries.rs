//! A model that is briefly unavailable is asked again within the slice: nothing the slice
//! showed is shown twice, and the answer comes once.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelErrorKind, ModelProvider, Streamed, TextSink,
};
use infinity_agent_core::runtime::AgentSystemBuilder;
use infinity_agent_core::scripted::ScriptedModel;

use crate::behaviour::harness::{count, describe, tid};

/// Unavailable for the first `failures` calls, then the script answers.
#[derive(Debug)]
struct Flaky {
    inner: ScriptedModel,
    failures: u32,
    calls: AtomicU32,
}

#[async_trait]
impl ModelProvider for Flaky {
    fn name(&self) -> &str {
        "flaky"
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.failures {
            return Err(ModelError::retryable(
                ModelErrorKind::Unavailable,
                "overloaded",
            ));
        }
        self.inner.complete(request).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_briefly_unavailable_model_shows_nothing_twice() {
    let model = Arc::new(Flaky {
        inner: ScriptedModel::parse("rules: [{reply: {text: hello}}]", Path::new("s.yaml"))
            .unwrap(),
        failures: 2,
        calls: AtomicU32::new(0),
    });
    let system = AgentSystemBuilder::new()
        .with_agent(AgentSpec::new("a", "", model.clone()))
        .with_tokio_sleep_tools()
        .build()
        .await
        .unwrap();
    let mut events = system.subscribe();
    system.send_user_message(&tid("main"), "hi").await.unwrap();
    system.wait_idle(None).await;
    let mut lines = Vec::new();
    while let Ok(event) = events.try_recv() {
        lines.push(describe(&event));
    }
    assert_eq!(model.calls.load(Ordering::SeqCst), 3);
    assert_eq!(count(&lines, "user: hi"), 1, "{lines:#?}");
    assert_eq!(count(&lines, "assistant: hello"), 1, "{lines:#?}");
    assert_eq!(count(&lines, "ERROR"), 0, "{lines:#?}");
}

/// Streams a few words and breaks off on the first call, then answers as the script says.
#[derive(Debug)]
struct BreaksOff {
    inner: ScriptedModel,
    calls: AtomicU32,
}

#[async_trait]
impl ModelProvider for BreaksOff {
    fn name(&self) -> &str {
        "breaks-off"
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        self.inner.complete(request).await
    }

    async fn complete_streaming(
        &self,
        request: CompletionRequest<'_>,
        on_text: &TextSink<'_>,
    ) -> Result<Completion, ModelError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            on_text(Streamed::Text("Half an "));
            return Err(ModelError::retryable(
                ModelErrorKind::Network,
                "the stream broke",
            ));
        }
        self.inner.complete_streaming(request, on_text).await
    }
}

#[tokio::test(start_paused = true)]
async fn text_streamed_before_a_failure_is_withdrawn_so_the_pieces_add_up() {
    let model = Arc::new(BreaksOff {
        inner: ScriptedModel::parse(
            "rules: [{reply: {text: 'the whole answer'}}]",
            Path::new("s.yaml"),
        )
        .unwrap(),
        calls: AtomicU32::new(0),
    });
    let system = AgentSystemBuilder::new()
        .with_agent(AgentSpec::new("a", "", model.clone()))
        .with_tokio_sleep_tools()
        .build()
        .await
        .unwrap();
    let mut events = system.subscribe();
    system.send_user_message(&tid("main"), "hi").await.unwrap();
    system.wait_idle(None).await;
    let mut lines = Vec::new();
    while let Ok(event) = events.try_recv() {
        lines.push(describe(&event));
    }

    assert_eq!(model.calls.load(Ordering::SeqCst), 2);
    let restart = lines.iter().position(|l| l == "restarted");
    let restart = restart.unwrap_or_else(|| panic!("no restart in {lines:#?}"));
    assert_eq!(lines[restart - 1], "delta: Half an ", "{lines:#?}");
    // What a display adds up after the restart is the text, once.
    let after: String = lines[restart..]
        .iter()
        .filter_map(|l| l.strip_prefix("delta: "))
        .collect();
    assert_eq!(after, "the whole answer", "{lines:#?}");
    assert_eq!(
        count(&lines, "assistant: the whole answer"),
        1,
        "{lines:#?}"
    );
}
