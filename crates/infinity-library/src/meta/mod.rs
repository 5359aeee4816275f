//! The `meta` category (opt-in): a directory of tool servers (items of the kind `app`), stored
//! agents, skills and knowledge that an agent searches and uses without having them listed ([`Directory`]), read
//! from a deployment's stored agents ([`StoredDirectory`]), and its tools ([`SEARCH_TOOLS`],
//! `list_tools`, `execute_tool`).

mod directory;
mod stored;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use infinity_agent_core::tools::internal::{CategoryDef, InternalToolDef};

pub use directory::*;
pub use stored::StoredDirectory;
pub use tools::SEARCH_TOOLS;

/// Its flag.
pub const CATEGORY: &str = "meta";

/// How stale a host's copy of the meta directory may get: agents saved and servers changed
/// meanwhile show from the next reload on.
pub const DIRECTORY_REFRESH: Duration = Duration::from_secs(60);

/// The `meta` category.
pub fn category() -> CategoryDef {
    CategoryDef::new(
        CATEGORY,
        "A directory of apps, agents, skills and knowledge to search and use.",
        vec![
            InternalToolDef {
                name: SEARCH_TOOLS,
                make: |_| Arc::new(tools::SearchTools),
            },
            InternalToolDef {
                name: "list_tools",
                make: |_| Arc::new(tools::ListTools),
            },
            InternalToolDef {
                name: "execute_tool",
                make: |_| Arc::new(tools::ExecuteTool),
            },
        ],
    )
}
