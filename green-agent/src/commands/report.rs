//! `green-agent report`: a run's report (or a paired comparison of its agents), streamed.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;

use super::{Context, RunRef};
use crate::report::Format;
use crate::store::{Store, write_atomic};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run: its id under the results directory, or its folder (the path `run` printed).
    #[arg(value_name = "RUN")]
    pub run: String,
    /// The report's format.
    #[arg(long, value_enum, default_value = "md")]
    pub format: Format,
    /// Output file (default: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Instead of the report, a paired comparison of these agents (comma-separated, `all`
    /// for every agent): per-task differences with a bootstrap CI, sign and McNemar tests,
    /// Holm correction over pairs (Markdown).
    #[arg(long, value_name = "AGENTS")]
    pub compare: Option<String>,
}

pub async fn command(args: ReportArgs, ctx: &Context) -> anyhow::Result<i32> {
    let (results, database) = ctx.locations()?;
    let at = RunRef::resolve(&args.run, &results, database.is_some());
    let run = at.run_id.as_str();
    if let Some(agents) = args.compare {
        let text = crate::view::compare_report(&at.results_dir, database, run, &agents).await?;
        match args.out {
            Some(path) => write_atomic(&path, text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?,
            None => print!("{text}"),
        }
        return Ok(0);
    }
    let store = Store::open_existing_with(&at.dir(), run, database.as_ref())
        .await
        .map_err(|e| match e {
            crate::store::StoreError::RunNotFound(_) => {
                crate::store::StoreError::RunNotFound(args.run.clone())
            }
            other => other,
        })?;
    // Streamed: memory stays bounded whatever the run's size.
    match args.out {
        Some(path) => {
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let tmp = tempfile::NamedTempFile::new_in(dir)
                .with_context(|| format!("writing {}", path.display()))?;
            let mut w = std::io::BufWriter::new(tmp);
            crate::report::write_report(&store, run, args.format, &mut w).await?;
            let tmp = w.into_inner().map_err(|e| e.into_error())?;
            tmp.as_file().sync_all()?;
            tmp.persist(&path)
                .map_err(|e| e.error)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        None => {
            let mut w = std::io::BufWriter::new(std::io::stdout());
            crate::report::write_report(&store, run, args.format, &mut w).await?;
        }
    }
    Ok(0)
}
