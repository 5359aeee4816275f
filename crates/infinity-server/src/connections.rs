//! How `infinity serve` (and `infinity serve --aws`) holds its connections, so that slow,
//! half-open and idle clients cannot hold the server.
//!
//! `axum::serve` sets no time limits: a body shorter than its `Content-Length`, headers that
//! never end and an idle keep-alive connection were each held for minutes, and 1,100 half-open
//! requests under `ulimit -n 1024` left no file descriptor for anyone, `/health` included. So
//! the server runs its own accept loop on hyper, with [`Limits`] (docs/api.md, "Connections"):
//!
//! - a request's headers must arrive within [`Limits::headers`] of the connection's start or
//!   of the end of its previous answer, which also closes a keep-alive connection left idle;
//! - its body within [`Limits::body`] of the headers, plus a second for every
//!   [`Limits::body_rate`] bytes that arrive (a large body on a slow link is not cut while it
//!   keeps coming); past it the request is answered 408 and the connection closed;
//! - at most [`Limits::connections`] connections are held. At the cap a new one takes the
//!   place of the connection that has waited on its client the longest without a byte moving
//!   (between requests, sending a request, or not reading its answer); if every connection is
//!   being answered, the new one is answered 503 and closed. When the process runs out of file
//!   descriptors, such a connection is closed too;
//! - answers are never timed: an event stream lasts as long as its client reads it;
//! - on shutdown (Ctrl-C) the server stops accepting, lets answers in flight finish for up to
//!   [`Limits::drain`], and then closes what is left (event streams never finish).
//!
//! The stack's API function answers Function URL events, not connections: none of this
//! applies there.

mod answer;
mod held;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use answer::{Answering, BodyLimit};
use held::{Connections, Held, Watched};

/// How long the accept loop pauses after accepting failed (out of file descriptors, say).
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// How many connections past the cap may be answered 503 at once; others are closed at once.
const REFUSING: usize = 32;

/// The limits a server holds its connections to (module docs); [`Limits::default`] is what
/// `infinity serve` uses.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How long a request's headers may take to arrive, from the connection's start or the end
    /// of its previous answer; also how long an idle keep-alive connection stays open.
    /// Default 30 s.
    pub headers: Duration,
    /// How long a request's body may take, from the end of its headers, before the bytes it
    /// has sent earn it more time. Default 30 s.
    pub body: Duration,
    /// The bytes that earn a body one more second (the slowest average rate a long body may
    /// arrive at). Default 16 KiB.
    pub body_rate: u64,
    /// The most connections held at once. Default 512, below the usual `ulimit -n` of 1,024.
    pub connections: usize,
    /// How long a shutdown waits for answers in flight. Default 10 s.
    pub drain: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            headers: Duration::from_secs(30),
            body: Duration::from_secs(30),
            body_rate: 16 * 1024,
            connections: 512,
            drain: Duration::from_secs(10),
        }
    }
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes, then drains (see the
/// module docs).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let connections = Arc::new(Connections::new(limits.connections));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.headers);
    let mut refuse = http.clone();
    refuse.keep_alive(false);
    let body = BodyLimit {
        base: limits.body,
        rate: limits.body_rate,
    };
    let (stop, stopping) = watch::channel(());
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(%err, "accepting a connection failed");
                    // EMFILE, ENFILE: out of file descriptors.
                    if matches!(err.raw_os_error(), Some(23 | 24)) {
                        connections.make_room();
                    }
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        while tasks.try_join_next().is_some() {}
        let Some(held) = connections.admit() else {
            if let Ok(turn) = Arc::clone(&refusing).try_acquire_owned() {
                let connection = refuse.serve_connection(
                    TokioIo::new(stream),
                    hyper::service::service_fn(|_| async {
                        Ok::<_, std::convert::Infallible>(full())
                    }),
                );
                let stopping = stopping.clone();
                tasks.spawn(async move {
                    hold(connection, None, stopping).await;
                    drop(turn);
                });
            }
            continue;
        };
        let service = Answering {
            app: app.clone(),
            held: Arc::clone(&held),
            body,
        };
        let io = TokioIo::new(Watched::new(stream, Arc::clone(&held)));
        let connection = http.serve_connection(io, service);
        let (stopping, connections) = (stopping.clone(), Arc::clone(&connections));
        tasks.spawn(async move {
            hold(connection, Some(Arc::clone(&held)), stopping).await;
            connections.leave(&held);
        });
    }
    drop(listener);
    drop(stop);
    let drained = tokio::time::timeout(limits.drain, async {
        while tasks.join_next().await.is_some() {}
    });
    if drained.await.is_err() {
        tracing::info!(
            left = tasks.len(),
            "closing the connections still answering after the drain"
        );
    }
    tasks.abort_all();
    Ok(())
}

/// 503 for a connection past the cap while every connection is being answered.
fn full() -> axum::response::Response {
    crate::api::error(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server holds as many connections as it takes, all being answered: try again soon",
    )
    .into_response()
}

/// Runs `connection` until it ends, its place is taken (`held` told to close), or the server
/// stops (then it finishes what it answers and closes).
async fn hold<C>(connection: C, held: Option<Arc<Held>>, mut stopping: watch::Receiver<()>)
where
    C: Future<Output = hyper::Result<()>> + GracefulConnection,
{
    tokio::pin!(connection);
    let closed = async {
        match &held {
            Some(held) => held.close.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        ended = connection.as_mut() => {
            if let Err(err) = ended {
                tracing::debug!(%err, "a connection ended");
            }
        }
        () = closed => {}
        _ = stopping.changed() => {
            connection.as_mut().shut_down();
            let _ = connection.as_mut().await;
        }
    }
}

/// A connection that can be asked to finish what it answers and close.
trait GracefulConnection {
    fn shut_down(self: std::pin::Pin<&mut Self>);
}

impl<I, S, B> GracefulConnection for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: http_body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn shut_down(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

#[cfg(test)]
mod tests;
