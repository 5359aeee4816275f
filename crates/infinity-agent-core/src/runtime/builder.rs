//! [`AgentSystemBuilder`]: putting the embedded runtime together.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::Notify;

use super::timers::{Deliver, TokioTimers};
use super::{AgentSystem, Clock, Inner};
use crate::agent::{Agent, AgentLookup, AgentSpec};
use crate::catalog::{AgentBuilder, AgentCatalog, CatalogAgents};
use crate::effect::PendingEffect;
use crate::host::{perform_effects, SliceBudget, Timers, ToolDispatcher};
use crate::ids::ThreadId;
use crate::library::Library;
use crate::store::{MemoryStore, StoreError, ThreadStore};
use crate::tools::internal::Categories;
use crate::tools::servers::ToolDiscovery;
use crate::tools::{RegistryError, Tool};

/// Why an [`AgentSystem`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No agent was registered.
    #[error("no agent registered: call with_agent(...)")]
    NoAgent,
    /// The sleep tools need a timer backend.
    #[error("the sleep tools need timers: call with_tokio_sleep_tools() or with_timers(...)")]
    NoTimers,
    /// The default agent is not registered.
    #[error("default agent `{0}` is not registered")]
    UnknownDefaultAgent(String),
    /// Two agents with one name.
    #[error("agent `{0}` is registered twice")]
    DuplicateAgent(String),
    /// An application tool could not be registered.
    #[error(transparent)]
    Tool(#[from] RegistryError),
    /// The store could not be read for recovery.
    #[error("cannot recover the store: {0}")]
    Store(#[from] StoreError),
}

/// Builds an [`AgentSystem`]: the embedded runtime, in this process, on tokio (the module docs
/// have a runnable example).
#[derive(Default)]
pub struct AgentSystemBuilder {
    store: Option<Arc<dyn ThreadStore>>,
    agents: Vec<AgentSpec>,
    tools: Vec<Arc<dyn Tool>>,
    default_agent: Option<String>,
    tokio_sleep: bool,
    timers: Option<Arc<dyn Timers>>,
    clock_start: Option<Timestamp>,
    dispatcher: Option<Arc<dyn ToolDispatcher>>,
    discovery: Option<Arc<dyn ToolDiscovery>>,
    catalog: Option<(Arc<dyn AgentCatalog>, Arc<dyn AgentBuilder>)>,
    library: Option<Library>,
    categories: Categories,
    budget: Option<SliceBudget>,
}

impl fmt::Debug for AgentSystemBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentSystemBuilder")
            .field("agents", &self.agents)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

/// What an embedded slice keeps back before a run's deadline for its commit and effects.
const EMBEDDED_COMMIT_RESERVE: Duration = Duration::from_secs(1);

impl AgentSystemBuilder {
    /// A builder with an in-memory store and no agents.
    pub fn new() -> Self {
        Self::default()
    }

    /// Gives every slice the time until `deadline` (a run's own time limit, `infinity run
    /// --timeout`): a completion that may take up to `completion` starts only while it fits, and
    /// otherwise the slice commits what it has and hands itself on (see [`SliceBudget`]); a
    /// completion still running at the deadline is cut off there. Without it, slices take as
    /// long as they take.
    pub fn with_deadline(mut self, deadline: tokio::time::Instant, completion: Duration) -> Self {
        self.budget = Some(SliceBudget {
            deadline,
            completion,
            reserve: EMBEDDED_COMMIT_RESERVE,
        });
        self
    }

    /// Keeps threads in `store` (default: a [`MemoryStore`]).
    pub fn with_store(mut self, store: Arc<dyn ThreadStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Registers an agent. The first one registered is the default for new root threads.
    pub fn with_agent(mut self, agent: AgentSpec) -> Self {
        self.agents.push(agent);
        self
    }

    /// The agent that runs root threads created by a first user message.
    pub fn with_default_agent(mut self, name: impl Into<String>) -> Self {
        self.default_agent = Some(name.into());
        self
    }

    /// Adds an application tool (e.g. [`crate::tools::SetTitle`]) next to the built-ins, for
    /// every agent.
    pub fn with_tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Backs the sleep tools with tokio timers.
    pub fn with_tokio_sleep_tools(mut self) -> Self {
        self.tokio_sleep = true;
        self
    }

    /// Backs the sleep tools with other timers.
    pub fn with_timers(mut self, timers: Arc<dyn Timers>) -> Self {
        self.timers = Some(timers);
        self
    }

    /// Starts the runtime's clock at `start` instead of the system time (for tests and demos;
    /// the clock then advances with tokio's).
    pub fn with_clock_start(mut self, start: Timestamp) -> Self {
        self.clock_start = Some(start);
        self
    }

    /// Discovers the tools of the agents' tool servers when a conversation starts.
    pub fn with_discovery(mut self, discovery: Arc<dyn ToolDiscovery>) -> Self {
        self.discovery = Some(discovery);
        self
    }

    /// Sets what runs calls of tools that leave the process (tool servers) and delivers
    /// notifications to them.
    pub fn with_dispatcher(mut self, dispatcher: Arc<dyn ToolDispatcher>) -> Self {
        self.dispatcher = Some(dispatcher);
        self
    }

    /// Runs the agents stored in `catalog` too (built with `builder` on first use), next to the
    /// registered ones: threads name them `NAME` (the newest version, when the thread is
    /// created) and keep `NAME@VERSION`. With a catalog, the default agent may be a stored one.
    pub fn with_catalog(
        mut self,
        catalog: Arc<dyn AgentCatalog>,
        builder: Arc<dyn AgentBuilder>,
    ) -> Self {
        self.catalog = Some((catalog, builder));
        self
    }

    /// Keeps `library`: the shelves of the categories that reach beyond a conversation (the
    /// `infinity-library` crate's knowledge, meta directory, remotes and pages) and the models
    /// people switch threads to.
    pub fn with_library(mut self, library: Library) -> Self {
        self.library = Some(library);
        self
    }

    /// Runs the registered agents with these internal tool categories (default: the core's,
    /// [`Categories::core`]). Stored agents are built by the catalog's [`AgentBuilder`], which
    /// takes its own.
    pub fn with_categories(mut self, categories: Categories) -> Self {
        self.categories = categories;
        self
    }

    /// Builds the system, recovers the store's outboxes (re-sending inputs, re-arming timers),
    /// replays the inputs its inbox still holds (accepted, not yet handled) and starts it on the
    /// current tokio runtime. Afterwards inputs may be sent from any thread.
    pub async fn build(self) -> Result<AgentSystem, BuildError> {
        let default_agent = match (self.default_agent, self.agents.first()) {
            (Some(name), _) => name,
            (None, Some(first)) => first.name.clone(),
            (None, None) => return Err(BuildError::NoAgent),
        };
        let mut agents = HashMap::new();
        for spec in self.agents {
            let agent = Agent::from_spec(spec, &self.categories, &self.tools)?;
            let name = agent.name.clone();
            if agents.insert(name.clone(), Arc::new(agent)).is_some() {
                return Err(BuildError::DuplicateAgent(name));
            }
        }
        let stored = self
            .catalog
            .as_ref()
            .map(|(catalog, _)| Arc::clone(catalog));
        let library = self.library.map(Arc::new);
        let agents: Arc<dyn AgentLookup> = match self.catalog {
            Some((catalog, builder)) => Arc::new(CatalogAgents::new(agents, catalog, builder)),
            None if !agents.contains_key(&default_agent) => {
                return Err(BuildError::UnknownDefaultAgent(default_agent))
            }
            None => Arc::new(agents),
        };
        let clock = self
            .clock_start
            .map_or_else(Clock::system, Clock::starting_at);
        let (timers, tokio_timers): (Arc<dyn Timers>, Option<Arc<TokioTimers>>) =
            match (self.timers, self.tokio_sleep) {
                (Some(timers), _) => (timers, None),
                (None, true) => {
                    let t = TokioTimers::new(clock);
                    (t.clone(), Some(t))
                }
                (None, false) => return Err(BuildError::NoTimers),
            };
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryStore::new()));
        let runtime = tokio::runtime::Handle::current();
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| Inner {
            this: weak.clone(),
            runtime,
            store,
            agents,
            catalog: stored,
            library,
            default_agent,
            timers,
            tokio_timers,
            dispatcher: self.dispatcher,
            discovery: self.discovery,
            clock,
            budget: self.budget,
            workers: Mutex::new(HashMap::new()),
            acks: Mutex::new(HashMap::new()),
            outlet: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            activity: Notify::new(),
            out_of_time: Mutex::default(),
        });
        if let Some(t) = &inner.tokio_timers {
            let weak: Weak<Inner> = Arc::downgrade(&inner);
            let target: Weak<dyn Deliver> = weak;
            t.start(target);
        }
        let outbox = inner.store.outbox().await?;
        let mut by_thread: Vec<(ThreadId, Vec<PendingEffect>)> = Vec::new();
        for (thread_id, effect) in outbox {
            match by_thread.last_mut() {
                Some((t, effects)) if *t == thread_id => effects.push(effect),
                _ => by_thread.push((thread_id, vec![effect])),
            }
        }
        for (thread_id, effects) in by_thread {
            tracing::info!(thread = %thread_id, effects = effects.len(), "recovering outbox");
            let performed = perform_effects(
                inner.as_ref(),
                inner.store.as_ref(),
                &thread_id,
                &effects,
                None,
            )
            .await;
            if let Err(err) = performed {
                tracing::warn!(%err, "recovered effects not all performed; they stay in the outbox");
            }
        }
        // Inputs accepted before a stop whose threads had not handled them; those a thread had
        // committed are dropped there as already processed.
        let accepted = inner.store.inbox().await?;
        if !accepted.is_empty() {
            tracing::info!(inputs = accepted.len(), "replaying the inbox");
        }
        for input in accepted {
            inner.route(input);
        }
        Ok(AgentSystem { inner })
    }
}
