//! The answers that stand, on disk: `DIR/threads/<id>/answers/<call id>.<question|result>.json`,
//! one file each,
//! written whole (a temporary file, fsync, rename, fsync of the folder) by the one process that
//! holds the store, under its lock, so the first claim is the one on disk.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::io::{corrupt, io_err, sync_dir};
use crate::ids::CallId;
use crate::input::{Answer, AnswerTo};
use crate::store::StoreError;

fn path(thread_dir: &Path, call_id: &CallId, to: AnswerTo) -> PathBuf {
    thread_dir
        .join("answers")
        .join(format!("{}.{}.json", call_id.as_str(), to.as_str()))
}

/// The answer that stands for what `call_id` waits for (`to`), if one does.
pub(super) fn standing(
    thread_dir: &Path,
    call_id: &CallId,
    to: AnswerTo,
) -> Result<Option<Answer>, StoreError> {
    let path = path(thread_dir, call_id, to);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| corrupt(&path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path, e)),
    }
}

/// Keeps `answer` unless its call has one; then that one. The caller holds the store's lock.
pub(super) fn claim(thread_dir: &Path, answer: &Answer) -> Result<Option<Answer>, StoreError> {
    if let Some(standing) = standing(thread_dir, &answer.call_id, answer.to)? {
        return Ok(Some(standing));
    }
    let path = path(thread_dir, &answer.call_id, answer.to);
    let folder = thread_dir.join("answers");
    fs::create_dir_all(&folder).map_err(|e| io_err(&folder, e))?;
    let tmp = path.with_extension("json.tmp");
    let bytes = serde_json::to_vec(answer).map_err(|e| corrupt(&path, e))?;
    let mut file = File::create(&tmp).map_err(|e| io_err(&tmp, e))?;
    file.write_all(&bytes).map_err(|e| io_err(&tmp, e))?;
    file.sync_data().map_err(|e| io_err(&tmp, e))?;
    fs::rename(&tmp, &path).map_err(|e| io_err(&tmp, e))?;
    sync_dir(&folder)?;
    // A thread's first answer makes the folder: make that durable too.
    sync_dir(thread_dir)?;
    Ok(None)
}

/// Forgets `answer` if it still stands. The caller holds the store's lock.
pub(super) fn withdraw(thread_dir: &Path, answer: &Answer) -> Result<(), StoreError> {
    if standing(thread_dir, &answer.call_id, answer.to)?.as_ref() != Some(answer) {
        return Ok(());
    }
    let path = path(thread_dir, &answer.call_id, answer.to);
    fs::remove_file(&path).map_err(|e| io_err(&path, e))?;
    sync_dir(&thread_dir.join("answers"))
}
