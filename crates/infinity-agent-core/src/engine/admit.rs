//! Admission: which inputs a slice acts on, and the thread they act on.
//!
//! Inputs addressed to another thread, already processed by this one, or repeated within the
//! batch are dropped (exactly-once processing over at-least-once delivery). A thread that does
//! not exist is created by the first input that may create one: a user message (with the host's
//! default agent), a child seed, or a delegated task; inputs before it are dropped.

use std::collections::HashMap;
use std::sync::Arc;

use crate::ids::{InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::state::{Conversation, ThreadRecord};

use super::draft::{Draft, Equipment, History, Outbox};
use super::inputs::DropReason;
use super::{DroppedInput, SliceError, SliceRequest};

/// Notes an input as dropped, with why.
pub(super) fn drop_input(
    dropped: &mut Vec<DroppedInput>,
    thread_id: &ThreadId,
    input: &Input,
    reason: DropReason,
) {
    tracing::info!(thread = %thread_id, input = %input.id, kind = input.body.kind(), %reason, "input dropped");
    dropped.push(DroppedInput {
        input_id: input.id.clone(),
        kind: input.body.kind(),
        reason,
    });
}

/// What the slice acts on: the draft to apply the fresh inputs to, with those inputs.
pub(super) fn admit<'a>(
    request: SliceRequest<'a>,
    dropped: &mut Vec<DroppedInput>,
) -> Result<Admitted<'a>, SliceError> {
    let SliceRequest {
        thread_id,
        record,
        view,
        view_start,
        inputs,
        already_processed,
        overruled,
        agents,
        default_agent,
        now,
        ids,
        conversation,
        discovered_toolset,
        live_output,
        library,
    } = request;

    let mut seen = already_processed;
    let mut fresh = Vec::with_capacity(inputs.len());
    for input in inputs {
        if input.thread_id != thread_id {
            let to = input.thread_id.clone();
            drop_input(dropped, &thread_id, &input, DropReason::OtherThread(to));
        } else if !seen.insert(input.id.clone()) {
            drop_input(dropped, &thread_id, &input, DropReason::AlreadyProcessed);
        } else {
            fresh.push(input);
        }
    }
    if fresh.is_empty() {
        return Ok(Admitted::Nothing);
    }

    let (record, original) = match record {
        Some(record) => {
            let original = record.clone();
            (record, Some(original))
        }
        None => {
            let Some(creator) = fresh.iter().position(|i| creates(&i.body, default_agent)) else {
                for input in &fresh {
                    drop_input(dropped, &thread_id, input, DropReason::UnknownThread);
                }
                return Ok(Admitted::Nothing);
            };
            for input in fresh.drain(..creator) {
                drop_input(dropped, &thread_id, &input, DropReason::BeforeCreation);
            }
            let record = new_record(&thread_id, &fresh[0].body, default_agent, now);
            (record, None)
        }
    };
    let mut record = record;
    // A person's move to another version of the agent is made before the agent is chosen.
    let mut moves = Vec::new();
    if original.is_some() {
        for input in &fresh {
            if let InputBody::UseAgent { agent } = &input.body {
                moves.push(use_agent(&mut record, agent, agents));
            }
        }
    }
    let moved = moves.iter().any(|(_, is_error)| !is_error);
    let Some(agent) = agents.agent(&record.agent) else {
        if original.is_none() && record.delegated_by.is_some() {
            // A delegation to an agent this host cannot run: the caller gets an error result
            // rather than waiting for one that cannot come, and the thread is closed at birth.
            let task = fresh.swap_remove(0);
            return Ok(Admitted::Refused(Box::new(refuse_delegation(
                record, &task, now, ids,
            ))));
        }
        return Err(SliceError::UnknownAgent {
            thread_id,
            agent: record.agent,
        });
    };

    let created = original.is_none();
    // A person's switch of the thread's model, then the model its completions use.
    for input in &fresh {
        if let InputBody::UseModel { model } = &input.body {
            moves.push(use_model(&mut record, model.as_deref(), &agent, library));
        }
    }
    let model = match record.model.as_deref() {
        None => Arc::clone(&agent.model),
        Some(spec) => match library.and_then(|l| l.model(spec)) {
            Some(model) => model,
            None => {
                tracing::warn!(thread = %record.id, model = spec, "the thread's model is not available on this host; its agent's model answers");
                Arc::clone(&agent.model)
            }
        },
    };
    // A thread created with a stored agent keeps the version it started with.
    if let Some(version) = agent
        .version
        .filter(|_| created && !record.agent.contains('@'))
    {
        record.agent = format!("{}@{version}", agent.name);
    }
    let mut conversation = if record.is_root() {
        Conversation::take_from(&mut record)
    } else {
        conversation.unwrap_or_default()
    };
    let mut problems = Vec::new();
    // A new conversation, or a root moved to another version, takes the tools its servers offer.
    if (created || moved) && record.is_root() {
        if let Some(toolset) = discovered_toolset {
            problems.clone_from(&toolset.problems);
            conversation.toolset = Some(toolset);
        }
    }
    let conversation_tools = conversation
        .toolset
        .as_ref()
        .filter(|t| !t.tools.is_empty())
        .map(|t| agent.conversation_tools(record.root(), t));
    let offered = match crate::tools::OfferedTools::new(&agent.tools, conversation_tools.as_deref())
        .specs_for(&record, library)
    {
        std::borrow::Cow::Borrowed(_) => None,
        std::borrow::Cow::Owned(specs) => Some(specs),
    };
    let equipment = Equipment::new(agent, model, conversation_tools, offered, library);
    let history = History::new(view, view_start, record.history_len);
    let mut draft = Draft::new(
        record,
        original,
        conversation,
        equipment,
        history,
        Outbox::new(live_output),
        now,
        ids,
    );
    for text in problems {
        draft.output(crate::effect::OutputKind::Error { text });
    }
    // The agent's policy for messages that find the thread busy, where hosts read it.
    let policy = draft.equipment.agent().while_busy;
    draft.record.while_busy = (policy != crate::state::WhileBusy::MoveOn).then_some(policy);
    for (text, is_error) in moves {
        if is_error {
            draft.output(crate::effect::OutputKind::Error { text: text.clone() });
        }
        draft.append(crate::history::Item::Notice { text, is_error });
    }
    Ok(Admitted::Run(draft, fresh, overruled))
}

/// Moves `record` to `target`, a version of its agent (`NAME` for the newest, `NAME@VERSION`),
/// if this host has it: the notice to record, and whether it is an error (the thread then
/// keeps the version it runs).
fn use_agent(
    record: &mut ThreadRecord,
    target: &str,
    agents: &dyn crate::agent::AgentLookup,
) -> (String, bool) {
    let current = record.agent.clone();
    let name = |reference: &str| crate::catalog::AgentRef::name_in(reference).to_owned();
    let refused = |why: String| {
        tracing::info!(thread = %record.id, agent = %current, target, %why, "a move to another agent version is refused");
        (
            format!("Not moved to `{target}`: {why}; the thread keeps running {current}."),
            true,
        )
    };
    if let Err(why) = crate::catalog::AgentRef::parse(target) {
        // The notice names the reference already.
        return refused(why.problem.to_string());
    }
    if name(target) != name(&current) {
        return refused(format!(
            "a thread keeps its agent ({}), and can only move to another version of it; start a \
             new conversation for another agent",
            name(&current)
        ));
    }
    let Some(agent) = agents.agent(target) else {
        return refused(
            "this host has no such version (not stored, or it cannot be built)".to_owned(),
        );
    };
    record.agent = match agent.version {
        Some(version) => format!("{}@{version}", agent.name),
        None => agent.name.clone(),
    };
    (
        format!(
            "This thread now runs the agent {} (it ran {current}).",
            record.agent
        ),
        false,
    )
}

/// Switches `record` to the model `spec` names (`None`: back to its agent's), if the host has it
/// ready: the notice to record, and whether it is an error.
fn use_model(
    record: &mut ThreadRecord,
    spec: Option<&str>,
    agent: &crate::agent::Agent,
    library: Option<&crate::library::Library>,
) -> (String, bool) {
    let before = record
        .model
        .clone()
        .unwrap_or_else(|| agent.model.name().to_owned());
    match spec {
        None => {
            record.model = None;
            (
                format!(
                    "This thread's completions use its agent's model again ({}; it used {before}).",
                    agent.model.name()
                ),
                false,
            )
        }
        Some(spec) if library.and_then(|l| l.model(spec)).is_some() => {
            record.model = Some(spec.to_owned());
            (
                format!("This thread's completions now use the model {spec} (it used {before})."),
                false,
            )
        }
        Some(spec) => (
            format!(
                "Not switched to the model `{spec}`: this host cannot make it; the thread keeps \
                 {before}."
            ),
            true,
        ),
    }
}

/// True for an input that creates the thread it is addressed to when there is none.
fn creates(body: &InputBody, default_agent: Option<&str>) -> bool {
    match body {
        InputBody::UserMessage { agent, .. } => agent.is_some() || default_agent.is_some(),
        InputBody::ChildSeed { .. } | InputBody::DelegatedTask { .. } => true,
        _ => false,
    }
}

/// What a slice acts on.
// Returned once per slice and unpacked at once: boxing the draft would cost an allocation per
// slice to save stack that is never held.
#[allow(clippy::large_enum_variant)]
pub(super) enum Admitted<'a> {
    /// The draft to apply the fresh inputs to, with those inputs and the overruled ones
    /// among them ([`SliceRequest::overruled`](super::SliceRequest::overruled)).
    Run(Draft<'a>, Vec<Input>, HashMap<InputId, String>),
    /// No input is left to act on (nothing to commit).
    Nothing,
    /// A delegated task for an agent this host cannot run: the closed thread and the caller's
    /// error result, to commit as they are.
    Refused(Box<crate::commit::Commit>),
}

fn refuse_delegation(
    mut record: ThreadRecord,
    task: &Input,
    now: jiff::Timestamp,
    ids: &mut dyn crate::ids::IdSource,
) -> crate::commit::Commit {
    let text = format!(
        "Error: the agent `{}` is not available on this host (it is not stored, or it cannot \
         run here), so the task was not started. Do it yourself or ask the user.",
        record.agent
    );
    tracing::warn!(thread = %record.id, agent = %record.agent, "a task delegated to an agent this host cannot run is refused");
    let mut effects = Vec::new();
    crate::tools::internal::delegation::return_result(
        &mut record,
        text.clone(),
        true,
        &mut effects,
    );
    let events = crate::commit::number_outputs(&mut record, &mut effects);
    record.status = crate::state::ThreadStatus::Closed;
    record.version = 1;
    record.history_len = 1;
    record.updated_at = now;
    crate::commit::Commit {
        thread_id: record.id.clone(),
        expected_version: None,
        new_entries: vec![crate::history::HistoryEntry {
            seq: 0,
            at: now,
            input_id: Some(task.id.clone()),
            item: crate::history::Item::Notice {
                text,
                is_error: true,
            },
        }],
        processed_inputs: vec![task.id.clone()],
        effects: super::with_ids(effects, ids),
        events,
        record,
    }
}

/// The record a creating input makes.
fn new_record(
    thread_id: &ThreadId,
    body: &InputBody,
    default_agent: Option<&str>,
    now: jiff::Timestamp,
) -> ThreadRecord {
    match body {
        InputBody::ChildSeed {
            agent,
            parent,
            parent_lineage,
            depth,
            ..
        } => {
            let mut record = ThreadRecord::new(
                thread_id.clone(),
                agent.clone(),
                Some((parent.clone(), parent_lineage.clone())),
                now,
            );
            record.depth = *depth;
            record
        }
        InputBody::DelegatedTask {
            agent,
            delegated_by,
            depth,
            ..
        } => {
            let mut record = ThreadRecord::new(thread_id.clone(), agent.clone(), None, now);
            record.depth = *depth;
            record.delegated_by = Some(delegated_by.clone());
            record
        }
        InputBody::UserMessage {
            agent: Some(agent), ..
        } => ThreadRecord::new(thread_id.clone(), agent.clone(), None, now),
        _ => ThreadRecord::new(
            thread_id.clone(),
            default_agent.unwrap_or_default(),
            None,
            now,
        ),
    }
}

impl Draft<'_> {
    /// Applies the admitted inputs in order; an input to a closed thread, or one that refers to
    /// something the thread does not have, is dropped with its reason.
    pub(super) fn apply_all(
        &mut self,
        inputs: Vec<Input>,
        overruled: &HashMap<InputId, String>,
        dropped: &mut Vec<DroppedInput>,
    ) {
        let thread_id = self.record.id.clone();
        if let Some(migration) = self.record.migration.clone() {
            self.pass_on(inputs, migration.forward_url());
            return;
        }
        // Inputs held while a move that was abandoned ran come first, in their order (they
        // were marked processed when they were held).
        let held = held_inputs(std::mem::take(&mut self.record.held));
        let held_count = held.len();
        for (n, input) in held.into_iter().chain(inputs).enumerate() {
            if n >= held_count {
                self.intake.mark_processed(input.id.clone());
            }
            let closed = self.record.status == crate::state::ThreadStatus::Closed;
            // A parent's close request that crossed the child's own closing still gets its
            // answer, or the parent's `close_thread` call would wait for ever.
            if closed && !matches!(input.body, InputBody::CloseRequest { .. }) {
                drop_input(dropped, &thread_id, &input, DropReason::ThreadClosed);
                continue;
            }
            if let Some(standing) = overruled.get(&input.id) {
                let reason = DropReason::Overruled(standing.clone());
                drop_input(dropped, &thread_id, &input, reason);
                continue;
            }
            self.intake.applying(Some(input.id.clone()));
            let (id, kind) = (input.id.clone(), input.body.kind());
            if let Err(reason) = self.apply(input.body) {
                tracing::info!(thread = %thread_id, input = %id, kind, %reason, "input dropped");
                dropped.push(DroppedInput {
                    input_id: id,
                    kind,
                    reason,
                });
            }
            self.outbox.flush_live(&mut self.record);
        }
        self.intake.applying(None);
    }

    /// What a thread that is moving (`forward_url` `None`) or has moved to another host does
    /// with its inputs: holds them on the record until the move completes or is abandoned, or
    /// forwards them to the destination. A nudge only asks the host to perform the outbox; it
    /// is not forwarded.
    fn pass_on(&mut self, inputs: Vec<Input>, forward_url: Option<&str>) {
        let thread_id = self.record.id.clone();
        for input in inputs {
            self.intake.mark_processed(input.id.clone());
            match forward_url {
                _ if matches!(input.body, InputBody::Nudge {} | InputBody::Continue { .. }) => {}
                None => match serde_json::to_value(&input) {
                    Ok(json) => self.record.held.push(json),
                    Err(e) => {
                        tracing::error!(thread = %thread_id, input = %input.id, error = %e, "an input could not be held while moving; dropped")
                    }
                },
                Some(url) => {
                    tracing::info!(thread = %thread_id, input = %input.id, kind = input.body.kind(), "forwarding an input to the thread's new host");
                    self.outbox.push(crate::effect::Effect::Forward {
                        url: url.to_owned(),
                        input,
                    });
                }
            }
        }
    }
}

/// The inputs a record held while moving (kept as JSON), in order; one that no longer reads as
/// an input is logged and left out.
pub(crate) fn held_inputs(held: Vec<serde_json::Value>) -> Vec<Input> {
    held.into_iter()
        .filter_map(|json| match serde_json::from_value(json) {
            Ok(input) => Some(input),
            Err(e) => {
                tracing::error!(error = %e, "a held input cannot be read; dropped");
                None
            }
        })
        .collect()
}
