//! Moving a live conversation between hosts (RAP's session migration), the steps that need the
//! network: telling tool servers with `needsMigration` to move their state, signing forwarding
//! URLs at the destination, and the HTTP form of each host's side for `infinity migrate`.
//!
//! [`move_conversation`] drives a move from a [`Source`] to a [`Destination`], in the spec's
//! order: the source stops the conversation's loop and has its stateful tool servers move their
//! state ([`start`]), the destination imports the conversation ([`import`]), and the source
//! leaves forwarding tombstones ([`finish`]), or runs the conversation again if anything failed
//! ([`abort`]).
//! A host does its side through a [`Host`]; another host is reached through [`Remote`] (the
//! `/threads/{id}/migration` routes of `infinity serve`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use infinity_agent_core::commit::Commit;
use infinity_agent_core::effect::PendingEffect;
use infinity_agent_core::ids::{RandomIds, ThreadId};
use infinity_agent_core::migration::{self, Bundle, MigrationError};
use infinity_agent_core::runtime::AgentSystem;
use infinity_agent_core::store::ThreadStore;
use serde::{Deserialize, Serialize};

use crate::client::RapClient;
use infinity_rap::signing::CallbackSigner;
use infinity_rap::wire::MigrateRequest;

/// How long [`start`] waits for effects the conversation still has to perform here.
pub const QUIET_WAIT: Duration = Duration::from_secs(30);

/// Performs effects committed outside a slice (a move's steps put forwarded inputs, timers and
/// nudges in the outbox).
#[async_trait]
pub trait Performer: Send + Sync {
    /// Performs `effects` of `thread_id`; `version` is the commit's when they are all of its.
    /// Effects not performed stay in the outbox, as after a slice.
    async fn perform(&self, thread_id: &ThreadId, effects: &[PendingEffect], version: Option<u64>);
}

/// The embedded runtime performs what a step committed itself, as after a slice.
#[async_trait]
impl Performer for AgentSystem {
    async fn perform(&self, thread_id: &ThreadId, effects: &[PendingEffect], version: Option<u64>) {
        if let Err(err) = AgentSystem::perform(self, thread_id, effects, version).await {
            tracing::warn!(%err, "effects not all performed; they stay in the outbox");
        }
    }
}

/// What one host brings to its side of a move.
#[derive(Clone, Copy)]
pub struct Host<'a> {
    /// Where its threads live.
    pub store: &'a dyn ThreadStore,
    /// Performs what the steps commit.
    pub performer: &'a dyn Performer,
    /// Signs this host's forwarding URLs (its base URL is where this host's receiver is
    /// reached).
    pub signer: &'a CallbackSigner,
    /// Reaches the conversation's tool servers (their manifests, `/migrate`).
    pub client: &'a RapClient,
    /// Whether this host runs an agent by a name (a conversation moved here must find its
    /// agents).
    pub runs_agent: &'a (dyn Fn(&str) -> bool + Sync),
}

impl std::fmt::Debug for Host<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("store", &self.store)
            .field("receiver", &self.signer.base_url())
            .finish_non_exhaustive()
    }
}

/// What the source is asked to start a move with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StartRequest {
    /// The destination, as the user named it (recorded on the source's tombstones).
    pub to: String,
    /// A tool server's base URL here -> the same server's base URL at the destination. Required
    /// for every server with `needsMigration`; other servers keep their URL unless mapped.
    #[serde(default)]
    pub servers: BTreeMap<String, String>,
}

/// What the destination answers an import with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Imported {
    /// The threads it stored (none when the same bundle was imported before).
    pub threads: Vec<ThreadId>,
    /// Each thread's forwarding URL there, signed for that thread.
    pub forward: BTreeMap<ThreadId, String>,
}

/// What the source is asked to finish a move with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FinishRequest {
    /// Each thread's forwarding URL at the destination.
    pub forward: BTreeMap<ThreadId, String>,
}

/// Why a move did not happen (or, for [`MoveError::Unfinished`], did not complete).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MoveError {
    /// A step on the thread store failed, or the conversation cannot move.
    #[error(transparent)]
    Migration(#[from] MigrationError),
    /// The conversation's effects kept running.
    #[error("the session still has {count} effect(s) to perform after {waited:?} (a call being dispatched, a failing delivery: `infinity thread outbox` shows them); try again once they are done")]
    Busy {
        /// How many.
        count: usize,
        /// How long it waited.
        waited: Duration,
    },
    /// A stateful tool server has no counterpart at the destination.
    #[error("tool server {server} keeps per-session state (needsMigration) and no server at the destination was given for it; add --server {server}=URL")]
    UnmappedServer {
        /// Its base URL.
        server: String,
    },
    /// A tool server's manifest could not be read, so whether it needs migration is unknown.
    #[error("tool server {server}: cannot tell whether it keeps per-session state: {why}")]
    ServerUnknown {
        /// Its base URL.
        server: String,
        /// Why.
        why: String,
    },
    /// A tool server failed to move its state.
    #[error("tool server {server} could not move the session's state: {why}")]
    ServerFailed {
        /// Its base URL.
        server: String,
        /// What it said.
        why: String,
    },
    /// The conversation does not run on this host (it is moving, or moved away): it has no
    /// forwarding addresses here.
    #[error("thread {0} does not run here (it is moving or moved away)")]
    NotHere(ThreadId),
    /// The other host refused or could not be reached.
    #[error("{host}: {why}")]
    Remote {
        /// Which host (its URL).
        host: String,
        /// What went wrong.
        why: String,
    },
    /// The destination has the conversation, but the source could not be told: it holds the
    /// conversation's inputs until `finish` is run again.
    #[error("the session now runs at the destination, but the source could not leave its forwarding tombstones ({why}); run the same `infinity migrate` with --finish")]
    Unfinished {
        /// Why.
        why: String,
    },
}

/// The source's first step: stops the conversation's loop, waits until it has no effect left to
/// perform, has each stateful tool server move its state (in the spec's order, before the
/// conversation moves), and exports the conversation with its tool servers pointed at the
/// destination's. On any failure the conversation runs here again.
pub async fn start(
    host: Host<'_>,
    root: &ThreadId,
    request: &StartRequest,
) -> Result<Bundle, MoveError> {
    let ids = migration::begin(host.store, root, &request.to, jiff::Timestamp::now()).await?;
    let moved = async {
        wait_quiet(host.store, &ids).await?;
        move_server_state(host, root, &request.servers).await?;
        let mut bundle = migration::export(host.store, root, &ids).await?;
        carry_notification_keys(&mut bundle, host.signer);
        migration::move_servers(&mut bundle, &normalized(&request.servers));
        Ok(bundle)
    }
    .await;
    if moved.is_err() {
        if let Err(err) = abort_ids(host, &ids).await {
            tracing::error!(%root, %err, "a failed move could not be undone; `infinity migrate --abort` retries");
        }
    }
    moved
}

/// Gives each thread of the bundle the keys its notifications to the conversation's tool servers
/// are signed with here, so that the destination signs with the keys the servers learned from this
/// host's callback URLs (a server re-keys at the thread's next invocation).
fn carry_notification_keys(bundle: &mut Bundle, signer: &CallbackSigner) {
    let servers: BTreeSet<String> = bundle
        .threads
        .iter()
        .filter_map(|t| t.record.conversation.toolset.as_ref())
        .flat_map(|t| &t.tools)
        .map(|t| t.server.trim_end_matches('/').to_owned())
        .collect();
    for thread in &mut bundle.threads {
        let id = thread.record.id.to_string();
        for server in &servers {
            thread
                .record
                .notify_keys
                .entry(server.clone())
                .or_insert_with(|| signer.notification_key(&id, server));
        }
    }
}

async fn wait_quiet(store: &dyn ThreadStore, ids: &[ThreadId]) -> Result<(), MoveError> {
    let began = tokio::time::Instant::now();
    loop {
        let count = migration::effects_in_flight(store, ids).await?;
        if count == 0 {
            return Ok(());
        }
        if began.elapsed() >= QUIET_WAIT {
            return Err(MoveError::Busy {
                count,
                waited: QUIET_WAIT,
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn normalized(servers: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    servers
        .iter()
        .map(|(from, to)| {
            (
                from.trim_end_matches('/').to_owned(),
                to.trim_end_matches('/').to_owned(),
            )
        })
        .collect()
}

/// `POST /migrate` to each of the conversation's servers whose manifest says `needsMigration`,
/// all of them before the conversation moves; the first failure stops the move.
async fn move_server_state(
    host: Host<'_>,
    root: &ThreadId,
    servers: &BTreeMap<String, String>,
) -> Result<(), MoveError> {
    let servers = normalized(servers);
    let record = host
        .store
        .load_record(root)
        .await
        .map_err(MigrationError::from)?
        .ok_or_else(|| MigrationError::UnknownThread(root.clone()))?;
    let used: BTreeSet<String> = record
        .conversation
        .toolset
        .iter()
        .flat_map(|t| &t.tools)
        .map(|t| t.server.trim_end_matches('/').to_owned())
        .collect();
    let mut stateful = Vec::new();
    for server in used {
        let manifest =
            host.client
                .manifest(&server)
                .await
                .map_err(|why| MoveError::ServerUnknown {
                    server: server.clone(),
                    why: why.to_string(),
                })?;
        if manifest.needs_migration() {
            let Some(destination) = servers.get(&server) else {
                return Err(MoveError::UnmappedServer { server });
            };
            stateful.push((server, destination.clone()));
        }
    }
    for (server, destination_url) in stateful {
        let request = MigrateRequest {
            session_id: root.to_string(),
            destination_url,
        };
        host.client
            .migrate_server(&server, &request)
            .await
            .map_err(|why| MoveError::ServerFailed {
                server: server.clone(),
                why,
            })?;
        tracing::info!(%root, %server, "tool server moved the session's state");
    }
    Ok(())
}

/// The destination's step: stores the conversation, arms its timers again, and signs a
/// forwarding URL for each of its threads.
pub async fn import(host: Host<'_>, bundle: &Bundle) -> Result<Imported, MoveError> {
    let imported = migration::import(host.store, bundle, host.runs_agent, &mut RandomIds).await?;
    for (thread_id, effects) in &imported {
        host.performer.perform(thread_id, effects, None).await;
    }
    let forward = bundle
        .threads
        .iter()
        .map(|t| {
            (
                t.record.id.clone(),
                host.signer.forward_url(t.record.id.as_str()),
            )
        })
        .collect();
    Ok(Imported {
        threads: imported.into_iter().map(|(id, _)| id).collect(),
        forward,
    })
}

/// The destination's forwarding URLs for a conversation it runs (moved here): to finish a move
/// whose last step did not reach the source.
pub async fn forward_urls(
    host: Host<'_>,
    root: &ThreadId,
) -> Result<BTreeMap<ThreadId, String>, MoveError> {
    let ids = migration::conversation_threads(host.store, root).await?;
    let mut forward = BTreeMap::new();
    for id in ids {
        let record = host
            .store
            .load_record(&id)
            .await
            .map_err(MigrationError::from)?
            .ok_or_else(|| MigrationError::UnknownThread(id.clone()))?;
        if record.migration.is_some() {
            return Err(MoveError::NotHere(id));
        }
        forward.insert(id.clone(), host.signer.forward_url(id.as_str()));
    }
    Ok(forward)
}

/// The source's last step: every thread of the conversation forwards to the destination from now
/// on, the inputs held meanwhile first. Running it again is harmless.
pub async fn finish(
    host: Host<'_>,
    root: &ThreadId,
    forward: &BTreeMap<ThreadId, String>,
) -> Result<(), MoveError> {
    let ids = migration::conversation_threads(host.store, root).await?;
    let commits = migration::finish(host.store, &ids, forward).await?;
    perform_commits(host, &commits).await;
    Ok(())
}

/// Performs the effects of the commits a step of a move made.
async fn perform_commits(host: Host<'_>, commits: &[Commit]) {
    for commit in commits.iter().filter(|c| !c.effects.is_empty()) {
        host.performer
            .perform(
                &commit.thread_id,
                &commit.effects,
                Some(commit.record.version),
            )
            .await;
    }
}

/// Abandons a move at the source: the conversation runs here again and applies what it held.
pub async fn abort(host: Host<'_>, root: &ThreadId) -> Result<(), MoveError> {
    let ids = migration::conversation_threads(host.store, root).await?;
    abort_ids(host, &ids).await
}

async fn abort_ids(host: Host<'_>, ids: &[ThreadId]) -> Result<(), MoveError> {
    let commits = migration::abort(host.store, ids, &mut RandomIds).await?;
    perform_commits(host, &commits).await;
    Ok(())
}

/// The host a conversation moves away from.
#[async_trait]
pub trait Source: Send + Sync {
    /// See [`start`].
    async fn start(&self, root: &ThreadId, request: &StartRequest) -> Result<Bundle, MoveError>;
    /// See [`finish`].
    async fn finish(
        &self,
        root: &ThreadId,
        forward: &BTreeMap<ThreadId, String>,
    ) -> Result<(), MoveError>;
    /// See [`abort`].
    async fn abort(&self, root: &ThreadId) -> Result<(), MoveError>;
}

/// The host a conversation moves to.
#[async_trait]
pub trait Destination: Send + Sync {
    /// See [`import`].
    async fn import(&self, bundle: &Bundle) -> Result<Imported, MoveError>;
    /// See [`forward_urls`].
    async fn forward_urls(&self, root: &ThreadId) -> Result<BTreeMap<ThreadId, String>, MoveError>;
}

#[async_trait]
impl Source for Host<'_> {
    async fn start(&self, root: &ThreadId, request: &StartRequest) -> Result<Bundle, MoveError> {
        start(*self, root, request).await
    }
    async fn finish(
        &self,
        root: &ThreadId,
        forward: &BTreeMap<ThreadId, String>,
    ) -> Result<(), MoveError> {
        finish(*self, root, forward).await
    }
    async fn abort(&self, root: &ThreadId) -> Result<(), MoveError> {
        abort(*self, root).await
    }
}

#[async_trait]
impl Destination for Host<'_> {
    async fn import(&self, bundle: &Bundle) -> Result<Imported, MoveError> {
        import(*self, bundle).await
    }
    async fn forward_urls(&self, root: &ThreadId) -> Result<BTreeMap<ThreadId, String>, MoveError> {
        forward_urls(*self, root).await
    }
}

/// What a finished move did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// The conversation's threads, as the destination stored them.
    pub threads: usize,
}

/// Moves the conversation of `root` from `source` to `destination`: start, import, finish; when
/// the import fails, the source runs the conversation again.
pub async fn move_conversation(
    source: &dyn Source,
    destination: &dyn Destination,
    root: &ThreadId,
    request: &StartRequest,
) -> Result<Moved, MoveError> {
    let bundle = source.start(root, request).await?;
    let imported = match destination.import(&bundle).await {
        Ok(imported) => imported,
        Err(err) => {
            if let Err(undo) = source.abort(root).await {
                tracing::error!(%root, %undo, "the source could not run the session again");
            }
            return Err(err);
        }
    };
    let mut last = None;
    for _ in 0..3 {
        match source.finish(root, &imported.forward).await {
            Ok(()) => {
                return Ok(Moved {
                    threads: bundle.threads.len(),
                })
            }
            Err(err) => last = Some(err),
        }
    }
    Err(MoveError::Unfinished {
        why: last.map(|e| e.to_string()).unwrap_or_default(),
    })
}

/// Another host's side of a move, over HTTP: the routes `infinity serve` has
/// (`POST /threads/{id}/migration`, `.../migration/finish`, `.../migration/abort`,
/// `.../migration/forwarding`, `POST /migration/import`), with its bearer token if it needs
/// one.
#[derive(Debug, Clone)]
pub struct Remote {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl Remote {
    /// The host served at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, token: Option<String>) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http: reqwest::Client::new(),
        }
    }

    async fn post<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, MoveError> {
        let url = format!("{}{path}", self.base);
        let failed = |why: String| MoveError::Remote {
            host: self.base.clone(),
            why,
        };
        let mut request = self.http.post(&url).json(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|e| failed(format!("POST {path}: {}", e.without_url())))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| failed(format!("POST {path}: reading the answer: {e}")))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let text = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_owned))
                .unwrap_or_else(|| text.chars().take(500).collect());
            return Err(failed(format!("POST {path}: HTTP {status}: {text}")));
        }
        let bytes = if bytes.is_empty() {
            &b"null"[..]
        } else {
            &bytes[..]
        };
        serde_json::from_slice(bytes).map_err(|e| failed(format!("POST {path}: {e}")))
    }
}

#[async_trait]
impl Source for Remote {
    async fn start(&self, root: &ThreadId, request: &StartRequest) -> Result<Bundle, MoveError> {
        self.post(&format!("/threads/{root}/migration"), request)
            .await
    }
    async fn finish(
        &self,
        root: &ThreadId,
        forward: &BTreeMap<ThreadId, String>,
    ) -> Result<(), MoveError> {
        let request = FinishRequest {
            forward: forward.clone(),
        };
        self.post::<serde_json::Value>(&format!("/threads/{root}/migration/finish"), &request)
            .await
            .map(|_| ())
    }
    async fn abort(&self, root: &ThreadId) -> Result<(), MoveError> {
        self.post::<serde_json::Value>(
            &format!("/threads/{root}/migration/abort"),
            &serde_json::json!({}),
        )
        .await
        .map(|_| ())
    }
}

#[async_trait]
impl Destination for Remote {
    async fn import(&self, bundle: &Bundle) -> Result<Imported, MoveError> {
        self.post("/migration/import", bundle).await
    }
    async fn forward_urls(&self, root: &ThreadId) -> Result<BTreeMap<ThreadId, String>, MoveError> {
        let answer: FinishRequest = self
            .post(
                &format!("/threads/{root}/migration/forwarding"),
                &serde_json::json!({}),
            )
            .await?;
        Ok(answer.forward)
    }
}

/// Finishes a move whose last step did not reach the source: the destination, which runs the
/// conversation, gives its forwarding URLs, and the source leaves its tombstones.
pub async fn finish_move(
    source: &dyn Source,
    destination: &dyn Destination,
    root: &ThreadId,
) -> Result<(), MoveError> {
    let forward = destination.forward_urls(root).await?;
    source.finish(root, &forward).await
}
