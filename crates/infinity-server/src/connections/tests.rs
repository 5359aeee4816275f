//! Over real TCP, with small limits: what slow, half-open and idle clients get, what happens at
//! the connection cap, and that long answers and answers in flight at shutdown are not cut.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::{get, post};
use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Notify};

use super::*;
use crate::testing::{answer, read_until_closed, PATIENCE};

/// Well past every small limit below, and far short of the defaults (30 s): a test that waits
/// this long for what a limit should have done fails rather than waits for the defaults.
const WELL_PAST: Duration = Duration::from_secs(8);

fn small() -> Limits {
    Limits {
        headers: Duration::from_millis(300),
        body: Duration::from_millis(300),
        body_rate: 1024,
        connections: 64,
        drain: Duration::from_millis(500),
    }
}

/// A server of the routes the tests use, with `limits`; the sender stops it.
async fn started(
    limits: Limits,
    app: Router,
) -> (
    SocketAddr,
    oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app, limits, async move {
        let _ = stopped.await;
    }));
    (address, stop, server)
}

fn routes() -> Router {
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/echo", post(|body: String| async move { body }))
}

/// A connection that has sent `bytes`.
async fn sent(address: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    stream
}

#[tokio::test]
async fn a_body_shorter_than_its_length_is_answered_408_within_the_limit() {
    let (address, _stop, _server) = started(small(), routes()).await;
    let mut stream = sent(
        address,
        b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\nonly ten b",
    )
    .await;
    let started = Instant::now();
    let bytes = read_until_closed(&mut stream, WELL_PAST).await;
    let bytes = bytes.expect("the server answers and closes the connection");
    let answer = answer(&bytes);
    assert_eq!(answer.status, 408, "{answer:?}");
    assert!(answer.body.starts_with("{\"error\":"), "{answer:?}");
    assert!(answer.head.contains("connection: close"), "{answer:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_body_that_keeps_coming_is_not_cut() {
    let limits = Limits {
        body_rate: 16,
        ..small()
    };
    let (address, _stop, _server) = started(limits, routes()).await;
    // 64 bytes at 16 a second would take 4 s; in pieces each within the allowance the bytes
    // before it earned (300 ms, plus a second for every 16), the body is taken whole.
    let mut stream = sent(
        address,
        b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 64\r\nConnection: close\r\n\r\n",
    )
    .await;
    for _ in 0..4 {
        stream.write_all(&[b'x'; 16]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let answer = answer(&read_until_closed(&mut stream, PATIENCE).await.unwrap());
    assert_eq!((answer.status, answer.body.len()), (200, 64), "{answer:?}");
}

#[tokio::test]
async fn headers_that_never_end_are_cut() {
    let (address, _stop, _server) = started(small(), routes()).await;
    let mut stream = sent(address, b"GET /health HTTP/1.1\r\nHost: h\r\nX-Slow: 1\r\n").await;
    let started = Instant::now();
    assert!(
        read_until_closed(&mut stream, WELL_PAST).await.is_some(),
        "the connection is still open after {WELL_PAST:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed() {
    let (address, _stop, _server) = started(small(), routes()).await;
    let mut stream = sent(address, b"GET /health HTTP/1.1\r\nHost: h\r\n\r\n").await;
    // The answer (`ok`, two bytes, with its Content-Length) and no close.
    let mut read = Vec::new();
    while !read.ends_with(b"\r\n\r\nok") {
        let mut buffer = [0u8; 1024];
        let n = tokio::time::timeout(PATIENCE, stream.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        assert_ne!(
            n,
            0,
            "closed before the answer: {:?}",
            String::from_utf8_lossy(&read)
        );
        read.extend_from_slice(&buffer[..n]);
    }
    let started = Instant::now();
    assert!(
        read_until_closed(&mut stream, WELL_PAST).await.is_some(),
        "the idle connection is still open after {WELL_PAST:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn past_the_cap_the_quietest_waiting_connection_makes_room_and_health_answers() {
    let limits = Limits {
        headers: Duration::from_secs(60),
        connections: 3,
        ..small()
    };
    let (address, _stop, _server) = started(limits, routes()).await;
    // Three connections that have sent half their headers, the cap; the first the quietest.
    let mut waiting = Vec::new();
    for _ in 0..3 {
        waiting.push(sent(address, b"GET /health HTTP/1.1\r\n").await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let health = crate::testing::get(address, "/health");
    let health = tokio::time::timeout(Duration::from_secs(5), health).await;
    assert_eq!(health.map(|a| a.status).ok(), Some(200));
    let first = read_until_closed(&mut waiting[0], Duration::from_secs(5)).await;
    assert!(first.is_some(), "the quietest was not closed to make room");
    let mut second = [0u8; 1];
    let still_open = tokio::time::timeout(Duration::from_millis(200), waiting[1].read(&mut second));
    assert!(still_open.await.is_err(), "only one was closed");
}

#[tokio::test]
async fn past_the_cap_with_every_connection_answered_a_new_one_gets_503() {
    let release = Arc::new(Notify::new());
    let app = routes().route(
        "/slow",
        get({
            let release = Arc::clone(&release);
            move || async move {
                release.notified().await;
                "done"
            }
        }),
    );
    let limits = Limits {
        connections: 2,
        ..small()
    };
    let (address, _stop, _server) = started(limits, app).await;
    let mut busy = Vec::new();
    for _ in 0..2 {
        busy.push(
            sent(
                address,
                b"GET /slow HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            )
            .await,
        );
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        crate::testing::get(address, "/health"),
    )
    .await;
    let refused = refused.expect("answered at once");
    assert_eq!(refused.status, 503, "{refused:?}");
    assert!(refused.head.contains("connection: close"), "{refused:?}");
    assert!(refused.body.starts_with("{\"error\":"), "{refused:?}");
    // Those being answered were not cut.
    release.notify_waiters();
    for mut stream in busy {
        let answer = answer(&read_until_closed(&mut stream, PATIENCE).await.unwrap());
        assert_eq!((answer.status, answer.body.as_str()), (200, "done"));
    }
}

/// A route whose answer comes a piece every 100 ms for `pieces` pieces (an event stream's
/// pace).
fn streaming(pieces: usize) -> Router {
    let stream = move || async move {
        let chunks = futures_util::stream::unfold(0, move |i| async move {
            if i == pieces {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            Some((
                Ok::<_, std::convert::Infallible>(format!("piece {i}\n")),
                i + 1,
            ))
        });
        axum::body::Body::from_stream(chunks)
    };
    routes().route("/stream", get(stream))
}

#[tokio::test]
async fn a_long_answer_outlives_every_limit() {
    let (address, _stop, _server) = started(small(), streaming(15)).await;
    let mut stream = sent(
        address,
        b"GET /stream HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    )
    .await;
    let answer = answer(&read_until_closed(&mut stream, PATIENCE).await.unwrap());
    assert_eq!(answer.status, 200);
    assert!(answer.body.contains("piece 14"), "{answer:?}");
}

#[tokio::test]
async fn shutdown_finishes_answers_in_flight_and_waits_no_longer_than_the_drain() {
    let (address, stop, server) = started(small(), streaming(5)).await;
    let mut finite = sent(
        address,
        b"GET /stream HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    )
    .await;
    let endless = streaming(usize::MAX);
    let (endless_address, endless_stop, endless_server) = started(small(), endless).await;
    let mut open = sent(endless_address, b"GET /stream HTTP/1.1\r\nHost: h\r\n\r\n").await;
    let mut first = [0u8; 64];
    let _ = open.read(&mut first).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.send(()).unwrap();
    endless_stop.send(()).unwrap();
    // The answer in flight is finished...
    let answer = answer(&read_until_closed(&mut finite, PATIENCE).await.unwrap());
    assert!(answer.body.contains("piece 4"), "{answer:?}");
    tokio::time::timeout(PATIENCE, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(address).await.is_err(),
        "still accepting"
    );
    // ... and one that never ends is cut after the drain.
    let started = Instant::now();
    let ended = tokio::time::timeout(WELL_PAST, endless_server).await;
    assert!(
        ended.is_ok(),
        "an endless answer held the shutdown past {WELL_PAST:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn two_hosts_or_lengths_are_refused() {
    let app = routes().layer(crate::Guard::default());
    let (address, _stop, _server) = started(small(), app).await;
    // Two lengths that differ: hyper refuses them before any route (with no body). Two that
    // agree it reads as one (RFC 9110, section 8.6).
    for (request, status) in [
        (
            &b"GET /health HTTP/1.1\r\nHost: h\r\nHost: evil.example\r\nConnection: close\r\n\r\n"[..],
            400,
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!",
            400,
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\nhi",
            200,
        ),
    ] {
        let mut stream = sent(address, request).await;
        let answer = answer(&read_until_closed(&mut stream, PATIENCE).await.unwrap());
        let request = String::from_utf8_lossy(request);
        assert_eq!(answer.status, status, "{request}: {answer:?}");
    }
}
