//! The catalog in a file store's folder: `agents/NAME/VERSION.json`, one file per version.
//!
//! A version is written to a temporary file, synced, then linked to its final name, which fails
//! when the name exists: two processes saving the same agent at once get different versions,
//! and a crash leaves either the whole version or none of it. It takes no lock on the store, so
//! `infinity agents save` works while `infinity serve` runs on the folder.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use jiff::Timestamp;

use super::{AgentCatalog, CatalogError, StoredAgent};

/// How many versions a save tries before giving up to other savers.
const SAVE_ATTEMPTS: u32 = 16;

/// Saves this process has begun (names their temporary files apart).
static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The agents of a store folder.
#[derive(Debug, Clone)]
pub struct FileCatalog {
    dir: PathBuf,
}

fn unavailable(path: &Path, e: impl std::fmt::Display) -> CatalogError {
    CatalogError::Unavailable(format!("{}: {e}", path.display()))
}

impl FileCatalog {
    /// The catalog of the store folder `root` (its `agents/` folder, made on the first save).
    pub fn new(root: &Path) -> Self {
        Self {
            dir: root.join("agents"),
        }
    }

    fn versions_in(&self, name: &str) -> Result<Vec<u32>, CatalogError> {
        let dir = self.dir.join(name);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(unavailable(&dir, e)),
        };
        let mut versions = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| unavailable(&dir, e))?;
            let name = entry.file_name();
            let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(".json")) else {
                continue;
            };
            if let Ok(v) = stem.parse::<u32>() {
                versions.push(v);
            }
        }
        versions.sort_unstable();
        Ok(versions)
    }

    fn read(&self, name: &str, version: u32) -> Result<Option<StoredAgent>, CatalogError> {
        let path = self.dir.join(name).join(format!("{version}.json"));
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(unavailable(&path, e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| CatalogError::Corrupt(format!("{}: {e}", path.display())))
    }
}

/// A name the file system holds as one folder: the agent file's rule (letters, digits, `_`,
/// `-`, `.`), and not `.` or `..`.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

fn sync_dir(dir: &Path) -> Result<(), CatalogError> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| unavailable(dir, e))
}

#[async_trait]
impl AgentCatalog for FileCatalog {
    async fn save(
        &self,
        mut agent: StoredAgent,
        now: Timestamp,
    ) -> Result<StoredAgent, CatalogError> {
        if !safe_name(&agent.name) {
            return Err(CatalogError::Unavailable(format!(
                "`{}` cannot name an agent: use letters, digits, `_`, `-` or `.`",
                agent.name
            )));
        }
        let dir = self.dir.join(&agent.name);
        fs::create_dir_all(&dir).map_err(|e| unavailable(&dir, e))?;
        agent.saved_at = now;
        for _ in 0..SAVE_ATTEMPTS {
            agent.version = self.versions_in(&agent.name)?.last().map_or(1, |v| v + 1);
            let bytes = serde_json::to_vec_pretty(&agent)
                .map_err(|e| CatalogError::Corrupt(e.to_string()))?;
            // Unique per save, so two saves at once (in one process or two) never share it.
            let tmp = dir.join(format!(
                ".{}.{}.{}.tmp",
                agent.version,
                std::process::id(),
                SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            let mut file = fs::File::create(&tmp).map_err(|e| unavailable(&tmp, e))?;
            file.write_all(&bytes).map_err(|e| unavailable(&tmp, e))?;
            file.sync_all().map_err(|e| unavailable(&tmp, e))?;
            drop(file);
            let target = dir.join(format!("{}.json", agent.version));
            let linked = fs::hard_link(&tmp, &target);
            let _ = fs::remove_file(&tmp);
            match linked {
                Ok(()) => {
                    sync_dir(&dir)?;
                    return Ok(agent);
                }
                // Another save took this version: take the next one.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(unavailable(&target, e)),
            }
        }
        Err(CatalogError::Contended(agent.name))
    }

    async fn get(
        &self,
        name: &str,
        version: Option<u32>,
    ) -> Result<Option<StoredAgent>, CatalogError> {
        if !safe_name(name) {
            return Ok(None);
        }
        let version = match version {
            Some(v) => v,
            None => match self.versions_in(name)?.last() {
                Some(v) => *v,
                None => return Ok(None),
            },
        };
        self.read(name, version)
    }

    async fn list(&self) -> Result<Vec<StoredAgent>, CatalogError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(unavailable(&self.dir, e)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| unavailable(&self.dir, e))?;
            if let Some(name) = entry.file_name().to_str().filter(|n| safe_name(n)) {
                names.push(name.to_owned());
            }
        }
        names.sort();
        let mut agents = Vec::new();
        for name in names {
            if let Some(agent) = self.get(&name, None).await? {
                agents.push(agent);
            }
        }
        Ok(agents)
    }

    async fn versions(&self, name: &str) -> Result<Vec<u32>, CatalogError> {
        if !safe_name(name) {
            return Ok(Vec::new());
        }
        self.versions_in(name)
    }
}
