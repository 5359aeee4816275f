//! The Lambda handlers: the agent (input queue) and the relay (timer queue). The local poller
//! calls exactly these.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use infinity_agent_core::agent::{Agent, AgentLookup};
use infinity_agent_core::catalog::{AgentCatalog, CatalogAgents};
use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::engine::SliceError;
use infinity_agent_core::host::{
    perform_effects, run_loaded_slice, EffectPerformer, EffectRef, Handoff, HostContext,
    InputSender, OutputError, PerformError, RetryPolicy, SendError, SliceBudget, SliceFailure,
    Timers, ToolDispatcher,
};
use infinity_agent_core::ids::{EffectId, InputId, RandomIds, ThreadId};
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::store::{StoreError, ThreadStore};
use infinity_agent_core::tools::Tool;
use jiff::Timestamp;
use tokio::task::JoinSet;

use crate::catalog::DynamoAgentCatalog;
use crate::config::{AwsConfig, Clients};
use crate::dlq::{FailureNote, FailureNotes};
use crate::knowledge::DynamoKnowledgeStore;
use crate::queue::{AwsTimers, OutputQueue, SqsInputSender};
use crate::remotes::TableRemotes;
use crate::store::DynamoThreadStore;
use crate::wire::{Carried, RelayEnvelope, WireError};

mod batch;
mod perform;
mod relay;
mod setup;
mod slices;

pub use relay::RelayHandler;

use infinity_agent_core::library::Library;
use infinity_library::meta::{StoredDirectory, DIRECTORY_REFRESH};
use infinity_library::remote::RemoteDispatcher;
use infinity_library::LibraryExt;
use setup::StoredAgentBuilder;
pub use setup::{
    agent_from_env, agent_from_env_with, allowed_models_from_env, build_agent, build_agent_with,
    read_ssm_parameter, DeploymentModels, SetupError, SsmError, ALLOWED_MODELS_VAR,
};

/// Why a thread's messages could not be handled; SQS delivers them again.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandlerError {
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The slice could not run or commit.
    #[error(transparent)]
    Slice(#[from] SliceFailure),
    /// Committed effects could not be performed (they stay in the outbox).
    #[error(transparent)]
    Effects(#[from] PerformError),
    /// The thread runs an agent this deployment does not have: its input goes to the
    /// dead-letter queue after the redrive count (kept, not lost), for an operator.
    #[error("thread {thread_id} runs agent `{agent}`, which this deployment does not have; its input goes to the dead-letter queue")]
    UnknownAgent {
        /// The thread.
        thread_id: ThreadId,
        /// Its agent.
        agent: String,
    },
}

/// The agent Lambda: one slice per thread per batch.
#[derive(Debug)]
pub struct AgentHandler {
    store: DynamoThreadStore,
    sender: SqsInputSender,
    timers: AwsTimers,
    output: Option<OutputQueue>,
    /// The deployment's agent (when it has one of its own) and the ones stored in its table.
    agents: CatalogAgents,
    /// The deployment's knowledge (in the table), loaded by the first slice that needs it.
    library: Library,
    default_agent: String,
    /// Talks to the agent's tool servers, when it has any.
    tool_servers: Option<Arc<infinity_rap_runtime::client::RapClient>>,
    /// `remote_exec` calls to the remotes, every other call to the tool servers.
    dispatcher: RemoteDispatcher,
    /// The longest one completion may take (`INFINITY_COMPLETION_TIMEOUT_SECONDS`).
    completion_timeout: Duration,
    /// Why a message was reported as failed, for `infinity dlq show` (see [`crate::dlq`]).
    notes: FailureNotes,
}

/// One message of a batch, parsed.
struct Message {
    message_id: String,
    /// How many times SQS has delivered it (1 the first time).
    receive_count: u32,
    /// Its `MessageGroupId`: the thread it is for.
    group: Option<String>,
    /// The body as it came (kept aside when no slice can use it).
    body: String,
    input: Result<Carried, WireError>,
}

/// How many times a committed effect is tried (once per delivery of the thread's messages)
/// before it is set aside as failed, so the thread goes on without it. Below the input queue's
/// redrive count (5), so the message whose slice made the effect, which is in the history
/// already, never reaches the dead-letter queue because of it.
pub const EFFECT_ATTEMPTS: u32 = 3;

fn attribute<'a>(message: &'a SqsMessage, name: &str) -> Option<&'a str> {
    message.attributes.get(name).map(String::as_str)
}

/// How stale a warm instance's copy of the knowledge may get before a slice that uses it reads
/// it again (other instances write to it too; an instance's own saves show at once).
pub const KNOWLEDGE_REFRESH: Duration = Duration::from_secs(60);

/// Model retries within one slice on Lambda: one quick retry, then SQS delivers the input
/// again after the visibility timeout.
const LAMBDA_MODEL_RETRY: RetryPolicy =
    RetryPolicy::new(2, Duration::from_millis(500), Duration::from_millis(500));

/// The time a slice keeps back before its invocation's deadline for the commit, its effects
/// and the batch's cleanup (a few DynamoDB and SQS requests, well under a second when they
/// are healthy; the rest is room for a slow one and its retries).
pub const COMMIT_RESERVE: Duration = Duration::from_secs(10);

impl AgentHandler {
    /// A handler with clients built once at init. `agent` is the default for new threads; the
    /// agents stored in the table run too (see [`AgentHandler::with_stored_agents`]).
    pub fn new(clients: &Clients, config: &AwsConfig, agent: Arc<Agent>) -> Self {
        let name = agent.name.clone();
        Self::with_agents(
            clients,
            config,
            HashMap::from([(name.clone(), agent)]),
            name,
        )
    }

    /// A handler whose default agent is a stored one (`INFINITY_DEFAULT_AGENT`, the newest
    /// version when a thread starts), with no agent of its own.
    pub fn for_stored(clients: &Clients, config: &AwsConfig, default_agent: String) -> Self {
        Self::with_agents(clients, config, HashMap::new(), default_agent)
    }

    /// Stored agents are built with the application's `tools` and model `providers` (the
    /// default: the built-in tools, `set_title` and the built-in providers).
    pub fn with_stored_agents(
        mut self,
        tools: &[Arc<dyn Tool>],
        providers: &infinity_models::CustomProviders,
    ) -> Self {
        let catalog = Arc::clone(self.agents.catalog());
        self.agents = CatalogAgents::new(
            self.agents.own().clone(),
            Arc::clone(&catalog),
            Arc::new(StoredAgentBuilder {
                tools: tools.to_vec(),
                providers: providers.clone(),
                catalog,
            }),
        );
        self
    }

    fn with_agents(
        clients: &Clients,
        config: &AwsConfig,
        own: HashMap<String, Arc<Agent>>,
        default_agent: String,
    ) -> Self {
        let catalog: Arc<dyn AgentCatalog> = Arc::new(DynamoAgentCatalog::new(
            clients.dynamodb.clone(),
            config.table.clone(),
        ));
        let store = DynamoThreadStore::new(
            clients.dynamodb.clone(),
            config.table.clone(),
            config.dedup_ttl,
        )
        .keeping_events_for(config.event_retention)
        .keeping_views(config.view_cache_bytes)
        .deferring_outbox_deletes();
        let mut library = Library::new()
            .with_knowledge(
                Arc::new(DynamoKnowledgeStore::new(
                    clients.dynamodb.clone(),
                    config.table.clone(),
                )),
                Some(KNOWLEDGE_REFRESH),
            )
            .with_directory(
                Arc::new(StoredDirectory::new(Arc::clone(&catalog), None)),
                DIRECTORY_REFRESH,
            )
            .with_models(
                Arc::new(setup::DeploymentModels::default()),
                setup::allowed_models_from_env(),
            );
        if let Some(artifacts) = config.artifacts(clients) {
            library = library.with_artifacts(artifacts);
        }
        let remotes = Arc::new(TableRemotes::new(clients, config));
        library = library.with_remotes(Arc::clone(&remotes) as _);
        Self {
            sender: SqsInputSender::new(clients.sqs.clone(), config.input_queue_url.clone())
                .with_stash(store.clone()),
            timers: AwsTimers::new(
                clients.sqs.clone(),
                clients.scheduler.clone(),
                config.clone(),
            )
            .with_stash(store.clone()),
            store,
            output: config
                .output_queue_url
                .as_ref()
                .map(|url| OutputQueue::new(clients.sqs.clone(), url.clone())),
            default_agent,
            library,
            agents: CatalogAgents::new(
                own,
                Arc::clone(&catalog),
                Arc::new(StoredAgentBuilder {
                    tools: Vec::new(),
                    providers: infinity_models::CustomProviders::new(),
                    catalog,
                }),
            ),
            tool_servers: None,
            completion_timeout: config.completion_timeout,
            notes: FailureNotes::new(clients.dynamodb.clone(), config.table.clone()),
            // The stack's remote machines (the `remote` category), in the table.
            dispatcher: RemoteDispatcher {
                hub: remotes,
                rest: None,
            },
        }
    }

    /// The same handler, discovering and invoking tools with `client` (see
    /// [`crate::tool_servers::rap_client_for`]).
    pub fn with_tool_servers(
        mut self,
        client: Option<Arc<infinity_rap_runtime::client::RapClient>>,
    ) -> Self {
        // The meta catalog's apps are found through the same client.
        let discovery = client
            .clone()
            .map(|c| c as Arc<dyn infinity_agent_core::tools::servers::ToolDiscovery>);
        let directory = StoredDirectory::new(Arc::clone(self.agents.catalog()), discovery);
        self.library = std::mem::take(&mut self.library)
            .with_directory(Arc::new(directory), DIRECTORY_REFRESH);
        self.dispatcher.rest = client.clone().map(|c| c as Arc<dyn ToolDispatcher>);
        self.tool_servers = client;
        self
    }

    /// The store (for reads by tools and tests).
    pub fn store(&self) -> &DynamoThreadStore {
        &self.store
    }

    /// The agent of this name, if the deployment has it ready (its own, or a stored version
    /// read already).
    pub fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        self.agents.agent(name)
    }

    /// Handles one SQS batch with no deadline (each slice runs as long as it takes). See
    /// [`AgentHandler::handle_until`].
    pub async fn handle(self: &Arc<Self>, event: SqsEvent) -> SqsBatchResponse {
        self.handle_until(event, None).await
    }

    /// Warns, once per instance, when an invocation's time cannot hold the commit reserve and
    /// one whole completion: every slice then hands itself on after each completion, or its
    /// first completion is cut short. The function's `Timeout` is too short for the model.
    fn warn_if_short(&self, deadline: tokio::time::Instant) {
        static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let needed = COMMIT_RESERVE + self.completion_timeout;
        if left < needed && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                left_secs = left.as_secs(),
                needed_secs = needed.as_secs(),
                "the invocation has less time than the commit reserve ({}s) and one completion \
                 (INFINITY_COMPLETION_TIMEOUT_SECONDS, {}s): raise the agent function's Timeout \
                 in template.yaml or lower the completion timeout (docs/aws.md)",
                COMMIT_RESERVE.as_secs(),
                self.completion_timeout.as_secs()
            );
        }
    }
}
