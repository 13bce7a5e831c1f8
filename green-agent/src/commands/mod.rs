//! The command line (`green-agent ...`): one file per subcommand, each holding its arguments
//! and what it does; this file registers them ([`Command`]) and holds what every command
//! shares ([`Context`]: the settings file, the environment and the global flags).
//!
//! A new command is one file here plus one line in [`Command`] and one in [`main`]. Every
//! tunable flag is a setting declared once in [`crate::config`] (file < `RB_*` < flag); what a
//! command acts on (task folders, agents, a run) stays an argument of the command.

mod images;
mod reap;
mod report;
mod resume;
mod rubric;
mod run;
mod run_ref;
mod serve;
mod tasks;
mod view;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};

use crate::config::{Group, Layer, ServeSettings, Settings, ViewSettings};

pub use run_ref::RunRef;

#[derive(Debug, Parser)]
#[command(
    name = "green-agent",
    version,
    about = "Assess coding agents on scientific research code"
)]
pub struct Cli {
    /// Settings file (TOML); default: research-bench.toml in the working directory, if present.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where run directories go (env RB_RESULTS_DIR).
    #[arg(long, global = true, value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// PostgreSQL database holding every run's rows, e.g. postgres://USER@HOST/DB (env
    /// RB_DATABASE_URL, the place for a URL with a password); default: a SQLite file per run.
    #[arg(long, global = true, value_name = "URL")]
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
    Run(run::RunArgs),
    /// Continue a run: only its unfinished trials run (`--regrade`: grade a finished run again).
    Resume(resume::ResumeArgs),
    /// Write a run's report.
    Report(report::ReportArgs),
    /// Platform images.
    Images {
        #[command(subcommand)]
        command: images::ImagesCommand,
    },
    /// Task folders.
    Tasks {
        #[command(subcommand)]
        command: tasks::TasksCommand,
    },
    /// Rubric trees.
    Rubric {
        #[command(subcommand)]
        command: rubric::RubricCommand,
    },
    /// Remove leftover containers and networks of dead runs.
    Reap,
    /// Serve a read-only web viewer (dashboard + JSON API) over the runs in the results
    /// directory; prints its URL.
    View(view::ViewArgs),
    /// Serve the green agent over A2A (1.0 and 0.3): assessment requests in AgentBeats' form,
    /// progress as task updates, results as artifacts; each assessment is a run in the results
    /// directory.
    Serve(Box<serve::ServeArgs>),
}

/// Runs the command line; returns the process exit code.
pub async fn main(cli: Cli) -> anyhow::Result<i32> {
    let ctx = Context {
        config: cli.config,
        env: std::env::vars().collect(),
        results_dir: cli.results_dir,
        database_url: cli.database_url,
    };
    match cli.command {
        Command::Run(args) => run::command(args, &ctx).await,
        Command::Resume(args) => resume::command(args, &ctx).await,
        Command::Report(args) => report::command(args, &ctx).await,
        Command::Images { command } => images::command(command).await,
        Command::Tasks { command } => tasks::command(command, &ctx).await,
        Command::Rubric { command } => rubric::command(command),
        Command::Reap => reap::command(&ctx).await,
        Command::View(args) => view::command(args, &ctx).await,
        Command::Serve(args) => serve::command(*args, &ctx).await,
    }
}

/// What every command shares: the settings file, the environment and the global flags.
#[derive(Debug)]
pub struct Context {
    config: Option<PathBuf>,
    env: BTreeMap<String, String>,
    results_dir: Option<PathBuf>,
    database_url: Option<crate::database::DatabaseUrl>,
}

impl Context {
    /// The run settings: file < environment < these flags (plus the global ones).
    fn settings(&self, flags: &Layer) -> anyhow::Result<Settings> {
        Ok(Settings::resolve(
            self.config.as_deref(),
            &self.env,
            &self.flags(flags),
        )?)
    }

    /// A command group's settings: file < environment < its flags.
    fn group<G: Group>(&self, flags: &G::Layer) -> anyhow::Result<G> {
        Ok(crate::config::resolve(
            self.config.as_deref(),
            &self.env,
            flags,
        )?)
    }

    /// A command's flags layer with the global `--results-dir` and `--database-url`.
    fn flags(&self, settings: &Layer) -> Layer {
        Layer {
            results_dir: self.results_dir.clone(),
            database_url: self.database_url.clone(),
            ..settings.clone()
        }
    }

    /// Where a command that reads runs finds them: the results directory and the shared
    /// database.
    fn locations(&self) -> anyhow::Result<(PathBuf, Option<crate::database::DatabaseUrl>)> {
        let s = self.settings(&Layer::default())?;
        Ok((s.results_dir, s.database_url))
    }
}

/// A path made absolute (the run's plan names task folders wherever it is resumed from).
fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    })
}

/// The command line, with each setting's default (from its group's `Default`, so it is
/// declared once) at the end of its help text, and the run settings' environment variables
/// listed after `run`'s.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let run = defaults_of(&Settings::default());
    let view = defaults_of(&ViewSettings::default());
    let mut serve = defaults_of(&ServeSettings::default());
    serve.extend(run.clone());
    with_defaults(Cli::command(), &run)
        .mut_subcommand("view", |c| with_defaults(c, &view))
        .mut_subcommand("serve", |c| with_defaults(c, &serve))
        .mut_subcommand("run", |c| c.after_long_help(environment_help()))
}

fn defaults_of<T: serde::Serialize>(group: &T) -> serde_json::Map<String, serde_json::Value> {
    serde_json::to_value(group)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_default()
}

fn with_defaults(
    cmd: clap::Command,
    defaults: &serde_json::Map<String, serde_json::Value>,
) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_help()
            .is_some_and(|h| h.to_string().contains("[default: "))
        {
            return a;
        }
        let text = match defaults.get(a.get_id().as_str()) {
            None | Some(serde_json::Value::Null) => return a,
            Some(serde_json::Value::Array(v)) if v.is_empty() => return a,
            Some(serde_json::Value::Array(v)) => v
                .iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(","),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
        };
        let help = a.get_help().map(ToString::to_string).unwrap_or_default();
        a.help(format!("{help} [default: {text}]"))
    })
    .mut_subcommands(|c| with_defaults(c, defaults))
}

/// The `RB_*` variables of every run setting (shown under `help run`).
fn environment_help() -> String {
    let mut out = String::from(
        "Environment (each run setting also reads RB_<NAME>; a flag wins over it, it wins over the settings file):\n",
    );
    let names = <Settings as Group>::NAMES;
    let width = names.iter().map(|n| n.len()).max().unwrap_or(0) + 3;
    for name in names {
        out.push_str(&format!(
            "  {:<width$}  --{}\n",
            format!("RB_{}", name.to_ascii_uppercase()),
            name.replace('_', "-"),
        ));
    }
    out.push_str(
        "Model API keys (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...) are read from the environment only.",
    );
    out
}

#[cfg(test)]
mod tests;
