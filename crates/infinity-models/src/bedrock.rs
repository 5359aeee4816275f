//! The Bedrock Converse adapter (`aws-sdk-bedrockruntime`). On Lambda it uses the function's
//! role; elsewhere the standard AWS credential chain. Tool schemas and arguments cross as
//! Smithy `Document`s, converted from and to `serde_json::Value` here.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_bedrockruntime::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse::ConverseInput;
use aws_sdk_bedrockruntime::types::{
    CachePointBlock, CachePointType, ContentBlock, ConversationRole, ConverseOutput,
    InferenceConfiguration, Message, StopReason as BedrockStop, SystemContentBlock, Tool,
    ToolConfiguration, ToolInputSchema, ToolResultBlock, ToolResultContentBlock, ToolResultStatus,
    ToolSpecification, ToolUseBlock,
};
use aws_sdk_bedrockruntime::Client;
use aws_smithy_types::{Document, Number};
use infinity_agent_core::history::{summary_text, Item, INJECTED_TOOL};
use infinity_agent_core::model::Usage;
use infinity_agent_core::model::{
    Completion, CompletionRequest, ModelError, ModelProvider, ModelToolCall, StopReason, ToolSpec,
};
use serde_json::Value;

use crate::catalog;
use crate::convert::{message_text, NO_ARGUMENTS};

/// `serde_json::Value` to a Smithy `Document`.
pub fn to_document(value: &Value) -> Document {
    match value {
        Value::Null => Document::Null,
        Value::Bool(b) => Document::Bool(*b),
        Value::Number(n) => Document::Number(if let Some(u) = n.as_u64() {
            Number::PosInt(u)
        } else if let Some(i) = n.as_i64() {
            Number::NegInt(i)
        } else {
            Number::Float(n.as_f64().unwrap_or(0.0))
        }),
        Value::String(s) => Document::String(s.clone()),
        Value::Array(items) => Document::Array(items.iter().map(to_document).collect()),
        Value::Object(map) => Document::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), to_document(v)))
                .collect::<HashMap<_, _>>(),
        ),
    }
}

/// A Smithy `Document` to `serde_json::Value`.
pub fn to_value(document: &Document) -> Value {
    match document {
        Document::Null => Value::Null,
        Document::Bool(b) => Value::Bool(*b),
        Document::Number(Number::PosInt(u)) => Value::from(*u),
        Document::Number(Number::NegInt(i)) => Value::from(*i),
        Document::Number(Number::Float(f)) => {
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
        }
        Document::String(s) => Value::String(s.clone()),
        Document::Array(items) => Value::Array(items.iter().map(to_value).collect()),
        Document::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect())
        }
    }
}

/// A model on Amazon Bedrock, through the Converse API.
pub struct BedrockModel {
    name: String,
    model: String,
    max_tokens: u32,
    context_window: u32,
    client: Client,
}

impl std::fmt::Debug for BedrockModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BedrockModel")
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl BedrockModel {
    /// A model by Bedrock model id (or inference profile id).
    pub fn new(model: &str, client: Client) -> Self {
        // Bedrock ids embed the vendor's model name: `anthropic.claude-sonnet-4-5-...`.
        let vendor_model = model.rsplit('.').next().unwrap_or(model);
        let info = catalog::lookup("anthropic", vendor_model);
        Self {
            name: format!("bedrock:{model}"),
            model: model.to_owned(),
            max_tokens: info.max_output_tokens,
            context_window: info.context_window,
            client,
        }
    }

    /// A model with a client from the standard AWS environment (region, credentials, endpoint).
    pub async fn from_env(model: &str) -> Self {
        let shared = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
        Self::new(model, Client::new(&shared))
    }

    /// The Converse input for a completion, as the adapter sends it; the SDK writes it as JSON
    /// and signs it on sending (public for the request benchmark).
    pub fn converse_input(
        &self,
        request: &CompletionRequest<'_>,
    ) -> Result<ConverseInput, ModelError> {
        let cache = CachePointBlock::builder()
            .r#type(CachePointType::Default)
            .build()
            .map_err(bad)?;
        ConverseInput::builder()
            .model_id(&self.model)
            .system(SystemContentBlock::Text(request.system.to_owned()))
            .system(SystemContentBlock::CachePoint(cache))
            .set_messages(Some(convert_history(request)?))
            .tool_config(tool_config(request.tools)?)
            .inference_config(
                InferenceConfiguration::builder()
                    .max_tokens(self.max_tokens as i32)
                    .build(),
            )
            .build()
            .map_err(bad)
    }
}

/// A request the SDK refused to build (a required field missing: a bug of ours).
fn bad(e: aws_sdk_bedrockruntime::error::BuildError) -> ModelError {
    ModelError::Terminal(format!("bedrock: {e}"))
}

/// The tools on offer, then the injected one.
fn tool_config(tools: &[ToolSpec]) -> Result<ToolConfiguration, ModelError> {
    let spec = |name: &str, description: &str, schema: &Value| {
        ToolSpecification::builder()
            .name(name)
            .description(description)
            .input_schema(ToolInputSchema::Json(to_document(schema)))
            .build()
            .map(Tool::ToolSpec)
            .map_err(bad)
    };
    let mut converted = Vec::with_capacity(tools.len() + 1);
    for tool in tools {
        converted.push(spec(&tool.name, &tool.description, &tool.input_schema)?);
    }
    converted.push(spec(
        INJECTED_TOOL,
        "Reserved: the runtime uses it to deliver events. Never call it.",
        &NO_ARGUMENTS,
    )?);
    ToolConfiguration::builder()
        .set_tools(Some(converted))
        .build()
        .map_err(bad)
}

fn message(role: ConversationRole, content: Vec<ContentBlock>) -> Result<Message, ModelError> {
    Message::builder()
        .role(role)
        .set_content(Some(content))
        .build()
        .map_err(bad)
}

/// Our history as Converse messages: consecutive entries of one role merge into one turn, tool
/// results first.
pub fn convert_history(request: &CompletionRequest<'_>) -> Result<Vec<Message>, ModelError> {
    let mut turns: Vec<(ConversationRole, Vec<ContentBlock>)> = Vec::new();
    let mut push = |role: ConversationRole, block: ContentBlock| match turns.last_mut() {
        Some((last, blocks)) if *last == role => {
            if matches!(block, ContentBlock::ToolResult(_)) {
                let at = blocks
                    .iter()
                    .take_while(|b| matches!(b, ContentBlock::ToolResult(_)))
                    .count();
                blocks.insert(at, block);
            } else {
                blocks.push(block);
            }
        }
        _ => turns.push((role, vec![block])),
    };
    for entry in request.history.iter() {
        match &entry.item {
            Item::Message { text, from } => {
                let text = message_text(text, from).into_owned();
                push(ConversationRole::User, ContentBlock::Text(text));
            }
            Item::Summary { text, .. } => push(
                ConversationRole::User,
                ContentBlock::Text(summary_text(text)),
            ),
            Item::Assistant {
                text, tool_calls, ..
            } => {
                if let Some(text) = text.as_ref().filter(|t| !t.trim().is_empty()) {
                    push(
                        ConversationRole::Assistant,
                        ContentBlock::Text(text.clone()),
                    );
                }
                for call in tool_calls {
                    let block = ToolUseBlock::builder()
                        .tool_use_id(call.id.as_str())
                        .name(&call.name)
                        .input(to_document(&call.args))
                        .build()
                        .map_err(bad)?;
                    push(ConversationRole::Assistant, ContentBlock::ToolUse(block));
                }
            }
            Item::ToolResult {
                call_id,
                text,
                is_error,
                images,
                ..
            } => {
                let mut block = ToolResultBlock::builder()
                    .tool_use_id(call_id.as_str())
                    .content(ToolResultContentBlock::Text(text.clone()));
                // Images reach Bedrock models as a note for now (see docs/models.md).
                for image in images {
                    block = block.content(ToolResultContentBlock::Text(image.placeholder()));
                }
                if *is_error {
                    block = block.status(ToolResultStatus::Error);
                }
                push(
                    ConversationRole::User,
                    ContentBlock::ToolResult(block.build().map_err(bad)?),
                );
            }
            Item::Notice { .. } => {}
        }
    }
    turns
        .into_iter()
        .map(|(role, content)| message(role, content))
        .collect()
}

fn classify<E: ProvideErrorMetadata + std::error::Error + 'static>(err: SdkError<E>) -> ModelError {
    if let Some(e) = err.as_service_error() {
        let code = e.code().unwrap_or("error").to_owned();
        let why = format!("bedrock: {code}: {}", e.message().unwrap_or(""));
        let retryable = matches!(
            code.as_str(),
            "ThrottlingException"
                | "ServiceUnavailableException"
                | "InternalServerException"
                | "ModelNotReadyException"
                | "ModelTimeoutException"
        );
        return if retryable {
            ModelError::Retryable(why)
        } else {
            ModelError::Terminal(why)
        };
    }
    // The causes, on one line: "dispatch failure" alone says nothing.
    let mut causes = vec![err.to_string()];
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !causes.iter().any(|c| c.contains(&text)) {
            causes.push(text);
        }
        source = cause.source();
    }
    let chain = causes
        .join(": ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    // A network that failed or timed out may recover; a request that could not be built or
    // signed (no credentials, no region) will not, however often it is tried.
    let network = match &err {
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => true,
        SdkError::DispatchFailure(d) => d.is_io() || d.is_timeout(),
        _ => false,
    };
    if network {
        ModelError::Retryable(format!("bedrock: {chain}"))
    } else {
        ModelError::Terminal(format!(
            "bedrock: {chain} (check the AWS credentials and region: AWS_PROFILE or \
             AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, and AWS_REGION)"
        ))
    }
}

#[async_trait]
impl ModelProvider for BedrockModel {
    fn name(&self) -> &str {
        &self.name
    }

    fn context_window(&self) -> u32 {
        self.context_window
    }

    async fn complete(&self, request: CompletionRequest<'_>) -> Result<Completion, ModelError> {
        let input = self.converse_input(&request)?;
        let output = self
            .client
            .converse()
            .set_model_id(input.model_id)
            .set_system(input.system)
            .set_messages(input.messages)
            .set_tool_config(input.tool_config)
            .set_inference_config(input.inference_config)
            .send()
            .await
            .map_err(classify)?;
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        if let Some(ConverseOutput::Message(message)) = output.output() {
            for block in message.content() {
                match block {
                    ContentBlock::Text(t) => text.push_str(t),
                    ContentBlock::ToolUse(call) => tool_calls.push(ModelToolCall {
                        id: Some(call.tool_use_id().to_owned()),
                        name: call.name().to_owned(),
                        args: to_value(call.input()),
                    }),
                    _ => {}
                }
            }
        }
        let stop_reason = match output.stop_reason() {
            BedrockStop::ToolUse => StopReason::ToolUse,
            BedrockStop::MaxTokens => StopReason::MaxTokens,
            _ => StopReason::EndTurn,
        };
        let usage = output.usage().map_or_else(Usage::default, |u| Usage {
            completions: 0,
            input_tokens: u.input_tokens().max(0) as u64,
            output_tokens: u.output_tokens().max(0) as u64,
            cache_read_tokens: u.cache_read_input_tokens().unwrap_or(0).max(0) as u64,
            cache_write_tokens: u.cache_write_input_tokens().unwrap_or(0).max(0) as u64,
        });
        Ok(Completion {
            text: Some(text).filter(|t| !t.is_empty()),
            tool_calls,
            stop_reason,
            usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_round_trip() {
        let v = serde_json::json!({"a": [1, -2, 2.5, "x", true, null, {"b": {}}]});
        assert_eq!(to_value(&to_document(&v)), v);
    }
}
