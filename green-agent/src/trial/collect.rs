//! Phase 4, collect: a hosted agent's sandbox is frozen and its workspace copied out (the
//! authoritative output, also after a kill), with its log; then the A2A artifacts of either
//! side; for a task in turns, each turn's copy of the kept file (`turns`). The pipeline removes the agent's sandbox right after (once the collected outputs are
//! checkpointed): nothing held-out is touched before that.

use std::time::Duration;

use tracing::warn;

use super::drive::AgentRun;
use super::env::{InfraError, RunEnv, TrialInput, io};
use super::outputs::{UrlSource, collect_a2a_artifacts, collect_changed_files, put_artifact};
use super::prepare::Prepared;
use super::side::AgentSide;
use super::turns;
use crate::model::Outcome;
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

pub(crate) async fn collect(
    env: &RunEnv,
    input: &TrialInput,
    side: AgentSide,
    run: &mut AgentRun,
    prep: &Prepared,
) -> Result<Collected, InfraError> {
    let mut out = Collected::default();
    match side {
        AgentSide::External(ext) => {
            drop(ext.file_server);
            if let Some(task) = &run.final_task {
                let source = UrlSource::Http {
                    agent_url: &ext.url,
                };
                a2a_files(env, input, Some(source), task, true, prep, &mut out).await?;
            }
        }
        AgentSide::Hosted(hosted) => {
            let sb = hosted.sandbox.as_ref();
            let over_cap = copy_out_workspace(env, input, sb, run, prep, &mut out).await?;
            if let Some(task) = &run.final_task {
                // Normally the copied-out workspace holds the files; over the cap, the files
                // the adapter returned are taken (inline bytes, url parts copied out one by one).
                let source = over_cap.is_some().then_some(UrlSource::Sandbox(sb));
                a2a_files(env, input, source, task, over_cap.is_some(), prep, &mut out).await?;
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
    Ok(out)
}

/// Freezes the sandbox and copies its workspace out; returns a flag when it was over the cap.
async fn copy_out_workspace(
    env: &RunEnv,
    input: &TrialInput,
    sb: &dyn sandbox::Sandbox,
    run: &mut AgentRun,
    prep: &Prepared,
    out: &mut Collected,
) -> Result<Option<String>, InfraError> {
    let mut over_cap = None;
    let raw = prep.work.path().join("agent-workspace");
    std::fs::create_dir_all(&raw).map_err(io("creating the copy-out folder"))?;
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
    // Only regular files come out: links (wherever they point), FIFOs, sockets and devices are
    // dropped and flagged, never followed or opened, never a reason to abandon the trial.
    match sb
        .copy_out_with(
            WORKSPACE,
            &raw,
            env.settings.max_output_bytes,
            sandbox::EscapingLinks::RegularFilesOnly,
        )
        .await
    {
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
            collect_changed_files(
                env,
                input.task.agent_view().workspace.dir(),
                &raw,
                &prep.outputs_dir,
                &mut out.artifacts,
            )?
        }
        Err(sandbox::SandboxError::OverSizeCap { size, cap, .. }) => {
            warn!(size, cap, "agent workspace over the output cap");
            over_cap = Some(format!(
                "workspace over the output cap of {cap} bytes (at least {size}): only the files the agent returned were collected"
            ));
        }
        Err(e) => return Err(e.into()),
    }
    if let Ok(log) = sb.logs(MAX_LOG_BYTES).await {
        put_artifact(
            env,
            &mut out.artifacts,
            "agent_log",
            log.as_bytes(),
            Some("text/plain"),
        )?;
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
