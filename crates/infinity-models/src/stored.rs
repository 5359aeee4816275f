//! Loading a stored agent version (see [`infinity_agent_core::catalog`]): like
//! [`crate::load_agent`], except that a scripted model's script stored with the version is used
//! as stored, so a version runs the same wherever it is loaded (a Lambda has no copy of the
//! folder it was saved from).

use std::sync::Arc;

use infinity_agent_core::agent::AgentSpec;
use infinity_agent_core::catalog::StoredAgent;
use infinity_agent_core::scripted::ScriptedModel;

use crate::{fetch, load_agent, LoadAgentError, LoadOptions, ResolveError};

/// The runnable definition of a stored version, its [`AgentSpec::version`] set.
pub async fn load_stored_agent(
    stored: &StoredAgent,
    options: LoadOptions,
) -> Result<AgentSpec, LoadAgentError> {
    let file = stored.agent_file()?;
    let script = file
        .model
        .strip_prefix("script:")
        .and_then(|path| stored.files.get(path).map(|text| (path, text)));
    let mut spec = match script {
        Some((path, text)) if options.model.is_none() => {
            let model = ScriptedModel::parse(text, &file.resolve_path(path)).map_err(|e| {
                LoadAgentError::Model {
                    agent: file.name.clone(),
                    model: file.model.clone(),
                    source: ResolveError::Custom(e.to_string()),
                }
            })?;
            let fetched = fetch::fetch_skills(&file).await?;
            AgentSpec::from_file(&file, Arc::new(model), &fetched)?
        }
        _ => load_agent(&file, options).await?,
    };
    spec.version = Some(stored.version);
    Ok(spec)
}

/// Makes the models people switch threads to (`use_model`, see
/// [`infinity_agent_core::library::ModelSource`]): every provider [`crate::load_agent`] knows,
/// the application's own included, script paths relative to `base`.
#[derive(Debug, Clone)]
pub struct SpecModels {
    base: std::path::PathBuf,
    key: Option<String>,
    providers: crate::CustomProviders,
}

impl SpecModels {
    /// Models with keys from the environment; `script:` paths relative to `base`.
    pub fn new(base: impl Into<std::path::PathBuf>) -> Self {
        Self {
            base: base.into(),
            key: None,
            providers: crate::CustomProviders::new(),
        }
    }

    /// Uses `key` as the API key (as [`crate::LoadOptions::with_key`]).
    pub fn with_key(mut self, key: Option<String>) -> Self {
        self.key = key;
        self
    }

    /// Makes the application's own providers too.
    pub fn with_providers(mut self, providers: crate::CustomProviders) -> Self {
        self.providers = providers;
        self
    }
}

#[async_trait::async_trait]
impl infinity_agent_core::library::ModelSource for SpecModels {
    async fn make(
        &self,
        spec: &str,
    ) -> Result<
        std::sync::Arc<dyn infinity_agent_core::model::ModelProvider>,
        infinity_agent_core::library::ModelSourceError,
    > {
        use infinity_agent_core::library::ModelSourceError;
        let parsed = infinity_agent_core::agent::ModelSpec::parse(spec)
            .map_err(|e| ModelSourceError::UnknownProvider(e.to_string()))?;
        if let Some(factory) = self.providers.get(&parsed.provider) {
            return factory(&parsed.model).map_err(ModelSourceError::CannotMake);
        }
        crate::resolve_model_with_key(&parsed, &self.base, self.key.clone())
            .await
            .map_err(|e| match e {
                crate::ResolveError::Core(
                    infinity_agent_core::agent::CoreModelError::UnknownProvider(_),
                ) => ModelSourceError::UnknownProvider(e.to_string()),
                _ => ModelSourceError::CannotMake(e.to_string()),
            })
    }
}
