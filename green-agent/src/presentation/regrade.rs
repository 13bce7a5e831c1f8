//! What `resume --regrade` prints: per trial whose grade changed, its old and new grade; the
//! trials that could not be graded again, with why; one summary line.

use std::fmt::Write as _;

use super::values::{MISSING, fixed};
use crate::model::{Outcome, PlannedTrial, TrialResult};

/// A trial's grade before and after a regrade (`None`: no result).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub trial: PlannedTrial,
    pub before: Option<Grade>,
    pub after: Option<Grade>,
}

/// The parts of a result a regrade can change.
#[derive(Debug, Clone, PartialEq)]
pub struct Grade {
    pub outcome: Outcome,
    pub score: Option<f64>,
    pub status: Option<String>,
}

impl From<&TrialResult> for Grade {
    fn from(r: &TrialResult) -> Self {
        Self {
            outcome: r.outcome,
            score: r.score,
            status: r.grade_status.clone(),
        }
    }
}

impl Change {
    /// Whether the grade changed (outcome, score at the shown precision, or status).
    pub fn changed(&self) -> bool {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => {
                b.outcome != a.outcome
                    || fixed(b.score, 4) != fixed(a.score, 4)
                    || b.status != a.status
            }
            (None, None) => false,
            _ => true,
        }
    }
}

/// A trial that was not graded again, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub trial: PlannedTrial,
    pub why: String,
}

fn label(t: &PlannedTrial) -> String {
    format!("{} × {} #{}", t.task_id, t.agent, t.repeat_index)
}

fn grade(g: Option<&Grade>) -> String {
    match g {
        None => MISSING.to_owned(),
        Some(g) => {
            let mut s = fixed(g.score, 2);
            if g.outcome != Outcome::Completed {
                let _ = write!(s, " ({})", g.outcome.as_str());
            }
            if let Some(status) = g.status.as_deref() {
                let _ = write!(s, " [{status}]");
            }
            s
        }
    }
}

/// The regrade's report: a line per changed trial (`old → new`), a line per trial not graded
/// again, then the summary.
pub fn render(changes: &[Change], skipped: &[Skipped]) -> String {
    let mut out = String::new();
    let changed: Vec<&Change> = changes.iter().filter(|c| c.changed()).collect();
    for c in &changed {
        let _ = writeln!(
            out,
            "  {}: {} → {}",
            label(&c.trial),
            grade(c.before.as_ref()),
            grade(c.after.as_ref())
        );
    }
    for s in skipped {
        let _ = writeln!(out, "  {}: not graded again: {}", label(&s.trial), s.why);
    }
    let score = |g: &Option<Grade>| g.as_ref().and_then(|g| g.score);
    let up = changed
        .iter()
        .filter(|c| score(&c.after).unwrap_or(0.0) > score(&c.before).unwrap_or(0.0))
        .count();
    let down = changed
        .iter()
        .filter(|c| score(&c.after).unwrap_or(0.0) < score(&c.before).unwrap_or(0.0))
        .count();
    let _ = write!(
        out,
        "regraded {} trial(s) from their stored outputs (no agent ran): {} changed ({up} up, {down} down), {} unchanged",
        changes.len(),
        changed.len(),
        changes.len() - changed.len(),
    );
    if !skipped.is_empty() {
        let _ = write!(out, "; {} not graded again", skipped.len());
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(task: &str, agent: &str) -> PlannedTrial {
        PlannedTrial {
            id: format!("{task}-{agent}"),
            task_id: task.into(),
            task_kind: "generic".into(),
            task_hash: "h".into(),
            agent: agent.into(),
            repeat_index: 0,
        }
    }

    fn g(outcome: Outcome, score: Option<f64>, status: &str) -> Option<Grade> {
        Some(Grade {
            outcome,
            score,
            status: Some(status.into()),
        })
    }

    #[test]
    fn a_regrade_report_names_what_changed_and_sums_up() {
        let changes = vec![
            Change {
                trial: trial("csv-stats", "oracle"),
                before: g(Outcome::Completed, Some(1.0), "pass"),
                after: g(Outcome::Completed, Some(1.0), "pass"),
            },
            Change {
                trial: trial("csv-stats", "cmd:echo 1 > out.txt"),
                before: g(Outcome::Completed, Some(0.0), "fail"),
                after: g(Outcome::Completed, Some(1.0), "pass"),
            },
            Change {
                trial: trial("primes", "nop"),
                before: g(Outcome::InfraError, None, "env_broken"),
                after: g(Outcome::Completed, Some(0.25), "fail"),
            },
            Change {
                trial: trial("primes", "oracle"),
                before: g(Outcome::Completed, Some(1.0), "pass"),
                after: g(Outcome::Completed, Some(0.5), "fail"),
            },
        ];
        let skipped = vec![Skipped {
            trial: trial("fft", "nop"),
            why: "its outputs were never collected (outcome infra_error)".into(),
        }];
        let text = render(&changes, &skipped);
        assert!(!changes[0].changed() && changes[1].changed());
        assert!(
            crate::presentation::values::debug_leaks(&text).is_empty(),
            "{text}"
        );
        insta::assert_snapshot!(text);
    }
}
