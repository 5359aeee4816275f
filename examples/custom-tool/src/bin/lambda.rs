//! The same tools in a deployment's agent Lambda (build with cargo-lambda; see the README).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    let mut lambda = infinity_aws::lambda::AgentLambda::new();
    for tool in custom_tool_example::tools() {
        lambda = lambda.with_tool(tool);
    }
    lambda.run().await
}
