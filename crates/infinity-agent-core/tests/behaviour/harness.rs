//! A test harness around the embedded runtime: paused tokio time, a fixed clock start, a
//! recording dispatcher, and transcripts as plain lines.

use std::path::Path;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use infinity_agent_core::agent::{AgentSpec, Limits};
use infinity_agent_core::effect::{Notification, OutputEvent, OutputKind, ToolInvocation};
use infinity_agent_core::history::Item;
use infinity_agent_core::host::{DispatchError, ToolDispatcher};
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::{Input, InputBody};
use infinity_agent_core::runtime::{AgentSystem, AgentSystemBuilder, WaitOutcome};
use infinity_agent_core::scripted::ScriptedModel;
use infinity_agent_core::store::ThreadStore;
use infinity_agent_core::testing::DispatchedTool;
use infinity_agent_core::tools::SetTitle;
use jiff::Timestamp;
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
    pub internal_tools: infinity_agent_core::tools::internal::InternalTools,
    pub output_schema: Option<serde_json::Value>,
    pub skills: Vec<infinity_agent_core::tools::internal::Skill>,
    pub script: String,
    pub store: Option<Arc<dyn ThreadStore>>,
    pub limits: Limits,
    pub clock_start: Timestamp,
    pub tool_servers: Vec<infinity_agent_core::tools::servers::ToolServerConfig>,
    pub discovery: Option<Arc<dyn infinity_agent_core::tools::servers::ToolDiscovery>>,
    /// Stored agents, and how they are built.
    pub catalog: Option<(
        Arc<dyn infinity_agent_core::catalog::AgentCatalog>,
        Arc<dyn infinity_agent_core::catalog::AgentBuilder>,
    )>,
    /// `agents:` of the test agent.
    pub sub_agents: Vec<infinity_agent_core::tools::internal::delegation::SubAgent>,
    /// The agent of new conversations, when it is not the test agent (a stored one).
    pub default_agent: Option<String>,
    /// The deployment's knowledge.
    pub library: Option<infinity_agent_core::library::Library>,
    pub remote_allow: Vec<infinity_agent_core::tools::internal::RemoteRule>,
    /// A run's deadline and the time one completion may take (`with_deadline`).
    pub deadline: Option<(tokio::time::Instant, std::time::Duration)>,
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
            remote_allow: Vec::new(),
            deadline: None,
        }
    }

    pub async fn start(self) -> Harness {
        let model = ScriptedModel::parse(&self.script, Path::new("test.script.yaml")).unwrap();
        let dispatcher = Arc::new(RecordingDispatcher::default());
        let mut agent = AgentSpec::new("tester", "You are a test agent.", Arc::new(model));
        agent.limits = self.limits;
        agent.internal_tools = self.internal_tools;
        agent.output_schema = self.output_schema;
        agent.skills = self.skills;
        agent.tool_servers = self.tool_servers;
        agent.sub_agents = self.sub_agents;
        agent.remote_allow = self.remote_allow;
        let mut builder = AgentSystemBuilder::new()
            .with_agent(agent)
            .with_tool(Arc::new(SetTitle))
            .with_tool(Arc::new(DispatchedTool("lookup")))
            .with_tool(Arc::new(DispatchedTool("fetch")))
            .with_tool(Arc::new(DispatchedTool("watch")))
            .with_tokio_sleep_tools()
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
        OutputKind::ViewUpdated { view_type, content } => {
            format!(
                "view {view_type} {}",
                serde_json::Value::Object(content.clone())
            )
        }
        OutputKind::Interrupted { calls, .. } => format!("interrupted {calls}"),
        OutputKind::Error { text } => format!("ERROR {text}"),
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
