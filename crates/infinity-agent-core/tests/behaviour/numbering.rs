//! The events a thread shows are numbered in order and kept with its commits; a slice that
//! fails after showing some withdraws them, and the numbers are given again.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelErrorKind, ModelProvider,
};
use infinity_agent_core::runtime::{AgentSystemBuilder, Front};
use infinity_agent_core::scripted::ScriptedModel;

use crate::behaviour::harness::{describe, tid};

/// Unavailable (however often it is asked) while `down`; otherwise the script answers.
#[derive(Debug)]
struct Outage {
    inner: ScriptedModel,
    down: AtomicBool,
}

#[async_trait]
impl ModelProvider for Outage {
    fn name(&self) -> &str {
        "outage"
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(ModelError::retryable(
                ModelErrorKind::Unavailable,
                "overloaded",
            ));
        }
        self.inner.complete(request).await
    }
}

fn drain(rx: &mut tokio::sync::mpsc::UnboundedReceiver<OutputEvent>) -> Vec<OutputEvent> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[tokio::test(start_paused = true)]
async fn a_failed_slice_withdraws_what_it_showed_and_the_numbers_are_given_again() {
    let model = Arc::new(Outage {
        inner: ScriptedModel::parse("rules: [{reply: {text: hello}}]", Path::new("s.yaml"))
            .unwrap(),
        down: AtomicBool::new(true),
    });
    let system = AgentSystemBuilder::new()
        .with_agent(AgentSpec::new("a", "", model.clone()))
        .with_tokio_sleep_tools()
        .build()
        .await
        .unwrap();
    let mut events = system.subscribe();
    let main = tid("main");

    // The message is shown (numbered 1) before the model is asked; the model stays down, the
    // slice fails, and what it showed is withdrawn.
    system.send_user_message(&main, "hi").await.unwrap();
    system.wait_idle(None).await;
    let failed = drain(&mut events);
    let lines: Vec<String> = failed.iter().map(describe).collect();
    assert_eq!(failed[0].seq, Some(1), "{lines:#?}");
    assert!(
        failed
            .iter()
            .any(|e| e.kind == OutputKind::Withdrawn { after: 0 } && e.seq.is_none()),
        "{lines:#?}"
    );
    assert!(
        system
            .threads()
            .events_after(&main, 0, 10)
            .await
            .unwrap()
            .is_empty(),
        "nothing of the failed slice is kept"
    );

    // Up again: the next slice numbers from 1 again, and what it shows is kept.
    model.down.store(false, Ordering::SeqCst);
    system.send_user_message(&main, "again").await.unwrap();
    system.wait_idle(None).await;
    let shown: Vec<OutputEvent> = drain(&mut events)
        .into_iter()
        .filter(|e| e.seq.is_some())
        .collect();
    let numbers: Vec<u64> = shown.iter().filter_map(|e| e.seq).collect();
    assert_eq!(numbers, (1..=numbers.len() as u64).collect::<Vec<_>>());
    let kept = system.threads().events_after(&main, 0, 100).await.unwrap();
    assert_eq!(
        kept, shown,
        "the store keeps exactly what was shown, numbered alike"
    );
    let record = system.threads().load_record(&main).await.unwrap().unwrap();
    assert_eq!(record.last_event_seq, *numbers.last().unwrap());
    assert!(kept.iter().any(|e| e.kind
        == OutputKind::AssistantText {
            text: "hello".into()
        }));
    // Following the thread now: nothing running, so nothing shown beyond the store.
    let following = system.follow(&main);
    assert!(following.shown.is_empty() && following.partial.is_empty());
}
