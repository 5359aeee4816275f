//! Serves the `get_time` tool over RAP.

use clap::Parser;

/// Serves the `get_time` RAP tool (the current time in an IANA time zone).
#[derive(Debug, Parser)]
struct Cli {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// The port to listen on.
    #[arg(long, default_value_t = 8701)]
    port: u16,
    /// The base URL runtimes reach the server at, when not http://HOST:PORT (behind a proxy).
    #[arg(long)]
    public_url: Option<String>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    rap_example_servers::init_logs();
    let server = rap_example_servers::get_time_server();
    rap_example_servers::serve(server, &cli.host, cli.port, cli.public_url).await?;
    Ok(())
}
