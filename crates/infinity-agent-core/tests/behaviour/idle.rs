//! `wait_idle` never reports idle while work is in transit: a thread that sleeps a few
//! milliseconds in a loop keeps the system busy until the deadline (real time, real threads; the
//! race was between the timer task moving an input into a queue and the idle check).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystemBuilder, WaitOutcome};
use infinity_agent_core::scripted::ScriptedModel;

const LOOP: &str = "rules:\n  - reply: {tool_calls: [{name: sleep, args: {seconds: 0.003}}]}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_loop_is_never_reported_idle() {
    for round in 0..8 {
        let model = ScriptedModel::parse(LOOP, Path::new("loop.yaml")).unwrap();
        let system = AgentSystemBuilder::new()
            .with_agent(AgentSpec::new("looper", "", Arc::new(model)))
            .with_tokio_sleep_tools()
            .build()
            .await
            .unwrap();
        let thread = ThreadId::new(format!("loop-{round}")).unwrap();
        system.send_user_message(&thread, "go").await.unwrap();
        let started = tokio::time::Instant::now();
        let deadline = started + Duration::from_millis(400);
        let outcome = system.wait_idle(Some(deadline)).await;
        let waited = started.elapsed();
        match outcome {
            WaitOutcome::TimedOut
            | WaitOutcome::Idle {
                next_timer: Some(_),
            } => {}
            WaitOutcome::Idle { next_timer: None } => {
                panic!("round {round}: reported idle after {waited:?} with the loop still running")
            }
        }
        assert!(
            waited >= Duration::from_millis(390),
            "round {round}: returned after {waited:?}: {outcome:?}"
        );
    }
}
