//! The agent Lambda: SQS FIFO input queue -> one slice per thread per batch.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use infinity_agent_core::store::ThreadStore;
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{agent_from_env, AgentHandler};
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    infinity_aws::init_lambda_tracing();
    // Everything below runs once per cold start: configuration, clients, the agent.
    let config = AwsConfig::from_env()?;
    let clients = Clients::from_env().await;
    let agent = agent_from_env().await?;
    let tool_servers = infinity_aws::tool_servers::rap_client_for(&agent).await?;
    let handler =
        Arc::new(AgentHandler::new(&clients, &config, agent).with_tool_servers(tool_servers));
    // Warm the connection pool so the first slice does not pay for the TLS handshake.
    let warm = infinity_agent_core::ids::ThreadId::new("warm-up")?;
    if let Err(err) = handler.store().load_record(&warm).await {
        tracing::warn!(%err, "warming the DynamoDB connection failed");
    }
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handler = Arc::clone(&handler);
        async move { Ok::<SqsBatchResponse, Error>(handler.handle(event.payload).await) }
    }))
    .await
}
