//! `infinity status THREAD`: what would wake a thread and each open thread below it, on a store
//! folder or an AWS (or local) stack, with the threads that wait on nothing that can wake them
//! flagged as stuck (`infinity_agent_core::state::waits`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use infinity_agent_core::history::person_time;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::state::waits::Waits;
use infinity_agent_core::store::{waiting, FileStore, ThreadStore};
use infinity_agent_core::text::visible;
use infinity_aws::config::Clients;
use infinity_aws::store::DynamoThreadStore;

use crate::aws::{setting, Endpoint};

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// The thread (its tree below it is shown too).
    thread: String,
    /// A store folder (`run`, `chat`, `serve` with --store); without it, an AWS (or local)
    /// stack's table ($INFINITY_TABLE, or --table).
    #[arg(long, conflicts_with = "table")]
    store: Option<PathBuf>,
    /// The stack's table (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
    #[command(flatten)]
    endpoint: Endpoint,
    /// Print the threads as JSON (the same as `GET /threads/{id}/waiting`).
    #[arg(long)]
    json: bool,
}

/// Exit status: 0, or 1 when a thread of the tree is stuck.
pub(crate) async fn status(args: StatusArgs) -> Result<u8> {
    let id = ThreadId::new(&args.thread).map_err(|e| anyhow::anyhow!("{e}"))?;
    let store: Box<dyn ThreadStore> = match &args.store {
        // Read-only: it works while another process runs the store.
        Some(dir) => Box::new(FileStore::open_read_only(dir)?),
        None => {
            let table = setting(args.table, "INFINITY_TABLE", "store folder or table")?;
            let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
            Box::new(DynamoThreadStore::new(
                clients.dynamodb,
                table,
                Duration::from_secs(86_400),
            ))
        }
    };
    let Some(threads) = waiting(store.as_ref(), &id).await? else {
        anyhow::bail!("no thread {id}");
    };
    let stuck = threads.iter().any(|t| t.stuck.is_some());
    if args.json {
        crate::out!("{}", serde_json::to_string_pretty(&threads)?);
    } else {
        let now = jiff::Timestamp::now();
        for waits in &threads {
            for line in describe(waits, now) {
                crate::out!("{line}");
            }
        }
    }
    Ok(u8::from(stuck))
}

/// How long ago or ahead `t` is from `now`, in the largest whole unit.
fn span(now: jiff::Timestamp, t: jiff::Timestamp) -> String {
    let seconds = (t.as_second() - now.as_second()).unsigned_abs();
    let amount = match seconds {
        0..=119 => format!("{seconds} s"),
        120..=7_199 => format!("{} min", seconds / 60),
        7_200..=172_799 => format!("{} h", seconds / 3_600),
        _ => format!("{} days", seconds / 86_400),
    };
    if t >= now {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// One thread's waits as lines: a heading, then one line per thing that would wake it.
fn describe(waits: &Waits, now: jiff::Timestamp) -> Vec<String> {
    let heading = format!("{} (agent {})", waits.thread_id, visible(&waits.agent));
    if waits.closed {
        return vec![format!("{heading}: closed")];
    }
    let mut lines = Vec::new();
    for timer in &waits.timers {
        let how = if timer.moved_on {
            ", the conversation went on without it"
        } else {
            ""
        };
        lines.push(format!(
            "  timer   {} fires {} ({}{how})",
            timer.tool,
            person_time(timer.due),
            span(now, timer.due)
        ));
    }
    for call in &waits.calls {
        let how = if call.approval {
            ", waiting for a person's approval to run"
        } else if call.authorizing {
            ", waiting for a person to authorize it"
        } else if call.moved_on {
            ", the conversation went on without it"
        } else if call.client {
            ", waiting for the application that runs it"
        } else {
            ""
        };
        lines.push(format!(
            "  call    {} since {} ({}{how})",
            visible(&call.tool),
            person_time(call.since),
            span(now, call.since)
        ));
    }
    for subscription in &waits.subscriptions {
        lines.push(format!(
            "  events  from {} ({})",
            visible(&subscription.tool),
            subscription.call_id
        ));
    }
    for question in &waits.questions {
        lines.push(format!(
            "  person  to answer: {} ({})",
            visible(&crate::render::one_line(&question.prompt, 80)),
            question.call_id
        ));
    }
    for child in &waits.children {
        lines.push(format!("  child   {child} still running"));
    }
    for schedule in &waits.schedules {
        lines.push(format!("  schedule {schedule}"));
    }
    if let Some(reason) = &waits.paused {
        let resume = match waits.budget {
            true => "raising the budget goes on (`infinity budget`)",
            false => "a person's message goes on",
        };
        lines.push(format!("  paused  {}: {resume}", visible(reason)));
    }
    if waits.outbox > 0 {
        lines.push(format!(
            "  outbox  {} effect(s) still to perform",
            waits.outbox
        ));
    }
    if waits.queued > 0 {
        lines.push(format!(
            "  queued  {} message(s), answered when the turn ends",
            waits.queued
        ));
    }
    let summary = match (&waits.stuck, lines.is_empty()) {
        (Some(why), _) => format!("{heading}: STUCK: {why}"),
        (None, true) => format!("{heading}: idle, waiting for a message"),
        (None, false) => format!("{heading}: waits on"),
    };
    // (A note, not something it waits on.)
    let note = waits
        .unpriced
        .as_ref()
        .map(|unpriced| format!("  note    {}", visible(unpriced)));
    std::iter::once(summary).chain(lines).chain(note).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_in_the_largest_whole_unit() {
        let now: jiff::Timestamp = "2026-12-03T12:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        assert_eq!(span(now, at("2026-12-03T12:00:30Z")), "in 30 s");
        assert_eq!(span(now, at("2026-12-03T11:50:00Z")), "10 min ago");
        assert_eq!(span(now, at("2026-12-03T15:00:00Z")), "in 3 h");
        assert_eq!(span(now, at("2026-12-10T12:00:00Z")), "in 7 days");
    }
}
