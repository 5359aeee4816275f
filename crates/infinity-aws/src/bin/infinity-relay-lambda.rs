//! The relay Lambda: forwards due timers to the input queue, delays the others again.

use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::RelayHandler;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    infinity_aws::init_lambda_tracing();
    let config = AwsConfig::from_env()?;
    let clients = Clients::from_env().await;
    let handler = Arc::new(RelayHandler::new(&clients, &config));
    lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| {
        let handler = Arc::clone(&handler);
        async move {
            let response = handler.handle(event.payload).await;
            infinity_agent_core::telemetry::flush().await;
            Ok::<SqsBatchResponse, Error>(response)
        }
    }))
    .await
}
