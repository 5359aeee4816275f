//! The Lambda handlers: the agent (input queue) and the relay (timer queue). The local poller
//! calls exactly these.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use infinity_agent_core::agent::{Agent, AgentFile};
use infinity_agent_core::effect::{Effect, PendingEffect};
use infinity_agent_core::engine::SliceError;
use infinity_agent_core::host::{
    run_committed_slice, HostContext, InputSender, SliceFailure, Timers,
};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::Input;
use infinity_agent_core::runtime::ToolDispatcher;
use infinity_agent_core::store::ThreadStore;
use infinity_agent_core::tools::{SetTitle, ToolRegistry};
use jiff::Timestamp;
use tokio::task::JoinSet;

use crate::config::{AwsConfig, Clients};
use crate::queue::{AwsTimers, OutputQueue, SqsInputSender};
use crate::store::DynamoThreadStore;
use crate::wire::{parse_input, RelayEnvelope, WireError};

/// Why the agent could not be set up (at init: the function fails to start, loudly).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Neither `INFINITY_AGENT_YAML` nor `INFINITY_AGENT_FILE` is set.
    #[error(
        "set INFINITY_AGENT_YAML (the agent file's content) or INFINITY_AGENT_FILE (its path)"
    )]
    NoAgent,
    /// The agent file is invalid.
    #[error(transparent)]
    AgentFile(#[from] infinity_agent_core::agent::AgentFileError),
    /// The model could not be built.
    #[error("agent `{agent}`: model `{model}`: {reason}")]
    Model {
        /// The agent.
        agent: String,
        /// Its model spec.
        model: String,
        /// Why.
        reason: String,
    },
    /// An application tool could not be registered.
    #[error(transparent)]
    Tool(#[from] infinity_agent_core::tools::RegistryError),
    /// A skill's url could not be fetched.
    #[error("{0}")]
    Skill(String),
}

/// Loads the deployment's agent from `INFINITY_AGENT_YAML` (content; relative paths resolve
/// against `INFINITY_AGENT_DIR`, default the working folder) or `INFINITY_AGENT_FILE` (a path).
pub async fn agent_from_env() -> Result<Arc<Agent>, SetupError> {
    let file = match (
        std::env::var("INFINITY_AGENT_YAML")
            .ok()
            .filter(|s| !s.trim().is_empty()),
        std::env::var("INFINITY_AGENT_FILE")
            .ok()
            .filter(|s| !s.trim().is_empty()),
    ) {
        (Some(text), _) => {
            let dir = std::env::var("INFINITY_AGENT_DIR").unwrap_or_else(|_| ".".into());
            AgentFile::parse(&text, &Path::new(&dir).join("INFINITY_AGENT_YAML"))?
        }
        (None, Some(path)) => AgentFile::load(&PathBuf::from(path))?,
        (None, None) => return Err(SetupError::NoAgent),
    };
    build_agent(&file).await
}

/// The model API key from the SSM parameter named by `INFINITY_MODEL_KEY_PARAMETER` (a
/// SecureString, decrypted), when that variable is set. The key is never logged.
async fn model_key_from_ssm() -> Result<Option<String>, String> {
    let Some(name) = std::env::var("INFINITY_MODEL_KEY_PARAMETER")
        .ok()
        .filter(|n| !n.trim().is_empty())
    else {
        return Ok(None);
    };
    read_ssm_parameter(&name)
        .await
        .map(Some)
        .map_err(|e| format!("cannot read the model key: {e}"))
}

/// An SSM parameter's value, decrypted (a SecureString, or a Secrets Manager secret through
/// `/aws/reference/secretsmanager/NAME`). The value is never logged.
pub async fn read_ssm_parameter(name: &str) -> Result<String, String> {
    let shared = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let out = aws_sdk_ssm::Client::new(&shared)
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .map_err(|e| {
            let detail = e
                .as_service_error()
                .map(|s| format!("{s:?}"))
                .unwrap_or_else(|| e.to_string());
            format!("cannot read SSM parameter {name}: {detail}")
        })?;
    out.parameter()
        .and_then(|p| p.value())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("SSM parameter {name} is empty"))
}

/// Builds a runnable agent from an agent file: its model, the built-in tools and `set_title`.
pub async fn build_agent(file: &AgentFile) -> Result<Arc<Agent>, SetupError> {
    let spec = file.model_spec()?;
    let base = file.path.parent().map(Path::to_owned).unwrap_or_default();
    let key = model_key_from_ssm()
        .await
        .map_err(|reason| SetupError::Model {
            agent: file.name.clone(),
            model: file.model.clone(),
            reason,
        })?;
    let model = infinity_models::resolve_model_with_key(&spec, &base, key)
        .await
        .map_err(|reason| SetupError::Model {
            agent: file.name.clone(),
            model: file.model.clone(),
            reason,
        })?;
    let set_title: Arc<dyn infinity_agent_core::tools::Tool> = Arc::new(SetTitle);
    let settings = infinity_agent_core::tools::internal::ToolSettings {
        output_schema: file.output_schema.clone(),
        skills: file.load_skills(
            &infinity_models::fetch::fetch_skills(file)
                .await
                .map_err(SetupError::Skill)?,
        )?,
    };
    let tools = ToolRegistry::for_agent(&file.internal_tools.resolve(), &settings, &[set_title])?;
    Ok(Arc::new(Agent {
        name: file.name.clone(),
        system_prompt: file.system.clone(),
        model,
        tools: Arc::new(tools),
        limits: file.limits,
        tool_servers: file.rap_servers()?,
    }))
}

/// The agent Lambda: one slice per thread per batch.
#[derive(Debug)]
pub struct AgentHandler {
    store: DynamoThreadStore,
    sender: SqsInputSender,
    timers: AwsTimers,
    output: Option<OutputQueue>,
    agents: HashMap<String, Arc<Agent>>,
    default_agent: String,
    /// Talks to the agent's tool servers, when it has any.
    tool_servers: Option<Arc<infinity_rap::client::RapClient>>,
}

/// One message of a batch, parsed.
struct Message {
    message_id: String,
    input: Result<Input, WireError>,
}

fn attribute<'a>(message: &'a SqsMessage, name: &str) -> Option<&'a str> {
    message.attributes.get(name).map(String::as_str)
}

impl AgentHandler {
    /// A handler with clients built once at init. The first agent is the default for new
    /// threads.
    pub fn new(clients: &Clients, config: &AwsConfig, agent: Arc<Agent>) -> Self {
        let store = DynamoThreadStore::new(
            clients.dynamodb.clone(),
            config.table.clone(),
            config.dedup_ttl,
        );
        Self {
            store,
            sender: SqsInputSender::new(clients.sqs.clone(), config.input_queue_url.clone()),
            timers: AwsTimers::new(
                clients.sqs.clone(),
                clients.scheduler.clone(),
                config.clone(),
            ),
            output: config
                .output_queue_url
                .as_ref()
                .map(|url| OutputQueue::new(clients.sqs.clone(), url.clone())),
            default_agent: agent.name.clone(),
            agents: HashMap::from([(agent.name.clone(), agent)]),
            tool_servers: None,
        }
    }

    /// The same handler, discovering and invoking tools with `client` (see
    /// [`crate::tool_servers::rap_client_for`]).
    pub fn with_tool_servers(
        mut self,
        client: Option<Arc<infinity_rap::client::RapClient>>,
    ) -> Self {
        self.tool_servers = client;
        self
    }

    /// The store (for reads by tools and tests).
    pub fn store(&self) -> &DynamoThreadStore {
        &self.store
    }

    /// Handles one SQS batch. Messages are grouped by thread (`MessageGroupId`) in order; each
    /// thread's messages run as one slice, threads run concurrently. A failing message and every
    /// later message of its thread are reported as batch item failures (FIFO semantics); other
    /// threads are unaffected.
    pub async fn handle(self: &Arc<Self>, event: SqsEvent) -> SqsBatchResponse {
        let mut groups: Vec<(String, Vec<Message>)> = Vec::new();
        for record in event.records {
            let message_id = record.message_id.clone().unwrap_or_default();
            let group = attribute(&record, "MessageGroupId");
            let input = parse_input(
                record.body.as_deref().unwrap_or(""),
                group,
                attribute(&record, "MessageDeduplicationId"),
            );
            let key = group
                .map(str::to_owned)
                .or_else(|| input.as_ref().ok().map(|i| i.thread_id.to_string()))
                .unwrap_or_else(|| message_id.clone());
            let message = Message { message_id, input };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, messages)) => messages.push(message),
                None => groups.push((key, vec![message])),
            }
        }
        let mut tasks = JoinSet::new();
        for (_, messages) in groups {
            let this = Arc::clone(self);
            tasks.spawn(async move { this.handle_thread(messages).await });
        }
        let mut response = SqsBatchResponse::default();
        while let Some(result) = tasks.join_next().await {
            match result {
                Ok(failed) => {
                    for id in failed {
                        response.add_failure(id);
                    }
                }
                Err(err) => tracing::error!(%err, "a thread's task failed"),
            }
        }
        response
    }

    /// Runs one thread's messages; returns the ids of the messages to report as failed.
    async fn handle_thread(&self, messages: Vec<Message>) -> Vec<String> {
        let bad = messages.iter().position(|m| m.input.is_err());
        let (good, rest) = messages.split_at(bad.unwrap_or(messages.len()));
        let mut failed: Vec<String> = Vec::new();
        if let Some(first_bad) = rest.first() {
            if let Err(err) = &first_bad.input {
                tracing::error!(message_id = %first_bad.message_id, error = %err, "malformed input message; it will reach the dead-letter queue after the redrive count");
            }
            failed.extend(rest.iter().map(|m| m.message_id.clone()));
        }
        let inputs: Vec<Input> = good
            .iter()
            .filter_map(|m| m.input.as_ref().ok().cloned())
            .collect();
        let Some(thread_id) = inputs.first().map(|i| i.thread_id.clone()) else {
            return failed;
        };
        if let Err(err) = self.run(&thread_id, inputs).await {
            tracing::warn!(thread = %thread_id, %err, "slice not finished; its messages will be redelivered");
            // Report the whole thread's batch: FIFO redelivers it, in order.
            failed = messages.iter().map(|m| m.message_id.clone()).collect();
        }
        failed
    }

    /// Flushes the thread's outbox, runs and commits a slice, and performs its effects.
    async fn run(&self, thread_id: &ThreadId, inputs: Vec<Input>) -> Result<(), String> {
        // A crash after an earlier commit leaves its effects here; perform them first.
        let leftover = self
            .store
            .thread_outbox(thread_id)
            .await
            .map_err(|e| e.to_string())?;
        if !leftover.is_empty() {
            tracing::info!(thread = %thread_id, effects = leftover.len(), "performing effects left by an earlier slice");
            self.perform(thread_id, leftover, None).await?;
        }
        let host = HostContext {
            store: &self.store,
            agents: &self.agents,
            default_agent: Some(&self.default_agent),
            discovery: self
                .tool_servers
                .as_deref()
                .map(|c| c as &dyn infinity_agent_core::tools::remote::ToolDiscovery),
        };
        let outcome = match run_committed_slice(&host, thread_id, inputs, Timestamp::now(), None)
            .await
        {
            Ok(outcome) => outcome,
            Err(SliceFailure::Slice(SliceError::UnknownAgent { thread_id, agent })) => {
                // Terminal: retrying cannot help. Logged and acknowledged.
                tracing::error!(thread = %thread_id, %agent, "thread runs an agent this deployment does not have; input dropped");
                return Ok(());
            }
            Err(err) => {
                if let (SliceFailure::Slice(SliceError::Retryable(why)), Some(queue)) =
                    (&err, &self.output)
                {
                    // The user sees that the model is unavailable; SQS retries the input later.
                    let event = infinity_agent_core::effect::OutputEvent {
                        thread_id: thread_id.clone(),
                        at: Timestamp::now(),
                        kind: infinity_agent_core::effect::OutputKind::Error {
                            text: format!("model unavailable, will retry: {why}"),
                        },
                    };
                    if let Err(e) = queue.publish(&[&event]).await {
                        tracing::warn!(thread = %thread_id, error = %e, "could not publish an error event");
                    }
                }
                return Err(err.to_string());
            }
        };
        if let Some(commit) = outcome.commit {
            if !commit.effects.is_empty() {
                self.perform(thread_id, commit.effects, Some(commit.record.version))
                    .await?;
            }
        }
        Ok(())
    }

    /// Performs effects, then marks them done. `version` names the commit they all came from,
    /// whose outbox item can then be deleted in one request.
    async fn perform(
        &self,
        thread_id: &ThreadId,
        effects: Vec<PendingEffect>,
        version: Option<u64>,
    ) -> Result<(), String> {
        let total = effects.len();
        let mut done = Vec::with_capacity(total);
        let mut first_error = None;
        // Output events go out together, in order, in as few requests as SQS allows.
        let outputs: Vec<&infinity_agent_core::effect::OutputEvent> = effects
            .iter()
            .filter_map(|e| match &e.effect {
                Effect::Output { event } => Some(event),
                _ => None,
            })
            .collect();
        let outputs_sent = match (&self.output, outputs.is_empty()) {
            (_, true) | (None, _) => Ok(()),
            (Some(queue), false) => queue.publish(&outputs).await,
        };
        for PendingEffect { id, effect } in effects {
            let result = match effect {
                Effect::Send { input } => self
                    .sender
                    .send_to_input_queue(&input, &input.thread_id, &input.id)
                    .await
                    .map_err(|e| e.to_string()),
                Effect::SendAt { input, due } => self
                    .timers
                    .schedule(input, due)
                    .await
                    .map_err(|e| e.to_string()),
                Effect::Output { .. } => outputs_sent.clone(),
                Effect::Dispatch { invocation } => {
                    let failure = match &self.tool_servers {
                        Some(client) => client.dispatch(&invocation).await.err(),
                        None => Some(format!(
                            "no tool server is configured to run `{}`",
                            invocation.tool
                        )),
                    };
                    match failure {
                        None => Ok(()),
                        Some(why) => {
                            let input = invocation.undeliverable(&why);
                            self.sender
                                .send_to_input_queue(&input, &input.thread_id, &input.id)
                                .await
                                .map_err(|e| e.to_string())
                        }
                    }
                }
                Effect::Notify { notification } => {
                    match &self.tool_servers {
                        Some(client) => client.notify(&notification).await,
                        None => tracing::debug!(?notification, "no tool servers to notify"),
                    }
                    Ok(())
                }
            };
            match result {
                Ok(()) => done.push(id),
                Err(err) => {
                    tracing::warn!(thread = %thread_id, effect = %id, %err, "effect failed; it stays in the outbox");
                    first_error.get_or_insert(err);
                }
            }
        }
        match version {
            Some(version) if done.len() == total => self
                .store
                .clear_outbox(thread_id, version)
                .await
                .map_err(|e| e.to_string())?,
            _ if !done.is_empty() => self
                .store
                .complete_effects(thread_id, &done)
                .await
                .map_err(|e| e.to_string())?,
            _ => {}
        }
        match first_error {
            None => Ok(()),
            Some(err) => Err(err),
        }
    }
}

/// The relay Lambda: forwards due timers to the input queue and delays the others again.
#[derive(Debug, Clone)]
pub struct RelayHandler {
    timers: AwsTimers,
}

impl RelayHandler {
    /// A relay with these timers.
    pub fn new(clients: &Clients, config: &AwsConfig) -> Self {
        Self {
            timers: AwsTimers::new(
                clients.sqs.clone(),
                clients.scheduler.clone(),
                config.clone(),
            ),
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

    async fn forward(&self, envelope: &RelayEnvelope) -> Result<(), String> {
        let ahead = envelope.due.duration_since(Timestamp::now());
        match Duration::try_from(ahead) {
            // Due (or within half a second of it): deliver now.
            Ok(left) if left > Duration::from_millis(500) => {
                let secs = left.as_secs_f64().ceil() as u64;
                self.timers
                    .relay(envelope, Duration::from_secs(secs))
                    .await
                    .map_err(|e| e.to_string())
            }
            _ => self
                .timers
                .deliver_now(&envelope.input)
                .await
                .map_err(|e| e.to_string()),
        }
    }
}
