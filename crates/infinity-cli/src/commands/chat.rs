//! `infinity chat`: talk to an agent interactively.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystem, Front};
use tokio::io::AsyncBufReadExt;

use super::threads::print_threads;
use crate::render::Renderer;
use crate::{build_system, report, AgentArgs, StoreAccess};

#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The thread to talk to.
    #[arg(long, default_value = "chat")]
    thread: String,
}

pub(crate) async fn chat(args: ChatArgs) -> Result<u8> {
    let system = build_system(&args.agent, StoreAccess::FailFast).await?;
    let thread = ThreadId::new(args.thread.as_str())?;
    let mut events = system.subscribe();
    let printer = tokio::spawn(async move {
        let mut renderer = Renderer::new(false);
        while let Some(event) = events.recv().await {
            renderer.show(&event);
        }
    });
    if args.agent.store.is_some() {
        print_threads(system.store().as_ref()).await?;
    }
    eprintln!("Talking to thread {thread}. /threads lists threads, /choose [CALL] INDEX or /dismiss [CALL] answers a tool's question (or an approval), /result [CALL] TEXT or /error [CALL] TEXT answers a client tool's call, /interrupt cancels the calls in flight, /quit or Ctrl-C leaves (state is kept with --store).");
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        tokio::select! {
            line = lines.next_line() => {
                let Some(line) = line? else { break };
                let line = line.trim();
                match line {
                    "" => continue,
                    "/quit" | "/exit" => break,
                    "/threads" => print_threads(system.store().as_ref()).await?,
                    "/interrupt" => {
                        if let Err(err) = system.interrupt(&thread, false).await {
                            eprintln!("error: {err}");
                        }
                    }
                    command if command.starts_with("/choose") || command.starts_with("/dismiss") => {
                        if let Err(err) = chat_choose(&system, &thread, command).await {
                            eprintln!("error: {}", report(&err));
                        }
                    }
                    command if command.starts_with("/result ") || command.starts_with("/error ") => {
                        if let Err(err) = chat_result(&system, &thread, command).await {
                            eprintln!("error: {}", report(&err));
                        }
                    }
                    command if command.starts_with('/') => eprintln!(
                        "unknown command {command}: /threads, /choose [CALL] INDEX, /dismiss [CALL], \
                         /result [CALL] TEXT, /error [CALL] TEXT, /interrupt and /quit are known (a \
                         message that starts with / needs a space first)"
                    ),
                    text => {
                        if let Err(err) = system.post_user_message(&thread, text.to_owned()).await {
                            eprintln!("error: {err}");
                        }
                    }
                }
            }
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    // Let slices already running finish (and print) before leaving; timers stay in the store.
    let settle = tokio::time::Instant::now() + Duration::from_secs(5);
    system.wait_idle(Some(settle)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    printer.abort();
    Ok(0)
}

/// `/choose [CALL] INDEX` or `/dismiss [CALL]` in `infinity chat`.
async fn chat_choose(system: &AgentSystem, thread: &ThreadId, command: &str) -> Result<()> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let (call, index) = match words.as_slice() {
        ["/dismiss"] => (None, None),
        ["/dismiss", call] => (Some(*call), None),
        ["/choose", index] => (None, Some(index.parse::<usize>()?)),
        ["/choose", call, index] => (Some(*call), Some(index.parse::<usize>()?)),
        _ => bail!("usage: /choose [CALL] INDEX, or /dismiss [CALL]"),
    };
    let post = infinity_agent_core::runtime::poster(system);
    let chosen = infinity_rap_runtime::client::answer_question(
        system.store().as_ref(),
        &post,
        thread,
        call,
        index.into(),
        Front::now(system),
    )
    .await?;
    eprintln!("answered {}: {}", chosen.question.call_id, chosen.choice());
    Ok(())
}

/// `/result [CALL] TEXT` or `/error [CALL] TEXT` in `infinity chat`: a person answers a client
/// tool's call as its application would. `CALL` may be left out while one call waits.
async fn chat_result(system: &AgentSystem, thread: &ThreadId, command: &str) -> Result<()> {
    let (verb, rest) = command.split_once(' ').unwrap_or((command, ""));
    let record = system
        .record(thread)
        .await?
        .with_context(|| format!("thread {thread} does not exist yet"))?;
    let waiting: Vec<&str> = record
        .pending_calls
        .iter()
        .filter(|p| p.client.is_some())
        .map(|p| p.call_id.as_str())
        .collect();
    let rest = rest.trim_start();
    let (call, text) = match rest.split_once(' ') {
        Some((first, text)) if waiting.contains(&first) => (first, text.trim_start()),
        _ => match waiting.as_slice() {
            [only] => (*only, rest),
            [] => bail!("thread {thread} has no client tool's call waiting for a result"),
            many => bail!(
                "several client calls wait ({}): name one, /result CALL TEXT",
                many.join(", ")
            ),
        },
    };
    if text.trim().is_empty() {
        bail!("usage: {verb} [CALL] TEXT (the result, as the model reads it)");
    }
    let call = infinity_agent_core::ids::CallId::new(call)?;
    system
        .post_tool_result(thread, &call, text.to_owned(), verb == "/error")
        .await?;
    eprintln!("sent the result of call {call}");
    Ok(())
}
