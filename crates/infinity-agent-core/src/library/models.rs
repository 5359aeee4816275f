//! Models a person switches a thread to (`use_model`): made from their spec (`PROVIDER:MODEL`) by
//! the host's [`ModelSource`] before a slice that needs one, and kept. Only the specs the
//! deployment lists ([`AllowedModels`]) are made: a spec comes from a request, and `script:PATH`
//! would otherwise read any file the host can read.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;

use crate::model::ModelProvider;

/// Makes model providers from specs (`infinity_models::SpecModels` makes every provider the
/// runtime has).
#[async_trait]
pub trait ModelSource: Send + Sync + fmt::Debug {
    /// The provider `spec` names; an error says why there is none (an unknown provider, a
    /// missing key).
    async fn make(&self, spec: &str) -> Result<Arc<dyn ModelProvider>, ModelSourceError>;
}

/// Why a thread cannot switch to a model: a kind to match on, each with the text a person reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelSourceError {
    /// The deployment does not list the spec ([`AllowedModels::check`]): the text names the
    /// spec, the list and where it is set.
    #[error("{0}")]
    NotAllowed(String),
    /// This host makes no models for threads (its library has no [`ModelSource`]).
    #[error("this host cannot switch a thread's model")]
    NoSource,
    /// The spec is not `PROVIDER:MODEL`, or names a provider the host does not have.
    #[error("{0}")]
    UnknownProvider(String),
    /// The provider is known but the model cannot be made: a missing key (or one that could not
    /// be read), a script that does not load, an application's provider that refused it.
    #[error("{0}")]
    CannotMake(String),
}

/// The variable every host reads the allowed models from: comma-separated `PROVIDER:MODEL`
/// specs ([`AllowedModels::split_list`]).
pub const ALLOWED_MODELS_VAR: &str = "INFINITY_ALLOWED_MODELS";

/// The model specs a deployment lets people switch its threads to, compared as written (a
/// `script:` path in the list is resolved by the host's [`ModelSource`], never one from a
/// request). A thread's agent's own model needs no listing: switching back to it is
/// `use_model(None)`, and naming it is the same (see
/// [`crate::runtime::Front::use_model`]). Empty (the default): threads keep their agent's model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedModels {
    specs: Vec<String>,
    set_in: String,
}

impl AllowedModels {
    /// The specs in `specs` (blank ones skipped, each once); `set_in` says where a person sets
    /// the list (a refusal names it), e.g. "`--allow-model` or `INFINITY_ALLOWED_MODELS`".
    pub fn new(specs: impl IntoIterator<Item = String>, set_in: impl Into<String>) -> Self {
        let mut list: Vec<String> = Vec::new();
        for spec in specs {
            let spec = spec.trim();
            if !spec.is_empty() && !list.iter().any(|s| s == spec) {
                list.push(spec.to_owned());
            }
        }
        Self {
            specs: list,
            set_in: set_in.into(),
        }
    }

    /// The specs of a comma-separated list (as `INFINITY_ALLOWED_MODELS` holds them).
    pub fn split_list(text: &str) -> impl Iterator<Item = String> + '_ {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }

    /// The listed specs, in the order they were given.
    pub fn specs(&self) -> &[String] {
        &self.specs
    }

    /// Where the list is set, as a refusal says it.
    pub fn set_in(&self) -> &str {
        &self.set_in
    }

    /// `Ok` when `spec` is listed; otherwise why not, naming the spec and where the list is set.
    /// Decided on the spec's text alone: nothing it names is read.
    pub fn check(&self, spec: &str) -> Result<(), ModelSourceError> {
        if self.specs.iter().any(|s| s == spec) {
            return Ok(());
        }
        let listed = if self.specs.is_empty() {
            "it allows none besides the thread's agent's own".to_owned()
        } else {
            format!(
                "it allows {} and the thread's agent's own",
                self.specs
                    .iter()
                    .map(|s| format!("`{s}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let set_in = if self.set_in.is_empty() {
            String::new()
        } else {
            format!("; the list is set with {}", self.set_in)
        };
        Err(ModelSourceError::NotAllowed(format!(
            "the model `{spec}` is not one this deployment lets threads switch to ({listed}{set_in})"
        )))
    }
}

/// A source, the specs it may make, and the providers it made, by spec.
#[derive(Debug)]
pub(super) struct ModelShelf {
    source: Arc<dyn ModelSource>,
    allowed: AllowedModels,
    made: Mutex<HashMap<String, Arc<dyn ModelProvider>>>,
}

impl ModelShelf {
    pub(super) fn new(source: Arc<dyn ModelSource>, allowed: AllowedModels) -> Self {
        Self {
            source,
            allowed,
            made: Mutex::new(HashMap::new()),
        }
    }

    pub(super) fn allowed(&self) -> &AllowedModels {
        &self.allowed
    }

    /// Makes `spec`'s model if the list allows it: checked first, so a spec that is not listed
    /// never reaches the source (and a `script:` path in it is never read).
    pub(super) async fn prepare(&self, spec: &str) -> Result<(), ModelSourceError> {
        self.allowed.check(spec)?;
        if self.get(spec).is_some() {
            return Ok(());
        }
        let model = self.source.make(spec).await?;
        self.made
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(spec.to_owned(), model);
        Ok(())
    }

    pub(super) fn get(&self, spec: &str) -> Option<Arc<dyn ModelProvider>> {
        self.made
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(spec)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A source that says so when it is asked at all.
    #[derive(Debug)]
    struct Refusing;

    #[async_trait]
    impl ModelSource for Refusing {
        async fn make(&self, spec: &str) -> Result<Arc<dyn ModelProvider>, ModelSourceError> {
            Err(ModelSourceError::CannotMake(format!(
                "the source was asked for {spec}"
            )))
        }
    }

    #[tokio::test]
    async fn a_spec_that_is_not_listed_never_reaches_the_source() {
        let allowed = AllowedModels::new(
            AllowedModels::split_list(" openai:gpt-4.1, ,script:demo.yaml,openai:gpt-4.1"),
            "`INFINITY_ALLOWED_MODELS`",
        );
        assert_eq!(allowed.specs(), ["openai:gpt-4.1", "script:demo.yaml"]);
        let shelf = ModelShelf::new(Arc::new(Refusing), allowed);
        let refused = shelf.prepare("script:/etc/passwd").await.unwrap_err();
        assert!(matches!(refused, ModelSourceError::NotAllowed(_)));
        let refused = refused.to_string();
        assert!(
            refused.contains("`script:/etc/passwd`")
                && refused.contains("`INFINITY_ALLOWED_MODELS`")
                && !refused.contains("the source was asked"),
            "{refused}"
        );
        let asked = shelf.prepare("script:demo.yaml").await.unwrap_err();
        assert!(
            matches!(&asked, ModelSourceError::CannotMake(why) if why.contains("the source was asked")),
            "{asked}"
        );
        let none = ModelShelf::new(Arc::new(Refusing), AllowedModels::default());
        let refused = none.prepare("openai:gpt-4.1").await.unwrap_err();
        assert!(refused.to_string().contains("allows none"), "{refused}");
    }
}
