//! [`TableRemotes`]: a stack's remote machines (`infinity remote connect --url <ApiUrl>`), kept
//! in its table so every Lambda instance (and `infinity serve --aws`) sees the same ones.
//!
//! | Partition | Sort key | What |
//! |---|---|---|
//! | `R` | remote id | a remote: `name`, `exec`, `seen` and `until` (ms), `gone` |
//! | `R#{remote id}` | `{ms}#{run or kill}#{run id}` | an order waiting for the remote's next poll |
//! | `RR` | run id | a run in flight: `remote`, `thread`, `call`, `started` (ms), `timeout` (s) |
//! | `RA` | token | a command waiting for a person's approval (the call, as JSON in `body`) |
//!
//! A poll marks the remote as polling `until` its end, then reads its orders about once a
//! second (a Lambda cannot be woken by another instance's write). A remote is online until 10 s
//! after its last poll's end ([`OFFLINE_AFTER`]); since a Lambda cannot see its client hang up,
//! a remote that drops is noticed at most one poll later. Nothing wakes for a run whose remote
//! went away, so [`TableRemotes::sweep`] answers them: the API function runs it on a schedule,
//! `serve --aws` every few seconds, and any poll at most every [`SWEEP_EVERY`].
//!
//! Run ids and approval tokens come from the call (thread and call id), so a dispatch performed
//! twice (an outbox retried after a crash) queues one run, and a run is put with its order in
//! one transaction. Results are sent before the run's item is deleted: a crash between the two
//! sends the result again, with the same input id, and the thread takes it once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use aws_sdk_dynamodb::Client;
use infinity_agent_core::host::InputSender;
use infinity_agent_core::ids::{CallId, ThreadId};
use infinity_agent_core::input::Input;
use infinity_library::remote::{
    ended, reported, result_input, Ending, ExecCall, HubError, Order, RemoteDirectory, RemoteHub,
    RemoteInfo, Report, FORGET_AFTER, OFFLINE_AFTER, REPORT_GRACE,
};
use jiff::Timestamp;
use sha2::{Digest, Sha256};

use crate::config::{AwsConfig, Clients};
use crate::item::{flag, is_condition_failure, n, number, s, text, Item};
use crate::queue::SqsInputSender;

const REMOTES: &str = "R";
const RUNS: &str = "RR";
const APPROVALS: &str = "RA";
/// How often a poll reads the remote's orders.
const POLL_EVERY: Duration = Duration::from_secs(1);
/// How often polls sweep the runs, at most, per process.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// How long a question waits for a person before the table forgets it.
const APPROVAL_KEPT: Duration = Duration::from_secs(30 * 86_400);

/// A stack's remotes, in its table; results and questions go to its input queue.
#[derive(Debug)]
pub struct TableRemotes {
    client: Client,
    table: String,
    sender: SqsInputSender,
    /// The API's base URL, for the approval questions' `response_url` (`INFINITY_API_URL`).
    api_url: Option<String>,
    last_sweep: Mutex<Option<Instant>>,
}

fn now_ms() -> i64 {
    Timestamp::now().as_millisecond()
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The `ttl` (epoch seconds) of an item kept `for_how_long` from now.
fn ttl(for_how_long: Duration) -> AttributeValue {
    n(Timestamp::now().as_second() + millis(for_how_long) / 1000)
}

fn unavailable<E: ProvideErrorMetadata + std::fmt::Debug>(
    what: &str,
    err: &aws_sdk_dynamodb::error::SdkError<E>,
) -> HubError {
    HubError::Unavailable(format!("{what}: {}", crate::item::sdk_detail(err)))
}

/// An id of `prefix` that only this call of this thread has.
fn call_id(prefix: &str, thread: &ThreadId, call: &CallId) -> String {
    let digest = Sha256::digest(format!("{thread}\n{call}"));
    format!("{prefix}-{}", &hex::encode(digest)[..32])
}

/// True while the remote `item` polls, or polled less than [`OFFLINE_AFTER`] ago.
fn online(item: &Item, now: i64) -> bool {
    !flag(item, "gone")
        && now < number(item, "seen").max(number(item, "until")) + millis(OFFLINE_AFTER)
}

/// The thread and the call a run's item answers.
fn call_of(run: &Item) -> Option<(ThreadId, CallId)> {
    let thread = ThreadId::new(text(run, "thread")).ok()?;
    let call = CallId::new(text(run, "call")).ok()?;
    Some((thread, call))
}

fn info(item: &Item, now: i64) -> RemoteInfo {
    RemoteInfo {
        id: text(item, "sk").to_owned(),
        name: text(item, "name").to_owned(),
        online: online(item, now),
        exec: flag(item, "exec"),
        last_seen: Timestamp::from_millisecond(number(item, "seen")).unwrap_or_default(),
    }
}

impl TableRemotes {
    /// The remotes of the stack `config` describes.
    pub fn new(clients: &Clients, config: &AwsConfig) -> Self {
        Self {
            client: clients.dynamodb.clone(),
            table: config.table.clone(),
            sender: SqsInputSender::for_deployment(clients, config),
            api_url: config.api_url.clone(),
            last_sweep: Mutex::new(None),
        }
    }

    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, HubError> {
        let got = self
            .client
            .get_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| unavailable("reading the remotes", &e))?;
        Ok(got.item)
    }

    async fn delete(&self, pk: &str, sk: &str) -> Result<(), HubError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key("pk", s(pk))
            .key("sk", s(sk))
            .send()
            .await
            .map_err(|e| unavailable("updating the remotes", &e))?;
        Ok(())
    }

    async fn query(&self, pk: &str) -> Result<Vec<Item>, HubError> {
        crate::store::query_partition(&self.client, &self.table, pk, None)
            .await
            .map_err(|e| unavailable("reading the remotes", &e))
    }

    async fn send(&self, input: &Input) -> Result<(), HubError> {
        self.sender
            .send_to_input_queue(input)
            .await
            .map_err(|e| HubError::Unavailable(format!("sending to the thread: {e}")))
    }

    /// The item of an order for `remote`, kept as long as the remote may be.
    fn order_item(remote: &str, kind: &str, run_id: &str, order: &Order) -> Item {
        let body = serde_json::to_string(order).unwrap_or_default();
        HashMap::from([
            ("pk".to_owned(), s(format!("{REMOTES}#{remote}"))),
            (
                "sk".to_owned(),
                s(format!("{:013}#{kind}#{run_id}", now_ms())),
            ),
            ("body".to_owned(), s(body)),
            ("ttl".to_owned(), ttl(FORGET_AFTER)),
        ])
    }

    /// Queues the call's run for its remote (`remote`: its item, as just read), once (the run
    /// id comes from the call), or answers it when the remote is offline.
    async fn queue_run(&self, call: &ExecCall, remote: Option<&Item>) -> Result<(), HubError> {
        let run_id = call_id("run", &call.thread, &call.call);
        if !remote.is_some_and(|r| online(r, now_ms())) {
            let text = ended(None, Ending::NotStarted);
            return self
                .send(&result_input(&call.thread, &call.call, text))
                .await;
        }
        let run: Item = HashMap::from([
            ("pk".to_owned(), s(RUNS)),
            ("sk".to_owned(), s(&run_id)),
            ("remote".to_owned(), s(&call.remote_id)),
            ("thread".to_owned(), s(call.thread.as_str())),
            ("call".to_owned(), s(call.call.as_str())),
            ("started".to_owned(), n(now_ms())),
            ("timeout".to_owned(), n(call.timeout_seconds)),
            (
                "ttl".to_owned(),
                ttl(Duration::from_secs(call.timeout_seconds) + FORGET_AFTER),
            ),
        ]);
        let order = Order::Run {
            run_id: run_id.clone(),
            command: call.command.clone(),
            description: call.description.clone(),
            timeout_seconds: call.timeout_seconds,
        };
        let put = |item: Item, condition: Option<&str>| {
            Put::builder()
                .table_name(&self.table)
                .set_item(Some(item))
                .set_condition_expression(condition.map(str::to_owned))
                .build()
                .map(|put| TransactWriteItem::builder().put(put).build())
                .map_err(|e| HubError::Unavailable(format!("building a write: {e}")))
        };
        let written = self
            .client
            .transact_write_items()
            .transact_items(put(run, Some("attribute_not_exists(pk)"))?)
            .transact_items(put(
                Self::order_item(&call.remote_id, "run", &run_id, &order),
                None,
            )?)
            .send()
            .await;
        match written {
            Ok(_) => Ok(()),
            // Cancelled by the condition: this call's run is queued already.
            Err(_) if self.get(RUNS, &run_id).await?.is_some() => Ok(()),
            Err(err) => Err(unavailable("queueing a run", &err)),
        }
    }

    /// Answers the runs whose remote went away or that never reported, and forgets remotes
    /// offline for [`FORGET_AFTER`]. Returns how many runs it answered.
    pub async fn sweep(&self) -> Result<usize, HubError> {
        *self
            .last_sweep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Instant::now());
        let now = now_ms();
        let remotes: HashMap<String, Item> = self
            .query(REMOTES)
            .await?
            .into_iter()
            .map(|item| (text(&item, "sk").to_owned(), item))
            .collect();
        let mut answered = 0;
        for run in self.query(RUNS).await? {
            let remote_online = remotes
                .get(text(&run, "remote"))
                .is_some_and(|r| online(r, now));
            let due = number(&run, "started")
                + number(&run, "timeout").saturating_mul(1000)
                + millis(REPORT_GRACE);
            let ending = match (remote_online, now > due) {
                (false, _) => Ending::Disconnected,
                (true, true) => Ending::Unreported,
                (true, false) => continue,
            };
            let run_id = text(&run, "sk");
            let Some((thread, call)) = call_of(&run) else {
                tracing::error!(run = run_id, "a remote run's item names no thread; dropped");
                self.delete(RUNS, run_id).await?;
                continue;
            };
            tracing::info!(run = run_id, thread = %thread, ?ending, "a remote run ended without a report");
            self.send(&result_input(&thread, &call, ended(Some(run_id), ending)))
                .await?;
            self.delete(RUNS, run_id).await?;
            answered += 1;
        }
        for (id, remote) in &remotes {
            let last = number(remote, "seen").max(number(remote, "until"));
            if !online(remote, now) && now > last + millis(FORGET_AFTER) {
                for order in self.query(&format!("{REMOTES}#{id}")).await? {
                    self.delete(text(&order, "pk"), text(&order, "sk")).await?;
                }
                self.delete(REMOTES, id).await?;
            }
        }
        Ok(answered)
    }

    async fn sweep_if_due(&self) {
        let due = self
            .last_sweep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_none_or(|at| at.elapsed() >= SWEEP_EVERY);
        if due {
            if let Err(err) = self.sweep().await {
                tracing::warn!(%err, "the remotes' runs could not be swept");
            }
        }
    }

    /// Marks the remote as polling until `until` (ms); `NotFound` once it is gone.
    async fn mark(&self, id: &str, until: i64) -> Result<(), HubError> {
        let marked = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(REMOTES))
            .key("sk", s(id))
            .update_expression("SET seen = :now, #until = :until, #ttl = :ttl")
            .condition_expression("attribute_exists(pk) AND gone = :no")
            .expression_attribute_names("#until", "until")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":now", n(now_ms()))
            .expression_attribute_values(":until", n(until))
            .expression_attribute_values(":ttl", ttl(FORGET_AFTER * 2))
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .send()
            .await;
        match marked {
            Ok(_) => Ok(()),
            Err(err) if is_condition_failure(&err) => Err(HubError::NotFound(format!(
                "no remote {id} is connected (connect again)"
            ))),
            Err(err) => Err(unavailable("marking a remote's poll", &err)),
        }
    }

    /// Takes the remote's waiting orders, oldest first.
    async fn take_orders(&self, id: &str) -> Result<Vec<Order>, HubError> {
        let mut items = self.query(&format!("{REMOTES}#{id}")).await?;
        items.sort_by(|a, b| text(a, "sk").cmp(text(b, "sk")));
        let mut orders = Vec::with_capacity(items.len());
        for item in items {
            let taken = self
                .client
                .delete_item()
                .table_name(&self.table)
                .key("pk", s(text(&item, "pk")))
                .key("sk", s(text(&item, "sk")))
                .condition_expression("attribute_exists(pk)")
                .send()
                .await;
            match taken {
                Ok(_) => {}
                // Another poll of the same remote took it.
                Err(err) if is_condition_failure(&err) => continue,
                Err(err) => return Err(unavailable("taking an order", &err)),
            }
            match serde_json::from_str(text(&item, "body")) {
                Ok(order) => orders.push(order),
                Err(err) => tracing::error!(remote = id, %err, "an unreadable order was dropped"),
            }
        }
        Ok(orders)
    }
}

#[async_trait]
impl RemoteDirectory for TableRemotes {
    async fn remotes(&self) -> Result<Vec<RemoteInfo>, HubError> {
        let now = now_ms();
        Ok(self
            .query(REMOTES)
            .await?
            .iter()
            .map(|item| info(item, now))
            .collect())
    }
}

#[async_trait]
impl RemoteHub for TableRemotes {
    async fn connect(&self, name: &str, exec: bool) -> Result<String, HubError> {
        let id = format!("rm-{}", uuid::Uuid::new_v4().simple());
        let now = now_ms();
        self.client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(REMOTES))
            .item("sk", s(&id))
            .item("name", s(name))
            .item("exec", AttributeValue::Bool(exec))
            .item("gone", AttributeValue::Bool(false))
            .item("seen", n(now))
            .item("until", n(now))
            .item("ttl", ttl(FORGET_AFTER * 2))
            .send()
            .await
            .map_err(|e| unavailable("connecting a remote", &e))?;
        tracing::info!(remote = %id, name, exec, "remote connected");
        Ok(id)
    }

    async fn poll(&self, id: &str, wait: Duration) -> Result<Vec<Order>, HubError> {
        let started = Instant::now();
        self.mark(id, now_ms() + millis(wait)).await?;
        self.sweep_if_due().await;
        let orders = loop {
            let orders = self.take_orders(id).await?;
            if !orders.is_empty() || started.elapsed() + POLL_EVERY > wait {
                break orders;
            }
            tokio::time::sleep(POLL_EVERY).await;
        };
        // The poll ends now (a remote that polls again stays online in between).
        self.mark(id, now_ms()).await?;
        Ok(orders)
    }

    async fn disconnect(&self, id: &str) -> Result<(), HubError> {
        let gone = self
            .client
            .update_item()
            .table_name(&self.table)
            .key("pk", s(REMOTES))
            .key("sk", s(id))
            .update_expression("SET gone = :yes")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .send()
            .await;
        match gone {
            Ok(_) => {}
            Err(err) if is_condition_failure(&err) => {
                return Err(HubError::NotFound(format!("no remote {id}")))
            }
            Err(err) => return Err(unavailable("disconnecting a remote", &err)),
        }
        self.sweep().await.map(|_| ())
    }

    async fn report(&self, remote: &str, run_id: &str, report: Report) -> Result<(), HubError> {
        let run = self
            .get(RUNS, run_id)
            .await?
            .filter(|run| text(run, "remote") == remote)
            .ok_or_else(|| {
                HubError::NotFound(format!("the remote {remote} has no run {run_id} in flight"))
            })?;
        let Some((thread, call)) = call_of(&run) else {
            self.delete(RUNS, run_id).await?;
            return Err(HubError::NotFound(format!(
                "the run {run_id} names no thread"
            )));
        };
        self.send(&result_input(&thread, &call, reported(run_id, &report)))
            .await?;
        self.delete(RUNS, run_id).await
    }

    async fn approve(&self, token: &str, selected: usize) -> Result<(), HubError> {
        let item = self.get(APPROVALS, token).await?.ok_or_else(|| {
            HubError::NotFound(
                "no approval is waiting at this address (answered already, or withdrawn)"
                    .to_owned(),
            )
        })?;
        let call: ExecCall = serde_json::from_str(text(&item, "body"))
            .map_err(|e| HubError::NotFound(format!("the approval {token} cannot be read: {e}")))?;
        if selected == 0 {
            let remote = self.get(REMOTES, &call.remote_id).await?;
            self.queue_run(&call, remote.as_ref()).await?;
        } else {
            let text = ended(None, Ending::Declined);
            self.send(&result_input(&call.thread, &call.call, text))
                .await?;
        }
        // Deleted last: an answer that fails half way can be given again.
        self.delete(APPROVALS, token).await
    }

    async fn dispatch(&self, call: ExecCall) -> Result<(), HubError> {
        let Some(remote) = self.get(REMOTES, &call.remote_id).await? else {
            return Err(HubError::NotFound(format!(
                "the remote {} is not connected any more",
                call.remote_id
            )));
        };
        if call.approved {
            return self.queue_run(&call, Some(&remote)).await;
        }
        let Some(base) = &self.api_url else {
            return Err(HubError::NotFound(
                "nobody can approve the command: the stack has no API URL (INFINITY_API_URL) \
                 to take the answer"
                    .to_owned(),
            ));
        };
        let token = call_id("ap", &call.thread, &call.call);
        let body = serde_json::to_string(&call)
            .map_err(|e| HubError::Unavailable(format!("writing the question: {e}")))?;
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .item("pk", s(APPROVALS))
            .item("sk", s(&token))
            .item("thread", s(call.thread.as_str()))
            .item("call", s(call.call.as_str()))
            .item("body", s(body))
            .item("ttl", ttl(APPROVAL_KEPT))
            .condition_expression("attribute_not_exists(pk)")
            .send()
            .await;
        match put {
            // Put by an earlier attempt of the same dispatch: ask (again; the thread takes the
            // question once).
            Ok(_) => {}
            Err(err) if is_condition_failure(&err) => {}
            Err(err) => return Err(unavailable("storing a question", &err)),
        }
        let url = format!("{}/remotes/approvals/{token}", base.trim_end_matches('/'));
        self.send(&call.question(url)).await
    }

    async fn cancel(&self, thread: &ThreadId, call: &CallId) {
        let mine = |item: &Item| {
            text(item, "thread") == thread.as_str() && text(item, "call") == call.as_str()
        };
        let cancelled = async {
            for approval in self.query(APPROVALS).await? {
                if mine(&approval) {
                    self.delete(APPROVALS, text(&approval, "sk")).await?;
                }
            }
            for run in self.query(RUNS).await?.iter().filter(|run| mine(run)) {
                let run_id = text(run, "sk");
                let remote = text(run, "remote");
                let order = Order::Kill {
                    run_id: run_id.to_owned(),
                };
                self.client
                    .put_item()
                    .table_name(&self.table)
                    .set_item(Some(Self::order_item(remote, "kill", run_id, &order)))
                    .send()
                    .await
                    .map_err(|e| unavailable("queueing a kill", &e))?;
            }
            Ok::<_, HubError>(())
        };
        if let Err(err) = cancelled.await {
            tracing::warn!(thread = %thread, call = %call, %err, "a remote call could not be stopped");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_come_from_the_call_and_differ_between_threads() {
        let thread = |t: &str| ThreadId::new(t).unwrap();
        let call = CallId::new("call-1").unwrap();
        let a = call_id("run", &thread("a"), &call);
        assert_eq!(
            a,
            call_id("run", &thread("a"), &call),
            "the same call, the same run"
        );
        assert_ne!(a, call_id("run", &thread("b"), &call));
        assert!(a.starts_with("run-") && a.len() == 36, "{a}");
    }

    #[test]
    fn a_remote_is_online_until_ten_seconds_after_its_poll() {
        let item = |seen: i64, until: i64, gone: bool| -> Item {
            HashMap::from([
                ("seen".to_owned(), n(seen)),
                ("until".to_owned(), n(until)),
                ("gone".to_owned(), AttributeValue::Bool(gone)),
            ])
        };
        let now = 100_000;
        assert!(online(&item(now - 5_000, now - 5_000, false), now));
        assert!(
            online(&item(now - 30_000, now + 10_000, false), now),
            "a poll is open"
        );
        assert!(!online(&item(now - 11_000, now - 11_000, false), now));
        assert!(
            !online(&item(now, now + 20_000, true), now),
            "it said goodbye"
        );
    }
}
