//! Phase 6, record: the trial's result from its parts (the agent's run, what was collected,
//! the proxy's usage count, the grade), and its write to the store.

use std::collections::BTreeMap;

use super::collect::Collected;
use super::drive::AgentRun;
use super::env::RunEnv;
use super::prepare::Prepared;
use crate::model::{Outcome, PlannedTrial, TrialResult, Usage};
use crate::store::StoreError;

/// The usage of the attempt: the proxy's count for a model agent with a proxy, else what the
/// agent reported (validated at collection); `true` when it is the agent's own report.
pub(crate) fn usage(
    env: &RunEnv,
    planned: &PlannedTrial,
    prep: &Prepared,
    reported: Usage,
) -> (Usage, bool) {
    let counted = match &env.proxy {
        Some(p) if prep.proxy_token.is_some() => p.usage(&planned.id),
        _ => None,
    };
    match counted {
        Some(u) => (u, false),
        None => (reported, true),
    }
}

/// Everything an attempt that reached grading recorded.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) run: AgentRun,
    pub(crate) collected: Collected,
    pub(crate) usage: Usage,
    /// `usage` is the agent's own report (flagged when it claims anything).
    pub(crate) self_reported_usage: bool,
    pub(crate) isolated: bool,
    pub(crate) phases: BTreeMap<String, u64>,
}

/// The result of a graded attempt.
pub(crate) fn assemble(parts: Parts, grade: &rubrics::GradeReport) -> TrialResult {
    let Parts {
        run,
        collected,
        usage,
        self_reported_usage,
        isolated,
        phases,
    } = parts;
    let mut flags = collected.flags;
    flags.extend(run.flags);
    if self_reported_usage && usage != Usage::default() {
        flags.push(super::collect::SELF_REPORTED_FLAG.into());
    }
    if !isolated {
        flags.push("not_isolated".into());
    }
    let mut result = TrialResult {
        outcome: run.outcome.unwrap_or(Outcome::Completed),
        exit_code: run.exit_code,
        score: None,
        passed: false,
        grade_status: None,
        dimensions: BTreeMap::new(),
        flags,
        phases,
        attempts: 1,
        error: run.error,
        isolated,
        grade_report: None,
        usage,
        artifacts: collected.artifacts,
    };
    result.set_grade(grade);
    result
}

/// The result of a trial whose agent refused or cannot be served (fixed, not retried):
/// score 0, counted in the agent's failures, the refusal in `error`.
pub(crate) fn incompatible(error: String, attempts: u32, isolated: bool) -> TrialResult {
    TrialResult {
        outcome: Outcome::AgentIncompatible,
        score: Some(0.0),
        flags: vec!["agent_incompatible".into()],
        ..infra_failure(error, attempts, isolated)
    }
}

/// The `oracle` on a task without a reference solution: not run, not graded, not a failure.
pub(crate) fn no_reference(isolated: bool) -> TrialResult {
    TrialResult {
        outcome: Outcome::NoReference,
        attempts: 0,
        flags: vec!["no_reference".into()],
        error: Some(
            "the task has no reference solution (no solution/ folder): the oracle has nothing to run"
                .into(),
        ),
        ..infra_failure(String::new(), 0, isolated)
    }
}

/// The result of a trial the platform could not run (after its retries).
pub(crate) fn infra_failure(error: String, attempts: u32, isolated: bool) -> TrialResult {
    TrialResult {
        outcome: Outcome::InfraError,
        exit_code: None,
        score: None,
        passed: false,
        grade_status: None,
        dimensions: BTreeMap::new(),
        flags: vec!["infra_error".into()],
        phases: BTreeMap::new(),
        attempts,
        error: Some(error),
        isolated,
        grade_report: None,
        usage: Usage::default(),
        artifacts: vec![],
    }
}

/// Writes the finished trial to the store (one transaction), then announces it: what a
/// watcher (the terminal, a `serve` client) is told is already safe from a crash.
pub async fn record(
    env: &RunEnv,
    planned: &PlannedTrial,
    result: &TrialResult,
) -> Result<(), StoreError> {
    env.store
        .finish_trial(&env.run_id, &planned.id, result)
        .await?;
    env.observer.finished(planned, result);
    Ok(())
}
