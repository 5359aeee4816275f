//! Moving a live conversation to another host (RAP's session migration), the host-neutral
//! part: which threads move with a conversation (its own and those of the conversations it
//! delegated to), stopping and exporting them at the source, importing them at the destination
//! with their timers armed again, and leaving forwarding tombstones behind.
//!
//! The steps, in the order the RAP spec gives (the `infinity migrate` command drives them):
//! 1. [`begin`]: every thread of the conversation is marked *moving*: it runs nothing and holds the
//!    inputs that arrive ([`crate::state::ThreadRecord::held`]).
//! 2. The tool servers that keep state per conversation are told to move it (`POST /migrate`).
//! 3. [`export`] writes the conversation as a [`Bundle`]; the destination's [`import`] stores it,
//!    arms its timers and call deadlines again, and signs a forwarding URL per thread.
//! 4. [`finish`] turns each source thread into a tombstone that forwards what still arrives
//!    there (a tool's late callback, a timer armed at the source) to the destination; the inputs
//!    held meanwhile are forwarded first. Or [`abort`]: the threads run here again, the held
//!    inputs applied in order.
//!
//! Inputs are never lost on the way: held inputs stay on the source record until forwarded, and
//! the destination drops repeats by input id.

use std::collections::{BTreeMap, HashSet, VecDeque};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::commit::Commit;
use crate::effect::{Effect, PendingEffect};
use crate::history::HistoryEntry;
use crate::ids::{IdSource, InputId, ThreadId};
use crate::input::{Input, InputBody};
use crate::state::{Migration, MigrationState, PendingKind, ThreadRecord, ThreadStatus, Toolset};
use crate::store::{StoreError, ThreadStore};

/// The version of the [`Bundle`] layout.
pub const BUNDLE_FORMAT: u32 = 1;

/// A session on its way between hosts: every thread's record and own history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Bundle {
    /// The layout version, [`BUNDLE_FORMAT`].
    pub format: u32,
    /// The session's root thread.
    pub root: ThreadId,
    /// The threads, parents before their children.
    pub threads: Vec<ThreadExport>,
}

/// One thread of a [`Bundle`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ThreadExport {
    /// Its record, as the source had it when the move began (not marked moving).
    pub record: ThreadRecord,
    /// Its own history entries, in order.
    pub entries: Vec<HistoryEntry>,
}

/// Why a conversation could not move (nothing changed at the source unless it says so).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrationError {
    /// No thread has this id.
    #[error("thread {0} does not exist")]
    UnknownThread(ThreadId),
    /// Only a whole conversation moves.
    #[error(
        "thread {thread} cannot move on its own: {why}; move the root thread of its conversation"
    )]
    NotARoot {
        /// The thread.
        thread: ThreadId,
        /// What it is instead (a child of, delegated by).
        why: String,
    },
    /// The conversation is closed.
    #[error("thread {0} is closed; there is nothing running to move")]
    Closed(ThreadId),
    /// A move of this conversation is under way, or done.
    #[error("thread {thread} is already {state} to {to}")]
    AlreadyMoving {
        /// The thread.
        thread: ThreadId,
        /// `moving` or `moved`.
        state: &'static str,
        /// Where.
        to: String,
    },
    /// The thread is not moving (a finish or abort without a begin).
    #[error("thread {0} is not moving")]
    NotMoving(ThreadId),
    /// The destination runs no agent by the name a thread uses.
    #[error("the destination runs no agent named `{agent}` (thread {thread} uses it); start it with that agent")]
    UnknownAgent {
        /// The thread.
        thread: ThreadId,
        /// The agent's name.
        agent: String,
    },
    /// The destination has a thread with this id already.
    #[error("thread {0} already exists at the destination")]
    Exists(ThreadId),
    /// The destination gave no forwarding URL for a thread.
    #[error("the destination gave no forwarding URL for thread {0}")]
    NoForwardUrl(ThreadId),
    /// The bundle is not one this host can import.
    #[error("the session bundle cannot be imported: {0}")]
    BadBundle(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The ids of the threads that move with the conversation of `root`: the root, its children,
/// the conversations it delegated to, and theirs, parents first.
pub async fn conversation_threads(
    store: &dyn ThreadStore,
    root: &ThreadId,
) -> Result<Vec<ThreadId>, MigrationError> {
    let mut seen: HashSet<ThreadId> = HashSet::from([root.clone()]);
    let mut queue = VecDeque::from([root.clone()]);
    let mut order = Vec::new();
    while let Some(id) = queue.pop_front() {
        let record = store
            .load_record(&id)
            .await?
            .ok_or_else(|| MigrationError::UnknownThread(id.clone()))?;
        let next = record.children.iter().map(|c| c.thread_id.clone()).chain(
            record
                .conversation
                .delegations
                .iter()
                .map(|d| d.thread_id.clone()),
        );
        for child in next {
            if seen.insert(child.clone()) {
                queue.push_back(child);
            }
        }
        order.push(id);
    }
    Ok(order)
}

/// Step 1: checks that `root` is the root of a conversation that can move, and marks each of its
/// threads moving (they run nothing and hold their inputs). Returns the threads' ids.
pub async fn begin(
    store: &dyn ThreadStore,
    root: &ThreadId,
    to: &str,
    now: Timestamp,
) -> Result<Vec<ThreadId>, MigrationError> {
    let record = store
        .load_record(root)
        .await?
        .ok_or_else(|| MigrationError::UnknownThread(root.clone()))?;
    if let Some(parent) = &record.parent {
        return Err(MigrationError::NotARoot {
            thread: root.clone(),
            why: format!("it is a child of {}", parent.thread_id),
        });
    }
    if let Some(by) = &record.delegated_by {
        return Err(MigrationError::NotARoot {
            thread: root.clone(),
            why: format!("it was delegated by {}", by.thread_id),
        });
    }
    if record.status == ThreadStatus::Closed {
        return Err(MigrationError::Closed(root.clone()));
    }
    if let Some(m) = &record.migration {
        return Err(already(root, m));
    }
    let ids = conversation_threads(store, root).await?;
    for (n, id) in ids.iter().enumerate() {
        let marked = update(store, id, |record| {
            if let Some(m) = &record.migration {
                return Err(already(id, m));
            }
            record.migration = Some(Migration {
                to: to.to_owned(),
                since: now,
                state: MigrationState::Moving,
            });
            Ok(Vec::new())
        })
        .await;
        if let Err(err) = marked {
            // The threads marked so far run again: none is left holding its inputs.
            if let Err(undo) = abort(store, &ids[..n], &mut crate::ids::RandomIds).await {
                tracing::error!(%root, %undo, "a move that could not begin left threads moving; `infinity migrate --abort` retries");
            }
            return Err(err);
        }
    }
    Ok(ids)
}

fn already(thread: &ThreadId, m: &Migration) -> MigrationError {
    MigrationError::AlreadyMoving {
        thread: thread.clone(),
        state: match m.state {
            MigrationState::Moving => "moving",
            MigrationState::Moved { .. } => "moved",
        },
        to: m.to.clone(),
    }
}

/// How many effects the conversation's threads still have to perform here. A conversation
/// moves once this is 0: an effect performed after the export (a call dispatched, a child's
/// report sent) would happen at the source while the destination knows nothing of it. Timers do
/// not count: the destination arms them again from the records, and one that still fires here
/// is forwarded and dropped there as a repeat.
pub async fn effects_in_flight(
    store: &dyn ThreadStore,
    ids: &[ThreadId],
) -> Result<usize, MigrationError> {
    let mut count = 0;
    for id in ids {
        count += store
            .thread_outbox(id)
            .await?
            .iter()
            .filter(|effect| !matches!(effect.effect, Effect::SendAt { .. }))
            .count();
    }
    Ok(count)
}

/// Step 3 at the source: the conversation as a [`Bundle`] (records as they were before the move
/// began, and every thread's own history). Every thread must be moving.
pub async fn export(
    store: &dyn ThreadStore,
    root: &ThreadId,
    ids: &[ThreadId],
) -> Result<Bundle, MigrationError> {
    let mut threads = Vec::with_capacity(ids.len());
    for id in ids {
        let mut record = store
            .load_record(id)
            .await?
            .ok_or_else(|| MigrationError::UnknownThread(id.clone()))?;
        if !matches!(
            record.migration,
            Some(Migration {
                state: MigrationState::Moving,
                ..
            })
        ) {
            return Err(MigrationError::NotMoving(id.clone()));
        }
        let entries = store
            .load_entries(id, record.history_len)
            .await?
            .into_iter()
            .map(|e| (*e).clone())
            .collect();
        // The held inputs stay here; they are forwarded when the move finishes.
        record.migration = None;
        record.held.clear();
        threads.push(ThreadExport { record, entries });
    }
    Ok(Bundle {
        format: BUNDLE_FORMAT,
        root: root.clone(),
        threads,
    })
}

/// Points the conversation's tool servers at the destination's: `servers` maps a server's base URL
/// at the source to the same server's at the destination (both without a trailing `/`). Tools
/// of other servers keep theirs. The threads' notification keys follow their servers.
pub fn move_servers(bundle: &mut Bundle, servers: &BTreeMap<String, String>) {
    for thread in &mut bundle.threads {
        let keys = std::mem::take(&mut thread.record.notify_keys);
        thread.record.notify_keys = keys
            .into_iter()
            .map(|(server, key)| (servers.get(&server).cloned().unwrap_or(server), key))
            .collect();
        let Some(toolset) = thread.record.conversation.toolset.as_mut() else {
            continue;
        };
        for tool in &mut toolset.tools {
            let Some(new_base) = servers.get(tool.server.trim_end_matches('/')) else {
                continue;
            };
            let old_base = tool.server.trim_end_matches('/').to_owned();
            if let Some(rest) = tool.endpoint.strip_prefix(&old_base) {
                tool.endpoint = format!("{}{rest}", new_base.trim_end_matches('/'));
            }
            tool.server.clone_from(new_base);
        }
    }
}

/// Step 3 at the destination: stores every thread of `bundle` with the effects that arm its
/// timers and call deadlines again (a wake-up at a time already past arrives at once). Returns
/// each thread's effects, in the store's outbox already, for the host to perform.
///
/// A thread may come back to a host it moved away from: its tombstone there takes the thread's
/// state back (its version then goes past both). Importing the same bundle twice is harmless: a
/// thread already here as the bundle has it is left alone; any other thread by that id is
/// [`MigrationError::Exists`].
/// `runs_agent` tells whether the destination runs an agent by a name (checked for every thread
/// before anything is written).
pub async fn import(
    store: &dyn ThreadStore,
    bundle: &Bundle,
    runs_agent: &(dyn Fn(&str) -> bool + Sync),
    ids: &mut dyn IdSource,
) -> Result<Vec<(ThreadId, Vec<PendingEffect>)>, MigrationError> {
    if bundle.format != BUNDLE_FORMAT {
        return Err(MigrationError::BadBundle(format!(
            "layout {} (this host reads {BUNDLE_FORMAT})",
            bundle.format
        )));
    }
    let Some(root) = bundle.threads.iter().find(|t| t.record.id == bundle.root) else {
        return Err(MigrationError::BadBundle(format!(
            "it does not hold its root thread {}",
            bundle.root
        )));
    };
    if let Some(t) = bundle.threads.iter().find(|t| !runs_agent(&t.record.agent)) {
        return Err(MigrationError::UnknownAgent {
            thread: t.record.id.clone(),
            agent: t.record.agent.clone(),
        });
    }
    let toolset = root.record.conversation.toolset.as_ref();
    let mut imported = Vec::with_capacity(bundle.threads.len());
    for thread in &bundle.threads {
        let record = &thread.record;
        if record.root() != &bundle.root && record.delegated_by.is_none() {
            return Err(MigrationError::BadBundle(format!(
                "thread {} belongs to another session ({})",
                record.id,
                record.root()
            )));
        }
        if record.history_len != thread.entries.len() as u64 {
            return Err(MigrationError::BadBundle(format!(
                "thread {} has {} history entries, its record says {}",
                record.id,
                thread.entries.len(),
                record.history_len
            )));
        }
        let here = store.load_record(&record.id).await?;
        let (expected_version, version, known) = match &here {
            None => (None, record.version, 0),
            // Already imported (the same bundle again).
            Some(here) if here.migration.is_none() && same_but_version(here, record) => continue,
            // Coming back to a host it moved away from: its tombstone takes the conversation back,
            // with the entries added meanwhile.
            Some(here)
                if here
                    .migration
                    .as_ref()
                    .is_some_and(|m| m.forward_url().is_some())
                    && here.history_len <= record.history_len =>
            {
                let version = here.version.max(record.version) + 1;
                (Some(here.version), version, here.history_len as usize)
            }
            Some(_) => return Err(MigrationError::Exists(record.id.clone())),
        };
        let mut record = record.clone();
        record.version = version;
        let effects: Vec<PendingEffect> = rearm(&record, toolset)
            .into_iter()
            .map(|effect| PendingEffect {
                id: ids.effect_id(),
                effect,
            })
            .collect();
        store
            .import_thread(
                &record,
                &thread.entries[known..],
                &effects,
                expected_version,
            )
            .await?;
        imported.push((record.id.clone(), effects));
    }
    Ok(imported)
}

/// True when `a` and `b` differ at most in their versions.
fn same_but_version(a: &ThreadRecord, b: &ThreadRecord) -> bool {
    let mut a = a.clone();
    a.version = b.version;
    a == *b
}

/// The timers and call deadlines a thread had armed at the source, armed again: each sleep's
/// wake-up, each dispatched call's deadline and each schedule's next occurrence, with the input
/// ids the source used (so the source's own timer, forwarded, counts once).
pub fn rearm(record: &ThreadRecord, toolset: Option<&Toolset>) -> Vec<Effect> {
    let mut effects: Vec<Effect> = record
        .schedules
        .iter()
        .map(|s| crate::tools::builtin::schedule::arm(record, s))
        .collect();
    for pending in &record.pending_calls {
        if let Some(due) = pending.due {
            effects.push(Effect::SendAt {
                input: Input {
                    id: InputId::derived(pending.call_id.as_str(), "wake"),
                    thread_id: record.id.clone(),
                    body: InputBody::TimerWakeUp {
                        call_id: pending.call_id.clone(),
                    },
                },
                due,
            });
        }
        if pending.kind != PendingKind::Dispatched {
            continue;
        }
        // An approval's question has its rule's deadline; a client tool's call keeps its
        // tool's, a tool server's is in the conversation's toolset.
        if let Some(approval) = &pending.approval {
            if let Some(deadline) = &approval.deadline {
                if let Some(due) = deadline.due_from(pending.issued_at) {
                    effects.push(Effect::SendAt {
                        input: crate::tools::approval::deadline_input(
                            &record.id,
                            &pending.call_id,
                            deadline.as_str().to_owned(),
                        ),
                        due,
                    });
                }
            }
            continue;
        }
        let deadline = match &pending.client {
            Some(client) => client.deadline.as_ref(),
            None => toolset
                .and_then(|t| t.get(&pending.tool))
                .and_then(|t| t.deadline.as_ref()),
        };
        if let Some((deadline, due)) =
            deadline.and_then(|d| Some((d, d.due_from(pending.issued_at)?)))
        {
            effects.push(Effect::SendAt {
                input: Input::call_deadline(&record.id, &pending.call_id, deadline.as_str()),
                due,
            });
        }
    }
    effects
}

/// Step 4: each moving thread becomes a tombstone that forwards to the URL `forward` gives for
/// it; the inputs it held meanwhile are forwarded first. Returns the commits, whose effects (in
/// the outbox already) the host performs.
pub async fn finish(
    store: &dyn ThreadStore,
    ids: &[ThreadId],
    forward: &BTreeMap<ThreadId, String>,
) -> Result<Vec<Commit>, MigrationError> {
    let mut commits = Vec::with_capacity(ids.len());
    for id in ids {
        let url = forward
            .get(id)
            .ok_or_else(|| MigrationError::NoForwardUrl(id.clone()))?;
        let commit = update(store, id, |record| {
            let Some(migration) = record.migration.as_mut() else {
                return Err(MigrationError::NotMoving(id.clone()));
            };
            migration.state = MigrationState::Moved {
                forward_url: url.clone(),
            };
            Ok(crate::engine::held_inputs(std::mem::take(&mut record.held))
                .into_iter()
                .map(|input| Effect::Forward {
                    url: url.clone(),
                    input,
                })
                .collect())
        })
        .await?;
        commits.push(commit);
    }
    Ok(commits)
}

/// Abandons a move: the threads run here again, and each applies the inputs it held, in order
/// (a nudge to itself wakes it for them). Returns the commits, whose effects the host performs.
pub async fn abort(
    store: &dyn ThreadStore,
    ids: &[ThreadId],
    fresh: &mut dyn IdSource,
) -> Result<Vec<Commit>, MigrationError> {
    let mut commits = Vec::with_capacity(ids.len());
    for id in ids {
        let nudge = Input {
            id: fresh.input_id(),
            thread_id: id.clone(),
            body: InputBody::Nudge {},
        };
        let commit = update(store, id, |record| {
            if !matches!(
                record.migration,
                Some(Migration {
                    state: MigrationState::Moving,
                    ..
                })
            ) {
                return Ok(Vec::new());
            }
            record.migration = None;
            Ok(if record.held.is_empty() {
                Vec::new()
            } else {
                vec![Effect::Send {
                    input: nudge.clone(),
                }]
            })
        })
        .await?;
        commits.push(commit);
    }
    Ok(commits)
}

/// Changes one thread's record outside a slice, retrying when a slice commits first; `change`
/// returns the effects to commit with it.
async fn update(
    store: &dyn ThreadStore,
    id: &ThreadId,
    change: impl Fn(&mut ThreadRecord) -> Result<Vec<Effect>, MigrationError>,
) -> Result<Commit, MigrationError> {
    const ATTEMPTS: usize = 20;
    let mut ids = crate::ids::RandomIds;
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let before = store
            .load_record(id)
            .await?
            .ok_or_else(|| MigrationError::UnknownThread(id.clone()))?;
        let mut record = before.clone();
        let mut effects = change(&mut record)?;
        let events = crate::commit::number_outputs(&mut record, &mut effects);
        let effects = effects
            .into_iter()
            .map(|effect| PendingEffect {
                id: ids.effect_id(),
                effect,
            })
            .collect();
        record.version = before.version + 1;
        let commit = Commit {
            thread_id: id.clone(),
            expected_version: Some(before.version),
            record,
            new_entries: Vec::new(),
            processed_inputs: Vec::new(),
            effects,
            events,
        };
        match store.commit(&commit).await {
            Ok(()) => return Ok(commit),
            Err(e @ StoreError::Conflict { .. }) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last
        .unwrap_or_else(|| StoreError::Unavailable(format!("thread {id}: kept changing")))
        .into())
}

#[cfg(test)]
mod tests;
