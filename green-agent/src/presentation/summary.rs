//! The end-of-run table: per agent and task kind, mean score ± 95% CI over graded trials beside
//! the strict mean over every planned trial, pass@k, per-dimension means, callback rate, tokens
//! and cost, failures by cause.
//!
//! Accounting: a trial without a score (an infrastructure status, a judge failure, a trial that
//! never finished) is left out of `mean` but counted as 0 in `strict_mean`, and `excluded` says
//! how many were left out; pass@k counts every planned trial as a sample, one without a score
//! as a failed sample. An agent that sabotages grading where it cannot solve a task therefore
//! gains nothing on the strict mean or pass@k.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::store::{Outcome, TrialRow};

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    pub agent: String,
    pub task_kind: String,
    /// Trials planned for this group.
    pub trials: usize,
    /// Trials that finished (any outcome).
    pub finished: usize,
    /// Trials with a score (infrastructure failures and invalid judges have none).
    pub scored: usize,
    /// Mean over the graded (scored) trials only.
    pub mean: Option<f64>,
    /// Half-width of the 95% confidence interval of the mean.
    pub ci95: Option<f64>,
    /// Mean over every planned trial, a trial without a score counted as 0.
    pub strict_mean: Option<f64>,
    /// Half-width of the 95% confidence interval of the strict mean.
    pub strict_ci95: Option<f64>,
    /// Planned trials left out of `mean` (no score: infrastructure status, judge failure,
    /// unfinished); `trials - scored`.
    pub excluded: usize,
    /// k = repeats per task.
    pub k: u32,
    /// Mean over tasks of the unbiased pass@k, with every planned trial of a task as a sample
    /// (one without a score counts as not passed).
    pub pass_at_k: Option<f64>,
    /// Fraction of scored trials that passed (every dimension above the task's threshold).
    pub callback_rate: Option<f64>,
    pub dimensions: BTreeMap<String, f64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// Cause → count, for every trial that did not complete cleanly.
    pub failures: BTreeMap<String, usize>,
}

/// Why a finished trial counts as a failure, if it does.
pub fn failure_cause(r: &crate::store::TrialResult) -> Option<String> {
    match r.outcome {
        Outcome::Completed => match r.grade_status.as_deref() {
            // a plain pass or fail is the score speaking; other statuses name a cause
            Some("ok" | "pass" | "fail") | None => None,
            Some(other) => Some(other.to_owned()),
        },
        Outcome::Failed => Some(match r.exit_code {
            Some(c) => format!("failed (exit {c})"),
            None => "failed".into(),
        }),
        Outcome::Crashed => Some(match r.exit_code {
            Some(c) => format!("crashed (exit {c})"),
            None => "crashed".into(),
        }),
        // Nothing to run: the oracle on a task without a reference solution.
        Outcome::NoReference => None,
        other => Some(other.as_str().to_owned()),
    }
}

/// How many finished trials failed for one cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureCount {
    pub cause: String,
    pub count: usize,
}

/// Failures by cause over `rows`, most frequent first (then by cause).
pub fn failures_by_cause(rows: &[TrialRow]) -> Vec<FailureCount> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for cause in rows
        .iter()
        .filter_map(|t| t.result.as_ref().and_then(failure_cause))
    {
        *counts.entry(cause).or_default() += 1;
    }
    let mut out: Vec<FailureCount> = counts
        .into_iter()
        .map(|(cause, count)| FailureCount { cause, count })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.cause.cmp(&b.cause)));
    out
}

/// The `task_kind` of an agent's row over all its task kinds.
pub const ALL_KINDS: &str = "(all kinds)";

/// Builds the table from stored trials: groups sorted by agent, then task kind; an agent with
/// trials of several kinds also gets a row over all of them ([`ALL_KINDS`], after its kinds).
pub fn summarize(trials: &[TrialRow]) -> Vec<SummaryRow> {
    let mut groups: BTreeMap<&str, BTreeMap<&str, Vec<&TrialRow>>> = BTreeMap::new();
    for t in trials {
        groups
            .entry(t.planned.agent.as_str())
            .or_default()
            .entry(t.planned.task_kind.as_str())
            .or_default()
            .push(t);
    }
    let mut out = Vec::new();
    for (agent, kinds) in groups {
        for (kind, rows) in &kinds {
            out.push(group_row(agent, kind, rows));
        }
        if kinds.len() > 1 {
            let all: Vec<&TrialRow> = kinds.values().flatten().copied().collect();
            out.push(group_row(agent, ALL_KINDS, &all));
        }
    }
    out
}

/// One row per agent over all its trials, whatever their kinds, `task_kind` = `kind` (the
/// leaderboard's overall rows); agents sorted by name. The same arithmetic as [`summarize`]
/// over the trials with their kind replaced by `kind`, without copying them.
pub fn summarize_agents(trials: &[TrialRow], kind: &str) -> Vec<SummaryRow> {
    let mut groups: BTreeMap<&str, Vec<&TrialRow>> = BTreeMap::new();
    for t in trials {
        groups.entry(t.planned.agent.as_str()).or_default().push(t);
    }
    groups
        .into_iter()
        .map(|(agent, rows)| group_row(agent, kind, &rows))
        .collect()
}

/// One row of the table over `rows`.
fn group_row(agent: &str, task_kind: &str, rows: &[&TrialRow]) -> SummaryRow {
    let finished: Vec<&crate::store::TrialResult> =
        rows.iter().filter_map(|r| r.result.as_ref()).collect();
    let scores: Vec<f64> = finished.iter().filter_map(|r| r.score).collect();
    let stats = rubrics::stats::mean_ci95(&scores);
    let (mean, ci95) = (
        stats.as_ref().map(|m| m.mean),
        stats.as_ref().and_then(|m| m.half_width),
    );
    let strict_scores: Vec<f64> = rows
        .iter()
        .map(|r| r.result.as_ref().and_then(|res| res.score).unwrap_or(0.0))
        .collect();
    let strict = rubrics::stats::mean_ci95(&strict_scores);
    // pass@k over tasks: each task's planned repeats are its samples; a trial without
    // a score (unfinished, infrastructure, judge failure) is a sample that did not pass
    let mut per_task: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for r in rows {
        let e = per_task.entry(r.planned.task_id.as_str()).or_default();
        e.0 += 1;
        e.1 += u32::from(
            r.result
                .as_ref()
                .is_some_and(|res| res.score.is_some() && res.passed),
        );
    }
    let k = rows
        .iter()
        .map(|r| r.planned.repeat_index + 1)
        .max()
        .unwrap_or(1);
    let pass_at_k = if per_task.is_empty() {
        None
    } else {
        let vals: Vec<f64> = per_task
            .values()
            .map(|&(n, c)| {
                rubrics::stats::pass_at_k(u64::from(n), u64::from(c), u64::from(k.min(n)))
                    .unwrap_or(0.0)
            })
            .collect();
        Some(vals.iter().sum::<f64>() / vals.len() as f64)
    };
    let scored: Vec<&&crate::store::TrialResult> =
        finished.iter().filter(|r| r.score.is_some()).collect();
    let callback_rate = if scored.is_empty() {
        None
    } else {
        Some(scored.iter().filter(|r| r.passed).count() as f64 / scored.len() as f64)
    };
    let mut dim_sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for r in &scored {
        for (d, v) in &r.dimensions {
            let e = dim_sums.entry(d.clone()).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    let mut failures = BTreeMap::new();
    for r in &finished {
        if let Some(cause) = failure_cause(r) {
            *failures.entry(cause).or_insert(0) += 1;
        }
    }
    let unfinished = rows.len() - finished.len();
    if unfinished > 0 {
        failures.insert("unfinished".into(), unfinished);
    }
    SummaryRow {
        agent: agent.to_owned(),
        task_kind: task_kind.to_owned(),
        trials: rows.len(),
        finished: finished.len(),
        scored: scores.len(),
        mean,
        ci95,
        strict_mean: strict.as_ref().map(|m| m.mean),
        strict_ci95: strict.as_ref().and_then(|m| m.half_width),
        excluded: rows.len() - scores.len(),
        k,
        pass_at_k,
        callback_rate,
        dimensions: dim_sums
            .into_iter()
            .map(|(d, (s, n))| (d, s / n as f64))
            .collect(),
        input_tokens: finished.iter().map(|r| r.usage.input_tokens).sum(),
        output_tokens: finished.iter().map(|r| r.usage.output_tokens).sum(),
        cost_usd: finished.iter().map(|r| r.usage.cost_usd).sum::<f64>() + 0.0,
        failures,
    }
}

/// Trial rows for other modules' tests.
#[cfg(test)]
pub(crate) mod tests_support {
    use crate::store::TrialRow;

    /// A finished trial of `agent` on `task` (kind `generic`, repeat 0); `score` None = not
    /// graded (`grader_error`).
    pub fn trial(agent: &str, task: &str, score: Option<f64>) -> TrialRow {
        let status = match score {
            Some(s) if s >= 1.0 => "pass",
            Some(_) => "fail",
            None => "grader_error",
        };
        super::tests::trial(agent, task, 0, score, status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{PlannedTrial, TrialResult, Usage};

    /// A finished trial of `agent` on `task` (kind `generic`); `score` None = not graded.
    pub(super) fn trial(
        agent: &str,
        task: &str,
        repeat: u32,
        score: Option<f64>,
        status: &str,
    ) -> TrialRow {
        TrialRow {
            planned: PlannedTrial {
                id: format!("{agent}-{task}-{repeat}"),
                task_id: task.into(),
                task_kind: "generic".into(),
                task_hash: format!("h-{task}"),
                agent: agent.into(),
                repeat_index: repeat,
            },
            state: "done".into(),
            result: Some(TrialResult {
                outcome: Outcome::Completed,
                exit_code: Some(0),
                score,
                passed: score == Some(1.0),
                grade_status: Some(status.into()),
                dimensions: BTreeMap::new(),
                flags: vec![],
                phases: BTreeMap::new(),
                attempts: 1,
                error: None,
                isolated: true,
                grade_report: None,
                usage: Usage::default(),
                artifacts: vec![],
            }),
            started_at: None,
            finished_at: None,
        }
    }

    fn unfinished(agent: &str, task: &str, repeat: u32) -> TrialRow {
        let mut t = trial(agent, task, repeat, None, "");
        t.state = "pending".into();
        t.result = None;
        t
    }

    #[test]
    fn sabotaged_grading_halves_the_strict_mean_not_the_graded_one() {
        // solves two tasks, makes grading of two others fail with infrastructure statuses
        let rows = vec![
            trial("saboteur", "a", 0, Some(1.0), "pass"),
            trial("saboteur", "b", 0, Some(1.0), "pass"),
            trial("saboteur", "c", 0, None, "grader_error"),
            trial("saboteur", "d", 0, None, "env_broken"),
        ];
        let s = summarize(&rows);
        assert_eq!(s.len(), 1);
        let r = &s[0];
        assert_eq!((r.trials, r.finished, r.scored, r.excluded), (4, 4, 2, 2));
        assert_eq!(r.mean, Some(1.0));
        assert_eq!(r.strict_mean, Some(0.5));
        let ci = r.strict_ci95.expect("n = 4");
        assert!(
            (ci - 3.182 * (1.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-9,
            "{ci}"
        );
        // pass@1 over four tasks, two of which have no graded sample
        assert_eq!(r.pass_at_k, Some(0.5));
        assert_eq!(r.failures.get("grader_error"), Some(&1));
        assert_eq!(r.failures.get("env_broken"), Some(&1));
    }

    #[test]
    fn pass_at_k_counts_ungraded_and_unfinished_repeats_as_failed_samples() {
        let rows = vec![
            // task a: 1 of 3 repeats passed, 2 not graded → pass@3 = 1
            trial("x", "a", 0, Some(1.0), "pass"),
            trial("x", "a", 1, None, "grader_error"),
            trial("x", "a", 2, None, "judge_invalid"),
            // task b: nothing graded → pass@3 = 0 (it used to vanish from the mean over tasks)
            trial("x", "b", 0, None, "grader_error"),
            unfinished("x", "b", 1),
            trial("x", "b", 2, None, "grader_error"),
        ];
        let r = &summarize(&rows)[0];
        assert_eq!(r.k, 3);
        assert_eq!(r.pass_at_k, Some(0.5));
        assert_eq!(r.mean, Some(1.0));
        assert_eq!(r.excluded, 5);
        assert!((r.strict_mean.expect("strict") - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(r.failures.get("unfinished"), Some(&1));
    }

    #[test]
    fn with_every_trial_graded_both_means_agree() {
        let rows = vec![
            trial("y", "a", 0, Some(1.0), "pass"),
            trial("y", "b", 0, Some(0.25), "fail"),
        ];
        let r = &summarize(&rows)[0];
        assert_eq!(r.excluded, 0);
        assert_eq!(r.mean, r.strict_mean);
        assert_eq!(r.ci95, r.strict_ci95);
    }

    #[test]
    fn per_agent_rows_equal_the_summary_over_one_kind() {
        let mut rows = vec![
            trial("x", "a", 0, Some(1.0), "pass"),
            trial("x", "b", 0, Some(0.25), "fail"),
            trial("y", "a", 0, None, "grader_error"),
            unfinished("y", "b", 0),
        ];
        rows[1].planned.task_kind = "other".into();
        let agents = summarize_agents(&rows, "*");
        for r in &mut rows {
            r.planned.task_kind = "*".into();
        }
        assert_eq!(agents, summarize(&rows));
        assert_eq!(agents.len(), 2);
    }

    #[test]
    fn a_group_with_nothing_finished_has_a_strict_mean_of_zero() {
        let r = &summarize(&[unfinished("z", "a", 0)])[0];
        assert_eq!(r.mean, None);
        assert_eq!(r.strict_mean, Some(0.0));
        assert_eq!(r.pass_at_k, Some(0.0));
        assert_eq!(r.excluded, 1);
    }
}
