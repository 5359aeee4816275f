//! The HTTP API and the web app over a deployed (or local) stack's threads:
//! - `infinity serve --aws` on a machine: the stack's table and input queue from the `INFINITY_*`
//!   variables, its output queue followed for the live events;
//! - the stack's API function (`ApiFunction` in `template.yaml`): the same binary started by
//!   Lambda without arguments, behind a Function URL, every request checked against the token in
//!   the `INFINITY_API_TOKEN_PARAMETER` SSM parameter. A Lambda answers each request whole, so
//!   there the event stream sends what is open and asks the page to reconnect (see
//!   [`Front::subscribe`](infinity_agent_core::runtime::Front::subscribe)).
//!
//! Both serve the routes of the stack's remote machines too ([`crate::remote::mount`] over
//! [`TableRemotes`]); the API function also takes EventBridge's scheduled event, on which it
//! answers the runs of machines that went away ([`TableRemotes::sweep`]).

use std::sync::Arc;

use anyhow::{Context, Result};
use aws_lambda_events::event::lambda_function_urls::{
    LambdaFunctionUrlRequest, LambdaFunctionUrlResponse,
};
use axum::body::Body;
use axum::Router;
use base64::Engine;
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::front::{default_agent_from_env, StackFront};
use infinity_aws::remotes::{TableRemotes, SWEEP_EVERY};
use tower::ServiceExt;

use crate::serve::Guard;

/// The variable naming the SSM parameter that holds the API function's bearer token.
pub const TOKEN_PARAMETER_VAR: &str = "INFINITY_API_TOKEN_PARAMETER";

/// The most body bytes a Lambda answer carries (its response payload limit is 6 MB).
const LAMBDA_BODY_LIMIT: usize = 6 * 1024 * 1024 - 64 * 1024;

/// True inside a Lambda function (the runtime API is there to poll).
pub fn in_lambda() -> bool {
    std::env::var_os("AWS_LAMBDA_RUNTIME_API").is_some()
}

fn stack_config() -> Result<AwsConfig> {
    AwsConfig::from_env().context(
        "serving a stack reads it from the INFINITY_* variables (for the local stack: \
         source infra/local/env.sh)",
    )
}

/// `infinity serve --aws`: serves the stack's threads on `listener` until Ctrl-C.
pub async fn serve(
    endpoint: Option<&str>,
    (listener, access): (tokio::net::TcpListener, Guard),
) -> Result<u8> {
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
    let app = crate::remote::mount(
        crate::serve::router(Arc::new(front), access.clone(), Router::new()),
        remotes,
        access,
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(0)
}

/// The stack's API function: answers Function URL requests with the API until Lambda stops it.
pub async fn lambda() -> Result<u8> {
    let config = stack_config()?;
    let clients = Clients::from_env().await;
    let parameter = std::env::var(TOKEN_PARAMETER_VAR)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .with_context(|| {
            format!(
                "{TOKEN_PARAMETER_VAR} is not set: the API function serves no one without a token"
            )
        })?;
    let token = infinity_aws::handler::read_ssm_parameter(&parameter).await?;
    let token = token.trim().to_owned();
    anyhow::ensure!(!token.is_empty(), "the API token in {parameter} is empty");
    // Any host name (the Function URL's, or a domain in front of it), always the token.
    let access = Guard {
        token: Some(token),
        hosts: Vec::new(),
        any_origin: false,
    };
    let front = StackFront::new(&clients, &config, default_agent_from_env());
    let remotes = Arc::new(TableRemotes::new(&clients, &config));
    let app = crate::remote::mount(
        crate::serve::router(Arc::new(front), access.clone(), Router::new()),
        Arc::clone(&remotes) as _,
        access,
    );
    lambda_runtime::run(lambda_runtime::service_fn(
        move |event: lambda_runtime::LambdaEvent<serde_json::Value>| {
            let (app, remotes) = (app.clone(), Arc::clone(&remotes));
            async move { event_answer(app, &remotes, event.payload).await }
        },
    ))
    .await
    .map_err(|e| anyhow::anyhow!("the Lambda runtime stopped: {e}"))?;
    Ok(0)
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
    let request: LambdaFunctionUrlRequest = serde_json::from_value(event)
        .map_err(|e| format!("not a Function URL request nor a scheduled event: {e}"))?;
    Ok(serde_json::to_value(answer(app, request).await)?)
}

/// One Function URL request through the API.
pub async fn answer(app: Router, request: LambdaFunctionUrlRequest) -> LambdaFunctionUrlResponse {
    match to_http(request) {
        Ok(request) => {
            let response = match app.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            from_http(response).await
        }
        Err(why) => plain(400, why),
    }
}

fn to_http(request: LambdaFunctionUrlRequest) -> Result<axum::http::Request<Body>, String> {
    let method = request
        .request_context
        .http
        .method
        .as_deref()
        .unwrap_or("GET");
    let mut uri = request.raw_path.clone().unwrap_or_else(|| "/".to_owned());
    if let Some(query) = request
        .raw_query_string
        .as_deref()
        .filter(|q| !q.is_empty())
    {
        uri.push('?');
        uri.push_str(query);
    }
    let body = match (request.body, request.is_base64_encoded) {
        (None, _) => Vec::new(),
        (Some(text), false) => text.into_bytes(),
        (Some(text), true) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| "the body is not valid base64".to_owned())?,
    };
    let mut built = axum::http::Request::builder().method(method).uri(&uri);
    for (name, value) in &request.headers {
        built = built.header(name, value);
    }
    built
        .body(Body::from(body))
        .map_err(|e| format!("not a request this API takes ({method} {uri}): {e}"))
}

async fn from_http(response: axum::response::Response) -> LambdaFunctionUrlResponse {
    let (parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, LAMBDA_BODY_LIMIT).await {
        Ok(bytes) => bytes,
        Err(e) => {
            return plain(
                502,
                format!("the answer is bigger than a Lambda function may send ({e})"),
            )
        }
    };
    let mut answer = LambdaFunctionUrlResponse::default();
    answer.status_code = i64::from(parts.status.as_u16());
    answer.headers = parts.headers;
    match String::from_utf8(bytes.to_vec()) {
        Ok(text) => answer.body = Some(text),
        Err(_) => {
            answer.body = Some(base64::engine::general_purpose::STANDARD.encode(&bytes));
            answer.is_base64_encoded = true;
        }
    }
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
