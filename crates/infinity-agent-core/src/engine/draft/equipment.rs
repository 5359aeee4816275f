//! What the slice runs with, fixed when it is admitted: the thread's agent, the model that
//! answers, the tools the thread is offered, and the host's library.

use std::sync::Arc;

use crate::agent::Agent;
use crate::library::Library;
use crate::model::{ModelProvider, ToolSpec};
use crate::tools::{OfferedTools, ToolRegistry};

/// What the slice runs with. Nothing changes it once the slice is admitted.
pub(in crate::engine) struct Equipment<'a> {
    agent: Arc<Agent>,
    /// The agent's model, or the one a person switched the thread to.
    model: Arc<dyn ModelProvider>,
    /// The conversation's tools from tool servers, compiled.
    conversation_tools: Option<Arc<ToolRegistry>>,
    /// The specs this thread is offered, when they are not simply the agent's.
    offered: Option<Vec<ToolSpec>>,
    library: Option<&'a Library>,
}

impl<'a> Equipment<'a> {
    pub(in crate::engine) fn new(
        agent: Arc<Agent>,
        model: Arc<dyn ModelProvider>,
        conversation_tools: Option<Arc<ToolRegistry>>,
        offered: Option<Vec<ToolSpec>>,
        library: Option<&'a Library>,
    ) -> Self {
        Self {
            agent,
            model,
            conversation_tools,
            offered,
            library,
        }
    }

    /// The thread's agent: its limits, policies, approvals and system prompt.
    pub(in crate::engine) fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// The model that answers the slice's completions.
    pub(in crate::engine) fn model(&self) -> &Arc<dyn ModelProvider> {
        &self.model
    }

    /// The host's library, for the tools and inputs that read it (`None`: it keeps none).
    pub(in crate::engine) fn library(&self) -> Option<&'a Library> {
        self.library
    }

    /// The tools the thread may call: its agent's, then its conversation's.
    pub(in crate::engine) fn tools(&self) -> OfferedTools<'_> {
        OfferedTools::new(&self.agent.tools, self.conversation_tools.as_deref())
    }

    /// The specs of the tools the model is offered.
    pub(in crate::engine) fn specs(&self) -> &[ToolSpec] {
        self.offered
            .as_deref()
            .unwrap_or_else(|| self.agent.tools.specs())
    }
}
