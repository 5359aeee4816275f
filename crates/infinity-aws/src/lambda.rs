//! A deployment's agent Lambda, assembled: the agent file from the environment, the
//! application's own tools and model providers beside the built-in ones, the tool servers, the
//! clients, and the Lambda runtime loop. The stock `infinity-agent-lambda` binary is
//! `AgentLambda::new().run()`; an application's is the same with its tools:
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use infinity_agent_core::model::ToolSpec;
//! use infinity_agent_core::tools::{Tool, ToolContext, ToolOutcome};
//! use infinity_aws::lambda::AgentLambda;
//!
//! /// Counts the words of a text.
//! #[derive(Debug)]
//! struct WordCount;
//!
//! impl Tool for WordCount {
//!     fn spec(&self) -> ToolSpec {
//!         ToolSpec::new(
//!             "word_count",
//!             "Counts the words of `text`.",
//!             serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}},
//!                                "required": ["text"]}),
//!         )
//!     }
//!
//!     fn call(&self, args: &serde_json::Value, _: &mut ToolContext<'_>) -> ToolOutcome {
//!         let text = args["text"].as_str().unwrap_or_default();
//!         ToolOutcome::ok(text.split_whitespace().count().to_string())
//!     }
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), lambda_runtime::Error> {
//!     AgentLambda::new().with_tool(Arc::new(WordCount)).run().await
//! }
//! ```
//!
//! The same tool values go to the embedded runtime with
//! `AgentSystemBuilder::with_tool`, so a tool behaves the same on both hosts (see
//! docs/rust-api.md and `examples/custom-tool`).

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use infinity_agent_core::agent::Agent;
use infinity_agent_core::store::ThreadStore;
use infinity_agent_core::tools::Tool;
use infinity_models::CustomProviders;
use lambda_runtime::{service_fn, LambdaEvent};

use crate::config::{AwsConfig, Clients};
use crate::handler::{agent_from_env_with, AgentHandler, SetupError};

/// How an agent Lambda is put together. Build it once per cold start.
#[derive(Debug, Default, Clone)]
pub struct AgentLambda {
    tools: Vec<Arc<dyn Tool>>,
    providers: CustomProviders,
}

impl AgentLambda {
    /// The stock agent Lambda: the built-in tools, `set_title`, and the built-in providers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an application tool, offered to the agent beside the built-in ones. A name that
    /// clashes with another tool is an error when the agent is built.
    pub fn with_tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds the application's own model providers (`model: PROVIDER:MODEL` in the agent file).
    pub fn with_providers(mut self, providers: CustomProviders) -> Self {
        self.providers = providers;
        self
    }

    /// The deployment's agent (`INFINITY_AGENT_YAML` or `INFINITY_AGENT_FILE`) with these tools
    /// and providers.
    pub async fn agent_from_env(&self) -> Result<Arc<Agent>, SetupError> {
        agent_from_env_with(&self.tools, &self.providers).await
    }

    /// The handler, from the environment: configuration, AWS clients, the agent, its tool
    /// servers.
    pub async fn handler_from_env(&self) -> Result<AgentHandler, lambda_runtime::Error> {
        let config = AwsConfig::from_env()?;
        let clients = Clients::from_env().await;
        let stored_default = std::env::var("INFINITY_DEFAULT_AGENT")
            .ok()
            .filter(|s| !s.trim().is_empty());
        let handler = match self.agent_from_env().await {
            Ok(agent) => {
                let tool_servers = crate::tool_servers::rap_client_for(&agent).await?;
                AgentHandler::new(&clients, &config, agent).with_tool_servers(tool_servers)
            }
            // No agent of its own: the deployment runs the agents stored in its table.
            Err(SetupError::NoAgent) if stored_default.is_some() => {
                let name = stored_default.unwrap_or_default();
                let tool_servers = crate::tool_servers::rap_client_without_agent().await?;
                AgentHandler::for_stored(&clients, &config, name).with_tool_servers(tool_servers)
            }
            Err(err) => return Err(err.into()),
        };
        Ok(handler.with_stored_agents(&self.tools, &self.providers))
    }

    /// Runs the agent Lambda: tracing, the handler built once, then the Lambda runtime loop
    /// (one SQS batch per invocation).
    pub async fn run(self) -> Result<(), lambda_runtime::Error> {
        crate::init_lambda_tracing();
        let handler = Arc::new(self.handler_from_env().await?);
        // Warm the connection pool so the first slice does not pay for the TLS handshake.
        let warm = infinity_agent_core::ids::ThreadId::new("warm-up")?;
        if let Err(err) = handler.store().load_record(&warm).await {
            tracing::warn!(%err, "warming the DynamoDB connection failed");
        }
        lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
            let handler = Arc::clone(&handler);
            // The invocation's deadline, as a point on the monotonic clock the slices read.
            let left = event
                .context
                .deadline()
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            let deadline = tokio::time::Instant::now() + left;
            async move {
                let response = handler.handle_until(event.payload, Some(deadline)).await;
                // The slices' spans go out before the environment may freeze.
                infinity_agent_core::telemetry::flush().await;
                Ok::<SqsBatchResponse, lambda_runtime::Error>(response)
            }
        }))
        .await
    }
}
