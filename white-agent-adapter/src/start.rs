//! The adapter's start-up, from its command line to serving: the driver checked before anything
//! listens (a container that exits at once tells the launcher more than a task that fails later),
//! the workspace checked, the port bound (the line `listening on ADDR` printed for launchers and
//! tests), then A2A served until SIGINT or SIGTERM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::contract::LaunchArgs;
use crate::drivers::{DriverError, DriverOptions, default_state_dir};
use crate::runner::RunConfig;
use crate::server::{Adapter, PublicUrl, bind, card, serve};
use crate::workspace::ArtifactLimits;

/// Why the adapter could not start or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("the driver cannot be launched with these flags and environment")]
    Driver(#[source] DriverError),
    #[error(
        "the workspace {} is not a directory; mount the task workspace there or pass --workspace",
        .0.display()
    )]
    NoWorkspace(PathBuf),
    #[error("cannot listen on {addr}; pick another --port / A2A_PORT")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("serving A2A")]
    Serve(#[source] std::io::Error),
}

/// The run configuration `args` and the process environment describe.
fn config(args: &LaunchArgs) -> RunConfig {
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let state_dir = args
        .state_dir
        .clone()
        .unwrap_or_else(|| default_state_dir(home.as_deref(), &args.workspace));
    RunConfig {
        driver: DriverOptions {
            kind: args.driver,
            workspace: args.workspace.clone(),
            state_dir,
            agent_bin: args.agent_bin.clone(),
            agents_dir: args.agents_dir.clone(),
            model: args.model.clone(),
            max_turns: args.max_turns,
            oracle_dir: args.oracle_dir.clone(),
            command: args.command.clone(),
            env,
        },
        limits: ArtifactLimits {
            max_file_bytes: args.max_file_bytes,
            max_total_bytes: args.max_total_bytes,
            max_files: args.max_files,
            ..ArtifactLimits::default()
        },
        check_binaries: true,
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Starts the adapter `args` describe and serves until a shutdown signal.
pub async fn run(args: LaunchArgs) -> Result<(), StartError> {
    {
        use std::os::unix::fs::MetadataExt;
        if std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0) {
            tracing::warn!(
                "running as root: the agent inherits it; run the container as the non-root user (uid 1000)"
            );
        }
    }
    let config = config(&args);
    crate::drivers::plan(&config.driver, "startup check", true).map_err(StartError::Driver)?;
    if !args.workspace.is_dir() {
        return Err(StartError::NoWorkspace(args.workspace.clone()));
    }
    let addr = SocketAddr::new(args.host, args.port);
    let listener = bind(addr)
        .await
        .map_err(|source| StartError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })?;
    let public_url = match args.public_url.clone() {
        Some(url) => PublicUrl::Fixed(url),
        None => PublicUrl::FromHost {
            fallback: format!("http://127.0.0.1:{}/", local.port()),
        },
    };
    let card_url = match &public_url {
        PublicUrl::Fixed(url) | PublicUrl::FromHost { fallback: url } => url.clone(),
    };
    tracing::info!(%local, driver = args.driver.name(), "white-agent-adapter listening");
    // Tests and launchers read this line to learn the port.
    println!("listening on {local}");
    serve(
        Adapter::new(config),
        card(args.driver.name(), &card_url),
        public_url,
        listener,
        shutdown_signal(),
    )
    .await
    .map_err(StartError::Serve)
}
