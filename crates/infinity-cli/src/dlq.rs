//! `infinity dlq list|show|redrive|drop`: a stack's dead-letter queues (the input queue's, or the
//! relay queue's with `--relay`), each message with why it failed, sent back once the cause is
//! fixed, or dropped (see `infinity_aws::dlq`).

use anyhow::{anyhow, Result};
use clap::{Args, Subcommand};
use infinity_agent_core::text::visible;
use infinity_aws::config::Clients;
use infinity_aws::dlq::{DeadLetter, DeadLetters, FailureNote, FailureNotes};

use crate::aws::{setting, Endpoint};

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// The messages in the dead-letter queue, each with its thread and why it failed.
    List(Queue),
    /// One message: its thread, when it was sent, why it failed (on which delivery), its body.
    Show(ShowArgs),
    /// Send messages back to the queue they failed on (their threads get them again) and remove
    /// them from the dead-letter queue.
    Redrive(RedriveArgs),
    /// Delete messages from the dead-letter queue for good.
    Drop(DropArgs),
}

#[derive(Debug, Args)]
pub struct Queue {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The relay queue's dead-letter queue (timers), not the input queue's.
    #[arg(long)]
    relay: bool,
    /// The queue whose dead-letter queue to read (default: $INFINITY_INPUT_QUEUE_URL, or
    /// $INFINITY_RELAY_QUEUE_URL with --relay).
    #[arg(long)]
    queue_url: Option<String>,
    /// The table with the failure notes (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    queue: Queue,
    /// The message id (as `infinity dlq list` prints it).
    message: String,
}

#[derive(Debug, Args)]
pub struct RedriveArgs {
    #[command(flatten)]
    queue: Queue,
    /// The message ids to send back.
    #[arg(required_unless_present = "all")]
    messages: Vec<String>,
    /// Every message in the dead-letter queue.
    #[arg(long, conflicts_with = "messages")]
    all: bool,
}

#[derive(Debug, Args)]
pub struct DropArgs {
    #[command(flatten)]
    queue: Queue,
    /// The message ids to delete.
    #[arg(required = true)]
    messages: Vec<String>,
}

pub async fn run(command: DlqCommand) -> Result<u8> {
    match command {
        DlqCommand::List(queue) => list(queue).await,
        DlqCommand::Show(args) => show(args).await,
        DlqCommand::Redrive(args) => redrive(args).await,
        DlqCommand::Drop(args) => drop_messages(args).await,
    }
}

struct Opened {
    dead: DeadLetters,
    notes: FailureNotes,
}

async fn open(queue: Queue) -> Result<Opened> {
    let source = if queue.relay {
        setting(
            queue.queue_url,
            "INFINITY_RELAY_QUEUE_URL",
            "relay queue URL",
        )?
    } else {
        setting(
            queue.queue_url,
            "INFINITY_INPUT_QUEUE_URL",
            "input queue URL",
        )?
    };
    let table = setting(queue.table, "INFINITY_TABLE", "table")?;
    let clients = Clients::from_env_with_endpoint(queue.endpoint.endpoint.as_deref()).await;
    let dead = DeadLetters::of(clients.sqs.clone(), &source)
        .await
        .map_err(|e| anyhow!(e))?;
    Ok(Opened {
        dead,
        notes: FailureNotes::new(clients.dynamodb, table),
    })
}

/// A message's thread: its group, or the thread its body names.
fn thread_of(message: &DeadLetter, note: Option<&FailureNote>) -> String {
    message
        .group
        .clone()
        .or_else(|| note.and_then(|n| n.thread.clone()))
        .or_else(|| {
            let body: serde_json::Value = serde_json::from_str(&message.body).ok()?;
            let thread = body
                .get("thread_id")
                .or_else(|| body.pointer("/input/thread_id"))
                .or_else(|| body.pointer("/stored_input/thread_id"))?;
            thread.as_str().map(str::to_owned)
        })
        .unwrap_or_else(|| "?".to_owned())
}

fn reason_of(note: Option<&FailureNote>, message_id: &str) -> String {
    match note {
        Some(note) => format!(
            "{} (delivery {}, {})",
            visible(&note.reason),
            note.receive_count,
            note.at.strftime("%Y-%m-%d %H:%M:%S")
        ),
        None => format!(
            "no note of why (it could not be written); search the function's log for {message_id}"
        ),
    }
}

async fn list(queue: Queue) -> Result<u8> {
    let Opened { dead, notes } = open(queue).await?;
    let messages = dead.list(1_000).await.map_err(|e| anyhow!(e))?;
    if messages.is_empty() {
        println!("{} is empty", dead.url);
        return Ok(0);
    }
    println!("{}: {} message(s)", dead.url, messages.len());
    for message in &messages {
        let note = notes
            .read(&message.message_id)
            .await
            .map_err(|e| anyhow!(e))?;
        let sent = message.sent_at.map_or_else(
            || "?".to_owned(),
            |t| t.strftime("%Y-%m-%d %H:%M:%S").to_string(),
        );
        println!(
            "{}  thread {}  sent {sent}\n    {}",
            message.message_id,
            visible(&thread_of(message, note.as_ref())),
            reason_of(note.as_ref(), &message.message_id)
        );
    }
    Ok(0)
}

async fn show(args: ShowArgs) -> Result<u8> {
    let Opened { dead, notes } = open(args.queue).await?;
    let messages = dead.list(usize::MAX).await.map_err(|e| anyhow!(e))?;
    let Some(message) = messages.iter().find(|m| m.message_id == args.message) else {
        eprintln!(
            "error: no message {} in {} ({} there; `infinity dlq list` names them)",
            args.message,
            dead.url,
            messages.len()
        );
        return Ok(1);
    };
    let note = notes
        .read(&message.message_id)
        .await
        .map_err(|e| anyhow!(e))?;
    println!("message   {}", message.message_id);
    println!("queue     {} (sent back to {})", dead.url, dead.source_url);
    println!("thread    {}", visible(&thread_of(message, note.as_ref())));
    if let Some(sent) = message.sent_at {
        println!("sent      {}", sent.strftime("%Y-%m-%d %H:%M:%S UTC"));
    }
    println!(
        "failed    {}",
        reason_of(note.as_ref(), &message.message_id)
    );
    let body = serde_json::from_str::<serde_json::Value>(&message.body)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| message.body.clone());
    println!("body\n{}", visible(&body));
    Ok(0)
}

/// Prints each outcome; 0 when every named message was found and handled.
fn report(verb: &str, wanted: Option<&[String]>, done: &[(String, Result<(), String>)]) -> u8 {
    let mut code = 0;
    for (id, result) in done {
        match result {
            Ok(()) => println!("{verb} {id}"),
            Err(why) => {
                eprintln!("error: {id}: {why}");
                code = 1;
            }
        }
    }
    for id in wanted.unwrap_or_default() {
        if !done.iter().any(|(d, _)| d == id) {
            eprintln!("error: no message {id} in the dead-letter queue");
            code = 1;
        }
    }
    if done.is_empty() && wanted.is_none() {
        println!("nothing to send back: the dead-letter queue is empty");
    }
    code
}

async fn redrive(args: RedriveArgs) -> Result<u8> {
    let Opened { dead, .. } = open(args.queue).await?;
    let wanted = (!args.all).then_some(args.messages.as_slice());
    let done = dead.redrive(wanted).await.map_err(|e| anyhow!(e))?;
    Ok(report("sent back", wanted, &done))
}

async fn drop_messages(args: DropArgs) -> Result<u8> {
    let Opened { dead, .. } = open(args.queue).await?;
    let done = dead
        .drop_messages(&args.messages)
        .await
        .map_err(|e| anyhow!(e))?;
    Ok(report("dropped", Some(&args.messages), &done))
}
