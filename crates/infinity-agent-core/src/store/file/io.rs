//! The file primitives of the [`super::FileStore`]: reading what a commit made durable,
//! writing at an offset, replacing `state.json` atomically.

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, Seek, SeekFrom, Write};
use std::path::Path;

use serde::Serialize;

use crate::store::StoreError;

pub(super) fn io_err(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{}: {e}", path.display()))
}

pub(super) fn corrupt(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{}: {e}", path.display()))
}

/// Reads a whole file (missing: empty).
pub(super) fn read_all(path: &Path) -> Result<Vec<u8>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io_err(path, e)),
    }
}

/// The first `len` bytes of `bytes`, or corrupt if there are fewer.
pub(super) fn committed<'a>(
    path: &Path,
    bytes: &'a [u8],
    len: u64,
) -> Result<&'a [u8], StoreError> {
    bytes.get(..len as usize).ok_or_else(|| {
        corrupt(
            path,
            format!(
                "holds {} bytes, fewer than the committed {len}",
                bytes.len()
            ),
        )
    })
}

/// The non-empty lines of `bytes`, parsed.
pub(super) fn parse_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<T>, StoreError> {
    bytes
        .lines()
        .filter(|l| !l.as_ref().is_ok_and(|l| l.is_empty()))
        .map(|line| {
            let line = line.map_err(|e| corrupt(path, e))?;
            serde_json::from_str(&line).map_err(|e| corrupt(path, e))
        })
        .collect()
}

/// Writes `data` at byte `at` (dropping anything after it), fsyncs, and returns the new length.
pub(super) fn write_at(path: &Path, at: u64, data: &[u8]) -> Result<u64, StoreError> {
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    file.set_len(at).map_err(|e| io_err(path, e))?;
    file.seek(SeekFrom::Start(at))
        .map_err(|e| io_err(path, e))?;
    file.write_all(data).map_err(|e| io_err(path, e))?;
    file.sync_data().map_err(|e| io_err(path, e))?;
    Ok(at + data.len() as u64)
}

/// Replaces `dir/state.json` with `bytes` atomically: a temporary file, fsync, rename, and
/// fsync of the folder (the rename is the commit point).
pub(super) fn replace_state(dir: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let tmp = dir.join("state.json.tmp");
    let mut file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    file.write_all(bytes).map_err(|e| io_err(&tmp, e))?;
    file.sync_data().map_err(|e| io_err(&tmp, e))?;
    fs::rename(&tmp, dir.join("state.json")).map_err(|e| io_err(&tmp, e))?;
    sync_dir(dir)
}

/// Makes a rename or a new file in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(dir, e))
}

pub(super) fn json_lines<T: Serialize>(
    path: &Path,
    items: impl IntoIterator<Item = T>,
) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::new();
    for item in items {
        serde_json::to_writer(&mut out, &item).map_err(|e| corrupt(path, e))?;
        out.push(b'\n');
    }
    Ok(out)
}
