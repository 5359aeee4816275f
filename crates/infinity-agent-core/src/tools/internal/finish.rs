//! The `finish` category: `finish(status, result)` stores the thread's output. A successful
//! `finish` ends the turn. With `output_schema` in the agent file, a successful result must match
//! it (a mismatch goes back to the model as an error, so it can correct itself).
//!
//! Top-level threads are offered `finish` when the `finish` flag is on (the default) or the agent
//! has an `output_schema`; threads spawned as sub-agents (children, delegated threads) always are.

use serde_json::{json, Value};

use super::Making;
use crate::effect::OutputKind;
use crate::model::ToolSpec;
use crate::state::{FinishStatus, ThreadOutput, ThreadRecord};
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// The result of a `finish` that ended the turn (a succeeded one): a thread whose history ends
/// with it owes the model no answer.
pub(crate) const TURN_ENDED: &str = "Finished: succeeded. The result is recorded.";

/// The largest result `finish` records, in bytes of JSON: the record keeps it and is rewritten
/// on every commit, so bulk belongs in the reply, memory or an artifact.
pub const MAX_RESULT_BYTES: usize = 100_000;

pub(super) struct Finish {
    for_root: bool,
    schema: Option<(Value, jsonschema::Validator)>,
}

impl std::fmt::Debug for Finish {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Finish")
            .field("for_root", &self.for_root)
            .field("schema", &self.schema.as_ref().map(|(s, _)| s))
            .finish()
    }
}

impl Finish {
    pub(super) fn new(making: &Making<'_>) -> Self {
        let settings = making.settings;
        // A schema that does not compile was rejected when the agent file was read.
        let schema = settings
            .output_schema
            .as_ref()
            .and_then(|s| jsonschema::validator_for(s).ok().map(|v| (s.clone(), v)));
        Self {
            for_root: making.on || settings.output_schema.is_some(),
            schema,
        }
    }
}

impl Tool for Finish {
    fn spec(&self) -> ToolSpec {
        // The schema binds succeeded results only, so it is checked in `call`, not here.
        let result = match &self.schema {
            Some((schema, _)) => json!({
                "description": format!("The result. When status is succeeded it must match this JSON Schema: {schema}")
            }),
            None => json!({"description": "The result: any JSON value."}),
        };
        ToolSpec {
            name: "finish".to_owned(),
            description: "Finish the task: record its status and result. A succeeded finish ends \
                          your turn."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["succeeded", "failed", "cancelled"]},
                    "result": result
                },
                "required": ["status", "result"]
            }),
        }
    }

    fn offered_to(&self, record: &ThreadRecord) -> bool {
        !record.is_top_level() || self.for_root
    }

    fn not_offered(&self, _record: &ThreadRecord) -> String {
        "Error: `finish` is turned off for this agent's top-level threads (`internal_tools: \
         {finish: false}` in its agent file). Answer in text instead."
            .to_owned()
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let Ok(status) = serde_json::from_value::<FinishStatus>(args["status"].clone()) else {
            return ToolOutcome::error("Error: status must be succeeded, failed or cancelled.");
        };
        let result = args["result"].clone();
        let size = crate::json::json_len(&result);
        if size > MAX_RESULT_BYTES {
            return ToolOutcome::error(format!(
                "Error: the result is {size} bytes of JSON; finish records at most \
                 {MAX_RESULT_BYTES}. Put the bulk in your reply and finish with a shorter result \
                 (a summary, or where the full result is)."
            ));
        }
        if status == FinishStatus::Succeeded {
            if let Some((_, validator)) = &self.schema {
                let problems = crate::tools::schema_problems(validator, &result);
                if !problems.is_empty() {
                    return ToolOutcome::error(format!(
                        "Error: the result does not match the agent's output_schema: {}. Call \
                         finish again with a corrected result.",
                        problems.join("; ")
                    ));
                }
            }
        }
        ctx.output(OutputKind::Finished {
            status,
            result: result.clone(),
        });
        ctx.record.output = Some(ThreadOutput { status, result });
        if status == FinishStatus::Succeeded {
            ToolOutcome::EndTurn {
                text: TURN_ENDED.to_owned(),
            }
        } else {
            ToolOutcome::ok(format!(
                "Finished: {}. The result is recorded.",
                status.as_str()
            ))
        }
    }
}
