//! The task validation gate (`green-agent tasks check`): a task is sound when the `oracle` (its
//! reference solution) scores full marks and `nop` (an agent that does nothing) scores zero. A
//! task failing either side grades something other than what it claims. A task without a
//! reference solution (its oracle trials are `no_reference`) is held to the nop side alone, and
//! the verdict says that no oracle exists.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::store::TrialRow;

/// The gate's verdict on one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskGate {
    pub task_id: String,
    /// The oracle's scores over repeats (`None` = no score: not graded, infrastructure status).
    pub oracle: Vec<Option<f64>>,
    pub nop: Vec<Option<f64>>,
    /// The task has no reference solution: every oracle trial was `no_reference`.
    pub no_reference: bool,
}

impl TaskGate {
    /// Every oracle trial scored 1.0 (or the task has no reference solution), every nop trial
    /// 0.0, and both ran at least once.
    pub fn passes(&self) -> bool {
        !self.oracle.is_empty()
            && !self.nop.is_empty()
            && (self.no_reference || self.oracle.iter().all(|s| *s == Some(1.0)))
            && self.nop.iter().all(|s| *s == Some(0.0))
    }
}

/// Groups a run's trials by task into gate verdicts (tasks in id order).
pub fn evaluate(trials: &[TrialRow]) -> Vec<TaskGate> {
    let mut by_task: BTreeMap<&str, TaskGate> = BTreeMap::new();
    for t in trials {
        let gate = by_task
            .entry(t.planned.task_id.as_str())
            .or_insert_with(|| TaskGate {
                task_id: t.planned.task_id.clone(),
                oracle: Vec::new(),
                nop: Vec::new(),
                no_reference: true,
            });
        let score = t.result.as_ref().and_then(|r| r.score);
        match t.planned.agent.as_str() {
            "oracle" => {
                gate.no_reference &= t
                    .result
                    .as_ref()
                    .is_some_and(|r| r.outcome == crate::model::Outcome::NoReference);
                gate.oracle.push(score);
            }
            "nop" => gate.nop.push(score),
            _ => {}
        }
    }
    by_task.into_values().collect()
}

/// A table of the verdicts, one line per task, for the terminal.
pub fn render(gates: &[TaskGate]) -> String {
    let scores = |s: &[Option<f64>]| {
        s.iter()
            .map(|s| s.map_or_else(|| "none".to_owned(), |v| format!("{v:.3}")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = String::new();
    for g in gates {
        let oracle = if g.no_reference {
            "no reference solution: no oracle to run".to_owned()
        } else {
            format!("oracle {} (want 1.000)", scores(&g.oracle))
        };
        let _ = writeln!(
            out,
            "{}  {}  {oracle}  nop {} (want 0.000)",
            if g.passes() { "pass" } else { "FAIL" },
            g.task_id,
            scores(&g.nop),
        );
    }
    let failed = gates.iter().filter(|g| !g.passes()).count();
    let _ = writeln!(
        out,
        "{} of {} task(s) pass the gate",
        gates.len() - failed,
        gates.len()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Outcome, PlannedTrial, TrialResult};

    #[test]
    fn a_task_without_reference_is_held_to_nop_and_says_so() {
        let mut absent = trial("test-set", "oracle", None);
        if let Some(r) = absent.result.as_mut() {
            r.outcome = Outcome::NoReference;
        }
        let trials = [
            absent.clone(),
            trial("test-set", "nop", Some(0.0)),
            {
                let mut t = absent;
                t.planned.task_id = "lenient".into();
                t
            },
            trial("lenient", "nop", Some(0.25)),
            trial("unjudged", "oracle", None),
            trial("unjudged", "nop", Some(0.0)),
        ];
        let gates = evaluate(&trials);
        let verdicts: Vec<(&str, bool, bool)> = gates
            .iter()
            .map(|g| (g.task_id.as_str(), g.no_reference, g.passes()))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("lenient", true, false),
                ("test-set", true, true),
                ("unjudged", false, false),
            ]
        );
        let table = render(&gates);
        assert!(
            table.contains("pass  test-set  no reference solution: no oracle to run  nop 0.000"),
            "{table}"
        );
        assert!(table.contains("FAIL  unjudged  oracle none"), "{table}");
    }

    fn trial(task: &str, agent: &str, score: Option<f64>) -> TrialRow {
        TrialRow {
            planned: PlannedTrial {
                id: format!("{task}-{agent}"),
                task_id: task.into(),
                task_kind: "generic".into(),
                task_hash: "h".into(),
                agent: agent.into(),
                repeat_index: 0,
            },
            state: "done".into(),
            result: Some(TrialResult {
                outcome: Outcome::Completed,
                exit_code: Some(0),
                score,
                passed: score == Some(1.0),
                grade_status: None,
                dimensions: BTreeMap::new(),
                flags: Vec::new(),
                phases: BTreeMap::new(),
                attempts: 1,
                error: None,
                isolated: true,
                grade_report: None,
                usage: Default::default(),
                artifacts: Vec::new(),
            }),
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn oracle_full_marks_and_nop_zero_pass_anything_else_fails() {
        let trials = [
            trial("good", "oracle", Some(1.0)),
            trial("good", "nop", Some(0.0)),
            trial("lenient", "oracle", Some(1.0)),
            trial("lenient", "nop", Some(0.5)),
            trial("broken", "oracle", Some(0.75)),
            trial("broken", "nop", Some(0.0)),
            trial("unjudged", "oracle", None),
            trial("unjudged", "nop", Some(0.0)),
            trial("half-run", "oracle", Some(1.0)),
        ];
        let gates = evaluate(&trials);
        let verdicts: Vec<(&str, bool)> = gates
            .iter()
            .map(|g| (g.task_id.as_str(), g.passes()))
            .collect();
        assert_eq!(
            verdicts,
            [
                ("broken", false),
                ("good", true),
                ("half-run", false),
                ("lenient", false),
                ("unjudged", false),
            ]
        );
        let table = render(&gates);
        assert!(table.contains("pass  good  oracle 1.000"), "{table}");
        assert!(table.contains("FAIL  unjudged  oracle none"), "{table}");
        assert!(table.ends_with("1 of 5 task(s) pass the gate\n"), "{table}");
    }
}
