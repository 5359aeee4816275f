//! `infinity-local`: runs the real agent and relay handlers against the local emulators
//! (polling the queues like Lambda's event sources) and fires due Scheduler schedules.
//! Configuration: the same environment as the Lambda functions (`source infra/local/env.sh`),
//! plus `INFINITY_AGENT_FILE` or `INFINITY_AGENT_YAML`, or `INFINITY_DEFAULT_AGENT` naming an
//! agent stored in the table (`infinity agents save`). When the agent has tool servers it also
//! serves the callback function's handler on the port of `INFINITY_CALLBACK_URL` (with
//! `INFINITY_CALLBACK_SECRET`), as the Function URL does on AWS.

use std::sync::Arc;

use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{agent_from_env, AgentHandler, SetupError};
use infinity_aws::local::LocalRunner;

#[tokio::main]
async fn main() {
    use tracing_subscriber::Layer;
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        );
    infinity_agent_core::telemetry::install(logs, "infinity-local");
    let setup = async {
        let config = AwsConfig::from_env()?;
        let clients = Clients::from_env().await;
        let stored_default = std::env::var("INFINITY_DEFAULT_AGENT")
            .ok()
            .filter(|s| !s.trim().is_empty());
        let handler = match (agent_from_env().await, stored_default) {
            (Ok(agent), _) => {
                let tool_servers = infinity_aws::tool_servers::rap_client_for(&agent).await?;
                if tool_servers.is_some() {
                    serve_callbacks(&clients, &config).await?;
                }
                AgentHandler::new(&clients, &config, agent).with_tool_servers(tool_servers)
            }
            (Err(SetupError::NoAgent), Some(name)) => {
                let tool_servers = infinity_aws::tool_servers::rap_client_without_agent().await?;
                if tool_servers.is_some() {
                    serve_callbacks(&clients, &config).await?;
                }
                AgentHandler::for_stored(&clients, &config, name).with_tool_servers(tool_servers)
            }
            (Err(err), _) => return Err(err.into()),
        };
        let handler =
            Arc::new(handler.with_stored_agents(&[], &infinity_models::CustomProviders::new()));
        Ok::<_, Box<dyn std::error::Error>>(LocalRunner::new(clients, config, handler))
    };
    match setup.await {
        Ok(runner) => {
            tracing::info!("polling the input and relay queues and pumping schedules");
            tokio::select! {
                _ = runner.run() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            infinity_agent_core::telemetry::flush().await;
        }
        Err(err) => {
            eprintln!("infinity-local: {err}");
            std::process::exit(1);
        }
    }
}

/// Serves the callback handler on the port of `INFINITY_CALLBACK_URL`.
async fn serve_callbacks(
    clients: &Clients,
    config: &AwsConfig,
) -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var(infinity_aws::tool_servers::CALLBACK_URL_VAR)?;
    let port = url
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| format!("INFINITY_CALLBACK_URL {url} has no port to listen on"))?;
    let secret = infinity_aws::tool_servers::callback_secret_from_env().await?;
    let handler = infinity_aws::tool_servers::CallbackHandler::new(
        infinity_rap::signing::CallbackSigner::new(secret, &url)?,
        infinity_aws::queue::SqsInputSender::for_deployment(clients, config),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    tracing::info!(%url, "serving tool server callbacks");
    let app = infinity_aws::tool_servers::local_router(Arc::new(handler));
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            tracing::error!(%err, "the callback server stopped");
        }
    });
    Ok(())
}
