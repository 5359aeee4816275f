//! The AWS host of Infinity.
//!
//! - [`store::DynamoThreadStore`]: threads in one DynamoDB table.
//! - [`queue`]: the SQS FIFO input queue ([`queue::SqsInputSender`]), timers through the relay
//!   queue and EventBridge Scheduler ([`queue::AwsTimers`]), and the output queue.
//! - [`handler`]: the agent and relay Lambda handlers (the same code the local poller runs).
//! - [`tool_servers`]: RAP on AWS: the agent function's client (signed callback URLs, SigV4 or
//!   bearer auth) and the callback function behind a Function URL.
//! - [`artifacts`]: published pages in the stack's S3 bucket.
//! - [`front`]: what people send a stack's threads, checked as on every host, and its output
//!   events followed (`infinity serve --aws`).
//! - [`local`]: the dev tools that stand in for Lambda's event source and for Scheduler when
//!   running against emulators.
#![warn(missing_docs)]

pub mod artifacts;
pub mod catalog;
pub mod config;
pub mod dlq;
pub mod front;
pub mod handler;
mod item;
pub mod knowledge;
pub mod lambda;
pub mod local;
pub mod migration;
pub mod queue;
pub mod remotes;
pub mod store;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod tool_servers;
pub mod wire;

/// Sets up `tracing` for Lambda: JSON lines when `AWS_LAMBDA_LOG_FORMAT=JSON`, filtered by
/// `RUST_LOG` (default `info`); and traces over OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` says
/// where (each handler sends them before its invocation returns: see
/// [`infinity_agent_core::telemetry::flush`]).
pub fn init_lambda_tracing() {
    use tracing_subscriber::Layer;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|v| v.eq_ignore_ascii_case("json"));
    let logs = tracing_subscriber::fmt::layer()
        .with_target(false)
        .without_time();
    let logs = if json {
        logs.json().with_filter(filter).boxed()
    } else {
        logs.with_filter(filter).boxed()
    };
    let service = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "infinity".into());
    infinity_agent_core::telemetry::install(logs, &service);
}
