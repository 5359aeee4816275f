//! The machines people connected to a host (`infinity remote connect`), as the `remote`
//! category's tools see them. The host keeps the connections; the library only reads them.

use std::fmt;

use jiff::Timestamp;
use serde::Serialize;

/// A connected machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteInfo {
    /// Its id (`rm-...`), fresh for each connection.
    pub id: String,
    /// The name it connected with.
    pub name: String,
    /// True while it polls for work.
    pub online: bool,
    /// False for a remote connected without `--exec`: it is listed but runs nothing.
    pub exec: bool,
    /// When it last polled.
    pub last_seen: Timestamp,
}

/// Where a host's connected remotes are listed.
pub trait RemoteDirectory: Send + Sync + fmt::Debug {
    /// Every remote the host knows, connected or recently gone.
    fn remotes(&self) -> Vec<RemoteInfo>;
}
