//! A stack's remotes in its table (`TableRemotes`), on the emulator: a dispatch performed twice
//! queues one run, orders come in order and once, a kill reaches the remote, reports are taken
//! once and only from the run's own remote, and a remote that goes away takes its runs with it.
//! (`infinity-cli`'s `stack_remote` tests run real remotes and commands through the API.)

use std::time::Duration;

use infinity_agent_core::ids::CallId;
use infinity_aws::remotes::TableRemotes;
use infinity_library::remote::{ExecCall, HubError, Order, RemoteDirectory, RemoteHub, Report};

use crate::harness::{stack, tid};

fn call(remote: &str, call: &str) -> ExecCall {
    ExecCall {
        thread: tid("ops"),
        call: CallId::new(call).unwrap(),
        remote_id: remote.to_owned(),
        remote_name: "box".to_owned(),
        command: "echo hi".to_owned(),
        description: String::new(),
        timeout_seconds: 60,
        approved: true,
        asks: String::new(),
    }
}

fn report() -> Report {
    Report {
        status: "exited".to_owned(),
        exit_code: Some(0),
        stdout: "hi\n".to_owned(),
        stderr: String::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stacks_remotes_take_each_order_once() {
    let Some(s) = stack("rules: []").await else {
        return;
    };
    let hub = TableRemotes::new(&s.clients, &s.config);
    let id = hub.connect("box", true).await.unwrap();
    let listed = hub.remotes().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].online && listed[0].exec && listed[0].name == "box");

    // The same call performed twice (an outbox retried) queues one run.
    hub.dispatch(call(&id, "c1")).await.unwrap();
    hub.dispatch(call(&id, "c1")).await.unwrap();
    hub.dispatch(call(&id, "c2")).await.unwrap();
    let orders = hub.poll(&id, Duration::from_secs(2)).await.unwrap();
    let runs: Vec<&str> = orders
        .iter()
        .map(|o| match o {
            Order::Run { run_id, .. } => run_id.as_str(),
            Order::Kill { .. } => panic!("{orders:?}"),
        })
        .collect();
    assert_eq!(runs.len(), 2, "{orders:?}");
    assert_ne!(runs[0], runs[1]);
    let (first, second) = (runs[0].to_owned(), runs[1].to_owned());
    assert!(
        hub.poll(&id, Duration::from_secs(1))
            .await
            .unwrap()
            .is_empty(),
        "an order is taken once"
    );

    // Stopping a call sends its remote a kill.
    hub.cancel(&tid("ops"), &CallId::new("c2").unwrap()).await;
    let orders = hub.poll(&id, Duration::from_secs(2)).await.unwrap();
    assert_eq!(orders.len(), 1, "{orders:?}");
    assert!(matches!(&orders[0], Order::Kill { run_id } if *run_id == second || *run_id == first));

    // Reports: only from the run's remote, once.
    let other = hub.connect("other", true).await.unwrap();
    let err = hub.report(&other, &first, report()).await.unwrap_err();
    assert!(matches!(err, HubError::NotFound(_)), "{err}");
    hub.report(&id, &first, report()).await.unwrap();
    let err = hub.report(&id, &first, report()).await.unwrap_err();
    assert!(err.to_string().contains("has no run"), "{err}");

    // Gone: its polls are refused, its runs answered (not left for a report), new calls refused.
    hub.disconnect(&id).await.unwrap();
    let err = hub.poll(&id, Duration::from_secs(1)).await.unwrap_err();
    assert!(err.to_string().contains("connect again"), "{err}");
    let err = hub.report(&id, &second, report()).await.unwrap_err();
    assert!(matches!(err, HubError::NotFound(_)), "{err}");
    let listed = hub.remotes().await.unwrap();
    assert!(listed.iter().any(|r| r.id == id && !r.online));
    let err = hub.dispatch(call("rm-nobody", "c3")).await.unwrap_err();
    assert!(err.to_string().contains("not connected any more"), "{err}");
    // A question needs the API's address to take the answer.
    let mut config = s.config.clone();
    config.api_url = None;
    let mut asking = call(&other, "c4");
    asking.approved = false;
    let err = TableRemotes::new(&s.clients, &config)
        .dispatch(asking)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("INFINITY_API_URL"), "{err}");
}
