//! A knowledge entry, its type, and the rules every stored entry follows.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The longest name, in characters.
pub const MAX_NAME_CHARS: usize = 100;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1_000;
/// The largest content, in bytes of UTF-8 (64 KiB).
pub const MAX_CONTENT_BYTES: usize = 64 * 1024;
/// The most tags.
pub const MAX_TAGS: usize = 20;
/// The longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 50;
/// The most files a skill lists.
pub const MAX_FILES: usize = 50;
/// The longest file path, in characters.
pub const MAX_FILE_CHARS: usize = 500;
/// The most tools a skill allows.
pub const MAX_ALLOWED_TOOLS: usize = 100;
/// The longest tool name, in characters.
pub const MAX_TOOL_CHARS: usize = 100;

/// What kind of knowledge an entry holds. Stored and parsed in snake case (`observation`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum EntryType {
    /// Instructions for a task, with the files and tools they use.
    Skill,
    /// An idea or a definition.
    Concept,
    /// Something noticed (the default).
    #[default]
    Observation,
    /// How someone likes things done.
    Preference,
    /// A pointer to something elsewhere: a document, a link, a dataset.
    Reference,
    /// Someone.
    Person,
    /// A piece of work.
    Project,
}

impl EntryType {
    /// Every type, in the order above.
    pub const ALL: [EntryType; 7] = [
        EntryType::Skill,
        EntryType::Concept,
        EntryType::Observation,
        EntryType::Preference,
        EntryType::Reference,
        EntryType::Person,
        EntryType::Project,
    ];

    /// Its name as stored (`observation`).
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::Skill => "skill",
            EntryType::Concept => "concept",
            EntryType::Observation => "observation",
            EntryType::Preference => "preference",
            EntryType::Reference => "reference",
            EntryType::Person => "person",
            EntryType::Project => "project",
        }
    }
}

impl fmt::Display for EntryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A type name that is none of [`EntryType::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown knowledge type `{0}`; the types are skill, concept, observation, preference, reference, person and project")]
pub struct UnknownEntryType(pub String);

impl FromStr for EntryType {
    type Err = UnknownEntryType;

    /// Parses a type name, ignoring case and surrounding spaces.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim();
        EntryType::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| UnknownEntryType(s.to_owned()))
    }
}

/// An entry of the knowledge registry. Its key is its name lowercased ([`key_of`]): names that
/// differ only in case are one entry, stored under the name as last written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnowledgeEntry {
    /// Its name, as written (1 to 100 characters, no control characters).
    pub name: String,
    /// Its type.
    #[serde(rename = "type", default)]
    pub entry_type: EntryType,
    /// What it is about, in a sentence or two (at most 1,000 characters).
    #[serde(default)]
    pub description: String,
    /// The knowledge itself (at most 64 KiB).
    #[serde(default)]
    pub content: String,
    /// Labels to find it by (at most 20, each at most 50 characters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Skills only: files the skill uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Skills only: the tools the skill may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_tools: Vec<String>,
    /// When it was first written.
    pub created_at: Timestamp,
    /// When it was last written.
    pub updated_at: Timestamp,
    /// Set by the store on every write (1 for a new entry); the expected version of the next
    /// write (optimistic concurrency).
    #[serde(default)]
    pub version: u64,
}

impl KnowledgeEntry {
    /// A new entry written at `now`, with no description, content, tags, files or tools, and
    /// version 0 (not stored yet).
    pub fn new(name: impl Into<String>, entry_type: EntryType, now: Timestamp) -> Self {
        Self {
            name: name.into(),
            entry_type,
            description: String::new(),
            content: String::new(),
            tags: Vec::new(),
            files: Vec::new(),
            allowed_tools: Vec::new(),
            created_at: now,
            updated_at: now,
            version: 0,
        }
    }

    /// Its key: its name lowercased.
    pub fn key(&self) -> String {
        key_of(&self.name)
    }

    /// Checks every limit, reporting the first field that breaks one.
    pub fn validate(&self) -> Result<(), InvalidEntry> {
        validate_name(&self.name)?;
        check_chars(
            "description",
            &self.description,
            MAX_DESCRIPTION_CHARS,
            true,
        )?;
        if self.content.len() > MAX_CONTENT_BYTES {
            return Err(InvalidEntry::new(
                "content",
                format!(
                    "is {} bytes; the limit is {MAX_CONTENT_BYTES} bytes (64 KiB)",
                    self.content.len()
                ),
            ));
        }
        check_list("tags", &self.tags, MAX_TAGS, MAX_TAG_CHARS)?;
        if self.entry_type != EntryType::Skill {
            for (field, list) in [
                ("files", &self.files),
                ("allowed_tools", &self.allowed_tools),
            ] {
                if !list.is_empty() {
                    return Err(InvalidEntry::new(
                        field,
                        format!(
                            "are for skills only; this entry's type is {}",
                            self.entry_type
                        ),
                    ));
                }
            }
        }
        check_list("files", &self.files, MAX_FILES, MAX_FILE_CHARS)?;
        check_list(
            "allowed_tools",
            &self.allowed_tools,
            MAX_ALLOWED_TOOLS,
            MAX_TOOL_CHARS,
        )
    }
}

/// The key of an entry named `name`: the name lowercased (Unicode lowercase).
pub fn key_of(name: &str) -> String {
    name.to_lowercase()
}

/// Checks a name on its own (for a lookup or a removal before any entry is built).
pub fn validate_name(name: &str) -> Result<(), InvalidEntry> {
    if name.trim().is_empty() {
        return Err(InvalidEntry::new(
            "name",
            "is empty; a name has 1 to 100 characters",
        ));
    }
    if name.trim() != name {
        return Err(InvalidEntry::new(
            "name",
            "starts or ends with spaces; write it without them",
        ));
    }
    check_chars("name", name, MAX_NAME_CHARS, false)
}

/// Why an entry cannot be stored: the field and the rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct InvalidEntry {
    /// The field, as it is named in the entry's JSON (`tags`; `tags[3]` for one tag).
    pub field: String,
    /// What is wrong with it, with the limit.
    pub problem: String,
}

impl InvalidEntry {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// At most `max` characters, no control characters (`multiline`: newlines and tabs allowed).
fn check_chars(field: &str, text: &str, max: usize, multiline: bool) -> Result<(), InvalidEntry> {
    let chars = text.chars().count();
    if chars > max {
        return Err(InvalidEntry::new(
            field,
            format!("is {chars} characters; the limit is {max}"),
        ));
    }
    let allowed = |c: char| multiline && matches!(c, '\n' | '\t' | '\r');
    if let Some(c) = text.chars().find(|&c| c.is_control() && !allowed(c)) {
        return Err(InvalidEntry::new(
            field,
            format!("holds the control character {c:?}; remove it"),
        ));
    }
    Ok(())
}

/// At most `max_items` non-empty items of at most `max_chars` characters each.
fn check_list(
    field: &str,
    items: &[String],
    max_items: usize,
    max_chars: usize,
) -> Result<(), InvalidEntry> {
    if items.len() > max_items {
        return Err(InvalidEntry::new(
            field,
            format!("has {} items; the limit is {max_items}", items.len()),
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let field = format!("{field}[{i}]");
        if item.trim().is_empty() {
            return Err(InvalidEntry::new(field, "is empty"));
        }
        check_chars(&field, item, max_chars, false)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(entry_type: EntryType) -> KnowledgeEntry {
        KnowledgeEntry::new("Deploy checklist", entry_type, Timestamp::UNIX_EPOCH)
    }

    fn field_of(entry: &KnowledgeEntry) -> String {
        entry.validate().unwrap_err().field
    }

    #[test]
    fn types_parse_in_any_case_and_the_error_lists_them() {
        assert_eq!("Skill".parse::<EntryType>(), Ok(EntryType::Skill));
        assert_eq!(" project ".parse::<EntryType>(), Ok(EntryType::Project));
        for t in EntryType::ALL {
            assert_eq!(t.to_string().parse::<EntryType>(), Ok(t));
            assert_eq!(
                serde_json::to_value(t).unwrap(),
                serde_json::json!(t.as_str())
            );
        }
        let err = "note".parse::<EntryType>().unwrap_err().to_string();
        assert!(err.contains("`note`"), "{err}");
        for t in EntryType::ALL {
            assert!(err.contains(t.as_str()), "{err}");
        }
        assert_eq!(EntryType::default(), EntryType::Observation);
    }

    #[test]
    fn the_stored_form_has_a_type_field_and_defaults() {
        let json = r#"{"name":"N","created_at":"2026-12-01T00:00:00Z","updated_at":"2026-12-01T00:00:00Z"}"#;
        let parsed: KnowledgeEntry = serde_json::from_str(json).unwrap();
        assert_eq!(parsed.entry_type, EntryType::Observation);
        assert_eq!(parsed.version, 0);
        let mut skill = entry(EntryType::Skill);
        skill.files = vec!["deploy.sh".into()];
        let value = serde_json::to_value(&skill).unwrap();
        assert_eq!(value["type"], "skill");
        assert_eq!(value["files"][0], "deploy.sh");
        assert!(value.get("tags").is_none(), "{value}");
        let back: KnowledgeEntry = serde_json::from_value(value).unwrap();
        assert_eq!(back, skill);
    }

    #[test]
    fn every_limit_names_its_field_and_the_limit() {
        assert!(entry(EntryType::Concept).validate().is_ok());

        let mut e = entry(EntryType::Concept);
        e.name = "x".repeat(101);
        let err = e.validate().unwrap_err();
        assert_eq!(err.field, "name");
        assert!(
            err.to_string().contains("101 characters; the limit is 100"),
            "{err}"
        );
        for bad in ["", "   ", " padded", "tab\there", "line\nbreak"] {
            e.name = bad.to_owned();
            assert_eq!(field_of(&e), "name", "{bad:?}");
        }
        e.name = "ünïcödé ".trim().repeat(10); // 70 characters, 140 bytes
        assert!(e.validate().is_ok());

        let mut e = entry(EntryType::Concept);
        e.description = "d".repeat(1_001);
        let err = e.validate().unwrap_err();
        assert_eq!(err.field, "description");
        assert!(err.to_string().contains("the limit is 1000"), "{err}");

        let mut e = entry(EntryType::Concept);
        e.content = "c".repeat(64 * 1024);
        assert!(e.validate().is_ok());
        e.content.push('c');
        let err = e.validate().unwrap_err();
        assert_eq!(err.field, "content");
        assert!(err.to_string().contains("65537 bytes"), "{err}");

        let mut e = entry(EntryType::Concept);
        e.tags = (0..21).map(|i| format!("t{i}")).collect();
        let err = e.validate().unwrap_err();
        assert_eq!(err.field, "tags");
        assert!(
            err.to_string().contains("21 items; the limit is 20"),
            "{err}"
        );
        e.tags = vec!["ok".into(), "t".repeat(51)];
        let err = e.validate().unwrap_err();
        assert_eq!(err.field, "tags[1]");
        assert!(err.to_string().contains("the limit is 50"), "{err}");
        e.tags = vec![" ".into()];
        assert_eq!(field_of(&e), "tags[0]");
    }

    #[test]
    fn only_a_skill_has_files_and_allowed_tools() {
        let mut e = entry(EntryType::Reference);
        e.files = vec!["a.md".into()];
        let err = e.validate().unwrap_err();
        assert_eq!(err.field, "files");
        assert_eq!(
            err.to_string(),
            "files are for skills only; this entry's type is reference"
        );
        e.files.clear();
        e.allowed_tools = vec!["bash".into()];
        assert_eq!(field_of(&e), "allowed_tools");
        e.entry_type = EntryType::Skill;
        e.files = vec!["a.md".into()];
        assert!(e.validate().is_ok());
    }

    #[test]
    fn keys_ignore_case() {
        let a = KnowledgeEntry::new("Deploy Checklist", EntryType::Skill, Timestamp::UNIX_EPOCH);
        assert_eq!(a.key(), key_of("deploy CHECKLIST"));
        assert_eq!(key_of("ÉTÉ"), "été");
    }
}
