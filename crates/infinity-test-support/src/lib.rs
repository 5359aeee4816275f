//! What the tests of Infinity's crates share, so that none keeps its own copy: the repository's
//! folder ([`repo`]); whether the tools `make tools` installs are there, so that a test that
//! needs them is skipped, saying so, on a machine without them ([`tools`]); and, with the `http`
//! feature, JSON over HTTP and a running API's messages and history (`http`).
//!
//! A dev-dependency of the other crates, never published.
//!
//! ```
//! let repo = infinity_test_support::repo();
//! assert!(repo.join("infra/local/install.sh").is_file());
//! ```

// Test code: a failed step should stop the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

#[cfg(feature = "http")]
pub mod http;
pub mod tools;

#[cfg(feature = "http")]
pub use http::{get_json, post_json, Api};
pub use tools::{ready, ready_or_skip, Tools};

/// The repository's root folder: where `Cargo.toml`, `infra/` and `docs/` are.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}
