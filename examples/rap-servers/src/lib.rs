//! Two example RAP tool servers written with [`infinity_rap::kit`], small enough to read in one
//! sitting and real enough to point an agent at:
//!
//! - [`get_time_server`]: `get_time`, the current time in an IANA time zone; a plain call that
//!   answers with one `tool_result` (or an error one for a zone it does not know);
//! - [`ticker_server`]: `ticker`, a subscription that sends `count` events at an interval, the
//!   last one final, and stops at once when the runtime cancels it.
//!
//! The binaries `get-time-server` and `ticker-server` serve them ([`serve`]); tests run them
//! in-process with [`infinity_rap::kit::testing`].

mod get_time;
mod ticker;

use std::io;

use infinity_rap::kit::{KitError, ToolServer};
use tokio::net::TcpListener;

pub use get_time::get_time_server;
pub use ticker::ticker_server;

/// Sends logs to stderr, filtered by `RUST_LOG` (default `info`), so stdout only has the line
/// [`serve`] prints.
pub fn init_logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Fails only when logs were set up already, which is fine.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .try_init();
}

/// Why [`serve`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound (in use, not local, no permission).
    #[error("could not listen on {address}: {source}")]
    Bind {
        /// The `host:port` asked for.
        address: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// The server's toolset or its public URL is not valid.
    #[error(transparent)]
    Kit(#[from] KitError),
    /// Accepting connections failed.
    #[error("the server stopped: {0}")]
    Serve(#[source] io::Error),
}

/// Serves `server` on `host:port` until Ctrl-C, printing one line with its URL on stdout.
///
/// `public_url` is the base URL runtimes use to reach it (behind a proxy, say); by default
/// `http://HOST:PORT` of the bound address.
pub async fn serve(
    server: ToolServer,
    host: &str,
    port: u16,
    public_url: Option<String>,
) -> Result<(), ServeError> {
    let address = format!("{host}:{port}");
    let bind_error = |source| ServeError::Bind {
        address: address.clone(),
        source,
    };
    let listener = TcpListener::bind((host, port)).await.map_err(bind_error)?;
    let local = listener.local_addr().map_err(bind_error)?;
    let public_url = public_url.unwrap_or_else(|| format!("http://{local}"));
    let router = server.router(&public_url)?;
    println!("RAP tool server listening on {local}, reachable at {public_url}");
    axum::serve(listener, router)
        .with_graceful_shutdown(async {
            // Without a signal handler, waiting forever is the right fallback.
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
        .await
        .map_err(ServeError::Serve)
}
