//! The local stack the CLI's stack tests run on: the emulators (started through `infra/local/`,
//! as the `infinity-aws` local-stack tests do), a fresh table and queues per test, and the real
//! agent handler polling them in the test's process.
//!
//! A stack is `None`, the test skipped saying so, on a machine where `make tools` has not
//! installed the emulators ([`infinity_test_support::tools`]): a test begins with
//! `let Some(stack) = stack_with(...).await else { return };`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // each test crate uses a part

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use infinity_agent_core::agent::AgentFile;
use infinity_aws::config::{AwsConfig, Clients};
use infinity_aws::handler::{build_agent, AgentHandler};
use infinity_aws::local::LocalRunner;
use infinity_test_support::{ready_or_skip, repo, Tools};

use crate::common::{self, Server};

/// Starts the emulators once per test process (installing what is missing, when
/// `INFINITY_REQUIRE_TOOLS` is set); `false`, the test skipped saying so, when `make tools` has
/// not installed them.
fn emulators() -> bool {
    static STARTED: OnceLock<()> = OnceLock::new();
    if !ready_or_skip(Tools::Emulators) {
        return false;
    }
    STARTED.get_or_init(|| infinity_aws::local::start_emulators(&repo()).unwrap());
    true
}

/// A fresh stack (queues and a table), its agent handler polling it in this process, and the
/// environment a process needs to reach it.
pub struct Stack {
    pub env: HashMap<String, String>,
    pub clients: Clients,
    _dir: tempfile::TempDir,
}

/// A fresh stack running `agent` (an agent file) with `script` beside it, and the `extra`
/// variables; `None` without the emulators (see the module doc).
pub async fn stack_with(agent: &str, script: &str, extra: &[(&str, String)]) -> Option<Stack> {
    if !emulators() {
        return None;
    }
    let prefix = format!("cli{}", &uuid_like()[..10]);
    let mut env = infinity_aws::local::bootstrap_stack(&repo(), &prefix).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("script.yaml"), script).unwrap();
    let agent_path = dir.path().join("agent.yaml");
    std::fs::write(&agent_path, agent).unwrap();
    env.insert("INFINITY_DEFAULT_AGENT".into(), String::new());
    for (key, value) in extra {
        env.insert((*key).to_owned(), value.clone());
    }
    env.insert(
        "INFINITY_AGENT_FILE".into(),
        agent_path.to_string_lossy().into_owned(),
    );
    let config = AwsConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
    let endpoint = |service: &str| env[&format!("AWS_ENDPOINT_URL_{service}")].clone();
    assert!(
        config.artifact_bucket.is_some(),
        "the stack has a bucket for pages"
    );
    let clients = Clients::for_endpoints(
        &env["AWS_REGION"],
        &endpoint("DYNAMODB"),
        &endpoint("SQS"),
        &endpoint("SCHEDULER"),
    )
    .await;
    let agent = build_agent(&AgentFile::load(&agent_path).unwrap())
        .await
        .unwrap();
    // Tool servers in the agent file: their callbacks come to the callback function's handler,
    // served over HTTP in this process as `infinity-local` does.
    let tool_servers = if agent.tool_servers.is_empty() {
        None
    } else {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let signer = infinity_rap::signing::CallbackSigner::new(
            b"the CLI stack's callback secret, 32+ bytes".to_vec(),
            &url,
        )
        .unwrap();
        let sender = infinity_aws::queue::SqsInputSender::new(
            clients.sqs.clone(),
            config.input_queue_url.clone(),
        );
        let callbacks = infinity_aws::tool_servers::CallbackHandler::new(signer.clone(), sender);
        let app = infinity_aws::tool_servers::local_router(Arc::new(callbacks));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = infinity_rap_runtime::client::RapClient::new(signer)
            .with_configured(&agent.tool_servers)
            .unwrap();
        Some(Arc::new(client))
    };
    let handler =
        Arc::new(AgentHandler::new(&clients, &config, agent).with_tool_servers(tool_servers));
    let runner = LocalRunner::new(clients.clone(), config, handler);
    tokio::spawn(runner.run());
    Some(Stack {
        env,
        clients,
        _dir: dir,
    })
}

pub fn uuid_like() -> String {
    infinity_agent_core::ids::EffectId::generate().as_str()[3..].to_owned()
}

/// Waits (up to 60 s: the emulators are slow) until `check` holds.
pub async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    common::wait_for(what, 60, check).await;
}

/// `infinity serve --aws` on the stack, on loopback (no token).
pub async fn serve_aws(stack: &Stack) -> (Server, String) {
    let env: Vec<(String, String)> = stack.env.clone().into_iter().collect();
    common::serve_with(&repo(), &["--aws"], &env).await
}
