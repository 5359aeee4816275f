//! The `artifact` category (opt-in): pages an agent publishes to a shareable URL and people
//! comment on.
//!
//! - `artifact_publish`: a new page (HTML or Markdown), private, unlisted or public.
//! - `artifact_update`: a new version of one of the thread's pages, at the same URL (the old
//!   versions stay, at `?v=N`).
//! - `artifact_list`: the thread's pages, with how many comments wait for an answer.
//! - `artifact_comments`: a page's comments and the thread's answers.
//! - `artifact_reply`: answers a comment; the answer shows under it on the page.
//!
//! The tools read the thread's record (its [`ArtifactNote`]s) and write through effects
//! ([`ArtifactOp::PublishArtifact`], [`ArtifactOp::AnswerComment`]) performed after the slice
//! commits, into the host's artifact store ([`crate::artifact`]). People's comments
//! arrive as `category_event` inputs of the category. A page is served sandboxed, with a Content-Security-Policy
//! that forbids every load but its own files, and those only when it was published with
//! `assets: true` (docs/internal-tools.md#artifact).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::artifact::{
    keep_pages, limits, pages_of, valid_file_name, Answer, ArtifactMeta, ArtifactNote, ArtifactOp,
    Format, Visibility, CATEGORY,
};
use infinity_agent_core::effect::Effect;
use infinity_agent_core::model::ToolSpec;
use infinity_agent_core::tools::internal::Skill;
use infinity_agent_core::tools::{Tool, ToolContext, ToolOutcome};

use crate::LibraryExt;

/// The guidance skill the category offers through `skill_get`.
pub fn guidance() -> Skill {
    Skill {
        name: "artifact-pages".to_owned(),
        description: "How to write a good artifact page (artifact_publish): structure, style, \
                      files, and what the page may not do."
            .to_owned(),
        content: GUIDANCE.to_owned(),
    }
}

const GUIDANCE: &str = "\
# Writing an artifact page

A page is something a person opens in a browser, reads, and comments on. Make it stand alone.

## Content
- Lead with the answer or the result; put the details after it.
- One page, one purpose. Give it a title that says what it is (it is the browser tab's title).
- Prefer Markdown (format: markdown) for documents: it is shown with a clean style. Use HTML
  when the page needs layout, tables with styling, a chart or interaction.

## HTML pages
- Write a complete, self-contained document: inline <style> and <script>, images as data: URLs
  or inline <svg>.
- The page runs sandboxed in its own origin: it cannot read cookies or call the API, and it may
  not load anything from the network (no CDNs, web fonts, analytics or remote images); such loads
  are blocked.
- To ship separate files (a large dataset, a stylesheet, an SVG), publish them in `files` with
  `assets: true` and refer to them by relative path: files/NAME (for example
  <img src=\"files/chart.svg\">, or fetch(\"files/data.json\") for data). Without
  `assets: true` the page may not load even those.
- The page runs only inside its frame on the page's own address: do not navigate the top window
  or open popups (both are blocked).
- Keep it light: under a few hundred kilobytes, readable on a phone (a viewport meta tag,
  max-width on the body, system fonts).

## Updating
- artifact_update publishes a new version at the same URL; people see the newest, and old
  versions stay at ?v=N. Say in the page what changed when it matters.

## Comments
- People's comments reach you as messages. Answer with artifact_reply (the answer shows under the
  comment); update the page when a comment asks for a change, then reply saying so.
";

fn visibility(args: &Value) -> Result<Option<Visibility>, ToolOutcome> {
    match args["visibility"].as_str() {
        None => Ok(None),
        Some("private") => Ok(Some(Visibility::Private)),
        Some("unlisted") => Ok(Some(Visibility::Unlisted)),
        Some("public") => Ok(Some(Visibility::Public)),
        Some(other) => Err(ToolOutcome::error(format!(
            "Error: `visibility` is private, unlisted or public, not `{other}`."
        ))),
    }
}

fn format(args: &Value) -> Result<Option<Format>, ToolOutcome> {
    match args["format"].as_str() {
        None => Ok(None),
        Some("html") => Ok(Some(Format::Html)),
        Some("markdown") => Ok(Some(Format::Markdown)),
        Some(other) => Err(ToolOutcome::error(format!(
            "Error: `format` is html or markdown, not `{other}`."
        ))),
    }
}

/// The page's files from `files` (`{name: text}`), checked against the limits.
fn files(args: &Value) -> Result<BTreeMap<String, String>, ToolOutcome> {
    let Some(given) = args["files"].as_object() else {
        return Ok(BTreeMap::new());
    };
    if given.len() > limits::FILES {
        return Err(ToolOutcome::error(format!(
            "Error: {} files; a page has at most {}.",
            given.len(),
            limits::FILES
        )));
    }
    let mut files = BTreeMap::new();
    for (name, text) in given {
        if !valid_file_name(name) {
            return Err(ToolOutcome::error(format!(
                "Error: `{name}` is not a file name (letters, digits, `.`, `-`, `_`; not starting \
                 with `.`)."
            )));
        }
        let Some(text) = text.as_str() else {
            return Err(ToolOutcome::error(format!(
                "Error: the file `{name}` must be text (a string)."
            )));
        };
        if text.len() > limits::FILE_BYTES {
            return Err(ToolOutcome::error(format!(
                "Error: the file `{name}` is {} bytes; a file has at most {}.",
                text.len(),
                limits::FILE_BYTES
            )));
        }
        files.insert(name.clone(), text.to_owned());
    }
    Ok(files)
}

fn checked_content(args: &Value) -> Result<String, ToolOutcome> {
    let content = args["content"].as_str().unwrap_or_default();
    if content.trim().is_empty() {
        return Err(ToolOutcome::error("Error: `content` is empty."));
    }
    if content.len() > limits::PAGE_BYTES {
        return Err(ToolOutcome::error(format!(
            "Error: the content is {} bytes; a page has at most {}. Move data into `files` \
             (with `assets: true`) or shorten it.",
            content.len(),
            limits::PAGE_BYTES
        )));
    }
    Ok(content.to_owned())
}

fn checked_title(title: &str) -> Result<String, ToolOutcome> {
    let title = title.trim();
    if title.is_empty() {
        return Err(ToolOutcome::error("Error: `title` is empty."));
    }
    if title.chars().count() > limits::TITLE_CHARS {
        return Err(ToolOutcome::error(format!(
            "Error: the title has more than {} characters.",
            limits::TITLE_CHARS
        )));
    }
    Ok(title.to_owned())
}

fn no_store() -> ToolOutcome {
    ToolOutcome::error(
        "Error: this host keeps no published pages (serve and AWS stacks do; `infinity run` does \
         not). Give the person the content in your answer instead.",
    )
}

/// The thread's page `id` among its `pages`, or an error naming the ones it has.
fn own<'a>(pages: &'a mut [ArtifactNote], id: &str) -> Result<&'a mut ArtifactNote, ToolOutcome> {
    let ids: Vec<String> = pages.iter().map(|a| a.id.clone()).collect();
    pages.iter_mut().find(|a| a.id == id).ok_or_else(|| {
        ToolOutcome::error(format!(
            "Error: this thread published no page `{id}` (its pages: {}).",
            if ids.is_empty() {
                "none".to_owned()
            } else {
                ids.join(", ")
            }
        ))
    })
}

fn published(note: &ArtifactNote, what: &str) -> ToolOutcome {
    ToolOutcome::ok(
        json!({
            "id": note.id,
            "url": note.url,
            "version": note.version,
            "visibility": note.visibility.as_str(),
            "note": what,
        })
        .to_string(),
    )
}

fn emit_publish(
    ctx: &mut ToolContext<'_>,
    note: &ArtifactNote,
    content: String,
    files: BTreeMap<String, String>,
) {
    let meta = ArtifactMeta {
        id: note.id.clone(),
        thread_id: ctx.record.id.clone(),
        title: note.title.clone(),
        format: note.format,
        visibility: note.visibility,
        assets: note.assets,
        files: files.keys().cloned().collect(),
        version: note.version,
        created_at: note.created_at,
        updated_at: ctx.now,
    };
    ctx.emit(Effect::library(
        CATEGORY,
        &ArtifactOp::PublishArtifact {
            meta,
            content,
            files,
        },
    ));
}

fn properties(update: bool) -> Value {
    let mut properties = json!({
        "title": {"type": "string", "minLength": 1, "maxLength": limits::TITLE_CHARS},
        "content": {"type": "string", "minLength": 1,
                    "description": "The whole page: a self-contained HTML document, or Markdown."},
        "format": {"type": "string", "enum": ["html", "markdown"],
                   "description": "Default: html (an update keeps the page's)."},
        "visibility": {"type": "string", "enum": ["private", "unlisted", "public"],
                       "description": "private: people with the deployment's token; unlisted \
                                       (default): anyone with the link; public: anyone, listed."},
        "files": {"type": "object", "additionalProperties": {"type": "string"},
                  "description": "Text files the page loads as files/NAME (needs assets: true)."},
        "assets": {"type": "boolean",
                   "description": "Let the page load its own files (nothing else, ever). \
                                   Default false (an update keeps the page's)."}
    });
    if update {
        properties["id"] = json!({"type": "string", "description": "The page (artifact_list)."});
    }
    properties
}

#[derive(Debug)]
pub(crate) struct Publish;

impl Tool for Publish {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "artifact_publish",
            "Publish a page (HTML or Markdown) at a shareable URL that people open in a browser \
             and comment on; their comments come back to you. Returns its id and URL. \
             skill_get(\"artifact-pages\") says how to write a good one.",
            json!({
                "type": "object",
                "properties": properties(false),
                "required": ["title", "content"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let checked = (|| {
            Ok::<_, ToolOutcome>((
                checked_title(args["title"].as_str().unwrap_or_default())?,
                checked_content(args)?,
                format(args)?.unwrap_or_default(),
                visibility(args)?.unwrap_or_default(),
                files(args)?,
            ))
        })();
        let (title, content, format, visibility, files) = match checked {
            Ok(checked) => checked,
            Err(error) => return error,
        };
        let Some(artifacts) = ctx.library.and_then(|l| l.artifacts()) else {
            return no_store();
        };
        let id = format!("art-{:020x}", ctx.ids.next_bits() & ((1u128 << 80) - 1));
        let note = ArtifactNote {
            url: artifacts.url(&id),
            id,
            title,
            format,
            visibility,
            assets: args["assets"].as_bool().unwrap_or(false),
            version: 1,
            created_at: ctx.now,
            comments: Vec::new(),
        };
        emit_publish(ctx, &note, content, files);
        let result = published(&note, "published; the URL works once this turn is stored");
        let mut pages = pages_of(ctx.record);
        pages.push(note);
        keep_pages(ctx.record, &pages);
        result
    }
}

#[derive(Debug)]
pub(crate) struct Update;

impl Tool for Update {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "artifact_update",
            "Publish a new version of one of your pages at the same URL (people see the newest; \
             older versions stay at ?v=N). Give the whole new content; title, format, \
             visibility and assets stay as they were unless given.",
            json!({
                "type": "object",
                "properties": properties(true),
                "required": ["id", "content"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let checked = (|| {
            let title = match args["title"].as_str() {
                Some(title) => Some(checked_title(title)?),
                None => None,
            };
            Ok::<_, ToolOutcome>((
                title,
                checked_content(args)?,
                format(args)?,
                visibility(args)?,
                files(args)?,
            ))
        })();
        let (title, content, format, visibility, files) = match checked {
            Ok(checked) => checked,
            Err(error) => return error,
        };
        if ctx.library.and_then(|l| l.artifacts()).is_none() {
            return no_store();
        }
        let id = args["id"].as_str().unwrap_or_default().to_owned();
        let mut pages = pages_of(ctx.record);
        let note = match own(&mut pages, &id) {
            Ok(note) => note,
            Err(error) => return error,
        };
        note.version += 1;
        if let Some(title) = title {
            note.title = title;
        }
        if let Some(format) = format {
            note.format = format;
        }
        if let Some(visibility) = visibility {
            note.visibility = visibility;
        }
        if let Some(assets) = args["assets"].as_bool() {
            note.assets = assets;
        }
        let note = note.clone();
        keep_pages(ctx.record, &pages);
        emit_publish(ctx, &note, content, files);
        published(
            &note,
            "updated; the URL shows this version once this turn is stored",
        )
    }
}

#[derive(Debug)]
pub(crate) struct List;

impl Tool for List {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "artifact_list",
            "List the pages you published, with their URLs, versions and how many comments \
             wait for your answer.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    fn call(&self, _: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let pages: Vec<Value> = pages_of(ctx.record)
            .iter()
            .map(|a| {
                json!({
                    "id": a.id, "title": a.title, "url": a.url, "version": a.version,
                    "visibility": a.visibility.as_str(), "format": a.format,
                    "comments": a.comments.len(),
                    "unanswered": a.comments.iter().filter(|c| c.answers.is_empty()).count(),
                })
            })
            .collect();
        ToolOutcome::ok(json!({ "pages": pages }).to_string())
    }
}

#[derive(Debug)]
pub(crate) struct Comments;

impl Tool for Comments {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "artifact_comments",
            "Read the comments people left on one of your pages, with your answers.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let id = args["id"].as_str().unwrap_or_default();
        match own(&mut pages_of(ctx.record), id) {
            Ok(note) => ToolOutcome::ok(
                json!({"id": note.id, "title": note.title, "comments": note.comments}).to_string(),
            ),
            Err(error) => error,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Reply;

impl Tool for Reply {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "artifact_reply",
            "Answer a comment on one of your pages; the answer shows under the comment.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The page."},
                    "comment_id": {"type": "string"},
                    "text": {"type": "string", "minLength": 1, "maxLength": limits::COMMENT_CHARS}
                },
                "required": ["id", "comment_id", "text"],
                "additionalProperties": false
            }),
        )
    }

    fn call(&self, args: &Value, ctx: &mut ToolContext<'_>) -> ToolOutcome {
        let text = args["text"].as_str().unwrap_or_default().trim().to_owned();
        if text.is_empty() || text.chars().count() > limits::COMMENT_CHARS {
            return ToolOutcome::error(format!(
                "Error: `text` must have 1 to {} characters.",
                limits::COMMENT_CHARS
            ));
        }
        if ctx.library.and_then(|l| l.artifacts()).is_none() {
            return no_store();
        }
        let (id, comment_id) = (
            args["id"].as_str().unwrap_or_default(),
            args["comment_id"].as_str().unwrap_or_default(),
        );
        let answer_id = format!("an-{:012x}", ctx.ids.next_bits() & 0xffff_ffff_ffff);
        let now = ctx.now;
        let mut pages = pages_of(ctx.record);
        let note = match own(&mut pages, id) {
            Ok(note) => note,
            Err(error) => return error,
        };
        let known: Vec<String> = note.comments.iter().map(|c| c.id.clone()).collect();
        let Some(comment) = note.comments.iter_mut().find(|c| c.id == comment_id) else {
            return ToolOutcome::error(format!(
                "Error: page {id} has no comment `{comment_id}` (its comments: {}).",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        };
        comment.answers.push(text.clone());
        let artifact_id = note.id.clone();
        keep_pages(ctx.record, &pages);
        ctx.emit(Effect::library(
            CATEGORY,
            &ArtifactOp::AnswerComment {
                artifact_id,
                comment_id: comment_id.to_owned(),
                answer: Answer {
                    id: answer_id,
                    text,
                    at: now,
                },
            },
        ));
        ToolOutcome::ok(format!(
            "Answered comment {comment_id} on {id}; it shows under the comment once this turn \
             is stored."
        ))
    }
}
