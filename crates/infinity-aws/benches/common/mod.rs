//! What the local-stack benches share: starting the emulators and making a stack's queues and
//! table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn bootstrap(prefix: &str) -> HashMap<String, String> {
    sh(&["bash", "infra/local/install.sh"]);
    sh(&["bash", "infra/local/emulators.sh", "start"]);
    let env_file = std::env::temp_dir().join(format!("{prefix}.env.sh"));
    let env_path = env_file.to_str().unwrap().to_owned();
    sh(&[
        ".venv/bin/python",
        "infra/local/bootstrap.py",
        "--prefix",
        prefix,
        "--env-file",
        &env_path,
    ]);
    infinity_aws::local::parse_env_file(&std::fs::read_to_string(&env_file).unwrap())
}

/// A local stack named `prefix`: its configuration and clients.
pub async fn local_stack(
    prefix: &str,
) -> (
    infinity_aws::config::AwsConfig,
    infinity_aws::config::Clients,
) {
    let env = bootstrap(prefix);
    let config = infinity_aws::config::AwsConfig::from_lookup(|k| env.get(k).cloned()).unwrap();
    // moto and DynamoDB Local name each service's endpoint; LocalStack serves them all on one.
    let endpoint = |service: &str| {
        env.get(&format!("AWS_ENDPOINT_URL_{service}"))
            .or_else(|| env.get("AWS_ENDPOINT_URL"))
            .cloned()
            .unwrap_or_else(|| panic!("no endpoint for {service}"))
    };
    let clients = infinity_aws::config::Clients::for_endpoints(
        "us-east-1",
        &endpoint("DYNAMODB"),
        &endpoint("SQS"),
        &endpoint("SCHEDULER"),
    )
    .await;
    (config, clients)
}
