//! A knowledge store in a folder, one JSON file per entry.
//!
//! Layout of the folder:
//! - `<key>.json`: one entry, as [`KnowledgeEntry`] serializes it plus `"format": 1`. The file
//!   is named after the entry's key (its name lowercased) with every byte other than `a-z`,
//!   `0-9`, `-` and `_` written `%XX` (`Deploy checklist` is `deploy%20checklist.json`), so
//!   names that differ only in case share one file on every file system. A key whose name would
//!   pass 200 bytes keeps its first 180 and ends in `~` and a 64-bit FNV-1a hash of the whole
//!   key (no other name has a `~`); the entry inside says which key it is.
//! - `<key>.json.tmp`: a write that did not finish (ignored; the next write replaces it).
//! - `lock`: locked for the length of each write and removal, so the version check and the
//!   write are one step even with several processes writing to the folder.
//!
//! A write is atomic: a temporary file, fsync, rename over the entry's file, fsync of the
//! folder. A file that cannot be read back (bad JSON, an invalid entry, a name that is not its
//! entry's key) is left out of [`KnowledgeStore::load_all`], logged with its path and kept in
//! [`FileKnowledgeStore::broken`]; it is never deleted, and writing the entry again with no
//! expected version replaces it.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::entry::{key_of, KnowledgeEntry};
use super::store::{next_version, KnowledgeStore, KnowledgeStoreError};

/// The layout of an entry's file.
const FORMAT: u32 = 1;
/// The longest file name before the `.json`, in bytes.
const MAX_STEM_BYTES: usize = 200;
/// How much of an encoded key a hashed file name keeps.
const HASHED_PREFIX_BYTES: usize = 180;

#[derive(Serialize)]
struct EntryFileOut<'a> {
    format: u32,
    #[serde(flatten)]
    entry: &'a KnowledgeEntry,
}

#[derive(Deserialize)]
struct EntryFileIn {
    #[serde(default = "format_one")]
    format: u32,
    #[serde(flatten)]
    entry: KnowledgeEntry,
}

fn format_one() -> u32 {
    1
}

/// An entry file that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokenEntry {
    /// The file.
    pub path: PathBuf,
    /// Why it was left out.
    pub reason: String,
}

/// A [`KnowledgeStore`] in a folder; see the module docs for the layout.
#[derive(Debug)]
pub struct FileKnowledgeStore {
    root: PathBuf,
    broken: Mutex<Vec<BrokenEntry>>,
}

impl FileKnowledgeStore {
    /// A store in `root`, creating the folder if needed. Nothing is read until
    /// [`KnowledgeStore::load_all`].
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, KnowledgeStoreError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| io_err(&root, e))?;
        Ok(Self {
            root,
            broken: Mutex::new(Vec::new()),
        })
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The files the last [`KnowledgeStore::load_all`] left out, with why.
    pub fn broken(&self) -> Vec<BrokenEntry> {
        self.lock_broken().clone()
    }

    fn lock_broken(&self) -> MutexGuard<'_, Vec<BrokenEntry>> {
        self.broken
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The file of the entry with key `key`.
    fn path_of(&self, key: &str) -> PathBuf {
        self.root.join(file_name(key))
    }

    /// Takes the folder's write lock (released when the file is dropped).
    fn lock(&self) -> Result<File, KnowledgeStoreError> {
        let path = self.root.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io_err(&path, e))?;
        file.lock().map_err(|e| io_err(&path, e))?;
        Ok(file)
    }
}

#[async_trait]
impl KnowledgeStore for FileKnowledgeStore {
    async fn load_all(&self) -> Result<Vec<KnowledgeEntry>, KnowledgeStoreError> {
        let mut entries = Vec::new();
        let mut broken = Vec::new();
        let dir = fs::read_dir(&self.root).map_err(|e| io_err(&self.root, e))?;
        for item in dir {
            let path = item.map_err(|e| io_err(&self.root, e))?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") || !path.is_file() {
                continue;
            }
            match read_entry(&path).and_then(|entry| matches_its_file(&path, entry)) {
                Ok(Some(entry)) => entries.push(entry),
                Ok(None) => {} // removed while we listed
                Err(err) => {
                    tracing::warn!(path = %path.display(), %err, "knowledge entry left out: its file cannot be read");
                    broken.push(BrokenEntry {
                        path,
                        reason: err.to_string(),
                    });
                }
            }
        }
        entries.sort_by_cached_key(KnowledgeEntry::key);
        broken.sort_by(|a, b| a.path.cmp(&b.path));
        *self.lock_broken() = broken;
        Ok(entries)
    }

    async fn get(&self, name: &str) -> Result<Option<KnowledgeEntry>, KnowledgeStoreError> {
        let path = self.path_of(&key_of(name));
        read_entry(&path).and_then(|entry| matches_its_file(&path, entry))
    }

    async fn put(
        &self,
        entry: &KnowledgeEntry,
        expected_version: Option<u64>,
    ) -> Result<u64, KnowledgeStoreError> {
        entry.validate()?;
        let path = self.path_of(&entry.key());
        let _lock = self.lock()?;
        let stored = match read_entry(&path).and_then(|stored| matches_its_file(&path, stored)) {
            Ok(stored) => stored.map(|s| s.version),
            // Overwriting whatever is there repairs a broken file; a versioned write cannot.
            Err(_) if expected_version.is_none() => None,
            Err(err) => return Err(err),
        };
        let version = next_version(&entry.name, stored, expected_version)?;
        let mut written = entry.clone();
        written.version = version;
        let bytes = serde_json::to_vec_pretty(&EntryFileOut {
            format: FORMAT,
            entry: &written,
        })
        .map_err(|e| corrupt(&path, e))?;
        replace_file(&self.root, &path, &bytes)?;
        Ok(version)
    }

    async fn remove(&self, name: &str) -> Result<bool, KnowledgeStoreError> {
        let path = self.path_of(&key_of(name));
        let _lock = self.lock()?;
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_err(&path, e)),
        }
        sync_dir(&self.root)?;
        Ok(true)
    }
}

/// The entry in `path`, if the file exists.
fn read_entry(path: &Path) -> Result<Option<KnowledgeEntry>, KnowledgeStoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path, e)),
    };
    let file: EntryFileIn = serde_json::from_slice(&bytes).map_err(|e| corrupt(path, e))?;
    if file.format > FORMAT {
        return Err(corrupt(
            path,
            format!(
                "written in format {}, newer than this version reads ({FORMAT})",
                file.format
            ),
        ));
    }
    file.entry.validate().map_err(|e| corrupt(path, e))?;
    Ok(Some(file.entry))
}

/// The entry, if it is the one its file is named for (a file renamed by hand is not).
fn matches_its_file(
    path: &Path,
    entry: Option<KnowledgeEntry>,
) -> Result<Option<KnowledgeEntry>, KnowledgeStoreError> {
    match entry {
        Some(entry)
            if path.file_name().and_then(|n| n.to_str()) != Some(&file_name(&entry.key())) =>
        {
            Err(corrupt(
                path,
                format!(
                    "holds the entry `{}`, whose file is {}",
                    entry.name,
                    file_name(&entry.key())
                ),
            ))
        }
        entry => Ok(entry),
    }
}

/// The file name of the entry with key `key` (see the module docs).
fn file_name(key: &str) -> String {
    let pieces: Vec<String> = key
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let whole: usize = pieces.iter().map(String::len).sum();
    let mut name = String::with_capacity(whole.min(MAX_STEM_BYTES) + 5);
    if whole <= MAX_STEM_BYTES {
        pieces.iter().for_each(|p| name.push_str(p));
    } else {
        for piece in &pieces {
            if name.len() + piece.len() > HASHED_PREFIX_BYTES {
                break;
            }
            name.push_str(piece);
        }
        name.push_str(&format!("~{:016x}", fnv1a(key.as_bytes())));
    }
    name.push_str(".json");
    name
}

/// 64-bit FNV-1a: small, stable across platforms and releases (std's hashers promise neither).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Replaces `path` with `bytes` atomically: a temporary file, fsync, rename, and fsync of the
/// folder (the rename is the commit point).
fn replace_file(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), KnowledgeStoreError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    file.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
    file.sync_all().map_err(|e| io_err(&tmp, e))?;
    fs::rename(&tmp, path).map_err(|e| io_err(&tmp, e))?;
    sync_dir(dir)
}

/// Makes a rename or a removal in `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), KnowledgeStoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, e))
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> KnowledgeStoreError {
    KnowledgeStoreError::Unavailable(format!("{}: {e}", path.display()))
}

fn corrupt(path: &Path, e: impl std::fmt::Display) -> KnowledgeStoreError {
    KnowledgeStoreError::Corrupt(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe_distinct_and_bounded() {
        assert_eq!(file_name("deploy checklist"), "deploy%20checklist.json");
        assert_eq!(file_name("a/../b"), "a%2F%2E%2E%2Fb.json");
        assert_eq!(file_name("été"), "%C3%A9t%C3%A9.json");
        assert_ne!(file_name("a b"), file_name("a%20b"));
        // 100 four-byte characters: 1,200 bytes encoded, cut and hashed.
        let long = "😀".repeat(100);
        let name = file_name(&long);
        assert!(name.len() <= 255, "{}", name.len());
        assert!(name.contains('~'));
        let other = format!("{}😁", "😀".repeat(99));
        assert_ne!(file_name(&other), name);
        assert_eq!(file_name(&long), name, "deterministic");
    }

    #[test]
    fn fnv1a_matches_its_published_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
