//! Where the commands people use to manage a deployment (`agents`, `knowledge`) find it: a store
//! folder, or an AWS (or local) stack's table.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use infinity_aws::config::Clients;

use crate::aws::Endpoint;

/// `--store DIR`, or `--table T` (default `$INFINITY_TABLE`) with `--endpoint`.
#[derive(Debug, Args)]
pub struct Place {
    /// A store folder (the one `run`, `chat` and `serve` are given with --store).
    #[arg(long, conflicts_with = "table")]
    store: Option<PathBuf>,
    /// An AWS (or local) stack's table (default without --store: $INFINITY_TABLE).
    #[arg(long)]
    table: Option<String>,
    #[command(flatten)]
    endpoint: Endpoint,
}

/// A place, found.
pub enum Opened {
    /// A store folder that exists.
    Folder(PathBuf),
    /// A table, with clients for it.
    Table {
        /// The AWS clients.
        clients: Clients,
        /// The table.
        table: String,
    },
}

impl Place {
    /// Finds the place. `create`: a store folder that does not exist yet is made (writing may
    /// start a store; reading a mistyped one is an error naming it).
    pub async fn open(&self, create: bool) -> Result<Opened> {
        if let Some(dir) = &self.store {
            if create {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            if !dir.is_dir() {
                anyhow::bail!("{}: no such store folder", dir.display());
            }
            return Ok(Opened::Folder(dir.clone()));
        }
        let table = crate::aws::setting(
            self.table.clone(),
            "INFINITY_TABLE",
            "store folder or table",
        )
        .context("pass --store DIR for a local store")?;
        let clients = Clients::from_env_with_endpoint(self.endpoint.endpoint.as_deref()).await;
        Ok(Opened::Table { clients, table })
    }
}
