//! `green-agent run`: a new run of tasks × agents × repeats, then its reports. Also the part
//! `resume` and `tasks check` share: [`run_and_report`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::Args;

use super::Context;
use crate::agents::AgentSpec;
use crate::config::Layer;
use crate::presentation::table::results_table;
use crate::report::{ReportData, write_reports};
use crate::run::{Plan, execute, new_run_id, prepare, run_dir};
use crate::store::Store;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Task folders or suites (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', required = true, value_name = "PATH")]
    pub tasks: Vec<PathBuf>,
    /// Keep tasks whose id contains one of these (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "TEXT")]
    pub filter: Vec<String>,
    /// Keep tasks of these kinds (prbench, scicode, mmsicode, arbench, scicoqa, paperbench,
    /// harbor, generic; comma-separated or repeated).
    #[arg(long, value_delimiter = ',', value_name = "KIND")]
    pub kind: Vec<String>,
    /// Agents, comma-separated: oracle, nop, claude-code:model=M, codex:model=M,
    /// opencode:model=P/M, cmd:COMMAND, a2a:URL.
    #[arg(long, value_name = "SPECS")]
    pub agents: Option<String>,
    /// One agent (repeatable; use for `cmd:` commands containing commas).
    #[arg(long, value_name = "SPEC")]
    pub agent: Vec<String>,
    /// Run id (default: time-based).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<String>,
    #[command(flatten)]
    pub settings: Layer,
}

pub async fn command(args: RunArgs, ctx: &Context) -> anyhow::Result<i32> {
    let settings = ctx.settings(&args.settings)?;
    let mut agents = Vec::new();
    if let Some(list) = &args.agents {
        agents.extend(AgentSpec::parse_list(list)?);
    }
    for a in &args.agent {
        agents.push(AgentSpec::parse(a)?);
    }
    let plan = Plan {
        tasks: args.tasks.iter().map(|p| super::absolute(p)).collect(),
        filters: args.filter.clone(),
        kinds: args.kind.clone(),
        agents: agents.iter().map(ToString::to_string).collect(),
        settings,
    };
    let run_id = args.run_id.clone().unwrap_or_else(new_run_id);
    run_and_report(plan, &run_id, &ctx.env, None, false).await
}

/// Runs (`resumed`: the ownership a resume took; `None`: a new run, which takes it here once
/// the plan is known to be valid, so an invalid command leaves no run folder) and writes the
/// reports. The run is owned until this returns. `regrade` (a resume only): instead of its
/// unfinished trials, the run's trials are graded again from their stored outputs
/// ([`crate::regrade`]) and what changed is printed.
pub(super) async fn run_and_report(
    plan: Plan,
    run_id: &str,
    env: &BTreeMap<String, String>,
    resumed: Option<crate::ownership::RunOwnership>,
    regrade: bool,
) -> anyhow::Result<i32> {
    let results_dir = plan.settings.results_dir.clone();
    let database = plan.settings.database_url.clone();
    let wide = plan.settings.wide;
    let dir = run_dir(&results_dir, run_id);
    let resume = resumed.is_some();
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
    let mut prepared = prepare(plan, env).await?;
    let _owner = match resumed {
        Some(owner) => owner,
        None => claim_new(&dir, &results_dir, run_id)?,
    };
    if let Some(proxy) = &prepared.proxy {
        // Agents left running call the port as soon as it answers, before their trials are
        // reattached and registered again.
        proxy.expect(&expected_tokens);
    }
    let store = Store::open_with(&dir, database.as_ref()).await?;
    let regraded = if regrade {
        let selection =
            crate::regrade::start(&store, run_id, std::mem::take(&mut prepared.trials)).await?;
        if selection.continued > 0 {
            eprintln!(
                "run {run_id}: an earlier regrade was stopped; grading its {} remaining trial(s)",
                selection.continued
            );
        }
        if selection.inputs.is_empty() {
            store.close().await;
            print!(
                "{}",
                crate::presentation::regrade::render(&[], &selection.skipped)
            );
            return Ok(0);
        }
        prepared.trials = selection.inputs;
        Some((
            prepared
                .trials
                .iter()
                .map(|t| t.planned.clone())
                .collect::<Vec<_>>(),
            selection.skipped,
        ))
    } else {
        None
    };
    let total = prepared.trials.len() as u64;
    let done_before = if resume && !regrade {
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
    let live = Arc::new(crate::progress::Progress::on_stderr(total, done_before));
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
    if let Some((planned, skipped)) = &regraded {
        let changes = crate::regrade::changes(&store, run_id, planned).await?;
        print!(
            "{}",
            crate::presentation::regrade::render(&changes, skipped)
        );
    }
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

/// Takes a new run's folder; a results directory that cannot be written is named by its
/// setting.
fn claim_new(
    dir: &std::path::Path,
    results_dir: &std::path::Path,
    run_id: &str,
) -> anyhow::Result<crate::ownership::RunOwnership> {
    crate::ownership::claim(dir, run_id, "run").map_err(|e| match e {
        crate::ownership::OwnershipError::Lock { .. } => anyhow::Error::new(e).context(format!(
            "cannot create the run folder under the results directory {} \
             (--results-dir or RB_RESULTS_DIR: choose a directory you can write to)",
            results_dir.display()
        )),
        other => other.into(),
    })
}
