//! The agent Lambda: SQS FIFO input queue -> one slice per thread per batch. An application with
//! tools of its own writes the same `main` with `.with_tool(...)` (see `infinity_aws::lambda`).

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    infinity_aws::lambda::AgentLambda::new().run().await
}
