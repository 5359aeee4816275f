//! Dev tools for the local stack. Neither emulator runs Lambda functions or fires Scheduler
//! schedules, so these stand in: [`LocalRunner`] long-polls the input and relay queues and calls
//! the real handlers with `SqsEvent`s (deleting only what a handler did not report as failed),
//! and pumps due `at()` schedules to their SQS target, deleting them afterwards.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
use jiff::Timestamp;

use crate::config::{AwsConfig, Clients};
use crate::handler::{AgentHandler, RelayHandler};

/// Runs `program args` in `repo`; `Err` carries its output when it fails.
fn run_in(repo: &Path, program: &Path, args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .current_dir(repo)
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{} {args:?} failed:\n{}\n{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Installs (when needed) and starts the local emulators of the repository at `repo`
/// (`infra/local/install.sh`, `infra/local/emulators.sh start`; `INFINITY_EMULATOR` chooses them):
/// what the local-stack tests and benches do first.
pub fn start_emulators(repo: &Path) -> Result<(), String> {
    let local = repo.join("infra/local");
    let bash = Path::new("bash");
    run_in(repo, bash, &[local.join("install.sh").as_os_str()])?;
    run_in(
        repo,
        bash,
        &[local.join("emulators.sh").as_os_str(), "start".as_ref()],
    )
}

/// Creates a fresh stack named `prefix` on the running emulators (`infra/local/bootstrap.py`: the
/// template's bucket, table, queues and schedule group) and returns its environment
/// (`INFINITY_*`, endpoints, credentials).
pub fn bootstrap_stack(repo: &Path, prefix: &str) -> Result<HashMap<String, String>, String> {
    let env_file = std::env::temp_dir().join(format!("{prefix}.env.sh"));
    run_in(
        repo,
        &repo.join(".venv/bin/python"),
        &[
            repo.join("infra/local/bootstrap.py").as_os_str(),
            "--prefix".as_ref(),
            prefix.as_ref(),
            "--env-file".as_ref(),
            env_file.as_os_str(),
        ],
    )?;
    let text =
        std::fs::read_to_string(&env_file).map_err(|e| format!("{}: {e}", env_file.display()))?;
    Ok(parse_env_file(&text))
}

/// A step of the local runner that failed (the emulator said why).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{step}: {reason}")]
pub struct LocalError {
    /// What it was doing.
    pub step: String,
    /// Why it failed.
    pub reason: String,
}

/// A `map_err` for a step: keeps the cause's debug form (the SDK's says the most).
fn failed<E: std::fmt::Debug>(step: impl Into<String>) -> impl FnOnce(E) -> LocalError {
    let step = step.into();
    move |e| LocalError {
        step,
        reason: format!("{e:?}"),
    }
}

/// Reads the `export NAME=value` lines of an env file written by `infra/local/bootstrap.py`.
pub fn parse_env_file(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| {
            (
                k.to_owned(),
                v.trim_matches(|c| c == '"' || c == '\'').to_owned(),
            )
        })
        .collect()
}

/// Runs the handlers against the queues, like Lambda's event source mappings, and fires due
/// schedules, like EventBridge Scheduler.
#[derive(Debug, Clone)]
pub struct LocalRunner {
    clients: Clients,
    config: AwsConfig,
    agent: Arc<AgentHandler>,
    relay: Arc<RelayHandler>,
    /// How long a message a handler reported as failed stays invisible (Lambda uses the queue's
    /// visibility timeout; locally a short one keeps retries quick).
    pub retry_after: Duration,
    /// Delivers every input-queue message a second time after it was handled (with another
    /// deduplication id), to check that duplicates change nothing. Off by default.
    pub duplicate_deliveries: bool,
    /// How many copies [`LocalRunner::duplicate_deliveries`] has sent.
    pub duplicates_sent: Arc<std::sync::atomic::AtomicUsize>,
    /// How many batches of the input queue run at once (Lambda's event source runs several
    /// invocations side by side; FIFO keeps each message group to one of them). Default 4.
    pub concurrency: usize,
    /// The agent function's `Timeout`, enforced the way Lambda does: the handler gets the
    /// deadline, and an invocation still running at it is stopped (its messages come back, as
    /// after a Lambda timeout, though after [`LocalRunner::retry_after`] rather than the queue's
    /// visibility timeout). [`AGENT_FUNCTION_TIMEOUT`] (template.yaml's), or
    /// `INFINITY_LOCAL_FUNCTION_TIMEOUT_SECONDS`.
    pub function_timeout: Duration,
    /// How many invocations the function timeout stopped.
    pub timeouts: Arc<std::sync::atomic::AtomicUsize>,
}

/// The agent function's `Timeout` in template.yaml (a test checks they agree).
pub const AGENT_FUNCTION_TIMEOUT: Duration = Duration::from_secs(300);

/// The relay function's `Timeout` in template.yaml.
pub const RELAY_FUNCTION_TIMEOUT: Duration = Duration::from_secs(20);

/// The variable that overrides [`AGENT_FUNCTION_TIMEOUT`] for the local runner (tests that need
/// a deadline to come soon).
pub const FUNCTION_TIMEOUT_VAR: &str = "INFINITY_LOCAL_FUNCTION_TIMEOUT_SECONDS";

/// The agent function's timeout for the local runner: [`FUNCTION_TIMEOUT_VAR`] when it is a
/// whole number of seconds above 0, else [`AGENT_FUNCTION_TIMEOUT`].
pub fn function_timeout_from_env() -> Duration {
    match std::env::var(FUNCTION_TIMEOUT_VAR) {
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(secs) if secs > 0 => Duration::from_secs(secs),
            _ => {
                tracing::warn!(value = %v, "{FUNCTION_TIMEOUT_VAR} is not a whole number of seconds above 0; using template.yaml's timeout");
                AGENT_FUNCTION_TIMEOUT
            }
        },
        Err(_) => AGENT_FUNCTION_TIMEOUT,
    }
}

/// Marks the copy made by [`LocalRunner::duplicate_deliveries`], so it is not copied again.
const DUPLICATE_ATTRIBUTE: &str = "infinity-duplicate";

impl LocalRunner {
    /// A runner for these handlers.
    pub fn new(clients: Clients, config: AwsConfig, agent: Arc<AgentHandler>) -> Self {
        let relay = Arc::new(RelayHandler::new(&clients, &config));
        Self {
            clients,
            config,
            agent,
            relay,
            retry_after: Duration::from_secs(1),
            duplicate_deliveries: false,
            duplicates_sent: Arc::default(),
            concurrency: 4,
            function_timeout: function_timeout_from_env(),
            timeouts: Arc::default(),
        }
    }

    /// Polls both queues and pumps schedules until the process ends.
    pub async fn run(self) {
        let agents = (0..self.concurrency.max(1)).map(|_| {
            let agent = self.clone();
            async move {
                loop {
                    if let Err(err) = agent.poll_agent_once(Duration::from_secs(1)).await {
                        tracing::warn!(%err, "polling the input queue failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        let relay = self.clone();
        let pump = self.clone();
        tokio::join!(
            futures_util::future::join_all(agents),
            async move {
                loop {
                    if let Err(err) = relay.poll_relay_once(Duration::from_secs(1)).await {
                        tracing::warn!(%err, "polling the relay queue failed");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            },
            async move {
                loop {
                    if let Err(err) = pump.pump_schedules_once().await {
                        tracing::warn!(%err, "pumping schedules failed");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        );
    }

    /// Receives one batch from the input queue (waiting up to `wait`) and runs the agent handler
    /// on it. Returns how many messages it received.
    pub async fn poll_agent_once(&self, wait: Duration) -> Result<usize, LocalError> {
        let agent = Arc::clone(&self.agent);
        let timeout = self.function_timeout;
        self.poll(&self.config.input_queue_url.clone(), wait, move |event| {
            let agent = Arc::clone(&agent);
            async move {
                let deadline = tokio::time::Instant::now() + timeout;
                tokio::time::timeout_at(deadline, agent.handle_until(event, Some(deadline)))
                    .await
                    .ok()
            }
        })
        .await
    }

    /// Receives one batch from the relay queue and runs the relay handler on it.
    pub async fn poll_relay_once(&self, wait: Duration) -> Result<usize, LocalError> {
        let relay = Arc::clone(&self.relay);
        self.poll(&self.config.relay_queue_url.clone(), wait, move |event| {
            let relay = Arc::clone(&relay);
            async move {
                tokio::time::timeout(RELAY_FUNCTION_TIMEOUT, relay.handle(event))
                    .await
                    .ok()
            }
        })
        .await
    }

    async fn poll<F, Fut>(
        &self,
        queue_url: &str,
        wait: Duration,
        handler: F,
    ) -> Result<usize, LocalError>
    where
        F: FnOnce(SqsEvent) -> Fut,
        // `None`: the invocation ran out of time and was stopped.
        Fut: std::future::Future<Output = Option<SqsBatchResponse>>,
    {
        let received = self
            .clients
            .sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(wait.as_secs() as i32)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .message_attribute_names("All")
            .send()
            .await
            .map_err(failed("receive"))?;
        let messages = received.messages();
        if messages.is_empty() {
            return Ok(0);
        }
        let mut event = SqsEvent::default();
        let mut receipts = HashMap::new();
        for m in messages {
            let mut record = SqsMessage::default();
            record.message_id = m.message_id().map(str::to_owned);
            record.receipt_handle = m.receipt_handle().map(str::to_owned);
            record.body = m.body().map(str::to_owned);
            record.event_source = Some("aws:sqs".into());
            if let Some(attributes) = m.attributes() {
                for (name, value) in attributes {
                    record
                        .attributes
                        .insert(name.as_str().to_owned(), value.clone());
                }
            }
            if let (Some(id), Some(receipt)) = (m.message_id(), m.receipt_handle()) {
                receipts.insert(id.to_owned(), receipt.to_owned());
            }
            event.records.push(record);
        }
        let count = event.records.len();
        let failures: Vec<String> = match handler(event).await {
            Some(response) => response
                .batch_item_failures
                .iter()
                .map(|f| f.item_identifier.clone())
                .collect(),
            // Lambda fails a timed-out invocation whole: every message comes back.
            None => {
                self.timeouts
                    .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tracing::warn!(queue = queue_url, messages = count, "the invocation reached its function timeout and was stopped; its messages come back");
                receipts.keys().cloned().collect()
            }
        };
        let mut deletes = Vec::new();
        for (id, receipt) in &receipts {
            if failures.contains(id) {
                let _ = self
                    .clients
                    .sqs
                    .change_message_visibility()
                    .queue_url(queue_url)
                    .receipt_handle(receipt)
                    .visibility_timeout(self.retry_after.as_secs() as i32)
                    .send()
                    .await;
            } else {
                deletes.push(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(id
                            .chars()
                            .filter(|c| c.is_ascii_alphanumeric())
                            .take(80)
                            .collect::<String>())
                        .receipt_handle(receipt)
                        .build()
                        .map_err(failed("building a request"))?,
                );
            }
        }
        if self.duplicate_deliveries && queue_url == self.config.input_queue_url {
            for m in messages {
                let handled = m
                    .message_id()
                    .is_some_and(|id| !failures.iter().any(|f| f == id));
                let is_copy = m
                    .message_attributes()
                    .is_some_and(|a| a.contains_key(DUPLICATE_ATTRIBUTE));
                let group = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId));
                if let (true, false, Some(group)) = (handled, is_copy, group) {
                    let marker = aws_sdk_sqs::types::MessageAttributeValue::builder()
                        .data_type("String")
                        .string_value("1")
                        .build()
                        .map_err(failed("building a request"))?;
                    self.clients
                        .sqs
                        .send_message()
                        .queue_url(queue_url)
                        .message_group_id(group)
                        .message_deduplication_id(format!(
                            "dup-{}",
                            m.message_id().unwrap_or_default()
                        ))
                        .message_attributes(DUPLICATE_ATTRIBUTE, marker)
                        .message_body(m.body().unwrap_or_default())
                        .send()
                        .await
                        .map_err(failed("duplicate"))?;
                    self.duplicates_sent
                        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
        }
        if !deletes.is_empty() {
            self.clients
                .sqs
                .delete_message_batch()
                .queue_url(queue_url)
                .set_entries(Some(deletes))
                .send()
                .await
                .map_err(failed("delete"))?;
        }
        Ok(count)
    }

    /// Fires every schedule of the group whose `at()` time has come: sends its target input to
    /// the target queue and deletes the schedule. Returns how many fired.
    pub async fn pump_schedules_once(&self) -> Result<usize, LocalError> {
        // Every page: a group may hold more schedules than one page lists, and the one due may
        // be on any of them.
        let mut summaries = Vec::new();
        let mut next_token: Option<String> = None;
        loop {
            let page = self
                .clients
                .scheduler
                .list_schedules()
                .group_name(&self.config.schedule_group)
                .set_next_token(next_token.take())
                .send()
                .await
                .map_err(failed("list schedules"))?;
            summaries.extend(page.schedules().iter().cloned());
            match page.next_token() {
                Some(token) if !token.is_empty() => next_token = Some(token.to_owned()),
                _ => break,
            }
        }
        let mut fired = 0;
        for summary in &summaries {
            let Some(name) = summary.name() else { continue };
            let schedule = self
                .clients
                .scheduler
                .get_schedule()
                .name(name)
                .group_name(&self.config.schedule_group)
                .send()
                .await
                .map_err(failed(format!("get schedule {name}")))?;
            let Some(at) = schedule
                .schedule_expression()
                .and_then(|e| e.strip_prefix("at("))
                .and_then(|e| e.strip_suffix(')'))
            else {
                continue;
            };
            let Ok(civil) = at.parse::<jiff::civil::DateTime>() else {
                tracing::warn!(%name, %at, "schedule with an unreadable at() time");
                continue;
            };
            let zone = schedule.schedule_expression_timezone().unwrap_or("UTC");
            let due = jiff::tz::TimeZone::get(zone)
                .and_then(|tz| tz.to_timestamp(civil))
                .map_err(failed(format!("the time of schedule {name}")))?;
            if due > Timestamp::now() {
                continue;
            }
            let Some(target) = schedule.target() else {
                continue;
            };
            let queue_url = self.queue_url_for_arn(target.arn()).await?;
            self.clients
                .sqs
                .send_message()
                .queue_url(queue_url)
                .message_body(target.input().unwrap_or_default())
                .send()
                .await
                .map_err(failed("schedule target"))?;
            self.clients
                .scheduler
                .delete_schedule()
                .name(name)
                .group_name(&self.config.schedule_group)
                .send()
                .await
                .map_err(failed(format!("delete schedule {name}")))?;
            fired += 1;
        }
        Ok(fired)
    }

    async fn queue_url_for_arn(&self, arn: &str) -> Result<String, LocalError> {
        if arn == self.config.relay_queue_arn {
            return Ok(self.config.relay_queue_url.clone());
        }
        let name = arn.rsplit(':').next().unwrap_or(arn);
        self.clients
            .sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(failed(format!("queue for {arn}")))?
            .queue_url()
            .map(str::to_owned)
            .ok_or_else(|| LocalError {
                step: format!("queue for {arn}"),
                reason: "the emulator returned no URL".to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first `key:` (in seconds) of the resource `name` in template.yaml.
    fn template_seconds(name: &str, key: &str) -> Duration {
        let template = include_str!("../../../template.yaml");
        let start = template
            .find(&format!("\n  {name}:\n"))
            .unwrap_or_else(|| panic!("{name} is not in template.yaml"));
        let seconds = template[start..]
            .lines()
            .find_map(|l| l.trim().strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} has no {key} in template.yaml"));
        Duration::from_secs(seconds)
    }

    fn template_timeout(name: &str) -> Duration {
        template_seconds(name, "Timeout")
    }

    #[test]
    fn the_local_runner_enforces_the_template_s_function_timeouts() {
        assert_eq!(template_timeout("AgentFunction"), AGENT_FUNCTION_TIMEOUT);
        assert_eq!(template_timeout("RelayFunction"), RELAY_FUNCTION_TIMEOUT);
        // Lambda's advice for SQS sources: a visibility timeout of six function timeouts.
        for (queue, function) in [
            ("InputQueue", "AgentFunction"),
            ("RelayQueue", "RelayFunction"),
        ] {
            assert!(
                template_seconds(queue, "VisibilityTimeout") >= template_timeout(function) * 6,
                "{queue}'s visibility timeout is under 6 x {function}'s timeout"
            );
        }
    }

    #[test]
    fn a_failed_message_comes_back_sooner_each_time_up_to_fifteen_minutes() {
        let delays: Vec<u64> = (1..=8)
            .map(|n| crate::queue::retry_delay(n).as_secs())
            .collect();
        assert_eq!(delays, [15, 30, 60, 120, 240, 480, 900, 900]);
    }
}
