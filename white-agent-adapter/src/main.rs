//! `white-agent-adapter`: see the library docs for flags, environment and mounts.

use clap::Parser;
use white_agent_adapter::contract::LaunchArgs;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    white_agent_adapter::start::run(LaunchArgs::parse()).await?;
    Ok(())
}
