//! `infinity-local`: runs the real agent and relay handlers against the local emulators
//! (polling the queues like Lambda's event sources) and fires due Scheduler schedules.
//! Configuration: the same environment as the Lambda functions (`source infra/local/env.sh`),
//! plus `INFINITY_AGENT_FILE` or `INFINITY_AGENT_YAML`.

use std::sync::Arc;

use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{agent_from_env, AgentHandler};
use infinity_aws::local::LocalRunner;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let setup = async {
        let config = AwsConfig::from_env()?;
        let clients = Clients::from_env().await;
        let agent = agent_from_env().await?;
        let handler = Arc::new(AgentHandler::new(&clients, &config, agent));
        Ok::<_, Box<dyn std::error::Error>>(LocalRunner::new(clients, config, handler))
    };
    match setup.await {
        Ok(runner) => {
            tracing::info!("polling the input and relay queues and pumping schedules");
            tokio::select! {
                _ = runner.run() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(err) => {
            eprintln!("infinity-local: {err}");
            std::process::exit(1);
        }
    }
}
