//! A stand-in of what AWS puts around the stack's API function: Lambda's runtime API (the
//! `infinity` binary, started as Lambda starts it, polls it for events and posts its answers;
//! `infinity_aws::testing`) and a Function URL (HTTP in front of it, for a browser).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // each test crate uses a part

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use infinity_test_support::repo;
use serde_json::{json, Value};

use crate::common::Server;

pub use infinity_aws::testing::{ask, Runtime};

/// A Function URL event (payload format 2.0) for `method path`.
pub fn url_event(
    method: &str,
    path: &str,
    query: &str,
    headers: Value,
    body: Option<&str>,
) -> Value {
    json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": query,
        "headers": headers,
        "queryStringParameters": {},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "api",
            "domainName": "api.lambda-url.us-east-1.on.aws",
            "domainPrefix": "api",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": "127.0.0.1", "userAgent": "test"},
            "requestId": "r",
            "routeKey": "$default",
            "stage": "$default",
            "time": "01/Dec/2026:00:00:00 +0000",
            "timeEpoch": 0
        },
        "body": body,
        "isBase64Encoded": false
    })
}

/// The `infinity` binary started as the stack's API function, under a stand-in of Lambda's
/// runtime API, with its token in an SSM parameter on the emulator.
pub struct ApiFunction {
    pub runtime: Runtime,
    _processes: Vec<Server>,
}

impl ApiFunction {
    pub async fn start(env: &HashMap<String, String>) -> ApiFunction {
        Self::start_instances(env, 1).await
    }

    /// The function with `instances` instances polling the same runtime API, as Lambda runs
    /// several for requests that come together (a remote's long poll holds one).
    pub async fn start_instances(env: &HashMap<String, String>, instances: usize) -> ApiFunction {
        // The token, where the template keeps it (an SSM parameter), on the emulator.
        let parameter = format!(
            "/{}/api-token",
            infinity_agent_core::ids::EffectId::generate().as_str()[3..].to_owned()
        );
        let sqs = &env["AWS_ENDPOINT_URL_SQS"];
        let put = Command::new(repo().join(".venv/bin/python"))
        .args([
            "-c",
            "import boto3,sys; boto3.client('ssm', endpoint_url=sys.argv[1], region_name='us-east-1', \
             aws_access_key_id='test', aws_secret_access_key='test').put_parameter(Name=sys.argv[2], \
             Value='s3cret-token', Type='SecureString')",
            sqs,
            &parameter,
        ])
        .output()
        .unwrap();
        assert!(
            put.status.success(),
            "{}",
            String::from_utf8_lossy(&put.stderr)
        );

        let (runtime_api, runtime) = infinity_aws::testing::start(
            "arn:aws:lambda:us-east-1:123456789012:function:api",
            Duration::from_secs(30),
        )
        .await;
        // Started as Lambda starts it: no arguments.
        let start = || {
            Server(
                Command::new(env!("CARGO_BIN_EXE_infinity"))
                    .envs(env)
                    .env("AWS_ENDPOINT_URL_SSM", sqs)
                    .env("AWS_LAMBDA_RUNTIME_API", &runtime_api)
                    .env("AWS_LAMBDA_FUNCTION_NAME", "api")
                    .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                    .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "512")
                    .env("AWS_LAMBDA_LOG_STREAM_NAME", "s")
                    .env("AWS_LAMBDA_LOG_GROUP_NAME", "g")
                    .env("INFINITY_API_TOKEN_PARAMETER", &parameter)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap(),
            )
        };
        ApiFunction {
            runtime,
            _processes: (0..instances).map(|_| start()).collect(),
        }
    }
}

/// Serves HTTP by handing each request to the function as a Function URL event (what AWS does in
/// front of a Function URL), so a browser can use it.
pub async fn function_url(runtime: Runtime) -> String {
    function_url_on(runtime, 0).await
}

/// [`function_url`] on `port` (0: any free port).
pub async fn function_url_on(runtime: Runtime, port: u16) -> String {
    use axum::response::IntoResponse;
    let counter = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let (runtime, counter) = (Arc::clone(&runtime), Arc::clone(&counter));
        async move {
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 10 << 20).await.unwrap();
            let headers: serde_json::Map<String, Value> = parts
                .headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), json!(v.to_str().unwrap_or_default())))
                .collect();
            let text = String::from_utf8_lossy(&body).into_owned();
            let event = url_event(
                parts.method.as_str(),
                parts.uri.path(),
                parts.uri.query().unwrap_or_default(),
                Value::Object(headers),
                (!body.is_empty()).then_some(text.as_str()),
            );
            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let answer = ask(runtime, format!("web{n}"), event).await;
            let mut response = axum::http::Response::builder()
                .status(answer["statusCode"].as_u64().unwrap_or(500) as u16);
            for (name, value) in answer["headers"].as_object().into_iter().flatten() {
                response = response.header(name, value.as_str().unwrap_or_default());
            }
            let text = answer["body"].as_str().unwrap_or_default();
            let bytes = if answer["isBase64Encoded"] == true {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(text)
                    .unwrap()
            } else {
                text.as_bytes().to_vec()
            };
            response
                .body(axum::body::Body::from(bytes))
                .unwrap()
                .into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}
