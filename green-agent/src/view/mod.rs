//! `green-agent view`: a read-only web viewer over every run in a results directory.
//!
//! - [`data`]: the read-only data layer (each run's `store.sqlite` opened read-only, or the
//!   shared PostgreSQL database; blobs read in place; every read bounded).
//! - [`api`]: the JSON API under `/api` (+ SSE live feed, OpenAPI document).
//! - [`pages`]: the dashboard, rendered from [`crate::presentation`]'s templates.
//! - [`workspace`]: the agent's files diffed against the task's workspace.
//!
//! [`router`] builds the whole app without serving it, so tests drive it in-process.

pub mod api;
pub mod data;
pub mod pages;
#[cfg(test)]
mod tests;
pub mod workspace;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

pub use data::Results;

/// The viewer app: dashboard pages and the JSON API over `results`.
pub fn router(results: Arc<Results>) -> axum::Router {
    pages::routes()
        .merge(api::routes())
        .with_state(results)
        .layer(tower_http::limit::RequestBodyLimitLayer::new(16 * 1024))
}

/// Serves the viewer until the process is stopped; prints its URL first.
pub async fn command(
    runs: &[String],
    settings: &crate::config::ViewSettings,
    results_dir: PathBuf,
    database: Option<crate::database::DatabaseUrl>,
) -> anyhow::Result<i32> {
    let shown = database
        .as_ref()
        .map(|d| format!(" and {d}"))
        .unwrap_or_default();
    let results = Arc::new(Results::with_database(&results_dir, runs, database)?);
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .with_context(|| {
            format!(
                "binding {} (is the port in use? try --bind 127.0.0.1:0)",
                settings.bind
            )
        })?;
    let addr = listener.local_addr()?;
    let url = format!("http://{addr}/");
    if !addr.ip().is_loopback() {
        eprintln!(
            "warning: serving on {addr}, reachable from other machines; the viewer has no authentication"
        );
    }
    println!(
        "research-bench viewer: {url}  (results: {}{shown})",
        results_dir.display()
    );
    println!("press Ctrl-C to stop");
    tokio::spawn(warm(results.clone()));
    if !settings.no_open {
        open_browser(&url);
    }
    axum::serve(listener, router(results))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving the viewer")?;
    Ok(0)
}

/// `green-agent report RUN --compare A,B`: the paired comparison as Markdown (`all` or an empty
/// list compares every agent of the run).
/// Most runs whose trial-wide views are computed at startup (the newest ones).
pub const WARMED_RUNS: usize = 8;

/// Reads the newest runs' trials and computes their leaderboards and run pages in the
/// background, so the first request of a big run finds them ready (a request arriving while
/// one is read waits for that read; the rest stay cached until the run's next event).
pub async fn warm(results: Arc<Results>) {
    let runs = match results.runs().await {
        Ok(runs) => runs,
        Err(e) => {
            tracing::debug!(error = %e, "warming the viewer: listing runs failed");
            return;
        }
    };
    for run in runs.iter().take(WARMED_RUNS) {
        let started = std::time::Instant::now();
        let warmed = match api::leaderboard(&results, &run.id).await {
            Ok(_) => pages::warm(&results, &run.id).await,
            Err(e) => Err(e),
        };
        match warmed {
            Ok(()) => {
                tracing::debug!(run = %run.id, ms = started.elapsed().as_secs_f64() * 1000.0, "warmed")
            }
            Err(e) => tracing::debug!(run = %run.id, error = %e, "warming failed"),
        }
    }
}

pub async fn compare_report(
    results_dir: &std::path::Path,
    database: Option<crate::database::DatabaseUrl>,
    run: &str,
    agents: &str,
) -> anyhow::Result<String> {
    let results = Results::with_database(results_dir, &[run.to_owned()], database)?;
    let agents = if agents.trim() == "all" { "" } else { agents };
    let (_, pairs) = api::comparison(&results, run, Some(agents)).await?;
    Ok(crate::presentation::compare::markdown(run, &pairs))
}

/// Opens `url` in the desktop's browser when there is one (a display and `xdg-open`), never
/// under CI.
fn open_browser(url: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    let display =
        std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if ci || !display {
        return;
    }
    let Some(opener) = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("xdg-open"))
            .find(|p| p.is_file())
    }) else {
        return;
    };
    let spec = sandbox::child::ChildSpec {
        program: opener.display().to_string(),
        args: vec![url.to_owned()],
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        ..Default::default()
    };
    match sandbox::child::SupervisedChild::spawn(spec) {
        Ok(mut child) => {
            tokio::spawn(async move {
                child.wait().await;
            });
        }
        Err(e) => tracing::debug!(error = %e, "could not open a browser"),
    }
}
