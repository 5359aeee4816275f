//! A test harness around the embedded runtime: paused tokio time, a fixed clock start, a
//! recording dispatcher, and transcripts as plain lines. Shared by the behaviour tests of the
//! core and of crates that plug categories into it.

// Test code: a failed step should stop the test.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs,
    missing_debug_implementations
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::DispatchedTool;
use crate::agent::{Agent, AgentFile, AgentSpec, Limits};
use crate::catalog::{AgentBuilder, AgentCatalog, BuildError, MemoryCatalog, StoredAgent};
use crate::effect::{Notification, OutputEvent, OutputKind, ToolInvocation};
use crate::history::Item;
use crate::host::{DispatchError, ToolDispatcher};
use crate::ids::ThreadId;
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::runtime::{AgentSystem, AgentSystemBuilder, WaitOutcome};
use crate::scripted::ScriptedModel;
use crate::store::ThreadStore;
use crate::tools::internal::Categories;
use crate::tools::servers::{Discovered, ToolDiscovery, ToolServerConfig};
use crate::tools::SetTitle;
use crate::tools::Tool;
use async_trait::async_trait;
use jiff::Timestamp;
use serde_json::json;
use tokio::sync::mpsc::UnboundedReceiver;

/// Where every test's clock starts: Saturday 2026-03-07 12:00 in New York, the day before the
/// spring-forward DST change.
pub const START: &str = "2026-03-07T17:00:00Z";

pub fn start_time() -> Timestamp {
    START.parse().unwrap()
}

pub fn tid(s: &str) -> ThreadId {
    ThreadId::new(s).unwrap()
}

/// Records what the runtime hands to tool servers.
#[derive(Debug, Default)]
pub struct RecordingDispatcher {
    pub invocations: Mutex<Vec<ToolInvocation>>,
    pub notifications: Mutex<Vec<Notification>>,
}

#[async_trait]
impl ToolDispatcher for RecordingDispatcher {
    async fn dispatch(&self, invocation: &ToolInvocation) -> Result<(), DispatchError> {
        self.invocations.lock().unwrap().push(invocation.clone());
        Ok(())
    }

    async fn notify(&self, notification: &Notification) {
        self.notifications
            .lock()
            .unwrap()
            .push(notification.clone());
    }
}

pub struct Setup {
    pub internal_tools: crate::tools::internal::InternalTools,
    pub output_schema: Option<serde_json::Value>,
    pub skills: Vec<crate::tools::internal::Skill>,
    pub script: String,
    pub store: Option<Arc<dyn ThreadStore>>,
    pub limits: Limits,
    /// What the scripted model charges (`None`: unpriced, as scripts are).
    pub prices: Option<crate::cost::Prices>,
    pub clock_start: Timestamp,
    pub tool_servers: Vec<crate::tools::servers::ToolServerConfig>,
    pub discovery: Option<Arc<dyn crate::tools::servers::ToolDiscovery>>,
    /// Stored agents, and how they are built.
    pub catalog: Option<(
        Arc<dyn crate::catalog::AgentCatalog>,
        Arc<dyn crate::catalog::AgentBuilder>,
    )>,
    /// `agents:` of the test agent.
    pub sub_agents: Vec<crate::tools::internal::delegation::SubAgent>,
    /// The agent of new conversations, when it is not the test agent (a stored one).
    pub default_agent: Option<String>,
    /// The host's library (its categories' shelves, the models people switch to).
    pub library: Option<crate::library::Library>,
    /// The categories the test agent runs with (default: the core's).
    pub categories: crate::tools::internal::Categories,
    /// A run's deadline and the time one completion may take (`with_deadline`).
    pub deadline: Option<(tokio::time::Instant, std::time::Duration)>,
    /// The test agent's `while_busy:`.
    pub while_busy: crate::state::WhileBusy,
    /// The test agent's `client_tools:`.
    pub client_tools: Vec<crate::tools::client::ClientToolFile>,
    /// The test agent's `approvals:`.
    pub approvals: Vec<crate::tools::approval::ApprovalRule>,
}

impl Setup {
    pub fn new(script: &str) -> Self {
        Self {
            internal_tools: Default::default(),
            output_schema: None,
            skills: Vec::new(),
            script: script.to_owned(),
            store: None,
            limits: Limits::default(),
            clock_start: start_time(),
            tool_servers: Vec::new(),
            discovery: None,
            catalog: None,
            sub_agents: Vec::new(),
            default_agent: None,
            library: None,
            categories: Default::default(),
            deadline: None,
            prices: None,
            while_busy: Default::default(),
            client_tools: Vec::new(),
            approvals: Vec::new(),
        }
    }

    pub async fn start(self) -> Harness {
        let model = ScriptedModel::parse(&self.script, Path::new("test.script.yaml")).unwrap();
        let dispatcher = Arc::new(RecordingDispatcher::default());
        let model: Arc<dyn crate::model::ModelProvider> = match self.prices {
            Some(prices) => Arc::new(crate::model::Priced::new(Arc::new(model), prices)),
            None => Arc::new(model),
        };
        let mut agent = AgentSpec::new("tester", "You are a test agent.", model);
        agent.limits = self.limits;
        agent.while_busy = self.while_busy;
        agent.internal_tools = self.internal_tools;
        agent.output_schema = self.output_schema;
        agent.skills = self.skills;
        agent.tool_servers = self.tool_servers;
        agent.sub_agents = self.sub_agents;
        agent.client_tools = self.client_tools;
        agent.approvals = self.approvals;
        let mut builder = AgentSystemBuilder::new()
            .with_agent(agent)
            .with_tool(Arc::new(SetTitle))
            .with_tool(Arc::new(DispatchedTool("lookup")))
            .with_tool(Arc::new(DispatchedTool("fetch")))
            .with_tool(Arc::new(DispatchedTool("watch")))
            .with_tokio_sleep_tools()
            .with_categories(self.categories)
            .with_clock_start(self.clock_start)
            .with_dispatcher(dispatcher.clone());
        if let Some(store) = self.store {
            builder = builder.with_store(store);
        }
        if let Some(discovery) = self.discovery {
            builder = builder.with_discovery(discovery);
        }
        if let Some((catalog, agents)) = self.catalog {
            builder = builder.with_catalog(catalog, agents);
        }
        if let Some(name) = self.default_agent {
            builder = builder.with_default_agent(name);
        }
        if let Some((deadline, completion)) = self.deadline {
            builder = builder.with_deadline(deadline, completion);
        }
        if let Some(library) = self.library {
            builder = builder.with_library(library);
        }
        let system = builder.build().await.unwrap();
        let events = system.subscribe();
        Harness {
            system,
            events,
            log: Vec::new(),
            dispatcher,
        }
    }
}

pub async fn start(script: &str) -> Harness {
    Setup::new(script).start().await
}

pub struct Harness {
    pub system: AgentSystem,
    events: UnboundedReceiver<OutputEvent>,
    pub log: Vec<OutputEvent>,
    pub dispatcher: Arc<RecordingDispatcher>,
}

impl Harness {
    /// Sends a user message and runs until idle (every timer fired).
    pub async fn say(&mut self, thread: &str, text: &str) {
        self.system
            .send_user_message(&tid(thread), text)
            .await
            .unwrap();
        self.settle().await;
    }

    /// Sends an input and runs until idle.
    pub async fn send(&mut self, thread: &str, body: InputBody) {
        self.system.send(Input::new(tid(thread), body));
        self.settle().await;
    }

    /// Runs until nothing is queued and no timer is left.
    pub async fn settle(&mut self) {
        let outcome = self.system.wait_idle(None).await;
        assert!(matches!(outcome, WaitOutcome::Idle { .. }), "{outcome:?}");
        self.drain();
    }

    /// Runs for `seconds` of (paused, virtual) time, or until idle with no timer due sooner.
    pub async fn run_for(&mut self, seconds: u64) -> WaitOutcome {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(seconds);
        let outcome = self.system.wait_idle(Some(deadline)).await;
        self.drain();
        outcome
    }

    pub fn drain(&mut self) {
        while let Ok(event) = self.events.try_recv() {
            self.log.push(event);
        }
    }

    pub fn now(&self) -> Timestamp {
        self.system.clock().now()
    }

    /// Output events of one thread as short lines.
    pub fn lines(&self, thread: &str) -> Vec<String> {
        self.log
            .iter()
            .filter(|e| e.thread_id.as_str() == thread)
            .map(describe)
            .collect()
    }

    /// The ids of threads spawned by `thread`, in order.
    pub fn children(&self, thread: &str) -> Vec<String> {
        self.log
            .iter()
            .filter(|e| e.thread_id.as_str() == thread)
            .filter_map(|e| match &e.kind {
                OutputKind::ThreadSpawned { child_id } => Some(child_id.to_string()),
                _ => None,
            })
            .collect()
    }

    /// The thread's history as its model sees it, as short lines.
    pub async fn history(&self, thread: &str) -> Vec<String> {
        self.system
            .view(&tid(thread))
            .await
            .unwrap()
            .iter()
            .map(|e| item_line(&e.item))
            .collect()
    }
}

pub fn describe(event: &OutputEvent) -> String {
    match &event.kind {
        OutputKind::UserMessage { text } => format!("user: {text}"),
        OutputKind::AssistantText { text } => format!("assistant: {text}"),
        OutputKind::AssistantDelta { text } => format!("delta: {text}"),
        OutputKind::AssistantRestarted {} => "restarted".to_owned(),
        OutputKind::ToolCall { name, args, .. } => format!("call {name} {args}"),
        OutputKind::ToolResult {
            name,
            text,
            is_error,
            ..
        } => format!(
            "{} {name}: {text}",
            if *is_error { "error" } else { "result" }
        ),
        OutputKind::ThreadSpawned { child_id } => format!("spawned {child_id}"),
        OutputKind::ThreadClosed {} => "closed".to_owned(),
        OutputKind::Sleeping { until, .. } => format!("sleeping until {until:?}"),
        OutputKind::TitleChanged { title } => format!("title {title}"),
        OutputKind::Finished { status, result } => format!("finished {status:?} {result}"),
        OutputKind::Widget { ui } => format!("widget {ui}"),
        OutputKind::PlanUpdated { checklist } => format!("plan {}", checklist.replace('\n', " | ")),
        OutputKind::AuthorizationRequested { auth_url, .. } => format!("authorize at {auth_url}"),
        OutputKind::ChoiceRequested {
            prompt, choices, ..
        } => format!("choose {prompt} {choices:?}"),
        OutputKind::ChoiceAnswered {
            choice,
            by_deadline,
            ..
        } => format!(
            "chosen {choice}{}",
            if *by_deadline { " (deadline)" } else { "" }
        ),
        OutputKind::ClientToolCall { name, args, .. } => format!("client call {name} {args}"),
        OutputKind::ViewUpdated { view_type, content } => {
            format!(
                "view {view_type} {}",
                serde_json::Value::Object(content.clone())
            )
        }
        OutputKind::Interrupted { calls, .. } => format!("interrupted {calls}"),
        OutputKind::Error { text } => format!("ERROR {text}"),
        OutputKind::Withdrawn { after } => format!("withdrawn after {after}"),
    }
}

pub fn item_line(item: &Item) -> String {
    match item {
        Item::Message { text, .. } => format!("message: {text}"),
        Item::Assistant {
            text,
            tool_calls,
            synthetic,
        } => {
            let calls: Vec<String> = tool_calls
                .iter()
                .map(|c| format!("{} {}", c.name, c.args))
                .collect();
            format!(
                "{}: {} {}",
                if *synthetic { "synthetic" } else { "assistant" },
                text.as_deref().unwrap_or(""),
                calls.join(" | ")
            )
        }
        Item::ToolResult {
            name,
            text,
            is_error,
            ..
        } => format!(
            "{} {name}: {text}",
            if *is_error { "error" } else { "result" }
        ),
        Item::Notice { text, .. } => format!("notice: {text}"),
        Item::Summary { text, covers } => format!("summary of {covers}: {text}"),
    }
}

/// Asserts that `lines` contains each of `expected` (as substrings), in this order (two
/// expectations may match the same line).
#[track_caller]
pub fn assert_in_order(lines: &[String], expected: &[&str]) {
    let mut from = 0;
    for want in expected {
        match lines[from..].iter().position(|l| l.contains(want)) {
            Some(i) => from += i,
            None => panic!(
                "expected `{want}` after line {from} in:\n{}",
                lines
                    .iter()
                    .enumerate()
                    .map(|(i, l)| format!("{i:3} {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        }
    }
}

/// How many lines contain `needle`.
pub fn count(lines: &[String], needle: &str) -> usize {
    lines.iter().filter(|l| l.contains(needle)).count()
}

/// Builds stored agents the way hosts do: the file parsed, its scripted model read next to it.
#[derive(Debug)]
pub struct Builder(pub Categories);

#[async_trait]
impl AgentBuilder for Builder {
    async fn build(&self, stored: &StoredAgent) -> Result<Agent, BuildError> {
        let file: AgentFile = stored.agent_file().map_err(BuildError::invalid)?;
        let script = file
            .model
            .strip_prefix("script:")
            .ok_or_else(|| BuildError::invalid("not scripted"))?;
        let model = ScriptedModel::load(&file.resolve_path(script)).map_err(BuildError::invalid)?;
        let mut spec = AgentSpec::from_file(&file, Arc::new(model), &BTreeMap::new())
            .map_err(BuildError::invalid)?;
        spec.version = Some(stored.version);
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(SetTitle)];
        Agent::from_spec(spec, &self.0, &tools).map_err(BuildError::invalid)
    }
}

/// A catalog whose agents' scripts live in a folder of their own.
#[derive(Debug)]
pub struct Stored {
    dir: tempfile::TempDir,
    pub catalog: Arc<MemoryCatalog>,
    categories: Categories,
}

impl Default for Stored {
    fn default() -> Self {
        Self::with_categories(Categories::core())
    }
}

impl Stored {
    pub fn new() -> Self {
        Self::default()
    }

    /// A catalog whose agents (and the test agent) run with `categories`.
    pub fn with_categories(categories: Categories) -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            catalog: Arc::new(MemoryCatalog::new()),
            categories,
        }
    }

    /// Saves a version of `name` answering with `script`; `extra` is more of its agent file.
    pub async fn save(&self, name: &str, extra: &str, script: &str) -> u32 {
        let n = self.catalog.versions(name).await.unwrap().len() + 1;
        let script_file = format!("{name}.v{n}.script.yaml");
        std::fs::write(self.dir.path().join(&script_file), script).unwrap();
        let path = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(
            &path,
            format!("name: {name}\nmodel: script:{script_file}\ndescription: The {name}.\n{extra}"),
        )
        .unwrap();
        let version = StoredAgent::read(&path).unwrap();
        self.catalog
            .save(version, jiff::Timestamp::now())
            .await
            .unwrap()
            .version
    }

    pub fn setup(&self, script: &str) -> Setup {
        let mut setup = Setup::new(script);
        setup.categories = self.categories.clone();
        setup.catalog = Some((
            Arc::clone(&self.catalog) as Arc<dyn AgentCatalog>,
            Arc::new(Builder(self.categories.clone())),
        ));
        setup
    }
}

/// Two tool servers: a clock with two tools, and one whose toolset is called `researcher`.
#[derive(Debug)]
pub struct Servers;

fn tool(name: &str, description: &str, required: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: json!({"type": "object",
                             "properties": {required: {"type": "string"}},
                             "required": [required]}),
    }
}

#[async_trait]
impl ToolDiscovery for Servers {
    async fn discover(&self, servers: &[ToolServerConfig]) -> Vec<Discovered> {
        servers
            .iter()
            .map(|s| {
                let (name, tools) = if s.url.contains("clock") {
                    (
                        "World Clock",
                        vec![
                            tool("get_time", "The current time in a timezone.", "timezone"),
                            tool("convert_time", "Converts a time between zones.", "time"),
                        ],
                    )
                } else {
                    (
                        "Researcher",
                        vec![tool("lookup", "Looks a harbour up in a gazetteer.", "q")],
                    )
                };
                Discovered {
                    server: s.url.clone(),
                    result: Ok((format!("{}/invoke", s.url), tools)),
                    about: Some((name.to_owned(), Some(format!("{name} tools.")))),
                }
            })
            .collect()
    }
}
