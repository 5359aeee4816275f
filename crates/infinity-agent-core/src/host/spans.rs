//! The spans of the shared driver (docs/traces.md): the slice's and each completion's.

use tracing::Instrument;

use super::HostContext;
use crate::ids::ThreadId;
use crate::input::{Input, InputBody};
use crate::model::{ModelError, ModelProvider};
use crate::state::ThreadRecord;
use crate::telemetry;

/// The span of a slice (GenAI's `invoke_agent`): the thread, its conversation, its inputs,
/// the agent and its version.
pub(super) fn slice_span(
    host: &HostContext<'_>,
    thread_id: &ThreadId,
    agent_name: Option<&str>,
    record: &Option<ThreadRecord>,
    inputs: &[Input],
) -> tracing::Span {
    let input_ids: Vec<&str> = inputs.iter().map(|i| i.id.as_str()).collect();
    let agent = agent_name.unwrap_or("unknown");
    let span = tracing::info_span!(
        "slice",
        otel.name = %format!("invoke_agent {agent}"),
        thread = %thread_id,
        inputs = ?input_ids,
    );
    // The conversation: the root of the thread's tree (a new child's comes with its seed).
    let root = match record {
        Some(r) => r.lineage.first().cloned(),
        None => inputs.iter().find_map(|i| match &i.body {
            InputBody::ChildSeed { parent_lineage, .. } => parent_lineage.first().cloned(),
            _ => None,
        }),
    }
    .unwrap_or_else(|| thread_id.clone());
    if !telemetry::exporting() {
        return span;
    }
    telemetry::set(&span, "gen_ai.operation.name", "invoke_agent");
    telemetry::set(
        &span,
        "gen_ai.agent.name",
        crate::catalog::AgentRef::name_in(agent).to_owned(),
    );
    telemetry::set(&span, "gen_ai.conversation.id", root.to_string());
    telemetry::set(&span, "infinity.thread.id", thread_id.to_string());
    telemetry::set(&span, "infinity.input.ids", input_ids.join(","));
    let kinds: Vec<&str> = inputs.iter().map(|i| i.body.kind()).collect();
    telemetry::set_strings(&span, "infinity.input.types", &kinds);
    if let Some(version) = agent_name
        .and_then(|name| host.agents.agent(name))
        .and_then(|a| a.version)
    {
        telemetry::set(&span, "infinity.agent.version", i64::from(version));
    }
    span
}

/// Runs a completion in its span (GenAI's `chat`): the provider and model, then the tokens
/// used (cache reads and writes apart), what it cost, why it stopped, or why it failed.
pub(super) async fn traced(
    model: &dyn ModelProvider,
    completion: impl std::future::Future<Output = Result<crate::model::Completion, ModelError>>,
) -> Result<crate::model::Completion, ModelError> {
    let name = model.name();
    let (provider, id) = name.split_once(':').unwrap_or(("unknown", name));
    let provider = match provider {
        "bedrock" => "aws.bedrock",
        "script" => "infinity.script",
        other => other,
    };
    let span =
        tracing::info_span!("completion", otel.name = %format!("chat {id}"), otel.kind = "client");
    if !telemetry::exporting() {
        return completion.instrument(span).await;
    }
    telemetry::set(&span, "gen_ai.operation.name", "chat");
    telemetry::set(&span, "gen_ai.provider.name", provider.to_owned());
    telemetry::set(&span, "gen_ai.system", provider.to_owned());
    telemetry::set(&span, "gen_ai.request.model", id.to_owned());
    let result = completion.instrument(span.clone()).await;
    match &result {
        Ok(done) => {
            let usage = done.usage.priced(model.prices().as_ref());
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            let input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
            telemetry::set(&span, "gen_ai.usage.input_tokens", count(input));
            telemetry::set(
                &span,
                "gen_ai.usage.output_tokens",
                count(usage.output_tokens),
            );
            telemetry::set(
                &span,
                "gen_ai.usage.cache_read.input_tokens",
                count(usage.cache_read_tokens),
            );
            telemetry::set(
                &span,
                "gen_ai.usage.cache_creation.input_tokens",
                count(usage.cache_write_tokens),
            );
            match usage.unpriced {
                0 => telemetry::set(&span, "infinity.cost.usd", usage.cost.dollars()),
                _ => telemetry::set(&span, "infinity.cost.unpriced", true),
            }
            let reason = match done.stop_reason {
                crate::model::StopReason::EndTurn => "stop",
                crate::model::StopReason::ToolUse => "tool_calls",
                crate::model::StopReason::MaxTokens => "length",
            };
            telemetry::set_strings(&span, "gen_ai.response.finish_reasons", &[reason]);
        }
        Err(why) => {
            let kind = match why {
                ModelError::Retryable { .. } => "retryable",
                ModelError::Terminal { .. } => "terminal",
            };
            telemetry::set(&span, "error.type", kind);
            telemetry::set_error(&span, &why.to_string());
        }
    }
    result
}
