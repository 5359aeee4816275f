//! `infinity thread index`: puts a stack's threads in lists (`GET /threads`) once after an
//! upgrade from a version that did not index them.

use std::time::Duration;

use anyhow::Result;
use clap::Args;
use infinity_aws::config::Clients;
use infinity_aws::store::DynamoThreadStore;

use crate::aws::{setting, Endpoint};

#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(flatten)]
    endpoint: Endpoint,
    /// The table (default: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
}

/// Gives every thread written before lists were indexed its place in them, and says how many.
pub async fn index(args: IndexArgs) -> Result<u8> {
    let table = setting(args.table, "INFINITY_TABLE", "table")?;
    let clients = Clients::from_env_with_endpoint(args.endpoint.endpoint.as_deref()).await;
    let store = DynamoThreadStore::new(clients.dynamodb, table, Duration::from_secs(86_400));
    let placed = store.index_for_lists().await?;
    crate::out!(
        "{placed} thread{} put in lists",
        if placed == 1 { "" } else { "s" }
    );
    Ok(0)
}
