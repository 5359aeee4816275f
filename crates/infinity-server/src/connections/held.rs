//! The connections a server holds, and which one makes room at the cap.
//!
//! A connection either waits on its client (between requests, while a request's headers or
//! body arrive, or while its client does not read what it was sent) or on the server (a
//! handler runs, or an answer such as an event stream is being sent). At the cap, the one that
//! has waited on its client the longest without a byte moving is closed to make room: slow or
//! half-open clients lose their place before anyone the server is answering does.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// One connection, as the server sees it.
#[derive(Debug)]
pub struct Held {
    id: u64,
    epoch: Instant,
    /// When a byte was last read or written, in milliseconds after `epoch`.
    last_active: AtomicU64,
    /// Requests being answered: from the handler's start to the end of its answer.
    answering: AtomicUsize,
    /// Requests whose bodies are still arriving.
    receiving: AtomicUsize,
    /// Whether a write waits for the client to read.
    write_blocked: AtomicBool,
    /// Told when the connection must close to make room.
    pub close: Notify,
}

impl Held {
    fn touch(&self) {
        let now = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active.store(now, Ordering::Relaxed);
    }

    fn waits_on_client(&self) -> bool {
        self.answering.load(Ordering::Relaxed) == 0
            || self.receiving.load(Ordering::Relaxed) > 0
            || self.write_blocked.load(Ordering::Relaxed)
    }

    /// Counts a request being answered until the returned guard drops.
    pub fn answering(self: &Arc<Self>) -> Counted {
        Counted::new(self, Count::Answering)
    }

    /// Counts a request's body arriving until the returned guard drops.
    pub fn receiving(self: &Arc<Self>) -> Counted {
        Counted::new(self, Count::Receiving)
    }
}

#[derive(Debug, Clone, Copy)]
enum Count {
    Answering,
    Receiving,
}

/// One request counted on its connection while it lives.
#[derive(Debug)]
pub struct Counted {
    held: Arc<Held>,
    count: Count,
}

impl Counted {
    fn new(held: &Arc<Held>, count: Count) -> Self {
        let counted = Self {
            held: Arc::clone(held),
            count,
        };
        counted.counter().fetch_add(1, Ordering::Relaxed);
        counted
    }

    fn counter(&self) -> &AtomicUsize {
        match self.count {
            Count::Answering => &self.held.answering,
            Count::Receiving => &self.held.receiving,
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.counter().fetch_sub(1, Ordering::Relaxed);
    }
}

/// The connections open, at most `cap`.
#[derive(Debug)]
pub struct Connections {
    cap: usize,
    epoch: Instant,
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Held>>>,
}

impl Connections {
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            open: Mutex::new(HashMap::new()),
        }
    }

    fn open(&self) -> MutexGuard<'_, HashMap<u64, Arc<Held>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a new connection. At the cap, the quietest connection waiting on its client
    /// is told to close and gives up its place; `None` when every connection is being
    /// answered.
    pub fn admit(&self) -> Option<Arc<Held>> {
        let mut open = self.open();
        if open.len() >= self.cap && !Self::evict_quietest(&mut open) {
            return None;
        }
        let held = Arc::new(Held {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            epoch: self.epoch,
            last_active: AtomicU64::new(0),
            answering: AtomicUsize::new(0),
            receiving: AtomicUsize::new(0),
            write_blocked: AtomicBool::new(false),
            close: Notify::new(),
        });
        held.touch();
        open.insert(held.id, Arc::clone(&held));
        Some(held)
    }

    /// Closes the quietest connection waiting on its client, if any (when the process runs out
    /// of file descriptors, say).
    pub fn make_room(&self) -> bool {
        Self::evict_quietest(&mut self.open())
    }

    fn evict_quietest(open: &mut HashMap<u64, Arc<Held>>) -> bool {
        let quietest = open
            .values()
            .filter(|held| held.waits_on_client())
            .min_by_key(|held| held.last_active.load(Ordering::Relaxed))
            .map(|held| held.id);
        let Some(held) = quietest.and_then(|id| open.remove(&id)) else {
            return false;
        };
        tracing::debug!(connection = held.id, "closed to make room for another");
        held.close.notify_one();
        true
    }

    /// `held` is closed: its place is free.
    pub fn leave(&self, held: &Held) {
        self.open().remove(&held.id);
    }
}

/// A connection's socket, noting on its [`Held`] when bytes move and when a write waits.
#[derive(Debug)]
pub struct Watched<IO> {
    io: IO,
    held: Arc<Held>,
}

impl<IO> Watched<IO> {
    pub fn new(io: IO, held: Arc<Held>) -> Self {
        Self { io, held }
    }

    fn wrote(&self, written: &Poll<io::Result<usize>>) {
        match written {
            Poll::Ready(Ok(n)) if *n > 0 => {
                self.held.touch();
                self.held.write_blocked.store(false, Ordering::Relaxed);
            }
            Poll::Pending => self.held.write_blocked.store(true, Ordering::Relaxed),
            Poll::Ready(_) => {}
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.held.touch();
        }
        read
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(&written);
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(&written);
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_the_cap_the_quietest_waiting_on_its_client_makes_room() {
        let connections = Connections::new(3);
        let a = connections.admit().unwrap();
        let b = connections.admit().unwrap();
        let c = connections.admit().unwrap();
        // `a` is being answered, `b` and `c` wait on their clients; `b` moved a byte last.
        let _answering = a.answering();
        a.last_active.store(0, Ordering::Relaxed);
        b.last_active.store(20, Ordering::Relaxed);
        c.last_active.store(10, Ordering::Relaxed);
        let d = connections.admit().unwrap();
        assert_eq!(connections.open().len(), 3);
        assert!(
            !connections.open().contains_key(&c.id),
            "the quietest waiting one"
        );
        // `b` is answered too, with its body still arriving: it waits on its client.
        let _b_answering = b.answering();
        let receiving = b.receiving();
        d.last_active.store(30, Ordering::Relaxed);
        let _d_answering = d.answering();
        assert!(connections.admit().is_some());
        assert!(!connections.open().contains_key(&b.id));
        drop(receiving);
        // Every connection answered: no room.
        let e = connections
            .open()
            .values()
            .find(|h| h.id > d.id)
            .cloned()
            .unwrap();
        let _e_answering = e.answering();
        assert!(connections.admit().is_none());
        connections.leave(&a);
        assert!(connections.admit().is_some());
    }
}
