//! Where a host keeps its artifacts' objects ([`Blobs`]): in memory or in a folder here; S3 on
//! a stack (`infinity_aws::artifacts`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use super::ArtifactError;

/// Where a host keeps its artifacts' objects: whole objects by key.
#[async_trait]
pub trait Blobs: Send + Sync + fmt::Debug {
    /// Writes the object `key` (replacing it).
    async fn put(&self, key: &str, bytes: Vec<u8>, content_type: &str)
        -> Result<(), ArtifactError>;
    /// The object `key`, if there is one.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, ArtifactError>;
    /// The keys that start with `prefix`, in any order.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, ArtifactError>;
}

/// Objects in memory (a host without a store folder).
#[derive(Debug, Default)]
pub struct MemoryBlobs(Mutex<BTreeMap<String, Vec<u8>>>);

#[async_trait]
impl Blobs for MemoryBlobs {
    async fn put(&self, key: &str, bytes: Vec<u8>, _: &str) -> Result<(), ArtifactError> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.to_owned(), bytes);
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        Ok(self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned())
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ArtifactError> {
        Ok(self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, _)| k.clone())
            .collect())
    }
}

/// Objects as files under a folder (a store folder's `artifacts/`); keys are relative paths.
#[derive(Debug, Clone)]
pub struct FileBlobs {
    root: PathBuf,
}

impl FileBlobs {
    /// Objects under `root` (made when the first is written).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn path(&self, key: &str) -> Result<PathBuf, ArtifactError> {
        if key.split('/').any(|part| part.is_empty() || part == "..") {
            return Err(ArtifactError::Refused(format!("`{key}` is not a key")));
        }
        Ok(self.root.join(key))
    }
}

fn io(key: &str, e: std::io::Error) -> ArtifactError {
    ArtifactError::Unavailable(format!("{key}: {e}"))
}

#[async_trait]
impl Blobs for FileBlobs {
    async fn put(&self, key: &str, bytes: Vec<u8>, _: &str) -> Result<(), ArtifactError> {
        let path = self.path(key)?;
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| io(key, e))?;
        }
        // Written beside, then renamed: a reader never sees half an object.
        let partial = path.with_extension("partial");
        tokio::fs::write(&partial, bytes)
            .await
            .map_err(|e| io(key, e))?;
        tokio::fs::rename(&partial, &path)
            .await
            .map_err(|e| io(key, e))
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, ArtifactError> {
        match tokio::fs::read(self.path(key)?).await {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(key, e)),
        }
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, ArtifactError> {
        let mut keys = Vec::new();
        let mut dirs = vec![self.root.clone()];
        while let Some(dir) = dirs.pop() {
            let mut entries = match tokio::fs::read_dir(&dir).await {
                Ok(entries) => entries,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io(prefix, e)),
            };
            while let Some(entry) = entries.next_entry().await.map_err(|e| io(prefix, e))? {
                let path = entry.path();
                let Ok(relative) = path.strip_prefix(&self.root) else {
                    continue;
                };
                let key = relative.to_string_lossy().replace('\\', "/");
                let is_dir = entry.file_type().await.map_err(|e| io(&key, e))?.is_dir();
                if is_dir {
                    // Only folders on the prefix's way, or under it.
                    let folder = format!("{key}/");
                    if prefix.starts_with(&folder) || folder.starts_with(prefix) {
                        dirs.push(path);
                    }
                } else if key.starts_with(prefix) && !key.ends_with(".partial") {
                    keys.push(key);
                }
            }
        }
        Ok(keys)
    }
}
