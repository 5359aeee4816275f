//! The HTTP API and the web app over a deployed (or local) stack's threads:
//! - `infinity serve --aws` on a machine: the stack's table and input queue from the `INFINITY_*`
//!   variables, its output queue followed for the live events;
//! - the stack's API function (`ApiFunction` in `template.yaml`): the `infinity` binary started
//!   by Lambda without arguments ([`lambda`]), behind a Function URL (its events turned into
//!   HTTP requests and back by `lambda_http`), every request checked against the token in
//!   the `INFINITY_API_TOKEN_PARAMETER` SSM parameter. A Lambda answers each request whole, so
//!   there the event stream sends what the table kept after the client's position and asks it
//!   to reconnect, resuming from there (see [`crate::events`]).
//!
//! Both serve the routes of the stack's remote machines too ([`crate::remotes::mount`] over
//! [`TableRemotes`]); the API function also takes EventBridge's scheduled event, on which it
//! answers the runs of machines that went away ([`TableRemotes::sweep`]).

use std::sync::Arc;

use aws_lambda_events::event::lambda_function_urls::LambdaFunctionUrlResponse;
use axum::body::Body;
use axum::Router;
use base64::Engine;
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::front::{default_agent_from_env, StackFront};
use infinity_aws::remotes::{TableRemotes, SWEEP_EVERY};
use lambda_http::request::LambdaRequest;
use lambda_http::IntoResponse;
use tower::ServiceExt;

use crate::Guard;

/// The variable naming the SSM parameter that holds the API function's bearer token.
pub const TOKEN_PARAMETER_VAR: &str = "INFINITY_API_TOKEN_PARAMETER";

/// The most body bytes a Lambda answer carries (its response payload limit is 6 MB).
const LAMBDA_BODY_LIMIT: usize = 6 * 1024 * 1024 - 64 * 1024;

/// True inside a Lambda function (the runtime API is there to poll).
pub fn in_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some()
}

/// Why a stack could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StackError {
    /// The `INFINITY_*` variables do not describe a stack.
    #[error(
        "serving a stack reads it from the INFINITY_* variables (for the local stack: source \
         infra/local/env.sh): {0}"
    )]
    Config(#[from] infinity_aws::config::ConfigError),
    /// The API function has no token parameter to read.
    #[error("{TOKEN_PARAMETER_VAR} is not set: the API function serves no one without a token")]
    NoToken,
    /// The token parameter could not be read.
    #[error(transparent)]
    Token(#[from] infinity_aws::handler::SsmError),
    /// The token parameter (named here) is empty.
    #[error("the API token in {0} is empty")]
    EmptyToken(String),
    /// The listener failed.
    #[error("serving failed: {0}")]
    Serve(#[from] std::io::Error),
    /// The Lambda runtime stopped (with why).
    #[error("the Lambda runtime stopped: {0}")]
    Runtime(String),
}

fn stack_config() -> Result<AwsConfig, StackError> {
    Ok(AwsConfig::from_env()?)
}

/// `infinity serve --aws`: serves the stack's threads on `listener` until Ctrl-C.
pub async fn serve(
    endpoint: Option<&str>,
    (listener, access): (tokio::net::TcpListener, Guard),
) -> Result<(), StackError> {
    let config = stack_config()?;
    let clients = Clients::from_env_with_endpoint(endpoint).await;
    let mut front = StackFront::new(&clients, &config, default_agent_from_env());
    match &config.output_queue_url {
        Some(url) => {
            front.follow_output(clients.sqs.clone(), url.clone());
            eprintln!(
                "following the output queue {url} (this server is its one reader: \
                 `infinity tail` beside it takes events away from the page)"
            );
        }
        None => eprintln!(
            "the stack has no output queue (INFINITY_OUTPUT_QUEUE_URL): pages follow threads \
             by reconnecting"
        ),
    }
    eprintln!("serving the stack's table {}", config.table);
    let remotes = Arc::new(TableRemotes::new(&clients, &config));
    let sweeper = Arc::clone(&remotes);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            if let Err(err) = sweeper.sweep().await {
                tracing::warn!(%err, "the remotes' runs could not be swept");
            }
        }
    });
    let app = crate::remotes::mount(
        crate::router(Arc::new(front), access.clone(), Router::new()),
        remotes,
        &access,
    );
    crate::serve_until_interrupted(listener, app).await?;
    Ok(())
}

/// The stack's API function: answers Function URL requests with the API until Lambda stops it.
pub async fn lambda() -> Result<(), StackError> {
    let config = stack_config()?;
    let clients = Clients::from_env().await;
    let parameter = std::env::var(TOKEN_PARAMETER_VAR)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or(StackError::NoToken)?;
    let token = infinity_aws::handler::read_ssm_parameter(&parameter).await?;
    let token = token.trim().to_owned();
    if token.is_empty() {
        return Err(StackError::EmptyToken(parameter));
    }
    // Any host name (the Function URL's, or a domain in front of it), always the token.
    let access = Guard {
        token: Some(token),
        hosts: Vec::new(),
        any_origin: false,
    };
    let front = StackFront::new(&clients, &config, default_agent_from_env());
    let remotes = Arc::new(TableRemotes::new(&clients, &config));
    let app = crate::remotes::mount(
        crate::router(Arc::new(front), access.clone(), Router::new()),
        Arc::clone(&remotes) as _,
        &access,
    );
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| {
            let (app, remotes) = (app.clone(), Arc::clone(&remotes));
            async move {
                let answer = event_answer(app, &remotes, event.payload).await;
                infinity_agent_core::telemetry::flush().await;
                answer
            }
        },
    ))
    .await
    .map_err(|e| StackError::Runtime(e.to_string()))?;
    Ok(())
}

/// One event of the API function: a Function URL request, or the schedule's call to sweep the
/// remotes' runs (an EventBridge `Scheduled Event`).
pub async fn event_answer(
    app: Router,
    remotes: &TableRemotes,
    event: serde_json::Value,
) -> Result<serde_json::Value, lambda_runtime::Error> {
    if event.get("detail-type").is_some() {
        let answered = remotes.sweep().await?;
        return Ok(serde_json::json!({"swept": answered}));
    }
    let request: LambdaRequest = serde_json::from_value(event)
        .map_err(|e| format!("not a Function URL request nor a scheduled event: {e}"))?;
    Ok(serde_json::to_value(answer(app, request).await)?)
}

/// One Function URL request through the API: `lambda_http` turns the event into an HTTP
/// request and the router's answer into the bytes or text Lambda sends back.
pub async fn answer(app: Router, request: LambdaRequest) -> LambdaFunctionUrlResponse {
    // `lambda_http` panics on a request it cannot make a URI of (a host, path or query that is
    // no URI's); here that is a 400, never a failed invocation.
    let converted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        axum::http::Request::<lambda_http::Body>::from(request)
    }));
    let Ok(request) = converted else {
        return plain(
            400,
            "not a request this API can read: its host, path or query is not a valid URI",
        );
    };
    let request = request.map(Body::new);
    let response = match app.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let (parts, body) = IntoResponse::into_response(response).await.into_parts();
    let (body, is_base64_encoded) = match body {
        lambda_http::Body::Text(text) => (Some(text), false),
        lambda_http::Body::Binary(bytes) => (
            Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
            true,
        ),
        _ => (None, false),
    };
    if body.as_ref().is_some_and(|b| b.len() > LAMBDA_BODY_LIMIT) {
        return plain(
            502,
            "the answer is bigger than a Lambda function may send (6 MB)",
        );
    }
    let mut headers = parts.headers;
    // A Function URL takes the cookies apart from the headers.
    let cookies = headers
        .get_all(axum::http::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_owned))
        .collect();
    headers.remove(axum::http::header::SET_COOKIE);
    let mut answer = LambdaFunctionUrlResponse::default();
    answer.status_code = i64::from(parts.status.as_u16());
    answer.headers = headers;
    answer.cookies = cookies;
    answer.body = body;
    answer.is_base64_encoded = is_base64_encoded;
    answer
}

fn plain(status: u16, text: impl Into<String>) -> LambdaFunctionUrlResponse {
    let mut answer = LambdaFunctionUrlResponse::default();
    answer.status_code = i64::from(status);
    answer.body = Some(text.into());
    answer.headers.insert(
        "content-type",
        axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header;
    use axum::routing::{get, post};
    use serde_json::json;

    /// A Function URL event (payload format 2.0) as AWS sends it.
    fn event(
        method: &str,
        path: &str,
        query: &str,
        body: Option<&str>,
        base64: bool,
    ) -> LambdaRequest {
        serde_json::from_value(event_json(method, path, query, body, base64)).unwrap()
    }

    fn event_json(
        method: &str,
        path: &str,
        query: &str,
        body: Option<&str>,
        base64: bool,
    ) -> serde_json::Value {
        json!({
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": path,
            "rawQueryString": query,
            "cookies": ["a=1", "b=2"],
            "headers": {"host": "abc.lambda-url.us-east-1.on.aws", "x-forwarded-proto": "https"},
            "requestContext": {
                "accountId": "123456789012", "apiId": "abc",
                "domainName": "abc.lambda-url.us-east-1.on.aws", "domainPrefix": "abc",
                "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                         "sourceIp": "127.0.0.1", "userAgent": "test"},
                "requestId": "r", "routeKey": "$default", "stage": "$default",
                "time": "01/Dec/2026:00:00:00 +0000", "timeEpoch": 0
            },
            "body": body,
            "isBase64Encoded": base64
        })
    }

    fn app() -> Router {
        Router::new()
            .route(
                "/echo",
                post(|request: axum::http::Request<Body>| async move {
                    let (parts, body) = request.into_parts();
                    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
                    let cookie = parts.headers.get(header::COOKIE).cloned();
                    (
                        [(header::SET_COOKIE, "seen=1")],
                        format!(
                            "{} {} {:?} {}",
                            parts.uri.path(),
                            parts.uri.query().unwrap_or(""),
                            cookie,
                            String::from_utf8_lossy(&bytes)
                        ),
                    )
                }),
            )
            .route(
                "/png",
                get(|| async {
                    (
                        [(header::CONTENT_TYPE, "image/png")],
                        vec![0x89u8, 0x50, 0xff],
                    )
                }),
            )
            .route("/big", get(|| async { "x".repeat(LAMBDA_BODY_LIMIT + 1) }))
    }

    #[tokio::test]
    async fn a_function_url_event_reaches_the_router_and_its_answer_goes_back() {
        let body = base64::engine::general_purpose::STANDARD.encode("hello");
        let echoed = answer(
            app(),
            event("POST", "/echo", "access_token=a%2Bb&x=1", Some(&body), true),
        )
        .await;
        assert_eq!(echoed.status_code, 200);
        assert!(!echoed.is_base64_encoded);
        let text = echoed.body.clone().unwrap_or_default();
        assert!(text.starts_with("/echo access_token=a%2Bb&x=1"), "{text}");
        assert!(
            text.contains("a=1; b=2") && text.ends_with(" hello"),
            "{text}"
        );
        assert_eq!(echoed.cookies, vec!["seen=1".to_owned()]);
        assert!(echoed.headers.get(header::SET_COOKIE).is_none());

        let png = answer(app(), event("GET", "/png", "", None, false)).await;
        assert!(png.is_base64_encoded);
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(png.body.unwrap_or_default())
                .unwrap(),
            vec![0x89u8, 0x50, 0xff]
        );

        let big = answer(app(), event("GET", "/big", "", None, false)).await;
        assert_eq!(big.status_code, 502);
        let missing = answer(app(), event("GET", "/nope", "", None, false)).await;
        assert_eq!(missing.status_code, 404);

        // A request no URI can be made of is refused, not a panic.
        let mut bad = event_json("GET", "/png", "", None, false);
        bad["headers"]["host"] = json!("bad host name");
        let bad: LambdaRequest = serde_json::from_value(bad).unwrap();
        let refused = answer(app(), bad).await;
        assert_eq!(refused.status_code, 400, "{:?}", refused.body);
    }
}
