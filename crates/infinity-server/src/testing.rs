//! What the tests of the server's edges share: a server on a real TCP port, and requests
//! written by hand, so that a test can send what no client library would (half a body, headers
//! that never end) and see what a client sees.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits for an answer it expects before it fails.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// `app` served on a port of 127.0.0.1 as `infinity serve` serves it, until the test ends.
pub async fn served(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let limits = crate::connections::Limits::default();
    tokio::spawn(crate::connections::serve(
        listener,
        app,
        limits,
        std::future::pending(),
    ));
    address
}

/// An answer as a client reads it.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

/// Reads what the server sends on `stream` until it closes the connection, within `within`;
/// `None` when it did not close it by then.
pub async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut bytes = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buffer = [0u8; 8192];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            }
        }
    });
    read.await.ok().map(|()| bytes)
}

/// `bytes` read as an answer (status line, head, body).
pub fn answer(bytes: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(bytes).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Answer {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// Sends `request` whole on a new connection and reads the answer until the server closes the
/// connection (the request should say `Connection: close`); fails past [`PATIENCE`].
pub async fn send(address: SocketAddr, request: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(request).await.unwrap();
    let bytes = read_until_closed(&mut stream, PATIENCE)
        .await
        .expect("the server answers and closes the connection");
    answer(&bytes)
}

/// `GET path`, closing the connection after the answer.
pub async fn get(address: SocketAddr, path: &str) -> Answer {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    send(address, request.as_bytes()).await
}

/// `POST path` of JSON `body`, closing the connection after the answer.
pub fn post_json(address: SocketAddr, path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The answer to `request` (which should say `Connection: close`) within `within`, sent and
/// read on this thread with blocking IO, so that it tells even when every thread of the
/// server's runtime is stuck; `None` past it.
pub fn send_blocking(address: SocketAddr, request: &[u8], within: Duration) -> Option<Answer> {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + within;
    let mut stream = std::net::TcpStream::connect_timeout(&address, within).ok()?;
    stream.set_write_timeout(Some(within)).ok()?;
    stream.write_all(request).ok()?;
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let left = deadline.checked_duration_since(std::time::Instant::now())?;
        stream.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut buffer) {
            Ok(0) => return Some(answer(&bytes)),
            Ok(n) => bytes.extend_from_slice(&buffer[..n]),
            Err(_) => return None,
        }
    }
}

/// The status of `GET path` within `within` (see [`send_blocking`]).
pub fn status_within(address: SocketAddr, path: &str, within: Duration) -> Option<u16> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    send_blocking(address, request.as_bytes(), within).map(|a| a.status)
}
