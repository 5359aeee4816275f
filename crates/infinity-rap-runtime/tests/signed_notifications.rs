//! Signed notifications over real HTTP: the runtime's client invokes a tool of a kit server,
//! whose callbacks reach the runtime's receiver; the kit learns the thread's notification key
//! from the callback URL, and from then on only a notification signed with that key, recently,
//! cancels anything.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Query;
use axum::http::{StatusCode, Uri};
use infinity_agent_core::effect::{Notification, ServerTarget, ToolInvocation};
use infinity_agent_core::host::ToolDispatcher;
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::input::InputBody;
use infinity_agent_core::testing::RecordingQueue;
use infinity_rap::kit::testing::{invocation, CallbackSink, LocalServer};
use infinity_rap::kit::{tool_definition, Call, ToolServer};
use infinity_rap::signing::{CallbackSigner, NotificationKey, NOTIFICATION_SIGNATURE_HEADER};
use infinity_rap_runtime::client::RapClient;
use infinity_rap_runtime::receiver::Signature;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const SECRET: &[u8] = b"a test secret of thirty-two bytes or more";
/// Long enough for anything that should happen to happen.
const PATIENCE: Duration = Duration::from_secs(5);
/// How long to watch for something that should not happen.
const QUIET: Duration = Duration::from_millis(300);

/// The runtime's side (a client and a callback receiver) and a kit server whose `wait` tool
/// subscribes, then reports its call id once cancelled.
struct World {
    signer: CallbackSigner,
    client: RapClient,
    queue: Arc<RecordingQueue>,
    kit: LocalServer,
    cancellations: mpsc::UnboundedReceiver<String>,
    http: reqwest::Client,
}

impl World {
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let receiver_url = format!("http://{}", listener.local_addr().unwrap());
        let signer = CallbackSigner::new(SECRET.to_vec(), &receiver_url).unwrap();
        let queue = Arc::new(RecordingQueue::default());
        let receiver = infinity_rap_runtime::receiver::router(signer.clone(), queue.clone());
        tokio::spawn(async move { axum::serve(listener, receiver).await.unwrap() });

        let (cancelled, cancellations) = mpsc::unbounded_channel();
        let tools = ToolServer::new("wait-tools", "Waits").tool(
            tool_definition("wait", "Waits to be cancelled", json!({"type": "object"})),
            move |call: Call| {
                let cancelled = cancelled.clone();
                async move {
                    call.subscribed("waiting").await.unwrap();
                    call.cancelled().await;
                    cancelled.send(call.id().to_owned()).unwrap();
                }
            },
        );
        let kit = LocalServer::start(tools).await.unwrap();
        let client = RapClient::new(signer.clone()).with_server(kit.base_url(), None);
        World {
            signer,
            client,
            queue,
            kit,
            cancellations,
            http: reqwest::Client::new(),
        }
    }

    /// Invokes `wait` for the call `call` of `thread` as the runtime does, and waits until its
    /// subscribing result went through the receiver: the kit has the call and the key.
    async fn invoke(&self, thread: &str, call: &str) {
        let thread_id = ThreadId::new(thread).unwrap();
        let invocation = ToolInvocation {
            thread_id: thread_id.clone(),
            lineage: vec![thread_id],
            call_id: CallId::new(call).unwrap(),
            tool: "wait".to_owned(),
            args: json!({}),
            server: Some(ServerTarget {
                base_url: self.kit.base_url().to_owned(),
                endpoint: format!("{}/invoke", self.kit.base_url()),
            }),
            notify_key: None,
        };
        self.client.dispatch(&invocation).await.unwrap();
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !self.queue.inputs().iter().any(|input| {
            matches!(&input.body, InputBody::ToolResult { call_id, subscription: true, .. }
                if call_id.as_str() == call)
        }) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the subscribing result of {call} never reached the receiver"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The key the kit was handed for `thread`, as the runtime derives it.
    fn key(&self, thread: &str) -> NotificationKey {
        let key = self.signer.notification_key(thread, self.kit.base_url());
        NotificationKey::parse(&key).unwrap()
    }

    /// POSTs `notice` to the kit's `path` with `signature` (if any) over its exact bytes: the
    /// answer's status and text.
    async fn post(
        &self,
        path: &str,
        body: &[u8],
        signature: Option<String>,
    ) -> (StatusCode, String) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.kit.base_url()))
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(signature) = signature {
            request = request.header(NOTIFICATION_SIGNATURE_HEADER, signature);
        }
        let response = request.send().await.unwrap();
        (response.status(), response.text().await.unwrap())
    }

    /// Sends the forgeries of a notification about `thread` whose body is `notice`, each of
    /// which must get 401 with a reason: unsigned, signed with another deployment's key, with
    /// the key for another server, with a stale or a future time, and signed over another body.
    async fn forgeries_are_refused(&self, path: &str, thread: &str, notice: &Value) {
        let body = serde_json::to_vec(notice).unwrap();
        let now = jiff::Timestamp::now().as_second();
        let key = self.key(thread);
        let other_deployment =
            CallbackSigner::new(b"another secret, 32 bytes or more".to_vec(), "http://x").unwrap();
        let stolen = other_deployment.notification_key(thread, self.kit.base_url());
        let stolen = NotificationKey::parse(&stolen).unwrap();
        let other_server = self
            .signer
            .notification_key(thread, "http://tools.example.com");
        let other_server = NotificationKey::parse(&other_server).unwrap();
        let mut other_body = notice.clone();
        other_body["thread_id"] = json!("a_thread_of_no_interest");
        let other_body = serde_json::to_vec(&other_body).unwrap();

        let forgeries = [
            ("unsigned", None, "not signed"),
            ("malformed", Some("v1=00".to_owned()), "is not `t="),
            (
                "another deployment's key",
                Some(stolen.sign(&body, now)),
                "does not match",
            ),
            (
                "another server's key",
                Some(other_server.sign(&body, now)),
                "does not match",
            ),
            ("stale", Some(key.sign(&body, now - 400)), "more than 300 s"),
            (
                "from the future",
                Some(key.sign(&body, now + 400)),
                "more than 300 s",
            ),
            (
                "signed over another body",
                Some(key.sign(&other_body, now)),
                "does not match",
            ),
        ];
        for (what, signature, reason) in forgeries {
            let (status, text) = self.post(path, &body, signature).await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {text}");
            assert!(text.contains(reason), "{what}: {text}");
        }
    }

    async fn next_cancellation(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.cancellations.recv())
            .await
            .expect("a cancellation in time")
            .unwrap()
    }

    async fn no_cancellation(&mut self) {
        tokio::time::sleep(QUIET).await;
        assert!(
            self.cancellations.try_recv().is_err(),
            "a call was cancelled"
        );
    }
}

fn thread_id(thread: &str) -> ThreadId {
    ThreadId::new(thread).unwrap()
}

#[test]
fn the_receiver_reads_callback_urls_with_a_notification_key() {
    let uri: Uri = "http://127.0.0.1:9/rap/callback/main/call_1?exp=1772000000&sig=6f3a&nk=9c1e"
        .parse()
        .unwrap();
    let Query(signature) = Query::<Signature>::try_from_uri(&uri).unwrap();
    assert_eq!(signature.exp.as_deref(), Some("1772000000"));
    assert_eq!(signature.sig.as_deref(), Some("6f3a"));
}

#[tokio::test]
async fn only_a_signed_cancel_tool_call_cancels() {
    let mut world = World::start().await;
    world.invoke("main", "call_1").await;
    world.invoke("main", "call_2").await;

    let notice = json!({"thread_id": "main", "tool_call_id": "call_1"});
    world
        .forgeries_are_refused("/cancel_tool_call", "main", &notice)
        .await;
    world.no_cancellation().await;
    assert!(world.kit.tool_call_status("main", "call_1").await.unwrap());

    let cancel = Notification::CancelToolCall {
        thread_id: thread_id("main"),
        call_id: CallId::new("call_1").unwrap(),
        tool: "wait".to_owned(),
        keys: Default::default(),
    };
    world.client.notify(&cancel).await;

    assert_eq!(world.next_cancellation().await, "call_1");
    world.no_cancellation().await;
    assert!(!world.kit.tool_call_status("main", "call_1").await.unwrap());
    assert!(world.kit.tool_call_status("main", "call_2").await.unwrap());
}

#[tokio::test]
async fn only_a_signed_close_thread_closes() {
    let mut world = World::start().await;
    world.invoke("main", "call_1").await;
    world.invoke("main", "call_2").await;
    world.invoke("side", "call_3").await;

    let notice = json!({"thread_id": "main"});
    world
        .forgeries_are_refused("/close_thread", "main", &notice)
        .await;
    world.no_cancellation().await;

    let close = Notification::CloseThread {
        thread_id: thread_id("main"),
        keys: Default::default(),
    };
    world.client.notify(&close).await;

    let mut cancelled = [
        world.next_cancellation().await,
        world.next_cancellation().await,
    ];
    cancelled.sort();
    assert_eq!(cancelled, ["call_1", "call_2"]);
    world.no_cancellation().await;
    assert!(world.kit.tool_call_status("side", "call_3").await.unwrap());

    // With its calls gone the kit forgot the thread's key: nothing is left to protect.
    let body = serde_json::to_vec(&notice).unwrap();
    let (status, _) = world.post("/close_thread", &body, None).await;
    assert_eq!(status, StatusCode::OK);
    // The other thread still has its key.
    let body = serde_json::to_vec(&json!({"thread_id": "side"})).unwrap();
    let (status, _) = world.post("/close_thread", &body, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    world.no_cancellation().await;
}

#[tokio::test]
async fn an_invocation_with_a_malformed_notification_key_is_refused() {
    let world = World::start().await;
    let sink = CallbackSink::start().await.unwrap();
    let callback_url = format!("{}?nk=not-a-key", sink.url());
    let body = invocation("wait", json!({}), "main", "call_1", &callback_url);

    assert_eq!(
        world.kit.invoke(&body).await.unwrap(),
        StatusCode::BAD_REQUEST
    );
    tokio::time::sleep(QUIET).await;
    assert_eq!(sink.requests(), 0);
}
