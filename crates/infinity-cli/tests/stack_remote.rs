//! The `remote` category on a stack (the local stack: the emulators, the real agent handler in
//! this process), its remotes kept in the stack's table:
//! - through the stack's API function, the real binary started as Lambda starts it, several
//!   instances at once (a remote's long poll holds one), behind a stand-in Function URL, and the
//!   schedule's sweep as Lambda receives it: rules, approvals, a timeout, a remote without
//!   `--exec`, and a remote that drops mid-run;
//! - through `infinity serve --aws`: closing a conversation kills its running command.

use crate::aws_stack;
use crate::common;
use crate::lambda;
use crate::remotes;

use std::sync::Arc;
use std::time::Duration;

use aws_stack::stack_with;
use infinity_test_support::{repo, Api};
use lambda::{ask, function_url_on, ApiFunction};
use remotes::{AGENT, SCRIPT};
use serde_json::json;

/// The agent file's script sits beside it as `ops.script.yaml`.
fn agent() -> String {
    AGENT.replace("ops.script.yaml", "script.yaml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stacks_remotes_run_commands_through_the_api_function() {
    // The questions' answers come back to the API's URL, which the agent handler must know.
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let Some(stack) = stack_with(&agent(), SCRIPT, &[("INFINITY_API_URL", url.clone())]).await
    else {
        return;
    };
    let function = ApiFunction::start_instances(&stack.env, 5).await;
    assert_eq!(
        function_url_on(Arc::clone(&function.runtime), port).await,
        url
    );
    // EventBridge's schedule, faster: the sweep answers runs whose remote went away.
    let runtime = Arc::clone(&function.runtime);
    let schedule = tokio::spawn(async move {
        for n in 0.. {
            let event = json!({"version": "0", "id": format!("sweep{n}"), "source": "aws.events",
                               "detail-type": "Scheduled Event", "detail": {}});
            let answer = ask(Arc::clone(&runtime), format!("sweep{n}"), event).await;
            assert!(answer["swept"].is_u64(), "{answer}");
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
    let api = Api::new(&url, Some("s3cret-token"));
    // Without the token, no remote connects.
    let intruder = json!({"name": "intruder", "exec": true});
    let (status, _) = Api::new(&url, None).post_json("/remotes", &intruder).await;
    assert_eq!(status, 401);
    remotes::commands_run_with_rules_approvals_timeouts_and_drops(&api).await;
    assert!(!schedule.is_finished(), "the sweeps all answered");
    schedule.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_aws_stops_a_remote_command_when_its_conversation_closes() {
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}");
    let Some(stack) = stack_with(&agent(), SCRIPT, &[("INFINITY_API_URL", url.clone())]).await
    else {
        return;
    };
    let env: Vec<(String, String)> = stack.env.clone().into_iter().collect();
    let (_server, served) = common::serve_on(&repo(), &["--aws"], &env, port).await;
    assert_eq!(served, url);
    remotes::closing_a_conversation_kills_its_command(&Api::new(&url, None)).await;
}
