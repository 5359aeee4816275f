//! Model providers for Infinity. Our history types stay the durable format; each adapter converts
//! them to its provider's wire format at the edge.
//!
//! - [`anthropic::AnthropicModel`]: the Messages API, streaming, with prompt caching.
//! - [`openai::OpenAiModel`]: OpenAI-compatible chat completions, streaming (OpenAI, Ollama, vLLM,
//!   llama.cpp).
//! - [`bedrock::BedrockModel`]: Bedrock Converse, signed with SigV4 (the function's role on
//!   Lambda).
//! - [`resolve_model`]: `PROVIDER:MODEL` to a provider, keys and base URLs from the environment.
//! - [`sigv4`]: signing requests for AWS (Bedrock here, IAM-authenticated tool servers on the
//!   AWS host), with credentials kept until shortly before they expire.
//! - [`fetch::fetch_skills`]: the text of skills an agent file loads from a url.
//! - [`load_agent`]: an agent file to an [`AgentSpec`] (model resolved, skills fetched), the
//!   one loader the CLI and the Lambda handler share.
#![warn(missing_docs)]

pub mod anthropic;
pub mod bedrock;
mod convert;
pub mod fetch;
mod json;
pub mod model_info;
mod names;
pub mod openai;
pub mod sigv4;
pub mod sse;
pub mod stored;
pub mod transport;
mod turns;

use std::path::Path;
use std::sync::Arc;

use infinity_agent_core::agent::{
    resolve_core_model, AgentFile, AgentFileError, AgentSpec, CoreModelError, ModelSpec,
};
use infinity_agent_core::model::ModelProvider;

/// Why a model spec could not be turned into a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// The core could not build it (a script that does not load, an unknown provider).
    #[error(transparent)]
    Core(#[from] CoreModelError),
    /// The provider needs a key that is not set.
    #[error("{0}")]
    MissingKey(&'static str),
    /// An application's own provider refused the model.
    #[error("{0}")]
    Custom(String),
}

/// Why an agent could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadAgentError {
    /// The agent file is invalid.
    #[error(transparent)]
    File(#[from] AgentFileError),
    /// Its model could not be built.
    #[error("agent `{agent}`: model `{model}`: {source}")]
    Model {
        /// The agent.
        agent: String,
        /// The model spec.
        model: String,
        /// Why.
        source: ResolveError,
    },
    /// A skill's url could not be fetched.
    #[error(transparent)]
    Skill(#[from] fetch::SkillFetchError),
}

/// How to load an agent file beyond what it says.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct LoadOptions {
    /// A model spec that replaces the file's (`--model`); relative script paths in it start
    /// from the working folder instead of the file's.
    pub model: Option<String>,
    /// The provider's API key, when it does not come from the environment (SSM on Lambda).
    pub key: Option<String>,
    /// Model providers of the application's own, by the `PROVIDER` of `PROVIDER:MODEL`.
    pub providers: CustomProviders,
}

impl LoadOptions {
    /// The same options with this model spec instead of the file's.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The same options with this API key for the file's provider.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The same options with the application's own providers.
    pub fn with_providers(mut self, providers: CustomProviders) -> Self {
        self.providers = providers;
        self
    }
}

/// Builds a model provider of the application's own from the `MODEL` part of `PROVIDER:MODEL`;
/// an `Err` is a reason the agent file's author can act on.
pub type ProviderFactory =
    Arc<dyn Fn(&str) -> Result<Arc<dyn ModelProvider>, String> + Send + Sync>;

/// Model providers an application adds to the built-in ones, each under a provider name an agent
/// file's `model:` may use (`mycorp:large`). A name of a built-in provider is refused when
/// added, so an agent file means the same model on every host.
///
/// ```
/// use std::sync::Arc;
/// use infinity_agent_core::scripted::ScriptedModel;
/// use infinity_models::CustomProviders;
///
/// let providers = CustomProviders::new()
///     .with("canned", Arc::new(|model: &str| {
///         let script = format!("rules:\n  - reply: {{text: \"{model} says hi\"}}\n");
///         ScriptedModel::parse(&script, std::path::Path::new("canned.yaml"))
///             .map(|m| Arc::new(m) as _)
///             .map_err(|e| e.to_string())
///     }))
///     .unwrap();
/// assert!(providers.get("canned").is_some());
/// assert!(CustomProviders::new().with("openai", Arc::new(|_: &str| Err("no".into()))).is_err());
/// ```
#[derive(Clone, Default)]
pub struct CustomProviders {
    factories: std::collections::BTreeMap<String, ProviderFactory>,
}

/// The provider names the runtime itself knows; an application may not take them.
pub const BUILTIN_PROVIDERS: [&str; 4] = ["anthropic", "openai", "bedrock", "script"];

impl CustomProviders {
    /// No providers of the application's own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `factory` under `name`; `Err` when the name is a built-in provider's, empty, or
    /// holds a `:`.
    pub fn with(mut self, name: &str, factory: ProviderFactory) -> Result<Self, String> {
        if BUILTIN_PROVIDERS.contains(&name) {
            return Err(format!(
                "`{name}` is a built-in model provider; give yours another name"
            ));
        }
        if name.is_empty() || name.contains(':') {
            return Err(format!(
                "`{name}` is not a provider name (non-empty, no `:`)"
            ));
        }
        self.factories.insert(name.to_owned(), factory);
        Ok(self)
    }

    /// The factory added under `name`.
    pub fn get(&self, name: &str) -> Option<&ProviderFactory> {
        self.factories.get(name)
    }
}

impl std::fmt::Debug for CustomProviders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.factories.keys()).finish()
    }
}

/// Loads an agent from its file: resolves the model (or `options.model`), fetches the skills
/// that load from a url, and reads the rest. Every host loads agents through this.
///
/// ```
/// use infinity_agent_core::agent::AgentFile;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("hi.script.yaml"), "rules:\n  - reply: {text: hi}\n")?;
/// let path = dir.path().join("agent.yaml");
/// std::fs::write(&path, "name: greeter\nmodel: script:hi.script.yaml\nsystem: You greet.\n")?;
///
/// let file = AgentFile::load(&path)?;
/// let agent = infinity_models::load_agent(&file, Default::default()).await?;
/// assert_eq!(agent.name, "greeter");
/// assert!(agent.model.name().ends_with("hi.script.yaml"));
///
/// // A model the file cannot have is an error naming the agent and the model.
/// let bad = AgentFile::parse("name: x\nmodel: nosuch:model\n", &path)?;
/// let error = infinity_models::load_agent(&bad, Default::default()).await.unwrap_err();
/// assert!(error.to_string().contains("nosuch:model"), "{error}");
/// # Ok(())
/// # }
/// ```
pub async fn load_agent(
    file: &AgentFile,
    options: LoadOptions,
) -> Result<AgentSpec, LoadAgentError> {
    let (spec, base) = match &options.model {
        Some(m) => (m.clone(), std::path::PathBuf::from(".")),
        None => (
            file.model.clone(),
            file.path.parent().map(Path::to_owned).unwrap_or_default(),
        ),
    };
    let model_error = |source: ResolveError| LoadAgentError::Model {
        agent: file.name.clone(),
        model: spec.clone(),
        source,
    };
    let parsed = ModelSpec::parse(&spec).map_err(|e| {
        LoadAgentError::File(AgentFileError::Invalid {
            path: file.path.clone(),
            key: "model",
            reason: e.to_string(),
        })
    })?;
    let model = match options.providers.get(&parsed.provider) {
        Some(factory) => {
            factory(&parsed.model).map_err(|why| model_error(ResolveError::Custom(why)))?
        }
        None => resolve_model_with_key(&parsed, &base, options.key)
            .await
            .map_err(model_error)?,
    };
    let fetched = fetch::fetch_skills(file).await?;
    Ok(AgentSpec::from_file(file, model, &fetched)?)
}

/// Builds the provider a model spec names: `anthropic:MODEL` (`ANTHROPIC_API_KEY`,
/// `ANTHROPIC_BASE_URL`), `openai:MODEL` (`OPENAI_API_KEY`, `OPENAI_BASE_URL`), or what the core
/// knows (`script:PATH`, relative to `base`), or `bedrock:MODEL_ID` (AWS credentials and region
/// from the environment).
pub async fn resolve_model(
    spec: &ModelSpec,
    base: &Path,
) -> Result<Arc<dyn ModelProvider>, ResolveError> {
    resolve_model_with_key(spec, base, None).await
}

/// Like [`resolve_model`], with the API key given (e.g. read from SSM Parameter Store on
/// Lambda) instead of taken from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`; base URLs still come
/// from the environment.
pub async fn resolve_model_with_key(
    spec: &ModelSpec,
    base: &Path,
    key: Option<String>,
) -> Result<Arc<dyn ModelProvider>, ResolveError> {
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
        _ => Ok(resolve_core_model(spec, base)?),
    }
}
