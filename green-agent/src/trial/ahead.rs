//! A trial prepared ahead of its run slot: while earlier trials run or grade, its agent's sandbox
//! is created and started (up to the end of `launch::create`: network, container, workspace,
//! adapter process) and its grading sandbox created, given the task's own files and probed.
//! The trial's clock (`mark_running`, `started_at`) starts when it takes its slot, on started
//! containers; the time spent here is recorded as the phase `ahead` (before the clock).
//!
//! **No attempt is recorded while a trial is prepared ahead** (the trial stays `pending`): its
//! agent has no task (the task is sent only by `drive`, after the slot, after
//! `reattach::begin` recorded the attempt), so nothing of it can be lost and nothing must be
//! taken over. A green agent killed meanwhile leaves containers without an open attempt:
//! `resume` (`Leftovers::gather`) removes an agent container no open attempt names, and the
//! rest of the run's objects (the grading sandbox); a create still in flight at the kill is
//! removed by the resumed run's final reap. The trial is pending, so the resume runs it once,
//! fresh. Recording the attempt here instead would make a resume adopt an agent that never got
//! its task, for no gain, and leave an open attempt to close for every trial canceled while
//! prepared. A prepared trial that never takes its slot (a spent budget) is [`Ahead::discard`]ed;
//! one dropped by a cancel or a signal is removed by the run's reap (every object carries the
//! run's labels).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use sandbox::Sandbox;
use tracing::warn;

use super::env::{InfraError, RunEnv, TrialInput};
use super::grade;
use super::launch::{self, Created};
use super::phases::PhaseLog;
use super::prepare::{self, Prepared};
use super::reattach::Left;
use super::resources::Resources;
use crate::agents::AgentSpec;

/// The name of the phase that holds the time spent ahead (outside the trial's wall time).
pub const PHASE: &str = "ahead";

/// A trial's sandboxes, started before its slot (see the module's docs).
pub struct Ahead {
    pub(super) prep: Prepared,
    pub(super) created: Created,
    /// The agent's sandbox and network.
    pub(super) res: Resources,
    /// The grading sandbox, its task files staged and its probes answered (taken by the
    /// attempt's grading side).
    pub(super) grader: Option<(Arc<dyn Sandbox>, rubrics::grade::Prewarmed)>,
    /// Milliseconds spent preparing.
    pub(super) ms: u64,
}

impl std::fmt::Debug for Ahead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ahead")
            .field("agent", &self.created.container())
            .field("grader", &self.grader.as_ref().map(|g| g.0.id()))
            .field("ms", &self.ms)
            .finish_non_exhaustive()
    }
}

/// Whether `input` is prepared ahead in `env`: a fresh hosted trial (not one a dead owner left,
/// not an `oracle` without a reference solution, which runs nothing).
pub fn eligible(env: &RunEnv, input: &TrialInput) -> bool {
    input.agent.is_hosted()
        && !(input.agent == AgentSpec::Oracle && input.task.oracle_solution().is_none())
        && !env.leftovers.has(&input.planned.id)
}

/// Prepares `input` ahead of its slot; `None` when it is not [`eligible`] or the preparation
/// failed (what it made is removed; the trial then takes the ordinary path at its slot, where
/// a failure is an attempt's, retried and recorded; the failure here is an event).
pub async fn prepare(env: &RunEnv, input: &TrialInput) -> Option<Ahead> {
    // (outputs a dead process's last attempt collected are graded without an agent)
    if !eligible(env, input) || Left::collected_by_last_attempt(env, input).await.is_some() {
        return None;
    }
    let started = Instant::now();
    let mut res = Resources::default();
    let mut grader_slot: Option<Arc<dyn Sandbox>> = None;
    let out = attempt(env, input, &mut res, &mut grader_slot, started).await;
    match out {
        Ok(ahead) => Some(ahead),
        Err(e) => {
            warn!(error = %e, "preparing the trial ahead failed; it is prepared at its slot");
            if let Some(g) = grader_slot {
                res.keep_shared(g);
            }
            res.release(env.backend.as_ref()).await;
            if let Some(p) = &env.proxy {
                p.unregister(&input.planned.id);
            }
            let _ = env
                .store
                .event(
                    &env.run_id,
                    Some(&input.planned.id),
                    "ahead_failed",
                    &serde_json::json!({ "error": e.to_string() }),
                )
                .await;
            None
        }
    }
}

async fn attempt(
    env: &RunEnv,
    input: &TrialInput,
    res: &mut Resources,
    grader_slot: &mut Option<Arc<dyn Sandbox>>,
    started: Instant,
) -> Result<Ahead, InfraError> {
    let prep = prepare::prepare(env, input, None)?;
    env.observer.phase(&input.planned, PHASE);
    // The agent's log is not kept: its `create` happened before the trial's clock; the whole
    // preparation is the phase `ahead`.
    let mut log = PhaseLog::quiet(env, &input.planned);
    let grader_side = async {
        let sb: Arc<dyn Sandbox> = grade::create(env, input).await?.into();
        *grader_slot = Some(sb.clone());
        let (files, prewarmed) = tokio::join!(
            grade::stage_task_files(input, sb.as_ref()),
            grade::prewarm(env, input, sb.as_ref())
        );
        files.map(|()| (sb, prewarmed))
    };
    let agent_side = launch::create(env, input, &prep, res, &mut log);
    let (grader, created) = tokio::join!(grader_side, agent_side);
    let created = created?;
    let (grader, prewarmed) = grader?;
    Ok(Ahead {
        prep,
        created,
        res: std::mem::take(res),
        grader: Some((grader, prewarmed)),
        ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

impl Ahead {
    /// Removes what was prepared (a trial that does not take its slot).
    pub async fn discard(self, env: &RunEnv, planned: &crate::model::PlannedTrial) {
        let mut res = self.res;
        if let Some((grader, _)) = self.grader {
            res.keep_shared(grader);
        }
        res.release(env.backend.as_ref()).await;
        if let Some(p) = &env.proxy {
            p.unregister(&planned.id);
        }
    }

    /// The phase times it contributes to the trial's record.
    pub(super) fn phases(&self) -> BTreeMap<String, u64> {
        BTreeMap::from([(PHASE.to_owned(), self.ms)])
    }
}
