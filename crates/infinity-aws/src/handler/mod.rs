//! The Lambda handlers: the agent (input queue) and the relay (timer queue). The local poller
//! calls exactly these.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use infinity_agent_core::agent::{Agent, AgentLookup};
use infinity_agent_core::catalog::{AgentCatalog, CatalogAgents, StoredCatalog};
use infinity_agent_core::effect::{OutputEvent, OutputKind};
use infinity_agent_core::engine::SliceError;
use infinity_agent_core::host::{
    perform_effects, run_loaded_slice, EffectPerformer, EffectRef, Handoff, HostContext,
    InputSender, ModelRetry, OutputError, PerformError, SendError, SliceBudget, SliceFailure,
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
use crate::knowledge::DynamoKnowledgeStore;
use crate::queue::{AwsTimers, OutputQueue, SqsInputSender};
use crate::remotes::TableRemotes;
use crate::store::DynamoThreadStore;
use crate::wire::{parse_input, Carried, RelayEnvelope, WireError};

mod setup;

use infinity_agent_core::host::remotes::RemoteDispatcher;
use infinity_agent_core::library::{Library, CATALOG_REFRESH};
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
    tool_servers: Option<Arc<infinity_rap::client::RapClient>>,
    /// `remote_exec` calls to the remotes, every other call to the tool servers.
    dispatcher: RemoteDispatcher,
    /// The longest one completion may take (`INFINITY_COMPLETION_TIMEOUT_SECONDS`).
    completion_timeout: Duration,
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
const LAMBDA_MODEL_RETRY: ModelRetry = ModelRetry {
    attempts: 2,
    first_delay: Duration::from_millis(500),
};

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
            .with_catalog(
                Arc::new(StoredCatalog::new(Arc::clone(&catalog), None)),
                CATALOG_REFRESH,
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
        client: Option<Arc<infinity_rap::client::RapClient>>,
    ) -> Self {
        // The meta catalog's apps are found through the same client.
        let discovery = client
            .clone()
            .map(|c| c as Arc<dyn infinity_agent_core::tools::remote::ToolDiscovery>);
        let catalog = StoredCatalog::new(Arc::clone(self.agents.catalog()), discovery);
        self.library =
            std::mem::take(&mut self.library).with_catalog(Arc::new(catalog), CATALOG_REFRESH);
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

    /// Handles one SQS batch. Messages are grouped by thread (`MessageGroupId`) in order; each
    /// thread's messages run as one slice, threads run concurrently. A failing message and every
    /// later message of its thread are reported as batch item failures (FIFO semantics); other
    /// threads are unaffected. With a `deadline` (the invocation's), each slice starts a
    /// completion only while one fits before it, and otherwise commits and hands itself on to
    /// the next invocation (a `continue` input; see [`SliceBudget`]).
    pub async fn handle_until(
        self: &Arc<Self>,
        event: SqsEvent,
        deadline: Option<tokio::time::Instant>,
    ) -> SqsBatchResponse {
        if let Some(deadline) = deadline {
            self.warn_if_short(deadline);
        }
        let mut groups: Vec<(String, Vec<Message>)> = Vec::new();
        // Each message's receipt handle and receive count, for a retry after a failure.
        let mut deliveries: HashMap<String, (String, u32)> = HashMap::new();
        for record in event.records {
            let message_id = record.message_id.clone().unwrap_or_default();
            let group = attribute(&record, "MessageGroupId");
            let body = record.body.clone().unwrap_or_default();
            let input = parse_input(&body, group, attribute(&record, "MessageDeduplicationId"));
            let key = group
                .map(str::to_owned)
                .or_else(|| input.as_ref().ok().map(|i| i.thread_id().to_string()))
                .unwrap_or_else(|| message_id.clone());
            let receive_count = attribute(&record, "ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1);
            if let Some(receipt) = &record.receipt_handle {
                deliveries.insert(message_id.clone(), (receipt.clone(), receive_count));
            }
            let message = Message {
                message_id,
                receive_count,
                group: group.map(str::to_owned),
                body,
                input,
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, messages)) => messages.push(message),
                None => groups.push((key, vec![message])),
            }
        }
        let mut tasks = JoinSet::new();
        for (_, messages) in groups {
            let this = Arc::clone(self);
            tasks.spawn(async move { this.handle_thread(messages, deadline).await });
        }
        let mut response = SqsBatchResponse::default();
        let mut retry = Vec::new();
        while let Some(result) = tasks.join_next().await {
            match result {
                Ok(failed) => {
                    for id in failed {
                        if let Some(delivery) = deliveries.get(&id) {
                            retry.push(delivery.clone());
                        }
                        response.add_failure(id);
                    }
                }
                Err(err) => tracing::error!(%err, "a thread's task failed"),
            }
        }
        // Failed messages come back after a short, growing delay, not the queue's visibility
        // timeout (sized for a function that runs to its own timeout).
        self.sender.retry_later(&retry).await;
        // The batch's performed outboxes, deleted together (no thread of the batch gets its
        // next message before this returns).
        if let Err(err) = self.store.flush_outbox_deletes().await {
            tracing::warn!(%err, "performed outbox items not deleted; a thread's next slice performs them again");
        }
        response
    }

    /// Runs one thread's messages; returns the ids of the messages to report as failed.
    async fn handle_thread(
        &self,
        messages: Vec<Message>,
        deadline: Option<tokio::time::Instant>,
    ) -> Vec<String> {
        // Messages kept aside are done with: never reported as failed, so never kept twice.
        let mut kept_aside: Vec<&str> = Vec::new();
        let all = |kept_aside: &[&str]| {
            messages
                .iter()
                .filter(|m| !kept_aside.contains(&m.message_id.as_str()))
                .map(|m| m.message_id.clone())
                .collect()
        };
        let mut inputs: Vec<Input> = Vec::new();
        let mut failed: Vec<String> = Vec::new();
        for (i, message) in messages.iter().enumerate() {
            let input = match &message.input {
                Ok(Carried::Input(input)) => Ok(Some(input.clone())),
                Ok(Carried::StoredInput(stored)) => match self.resolve(stored).await {
                    Ok(found) => found,
                    // The table is unavailable: the whole batch of the thread again, later.
                    Err(err) => {
                        tracing::warn!(thread = %stored.thread_id, %err, "cannot read a stored input; the thread's messages will be redelivered");
                        return all(&kept_aside);
                    }
                },
                Err(err) => Err(err.clone()),
            };
            match input {
                Ok(Some(input)) => inputs.push(input),
                Ok(None) => {} // a copy of an input already processed
                Err(err) => {
                    // Terminal: retrying the same bytes cannot help. Reported as failed, it
                    // would hold the rest of its FIFO group with it until they all reached the
                    // dead-letter queue; kept aside in the table instead, it is acknowledged and
                    // the messages behind it go on.
                    match self.keep_aside(message, &err).await {
                        Ok(()) => kept_aside.push(&message.message_id),
                        Err(why) => {
                            tracing::warn!(message_id = %message.message_id, error = %err, %why, "an unusable input message could not be kept aside; it and the rest of its thread's messages will be redelivered");
                            failed.extend(messages[i..].iter().map(|m| m.message_id.clone()));
                            break;
                        }
                    }
                }
            }
        }
        let Some(thread_id) = inputs.first().map(|i| i.thread_id.clone()) else {
            return failed;
        };
        let attempt = messages.iter().map(|m| m.receive_count).max().unwrap_or(1);
        let first_delivery = messages.iter().any(|m| m.receive_count <= 1);
        let run = self.run(&thread_id, inputs, attempt, first_delivery, deadline);
        if let Err(err) = run.await {
            tracing::warn!(thread = %thread_id, %err, "slice not finished; its messages will be redelivered");
            // Report the whole thread's batch: FIFO redelivers it, in order.
            failed = all(&kept_aside);
        }
        failed
    }

    /// Keeps a message no slice can use in the table under its thread, with an ERROR and an
    /// `error` event on the thread; the message is then acknowledged. A message with no thread
    /// to keep it under (no group, or a group that is no thread id) holds no thread back: it
    /// is reported as failed and reaches the dead-letter queue after the redrive count.
    async fn keep_aside(&self, message: &Message, err: &WireError) -> Result<(), String> {
        let Some(thread_id) = message
            .group
            .as_deref()
            .and_then(|group| ThreadId::new(group).ok())
        else {
            return Err("the message names no thread to keep it under".to_owned());
        };
        let reason = err.to_string();
        let kept = self
            .store
            .keep_unusable_input(&thread_id, &message.message_id, &message.body, &reason)
            .await
            .map_err(|e| e.to_string())?;
        tracing::error!(thread = %thread_id, message_id = %message.message_id, bytes = kept.body_bytes, %reason, "unusable input message kept aside in the table; `infinity thread outbox {thread_id}` shows it");
        let text = format!(
            "a message for this thread could not be used and was kept aside ({reason}); `infinity thread outbox {thread_id}` shows it"
        );
        self.publish_error(
            &thread_id,
            EffectId::derived("unusable", &message.message_id),
            text,
        )
        .await;
        Ok(())
    }

    /// Publishes an `error` event the handler makes itself (not a slice's), with `id` as its
    /// event id; a failure to publish is logged only.
    async fn publish_error(&self, thread_id: &ThreadId, id: EffectId, text: String) {
        let event = OutputEvent {
            thread_id: thread_id.clone(),
            at: Timestamp::now(),
            kind: OutputKind::Error { text },
        };
        if let Err(e) = self.output_effects(&[(&id, &event)]).await {
            tracing::warn!(thread = %thread_id, error = %e, "could not publish an error event");
        }
    }

    /// The input a message refers to: `Ok(None)` when the table no longer has it because it was
    /// processed (this message is a copy), an error when it was never processed.
    async fn resolve(
        &self,
        stored: &crate::wire::StoredInput,
    ) -> Result<Result<Option<Input>, WireError>, StoreError> {
        if let Some(input) = self.store.stashed_input(stored).await? {
            return Ok(Ok(Some(input)));
        }
        let processed = self
            .store
            .processed(&stored.thread_id, std::slice::from_ref(&stored.id))
            .await?;
        if processed.contains(&stored.id) {
            return Ok(Ok(None));
        }
        Ok(Err(WireError::StoredInputMissing {
            thread_id: stored.thread_id.clone(),
            id: stored.id.clone(),
        }))
    }

    /// After effects failed: on an early attempt, an error (SQS delivers the thread's messages
    /// again, and the outbox is tried again first). On the last, the effects still in the outbox
    /// are set aside as failed, each reported as an ERROR and an `error` event, and the thread
    /// goes on: an effect that can never be performed must not stop its thread, and the input
    /// that made it is in the history already.
    async fn retry_or_set_aside(
        &self,
        thread_id: &ThreadId,
        err: PerformError,
        attempt: u32,
    ) -> Result<(), HandlerError> {
        if attempt < EFFECT_ATTEMPTS || !matches!(err, PerformError::Effects { .. }) {
            return Err(err.into());
        }
        let reason = err.to_string();
        let set_aside = self
            .store
            .set_aside_outbox(thread_id, &reason, attempt)
            .await?;
        for failed in &set_aside {
            tracing::error!(thread = %thread_id, effect = %failed.effect.id, kind = failed.effect.effect.kind(), attempts = attempt, %reason, "effect set aside after its attempts; `infinity thread outbox {thread_id}` retries or drops it");
        }
        if let Some(first) = set_aside.first() {
            let text = format!(
                "{} effect(s) of this thread failed {attempt} times and were set aside ({reason}); `infinity thread outbox {thread_id}` shows, retries or drops them",
                set_aside.len()
            );
            let id = EffectId::derived(first.effect.id.as_str(), "set-aside");
            self.publish_error(thread_id, id, text).await;
        }
        Ok(())
    }

    /// Performs what an earlier slice left in the outbox, then runs a slice through the shared
    /// driver (which commits and performs its effects).
    /// `attempt`: how many times SQS has delivered these messages (see [`EFFECT_ATTEMPTS`]);
    /// `first_delivery`: whether one of them is delivered for the first time (an error that
    /// every delivery meets again is published once, on the first).
    async fn run(
        &self,
        thread_id: &ThreadId,
        inputs: Vec<Input>,
        attempt: u32,
        first_delivery: bool,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<(), HandlerError> {
        if inputs.iter().any(|i| matches!(i.body, InputBody::Nudge {})) {
            // An operator put effects back in the outbox: read it, whatever this instance kept.
            self.store.forget(thread_id);
        }
        let input_ids: Vec<InputId> = inputs.iter().map(|i| i.id.clone()).collect();
        let newest_input = input_ids.last().cloned();
        let mut state = self.store.load_slice(thread_id, &input_ids, true).await?;
        // A crash after an earlier commit leaves its effects here; perform them first.
        let leftover = state.outbox.take().unwrap_or_default();
        if !leftover.is_empty() {
            tracing::info!(thread = %thread_id, effects = leftover.len(), "performing effects left by an earlier slice");
            if let Err(err) = perform_effects(self, &self.store, thread_id, &leftover, None).await {
                self.retry_or_set_aside(thread_id, err, attempt).await?;
            }
        }
        let host = HostContext {
            store: &self.store,
            agents: &self.agents,
            default_agent: Some(&self.default_agent),
            discovery: self
                .tool_servers
                .as_deref()
                .map(|c| c as &dyn infinity_agent_core::tools::remote::ToolDiscovery),
            effects: self,
            live: None,
            model_retry: LAMBDA_MODEL_RETRY,
            budget: deadline.map(|deadline| SliceBudget {
                deadline,
                completion: self.completion_timeout,
                reserve: COMMIT_RESERVE,
            }),
            library: Some(&self.library),
        };
        let mut ids = RandomIds;
        let slice = run_loaded_slice(&host, thread_id, inputs, state, Timestamp::now(), &mut ids);
        match slice.await {
            Ok(report) => match report.effects {
                Ok(()) => Ok(()),
                Err(err) => self.retry_or_set_aside(thread_id, err, attempt).await,
            },
            Err(SliceFailure::Slice(SliceError::UnknownAgent { thread_id, agent })) => {
                // Retrying cannot help, and the input must not vanish: it is reported as failed,
                // so the queue moves it to the dead-letter queue after the redrive count.
                // Every delivery meets the same refusal: the user is told once, when new input
                // arrives, not once per delivery.
                let err = HandlerError::UnknownAgent {
                    thread_id: thread_id.clone(),
                    agent,
                };
                tracing::error!(%err, attempt, "input refused");
                if first_delivery {
                    let id = EffectId::derived(
                        newest_input.as_ref().map_or("input", InputId::as_str),
                        "unknown-agent",
                    );
                    self.publish_error(&thread_id, id, err.to_string()).await;
                }
                Err(err)
            }
            Err(err) => {
                if let SliceFailure::Slice(SliceError::Retryable(why)) = &err {
                    // The user sees that the model is unavailable, once per delivery (each is
                    // a new try); SQS retries the input later.
                    let id = EffectId::derived(
                        newest_input.as_ref().map_or("input", InputId::as_str),
                        &format!("unavailable-{attempt}"),
                    );
                    let text = format!("model unavailable, will retry: {why}");
                    self.publish_error(thread_id, id, text).await;
                }
                Err(err.into())
            }
        }
    }
}

/// Effects on AWS: inputs go to the FIFO queue, timers to the relay queue or Scheduler (both
/// durable, so an effect is done once accepted), output to the output queue.
#[async_trait]
impl EffectPerformer for AgentHandler {
    async fn send(&self, input: &Input, _from: &EffectRef) -> Result<Handoff, SendError> {
        self.sender
            .send_to_input_queue(input, &input.thread_id, &input.id)
            .await?;
        Ok(Handoff::Delivered)
    }

    async fn send_all(&self, inputs: &[(&Input, EffectRef)]) -> Vec<Result<Handoff, SendError>> {
        let inputs: Vec<&Input> = inputs.iter().map(|(input, _)| *input).collect();
        self.sender
            .send_all(&inputs)
            .await
            .into_iter()
            .map(|sent| sent.map(|()| Handoff::Delivered))
            .collect()
    }

    async fn send_at(
        &self,
        input: &Input,
        due: Timestamp,
        _from: &EffectRef,
    ) -> Result<Handoff, SendError> {
        self.timers.schedule(input.clone(), due).await?;
        Ok(Handoff::Delivered)
    }

    fn library(&self) -> Option<&Library> {
        Some(&self.library)
    }

    fn tool_dispatcher(&self) -> Option<&dyn ToolDispatcher> {
        Some(&self.dispatcher)
    }

    /// Events with no effect behind them get fresh ids (the handler's own go through
    /// [`EffectPerformer::output_effects`] with ids derived from what they are about).
    async fn output(&self, events: &[&OutputEvent]) -> Result<(), OutputError> {
        let ids: Vec<EffectId> = events.iter().map(|_| EffectId::generate()).collect();
        let events: Vec<(&EffectId, &OutputEvent)> =
            ids.iter().zip(events.iter().copied()).collect();
        self.output_effects(&events).await
    }

    /// Each event goes out with the id of its effect (see [`OutputQueue::publish`]).
    async fn output_effects(
        &self,
        events: &[(&EffectId, &OutputEvent)],
    ) -> Result<(), OutputError> {
        match &self.output {
            Some(queue) => queue.publish(events).await,
            None => Ok(()),
        }
    }
}

/// The relay Lambda: forwards due timers to the input queue and delays the others again.
#[derive(Debug, Clone)]
pub struct RelayHandler {
    timers: AwsTimers,
}

impl RelayHandler {
    /// A relay with these timers. An input that fit the relay queue but not the input queue
    /// (their limits may differ) is stored in the table on the way.
    pub fn new(clients: &Clients, config: &AwsConfig) -> Self {
        Self {
            timers: AwsTimers::new(
                clients.sqs.clone(),
                clients.scheduler.clone(),
                config.clone(),
            )
            .with_stash(DynamoThreadStore::new(
                clients.dynamodb.clone(),
                config.table.clone(),
                config.dedup_ttl,
            )),
        }
    }

    /// Handles one batch; each message stands alone (a standard queue).
    pub async fn handle(&self, event: SqsEvent) -> SqsBatchResponse {
        let mut response = SqsBatchResponse::default();
        for record in event.records {
            let message_id = record.message_id.clone().unwrap_or_default();
            let envelope: RelayEnvelope = match serde_json::from_str(
                record.body.as_deref().unwrap_or(""),
            ) {
                Ok(e) => e,
                Err(err) => {
                    tracing::error!(%message_id, %err, "malformed relay message; it will reach the relay dead-letter queue");
                    response.add_failure(message_id);
                    continue;
                }
            };
            if let Err(err) = self.forward(&envelope).await {
                tracing::warn!(%message_id, %err, "relay failed; the message will be retried");
                response.add_failure(message_id);
            }
        }
        response
    }

    /// A wake-up is never delivered before it is due: more than a second ahead, it goes round
    /// the relay queue again (SQS delays are whole seconds, and an emulator's may end a little
    /// early); a second or less ahead, the handler waits that long and delivers it. The messages
    /// of a batch are forwarded one after the other, so the waits of one batch add up to about a
    /// second at most.
    async fn forward(&self, envelope: &RelayEnvelope) -> Result<(), SendError> {
        let ahead = envelope.due.duration_since(Timestamp::now());
        match Duration::try_from(ahead) {
            Ok(left) if left > Duration::from_secs(1) => {
                let secs = left.as_secs_f64().ceil() as u64;
                self.timers.relay(envelope, Duration::from_secs(secs)).await
            }
            Ok(left) => {
                tokio::time::sleep(left).await;
                self.timers.deliver_now(&envelope.carried).await
            }
            // Past due.
            Err(_) => self.timers.deliver_now(&envelope.carried).await,
        }
    }
}
