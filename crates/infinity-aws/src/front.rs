//! A stack's front desk: what people send a deployed (or local) stack's threads from outside it,
//! checked against the table by the same rules as the embedded runtime
//! ([`infinity_agent_core::runtime::Front`]) and put on the input queue; and the stack's output
//! events, followed from the output queue for those who watch. `infinity serve --aws` serves the
//! HTTP API and the web app over it, on a machine or as the stack's API function.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use infinity_agent_core::catalog::{AgentCatalog, AgentRef};
use infinity_agent_core::effect::OutputEvent;
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::InputId;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::Input;
use infinity_agent_core::library::{AllowedModels, Library, ModelSource};
use infinity_agent_core::runtime::{Following, Front, Live, PostError};
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::ThreadStore;
use infinity_library::LibraryExt;
use tokio::sync::mpsc;

use crate::catalog::DynamoAgentCatalog;
use crate::config::{AwsConfig, Clients};
use crate::handler::{allowed_models_from_env, DeploymentModels};
use crate::queue::SqsInputSender;
use crate::store::DynamoThreadStore;

type Subscribers = Arc<Mutex<Vec<mpsc::UnboundedSender<Live>>>>;

/// A stack's table, input queue and stored agents, as a [`Front`].
#[derive(Debug)]
pub struct StackFront {
    store: DynamoThreadStore,
    sender: SqsInputSender,
    catalog: DynamoAgentCatalog,
    default_agent: String,
    models: DeploymentModels,
    /// The models people may switch threads to (`INFINITY_ALLOWED_MODELS`).
    allowed_models: AllowedModels,
    /// Present once [`StackFront::follow_output`] runs.
    subscribers: Option<Subscribers>,
    /// The pages the stack keeps (the `artifact` category's shelf), when it keeps them.
    library: Option<Library>,
}

impl StackFront {
    /// The front of the stack `config` describes. `default_agent`: the name of the agent new
    /// conversations run (the deployment's `INFINITY_DEFAULT_AGENT`, or its agent file's name).
    pub fn new(clients: &Clients, config: &AwsConfig, default_agent: impl Into<String>) -> Self {
        Self {
            store: DynamoThreadStore::new(
                clients.dynamodb.clone(),
                config.table.clone(),
                config.dedup_ttl,
            ),
            sender: SqsInputSender::for_deployment(clients, config),
            catalog: DynamoAgentCatalog::new(clients.dynamodb.clone(), config.table.clone()),
            default_agent: default_agent.into(),
            models: DeploymentModels::default(),
            allowed_models: allowed_models_from_env(),
            subscribers: None,
            library: config
                .artifacts(clients)
                .map(|pages| Library::new().with_artifacts(pages)),
        }
    }

    /// Follows the stack's output queue from now on: each event is handed to every subscriber
    /// (once: copies with the same `id` are dropped), then deleted from the queue. An output queue has one reader: run one follower per stack
    /// (other readers, `infinity tail` included, take events away from it).
    pub fn follow_output(&mut self, sqs: aws_sdk_sqs::Client, queue_url: String) {
        let subscribers = Subscribers::default();
        self.subscribers = Some(Arc::clone(&subscribers));
        tokio::spawn(async move {
            let mut seen = crate::queue::SeenEvents::new(10_000);
            loop {
                let got = sqs
                    .receive_message()
                    .queue_url(&queue_url)
                    .max_number_of_messages(10)
                    .wait_time_seconds(10)
                    .send()
                    .await;
                let got = match got {
                    Ok(got) => got,
                    Err(err) => {
                        tracing::warn!(queue = %queue_url, error = ?err, "cannot read the output queue; trying again in 5 s");
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        continue;
                    }
                };
                for message in got.messages() {
                    let body = message.body().unwrap_or("");
                    match serde_json::from_str::<OutputEvent>(body) {
                        // (A copy of an event handed on already is only deleted.)
                        Ok(_) if !seen.first_time(body) => {}
                        Ok(event) => subscribers
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .retain(|tx| tx.send(Live::Kept(event.clone())).is_ok()),
                        Err(err) => {
                            tracing::warn!(%err, "skipping an unreadable output message")
                        }
                    }
                    if let Some(receipt) = message.receipt_handle() {
                        let deleted = sqs
                            .delete_message()
                            .queue_url(&queue_url)
                            .receipt_handle(receipt)
                            .send()
                            .await;
                        if let Err(err) = deleted {
                            tracing::warn!(error = ?err, "an output message was not deleted; it may be shown again");
                        }
                    }
                }
            }
        });
    }
}

#[async_trait]
impl Front for StackFront {
    fn threads(&self) -> &dyn ThreadStore {
        &self.store
    }

    /// Every thread's output events from now on, while [`StackFront::follow_output`] runs. A
    /// stack's slices show nothing before they commit, so there is nothing shown to add.
    fn follow(&self, _thread_id: &ThreadId) -> Option<Following> {
        let subscribers = self.subscribers.as_ref()?;
        let (tx, live) = mpsc::unbounded_channel();
        subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tx);
        Some(Following {
            live,
            shown: Vec::new(),
            partial: String::new(),
        })
    }

    /// The stack's library: where it keeps published pages, when it does.
    fn library(&self) -> Option<&Library> {
        self.library.as_ref()
    }

    fn agent_catalog(&self) -> Option<&dyn AgentCatalog> {
        Some(&self.catalog)
    }

    fn default_agent_name(&self) -> &str {
        &self.default_agent
    }

    /// An agent stored in the table, or the deployment's default one by name.
    async fn ready_agent(&self, agent: &str) -> Result<(), PostError> {
        let reference = AgentRef::parse(agent).map_err(|e| PostError::NoAgent(e.to_string()))?;
        let stored = self
            .catalog
            .get(&reference.name, reference.version)
            .await
            .map_err(|e| PostError::NoAgent(format!("`{agent}` cannot be read: {e}")))?;
        if stored.is_some() || (reference.version.is_none() && agent == self.default_agent) {
            return Ok(());
        }
        Err(PostError::NoAgent(format!(
            "there is no agent `{agent}` in this stack (`infinity agents list --table TABLE` \
             shows the stored ones)"
        )))
    }

    /// A model the deployment lists and can make: its provider is known, and its key is where
    /// the deployment reads it (the SSM parameter of `INFINITY_MODEL_KEY_PARAMETER`).
    async fn ready_model(&self, spec: &str) -> Result<(), PostError> {
        // Only asked for a listed spec: `Front::use_model` checks the list first.
        self.models
            .make(spec)
            .await
            .map(drop)
            .map_err(|why| PostError::BadModel {
                spec: spec.to_owned(),
                why,
            })
    }

    fn allowed_models(&self) -> AllowedModels {
        self.allowed_models.clone()
    }

    /// The model the thread's stored agent version names in its file.
    async fn agent_model(&self, record: &ThreadRecord) -> Option<String> {
        let reference = AgentRef::parse(&record.agent).ok()?;
        let stored = self
            .catalog
            .get(&reference.name, reference.version)
            .await
            .ok()??;
        Some(stored.agent_file().ok()?.model)
    }

    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::now()
    }

    async fn post(&self, input: Input) -> Result<InputId, PostError> {
        self.sender
            .send_to_input_queue(&input)
            .await
            .map_err(|e| PostError::Unavailable(e.to_string()))?;
        Ok(input.id)
    }
}

/// The name of the agent a deployment's new conversations run, from its environment:
/// `INFINITY_DEFAULT_AGENT` (a stored agent), else the name in `INFINITY_AGENT_YAML` or
/// `INFINITY_AGENT_FILE`; empty when none says (then only stored agents are named).
pub fn default_agent_from_env() -> String {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if let Some(name) = var("INFINITY_DEFAULT_AGENT") {
        return name;
    }
    let file = match (var("INFINITY_AGENT_YAML"), var("INFINITY_AGENT_FILE")) {
        (Some(text), _) => {
            infinity_agent_core::agent::AgentFile::parse(&text, "INFINITY_AGENT_YAML".as_ref()).ok()
        }
        (None, Some(path)) => infinity_agent_core::agent::AgentFile::load(path.as_ref()).ok(),
        (None, None) => None,
    };
    file.map(|f| f.name).unwrap_or_default()
}
