//! `infinity run`: one message to an agent, then run until its threads are idle or closed, or
//! the timeout ends it.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use infinity_agent_core::cost::{Budget, Usd};
use infinity_agent_core::effect::OutputKind;
use infinity_agent_core::ids::ThreadId;
use infinity_agent_core::runtime::{AgentSystem, Front, WaitOutcome};
use infinity_agent_core::state::{FinishStatus, ThreadStatus};

use crate::render::Renderer;
use crate::{build_system_with_receiver, AgentArgs, StoreAccess, USAGE_ERROR};

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    agent: AgentArgs,
    /// The thread to send to (default: a new thread).
    #[arg(long)]
    thread: Option<String>,
    /// Print one JSON object per line instead of a transcript.
    #[arg(long)]
    json: bool,
    /// Give up after this many seconds. A slice that would still be asking the model then
    /// commits what it has before, and the thread goes on at the next start (with --store).
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// With tool servers: once nothing is running or owed, keep taking their callbacks (a view
    /// update after a result) for this many seconds before exiting.
    #[arg(long, default_value_t = 2.0)]
    grace: f64,
    /// Before the message, move the thread (--thread, one that exists) to the version of its
    /// agent that --agent names: NAME (the newest stored one) or NAME@VERSION.
    #[arg(long, requires = "thread")]
    move_to_agent: bool,
    /// Before the message, set the lifetime budget of the thread's conversation (--thread, one
    /// that exists) to this many dollars: a conversation stopped at its budget goes on
    /// (docs/cost.md).
    #[arg(long, requires = "thread", value_name = "DOLLARS")]
    budget_usd: Option<f64>,
    /// The same, in tokens.
    #[arg(long, requires = "thread", value_name = "TOKENS")]
    budget_tokens: Option<u64>,
    /// The message.
    message: String,
}

pub(crate) async fn run(mut args: RunArgs) -> Result<u8> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(args.timeout);
    args.agent.deadline = Some(deadline);
    let (system, links) = build_system_with_receiver(&args.agent, StoreAccess::Wait).await?;
    // The grace is for tool servers' late callbacks; a receiver kept only for forwarded inputs
    // (every run with --store has one) waits for nothing.
    let receives = links.as_ref().is_some_and(|l| l.tool_servers);
    if !(0.0..=600.0).contains(&args.grace) {
        eprintln!("error: --grace must be between 0 and 600 seconds");
        return Ok(USAGE_ERROR);
    }
    let thread = match &args.thread {
        Some(t) => ThreadId::new(t.as_str())?,
        None => ThreadId::generate(),
    };
    let mut events = system.subscribe();
    let mut renderer = Renderer::new(args.json);
    let mut output = None;
    let mut show = |renderer: &mut Renderer, event: &infinity_agent_core::effect::OutputEvent| {
        if let OutputKind::Finished { status, result } = &event.kind {
            if event.thread_id == thread {
                output = Some((*status, result.clone(), event.at));
            }
        }
        renderer.show(event);
    };
    if args.move_to_agent {
        let target = args.agent.agent.to_string_lossy();
        system.use_agent(&thread, &target).await?;
    }
    let usage_before = store_usage(&system).await;
    if args.budget_usd.is_some() || args.budget_tokens.is_some() {
        let usd = match args.budget_usd {
            Some(usd) => Some(Usd::from_dollars(usd).ok_or_else(|| {
                anyhow::anyhow!("--budget-usd {usd} is not an amount of dollars")
            })?),
            None => None,
        };
        let budget = Budget {
            usd,
            tokens: args.budget_tokens,
        };
        let (_, root) = system.set_budget(&thread, budget).await?;
        eprintln!("note: set the budget of conversation {root}");
    }
    system
        .post_user_message(&thread, args.message.clone())
        .await?;
    let mut graced = !receives;
    let mut answered = std::collections::HashSet::new();
    // Idle is not done while the thread tree is owed tool results or subscription events:
    // those arrive through the callback receiver, so keep waiting for them until the deadline.
    let (outcome, owed) = loop {
        let wait = system.wait_idle(Some(deadline));
        tokio::pin!(wait);
        let outcome = loop {
            tokio::select! {
                outcome = &mut wait => break outcome,
                Some(event) = events.recv() => show(&mut renderer, &event),
            }
        };
        let WaitOutcome::Idle { next_timer } = outcome else {
            break (outcome, Owed::default());
        };
        let owed = owed(&system, &thread).await;
        // Nobody can answer a tool's question under `run`: it gets its default now, so the
        // call can go on (an approval's default declines the call, whatever its deadline would).
        let mut answered_now = false;
        for (thread_id, choice) in &owed.questions {
            if !answered.insert(choice.call_id.clone()) {
                continue; // tried once; a failure was reported
            }
            let post = infinity_agent_core::runtime::poster(&system);
            let answered = infinity_rap_runtime::client::answer_question(
                system.store().as_ref(),
                &post,
                thread_id,
                Some(choice.call_id.as_str()),
                infinity_rap_runtime::client::Pick::Unattended,
                Front::now(&system),
            )
            .await;
            match answered {
                Ok(chosen) => {
                    answered_now = true;
                    eprintln!(
                        "note: answered the question of call {} with its default, {}) {} \
                         (nobody can answer under `infinity run`; use `infinity chat` to choose)",
                        choice.call_id,
                        chosen.selected,
                        chosen.choice()
                    );
                }
                Err(err) => eprintln!(
                    "warning: the question of call {} could not be answered: {err}",
                    choice.call_id
                ),
            }
        }
        // Nor does any application run a client tool: its call gets an error result now.
        for (thread_id, call) in &owed.client_calls {
            if !answered.insert(call.call_id.clone()) {
                continue;
            }
            let text = format!(
                "No result: `{}` is a client tool, which the application that talks to the agent \
                 runs, and nothing runs client tools under `infinity run`. Tell the user.",
                call.tool
            );
            let input =
                infinity_agent_core::runtime::client_result(thread_id, &call.call_id, text, true);
            eprintln!(
                "note: call {} of the client tool `{}` got an error result (nothing runs client \
                 tools under `infinity run`; an application answers them through `infinity \
                 serve`, or a person with /result in `infinity chat`)",
                call.call_id, call.tool
            );
            match system.accept(input).await {
                Ok(_) => answered_now = true,
                Err(err) => eprintln!(
                    "warning: the result of call {} was not kept: {err}",
                    call.call_id
                ),
            }
        }
        if answered_now {
            continue;
        }
        if next_timer.is_some() {
            let sleeping = Owed {
                sleeps: owed.sleeps,
                ..Owed::default()
            };
            break (outcome, sleeping);
        }
        let now = tokio::time::Instant::now();
        if owed.is_empty() && !graced && now < deadline {
            // A tool server may still send a callback that belongs to what it just finished.
            graced = true;
            let until = deadline.min(now + Duration::from_secs_f64(args.grace));
            loop {
                tokio::select! {
                    Some(event) = events.recv() => show(&mut renderer, &event),
                    _ = tokio::time::sleep_until(until) => break,
                }
            }
            continue;
        }
        if owed.is_empty() || now >= deadline {
            break (outcome, owed);
        }
        tokio::select! {
            Some(event) = events.recv() => show(&mut renderer, &event),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    };
    while let Ok(event) = events.try_recv() {
        show(&mut renderer, &event);
    }
    print_usage(&system, &usage_before).await;
    // The thread's `finish` output comes last, and decides the exit status.
    if let Some((status, result, output_at)) = &output {
        if args.json {
            crate::out!(
                "{}",
                serde_json::json!({"type": "output", "thread_id": thread, "at": output_at, "status": status, "result": result})
            );
        } else {
            crate::out!("output: {}", serde_json::to_string_pretty(result)?);
        }
    }
    let stopped = system.out_of_time();
    if !stopped.is_empty() {
        let what: Vec<String> = stopped
            .iter()
            .map(|(thread, inputs)| format!("thread {thread} ({} input(s) waiting)", inputs.len()))
            .collect();
        eprintln!(
            "timed out after {}s with work still running: {}; {}",
            args.timeout,
            what.join(", "),
            match &args.agent.store {
                Some(dir) => format!(
                    "they are saved in the store, and the next run with --store {} goes on \
                     from there",
                    dir.display()
                ),
                None => "they are lost (no --store)".to_owned(),
            }
        );
        return Ok(2);
    }
    match outcome {
        WaitOutcome::TimedOut => {
            eprintln!(
                "error: timed out after {}s with work still running or due; the threads are {}",
                args.timeout,
                if args.agent.store.is_some() {
                    "saved in the store"
                } else {
                    "lost (no --store)"
                }
            );
            Ok(2)
        }
        WaitOutcome::Idle { .. } if !owed.calls.is_empty() => {
            eprintln!(
                "error: timed out after {}s waiting for tool results: {}",
                args.timeout,
                owed.calls.join("; ")
            );
            Ok(2)
        }
        WaitOutcome::Idle { next_timer } => {
            if !owed.subscriptions.is_empty() {
                eprintln!(
                    "note: stopping after {}s with subscriptions still active: {}",
                    args.timeout,
                    owed.subscriptions.join("; ")
                );
            }
            // (A timer that only ends a call already answered, a deadline's, is no sleep.)
            if let Some(due) = next_timer.filter(|_| owed.sleeps) {
                eprintln!(
                    "note: a thread sleeps until {due}, after the {}s timeout; stopping here",
                    args.timeout
                );
            }
            if renderer.errors() > 0 {
                eprintln!("error: the run recorded {} error(s)", renderer.errors());
                return Ok(1);
            }
            Ok(match output.map(|(status, _, _)| status) {
                Some(FinishStatus::Failed) => 1,
                Some(FinishStatus::Cancelled) => 3,
                Some(FinishStatus::Succeeded) | None => 0,
            })
        }
    }
}

/// What a thread tree is still owed by tool servers.
#[derive(Debug, Default)]
struct Owed {
    /// Dispatched calls without their result, as `call ID (tool) in thread T`.
    calls: Vec<String>,
    /// Active subscriptions, the same way.
    subscriptions: Vec<String>,
    /// Tools' questions nobody has answered yet (approvals among them).
    questions: Vec<(ThreadId, infinity_agent_core::state::OpenChoice)>,
    /// True when a thread sleeps with a timer, or has a recurring schedule.
    sleeps: bool,
    /// Calls of client tools, which nothing under `run` answers.
    client_calls: Vec<(ThreadId, infinity_agent_core::state::PendingCall)>,
}

impl Owed {
    fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.subscriptions.is_empty()
    }
}

/// Walks the open threads from `root` down (children, not closed ones) and collects what they
/// still wait for.
async fn owed(system: &AgentSystem, root: &ThreadId) -> Owed {
    let mut owed = Owed::default();
    let mut queue = vec![root.clone()];
    while let Some(id) = queue.pop() {
        let Ok(Some(record)) = system.record(&id).await else {
            continue;
        };
        if record.status == ThreadStatus::Closed {
            continue;
        }
        owed.sleeps |= !record.schedules.is_empty();
        for call in &record.pending_calls {
            owed.sleeps |=
                call.kind == infinity_agent_core::state::PendingKind::Passive && call.due.is_some();
            if call.client.is_some() {
                owed.client_calls.push((record.id.clone(), call.clone()));
            }
            if call.kind == infinity_agent_core::state::PendingKind::Dispatched {
                owed.calls.push(format!(
                    "call {} ({}) in thread {id}",
                    call.call_id, call.tool
                ));
            }
        }
        owed.questions.extend(
            record
                .open_choices
                .iter()
                .map(|c| (record.id.clone(), c.clone())),
        );
        for sub in &record.subscriptions {
            owed.subscriptions.push(format!(
                "call {} ({}) in thread {id}",
                sub.call_id, sub.tool
            ));
        }
        queue.extend(
            record
                .children
                .iter()
                .filter(|c| !c.closed)
                .map(|c| c.thread_id.clone()),
        );
    }
    owed
}

/// The usage recorded on every thread of the store.
async fn store_usage(system: &AgentSystem) -> infinity_agent_core::model::Usage {
    let mut total = infinity_agent_core::model::Usage::default();
    let Ok(ids) = system.store().thread_ids().await else {
        return total;
    };
    for id in ids {
        if let Ok(Some(record)) = system.record(&id).await {
            total.add(&record.usage);
        }
    }
    total
}

/// What this run used (the store's usage now, less what it had recorded before), on stderr.
async fn print_usage(system: &AgentSystem, before: &infinity_agent_core::model::Usage) {
    let run = store_usage(system).await.since(before);
    eprintln!(
        "usage: {} completions, {} input tokens ({} read from cache, {} written to cache), {} \
         output tokens, cost {} (this run)",
        run.completions,
        run.input_tokens + run.cache_read_tokens + run.cache_write_tokens,
        run.cache_read_tokens,
        run.cache_write_tokens,
        run.output_tokens,
        run.cost_text(),
    );
}
