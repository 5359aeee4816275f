//! What the local-stack benches share: starting the emulators and making a stack's queues and
//! table.

use std::collections::HashMap;

use infinity_test_support::repo;

pub fn bootstrap(prefix: &str) -> HashMap<String, String> {
    infinity_aws::local::start_emulators(&repo()).unwrap();
    infinity_aws::local::bootstrap_stack(&repo(), prefix).unwrap()
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
