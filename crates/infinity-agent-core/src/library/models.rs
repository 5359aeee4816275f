//! Models a person switches a thread to (`use_model`): made from their spec (`PROVIDER:MODEL`) by
//! the host's [`ModelSource`] before a slice that needs one, and kept.

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
    async fn make(&self, spec: &str) -> Result<Arc<dyn ModelProvider>, String>;
}

/// A source and the providers it made, by spec.
#[derive(Debug)]
pub(super) struct ModelShelf {
    source: Arc<dyn ModelSource>,
    made: Mutex<HashMap<String, Arc<dyn ModelProvider>>>,
}

impl ModelShelf {
    pub(super) fn new(source: Arc<dyn ModelSource>) -> Self {
        Self {
            source,
            made: Mutex::new(HashMap::new()),
        }
    }

    pub(super) async fn prepare(&self, spec: &str) -> Result<(), String> {
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
