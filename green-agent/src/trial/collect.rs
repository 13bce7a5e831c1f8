//! Phase 4, collect: a hosted agent's sandbox is frozen and its workspace copied out (the
//! authoritative output, also after a kill), with its log; then the A2A artifacts of either
//! side; for a task in turns, each turn's copy of the kept file (`turns`). The pipeline removes
//! the agent's sandbox right after (once the collected outputs are checkpointed): nothing
//! held-out is touched before that. The whole phase has a budget (`collect_timeout`): over it
//! the outputs are discarded and the trial scores 0, flagged [`COLLECTION_TIMEOUT_FLAG`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tracing::warn;

use super::drive::AgentRun;
use super::env::{InfraError, RunEnv, TrialInput};
use super::outputs::{UrlSource, add_changed, changed_files, collect_a2a_artifacts, put_artifact};
use super::prepare::Prepared;
use super::side::AgentSide;
use super::turns;
use crate::model::{ArtifactRef, Outcome};
use white_agent_adapter::contract::paths::WORKSPACE;

/// Flag of a trial whose workspace held symlinks, FIFOs, sockets or devices (dropped, not
/// followed); the list is the [`DROPPED_ARTIFACT`] artifact.
pub(crate) const DROPPED_FLAG: &str = "dropped_special_files";
/// Artifact listing what was dropped: `{"count": n, "listed": ["path (kind)", ...]}` (capped).
pub(crate) const DROPPED_ARTIFACT: &str = "dropped_special_files";

/// Largest agent log kept.
const MAX_LOG_BYTES: usize = 1024 * 1024;

pub(crate) use super::outputs::Collected;

/// Flag of a trial whose agent reported impossible usage (negative, non-finite, absurd).
pub(crate) const USAGE_REJECTED_FLAG: &str = "invalid_self_reported_usage";
/// Flag of a trial whose usage is the agent's own report (no model proxy counted it).
pub(crate) const SELF_REPORTED_FLAG: &str = "self_reported_usage";

/// Flag of a trial whose collection ran over its budget (`collect_timeout`): what was
/// collected is discarded, nothing is graded, the score is 0 (the agent's failure).
pub(crate) const COLLECTION_TIMEOUT_FLAG: &str = "collection_timeout";

/// The copied-out workspace, in the attempt's scratch folder (created by the copy-out).
const RAW: &str = "agent-workspace";

/// Longest wait, once the budget ran out, for a canceled copy-out to remove what it had
/// written (it does so once its extractor stops, at its next read).
const SETTLE: Duration = Duration::from_secs(10);

/// Collects the agent's outputs within the run's collection budget (`collect_timeout`), the
/// whole phase: the copy-out, the comparison with the task's workspace, the store, the A2A
/// artifacts. Over it, the trial's outputs are discarded and it is marked
/// [`Collected::timed_out`] (graded as 0 by the pipeline): never an infrastructure failure,
/// never a wait beyond the budget but for what was canceled to stop.
pub(crate) async fn collect(
    env: &RunEnv,
    input: &TrialInput,
    side: AgentSide,
    run: &mut AgentRun,
    prep: &Prepared,
) -> Result<Collected, InfraError> {
    let budget = env.settings.collect_timeout.get();
    let mut out = Collected::default();
    let mut walk = Walk::default();
    let gathered = tokio::time::timeout(
        budget,
        gather(env, input, side, run, prep, &mut walk, &mut out),
    )
    .await;
    match gathered {
        Ok(done) => done.map(|()| out),
        Err(_) => {
            warn!(
                budget_s = budget.as_secs_f64(),
                "collection ran over its budget; the outputs are discarded"
            );
            walk.stop().await;
            discard(prep, walk.copied).await;
            let why = format!(
                "collecting the agent's outputs ran over the collection budget of {} (setting \
                 `collect_timeout`: --collect-timeout or RB_COLLECT_TIMEOUT): nothing of the \
                 agent's was graded, score 0",
                crate::config::Span(budget)
            );
            out.artifacts.retain(|a| !a.name.starts_with("file:"));
            out.flags.push(format!("{COLLECTION_TIMEOUT_FLAG}: {why}"));
            out.timed_out = Some(why);
            Ok(out)
        }
    }
}

/// The walk over the copied-out workspace (blocking, off the runtime) while it runs, so that a
/// collection over its budget can stop it and wait for it: nothing of it writes afterwards.
#[derive(Default)]
struct Walk {
    stop: Arc<AtomicBool>,
    running: Option<JoinHandle<Result<Option<Vec<ArtifactRef>>, InfraError>>>,
    /// The copy-out ended (it was not canceled midway).
    copied: bool,
}

impl Walk {
    async fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(walk) = self.running.take() {
            let _ = walk.await;
        }
    }
}

/// Discards what an abandoned collection left in the attempt's scratch folder: the staged
/// outputs, the copied-out workspace (a canceled copy-out removes its own, once it stops:
/// waited for, up to [`SETTLE`]).
async fn discard(prep: &Prepared, copied: bool) {
    let raw = prep.work.path().join(RAW);
    if copied {
        let _ = std::fs::remove_dir_all(&raw);
    } else {
        let settled = Instant::now() + SETTLE;
        while std::fs::symlink_metadata(&raw).is_ok() && Instant::now() < settled {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let _ = std::fs::remove_dir_all(&prep.outputs_dir);
    let _ = std::fs::create_dir_all(&prep.outputs_dir);
}

async fn gather(
    env: &RunEnv,
    input: &TrialInput,
    side: AgentSide,
    run: &mut AgentRun,
    prep: &Prepared,
    walk: &mut Walk,
    out: &mut Collected,
) -> Result<(), InfraError> {
    match side {
        AgentSide::External(ext) => {
            drop(ext.file_server);
            if let Some(task) = &run.final_task {
                let source = UrlSource::Http {
                    agent_url: &ext.url,
                };
                a2a_files(env, input, Some(source), task, true, prep, out).await?;
            }
        }
        AgentSide::Hosted(hosted) => {
            let sb = hosted.sandbox.as_ref();
            let over_cap = copy_out_workspace(env, input, sb, run, prep, walk, out).await?;
            if let Some(task) = &run.final_task {
                // Normally the copied-out workspace holds the files; over the cap, the files
                // the adapter returned are taken (inline bytes, url parts copied out one by one).
                let source = over_cap.is_some().then_some(UrlSource::Sandbox(sb));
                a2a_files(env, input, source, task, over_cap.is_some(), prep, out).await?;
            }
            out.flags.extend(over_cap);
            // The pipeline removes the agent container once what was collected is stored,
            // before grading touches any held-out file.
        }
    }
    if let Some(t) = input.task.turns() {
        turns::stage_snapshots(
            env,
            &run.turns,
            &t.kept_file,
            &prep.outputs_dir,
            &mut out.artifacts,
        )?;
    }
    Ok(())
}

/// Freezes the sandbox and copies its workspace out; returns a flag when it was over the cap.
async fn copy_out_workspace(
    env: &RunEnv,
    input: &TrialInput,
    sb: &dyn sandbox::Sandbox,
    run: &mut AgentRun,
    prep: &Prepared,
    walk: &mut Walk,
    out: &mut Collected,
) -> Result<Option<String>, InfraError> {
    let mut over_cap = None;
    // Created by the copy-out (a canceled copy-out removes it again).
    let raw = prep.work.path().join(RAW);
    // Frozen where it stands (Docker: paused; other backends: stopped): nothing of the agent's
    // runs or writes after this point, and the container goes with the pipeline's removal.
    let _ = sb.freeze(Duration::from_secs(2)).await;
    if run.exit_code.is_none()
        && let Ok(Some(code)) = sb.main_exit().await
        && code != 0
        && run.outcome == Some(Outcome::Crashed)
    {
        run.exit_code = Some(code);
    }
    // The log first: kept also when the copy-out runs over the budget.
    if let Ok(log) = sb.logs(MAX_LOG_BYTES).await {
        put_artifact(
            env,
            &mut out.artifacts,
            "agent_log",
            log.as_bytes(),
            Some("text/plain"),
        )?;
    }
    // Only regular files come out: links (wherever they point), FIFOs, sockets and devices are
    // dropped and flagged, never followed or opened, never a reason to abandon the trial.
    let copied = sb
        .copy_out_with(
            WORKSPACE,
            &raw,
            env.settings.max_output_bytes,
            sandbox::EscapingLinks::RegularFilesOnly,
        )
        .await;
    walk.copied = true;
    match copied {
        Ok(copied) => {
            if copied.dropped_count > 0 {
                warn!(
                    count = copied.dropped_count,
                    "links or special files dropped from the agent's workspace"
                );
                put_artifact(
                    env,
                    &mut out.artifacts,
                    DROPPED_ARTIFACT,
                    serde_json::json!({
                        "count": copied.dropped_count,
                        "listed": copied.dropped,
                    })
                    .to_string()
                    .as_bytes(),
                    Some("application/json"),
                )?;
                out.flags.push(DROPPED_FLAG.into());
            }
            // Off the runtime (100,000 files take tens of seconds), stoppable by the budget.
            let (store, stop) = (env.store.clone(), walk.stop.clone());
            let pristine = input.task.agent_view().workspace.dir().to_path_buf();
            let outputs = prep.outputs_dir.clone();
            let handle = walk.running.insert(tokio::task::spawn_blocking(move || {
                changed_files(&store, &pristine, &raw, &outputs, &stop)
            }));
            let joined = handle.await;
            walk.running = None;
            let changed = joined.map_err(|e| InfraError::Io {
                what: "comparing the agent's workspace with the task's".into(),
                source: std::io::Error::other(e),
            })??;
            add_changed(&mut out.artifacts, changed.unwrap_or_default());
        }
        Err(sandbox::SandboxError::OverSizeCap { size, cap, .. }) => {
            warn!(size, cap, "agent workspace over the output cap");
            over_cap = Some(format!(
                "workspace over the output cap of {cap} bytes (at least {size}): only the files the agent returned were collected"
            ));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(over_cap)
}

/// The A2A artifacts (files too when `with_files`), flagging files by URL not fetched.
async fn a2a_files(
    env: &RunEnv,
    input: &TrialInput,
    source: Option<UrlSource<'_>>,
    task: &a2a_protocol::Task,
    with_files: bool,
    prep: &Prepared,
    out: &mut Collected,
) -> Result<(), InfraError> {
    let dir = with_files.then_some(prep.outputs_dir.as_path());
    let not_fetched = collect_a2a_artifacts(env, &input.planned.id, source, task, dir, out).await?;
    if let Some(why) = &out.usage.rejected {
        out.flags
            .push(format!("{USAGE_REJECTED_FLAG}: {why}; no usage recorded"));
    }
    if let Some(first) = not_fetched.first() {
        out.flags.push(format!(
            "{} output file(s) by URL not fetched (first: {first})",
            not_fetched.len()
        ));
    }
    Ok(())
}
