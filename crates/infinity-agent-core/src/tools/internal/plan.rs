//! The `plan` category: `plan_create`, `plan_update`, `plan_load`. The plan belongs to the
//! thread and is kept on its record.

use serde_json::{json, Value};

use crate::effect::OutputKind;
use crate::model::ToolSpec;
use crate::state::{Plan, PlanStep, StepStatus};
use crate::tools::{Tool, ToolContext, ToolOutcome};

/// The most steps a plan may have.
const MAX_STEPS: usize = 50;

fn show(ctx: &mut ToolContext<'_>, plan: &Plan) {
    ctx.output(OutputKind::PlanUpdated {
        checklist: plan.checklist(),
    });
}

#[derive(Debug)]
pub(super) struct PlanCreate;

impl Tool for PlanCreate {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "plan_create",
            "Write down a plan: the steps of the task, in order. Replaces any earlier plan.",
            json!({
                "type": "object",
                "properties": {"steps": {"type": "array", "items": {"type": "string", "minLength": 1},
                                         "minItems": 1, "maxItems": MAX_STEPS}},
                "required": ["steps"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let steps = args["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|t| PlanStep {
                text: t.trim().to_owned(),
                status: StepStatus::Pending,
            })
            .collect();
        let plan = Plan { steps };
        show(ctx, &plan);
        let text = format!("Plan created:\n{}", plan.checklist());
        ctx.record.plan = Some(plan);
        ToolOutcome::ok(text)
    }
}

#[derive(Debug)]
pub(super) struct PlanUpdate;

impl Tool for PlanUpdate {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "plan_update",
            "Set the status of one step of the plan (steps count from 1).",
            json!({
                "type": "object",
                "properties": {
                    "step": {"type": "integer", "minimum": 1},
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "failed"]}
                },
                "required": ["step", "status"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let Some(mut plan) = ctx.record.plan.clone() else {
            return ToolOutcome::error("Error: there is no plan yet; create one with plan_create.");
        };
        let step = args["step"].as_u64().unwrap_or(0) as usize;
        let Ok(status) = serde_json::from_value::<StepStatus>(args["status"].clone()) else {
            return ToolOutcome::error(
                "Error: status must be pending, in_progress, completed or failed.",
            );
        };
        let Some(entry) = step.checked_sub(1).and_then(|i| plan.steps.get_mut(i)) else {
            return ToolOutcome::error(format!(
                "Error: the plan has steps 1 to {}; there is no step {step}.",
                plan.steps.len()
            ));
        };
        entry.status = status;
        show(ctx, &plan);
        let text = format!("Plan updated:\n{}", plan.checklist());
        ctx.record.plan = Some(plan);
        ToolOutcome::ok(text)
    }
}

#[derive(Debug)]
pub(super) struct PlanLoad;

impl Tool for PlanLoad {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "plan_load",
            "Read the current plan with the status of each step.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    fn call(&self, _args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        match &ctx.record.plan {
            Some(plan) => ToolOutcome::ok(plan.checklist()),
            None => ToolOutcome::ok("There is no plan yet."),
        }
    }
}
