//! The Bedrock Converse adapter against a local HTTP server speaking Converse's JSON, which
//! judges every body it receives by botocore's definition of `Converse`
//! ([`common::validate`]).

use crate::common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use infinity_agent_core::history::{HistoryEntry, HistoryView, Item, ToolCall};
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::model::{
    CompletionRequest, ModelError, ModelErrorKind, ModelProvider, StopReason, ToolSpec,
};
use infinity_models::bedrock::{BedrockConfig, BedrockModel};
use infinity_models::transport::RequestPolicy;
use infinity_retry::RetryPolicy;
use serde_json::{json, Value};

use common::validate::{self, Provider, Refusals};

const MODEL: &str = "anthropic.claude-sonnet-4-5-v1:0";

/// A request the server received.
#[derive(Clone)]
struct Received {
    /// The model id, as the server's router decoded it from the path.
    model: String,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }
}

/// A status, headers and a body to answer with.
type Reply = (u16, Vec<(&'static str, &'static str)>, String);

/// What the server received, the replies it has left, and the bodies Bedrock would refuse.
type Shared = (
    Arc<Mutex<Vec<Received>>>,
    Arc<Mutex<VecDeque<Reply>>>,
    Arc<Refusals>,
);

/// A server on 127.0.0.1; dropped, it fails the test if Bedrock would have refused a body.
struct Server {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
    refusals: Arc<Refusals>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.refusals.assert_none();
    }
}

impl Server {
    /// A server answering with `replies` in turn, the last one over and over.
    async fn start(replies: Vec<Reply>) -> Self {
        validate::start();
        let received = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(VecDeque::from(replies)));
        let refusals = Arc::new(Refusals::default());
        let state = (Arc::clone(&received), replies, Arc::clone(&refusals));
        let app = Router::new()
            .route(
                "/model/{id}/converse",
                post(
                    |State((received, replies, refusals)): State<Shared>,
                     Path(model): Path<String>,
                     uri: Uri,
                     headers: HeaderMap,
                     body: Bytes| async move {
                        let judged = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let refused = tokio::task::spawn_blocking(move || {
                            refusals.judge(Provider::Bedrock, &judged)
                        })
                        .await
                        .unwrap();
                        received.lock().unwrap().push(Received {
                            model,
                            uri,
                            headers,
                            body,
                        });
                        if let Some(why) = refused {
                            let refusal = error(400, "ValidationException", &why);
                            let (status, headers, body) = refusal;
                            let mut reply = HeaderMap::new();
                            for (k, v) in headers {
                                reply.insert(k, v.parse().unwrap());
                            }
                            return (StatusCode::from_u16(status).unwrap(), reply, body)
                                .into_response();
                        }
                        let (status, reply_headers, body) = {
                            let mut replies = replies.lock().unwrap();
                            if replies.len() > 1 {
                                replies.pop_front().unwrap()
                            } else {
                                replies.front().unwrap().clone()
                            }
                        };
                        let mut headers = HeaderMap::new();
                        for (k, v) in reply_headers {
                            headers.insert(k, v.parse().unwrap());
                        }
                        (StatusCode::from_u16(status).unwrap(), headers, body).into_response()
                    },
                ),
            )
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url,
            received,
            refusals,
        }
    }

    fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

fn ok(reply: Value) -> Reply {
    (200, vec![], reply.to_string())
}

fn error(status: u16, error_type: &'static str, message: &str) -> Reply {
    (
        status,
        vec![("x-amzn-errortype", error_type)],
        json!({ "message": message }).to_string(),
    )
}

/// A short reply that ends the turn.
fn end_turn() -> Reply {
    ok(json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "ok"}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1}
    }))
}

fn static_credentials() -> Credentials {
    Credentials::new("AKID", "SECRET", None, None, "test")
}

/// Quick retries: a test waits milliseconds, not the default backoff.
fn config(endpoint: &str) -> BedrockConfig {
    BedrockConfig {
        region: Some("us-east-1".into()),
        endpoint_url: Some(endpoint.into()),
        credentials: Some(SharedCredentialsProvider::new(static_credentials())),
        bearer_token: None,
        request: RequestPolicy {
            retry: RetryPolicy::new(3, Duration::from_millis(1), Duration::from_millis(5))
                .jittered(),
            timeout: Duration::from_secs(5),
            first_byte: Duration::from_secs(5),
            idle: Duration::from_secs(5),
        },
    }
}

fn model(server: &Server) -> BedrockModel {
    BedrockModel::new(MODEL, config(&server.url))
}

fn entry(item: Item) -> Arc<HistoryEntry> {
    Arc::new(HistoryEntry {
        seq: 0,
        at: jiff::Timestamp::UNIX_EPOCH,
        input_id: None,
        item,
    })
}

async fn ask(
    m: &BedrockModel,
    history: &[Arc<HistoryEntry>],
) -> Result<infinity_agent_core::model::Completion, ModelError> {
    let id = ThreadId::new("t").unwrap();
    let stack = [id.clone()];
    let tools = [ToolSpec {
        name: "lookup".into(),
        description: "Look something up.".into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
    }];
    m.complete(CompletionRequest {
        thread_id: &id,
        is_root: true,
        lineage: &stack,
        system: "Be brief.",
        tools: &tools,
        history: HistoryView::from_slice(history),
    })
    .await
}

fn conversation() -> Vec<Arc<HistoryEntry>> {
    let call = ToolCall {
        id: CallId::new("tooluse_1").unwrap(),
        name: "lookup".into(),
        args: json!({"q": "x", "n": 2}),
    };
    vec![
        entry(Item::user("find x")),
        entry(Item::Assistant {
            text: Some("Looking.".into()),
            tool_calls: vec![call.clone()],
            synthetic: false,
        }),
        entry(Item::ToolResult {
            call_id: call.id,
            name: call.name,
            text: "not found".into(),
            is_error: true,
            images: Vec::new(),
            display_as: Vec::new(),
        }),
    ]
}

#[tokio::test]
async fn text_tool_calls_usage_and_the_request_shape() {
    let reply = json!({
        "output": {"message": {"role": "assistant", "content": [
            {"text": "Trying again."},
            {"toolUse": {"toolUseId": "tooluse_2", "name": "lookup", "input": {"q": "y", "deep": [1, 2.5]}}}
        ]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 100, "outputTokens": 20, "totalTokens": 120, "cacheReadInputTokens": 80, "cacheWriteInputTokens": 5},
        "metrics": {"latencyMs": 3}
    });
    let server = Server::start(vec![ok(reply)]).await;
    let c = ask(&model(&server), &conversation()).await.unwrap();
    assert_eq!(c.text.as_deref(), Some("Trying again."));
    assert_eq!(c.stop_reason, StopReason::ToolUse);
    assert_eq!(c.tool_calls[0].id.as_deref(), Some("tooluse_2"));
    assert_eq!(c.tool_calls[0].args, json!({"q": "y", "deep": [1, 2.5]}));
    assert_eq!(
        (
            c.usage.input_tokens,
            c.usage.output_tokens,
            c.usage.cache_read_tokens,
            c.usage.cache_write_tokens
        ),
        (100, 20, 80, 5)
    );

    let request = &server.received()[0];
    assert_eq!(request.model, MODEL);
    assert_eq!(
        request.uri.path(),
        "/model/anthropic.claude-sonnet-4-5-v1%3A0/converse"
    );
    assert_eq!(request.header("content-type"), "application/json");
    let body = request.json();
    assert_eq!(body["system"][0]["text"], "Be brief.");
    assert!(body["system"][1]["cachePoint"].is_object(), "{body}");
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools[0]["toolSpec"]["name"], "lookup");
    assert_eq!(
        tools[0]["toolSpec"]["inputSchema"]["json"]["properties"]["q"]["type"],
        "string"
    );
    assert_eq!(
        tools.last().unwrap()["toolSpec"]["name"],
        "receive_event__injected"
    );
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(
        messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["user", "assistant", "user"]
    );
    assert_eq!(
        messages[1]["content"][1]["toolUse"]["toolUseId"],
        "tooluse_1"
    );
    assert_eq!(
        messages[1]["content"][1]["toolUse"]["input"],
        json!({"q": "x", "n": 2})
    );
    assert_eq!(
        messages[2]["content"][0]["toolResult"]["toolUseId"],
        "tooluse_1"
    );
    assert_eq!(messages[2]["content"][0]["toolResult"]["status"], "error");
    assert_eq!(body["inferenceConfig"]["maxTokens"], 16384);
}

#[tokio::test]
async fn max_tokens_is_reported() {
    let server = Server::start(vec![ok(json!({
        "output": {"message": {"role": "assistant", "content": [{"text": "cut"}]}},
        "stopReason": "max_tokens",
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1}
    }))])
    .await;
    let c = ask(&model(&server), &conversation()[..1]).await.unwrap();
    assert_eq!(c.stop_reason, StopReason::MaxTokens);
}

/// The time a request was signed at, from its `x-amz-date` (`20260101T120000Z`).
fn signed_at(request: &Received) -> SystemTime {
    let date =
        jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", request.header("x-amz-date")).unwrap();
    let at = date
        .to_zoned_datetime(jiff::tz::TimeZone::UTC)
        .unwrap()
        .timestamp();
    SystemTime::try_from(at).unwrap()
}

/// The `authorization` header SigV4 gives the request the server received, signed at the time
/// it says: equal to the one it carries only if what was signed is what arrived (method, path,
/// host, body).
fn expected_authorization(request: &Received, credentials: &Credentials) -> String {
    use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
    let identity = credentials.clone().into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("bedrock")
        .time(signed_at(request))
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let url = format!("http://{}{}", request.header("host"), request.uri);
    let signable = SignableRequest::new(
        "POST",
        url,
        std::iter::empty(),
        SignableBody::Bytes(&request.body),
    )
    .unwrap();
    let (instructions, _) = sign(signable, &params).unwrap().into_parts();
    let authorization = instructions
        .headers()
        .find(|(name, _)| *name == "authorization")
        .map(|(_, value)| value.to_owned());
    authorization.unwrap()
}

#[tokio::test]
async fn requests_are_signed_with_sigv4_for_bedrock_in_the_region() {
    let server = Server::start(vec![end_turn()]).await;
    ask(&model(&server), &conversation()).await.unwrap();

    let request = &server.received()[0];
    let authorization = request.header("authorization");
    let date = &request.header("x-amz-date")[..8];
    assert!(
        authorization.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential=AKID/{date}/us-east-1/bedrock/aws4_request, \
             SignedHeaders=host;x-amz-date, Signature="
        )),
        "{authorization}"
    );
    let age = SystemTime::now()
        .duration_since(signed_at(request))
        .unwrap();
    assert!(age < Duration::from_secs(60), "signed {age:?} ago");
    assert_eq!(
        authorization,
        expected_authorization(request, &static_credentials())
    );
}

#[tokio::test]
async fn temporary_credentials_send_their_session_token() {
    let credentials = Credentials::new("ASIA", "SECRET", Some("SESSION".into()), None, "test");
    let server = Server::start(vec![end_turn()]).await;
    let temporary = BedrockConfig {
        credentials: Some(SharedCredentialsProvider::new(credentials.clone())),
        ..config(&server.url)
    };
    ask(&BedrockModel::new(MODEL, temporary), &conversation()[..1])
        .await
        .unwrap();

    let request = &server.received()[0];
    assert_eq!(request.header("x-amz-security-token"), "SESSION");
    assert_eq!(
        request.header("authorization"),
        expected_authorization(request, &credentials)
    );
}

#[tokio::test]
async fn a_bedrock_api_key_is_sent_instead_of_a_signature() {
    let server = Server::start(vec![end_turn()]).await;
    let with_key = BedrockConfig {
        bearer_token: Some("bedrock-api-key".into()),
        ..config(&server.url)
    };
    ask(&BedrockModel::new(MODEL, with_key), &conversation()[..1])
        .await
        .unwrap();

    let request = &server.received()[0];
    assert_eq!(request.header("authorization"), "Bearer bedrock-api-key");
    assert_eq!(request.header("x-amz-date"), "");
}

#[tokio::test]
async fn throttling_and_unavailability_are_retried_and_each_attempt_is_signed() {
    let server = Server::start(vec![
        error(429, "ThrottlingException", "slow down"),
        error(503, "ServiceUnavailableException", "try later"),
        end_turn(),
    ])
    .await;

    let c = ask(&model(&server), &conversation()[..1]).await.unwrap();

    assert_eq!(c.text.as_deref(), Some("ok"));
    let received = server.received();
    assert_eq!(received.len(), 3);
    for request in &received {
        assert_eq!(request.body, received[0].body, "the same request each time");
        assert_eq!(
            request.header("authorization"),
            expected_authorization(request, &static_credentials())
        );
    }
}

#[tokio::test]
async fn throttling_that_outlasts_the_retries_is_retryable() {
    let server = Server::start(vec![error(429, "ThrottlingException", "slow down")]).await;
    match ask(&model(&server), &conversation()[..1]).await {
        Err(ModelError::Retryable {
            kind: ModelErrorKind::RateLimited,
            text: why,
        }) => assert!(
            why.contains("ThrottlingException: slow down") && why.contains("gave up after 3"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn a_validation_error_is_terminal_at_once_and_says_what_was_wrong() {
    let server = Server::start(vec![error(400, "ValidationException", "bad tool schema")]).await;
    match ask(&model(&server), &conversation()[..1]).await {
        Err(ModelError::Terminal {
            kind: ModelErrorKind::Refused,
            text: why,
        }) => {
            assert_eq!(why, "bedrock: ValidationException: bad tool schema")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received().len(), 1, "not retried");
}

#[tokio::test]
async fn a_reply_that_is_not_converse_json_is_retried_then_named() {
    let server = Server::start(vec![(200, vec![], r#"{"output": "#.to_owned())]).await;
    match ask(&model(&server), &conversation()[..1]).await {
        Err(ModelError::Retryable {
            kind: ModelErrorKind::BadAnswer,
            text: why,
        }) => assert!(
            why.starts_with("bedrock: the response is not a Converse reply: EOF while parsing"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.received().len(), 3);
}

#[tokio::test]
async fn missing_credentials_fail_at_once_and_say_so_and_a_dead_endpoint_is_retryable() {
    // No credentials at all: the request cannot be signed, however often it is tried.
    #[derive(Debug)]
    struct None_;
    impl aws_credential_types::provider::ProvideCredentials for None_ {
        fn provide_credentials<'a>(
            &'a self,
        ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            aws_credential_types::provider::future::ProvideCredentials::ready(Err(
                aws_credential_types::provider::error::CredentialsError::not_loaded(
                    "no credentials found in chain",
                ),
            ))
        }
    }
    let unsigned = BedrockConfig {
        credentials: Some(SharedCredentialsProvider::new(None_)),
        ..config("http://127.0.0.1:9")
    };
    match ask(&BedrockModel::new("m", unsigned), &conversation()[..1]).await {
        Err(ModelError::Terminal {
            kind: ModelErrorKind::Credentials,
            text: why,
        }) => assert!(
            why.contains("no credentials found") && why.contains("AWS_REGION"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    // No region: nowhere to send the request, nothing to sign it for.
    let nowhere = BedrockConfig {
        region: None,
        ..config("http://127.0.0.1:9")
    };
    match ask(&BedrockModel::new("m", nowhere), &conversation()[..1]).await {
        Err(ModelError::Terminal { text: why, .. }) => {
            assert!(why.contains("no AWS region is set"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    // Nothing listens there: the network may come back.
    let dead = BedrockModel::new(MODEL, config("http://127.0.0.1:9"));
    match ask(&dead, &conversation()[..1]).await {
        Err(ModelError::Retryable { text: why, .. }) => {
            assert!(why.starts_with("bedrock: "), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_whole_request_for_a_varied_history() {
    // The body is written out in full in tests/bodies/, not produced by the code under test
    // (recorded from the adapter when it sent through the AWS SDK).
    let server = Server::start(vec![end_turn()]).await;
    let history: Vec<_> = common::varied_history().into_iter().map(entry).collect();

    ask(&model(&server), &history).await.unwrap();

    let body = server.received()[0].json();
    common::assert_body(&body, include_str!("bodies/bedrock_varied.json"));
}
