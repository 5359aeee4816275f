//! Starts the local emulators (moto server and DynamoDB Local, or LocalStack with
//! `INFINITY_EMULATOR=localstack`, through `infra/local/`), creates a
//! fresh set of queues and a table for each test from `template.yaml`, and drives the real
//! handlers through [`LocalRunner`] until a condition holds.
//!
//! A stack is `None`, the test skipped saying so, on a machine where `make tools` has not
//! installed the emulators ([`infinity_test_support::tools`]): a test begins with
//! `let Some(s) = stack(SCRIPT).await else { return };`.

use infinity_aws::tool_servers::CallbackHandler;
use infinity_rap::signing::CallbackSigner;
use infinity_rap_runtime::client::RapClient;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use infinity_agent_core::agent::AgentFile;
use infinity_agent_core::history::Item;
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::input::Input;
use infinity_agent_core::state::ThreadRecord;
use infinity_agent_core::store::{load_view, ThreadStore};
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{build_agent, AgentHandler};
use infinity_aws::local::LocalRunner;
use infinity_aws::queue::SqsInputSender;
use infinity_aws::store::DynamoThreadStore;
use infinity_test_support::{ready_or_skip, repo, Tools};

/// Starts the emulators once per test process (installing what is missing, when
/// `INFINITY_REQUIRE_TOOLS` is set); `false`, the test skipped saying so, when `make tools` has
/// not installed them.
fn emulators() -> bool {
    static STARTED: OnceLock<()> = OnceLock::new();
    if !ready_or_skip(Tools::Emulators) {
        return false;
    }
    STARTED.get_or_init(|| infinity_aws::local::start_emulators(&repo()).unwrap());
    true
}

/// Creates a fresh stack of resources and returns its environment (`INFINITY_*`, endpoints).
fn bootstrap(prefix: &str) -> HashMap<String, String> {
    infinity_aws::local::bootstrap_stack(&repo(), prefix).unwrap()
}

/// A fresh stack's environment (`INFINITY_*`, endpoints), the emulators started, for a process
/// that runs it (a function's binary); `None` without the emulators (see the module doc).
pub fn fresh_env() -> Option<HashMap<String, String>> {
    if !emulators() {
        return None;
    }
    let prefix = format!(
        "t{}",
        &infinity_agent_core::ids::EffectId::generate().as_str()[3..15]
    );
    Some(bootstrap(&prefix))
}

pub struct Stack {
    pub config: AwsConfig,
    pub clients: Clients,
    pub handler: Arc<AgentHandler>,
    pub runner: LocalRunner,
    pub sender: SqsInputSender,
    pub prefix: String,
    /// With tool servers: where the callback handler listens (the local stand-in for the
    /// callback function's Function URL).
    pub callback_url: Option<String>,
    _dir: tempfile::TempDir,
}

pub struct Options {
    pub relay_threshold: u64,
    pub schedule_early: u64,
    /// Base URLs of tool servers for the agent file.
    pub tool_servers: Vec<String>,
    /// Point the handler's output queue at a queue that does not exist, so every output event
    /// fails to publish.
    pub broken_output: bool,
    /// `INFINITY_COMPLETION_TIMEOUT_SECONDS`, when not the default.
    pub completion_timeout: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            relay_threshold: 900,
            schedule_early: 60,
            tool_servers: Vec::new(),
            broken_output: false,
            completion_timeout: None,
        }
    }
}

pub const CALLBACK_SECRET: &[u8] = b"the local stack's callback secret, 32+ bytes";

/// A fresh stack whose agent follows `script`; `None` without the emulators (see the module doc).
pub async fn stack(script: &str) -> Option<Stack> {
    stack_with(script, Options::default()).await
}

/// [`stack`] with `options`.
pub async fn stack_with(script: &str, options: Options) -> Option<Stack> {
    if !emulators() {
        return None;
    }
    let prefix = format!(
        "t{}",
        &infinity_agent_core::ids::EffectId::generate().as_str()[3..15]
    );
    let mut env = bootstrap(&prefix);
    env.insert(
        "INFINITY_RELAY_THRESHOLD_SECONDS".into(),
        options.relay_threshold.to_string(),
    );
    env.insert(
        "INFINITY_SCHEDULE_EARLY_SECONDS".into(),
        options.schedule_early.to_string(),
    );
    if let Some(seconds) = options.completion_timeout {
        env.insert(
            "INFINITY_COMPLETION_TIMEOUT_SECONDS".into(),
            seconds.to_string(),
        );
    }
    let config = AwsConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
    let endpoint = |service: &str| {
        env.get(&format!("AWS_ENDPOINT_URL_{service}"))
            .or_else(|| env.get("AWS_ENDPOINT_URL"))
            .cloned()
            .unwrap_or_else(|| panic!("no endpoint for {service} in {env:?}"))
    };
    let clients = Clients::for_endpoints(
        env.get("AWS_REGION").map_or("us-east-1", String::as_str),
        &endpoint("DYNAMODB"),
        &endpoint("SQS"),
        &endpoint("SCHEDULER"),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.yaml"), script).unwrap();
    let agent_path = dir.path().join("agent.yaml");
    let servers: String = options
        .tool_servers
        .iter()
        .map(|s| format!("  - {s}\n"))
        .collect();
    let tool_servers = if servers.is_empty() {
        String::new()
    } else {
        format!("tool_servers:\n{servers}")
    };
    std::fs::write(
        &agent_path,
        format!("name: tester\nmodel: script:script.yaml\n{tool_servers}"),
    )
    .unwrap();
    let agent = build_agent(&AgentFile::load(&agent_path).unwrap())
        .await
        .unwrap();
    // Like `infinity send` with the table known: an input too big for a message is stored.
    let sender = SqsInputSender::new(clients.sqs.clone(), config.input_queue_url.clone())
        .with_stash(DynamoThreadStore::new(
            clients.dynamodb.clone(),
            config.table.clone(),
            config.dedup_ttl,
        ));
    // The callback function's handler, served over HTTP as `infinity-local` does.
    let (callback_url, client) = if agent.tool_servers.is_empty() {
        (None, None)
    } else {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let signer = CallbackSigner::new(CALLBACK_SECRET.to_vec(), &url).unwrap();
        let callbacks = CallbackHandler::new(signer.clone(), sender.clone());
        let app = infinity_aws::tool_servers::local_router(Arc::new(callbacks));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = RapClient::new(signer)
            .with_configured(&agent.tool_servers)
            .unwrap();
        (Some(url), Some(Arc::new(client)))
    };
    let mut handler_config = config.clone();
    if options.broken_output {
        let url = config
            .output_queue_url
            .clone()
            .expect("the stack has an output queue");
        handler_config.output_queue_url = Some(format!("{url}-gone"));
    }
    let handler =
        Arc::new(AgentHandler::new(&clients, &handler_config, agent).with_tool_servers(client));
    let mut runner = LocalRunner::new(clients.clone(), config.clone(), Arc::clone(&handler));
    runner.retry_after = Duration::from_secs(0);
    Some(Stack {
        config,
        clients,
        handler,
        runner,
        sender,
        prefix,
        callback_url,
        _dir: dir,
    })
}

pub fn tid(s: &str) -> ThreadId {
    ThreadId::new(s).unwrap()
}

impl Stack {
    pub fn store(&self) -> &DynamoThreadStore {
        self.handler.store()
    }

    /// Puts a person's message on the input queue, as `infinity send` does.
    pub async fn enqueue_message(&self, thread: &str, text: &str) -> Input {
        let input = Input::user_message(tid(thread), text);
        self.send(&input).await;
        input
    }

    pub async fn send(&self, input: &Input) {
        self.sender.send_to_input_queue(input).await.unwrap();
    }

    /// Runs the handlers (one poll of each queue and one schedule pump per round) until
    /// `done` holds, or panics after `timeout`.
    pub async fn run_until<F, Fut>(&self, timeout: Duration, what: &str, mut done: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if done().await {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}"
            );
            self.round().await;
        }
    }

    /// One round of the local event sources.
    pub async fn round(&self) {
        let wait = Duration::from_millis(0);
        let a = self.runner.poll_agent_once(wait).await.unwrap();
        let r = self.runner.poll_relay_once(wait).await.unwrap();
        self.runner.pump_schedules_once().await.unwrap();
        if a == 0 && r == 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub async fn record(&self, thread: &str) -> Option<ThreadRecord> {
        self.store().load_record(&tid(thread)).await.unwrap()
    }

    /// The thread's history read from the table as the model sees it, one line per entry.
    pub async fn stored_history(&self, thread: &str) -> Vec<String> {
        let Some(record) = self.record(thread).await else {
            return Vec::new();
        };
        load_view(self.store(), &record)
            .await
            .unwrap()
            .iter()
            .map(|e| line(&e.item))
            .collect()
    }

    /// Whether a line of [`Stack::stored_history`] holds `needle`.
    pub async fn stored_history_has(&self, thread: &str, needle: &str) -> bool {
        self.stored_history(thread)
            .await
            .iter()
            .any(|l| l.contains(needle))
    }

    /// The thread's value parts (`X#` items): how many are kept for good, and how many expire
    /// (carry a `ttl`).
    pub async fn parts(&self, thread: &str) -> (usize, usize) {
        use aws_sdk_dynamodb::types::AttributeValue;
        let (mut kept, mut expiring) = (0, 0);
        let mut start = None;
        loop {
            let page = self
                .clients
                .dynamodb
                .query()
                .table_name(&self.config.table)
                .key_condition_expression("pk = :pk AND begins_with(sk, :x)")
                .expression_attribute_values(":pk", AttributeValue::S(format!("T#{thread}")))
                .expression_attribute_values(":x", AttributeValue::S("X#".into()))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            for item in page.items() {
                if item.contains_key("ttl") {
                    expiring += 1;
                } else {
                    kept += 1;
                }
            }
            start = page.last_evaluated_key().cloned();
            if start.is_none() {
                return (kept, expiring);
            }
        }
    }

    /// The input dead-letter queue holds nothing.
    pub async fn dlq_is_empty(&self) {
        let dlq = self.queue_url("InputDLQ").await;
        let got = self
            .clients
            .sqs
            .receive_message()
            .queue_url(&dlq)
            .wait_time_seconds(0)
            .send()
            .await
            .unwrap();
        assert!(got.messages().is_empty(), "{:?}", got.messages());
    }

    /// The `error` events of `thread` on the output queue now (consumed with the rest).
    pub async fn error_events(&self, thread: &str) -> Vec<serde_json::Value> {
        self.drain_output()
            .await
            .into_iter()
            .filter(|e| e["thread_id"] == thread && e["type"] == "error")
            .collect()
    }

    /// Every message on the output queue now (consumed), as JSON.
    pub async fn drain_output(&self) -> Vec<serde_json::Value> {
        let url = self
            .config
            .output_queue_url
            .clone()
            .expect("an output queue");
        let mut out = Vec::new();
        loop {
            let got = self
                .clients
                .sqs
                .receive_message()
                .queue_url(&url)
                .max_number_of_messages(10)
                .wait_time_seconds(0)
                .send()
                .await
                .unwrap();
            if got.messages().is_empty() {
                return out;
            }
            for m in got.messages() {
                let body = m.body().unwrap_or_default();
                assert!(
                    body.len() <= 1_048_576,
                    "an output message of {} bytes",
                    body.len()
                );
                out.push(serde_json::from_str(body).unwrap());
                self.clients
                    .sqs
                    .delete_message()
                    .queue_url(&url)
                    .receipt_handle(m.receipt_handle().unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
    }

    pub async fn queue_url(&self, logical: &str) -> String {
        let suffix = if logical.starts_with("Input") {
            ".fifo"
        } else {
            ""
        };
        self.clients
            .sqs
            .get_queue_url()
            .queue_name(format!("{}-{logical}{suffix}", self.prefix))
            .send()
            .await
            .unwrap()
            .queue_url()
            .unwrap()
            .to_owned()
    }
}

pub fn line(item: &Item) -> String {
    match item {
        Item::Message { text, .. } => format!("message: {text}"),
        Item::Assistant {
            text, tool_calls, ..
        } => {
            let calls: Vec<String> = tool_calls
                .iter()
                .map(|c| format!("{} {}", c.name, c.args))
                .collect();
            format!(
                "assistant: {} {}",
                text.as_deref().unwrap_or(""),
                calls.join(" | ")
            )
        }
        Item::ToolResult {
            name,
            text,
            is_error,
            ..
        } => {
            format!(
                "{} {name}: {text}",
                if *is_error { "error" } else { "result" }
            )
        }
        Item::Notice { text, .. } => format!("notice: {text}"),
        Item::Summary { text, covers } => format!("summary of {covers}: {text}"),
    }
}

/// The scripted test agent (for tests that run the engine by hand).
pub async fn test_agent() -> Arc<infinity_agent_core::agent::Agent> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("script.yaml"),
        "rules:\n  - thread: child\n    reply: {text: \"child here\"}\n  - when: \"^spawn$\"\n    reply:\n      tool_calls: [{name: spawn_thread, args: {instructions: \"say hi\", child_of: \"${stack}\"}}]\n  - reply: {text: \"ok\"}\n",
    )
    .unwrap();
    let path = dir.path().join("agent.yaml");
    std::fs::write(&path, "name: tester\nmodel: script:script.yaml\n").unwrap();
    build_agent(&AgentFile::load(&path).unwrap()).await.unwrap()
}
