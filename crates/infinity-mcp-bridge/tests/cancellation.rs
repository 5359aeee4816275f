//! A call the runtime cancels gets no callback.

use crate::support;

use infinity_rap::kit::testing::invocation;
use serde_json::json;
use support::{bridged_tiny_server, QUIET};

#[tokio::test]
async fn a_cancelled_call_sends_nothing() {
    let (server, sink) = bridged_tiny_server().await;
    let body = invocation("slow", json!({}), "thread_1", "call_1", sink.url());
    assert_eq!(server.invoke(&body).await.unwrap(), 200);
    tokio::time::sleep(QUIET).await;
    assert!(server.tool_call_status("thread_1", "call_1").await.unwrap());

    assert_eq!(
        server.cancel_tool_call("thread_1", "call_1").await.unwrap(),
        200
    );

    assert!(sink.wait_for(1, QUIET).await.is_empty());
    assert!(!server.tool_call_status("thread_1", "call_1").await.unwrap());
}
