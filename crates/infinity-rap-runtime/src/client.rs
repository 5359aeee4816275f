//! The runtime's side of RAP over HTTP: discovery of toolsets, invocations with retries, and
//! the `/close_thread` and `/cancel_tool_call` notifications, signed (see [`infinity_rap::signing`]).
//! [`RapClient`] implements the core's [`ToolDiscovery`] and [`ToolDispatcher`], so any host
//! plugs it in.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Bytes;
use infinity_agent_core::effect::{Notification, ToolInvocation};
use infinity_agent_core::host::{DispatchError, ToolDispatcher};
use infinity_agent_core::input::Input;
use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::servers::{
    Discovered, DiscoveryError, ToolDiscovery, ToolServerConfig,
};
use infinity_retry::{rap_status_is_transient, with_backoff, Attempt};
use serde::Serialize;

use infinity_rap::signing::{
    CallbackSigner, NotificationKey, NOTIFICATION_KEY_PARAM, NOTIFICATION_SIGNATURE_HEADER,
};
use infinity_rap::wire::{self, Invocation, Nullable};

/// How long fetching a manifest may take: a new conversation waits for it.
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a `/close_thread` or `/cancel_tool_call` notification may take.
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a tool server may take to move its state for a conversation (`POST /migrate`
/// answers only once the state is at the destination).
pub const MIGRATE_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a request could not be given its credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(pub String);

/// Adds credentials to a request to a tool server (a bearer token, a SigV4 signature).
#[async_trait]
pub trait Authorizer: Send + Sync + std::fmt::Debug {
    /// Authorizes `request` in place.
    async fn authorize(&self, request: &mut reqwest::Request) -> Result<(), AuthError>;
}

/// `Authorization: Bearer TOKEN`.
pub struct Bearer(String);

impl Bearer {
    /// A bearer token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }
}

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(..)") // never the token
    }
}

#[async_trait]
impl Authorizer for Bearer {
    async fn authorize(&self, request: &mut reqwest::Request) -> Result<(), AuthError> {
        let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {}", self.0))
            .map_err(|_| AuthError("the bearer token is not a valid header value".to_owned()))?;
        request
            .headers_mut()
            .insert(reqwest::header::AUTHORIZATION, value);
        Ok(())
    }
}

pub use infinity_retry::RetryPolicy;

mod questions;
pub use questions::{answer_question, find_choice, ChoiceError, Chosen, Pick};

/// How invocations are retried unless configured otherwise: five attempts, 0.25 s doubling up
/// to 8 s in between.
pub const INVOCATION_RETRY: RetryPolicy =
    RetryPolicy::new(5, Duration::from_millis(250), Duration::from_secs(8));

/// How long one invocation request may take unless configured otherwise.
pub const INVOCATION_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
struct Server {
    base_url: String,
    auth: Option<Arc<dyn Authorizer>>,
}

/// Talks RAP to the configured tool servers. Give it to the embedded runtime as discovery and
/// dispatcher, and serve [`crate::receiver::router`] with the same signer for the callbacks
/// (docs/rust-api.md, "Tool servers on both hosts").
///
/// ```
/// use std::sync::Arc;
///
/// use infinity_agent_core::runtime::AgentSystemBuilder;
/// use infinity_agent_core::tools::servers::ToolServerConfig;
/// use infinity_rap_runtime::client::RapClient;
/// use infinity_rap::signing::CallbackSigner;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // Callback URLs under the receiver's public URL, signed with a secret of 32+ bytes.
/// let signer = CallbackSigner::new(b"a secret of thirty-two bytes or more".to_vec(), "http://127.0.0.1:8790")?;
/// let servers: Vec<ToolServerConfig> =
///     serde_yaml_ng::from_str("- http://127.0.0.1:8701\n- {url: 'http://127.0.0.1:8702', deadline: 2h}\n")?;
/// let client = Arc::new(RapClient::new(signer).with_configured(&servers)?);
/// let builder = AgentSystemBuilder::new()
///     .with_discovery(client.clone())
///     .with_dispatcher(client);
/// # let _ = builder;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RapClient {
    http: reqwest::Client,
    signer: CallbackSigner,
    servers: Vec<Server>,
    retry: RetryPolicy,
    timeout: Duration,
    user_id: Option<String>,
}

/// Why a client could not be configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientConfigError {
    /// `bearer_env` names a variable that is not set.
    #[error("tool server {url}: auth.bearer_env names {var}, which is not set")]
    MissingToken {
        /// The server.
        url: String,
        /// The variable.
        var: String,
    },
    /// The auth needs a host that can provide it (SSM, AWS credentials).
    #[error("tool server {url}: auth.{kind} needs the AWS host (infinity-aws) to resolve it")]
    NeedsAws {
        /// The server.
        url: String,
        /// `bearer_ssm` or `sigv4`.
        kind: &'static str,
    },
}

impl RapClient {
    /// A client whose callback URLs `signer` makes, with no servers yet.
    pub fn new(signer: CallbackSigner) -> Self {
        Self {
            http: reqwest::Client::new(),
            signer,
            servers: Vec::new(),
            retry: INVOCATION_RETRY,
            timeout: INVOCATION_TIMEOUT,
            user_id: None,
        }
    }

    /// Adds a server (its base URL) with an optional authorizer.
    pub fn with_server(mut self, base_url: &str, auth: Option<Arc<dyn Authorizer>>) -> Self {
        let base_url = base_url.trim_end_matches('/').to_owned();
        if !self.servers.iter().any(|s| s.base_url == base_url) {
            self.servers.push(Server { base_url, auth });
        }
        self
    }

    /// Adds servers as agent files configure them. `bearer_env` is read now; `bearer_ssm` and
    /// `sigv4` need an authorizer from the AWS host (pass it with [`RapClient::with_server`]).
    pub fn with_configured(
        mut self,
        configs: &[ToolServerConfig],
    ) -> Result<Self, ClientConfigError> {
        for config in configs {
            let auth: Option<Arc<dyn Authorizer>> = match (
                &config.auth.bearer_env,
                &config.auth.bearer_ssm,
                config.auth.sigv4,
            ) {
                (Some(var), _, _) => {
                    let token =
                        std::env::var(var).map_err(|_| ClientConfigError::MissingToken {
                            url: config.url.clone(),
                            var: var.clone(),
                        })?;
                    Some(Arc::new(Bearer::new(token)))
                }
                (None, Some(_), _) => {
                    return Err(ClientConfigError::NeedsAws {
                        url: config.url.clone(),
                        kind: "bearer_ssm",
                    })
                }
                (None, None, true) => {
                    return Err(ClientConfigError::NeedsAws {
                        url: config.url.clone(),
                        kind: "sigv4",
                    })
                }
                (None, None, false) => None,
            };
            self = self.with_server(&config.url, auth);
        }
        Ok(self)
    }

    /// The same client with another retry policy for invocations.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same client with another timeout for one invocation request.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same client sending this `user_id` with every invocation.
    pub fn with_user_id(mut self, user_id: impl Into<String>) -> Self {
        self.user_id = Some(user_id.into());
        self
    }

    /// The authorizer of the configured server with this base URL. Requests to a server (its
    /// manifest, its notifications) and to its tools' endpoint (which the manifest may put on
    /// another host) carry that server's credentials.
    fn auth_for(&self, server: &str) -> Option<&Arc<dyn Authorizer>> {
        let server = server.trim_end_matches('/');
        self.servers
            .iter()
            .find(|s| s.base_url == server)
            .and_then(|s| s.auth.as_ref())
    }

    /// Sends a request on behalf of the configured server `server` (its base URL).
    async fn send(
        &self,
        builder: reqwest::RequestBuilder,
        server: &str,
        timeout: Duration,
    ) -> Result<reqwest::Response, String> {
        let mut request = builder
            .timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the request: {e}"))?;
        if let Some(auth) = self.auth_for(server) {
            auth.authorize(&mut request)
                .await
                .map_err(|e| e.to_string())?;
        }
        self.http.execute(request).await.map_err(|e| {
            if e.is_timeout() {
                format!("timed out after {timeout:?}")
            } else if e.is_connect() {
                "cannot connect".to_owned()
            } else {
                format!("request failed: {}", e.without_url())
            }
        })
    }

    /// The key the notifications about `thread_id` to the server at `base_url` are signed with:
    /// the thread's own for that server, when it moved here from another host, else this
    /// host's.
    fn key_for(&self, thread_id: &str, base_url: &str, keys: &BTreeMap<String, String>) -> String {
        match keys.get(base_url.trim_end_matches('/')) {
            Some(key) => key.clone(),
            None => self.signer.notification_key(thread_id, base_url),
        }
    }

    /// POSTs `body` to `url` with this client's retries: a 2xx is done, a retryable status or
    /// a failed connection is tried again, any other status is final (`{url} refused the
    /// {what}: ...`). `server` is the configured server whose credentials go with it. A URL's
    /// query (a signature) is left out of the errors.
    async fn post_retried(
        &self,
        url: &str,
        server: Option<&str>,
        body: &(impl Serialize + Sync),
        what: &str,
        task: &'static str,
    ) -> Result<(), String> {
        let shown = url.split('?').next().unwrap_or(url);
        with_backoff(
            &self.retry,
            task,
            || async {
                let request = self.http.post(url).json(body);
                match self
                    .send(request, server.unwrap_or_default(), self.timeout)
                    .await
                {
                    Ok(r) if r.status().is_success() => Attempt::Done(()),
                    Ok(r) if rap_status_is_transient(r.status()) => {
                        Attempt::Again(format!("{shown} answered HTTP {}", r.status()), None)
                    }
                    Ok(r) => {
                        let status = r.status();
                        let text: String = r
                            .text()
                            .await
                            .unwrap_or_default()
                            .chars()
                            .take(300)
                            .collect();
                        Attempt::Final(format!("{shown} refused the {what}: HTTP {status}: {text}"))
                    }
                    Err(why) => Attempt::Again(format!("{shown}: {why}"), None),
                }
            },
            |attempts, why| format!("{why} (gave up after {attempts} attempts)"),
        )
        .await
    }

    /// The server's manifest (`GET {base_url}/`), checked whole.
    pub async fn manifest(&self, base_url: &str) -> Result<wire::Manifest, DiscoveryError> {
        let url = format!("{base_url}{}", wire::DISCOVERY_PATH);
        let response = self
            .send(
                self.http.get(&url).header("accept", "application/json"),
                base_url,
                DISCOVERY_TIMEOUT,
            )
            .await
            .map_err(DiscoveryError::Unreachable)?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|e| DiscoveryError::Unreachable(format!("reading the manifest: {e}")))?;
        if !status.is_success() {
            return Err(DiscoveryError::Refused(format!("GET {url}: HTTP {status}")));
        }
        wire::parse_manifest(&body)
            .map_err(|e| DiscoveryError::InvalidManifest(format!("invalid manifest: {e}")))
    }

    async fn fetch_manifest(&self, base_url: &str) -> Result<Discovered, DiscoveryError> {
        let manifest = self.manifest(base_url).await?;
        let tools = manifest
            .tools
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name,
                description: t.description,
                input_schema: t.input_schema,
            })
            .collect();
        Ok(Discovered {
            server: base_url.to_owned(),
            result: Ok((manifest.endpoint, tools)),
            about: Some((manifest.name, manifest.description)),
        })
    }

    /// Asks the server at `base_url` to move its state for a conversation to its instance at
    /// `request.destination_url` (`POST /migrate`); `Ok` once it answered 200, which it does
    /// only when the state is there. Not retried: a server that failed says why, and the move is
    /// abandoned.
    pub async fn migrate_server(
        &self,
        base_url: &str,
        request: &wire::MigrateRequest,
    ) -> Result<(), String> {
        let url = format!("{}{}", base_url.trim_end_matches('/'), wire::MIGRATE_PATH);
        let response = self
            .send(
                self.http.post(&url).json(request),
                base_url,
                MIGRATE_TIMEOUT,
            )
            .await
            .map_err(|why| format!("POST {url}: {why}"))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text: String = response
            .text()
            .await
            .unwrap_or_default()
            .chars()
            .take(300)
            .collect();
        Err(format!("POST {url}: HTTP {status}: {text}"))
    }

    /// Best effort, to every configured server at once: no retry, each request cut off after
    /// [`NOTIFY_TIMEOUT`]. The thread's closure or cancellation is already committed, so
    /// nothing waits on the servers but this effect; it is awaited (not left in the
    /// background) so that a process about to exit, or a Lambda about to freeze, still
    /// delivers it.
    ///
    /// The body is serialized once, and each server gets those exact bytes signed with its own
    /// notification key for the thread (`X-Infinity-Signature`, see [`infinity_rap::signing`]).
    async fn broadcast(
        &self,
        path: &'static str,
        thread_id: &str,
        keys: &BTreeMap<String, String>,
        notice: &impl Serialize,
    ) {
        let body = match serde_json::to_vec(notice) {
            Ok(body) => Bytes::from(body),
            Err(error) => {
                tracing::error!(%error, path, "could not serialize a notification");
                return;
            }
        };
        let now = jiff::Timestamp::now().as_second();
        let sends = self.servers.iter().map(|server| {
            let url = format!("{}{path}", server.base_url);
            let mut request = self
                .http
                .post(&url)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
            let key = self.key_for(thread_id, &server.base_url, keys);
            match NotificationKey::parse(&key) {
                Ok(key) => {
                    request = request.header(NOTIFICATION_SIGNATURE_HEADER, key.sign(&body, now));
                }
                Err(error) => tracing::error!(%error, %url, "notification sent unsigned"),
            }
            async move {
                match self.send(request, &server.base_url, NOTIFY_TIMEOUT).await {
                    Ok(r) if r.status().is_success() => {}
                    Ok(r) => {
                        tracing::info!(%url, status = %r.status(), "notification not accepted")
                    }
                    Err(why) => tracing::info!(%url, %why, "notification not delivered"),
                }
            }
        });
        futures_util::future::join_all(sends).await;
    }
}

#[async_trait]
impl ToolDiscovery for RapClient {
    async fn discover(&self, servers: &[ToolServerConfig]) -> Vec<Discovered> {
        let fetches = servers.iter().map(|s| async move {
            self.fetch_manifest(&s.url)
                .await
                .unwrap_or_else(|why| Discovered {
                    server: s.url.clone(),
                    result: Err(why),
                    about: None,
                })
        });
        futures_util::future::join_all(fetches).await
    }
}

#[async_trait]
impl ToolDispatcher for RapClient {
    async fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), DispatchError> {
        let Some(target) = &invocation.server else {
            return Err(DispatchError::NoServer(invocation.tool.clone()));
        };
        let thread = invocation.thread_id.as_str();
        let ancestors: Vec<String> = invocation
            .lineage
            .iter()
            .take(invocation.lineage.len().saturating_sub(1))
            .map(|t| t.to_string())
            .collect();
        // The callback URL also hands the server the key of this thread's notifications to it.
        let body = Invocation {
            operation: invocation.tool.clone(),
            arguments: invocation.args.as_object().cloned().unwrap_or_default(),
            id: invocation.call_id.to_string(),
            call_id: Nullable::Absent,
            callback_url: format!(
                "{}&{NOTIFICATION_KEY_PARAM}={}",
                self.signer.url_for(
                    thread,
                    invocation.call_id.as_str(),
                    jiff::Timestamp::now().as_second(),
                ),
                invocation
                    .notify_key
                    .clone()
                    .unwrap_or_else(|| { self.signer.notification_key(thread, &target.base_url) }),
            ),
            group_id: thread.to_owned(),
            thread_ancestors: if ancestors.is_empty() {
                Nullable::Absent
            } else {
                Nullable::Value(ancestors)
            },
            user_id: match &self.user_id {
                Some(u) => Nullable::Value(u.clone()),
                None => Nullable::Absent,
            },
        };
        self.post_retried(
            &target.endpoint,
            Some(&target.base_url),
            &body,
            "call",
            "tool invocation",
        )
        .await
        .map_err(DispatchError::Refused)
    }

    async fn forward(&self, url: &str, input: &Input) -> Result<(), DispatchError> {
        self.post_retried(url, None, input, "input", "forwarding an input")
            .await
            .map_err(DispatchError::Refused)
    }

    async fn notify(&self, notification: &Notification) {
        match notification {
            Notification::CloseThread { thread_id, keys } => {
                let notice = wire::CloseThread {
                    thread_id: thread_id.to_string(),
                };
                self.broadcast(wire::CLOSE_THREAD_PATH, thread_id.as_str(), keys, &notice)
                    .await
            }
            Notification::CancelToolCall {
                thread_id,
                call_id,
                keys,
                ..
            } => {
                let notice = wire::CancelToolCall {
                    thread_id: thread_id.to_string(),
                    tool_call_id: call_id.to_string(),
                };
                self.broadcast(
                    wire::CANCEL_TOOL_CALL_PATH,
                    thread_id.as_str(),
                    keys,
                    &notice,
                )
                .await
            }
        }
    }
}
