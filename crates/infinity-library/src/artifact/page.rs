//! What a published page (the `artifact` category) and its comments are: the types the thread's
//! record, its effects and the host's artifact store ([`crate::artifact`]) share.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use infinity_agent_core::ids::ThreadId;

/// Who may open a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// Only people with the deployment's token.
    Private,
    /// Anyone with the link (its id cannot be guessed).
    #[default]
    Unlisted,
    /// Anyone; listed at `/a`.
    Public,
}

impl Visibility {
    /// `private`, `unlisted` or `public`.
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Private => "private",
            Visibility::Unlisted => "unlisted",
            Visibility::Public => "public",
        }
    }
}

/// What a page's content is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// A self-contained HTML document.
    #[default]
    Html,
    /// Markdown, shown as HTML (raw HTML in it is shown as text).
    Markdown,
}

/// A published page, as of its newest version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactMeta {
    /// Its id (`art-` and 20 hex digits): the last part of its URL.
    pub id: String,
    /// The thread that published it (comments go there).
    pub thread_id: ThreadId,
    /// Its title.
    pub title: String,
    /// Its content's format.
    pub format: Format,
    /// Who may open it.
    pub visibility: Visibility,
    /// Its files may be loaded by the page (it was published with `assets`).
    #[serde(default)]
    pub assets: bool,
    /// The names of the newest version's files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// The newest version (1 for the first).
    pub version: u32,
    /// When it was first published.
    pub created_at: Timestamp,
    /// When its newest version was published.
    pub updated_at: Timestamp,
}

/// A comment a person left on a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Comment {
    /// Its id (`cm-` and 12 hex digits).
    pub id: String,
    /// The name the person gave (or `anonymous`).
    pub author: String,
    /// What they wrote.
    pub text: String,
    /// The version of the page they saw.
    pub version: u32,
    /// When.
    #[schemars(with = "infinity_agent_core::schema::Rfc3339")]
    pub at: Timestamp,
    /// The thread's answers, oldest first (filled in when read).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<Answer>,
}

/// The publishing thread's answer to a comment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Answer {
    /// Its id (unique under its comment).
    pub id: String,
    /// The text.
    pub text: String,
    /// When.
    #[schemars(with = "infinity_agent_core::schema::Rfc3339")]
    pub at: Timestamp,
}

/// Limits of what people and agents put in a page's store.
pub mod limits {
    /// The most bytes of a page's content.
    pub const PAGE_BYTES: usize = 1_000_000;
    /// The most files a version has, and the most bytes of each.
    pub const FILES: usize = 20;
    /// The most bytes of one file.
    pub const FILE_BYTES: usize = 1_000_000;
    /// The most characters of a title.
    pub const TITLE_CHARS: usize = 200;
    /// The most characters of a comment, and of an answer.
    pub const COMMENT_CHARS: usize = 4_000;
    /// The most characters of a comment's author name.
    pub const AUTHOR_CHARS: usize = 80;
    /// The most comments one page takes.
    pub const COMMENTS: usize = 500;
}

/// A file name a page may refer to: letters, digits, `.`, `-` and `_`, not starting with `.`.
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// True for an artifact id as [`crate::artifact::Artifacts`] makes them (so a request's id is never a path).
pub fn valid_id(id: &str) -> bool {
    id.strip_prefix("art-")
        .is_some_and(|hex| hex.len() == 20 && hex.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The content type of a page's file, from its name.
pub fn content_type(name: &str) -> &'static str {
    let extension = name.rsplit('.').next().unwrap_or_default();
    match extension.to_ascii_lowercase().as_str() {
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "csv" => "text/csv; charset=utf-8",
        "txt" | "md" => "text/plain; charset=utf-8",
        "html" | "htm" => "text/html; charset=utf-8",
        _ => "application/octet-stream",
    }
}
