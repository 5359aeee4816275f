//! Pages agents publish (the `artifact` category) and the comments people leave on them.
//!
//! A host keeps them in a [`Blobs`] store (a folder, memory, S3) through [`Artifacts`], which
//! lays them out the same way on every store:
//!
//! | key | what |
//! |---|---|
//! | `{id}/meta.json` | [`ArtifactMeta`]: the publishing thread, title, format, visibility, newest version |
//! | `{id}/v{N}/page` | version N's content (HTML or Markdown) |
//! | `{id}/v{N}/files/{name}` | a file published with version N (pages published with `assets`) |
//! | `{id}/comments/{comment}.json` | a person's [`Comment`] |
//! | `{id}/answers/{comment}/{answer}.json` | the thread's [`Answer`] to it |
//!
//! Every write is a whole object of its own, written by one party (a version's objects and the
//! meta by the publishing thread's effects, which run one at a time; a comment by the request
//! that posts it; an answer by the thread), so no write races another.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::Blobs;
use serde::{Deserialize, Serialize};

use infinity_agent_core::input::InputBody;
use infinity_agent_core::library::ShelfError;
use infinity_agent_core::state::ThreadRecord;

pub use super::page::{
    content_type, limits, valid_file_name, valid_id, Answer, ArtifactMeta, Comment, Format,
    Visibility,
};

/// The category's name, which its effects carry.
pub const CATEGORY: &str = "artifact";

/// A write of the `artifact` category.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ArtifactOp {
    /// Publishes a version of a page: its files, content and meta.
    PublishArtifact {
        /// The page as of this version.
        meta: ArtifactMeta,
        /// The version's content.
        content: String,
        /// The version's files, by name.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        files: BTreeMap<String, String>,
    },
    /// Stores the thread's answer to a comment on one of its pages.
    AnswerComment {
        /// The page.
        artifact_id: String,
        /// The comment.
        comment_id: String,
        /// The answer.
        answer: Answer,
    },
}

/// A page the thread published, as its tools see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactNote {
    /// The page's id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its address.
    pub url: String,
    /// Its format.
    pub format: Format,
    /// Who may open it.
    pub visibility: Visibility,
    /// Its files may be loaded by the page.
    #[serde(default)]
    pub assets: bool,
    /// Its newest version.
    pub version: u32,
    /// When it was first published.
    pub created_at: jiff::Timestamp,
    /// The comments people left, oldest first (the latest [`ArtifactNote::KEPT_COMMENTS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comments: Vec<CommentNote>,
}

impl ArtifactNote {
    /// How many of a page's comments its note keeps (the store keeps them all).
    pub const KEPT_COMMENTS: usize = 50;
}

/// A comment on one of the thread's pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommentNote {
    /// Its id.
    pub id: String,
    /// Its author.
    pub author: String,
    /// Its text.
    pub text: String,
    /// When it was left.
    pub at: jiff::Timestamp,
    /// The thread's answers to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<String>,
}

/// The pages `record`'s thread published, with the comments on them, newest last: what its
/// `artifact_*` tools read (kept in the record's notes of this category; the pages themselves
/// are in the host's artifact store).
pub fn pages_of(record: &ThreadRecord) -> Vec<ArtifactNote> {
    read_pages(record.notes(CATEGORY))
}

fn read_pages(notes: &serde_json::Value) -> Vec<ArtifactNote> {
    if notes.is_null() {
        return Vec::new();
    }
    Vec::<ArtifactNote>::deserialize(notes).unwrap_or_else(|e| {
        tracing::error!(%e, "a thread's page notes cannot be read; its artifact tools see none");
        Vec::new()
    })
}

/// Keeps `pages` as `record`'s notes of this category.
pub fn keep_pages(record: &mut ThreadRecord, pages: &[ArtifactNote]) {
    *record.notes_mut(CATEGORY) = serde_json::to_value(pages).unwrap_or_default();
}

/// A person's comment on one of the thread's pages: the `artifact` category's event
/// ([`CommentEvent::input`]; sent as `artifact_comment` before category events were generic).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommentEvent {
    /// The page.
    pub artifact_id: String,
    /// The comment (already stored with the page).
    pub comment_id: String,
    /// Who wrote it.
    pub author: String,
    /// What they wrote.
    pub text: String,
    /// When.
    pub at: jiff::Timestamp,
}

impl CommentEvent {
    /// The input that brings it to its thread.
    pub fn input(&self) -> InputBody {
        InputBody::CategoryEvent {
            category: CATEGORY.to_owned(),
            event: serde_json::to_value(self).unwrap_or_default(),
        }
    }
}

/// A comment noted with its page (the latest [`ArtifactNote::KEPT_COMMENTS`]): what the model
/// is shown. A comment on a page the thread did not publish is refused (the API checks, so only
/// a forged input gets here), and so is one the thread already has (a repeated delivery).
fn note_comment(
    notes: &mut serde_json::Value,
    event: &serde_json::Value,
) -> Result<String, String> {
    let CommentEvent {
        artifact_id,
        comment_id,
        author,
        text,
        at,
    } = CommentEvent::deserialize(event).map_err(|e| format!("not a comment: {e}"))?;
    let mut pages = read_pages(notes);
    let Some(note) = pages.iter_mut().find(|a| a.id == artifact_id) else {
        return Err(format!(
            "a comment on {artifact_id}, a page this thread did not publish"
        ));
    };
    if note.comments.iter().any(|c| c.id == comment_id) {
        return Err(format!("comment {comment_id} again"));
    }
    let shown = format!(
        "[artifact] {author} commented on \"{}\" ({artifact_id}, comment {comment_id}): {text}",
        note.title
    );
    note.comments.push(CommentNote {
        id: comment_id,
        author,
        text,
        at,
        answers: Vec::new(),
    });
    let extra = note
        .comments
        .len()
        .saturating_sub(ArtifactNote::KEPT_COMMENTS);
    note.comments.drain(..extra);
    *notes = serde_json::to_value(&pages).unwrap_or_default();
    Ok(shown)
}

/// Why the artifact store could not do something.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ArtifactError {
    /// The store could not be reached or read; trying again may work.
    #[error("the artifact store: {0}")]
    Unavailable(String),
    /// What was asked breaks a rule (a limit, a name): the message says which.
    #[error("{0}")]
    Refused(String),
}

/// A host's artifacts over its [`Blobs`], and the address its pages are served at.
#[derive(Debug, Clone)]
pub struct Artifacts {
    blobs: Arc<dyn Blobs>,
    base_url: String,
}

fn decode<T: serde::de::DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, ArtifactError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ArtifactError::Unavailable(format!("{key} is not readable: {e}")))
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Our own plain types: serializing them cannot fail.
    serde_json::to_vec(value).unwrap_or_default()
}

#[async_trait]
impl infinity_agent_core::library::Shelf for Artifacts {
    fn category(&self) -> &'static str {
        CATEGORY
    }

    async fn perform(&self, op: &serde_json::Value) -> Result<(), ShelfError> {
        let op = ArtifactOp::deserialize(op)
            .map_err(|e| ShelfError::Refused(format!("not an artifact write: {e}")))?;
        let done = match op {
            ArtifactOp::PublishArtifact {
                meta,
                content,
                files,
            } => self.publish(&meta, &content, &files).await,
            ArtifactOp::AnswerComment {
                artifact_id,
                comment_id,
                answer,
            } => self.answer(&artifact_id, &comment_id, &answer).await,
        };
        done.map_err(|e| match e {
            ArtifactError::Unavailable(why) => ShelfError::Unavailable(why),
            ArtifactError::Refused(why) => ShelfError::Refused(why),
        })
    }

    fn on_event(
        &self,
        notes: &mut serde_json::Value,
        event: &serde_json::Value,
    ) -> Result<String, ShelfError> {
        note_comment(notes, event).map_err(ShelfError::Refused)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Artifacts {
    /// Artifacts kept in `blobs`, their pages served under `base_url` (`{base_url}/a/{id}`).
    pub fn new(blobs: Arc<dyn Blobs>, base_url: impl Into<String>) -> Self {
        Self {
            blobs,
            base_url: base_url.into().trim_end_matches('/').to_owned(),
        }
    }

    /// The address of a page.
    pub fn url(&self, id: &str) -> String {
        format!("{}/a/{id}", self.base_url)
    }

    /// Writes version `meta.version` of a page: its files, its content, then its meta (so a
    /// reader never finds a meta whose version is not there). Writing the same version again
    /// writes the same objects (an effect performed twice).
    pub async fn publish(
        &self,
        meta: &ArtifactMeta,
        content: &str,
        files: &BTreeMap<String, String>,
    ) -> Result<(), ArtifactError> {
        let (id, version) = (&meta.id, meta.version);
        for (name, text) in files {
            if !valid_file_name(name) {
                return Err(ArtifactError::Refused(format!(
                    "`{name}` is not a file name"
                )));
            }
            self.blobs
                .put(
                    &format!("{id}/v{version}/files/{name}"),
                    text.clone().into_bytes(),
                    content_type(name),
                )
                .await?;
        }
        let page_type = match meta.format {
            Format::Html => "text/html; charset=utf-8",
            Format::Markdown => "text/markdown; charset=utf-8",
        };
        self.blobs
            .put(
                &format!("{id}/v{version}/page"),
                content.as_bytes().to_vec(),
                page_type,
            )
            .await?;
        self.blobs
            .put(&format!("{id}/meta.json"), encode(meta), "application/json")
            .await
    }

    /// A page's meta (`None`: no such page).
    pub async fn meta(&self, id: &str) -> Result<Option<ArtifactMeta>, ArtifactError> {
        if !valid_id(id) {
            return Ok(None);
        }
        let key = format!("{id}/meta.json");
        match self.blobs.get(&key).await? {
            Some(bytes) => decode(&key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// A version's content.
    pub async fn content(&self, id: &str, version: u32) -> Result<Option<String>, ArtifactError> {
        if !valid_id(id) {
            return Ok(None);
        }
        Ok(self
            .blobs
            .get(&format!("{id}/v{version}/page"))
            .await?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// A version's file.
    pub async fn file(
        &self,
        id: &str,
        version: u32,
        name: &str,
    ) -> Result<Option<Vec<u8>>, ArtifactError> {
        if !valid_id(id) || !valid_file_name(name) {
            return Ok(None);
        }
        self.blobs
            .get(&format!("{id}/v{version}/files/{name}"))
            .await
    }

    /// Every page's meta (for the public listing).
    pub async fn all(&self) -> Result<Vec<ArtifactMeta>, ArtifactError> {
        let mut metas = Vec::new();
        for key in self.blobs.list("art-").await? {
            if !key.ends_with("/meta.json") {
                continue;
            }
            if let Some(bytes) = self.blobs.get(&key).await? {
                metas.push(decode::<ArtifactMeta>(&key, &bytes)?);
            }
        }
        metas.sort_by_key(|m| std::cmp::Reverse(m.updated_at));
        Ok(metas)
    }

    /// Stores a person's comment on a page (refused past [`limits::COMMENTS`]).
    pub async fn add_comment(&self, id: &str, comment: &Comment) -> Result<(), ArtifactError> {
        let existing = self.blobs.list(&format!("{id}/comments/")).await?.len();
        if existing >= limits::COMMENTS {
            return Err(ArtifactError::Refused(format!(
                "this page has {existing} comments, the most it takes"
            )));
        }
        self.blobs
            .put(
                &format!("{id}/comments/{}.json", comment.id),
                encode(comment),
                "application/json",
            )
            .await
    }

    /// Stores the thread's answer to a comment.
    pub async fn answer(
        &self,
        id: &str,
        comment_id: &str,
        answer: &Answer,
    ) -> Result<(), ArtifactError> {
        self.blobs
            .put(
                &format!("{id}/answers/{comment_id}/{}.json", answer.id),
                encode(answer),
                "application/json",
            )
            .await
    }

    /// A page's comments with their answers, oldest first.
    pub async fn comments(&self, id: &str) -> Result<Vec<Comment>, ArtifactError> {
        if !valid_id(id) {
            return Ok(Vec::new());
        }
        let mut comments = Vec::new();
        for key in self.blobs.list(&format!("{id}/comments/")).await? {
            if let Some(bytes) = self.blobs.get(&key).await? {
                comments.push(decode::<Comment>(&key, &bytes)?);
            }
        }
        let mut answers: BTreeMap<String, Vec<Answer>> = BTreeMap::new();
        for key in self.blobs.list(&format!("{id}/answers/")).await? {
            let Some(comment) = key.split('/').nth(2) else {
                continue;
            };
            if let Some(bytes) = self.blobs.get(&key).await? {
                answers
                    .entry(comment.to_owned())
                    .or_default()
                    .push(decode::<Answer>(&key, &bytes)?);
            }
        }
        for comment in &mut comments {
            let mut mine = answers.remove(&comment.id).unwrap_or_default();
            mine.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
            comment.answers = mine;
        }
        comments.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.id.cmp(&b.id)));
        Ok(comments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::{FileBlobs, MemoryBlobs};
    use infinity_agent_core::ids::ThreadId;
    use jiff::Timestamp;

    fn meta(id: &str, version: u32) -> ArtifactMeta {
        ArtifactMeta {
            id: id.to_owned(),
            thread_id: ThreadId::new("t").unwrap(),
            title: "Report".into(),
            format: Format::Html,
            visibility: Visibility::Unlisted,
            assets: true,
            files: vec!["chart.svg".into()],
            version,
            created_at: Timestamp::UNIX_EPOCH,
            updated_at: Timestamp::UNIX_EPOCH,
        }
    }

    async fn round_trip(blobs: Arc<dyn Blobs>) {
        let artifacts = Artifacts::new(blobs, "http://host:1/");
        let id = "art-0123456789abcdef0123";
        assert_eq!(artifacts.url(id), format!("http://host:1/a/{id}"));
        let files = BTreeMap::from([("chart.svg".to_owned(), "<svg/>".to_owned())]);
        artifacts
            .publish(&meta(id, 1), "<p>one</p>", &files)
            .await
            .unwrap();
        artifacts
            .publish(&meta(id, 2), "<p>two</p>", &BTreeMap::new())
            .await
            .unwrap();
        assert_eq!(artifacts.meta(id).await.unwrap().unwrap().version, 2);
        // Old versions are kept.
        assert_eq!(
            artifacts.content(id, 1).await.unwrap().unwrap(),
            "<p>one</p>"
        );
        assert_eq!(
            artifacts.content(id, 2).await.unwrap().unwrap(),
            "<p>two</p>"
        );
        assert_eq!(
            artifacts.file(id, 1, "chart.svg").await.unwrap().unwrap(),
            b"<svg/>"
        );
        assert_eq!(artifacts.file(id, 1, "../meta.json").await.unwrap(), None);
        assert_eq!(artifacts.meta("art-../../etc").await.unwrap(), None);
        for (n, at) in [(2, 20), (1, 10)] {
            let comment = Comment {
                id: format!("cm-{n}"),
                author: "ann".into(),
                text: format!("comment {n}"),
                version: 2,
                at: Timestamp::from_second(at).unwrap(),
                answers: Vec::new(),
            };
            artifacts.add_comment(id, &comment).await.unwrap();
        }
        let answer = Answer {
            id: "an-1".into(),
            text: "thanks".into(),
            at: Timestamp::from_second(30).unwrap(),
        };
        artifacts.answer(id, "cm-2", &answer).await.unwrap();
        let comments = artifacts.comments(id).await.unwrap();
        let texts: Vec<&str> = comments.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["comment 1", "comment 2"], "oldest first");
        assert_eq!(comments[1].answers, vec![answer]);
        assert!(comments[0].answers.is_empty());
        assert_eq!(artifacts.all().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn pages_versions_files_comments_and_answers_round_trip_in_memory_and_in_files() {
        round_trip(Arc::new(MemoryBlobs::default())).await;
        let dir = tempfile::tempdir().unwrap();
        round_trip(Arc::new(FileBlobs::new(dir.path()))).await;
    }

    #[test]
    fn a_record_that_kept_its_pages_in_a_field_of_their_own_loses_none() {
        let mut record = infinity_agent_core::state::ThreadRecord::new(
            ThreadId::new("t").unwrap(),
            "a",
            None,
            jiff::Timestamp::UNIX_EPOCH,
        );
        let page = serde_json::json!({
            "id": "art-1", "title": "T", "url": "http://h/a/art-1", "format": "html",
            "visibility": "unlisted", "version": 1, "created_at": "2026-12-01T00:00:00Z"
        });
        let mut old = serde_json::to_value(&record).unwrap();
        old["artifacts"] = serde_json::json!([page]);
        record = serde_json::from_value(old).unwrap();
        // Written back as read while nothing touches it, so a slice of another kind keeps it.
        let again = serde_json::to_value(&record).unwrap();
        assert_eq!(again["artifacts"][0]["id"], "art-1", "{again}");
        assert_eq!(pages_of(&record)[0].title, "T");
        // Changed, it moves to the category's notes.
        let mut pages = pages_of(&record);
        pages[0].version = 2;
        keep_pages(&mut record, &pages);
        let moved = serde_json::to_value(&record).unwrap();
        assert!(moved.get("artifacts").is_none(), "{moved}");
        assert_eq!(moved["category_notes"]["artifact"][0]["version"], 2);
        assert_eq!(pages_of(&record)[0].version, 2);
    }

    #[test]
    fn an_outbox_written_before_categories_were_named_still_reads() {
        let old = serde_json::json!({
            "id": "fx-1",
            "effect": "library",
            "op": {"op": "answer_comment", "artifact_id": "art-1", "comment_id": "cm-1",
                   "answer": {"id": "a1", "text": "thanks", "at": "2026-12-01T00:00:00Z"}}
        });
        let pending: infinity_agent_core::effect::PendingEffect =
            serde_json::from_value(old).unwrap();
        assert_eq!(pending.effect.library_category(), Some("artifact"));
        let new = infinity_agent_core::effect::Effect::library(
            "knowledge",
            &crate::knowledge::KnowledgeOp::SaveKnowledge {
                entry: crate::knowledge::KnowledgeEntry::new(
                    "n",
                    crate::knowledge::EntryType::default(),
                    jiff::Timestamp::UNIX_EPOCH,
                ),
            },
        );
        let text = serde_json::to_string(&new).unwrap();
        assert!(text.contains(r#""category":"knowledge""#), "{text}");
        let back: infinity_agent_core::effect::Effect = serde_json::from_str(&text).unwrap();
        assert_eq!(back.library_category(), Some("knowledge"));
    }
}
