//! `green-agent resume`: continues a run; only its unfinished trials run. With `--regrade`,
//! every trial of a finished run is graded again from its stored outputs (no agent runs).

use anyhow::Context as _;
use clap::Args;

use super::{Context, RunRef};
use crate::config::Layer;
use crate::run::Plan;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run: its id under the results directory, or its folder (the path `run` printed).
    #[arg(value_name = "RUN")]
    pub run: String,
    /// Grade every trial of the finished run again, with its task's current graders, from the
    /// outputs its agent left (stored before the first grading), in a fresh grading container:
    /// no agent runs again. The previous grades are kept in the run's event log
    /// (`trial_regrade`), the new ones stored and the reports written again; what changed is
    /// printed (old → new). A trial whose outputs were never collected is listed, not graded.
    #[arg(long)]
    pub regrade: bool,
    #[command(flatten)]
    pub settings: Layer,
}

pub async fn command(args: ResumeArgs, ctx: &Context) -> anyhow::Result<i32> {
    let (results, database) = ctx.locations()?;
    let at = RunRef::resolve(&args.run, &results, database.is_some());
    let (run, dir) = (at.run_id.clone(), at.dir());
    if database.is_none() && !dir.join(crate::store::DB_FILE).is_file() {
        return Err(crate::store::StoreError::RunNotFound(args.run.clone()).into());
    }
    // Owned before the store is touched: a second resume refuses at once.
    let owner = crate::ownership::claim(&dir, &run, "resume")?;
    let store = Store::open_existing_with(&dir, &run, database.as_ref()).await?;
    let row = store.run(&run).await?;
    let trials = store.trials(&run).await?;
    let mut plan: Plan =
        serde_json::from_value(row.plan).context("the run's stored plan is unreadable")?;
    plan.settings = plan.settings.apply(&Layer {
        results_dir: None,
        database_url: None,
        ..args.settings.clone()
    });
    plan.settings.results_dir = at.results_dir.clone();
    // the stored plan shows the URL redacted: the one given now connects
    plan.settings.database_url = database;
    if args.regrade && args.settings.repeats.is_some() {
        anyhow::bail!(
            "--regrade grades the run's trials again and --repeats adds trials: use one, then the other"
        );
    }
    // A regrade stopped half-way is finished as a regrade, with or without the flag.
    let regrade = args.regrade || crate::regrade::unfinished(&store, &run, &trials).await? > 0;
    store.close().await;
    let done = trials.iter().filter(|t| t.state == "done").count();
    if !regrade
        && row.status == "finished"
        && done == trials.len()
        && args.settings.repeats.is_none()
    {
        println!(
            "run {run} is finished: all {done} trial(s) are done, nothing to resume \
             (`green-agent resume {run} --regrade` grades them again from their stored outputs, if wanted). \
             Its reports are in {}; `green-agent report {run}` writes one again.",
            dir.display()
        );
        return Ok(0);
    }
    super::run::run_and_report(plan, &run, &ctx.env, Some(owner), regrade).await
}
