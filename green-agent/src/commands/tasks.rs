//! `green-agent tasks`: imports, validates and checks task folders.

use std::path::PathBuf;

use clap::Subcommand;

use super::Context;
use crate::config::Layer;
use crate::run::{Plan, new_run_id, run_dir};
use crate::store::Store;

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Import tasks from a benchmark's own layout.
    Import {
        /// The benchmark: prbench, scicode, mmsicode, scicoqa, paperbench or harbor.
        #[arg(value_name = "KIND")]
        kind: String,
        /// The benchmark's files in its own layout (a folder or its records file).
        #[arg(value_name = "SRC")]
        src: PathBuf,
        /// The folder the task folders are written to (created when missing).
        #[arg(value_name = "DEST")]
        dest: PathBuf,
        /// Memory (MB) for running gold code (SciCode target derivation) and for the imported
        /// tasks' containers (default 2048).
        #[arg(long)]
        memory_mb: Option<u64>,
        /// Deadline (seconds) of each problem's target derivation (default 1800).
        #[arg(long)]
        timeout_secs: Option<u64>,
        /// SciCoQA: a local mirror of the papers and code (`DIR/<task id>/...`).
        #[arg(long, value_name = "DIR")]
        sources: Option<PathBuf>,
        /// SciCoQA: download each paper and code archive into the workspace (needs network).
        #[arg(long, conflicts_with = "sources")]
        fetch: bool,
        /// SciCode: add a perturbed copy of each test case (its float inputs moved by about 1%,
        /// shape, dtype, symmetry and normalisation kept; the target derived from the gold code;
        /// kept only when the gold code passes it and the target is well conditioned). Off by
        /// default.
        #[arg(long)]
        perturbed_inputs: bool,
        /// SciCode: upstream's targets file (`test_data.h5`): its targets are used (a record
        /// without gold code is imported from it, without an oracle); where gold code exists
        /// too, a test whose derived target differs is listed. Read with h5py (`.venv`, or the
        /// Python named by RB_SCICODE_PYTHON).
        #[arg(long, value_name = "test_data.h5")]
        targets: Option<PathBuf>,
        /// SciCode: include the scientists' background text of the problem and of each step
        /// (upstream's `--with-background`).
        #[arg(long)]
        with_background: bool,
        /// SciCode: `whole-problem` (default: one task per problem, one agent run writes every
        /// step) or `step-by-step` (upstream's main setting: one task per problem whose steps
        /// are asked one per turn, each prompt showing the agent's own code for the steps
        /// before it; each step graded on that code as it was at the end of its turn).
        #[arg(long, value_name = "whole-problem|step-by-step")]
        protocol: Option<String>,
    },
    /// Validate task folders or suites (every error at once).
    Validate {
        /// Task folders or suites (folders of task folders).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// The validation gate: runs `oracle` and `nop` on every task in real containers; each task
    /// passes when the oracle scores 1.0 and nop 0.0. Exits 1 if any task fails.
    Check {
        /// Task folders or suites (folders of task folders).
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
        /// Run id (default: time-based).
        #[arg(long, value_name = "ID")]
        run_id: Option<String>,
        #[command(flatten)]
        settings: Box<Layer>,
    },
}

pub async fn command(command: TasksCommand, ctx: &Context) -> anyhow::Result<i32> {
    match command {
        TasksCommand::Validate { paths } => Ok(validate(&paths)),
        TasksCommand::Check {
            paths,
            run_id,
            settings,
        } => check(paths, run_id, &settings, ctx).await,
        TasksCommand::Import {
            kind,
            src,
            dest,
            memory_mb,
            timeout_secs,
            sources,
            fetch,
            perturbed_inputs,
            targets,
            with_background,
            protocol,
        } => {
            let limits = crate::importers::ImportLimits {
                memory_mb,
                timeout_secs,
                sources,
                fetch,
                perturbed_inputs,
                targets,
                with_background,
                protocol,
            };
            let summary = crate::importers::import(&kind, &src, &dest, limits).await?;
            for p in &summary.written {
                println!("imported {}", p.display());
            }
            print!("{}", summary.table());
            Ok(if summary.failed.is_empty() { 0 } else { 1 })
        }
    }
}

fn validate(paths: &[PathBuf]) -> i32 {
    match tasks::load_suite(paths) {
        Ok(ts) => {
            for t in &ts {
                println!(
                    "ok  {} ({})  {}",
                    t.id(),
                    t.kind().as_str(),
                    t.task_toml().display()
                );
                for note in t.notes() {
                    println!("    note: {note}");
                }
            }
            println!("{} task(s) valid", ts.len());
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

async fn check(
    paths: Vec<PathBuf>,
    run_id: Option<String>,
    settings: &Layer,
    ctx: &Context,
) -> anyhow::Result<i32> {
    let settings = ctx.settings(settings)?;
    let results_dir = settings.results_dir.clone();
    let database = settings.database_url.clone();
    let plan = Plan {
        tasks: paths.iter().map(|p| super::absolute(p)).collect(),
        filters: Vec::new(),
        kinds: Vec::new(),
        agents: vec!["oracle".into(), "nop".into()],
        settings,
    };
    let run_id = run_id.unwrap_or_else(new_run_id);
    let code = super::run::run_and_report(plan, &run_id, &ctx.env, None, false).await?;
    if code != 0 {
        // interrupted by a signal
        return Ok(code);
    }
    let store =
        Store::open_existing_with(&run_dir(&results_dir, &run_id), &run_id, database.as_ref())
            .await?;
    let gates = crate::gate::evaluate(&store.trials(&run_id).await?);
    store.close().await;
    print!("{}", crate::gate::render(&gates));
    Ok(if gates.iter().all(crate::gate::TaskGate::passes) {
        0
    } else {
        1
    })
}
