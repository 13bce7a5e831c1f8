//! The command line (`green-agent ...`): argument types and what each command does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};

use crate::agents::AgentSpec;
use crate::config::{Layer, Settings};
use crate::presentation::table::results_table;
use crate::progress::Live;
use crate::report::{Format, ReportData, write_reports};
use crate::run::{Plan, execute, new_run_id, prepare, run_dir};
use crate::store::{Store, write_atomic};

#[derive(Debug, Parser)]
#[command(
    name = "green-agent",
    version,
    about = "Assess coding agents on scientific research code"
)]
pub struct Cli {
    /// Settings file (TOML); default: research-bench.toml in the working directory, if present.
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Where run directories go (env RB_RESULTS_DIR).
    #[arg(long, global = true)]
    pub results_dir: Option<PathBuf>,
    /// PostgreSQL database holding every run's rows, e.g. postgres://USER@HOST/DB (env
    /// RB_DATABASE_URL, the place for a URL with a password); default: a SQLite file per run.
    #[arg(long, global = true)]
    pub database_url: Option<crate::database::DatabaseUrl>,
    /// Log filter (tracing env-filter syntax; env RUST_LOG).
    #[arg(long, global = true, default_value = "warn")]
    pub log: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an assessment: tasks × agents × repeats.
    Run(RunArgs),
    /// Continue a run: only its unfinished trials run.
    Resume {
        run: String,
        #[command(flatten)]
        settings: Layer,
    },
    /// Write a run's report.
    Report {
        run: String,
        #[arg(long, value_enum, default_value = "md")]
        format: Format,
        /// Output file (default: stdout).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Instead of the report, a paired comparison of these agents (comma-separated, `all`
        /// for every agent): per-task differences with a bootstrap CI, sign and McNemar tests,
        /// Holm correction over pairs (Markdown).
        #[arg(long)]
        compare: Option<String>,
    },
    /// Platform images.
    Images {
        #[command(subcommand)]
        command: ImagesCommand,
    },
    /// Task folders.
    Tasks {
        #[command(subcommand)]
        command: TasksCommand,
    },
    /// Rubric trees.
    Rubric {
        #[command(subcommand)]
        command: RubricCommand,
    },
    /// Remove leftover containers and networks of dead runs.
    Reap,
    /// Serve a read-only web viewer (dashboard + JSON API) over the runs in the results
    /// directory; prints its URL.
    View(crate::view::ViewArgs),
    /// Serve the green agent over A2A (1.0 and 0.3): assessment requests in AgentBeats' form,
    /// progress as task updates, results as artifacts; each assessment is a run in the results
    /// directory.
    Serve(Box<crate::serve::ServeArgs>),
}

#[derive(Debug, Subcommand)]
pub enum ImagesCommand {
    /// Build the platform images (offline, cached by recipe hash).
    Build {
        /// `python` or `sci` (default: both).
        which: Vec<String>,
    },
    /// Copy platform images to other Docker engines (Swarm nodes) without a registry: saved
    /// here, loaded there, same id and tag; an engine that has the image gets nothing.
    Distribute {
        /// A node's engine (`tcp://HOST:2375` or `unix:///PATH`);
        /// repeat for each node.
        #[arg(long = "to", required = true)]
        to: Vec<String>,
        /// `python`, `sci` or any image reference of this engine (default: `python` and `sci`).
        which: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum TasksCommand {
    /// Import tasks from a benchmark's own layout.
    Import {
        kind: String,
        src: PathBuf,
        dest: PathBuf,
        /// Memory (MB) for running gold code (SciCode target derivation) and for the imported
        /// tasks' containers (default 2048).
        #[arg(long)]
        memory_mb: Option<u64>,
        /// Deadline (seconds) of each problem's target derivation (default 1800).
        #[arg(long)]
        timeout_secs: Option<u64>,
        /// SciCoQA: a local mirror of the papers and code (`DIR/<task id>/...`).
        #[arg(long)]
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
        /// step) or `step-by-step` (upstream's main setting: one task per step, its prompt
        /// carrying the code of the steps before it; needs gold code for those steps).
        #[arg(long, value_name = "whole-problem|step-by-step")]
        protocol: Option<String>,
    },
    /// Validate task folders or suites (every error at once).
    Validate {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// The validation gate: runs `oracle` and `nop` on every task in real containers; each task
    /// passes when the oracle scores 1.0 and nop 0.0. Exits 1 if any task fails.
    Check {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Run id (default: time-based).
        #[arg(long)]
        run_id: Option<String>,
        #[command(flatten)]
        settings: Box<Layer>,
    },
}

#[derive(Debug, Subcommand)]
pub enum RubricCommand {
    /// Print the root score of a graded PaperBench rubric tree (recomputed from its leaves).
    Aggregate {
        graded: PathBuf,
        /// Print JSON: the root and every node's score at full precision.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Task folders or suites (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', required = true)]
    pub tasks: Vec<PathBuf>,
    /// Keep tasks whose id contains one of these (comma-separated or repeated).
    #[arg(long, value_delimiter = ',')]
    pub filter: Vec<String>,
    /// Keep tasks of these kinds (prbench, scicode, ...).
    #[arg(long, value_delimiter = ',')]
    pub kind: Vec<String>,
    /// Agents, comma-separated: oracle, nop, claude-code:model=M, codex:model=M,
    /// opencode:model=P/M, cmd:COMMAND, a2a:URL.
    #[arg(long)]
    pub agents: Option<String>,
    /// One agent (repeatable; use for `cmd:` commands containing commas).
    #[arg(long)]
    pub agent: Vec<String>,
    /// Run id (default: time-based).
    #[arg(long)]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub settings: Layer,
}

/// The command line, with each setting's default (from [`Settings::default`], so it is
/// declared once) at the end of its help text.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let defaults = serde_json::to_value(Settings::default())
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default();
    with_defaults(Cli::command(), &defaults)
}

fn with_defaults(
    cmd: clap::Command,
    defaults: &serde_json::Map<String, serde_json::Value>,
) -> clap::Command {
    cmd.mut_args(|a| {
        let text = match defaults.get(a.get_id().as_str()) {
            None | Some(serde_json::Value::Null) => return a,
            Some(serde_json::Value::Array(v)) if v.is_empty() => return a,
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let help = a.get_help().map(ToString::to_string).unwrap_or_default();
        a.help(format!("{help} [default: {text}]"))
    })
    .mut_subcommands(|c| with_defaults(c, defaults))
}

/// The flags layer: every setting's flag, plus the global `--results-dir` and
/// `--database-url`.
fn flags(settings: &Layer, cli: &Globals) -> Layer {
    Layer {
        results_dir: cli.results_dir.clone(),
        database_url: cli.database_url.clone(),
        ..settings.clone()
    }
}

/// The global flags every command takes.
#[derive(Debug, Clone, Default)]
struct Globals {
    results_dir: Option<PathBuf>,
    database_url: Option<crate::database::DatabaseUrl>,
}

/// Where a command that reads runs finds them: the results directory and the shared database.
fn locations(
    config: Option<&Path>,
    env: &BTreeMap<String, String>,
    globals: &Globals,
) -> anyhow::Result<(PathBuf, Option<crate::database::DatabaseUrl>)> {
    let s = Settings::resolve(config, env, &flags(&Layer::default(), globals))?;
    Ok((s.results_dir, s.database_url))
}

fn environment() -> BTreeMap<String, String> {
    std::env::vars().collect()
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// Runs the command line; returns the process exit code.
pub async fn main(cli: Cli) -> anyhow::Result<i32> {
    let env = environment();
    let globals = Globals {
        results_dir: cli.results_dir.clone(),
        database_url: cli.database_url.clone(),
    };
    match cli.command {
        Command::Run(args) => {
            let settings = Settings::resolve(
                cli.config.as_deref(),
                &env,
                &flags(&args.settings, &globals),
            )?;
            let mut agents = Vec::new();
            if let Some(list) = &args.agents {
                agents.extend(AgentSpec::parse_list(list)?);
            }
            for a in &args.agent {
                agents.push(AgentSpec::parse(a)?);
            }
            let plan = Plan {
                tasks: args.tasks.iter().map(|p| absolute(p)).collect(),
                filters: args.filter.clone(),
                kinds: args.kind.clone(),
                agents: agents.iter().map(ToString::to_string).collect(),
                settings,
            };
            let run_id = args.run_id.clone().unwrap_or_else(new_run_id);
            run_and_report(plan, &run_id, &env, None).await
        }
        Command::Resume { run, settings } => {
            let (results, database) = locations(cli.config.as_deref(), &env, &globals)?;
            let dir = run_dir(&results, &run);
            if database.is_none() && !dir.join(crate::store::DB_FILE).is_file() {
                return Err(crate::store::StoreError::RunNotFound(run.clone()).into());
            }
            // Owned before the store is touched: a second resume refuses at once.
            let owner = crate::ownership::claim(&dir, &run, "resume")?;
            let store = Store::open_existing_with(&dir, &run, database.as_ref()).await?;
            let row = store.run(&run).await?;
            store.close().await;
            let mut plan: Plan =
                serde_json::from_value(row.plan).context("the run's stored plan is unreadable")?;
            plan.settings = plan.settings.apply(&flags(&settings, &Globals::default()));
            plan.settings.results_dir = results;
            // the stored plan shows the URL redacted: the one given now connects
            plan.settings.database_url = database;
            run_and_report(plan, &run, &env, Some(owner)).await
        }
        Command::Report {
            run,
            format,
            out,
            compare,
        } => {
            let (results, database) = locations(cli.config.as_deref(), &env, &globals)?;
            if let Some(agents) = compare {
                let text = crate::view::compare_report(&results, database, &run, &agents).await?;
                match out {
                    Some(path) => write_atomic(&path, text.as_bytes())
                        .with_context(|| format!("writing {}", path.display()))?,
                    None => print!("{text}"),
                }
                return Ok(0);
            }
            let store =
                Store::open_existing_with(&run_dir(&results, &run), &run, database.as_ref())
                    .await?;
            // Streamed: memory stays bounded whatever the run's size.
            match out {
                Some(path) => {
                    let dir = path
                        .parent()
                        .filter(|d| !d.as_os_str().is_empty())
                        .unwrap_or(std::path::Path::new("."));
                    let tmp = tempfile::NamedTempFile::new_in(dir)
                        .with_context(|| format!("writing {}", path.display()))?;
                    let mut w = std::io::BufWriter::new(tmp);
                    crate::report::write_report(&store, &run, format, &mut w).await?;
                    let tmp = w.into_inner().map_err(|e| e.into_error())?;
                    tmp.as_file().sync_all()?;
                    tmp.persist(&path)
                        .map_err(|e| e.error)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                None => {
                    let mut w = std::io::BufWriter::new(std::io::stdout());
                    crate::report::write_report(&store, &run, format, &mut w).await?;
                }
            }
            Ok(0)
        }
        Command::Images {
            command: ImagesCommand::Build { which },
        } => {
            crate::images::build(&which).await?;
            Ok(0)
        }
        Command::Images {
            command: ImagesCommand::Distribute { to, which },
        } => {
            crate::images::distribute(&to, &which).await?;
            Ok(0)
        }
        Command::Tasks {
            command: TasksCommand::Validate { paths },
        } => match tasks::load_suite(&paths) {
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
                Ok(0)
            }
            Err(e) => {
                eprintln!("{e}");
                Ok(1)
            }
        },
        Command::Tasks {
            command:
                TasksCommand::Check {
                    paths,
                    run_id,
                    settings,
                },
        } => {
            let settings =
                Settings::resolve(cli.config.as_deref(), &env, &flags(&settings, &globals))?;
            let results_dir = settings.results_dir.clone();
            let database = settings.database_url.clone();
            let plan = Plan {
                tasks: paths.iter().map(|p| absolute(p)).collect(),
                filters: Vec::new(),
                kinds: Vec::new(),
                agents: vec!["oracle".into(), "nop".into()],
                settings,
            };
            let run_id = run_id.unwrap_or_else(new_run_id);
            let code = run_and_report(plan, &run_id, &env, None).await?;
            if code != 0 {
                // interrupted by a signal
                return Ok(code);
            }
            let store = Store::open_existing_with(
                &run_dir(&results_dir, &run_id),
                &run_id,
                database.as_ref(),
            )
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
        Command::Tasks {
            command:
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
                },
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
        Command::Rubric {
            command: RubricCommand::Aggregate { graded, json },
        } => {
            let tree = rubrics::paperbench::Node::load(&graded)
                .with_context(|| format!("reading {}", graded.display()))?;
            if json {
                let out = serde_json::json!({
                    "root": rubrics::paperbench::aggregate(&tree),
                    "tree": node_scores(&tree),
                });
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else {
                println!("{:.6}", rubrics::paperbench::aggregate(&tree));
            }
            Ok(0)
        }
        Command::View(args) => {
            let (results, database) = locations(cli.config.as_deref(), &env, &globals)?;
            crate::view::command(args, results, database).await
        }
        Command::Serve(args) => {
            let settings = Settings::resolve(
                cli.config.as_deref(),
                &env,
                &flags(&args.settings, &globals),
            )?;
            crate::serve::command(*args, settings, env).await
        }
        Command::Reap => {
            let backend = sandbox::docker::DockerBackend::connect()
                .await
                .context("connecting to Docker")?;
            let settings = Settings::resolve(cli.config.as_deref(), &env, &Layer::default())?;
            // Parked agents (kept for a resume of their crashed run) go too.
            let n = settings.backend_config()?.reap_dead(backend).await?;
            println!("removed {n} leftover object(s) of dead runs");
            Ok(0)
        }
    }
}

/// Runs (`resumed`: the ownership a resume took; `None`: a new run, which takes it here) and
/// writes the reports. The run is owned until this returns.
async fn run_and_report(
    plan: Plan,
    run_id: &str,
    env: &BTreeMap<String, String>,
    resumed: Option<crate::ownership::RunOwnership>,
) -> anyhow::Result<i32> {
    let results_dir = plan.settings.results_dir.clone();
    let database = plan.settings.database_url.clone();
    let wide = plan.settings.wide;
    let dir = run_dir(&results_dir, run_id);
    let resume = resumed.is_some();
    let _owner = match resumed {
        Some(owner) => owner,
        None => crate::ownership::claim(&dir, run_id, "run")?,
    };
    let mut plan = plan;
    let (old_port, expected_tokens) = if resume {
        let store = Store::open_with(&dir, database.as_ref()).await?;
        let found = crate::trial::Leftovers::proxy_of_open_attempts(&store, run_id).await?;
        store.close().await;
        found
    } else {
        (None, Vec::new())
    };
    if plan.settings.proxy_port == 0 {
        // Agents left running call the proxy's old port: listen there again if it is free.
        if let Some(port) = old_port {
            if std::net::TcpListener::bind(("0.0.0.0", port)).is_ok() {
                plan.settings.proxy_port = port;
            } else {
                eprintln!(
                    "the model proxy's previous port {port} is taken: agents left running cannot reach it and start over"
                );
            }
        }
    }
    let prepared = prepare(plan, env).await?;
    if let Some(proxy) = &prepared.proxy {
        // Agents left running call the port as soon as it answers, before their trials are
        // reattached and registered again.
        proxy.expect(&expected_tokens);
    }
    let store = Store::open_with(&dir, database.as_ref()).await?;
    let total = prepared.trials.len() as u64;
    let done_before = if resume {
        store
            .trials(run_id)
            .await
            .map(|t| t.iter().filter(|t| t.state == "done").count() as u64)
            .unwrap_or(0)
    } else {
        0
    };
    eprintln!(
        "run {run_id}: {total} trial(s), results in {}",
        dir.display()
    );
    let live = Arc::new(Live::new(total, done_before));
    let trials = execute(prepared, run_id, &store, live.clone(), resume).await;
    live.finish();
    let trials = match trials {
        Err(e @ crate::run::RunError::Interrupted { signal, .. }) => {
            eprintln!("{e}");
            store.close().await;
            return Ok(signal.exit_code());
        }
        other => other?,
    };
    let data = ReportData::load(&store, run_id).await?;
    write_reports(&store, &data)
        .with_context(|| format!("writing the reports in {}", dir.display()))?;
    println!("{}", results_table(&data.summary, wide));
    println!(
        "reports: {}",
        dir.join("report.{md,json,csv,html}").display()
    );
    let unfinished = trials.iter().filter(|t| t.state != "done").count();
    let status = store.run(run_id).await?.status;
    store.close().await;
    if unfinished > 0 && status == crate::run::BUDGET_EXCEEDED {
        eprintln!(
            "run {run_id} reached its cost cap (--max-cost-per-run): {unfinished} trial(s) not started; \
             raise the cap and run `green-agent resume {run_id}`"
        );
        return Ok(3);
    }
    if unfinished > 0 {
        bail!("{unfinished} trial(s) did not finish; run `green-agent resume {run_id}`");
    }
    Ok(0)
}

/// A graded rubric tree's nodes with their re-aggregated scores (full precision), for
/// `rubric aggregate --json`.
fn node_scores(node: &rubrics::paperbench::Node) -> serde_json::Value {
    serde_json::json!({
        "id": node.id,
        "weight": node.weight,
        "score": rubrics::paperbench::aggregate(node),
        "sub_tasks": node.sub_tasks.iter().map(node_scores).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `green-agent help run` lists every setting with its help text (and its default when it
    /// has one); only the `[[judges]]` panel is file-only.
    #[test]
    fn run_help_lists_every_setting() {
        let mut cmd = command();
        cmd.build();
        let run = cmd.find_subcommand_mut("run").expect("run");
        let help = run.render_long_help().to_string();
        let defaults = serde_json::to_value(Settings::default()).expect("json");
        for (name, value) in defaults.as_object().expect("object") {
            if name == "judges" {
                assert!(help.contains("[[judges]]"), "judge panels are mentioned");
                continue;
            }
            let flag = format!("--{}", name.replace('_', "-"));
            let line = help
                .lines()
                .skip_while(|l| !l.trim_start().starts_with(&flag))
                .nth(1)
                .unwrap_or_else(|| panic!("{flag} missing from `help run`:\n{help}"));
            assert!(line.trim().len() > 10, "{flag} has help text: {line:?}");
            if !value.is_null() {
                assert!(
                    line.contains("[default: "),
                    "{flag} shows its default: {line}"
                );
            }
        }
    }
}
