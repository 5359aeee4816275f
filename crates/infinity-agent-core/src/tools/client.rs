//! Client tools: tools an agent file declares (`client_tools:`) that the *calling application*
//! runs. A call is shown to the application as a `client_tool_call` event (on the event stream
//! and a stack's output queue); the thread waits for it like for a tool server's call, and the
//! application answers with `POST /threads/{id}/tool_results/{call}` (or a `tool_result` input
//! on a stack's input queue). With a `deadline`, a call still unanswered then gets an error
//! result.

use serde::Deserialize;

use super::{Tool, ToolContext, ToolOutcome};
use crate::effect::{Effect, OutputKind};
use crate::input::{Input, InputBody};
use crate::model::ToolSpec;
use crate::state::{ClientCall, Deadline, PendingCall, MAX_HELD_ARGS_BYTES};

/// A client tool as an agent file declares it.
///
/// ```yaml
/// client_tools:
///   - name: pick_file
///     description: Asks the user to pick a file in the app; returns its path.
///     input_schema: {type: object, properties: {kind: {type: string}}}
///     deadline: 10m
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientToolFile {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema); default: any object.
    #[serde(default = "any_object")]
    pub input_schema: serde_json::Value,
    /// How long a call may wait for the application's answer; then it gets an error result.
    /// Default: as long as it takes.
    #[serde(default)]
    pub deadline: Option<Deadline>,
}

fn any_object() -> serde_json::Value {
    serde_json::json!({"type": "object"})
}

/// A client tool in an agent's registry: its calls go to the application.
#[derive(Debug, Clone)]
pub struct ClientTool {
    file: ClientToolFile,
}

impl ClientTool {
    /// The tool an agent file declares.
    pub fn new(file: ClientToolFile) -> Self {
        Self { file }
    }
}

/// The result a client tool's call gets when its deadline passes unanswered.
pub fn deadline_text(after: &str) -> String {
    format!(
        "Error: the application that runs this tool sent no result within {after} (the deadline \
         its agent file sets); the call was cancelled. You may try again or tell the user."
    )
}

impl Tool for ClientTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            &self.file.name,
            &self.file.description,
            self.file.input_schema.clone(),
        )
    }

    fn call(&self, args: &serde_json::Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        // The record holds them until the answer, and it is rewritten at every commit.
        let size = args.to_string().len();
        if size > MAX_HELD_ARGS_BYTES {
            return ToolOutcome::error(format!(
                "Not sent: the arguments of `{}` ({size} bytes) are more than a client tool's \
                 call holds ({MAX_HELD_ARGS_BYTES} bytes). Call it with smaller arguments.",
                self.file.name
            ));
        }
        let due = self.file.deadline.as_ref().and_then(|deadline| {
            let due = deadline.due_from(ctx.now)?;
            ctx.emit(Effect::SendAt {
                input: Input::call_deadline(&ctx.record.id, &ctx.call.id, deadline.as_str()),
                due,
            });
            Some(due)
        });
        ctx.output(OutputKind::ClientToolCall {
            call_id: ctx.call.id.clone(),
            name: self.file.name.clone(),
            args: args.clone(),
            deadline: due,
        });
        ToolOutcome::Dispatched
    }
}

/// What the record holds of a client tool's call, read from the effects its tool made (its
/// `client_tool_call` event, its deadline's timer); `None` for a call of another tool.
pub(crate) fn held_call(made: &[Effect]) -> Option<ClientCall> {
    let args = made.iter().find_map(|effect| match effect {
        Effect::Output { event } => match &event.kind {
            OutputKind::ClientToolCall { args, .. } => Some(args.clone()),
            _ => None,
        },
        _ => None,
    })?;
    let deadline = made.iter().find_map(|effect| match effect {
        Effect::SendAt {
            input:
                Input {
                    body: InputBody::CallDeadline { after, .. },
                    ..
                },
            ..
        } => Deadline::try_from(after.clone()).ok(),
        _ => None,
    });
    Some(ClientCall { args, deadline })
}

/// The event that shows `pending`'s call to its application again (a stream that attaches
/// sends one per call still waiting); `None` for a call that is not a client tool's.
pub fn call_event(pending: &PendingCall) -> Option<OutputKind> {
    let client = pending.client.as_ref()?;
    Some(OutputKind::ClientToolCall {
        call_id: pending.call_id.clone(),
        name: pending.tool.clone(),
        args: client.args.clone(),
        deadline: client
            .deadline
            .as_ref()
            .and_then(|d| d.due_from(pending.issued_at)),
    })
}
