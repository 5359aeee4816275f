//! Tool servers on AWS.
//!
//! - The agent function talks RAP with [`RapClient`]: callback URLs point at the callback
//!   function's Function URL (`INFINITY_CALLBACK_URL`) and are signed with the deployment's
//!   secret; requests to tool servers carry a bearer token (from the environment or SSM) or a
//!   SigV4 signature (a Lambda Function URL with IAM auth).
//! - The callback function ([`CallbackHandler`]) checks each callback (signature, expiry, body)
//!   and puts its input on the thread's FIFO queue. `infinity-local` serves the same handler
//!   over HTTP ([`local_router`]).

use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_lambda_events::event::lambda_function_urls::{
    LambdaFunctionUrlRequest, LambdaFunctionUrlResponse,
};
use base64::Engine;
use infinity_agent_core::agent::Agent;
use infinity_models::sigv4::{sign_request, CachedCredentials};
use infinity_rap::signing::CallbackSigner;
use infinity_rap_runtime::client::{AuthError, Authorizer, Bearer, RapClient};
use infinity_rap_runtime::receiver::{self, Signature};

use crate::queue::SqsInputSender;

/// The callback function's URL (its Function URL), where tool servers send callbacks.
pub const CALLBACK_URL_VAR: &str = "INFINITY_CALLBACK_URL";
/// The callback secret itself (local runs).
pub const CALLBACK_SECRET_VAR: &str = "INFINITY_CALLBACK_SECRET";
/// The SSM parameter holding the callback secret (on AWS: the Secrets Manager reference path
/// `/aws/reference/secretsmanager/NAME` of the secret the template creates).
pub const CALLBACK_SECRET_PARAMETER_VAR: &str = "INFINITY_CALLBACK_SECRET_PARAMETER";

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Why the tool-server side of a function could not be set up (at init: it fails loudly).
#[derive(Debug, thiserror::Error)]
pub enum ToolServerSetupError {
    /// No callback secret is configured.
    #[error("set {CALLBACK_SECRET_VAR} or {CALLBACK_SECRET_PARAMETER_VAR} (the callback secret)")]
    NoSecret,
    /// No callback URL is configured.
    #[error("set {CALLBACK_URL_VAR} (the callback function's URL) to use tool servers")]
    NoCallbackUrl,
    /// A secret or token could not be read from SSM.
    #[error(transparent)]
    Ssm(#[from] crate::handler::SsmError),
    /// The callback signer refused the secret or URL.
    #[error("the callback secret: {0}")]
    Signer(String),
    /// A server's bearer token could not be read.
    #[error("tool server {server}: {source}")]
    ServerToken {
        /// The server.
        server: String,
        /// Why.
        source: crate::handler::SsmError,
    },
    /// SigV4 signing has no credentials or region.
    #[error("{0}")]
    SigV4(&'static str),
    /// A server's auth settings are unusable.
    #[error(transparent)]
    Config(#[from] infinity_rap_runtime::client::ClientConfigError),
}

/// The callback secret: `INFINITY_CALLBACK_SECRET`, or the SSM parameter named by
/// `INFINITY_CALLBACK_SECRET_PARAMETER`.
pub async fn callback_secret_from_env() -> Result<Vec<u8>, ToolServerSetupError> {
    if let Some(secret) = var(CALLBACK_SECRET_VAR) {
        return Ok(secret.into_bytes());
    }
    let Some(name) = var(CALLBACK_SECRET_PARAMETER_VAR) else {
        return Err(ToolServerSetupError::NoSecret);
    };
    Ok(crate::handler::read_ssm_parameter(&name)
        .await?
        .into_bytes())
}

/// The signer for callback URLs, from `INFINITY_CALLBACK_URL` and the secret.
pub async fn signer_from_env() -> Result<CallbackSigner, ToolServerSetupError> {
    let url = var(CALLBACK_URL_VAR).ok_or(ToolServerSetupError::NoCallbackUrl)?;
    let secret = callback_secret_from_env().await?;
    CallbackSigner::new(secret, &url).map_err(|e| ToolServerSetupError::Signer(e.to_string()))
}

/// Signs requests with AWS SigV4, for tool servers behind a Lambda Function URL with IAM auth.
#[derive(Debug, Clone)]
pub struct SigV4 {
    credentials: Arc<CachedCredentials>,
    region: String,
    service: String,
}

impl SigV4 {
    /// A signer for `service` (`lambda` for Function URLs) in `region`; credentials are fetched
    /// when first needed and kept until shortly before they expire.
    pub fn new(credentials: SharedCredentialsProvider, region: &str, service: &str) -> Self {
        Self {
            credentials: Arc::new(CachedCredentials::new(credentials)),
            region: region.to_owned(),
            service: service.to_owned(),
        }
    }

    /// From the default AWS environment (the function's role), for Lambda Function URLs.
    pub async fn from_env() -> Result<Self, ToolServerSetupError> {
        let shared = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        let credentials = shared
            .credentials_provider()
            .ok_or(ToolServerSetupError::SigV4(
                "no AWS credentials to sign tool server requests with",
            ))?;
        let region = shared
            .region()
            .map(|r| r.to_string())
            .ok_or(ToolServerSetupError::SigV4(
                "no AWS region to sign tool server requests for",
            ))?;
        Ok(Self::new(credentials, &region, "lambda"))
    }
}

#[async_trait]
impl Authorizer for SigV4 {
    async fn authorize(&self, request: &mut reqwest::Request) -> Result<(), AuthError> {
        let credentials = self
            .credentials
            .get()
            .await
            .map_err(|e| AuthError(format!("no AWS credentials: {e}")))?;
        sign_request(
            request,
            &credentials,
            &self.region,
            &self.service,
            SystemTime::now(),
        )
        .map_err(|e| AuthError(format!("SigV4: {e}")))
    }
}

/// The client of a deployment with no agent of its own (stored agents only): callbacks signed
/// when the secret is configured, no server's auth set up ahead (stored agents' servers are
/// called without credentials of the deployment's).
pub async fn rap_client_without_agent() -> Result<Option<Arc<RapClient>>, ToolServerSetupError> {
    Ok(signer_from_env()
        .await
        .ok()
        .map(|signer| Arc::new(RapClient::new(signer))))
}

/// The RAP client of an agent with tool servers: callback URLs from
/// [`signer_from_env`]; `bearer_ssm` read from SSM and `sigv4` signed with the function's role
/// here, the rest (`bearer_env`, no auth) as [`RapClient::with_configured`] reads it.
///
/// An agent without tool servers still gets a client when the callback URL and secret are set:
/// it forwards the inputs of conversations moved to another host.
pub async fn rap_client_for(agent: &Agent) -> Result<Option<Arc<RapClient>>, ToolServerSetupError> {
    if agent.tool_servers.is_empty() {
        return Ok(signer_from_env()
            .await
            .ok()
            .map(|signer| Arc::new(RapClient::new(signer))));
    }
    let mut client = RapClient::new(signer_from_env().await?);
    for server in &agent.tool_servers {
        let auth: Arc<dyn Authorizer> = match (&server.auth.bearer_ssm, server.auth.sigv4) {
            (Some(name), _) => Arc::new(Bearer::new(
                crate::handler::read_ssm_parameter(name)
                    .await
                    .map_err(|source| ToolServerSetupError::ServerToken {
                        server: server.url.clone(),
                        source,
                    })?,
            )),
            (None, true) => Arc::new(SigV4::from_env().await?),
            (None, false) => {
                client = client.with_configured(std::slice::from_ref(server))?;
                continue;
            }
        };
        client = client.with_server(&server.url, Some(auth));
    }
    Ok(Some(Arc::new(client)))
}

/// Answers a question (a tool server's `user_choice`, or an approval) on a thread of the stack:
/// the first answer stands ([`answer_question`](infinity_rap_runtime::client::answer_question):
/// kept in the table, sent to the tool server, then queued); a later one is refused naming it.
/// `selected: None` dismisses it (the default is sent).
pub async fn answer_choice(
    store: &crate::store::DynamoThreadStore,
    sender: &SqsInputSender,
    thread: &infinity_agent_core::ids::ThreadId,
    call: &str,
    selected: Option<usize>,
) -> Result<infinity_rap_runtime::client::Chosen, infinity_rap_runtime::client::ChoiceError> {
    let post = sender.poster();
    infinity_rap_runtime::client::answer_question(
        store,
        &post,
        thread,
        Some(call),
        selected.into(),
        jiff::Timestamp::now(),
    )
    .await
}

/// The callback function: Function URL requests in, inputs on the input queue out.
#[derive(Debug, Clone)]
pub struct CallbackHandler {
    signer: CallbackSigner,
    sender: SqsInputSender,
}

impl CallbackHandler {
    /// A handler that checks URLs with `signer` and queues inputs with `sender`.
    pub fn new(signer: CallbackSigner, sender: SqsInputSender) -> Self {
        Self { signer, sender }
    }

    /// Handles one request: `POST /rap/callback/{thread}/{call}?exp=..&sig=..`, or `POST
    /// /rap/forward/{thread}?sig=..` (an input forwarded by a host a conversation moved away
    /// from).
    pub async fn handle(&self, request: LambdaFunctionUrlRequest) -> LambdaFunctionUrlResponse {
        let method = request
            .request_context
            .http
            .method
            .as_deref()
            .unwrap_or("POST");
        let path = request
            .raw_path
            .as_deref()
            .unwrap_or("")
            .trim_end_matches('/');
        let body = match (&request.body, request.is_base64_encoded) {
            (None, _) => Ok(Vec::new()),
            (Some(b), false) => Ok(b.clone().into_bytes()),
            (Some(b), true) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|_| "the body is not valid base64"),
        };
        let query = |name: &str| request.query_string_parameters.get(name).cloned();
        let callback = path
            .strip_prefix("/rap/callback/")
            .and_then(|rest| rest.split_once('/'))
            .filter(|(_, call)| !call.contains('/'));
        let forward = path
            .strip_prefix("/rap/forward/")
            .filter(|thread| !thread.contains('/'));
        let now = jiff::Timestamp::now().as_second();
        let reply = match (method, body, callback, forward) {
            ("POST", Err(why), _, _) => receiver::Reply {
                status: 400,
                body: why.to_owned(),
            },
            ("POST", Ok(body), Some((thread, call)), _) => {
                let signature = Signature {
                    exp: query("exp"),
                    sig: query("sig"),
                };
                let key = request
                    .headers
                    .get(receiver::IDEMPOTENCY_KEY_HEADER)
                    .and_then(|v| v.to_str().ok());
                receiver::handle(
                    &self.signer,
                    &self.sender,
                    thread,
                    call,
                    &signature,
                    key,
                    &body,
                    now,
                )
                .await
            }
            ("POST", Ok(body), None, Some(thread)) => {
                let sig = query("sig");
                receiver::handle_forward(&self.signer, &self.sender, thread, sig.as_deref(), &body)
                    .await
            }
            ("POST", _, _, _) => receiver::Reply {
                status: 404,
                body: format!("no such callback path: {path}"),
            },
            _ => receiver::Reply {
                status: 405,
                body: "callbacks are POSTed".to_owned(),
            },
        };
        let mut response = LambdaFunctionUrlResponse::default();
        response.status_code = i64::from(reply.status);
        response.body = Some(reply.body);
        response.headers.insert(
            "content-type",
            axum::http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

/// An HTTP server for `infinity-local` that turns each request into the Function URL event the
/// callback function gets, and runs [`CallbackHandler::handle`] on it.
pub fn local_router(handler: Arc<CallbackHandler>) -> axum::Router {
    use axum::body::Bytes;
    use axum::extract::{Query, State};
    use axum::http::{Method, StatusCode, Uri};
    async fn forward(
        State(handler): State<Arc<CallbackHandler>>,
        method: Method,
        uri: Uri,
        Query(query): Query<std::collections::HashMap<String, String>>,
        body: Bytes,
    ) -> (StatusCode, String) {
        let mut request = LambdaFunctionUrlRequest::default();
        request.raw_path = Some(uri.path().to_owned());
        request.raw_query_string = uri.query().map(str::to_owned);
        request.query_string_parameters = query;
        request.body = Some(base64::engine::general_purpose::STANDARD.encode(&body));
        request.is_base64_encoded = true;
        request.request_context.http.method = Some(method.to_string());
        let response = handler.handle(request).await;
        (
            u16::try_from(response.status_code)
                .ok()
                .and_then(|s| StatusCode::from_u16(s).ok())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            response.body.unwrap_or_default(),
        )
    }
    axum::Router::new().fallback(forward).with_state(handler)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sigv4_signs_for_lambda_in_the_region() {
        let credentials = aws_credential_types::Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            Some("session".to_owned()),
            None,
            "test",
        );
        let signer = SigV4::new(
            SharedCredentialsProvider::new(credentials),
            "eu-west-1",
            "lambda",
        );
        let client = reqwest::Client::new();
        let mut request = client
            .post("https://abc.lambda-url.eu-west-1.on.aws/invoke")
            .json(&serde_json::json!({"operation": "get_time"}))
            .build()
            .unwrap();
        signer.authorize(&mut request).await.unwrap();
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let auth = header("authorization");
        assert!(
            auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"),
            "{auth}"
        );
        assert!(auth.contains("/eu-west-1/lambda/aws4_request"), "{auth}");
        assert!(
            auth.contains("SignedHeaders=") && auth.contains("Signature="),
            "{auth}"
        );
        assert!(!header("x-amz-date").is_empty());
        assert_eq!(header("x-amz-security-token"), "session");
        // The body is part of the signature: another body, another signature.
        let mut other = client
            .post("https://abc.lambda-url.eu-west-1.on.aws/invoke")
            .json(&serde_json::json!({"operation": "other"}))
            .build()
            .unwrap();
        signer.authorize(&mut other).await.unwrap();
        let sig = |a: &str| a.rsplit("Signature=").next().unwrap_or_default().to_owned();
        let other_auth = other
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_ne!(sig(&auth), sig(&other_auth));
    }
}
