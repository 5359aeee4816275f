//! The callback Lambda, behind a Function URL: RAP callbacks from tool servers in, inputs on
//! the thread's FIFO queue out. Each callback URL carries an HMAC signature for its thread and
//! call, so the Function URL needs no IAM auth; forged, altered or expired URLs get 401/403.

use std::sync::Arc;

use aws_lambda_events::event::lambda_function_urls::{
    LambdaFunctionUrlRequest, LambdaFunctionUrlResponse,
};
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::queue::SqsInputSender;
use infinity_aws::tool_servers::{callback_secret_from_env, CallbackHandler};
use infinity_rap::signing::CallbackSigner;
use lambda_runtime::{service_fn, Error, LambdaEvent};

#[tokio::main]
async fn main() -> Result<(), Error> {
    infinity_aws::init_lambda_tracing();
    let config = AwsConfig::from_env()?;
    let clients = Clients::from_env().await;
    // Checking a URL needs only the secret, not the function's own URL.
    let signer = CallbackSigner::new(callback_secret_from_env().await?, "")?;
    // A tool's result may be bigger than a message: it is then stored in the table.
    let sender = SqsInputSender::for_deployment(&clients, &config);
    let handler = Arc::new(CallbackHandler::new(signer, sender));
    lambda_runtime::run(service_fn(
        move |event: LambdaEvent<LambdaFunctionUrlRequest>| {
            let handler = Arc::clone(&handler);
            async move {
                let response = handler.handle(event.payload).await;
                infinity_agent_core::telemetry::flush().await;
                Ok::<LambdaFunctionUrlResponse, Error>(response)
            }
        },
    ))
    .await
}
