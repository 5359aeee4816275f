//! The `artifact` category (opt-in): pages agents publish and people comment on. [`page`]: what
//! a page and its comments are; [`Artifacts`]: where a host keeps them (the category's shelf);
//! the tools: `artifact_publish`, `artifact_update`, `artifact_list`, `artifact_comments`,
//! `artifact_reply`, and the guidance skill they lend `skill_get`.

mod blobs;
pub mod page;
mod shelf;
mod tools;

use std::sync::Arc;

use infinity_agent_core::tools::internal::{CategoryDef, InternalToolDef};

pub use blobs::*;
pub use page::*;
pub use shelf::*;
pub use tools::guidance;

/// The `artifact` category.
pub fn category() -> CategoryDef {
    let mut def = CategoryDef::new(
        CATEGORY,
        "Pages the agent publishes to a shareable URL and people comment on.",
        vec![
            InternalToolDef {
                name: "artifact_publish",
                make: |_| Arc::new(tools::Publish),
            },
            InternalToolDef {
                name: "artifact_update",
                make: |_| Arc::new(tools::Update),
            },
            InternalToolDef {
                name: "artifact_list",
                make: |_| Arc::new(tools::List),
            },
            InternalToolDef {
                name: "artifact_comments",
                make: |_| Arc::new(tools::Comments),
            },
            InternalToolDef {
                name: "artifact_reply",
                make: |_| Arc::new(tools::Reply),
            },
        ],
    );
    def.skills = || vec![guidance()];
    def
}
