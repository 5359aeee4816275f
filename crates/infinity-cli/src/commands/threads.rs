//! `infinity threads`: the threads of a store folder.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use infinity_agent_core::store::{FileStore, ThreadStore};

use crate::activity;

#[derive(Debug, Args)]
pub(crate) struct ThreadsArgs {
    /// The store folder.
    #[arg(long)]
    store: PathBuf,
}

/// Every thread of `store`, indented under its parent.
pub(crate) async fn print_threads(store: &dyn ThreadStore) -> Result<()> {
    let ids = store.thread_ids().await?;
    if ids.is_empty() {
        crate::out!("(no threads yet)");
    }
    for id in ids {
        let Some(r) = store.load_record(&id).await? else {
            continue;
        };
        let indent = "  ".repeat(r.lineage.len().saturating_sub(1));
        let status = activity::describe(&r);
        let delegated = r
            .delegated_by
            .as_ref()
            .map(|by| format!(" (delegated by {}, depth {})", by.thread_id, r.depth))
            .unwrap_or_default();
        crate::out!(
            "{indent}{id}{}{delegated} [{status}] agent {}, {} entries, {}",
            r.title
                .as_deref()
                .map(|t| format!(" \"{t}\""))
                .unwrap_or_default(),
            r.agent,
            r.history_len,
            activity::spent(&r.usage)
        );
        if let Some(conversation) = activity::conversation_spent(&r) {
            crate::out!("{indent}  conversation: {conversation}");
        }
    }
    Ok(())
}

pub(crate) async fn threads(args: ThreadsArgs) -> Result<u8> {
    // Read-only: listing works while another process runs the store, and a mistyped folder is
    // an error rather than a new empty store.
    let store = FileStore::open_read_only(&args.store)?;
    print_threads(&store).await?;
    for (thread, why) in store.broken() {
        crate::out!("{thread} [cannot be read: {why}]");
    }
    Ok(0)
}
