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
