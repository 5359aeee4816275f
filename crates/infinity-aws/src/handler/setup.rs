//! Setting the agent function up: the deployment's own agent from its environment, the model
//! key from SSM, and the builder of the agents stored in its table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use infinity_agent_core::agent::{Agent, AgentFile};
use infinity_agent_core::catalog::{
    describe_sub_agents, AgentBuilder, AgentCatalog, BuildError, StoredAgent,
};
use infinity_agent_core::tools::{SetTitle, Tool};

/// Why the agent could not be set up (at init: the function fails to start, loudly).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// Neither `INFINITY_AGENT_YAML` nor `INFINITY_AGENT_FILE` is set.
    #[error(
        "set INFINITY_AGENT_YAML (the agent file's content) or INFINITY_AGENT_FILE (its path)"
    )]
    NoAgent,
    /// The agent file is invalid.
    #[error(transparent)]
    AgentFile(#[from] infinity_agent_core::agent::AgentFileError),
    /// The model key could not be read from SSM.
    #[error("cannot read the model key: {0}")]
    ModelKey(SsmError),
    /// The agent could not be loaded (its model, its skills).
    #[error(transparent)]
    Load(#[from] infinity_models::LoadAgentError),
    /// An application tool could not be registered.
    #[error(transparent)]
    Tool(#[from] infinity_agent_core::tools::RegistryError),
}

/// An SSM parameter that could not be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot read SSM parameter {name}: {reason}")]
pub struct SsmError {
    /// The parameter.
    pub name: String,
    /// Why.
    pub reason: String,
}

/// Loads the deployment's agent from `INFINITY_AGENT_YAML` (content; relative paths resolve
/// against `INFINITY_AGENT_DIR`, default the working folder) or `INFINITY_AGENT_FILE` (a path).
pub async fn agent_from_env() -> Result<Arc<Agent>, SetupError> {
    agent_from_env_with(&[], &infinity_models::CustomProviders::new()).await
}

/// [`agent_from_env`] with the application's own tools (beside the built-in ones and
/// `set_title`) and model providers; see [`crate::lambda::AgentLambda`].
pub async fn agent_from_env_with(
    tools: &[Arc<dyn Tool>],
    providers: &infinity_models::CustomProviders,
) -> Result<Arc<Agent>, SetupError> {
    let file = match (
        std::env::var("INFINITY_AGENT_YAML")
            .ok()
            .filter(|s| !s.trim().is_empty()),
        std::env::var("INFINITY_AGENT_FILE")
            .ok()
            .filter(|s| !s.trim().is_empty()),
    ) {
        (Some(text), _) => {
            let dir = std::env::var("INFINITY_AGENT_DIR").unwrap_or_else(|_| ".".into());
            AgentFile::parse(&text, &Path::new(&dir).join("INFINITY_AGENT_YAML"))?
        }
        (None, Some(path)) => AgentFile::load(&PathBuf::from(path))?,
        (None, None) => return Err(SetupError::NoAgent),
    };
    build_agent_with(&file, tools, providers).await
}

/// The model API key from the SSM parameter named by `INFINITY_MODEL_KEY_PARAMETER` (a
/// SecureString, decrypted), when that variable is set. The key is never logged.
async fn model_key_from_ssm() -> Result<Option<String>, SsmError> {
    let Some(name) = std::env::var("INFINITY_MODEL_KEY_PARAMETER")
        .ok()
        .filter(|n| !n.trim().is_empty())
    else {
        return Ok(None);
    };
    read_ssm_parameter(&name).await.map(Some)
}

/// An SSM parameter's value, decrypted (a SecureString, or a Secrets Manager secret through
/// `/aws/reference/secretsmanager/NAME`). The value is never logged.
pub async fn read_ssm_parameter(name: &str) -> Result<String, SsmError> {
    let error = |reason: String| SsmError {
        name: name.to_owned(),
        reason,
    };
    let shared = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let out = aws_sdk_ssm::Client::new(&shared)
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
        .map_err(|e| {
            error(
                e.as_service_error()
                    .map(|s| format!("{s:?}"))
                    .unwrap_or_else(|| e.to_string()),
            )
        })?;
    out.parameter()
        .and_then(|p| p.value())
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| error("it is empty".to_owned()))
}

/// Builds a runnable agent from an agent file, through the loader every host shares: its
/// model (the key from SSM when `INFINITY_MODEL_KEY_PARAMETER` names one), its skills, the
/// built-in and internal tools, and `set_title`.
pub async fn build_agent(file: &AgentFile) -> Result<Arc<Agent>, SetupError> {
    build_agent_with(file, &[], &infinity_models::CustomProviders::new()).await
}

/// [`build_agent`] with the application's own tools and model providers.
pub async fn build_agent_with(
    file: &AgentFile,
    tools: &[Arc<dyn Tool>],
    providers: &infinity_models::CustomProviders,
) -> Result<Arc<Agent>, SetupError> {
    let mut options = infinity_models::LoadOptions::default().with_providers(providers.clone());
    if let Some(key) = model_key_from_ssm().await.map_err(SetupError::ModelKey)? {
        options = options.with_key(key);
    }
    let spec = infinity_models::load_agent(file, options).await?;
    let mut all: Vec<Arc<dyn Tool>> = vec![Arc::new(SetTitle)];
    all.extend(tools.iter().cloned());
    Ok(Arc::new(Agent::from_spec(
        spec,
        &infinity_library::categories(),
        &all,
    )?))
}

/// Builds the stored agents a thread names, with the deployment's tools and providers.
pub(super) struct StoredAgentBuilder {
    pub(super) tools: Vec<Arc<dyn Tool>>,
    pub(super) providers: infinity_models::CustomProviders,
    pub(super) catalog: Arc<dyn AgentCatalog>,
}

#[async_trait]
impl AgentBuilder for StoredAgentBuilder {
    async fn build(&self, stored: &StoredAgent) -> Result<Agent, BuildError> {
        let mut options =
            infinity_models::LoadOptions::default().with_providers(self.providers.clone());
        // The key's parameter unreadable now (throttled, a network error): tried again later.
        if let Some(key) = model_key_from_ssm()
            .await
            .map_err(|e| BuildError::Unavailable(e.to_string()))?
        {
            options = options.with_key(key);
        }
        let mut spec = infinity_models::stored::load_stored_agent(stored, options)
            .await
            .map_err(BuildError::invalid)?;
        describe_sub_agents(self.catalog.as_ref(), &mut spec).await;
        let mut all: Vec<Arc<dyn Tool>> = vec![Arc::new(SetTitle)];
        all.extend(self.tools.iter().cloned());
        Agent::from_spec(spec, &infinity_library::categories(), &all).map_err(BuildError::invalid)
    }
}

/// The variable that lists the models people may switch a deployment's threads to; the
/// template's `AllowedModels` parameter sets it on every function.
pub use infinity_agent_core::library::ALLOWED_MODELS_VAR;

/// The models people may switch this deployment's threads to (`INFINITY_ALLOWED_MODELS`; none
/// when unset), besides each thread's agent's own.
pub fn allowed_models_from_env() -> infinity_agent_core::library::AllowedModels {
    let listed = std::env::var(ALLOWED_MODELS_VAR).unwrap_or_default();
    infinity_agent_core::library::AllowedModels::new(
        infinity_agent_core::library::AllowedModels::split_list(&listed),
        format!("the stack's `AllowedModels` parameter (`{ALLOWED_MODELS_VAR}`)"),
    )
}

/// The models people switch a deployment's threads to (`use_model`): every provider the
/// runtime has, the API key read from SSM (`INFINITY_MODEL_KEY_PARAMETER`) the first time one
/// is made. Asked only for specs the deployment lists ([`allowed_models_from_env`]).
#[derive(Debug, Default)]
pub struct DeploymentModels {
    models: tokio::sync::OnceCell<infinity_models::stored::SpecModels>,
}

#[async_trait::async_trait]
impl infinity_agent_core::library::ModelSource for DeploymentModels {
    async fn make(
        &self,
        spec: &str,
    ) -> Result<
        Arc<dyn infinity_agent_core::model::ModelProvider>,
        infinity_agent_core::library::ModelSourceError,
    > {
        let models = self
            .models
            .get_or_try_init(|| async {
                let key = model_key_from_ssm().await.map_err(|e| {
                    infinity_agent_core::library::ModelSourceError::CannotMake(e.to_string())
                })?;
                Ok(infinity_models::stored::SpecModels::new(".").with_key(key))
            })
            .await?;
        infinity_agent_core::library::ModelSource::make(models, spec).await
    }
}
