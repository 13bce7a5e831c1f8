//! SciCode's two numbers for a run, as upstream reports them: steps passed out of all tested
//! steps, and main problems solved (a problem counts when every one of its steps passes).
//!
//! Both protocols are tallied the same way. A whole-problem task grades every step of its
//! problem in one trial with one grader; a step-by-step task too, its steps delivered in turns
//! and graded by one grader per step (each on its turn's code). Each task says which problem it
//! belongs to, the problem's tested steps and the steps it grades (from its metadata); a trial
//! reports its steps in its `scicode_steps` graders' data (`steps[].status`, the graders'
//! lists together). A step counts
//! once per (agent, repeat): passed when a trial that grades it reports `pass`. A planned trial
//! without a grade (an error, no reference solution) passes nothing: its steps stay in the
//! totals, never leave them.

use std::collections::{BTreeMap, BTreeSet};

/// What a task grades, from its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSteps {
    pub problem_id: String,
    /// Every tested step of the problem.
    pub problem_steps: Vec<String>,
    /// The steps this task grades (all of them; one in step-by-step tasks imported one per
    /// step, as before the protocol delivered them in turns).
    pub graded: Vec<String>,
}

/// One planned trial.
#[derive(Debug, Clone, Copy)]
pub struct TrialSteps<'a> {
    pub task_id: &'a str,
    pub agent: &'a str,
    pub repeat: u32,
    /// The `scicode_steps` graders' data (`{"steps": [...]}`, every grader's steps together),
    /// when the trial was graded.
    pub data: Option<&'a serde_json::Value>,
}

/// An agent's SciCode score over a run. With repeats, every (problem, repeat) is a sample.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScicodeScore {
    pub agent: String,
    pub steps_passed: usize,
    pub steps_total: usize,
    pub problems_solved: usize,
    pub problems_total: usize,
}

impl std::fmt::Display for ScicodeScore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: steps {}/{}, main problems {}/{}",
            self.agent,
            self.steps_passed,
            self.steps_total,
            self.problems_solved,
            self.problems_total
        )
    }
}

/// The steps a grader's data reports as passed.
fn passed_steps(data: &serde_json::Value) -> impl Iterator<Item = &str> {
    data["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["status"] == "pass")
        .filter_map(|s| s["step_id"].as_str())
}

/// Per agent (sorted), over the trials of tasks in `tasks` (others are not SciCode's and are
/// left out).
pub fn score(tasks: &BTreeMap<String, TaskSteps>, trials: &[TrialSteps<'_>]) -> Vec<ScicodeScore> {
    // (agent, repeat, problem) -> (its steps, the steps passed)
    type Key = (String, u32, String);
    let mut problems: BTreeMap<Key, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for trial in trials {
        let Some(task) = tasks.get(trial.task_id) else {
            continue;
        };
        let key = (
            trial.agent.to_owned(),
            trial.repeat,
            task.problem_id.clone(),
        );
        let (steps, passed) = problems.entry(key).or_default();
        steps.extend(task.problem_steps.iter().cloned());
        if let Some(data) = trial.data {
            passed.extend(
                passed_steps(data)
                    .filter(|s| task.graded.iter().any(|g| g == s))
                    .map(str::to_owned),
            );
        }
    }
    let mut out: BTreeMap<String, ScicodeScore> = BTreeMap::new();
    for ((agent, _, _), (steps, passed)) in problems {
        let score = out.entry(agent.clone()).or_insert_with(|| ScicodeScore {
            agent,
            steps_passed: 0,
            steps_total: 0,
            problems_solved: 0,
            problems_total: 0,
        });
        let passed = passed.intersection(&steps).count();
        score.steps_passed += passed;
        score.steps_total += steps.len();
        score.problems_total += 1;
        if passed == steps.len() {
            score.problems_solved += 1;
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(problem: &str, steps: &[&str], graded: &[&str]) -> TaskSteps {
        TaskSteps {
            problem_id: problem.into(),
            problem_steps: steps.iter().map(|s| (*s).to_owned()).collect(),
            graded: graded.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn data(steps: &[(&str, &str)]) -> serde_json::Value {
        json!({"steps": steps.iter().map(|(id, st)| json!({"step_id": id, "status": st})).collect::<Vec<_>>()})
    }

    #[test]
    fn whole_problem_trials_count_a_problem_only_when_every_step_passes() {
        let tasks: BTreeMap<String, TaskSteps> = [
            (
                "scicode-1".to_owned(),
                task("1", &["1.1", "1.2"], &["1.1", "1.2"]),
            ),
            ("scicode-2".to_owned(), task("2", &["2.1"], &["2.1"])),
        ]
        .into_iter()
        .collect();
        let d1 = data(&[("1.1", "pass"), ("1.2", "fail")]);
        let d2 = data(&[("2.1", "pass")]);
        let trials = [
            TrialSteps {
                task_id: "scicode-1",
                agent: "a",
                repeat: 0,
                data: Some(&d1),
            },
            TrialSteps {
                task_id: "scicode-2",
                agent: "a",
                repeat: 0,
                data: Some(&d2),
            },
            TrialSteps {
                task_id: "other",
                agent: "a",
                repeat: 0,
                data: None,
            },
        ];
        let s = score(&tasks, &trials);
        assert_eq!(s.len(), 1);
        assert_eq!(
            (
                s[0].steps_passed,
                s[0].steps_total,
                s[0].problems_solved,
                s[0].problems_total
            ),
            (2, 3, 1, 2)
        );
        assert_eq!(s[0].to_string(), "a: steps 2/3, main problems 1/2");
    }

    #[test]
    fn step_tasks_combine_per_problem_and_an_ungraded_step_is_a_miss() {
        let steps = ["7.1", "7.2", "7.3"];
        let tasks: BTreeMap<String, TaskSteps> = steps
            .iter()
            .map(|s| (format!("scicode-{s}"), task("7", &steps, &[s])))
            .collect();
        let pass = |id: &str| data(&[(id, "pass")]);
        let (p1, p2, p3) = (pass("7.1"), pass("7.2"), pass("7.3"));
        // A trial that reports a step it does not grade gains nothing by it.
        let forged = data(&[("7.1", "pass"), ("7.2", "pass"), ("7.3", "pass")]);
        let trials = [
            TrialSteps {
                task_id: "scicode-7.1",
                agent: "gold",
                repeat: 0,
                data: Some(&p1),
            },
            TrialSteps {
                task_id: "scicode-7.2",
                agent: "gold",
                repeat: 0,
                data: Some(&p2),
            },
            TrialSteps {
                task_id: "scicode-7.3",
                agent: "gold",
                repeat: 0,
                data: Some(&p3),
            },
            TrialSteps {
                task_id: "scicode-7.1",
                agent: "half",
                repeat: 0,
                data: Some(&forged),
            },
            TrialSteps {
                task_id: "scicode-7.2",
                agent: "half",
                repeat: 0,
                data: None,
            },
            TrialSteps {
                task_id: "scicode-7.3",
                agent: "half",
                repeat: 0,
                data: Some(&p3),
            },
        ];
        let s = score(&tasks, &trials);
        assert_eq!(s[0].to_string(), "gold: steps 3/3, main problems 1/1");
        assert_eq!(s[1].to_string(), "half: steps 2/3, main problems 0/1");
    }

    #[test]
    fn repeats_are_separate_samples() {
        let tasks: BTreeMap<String, TaskSteps> =
            [("scicode-3".to_owned(), task("3", &["3.1"], &["3.1"]))]
                .into_iter()
                .collect();
        let ok = data(&[("3.1", "pass")]);
        let bad = data(&[("3.1", "fail")]);
        let trials = [
            TrialSteps {
                task_id: "scicode-3",
                agent: "a",
                repeat: 0,
                data: Some(&ok),
            },
            TrialSteps {
                task_id: "scicode-3",
                agent: "a",
                repeat: 1,
                data: Some(&bad),
            },
        ];
        assert_eq!(
            score(&tasks, &trials)[0].to_string(),
            "a: steps 1/2, main problems 1/2"
        );
    }
}
