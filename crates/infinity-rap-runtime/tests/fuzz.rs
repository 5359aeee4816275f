//! The RAP parsers and the callback receiver on damaged and arbitrary input: no panic, no hang;
//! a callback the receiver accepts queues exactly one input, for the thread its URL names; any
//! other body gets a 4xx naming what is wrong.
//!
//! `PROPTEST_CASES=100000 cargo test -p infinity-rap-runtime --test integration fuzz::` runs
//! longer.

use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::testing::{cases, mutated, noise, RecordingQueue};
use infinity_rap::signing::CallbackSigner;
use infinity_rap::wire;
use infinity_rap_runtime::receiver::{handle, Signature};
use proptest::prelude::*;

const CALLBACKS: &[&str] = &[
    r#"{"type":"tool_result","group_id":"t","id":"c","text":"done","display_as":[{"type":"text","content":"ok"}]}"#,
    r#"{"type":"tool_result","group_id":"t","id":"c","call_id":null,"content":[{"type":"text","text":"a"},{"type":"image","data":"AAAA","mediaType":"image/png"}]}"#,
    r#"{"type":"subscription_event","group_id":"t","tool_call_id":"c","text":"tick","associative":true,"final":false}"#,
    r#"{"type":"oauth","group_id":"t","id":"c","auth_url":"https://auth.example/a?b=c"}"#,
    r#"{"type":"user_choice","group_id":"t","id":"c","prompt":"ok?","choices":["yes","no"],"default":1,"response_url":"http://127.0.0.1:1/r"}"#,
    r#"{"type":"view_update","group_id":"t","view_type":"diff","content":{"patch":"-a\n+b"}}"#,
];

const MANIFESTS: &[&str] = &[
    r#"{"name":"tools","endpoint":"https://tools.example/invoke","tools":[{"name":"get_time","description":"now","inputSchema":{"type":"object","properties":{"tz":{"type":"string"}}}}]}"#,
];

const INVOCATIONS: &[&str] = &[
    r#"{"operation":"get_time","arguments":{"tz":"UTC"},"id":"c","call_id":null,"callback_url":"https://rt.example/cb","group_id":"t","thread_ancestors":["r"],"user_id":"u"}"#,
];

/// Runs one body through the receiver with a valid signature for thread `t`, call `c`.
fn receive(body: &[u8]) -> (infinity_rap_runtime::receiver::Reply, Vec<Input>) {
    let signer = CallbackSigner::new(vec![7u8; 32], "https://rt.example/cb").unwrap();
    let url = signer.url_for("t", "c", 1_000);
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    let signature = Signature {
        exp: param("exp"),
        sig: param("sig"),
    };
    let queue = RecordingQueue::default();
    let reply = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(handle(
            &signer, &queue, "t", "c", &signature, None, body, 1_000,
        ));
    let queued = queue.inputs();
    (reply, queued)
}

#[test]
fn the_undamaged_samples_are_accepted() {
    for sample in CALLBACKS {
        let (reply, queued) = receive(sample.as_bytes());
        assert_eq!(reply.status, 200, "{sample}: {reply:?}");
        assert_eq!(queued.len(), 1, "{sample}");
    }
}

proptest! {
    #![proptest_config(cases(2000))]

    #[test]
    fn wire_messages(bytes in prop_oneof![mutated(CALLBACKS), mutated(MANIFESTS), mutated(INVOCATIONS), noise(400)]) {
        let _ = wire::parse_callback(&bytes);
        let _ = wire::parse_manifest(&bytes);
        let _ = wire::parse_invocation(&bytes);
    }

    #[test]
    fn the_receiver(body in prop_oneof![mutated(CALLBACKS), noise(300)]) {
        let (reply, queued) = receive(&body);
        if reply.status == 200 {
            prop_assert!(queued.len() <= 1);
            prop_assert!(queued.iter().all(|i| i.thread_id.as_str() == "t"));
        } else {
            prop_assert!((400..500).contains(&reply.status), "{reply:?}");
            // At most an error result for the call, so it does not wait for ever.
            prop_assert!(queued.len() <= 1);
            let error_results = queued.iter().all(|i| matches!(&i.body,
                InputBody::ToolResult { call_id, is_error: true, .. } if call_id.as_str() == "c"));
            prop_assert!(error_results, "{queued:?}");
            prop_assert!(!reply.body.is_empty());
        }
    }
}
