//! `green-agent`: thin binary over the library (see `green_agent::commands`).

use clap::FromArgMatches;

#[tokio::main]
async fn main() {
    let cli = green_agent::commands::Cli::from_arg_matches(
        &green_agent::commands::command().get_matches(),
    )
    .unwrap_or_else(|e| e.exit());
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cli.log.clone());
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&filter)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match green_agent::commands::main(cli).await {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
