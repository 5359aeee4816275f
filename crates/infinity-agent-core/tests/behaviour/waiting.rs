//! What would wake each thread of a tree (`store::waiting`): a root's timer and its running
//! child, and a child that stopped without reporting flagged as stuck.

use infinity_agent_core::runtime::Front;
use infinity_agent_core::store::waiting;

use crate::behaviour::harness::{start, tid};

const SCRIPT: &str = r#"
rules:
  - thread: child
    when: "Your task: quick"
    reply: {text: "done, but I never report"}
  - thread: root
    when: "^go$"
    reply:
      tool_calls:
        - {name: spawn_thread, args: {instructions: "quick", child_of: "${stack}"}}
        - {name: sleep, args: {seconds: 3600}}
  - reply: {text: "ok"}
"#;

#[tokio::test(start_paused = true)]
async fn a_tree_says_what_would_wake_each_thread_and_which_is_stuck() {
    let mut h = start(SCRIPT).await;
    h.system.send_user_message(&tid("t"), "go").await.unwrap();
    // Until the child has answered; the root's hour-long sleep still runs.
    h.run_for(60).await;
    let kid = h.children("t").pop().expect("a child");
    let threads = waiting(Front::threads(&h.system), &tid("t"))
        .await
        .unwrap()
        .unwrap();
    let ids: Vec<&str> = threads.iter().map(|w| w.thread_id.as_str()).collect();
    assert_eq!(ids, ["t", kid.as_str()]);
    let root = &threads[0];
    assert_eq!(root.timers.len(), 1, "{root:?}");
    assert_eq!(root.timers[0].tool, "sleep");
    assert_eq!(root.children[0].as_str(), kid);
    assert!(root.stuck.is_none());
    let child = &threads[1];
    assert!(
        child
            .stuck
            .as_deref()
            .unwrap()
            .contains("waiting on nothing"),
        "{child:?}"
    );
    assert!(waiting(Front::threads(&h.system), &tid("nobody"))
        .await
        .unwrap()
        .is_none());
}
