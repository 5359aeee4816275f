//! The store folder's lock: `DIR/lock`, an exclusive file lock naming its holder, held while any
//! clone of the [`super::FileStore`] lives.
//!
//! Two things the file lock alone cannot tell are kept in a table of the folders this process
//! holds: a second store of this process on one folder is refused at once (whatever the
//! platform's lock does within one process), and a lock that names this very process while none
//! of its stores holds the folder is a child process starting (it shares its parent's open
//! files, the lock's among them, until it runs its program), which is waited out.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use super::io::io_err;
use crate::store::StoreError;

/// How long a lock held only through this process's own open files is waited for before it
/// counts as held, and how often the lock is tried meanwhile.
const INHERITED_WAIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

/// A held lock; dropping it lets the folder go.
#[derive(Debug)]
pub(super) struct HeldLock {
    pub(super) file: File,
    /// The folder, canonical: its entry in [`held`].
    key: PathBuf,
}

impl Drop for HeldLock {
    fn drop(&mut self) {
        held().remove(&self.key);
    }
}

/// The store folders this process holds.
fn held() -> MutexGuard<'static, HashSet<PathBuf>> {
    static HELD: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes `root`'s lock. Held by another process (or another store of this one): refused with
/// [`StoreError::Locked`] naming the holder, or with `waiting`, that is told the holder and the
/// lock is waited for.
pub(super) fn take(
    root: &Path,
    waiting: Option<impl FnOnce(&str)>,
) -> Result<HeldLock, StoreError> {
    let path = root.join("lock");
    let key = fs::canonicalize(root).map_err(|e| io_err(root, e))?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    let waits = waiting.is_some();
    let mut tell = waiting;
    let mut inherited = Duration::ZERO;
    loop {
        let ours = held().contains(&key);
        if !ours {
            match file.try_lock() {
                Ok(()) => break,
                Err(fs::TryLockError::WouldBlock) => {}
                Err(fs::TryLockError::Error(e)) => return Err(io_err(&path, e)),
            }
        }
        let holder = holder_of(&mut file);
        let names_us = holder.starts_with(&format!("process {} ", std::process::id()));
        if !ours && names_us && inherited < INHERITED_WAIT {
            std::thread::sleep(POLL);
            inherited += POLL;
            continue;
        }
        if !waits {
            return Err(StoreError::Locked {
                path: root.display().to_string(),
                holder,
            });
        }
        if let Some(tell) = tell.take() {
            tell(&holder);
        }
        if ours {
            // A lock a store of this process holds is waited for in the table, not the file.
            std::thread::sleep(POLL);
            continue;
        }
        file.lock().map_err(|e| io_err(&path, e))?;
        break;
    }
    held().insert(key.clone());
    let held = HeldLock { file, key };
    let mut file = &held.file;
    file.set_len(0).map_err(|e| io_err(&path, e))?;
    file.seek(SeekFrom::Start(0))
        .map_err(|e| io_err(&path, e))?;
    file.write_all(holder_note().as_bytes())
        .map_err(|e| io_err(&path, e))?;
    Ok(held)
}

/// What the lock file says of its holder.
fn holder_of(file: &mut File) -> String {
    let mut holder = String::new();
    let _ = file.seek(SeekFrom::Start(0));
    let _ = file.read_to_string(&mut holder);
    holder.trim().to_owned()
}

/// Who holds a store's lock, as written in the lock file.
fn holder_note() -> String {
    let command: Vec<String> = std::env::args().take(4).collect();
    format!(
        "process {} ({}) since {}",
        std::process::id(),
        command.join(" "),
        jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .unwrap_or(jiff::Timestamp::now())
    )
}
