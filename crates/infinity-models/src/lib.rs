//! Model providers for Infinity. Our history types stay the durable format; each adapter converts
//! them to its provider's wire format at the edge.
//!
//! - [`anthropic::AnthropicModel`]: the Messages API, streaming, with prompt caching.
//! - [`openai::OpenAiModel`]: OpenAI-compatible chat completions, streaming (OpenAI, Ollama, vLLM,
//!   llama.cpp).
//! - [`bedrock::BedrockModel`]: Bedrock Converse, with the function's role on Lambda.
//! - [`resolve_model`]: `PROVIDER:MODEL` to a provider, keys and base URLs from the environment.
//! - [`fetch::fetch_skills`]: the text of skills an agent file loads from a url.
#![warn(missing_docs)]

pub mod anthropic;
pub mod bedrock;
pub mod catalog;
pub mod fetch;
pub mod openai;
pub mod sse;
pub mod transport;

use std::path::Path;
use std::sync::Arc;

use infinity_agent_core::agent::{resolve_core_model, ModelSpec};
use infinity_agent_core::model::ModelProvider;

/// Builds the provider a model spec names: `anthropic:MODEL` (`ANTHROPIC_API_KEY`,
/// `ANTHROPIC_BASE_URL`), `openai:MODEL` (`OPENAI_API_KEY`, `OPENAI_BASE_URL`), or what the core
/// knows (`script:PATH`, relative to `base`), or `bedrock:MODEL_ID` (AWS credentials and region
/// from the environment).
pub async fn resolve_model(
    spec: &ModelSpec,
    base: &Path,
) -> Result<Arc<dyn ModelProvider>, String> {
    resolve_model_with_key(spec, base, None).await
}

/// Like [`resolve_model`], with the API key given (e.g. read from SSM Parameter Store on
/// Lambda) instead of taken from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`; base URLs still come
/// from the environment.
pub async fn resolve_model_with_key(
    spec: &ModelSpec,
    base: &Path,
    key: Option<String>,
) -> Result<Arc<dyn ModelProvider>, String> {
    match spec.provider.as_str() {
        "bedrock" => Ok(Arc::new(bedrock::BedrockModel::from_env(&spec.model).await)),
        "anthropic" => {
            let config = match key {
                Some(key) => anthropic::AnthropicConfig::from_env_or_key(&key),
                None => anthropic::AnthropicConfig::from_env()?,
            };
            Ok(Arc::new(anthropic::AnthropicModel::new(
                &spec.model,
                config,
            )))
        }
        "openai" => {
            let config = match key {
                Some(key) => {
                    let mut config = openai::OpenAiConfig::from_env()
                        .unwrap_or_else(|_| openai::OpenAiConfig::default_endpoint());
                    config.api_key = Some(key);
                    config
                }
                None => openai::OpenAiConfig::from_env()?,
            };
            Ok(Arc::new(openai::OpenAiModel::new(&spec.model, config)))
        }
        _ => resolve_core_model(spec, base),
    }
}
