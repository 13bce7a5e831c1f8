//! `green-agent resume RUN --regrade`: every trial of a finished run graded again, with its
//! task's current graders, from the outputs its agent left (checkpointed in the store's
//! `attempts` before the first grading), in a fresh grading container; no agent runs.
//!
//! [`start`] picks the trials and, in one transaction ([`Store::begin_regrade`]), keeps each
//! one's previous result (a `trial_regrade` event), records an open attempt of kind `regrade`
//! holding the outputs and makes the trial `pending`. The run is then resumed as after a crash:
//! `trial::reattach` grades such an attempt's outputs (the path that grades what a dead
//! process collected) and the trial is recorded again. A process killed meanwhile leaves
//! those attempts open: the next `resume` (with `--regrade` or not) grades what is left.
//! [`changes`] pairs the results before and after for the terminal.

use std::collections::{BTreeMap, HashMap};

use crate::model::PlannedTrial;
use crate::presentation::regrade::{Change, Grade, Skipped};
use crate::store::{AttemptKind, AttemptRow, RegradeStart, Store, StoreError, TrialRow};
use crate::trial::TrialInput;

/// Why a regrade cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RegradeError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "run {run} has {unfinished} unfinished trial(s): `green-agent resume {run}` finishes them first, then `--regrade` grades every trial again"
    )]
    Unfinished { run: String, unfinished: usize },
}

/// The trials a regrade grades (stored identity, current task) and those it cannot.
#[derive(Debug)]
pub struct Selection {
    /// The trials to grade, as the run executes them: each its stored identity (so its rows
    /// and outputs are found) with the current task of the same id (its current graders).
    pub inputs: Vec<TrialInput>,
    /// Trials not graded again, with why.
    pub skipped: Vec<Skipped>,
    /// Trials an earlier regrade left unfinished (a killed process), taken up again.
    pub continued: usize,
}

fn is_regrade(a: &AttemptRow) -> bool {
    a.kind == AttemptKind::Regrade.as_str()
}

/// How many of the run's `trials` a regrade left unfinished (its process was killed): a
/// resume finishes them as a regrade.
pub async fn unfinished(
    store: &Store,
    run_id: &str,
    trials: &[TrialRow],
) -> Result<usize, StoreError> {
    let mut n = 0;
    for t in trials {
        if t.state != "done"
            && store
                .attempts(run_id, &t.planned.id)
                .await?
                .last()
                .is_some_and(is_regrade)
        {
            n += 1;
        }
    }
    Ok(n)
}

/// Picks the run's trials to grade again and records the regrade's start (see the module
/// docs). `current`: the run's trials as planned now (their tasks loaded from the task
/// folders as they are now). When an earlier regrade was killed, only what it left is taken
/// up (no new regrade starts). A trial is skipped, with why, when its outputs were never
/// collected, cannot be read back, or its task is no longer in the task folders.
pub async fn start(
    store: &Store,
    run_id: &str,
    current: Vec<TrialInput>,
) -> Result<Selection, RegradeError> {
    let trials = store.trials(run_id).await?;
    let mut history: HashMap<String, Vec<AttemptRow>> = HashMap::new();
    for t in &trials {
        history.insert(
            t.planned.id.clone(),
            store.attempts(run_id, &t.planned.id).await?,
        );
    }
    let attempts_of = |t: &TrialRow| history.get(&t.planned.id).map_or(&[][..], Vec::as_slice);
    let left: Vec<&TrialRow> = trials
        .iter()
        .filter(|t| t.state != "done" && attempts_of(t).last().is_some_and(is_regrade))
        .collect();
    let unfinished = trials.iter().filter(|t| t.state != "done").count() - left.len();
    if unfinished > 0 {
        return Err(RegradeError::Unfinished {
            run: run_id.to_owned(),
            unfinished,
        });
    }
    let by_key: BTreeMap<(String, String, u32), TrialInput> = current
        .into_iter()
        .map(|i| {
            let key = (
                i.planned.task_id.clone(),
                i.planned.agent.clone(),
                i.planned.repeat_index,
            );
            (key, i)
        })
        .collect();
    let input_of = |t: &PlannedTrial| {
        by_key
            .get(&(t.task_id.clone(), t.agent.clone(), t.repeat_index))
            .map(|i| TrialInput {
                planned: t.clone(),
                ..i.clone()
            })
    };
    let mut selection = Selection {
        inputs: Vec::new(),
        skipped: Vec::new(),
        continued: left.len(),
    };
    let mut starts = Vec::new();
    if !left.is_empty() {
        // A killed regrade: its open attempts are graded by the resume; one closed without
        // its trial recorded (killed in between) is started again from the same outputs.
        for t in left {
            let last = attempts_of(t).last();
            let Some(input) = input_of(&t.planned) else {
                selection.skipped.push(gone(&t.planned));
                continue;
            };
            if let Some(a) = last.filter(|a| a.ended.is_some())
                && let Some(collected) = &a.collected
            {
                starts.push(RegradeStart {
                    trial_id: t.planned.id.clone(),
                    from_attempt: a.attempt,
                    collected: collected.clone(),
                    previous: None,
                });
            }
            selection.inputs.push(input);
        }
    } else {
        for t in &trials {
            let source = attempts_of(t)
                .iter()
                .rev()
                .find_map(|a| a.collected.as_ref().map(|c| (a.attempt, c)));
            let Some((from_attempt, collected)) = source else {
                selection.skipped.push(Skipped {
                    trial: t.planned.clone(),
                    why: never_collected(t),
                });
                continue;
            };
            if let Some(why) = crate::trial::ungradable(store, collected) {
                selection.skipped.push(Skipped {
                    trial: t.planned.clone(),
                    why,
                });
                continue;
            }
            let Some(input) = input_of(&t.planned) else {
                selection.skipped.push(gone(&t.planned));
                continue;
            };
            starts.push(RegradeStart {
                trial_id: t.planned.id.clone(),
                from_attempt,
                collected: collected.clone(),
                previous: t.result.as_ref().and_then(|r| serde_json::to_value(r).ok()),
            });
            selection.inputs.push(input);
        }
    }
    store.begin_regrade(run_id, &starts).await?;
    Ok(selection)
}

fn gone(t: &PlannedTrial) -> Skipped {
    Skipped {
        trial: t.clone(),
        why: format!(
            "its task {} (agent {}) is no longer in the run's task folders",
            t.task_id, t.agent
        ),
    }
}

/// Why a trial has no outputs to grade, in words.
fn never_collected(t: &TrialRow) -> String {
    match &t.result {
        Some(r) => {
            let mut why = format!(
                "its outputs were never collected (outcome {})",
                r.outcome.as_str()
            );
            if let Some(e) = r.error.as_deref().filter(|e| !e.is_empty()) {
                why.push_str(": ");
                why.push_str(e);
            }
            why
        }
        None => "its outputs were never collected (it has no result)".into(),
    }
}

/// Each regraded trial's result before (the latest `trial_regrade` event that kept one) and
/// now.
pub async fn changes(
    store: &Store,
    run_id: &str,
    regraded: &[PlannedTrial],
) -> Result<Vec<Change>, StoreError> {
    let mut before: HashMap<String, Option<Grade>> = HashMap::new();
    for e in store.events(run_id, None).await? {
        if e.kind != "trial_regrade" {
            continue;
        }
        let (Some(trial), Some(previous)) = (e.trial_id, e.data.get("previous")) else {
            continue;
        };
        if previous.is_null() {
            continue;
        }
        let grade = serde_json::from_value::<crate::model::TrialResult>(previous.clone())
            .ok()
            .map(|r| Grade::from(&r));
        before.insert(trial, grade);
    }
    let now: HashMap<String, TrialRow> = store
        .trials(run_id)
        .await?
        .into_iter()
        .map(|t| (t.planned.id.clone(), t))
        .collect();
    Ok(regraded
        .iter()
        .map(|p| Change {
            trial: p.clone(),
            before: before.get(&p.id).cloned().flatten(),
            after: now
                .get(&p.id)
                .filter(|t| t.state == "done")
                .and_then(|t| t.result.as_ref())
                .map(Grade::from),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::Arc;

    use super::*;
    use crate::agents::AgentSpec;
    use crate::model::{Outcome, TrialResult, Usage};
    use crate::store::AgentPlace;

    fn planned(id: &str, task_id: &str) -> PlannedTrial {
        PlannedTrial {
            id: id.into(),
            task_id: task_id.into(),
            task_kind: "generic".into(),
            task_hash: "old-hash".into(),
            agent: "nop".into(),
            repeat_index: 0,
        }
    }

    fn result(outcome: Outcome, score: Option<f64>, error: Option<&str>) -> TrialResult {
        TrialResult {
            outcome,
            exit_code: None,
            score,
            passed: score == Some(1.0),
            grade_status: score.map(|_| "ok".to_owned()),
            dimensions: BTreeMap::new(),
            flags: vec![],
            phases: BTreeMap::new(),
            attempts: 1,
            error: error.map(str::to_owned),
            isolated: true,
            grade_report: None,
            usage: Usage::default(),
            artifacts: vec![],
        }
    }

    /// What collection stores (`trial::reattach`'s checkpoint) for one staged file.
    fn collected(staged: &str, sha: &str) -> serde_json::Value {
        serde_json::json!({
            "outcome": "completed", "exit_code": 0, "run_flags": [], "error": null,
            "collected_flags": [], "artifacts": [],
            "usage": {"input_tokens": 0, "output_tokens": 0, "requests": 0, "cost_usd": 0.0},
            "self_reported_usage": false, "isolated": true, "phases": {},
            "staged": { staged: sha },
        })
    }

    /// The run's trials as planned now: the bundled `generic-csv-stats` × nop (another hash
    /// than the stored trials': the task "changed").
    fn current() -> Vec<TrialInput> {
        let suite =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tasks/examples/generic-csv-stats");
        let tasks: Vec<Arc<tasks::Task>> = tasks::load_suite(&[suite])
            .expect("the bundled task loads")
            .into_iter()
            .map(Arc::new)
            .collect();
        crate::run::plan_trials(&tasks, &[AgentSpec::Nop], 1)
            .into_iter()
            .map(|(planned, task, agent)| TrialInput {
                planned,
                task,
                agent,
                image: "python".into(),
            })
            .collect()
    }

    #[tokio::test]
    async fn a_regrade_starts_in_one_step_keeps_the_old_grade_and_skips_what_it_cannot_grade() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("store");
        let graded = planned("graded", "generic-csv-stats");
        let never = planned("never-collected", "generic-csv-stats");
        let lost = planned("blob-lost", "generic-csv-stats");
        let gone = planned("task-gone", "no-longer-here");
        // `never` and `lost` differ from `graded` only by id: repeats 1 and 2
        let never = PlannedTrial {
            repeat_index: 1,
            ..never
        };
        let lost = PlannedTrial {
            repeat_index: 2,
            ..lost
        };
        let all = [graded.clone(), never.clone(), lost.clone(), gone.clone()];
        store
            .create_run("r", &serde_json::json!({}), &all)
            .await
            .expect("run");
        let sha = store.put_blob(b"42\n").expect("blob");
        for (t, value) in [
            (&graded, Some(collected("out.txt", &sha))),
            (&never, None),
            (&lost, Some(collected("out.txt", &"0".repeat(64)))),
            (&gone, Some(collected("out.txt", &sha))),
        ] {
            let n = store
                .begin_attempt("r", &t.id, AttemptKind::Fresh, &AgentPlace::default())
                .await
                .expect("attempt");
            if let Some(v) = &value {
                store
                    .attempt_collected("r", &t.id, n, v)
                    .await
                    .expect("collected");
            }
            store
                .end_attempt("r", &t.id, n, "finished", None)
                .await
                .expect("end");
            let r = match value {
                Some(_) => result(Outcome::Completed, Some(0.5), None),
                None => result(Outcome::InfraError, None, Some("the engine refused")),
            };
            store.finish_trial("r", &t.id, &r).await.expect("finish");
        }
        // the current plan has the three repeats of csv-stats × nop
        let mut now = current();
        let one = now[0].clone();
        for r in [1, 2] {
            let mut i = one.clone();
            i.planned.repeat_index = r;
            now.push(i);
        }

        let selection = start(&store, "r", now.clone()).await.expect("start");
        assert_eq!(selection.continued, 0);
        let ids: Vec<&str> = selection
            .inputs
            .iter()
            .map(|i| i.planned.id.as_str())
            .collect();
        assert_eq!(ids, ["graded"], "graded under its stored identity");
        assert_eq!(selection.inputs[0].task.id(), "generic-csv-stats");
        let why: BTreeMap<&str, &str> = selection
            .skipped
            .iter()
            .map(|s| (s.trial.id.as_str(), s.why.as_str()))
            .collect();
        assert_eq!(
            why["never-collected"],
            "its outputs were never collected (outcome infra_error): the engine refused"
        );
        assert!(
            why["blob-lost"].contains("missing from the run's blobs"),
            "{why:?}"
        );
        assert!(
            why["task-gone"].contains("no longer in the run's task folders"),
            "{why:?}"
        );

        // the trial waits for its grade, its outputs in an open regrade attempt, the old
        // result kept
        let rows = store.trials("r").await.expect("trials");
        let state: BTreeMap<&str, &str> = rows
            .iter()
            .map(|t| (t.planned.id.as_str(), t.state.as_str()))
            .collect();
        assert_eq!(state["graded"], "pending");
        assert_eq!(state["never-collected"], "done");
        let attempts = store.attempts("r", "graded").await.expect("attempts");
        assert_eq!(attempts.len(), 2);
        assert_eq!(attempts[1].kind, "regrade");
        assert_eq!(attempts[1].ended, None);
        assert_eq!(attempts[1].collected, Some(collected("out.txt", &sha)));
        let open = store.open_attempts("r").await.expect("open");
        assert_eq!(open.len(), 1, "what a resume grades: {open:?}");
        let kept: Vec<_> = store
            .events("r", Some("graded"))
            .await
            .expect("events")
            .into_iter()
            .filter(|e| e.kind == "trial_regrade")
            .collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].data["previous"]["score"], 0.5);
        assert_eq!(kept[0].data["from_attempt"], 1);
        let rows = store.trials("r").await.expect("trials");
        assert_eq!(unfinished(&store, "r", &rows).await.expect("unfinished"), 1);

        // killed now, started again: what was left is taken up, nothing new starts
        let again = start(&store, "r", now).await.expect("again");
        assert_eq!(again.continued, 1);
        assert_eq!(again.inputs.len(), 1);
        assert_eq!(
            store.attempts("r", "graded").await.expect("attempts").len(),
            2,
            "the open attempt is kept, not doubled"
        );
        let changes = changes(&store, "r", std::slice::from_ref(&graded))
            .await
            .expect("changes");
        assert_eq!(changes[0].before.as_ref().and_then(|g| g.score), Some(0.5));
        assert_eq!(changes[0].after, None, "not graded yet");
    }

    #[tokio::test]
    async fn a_run_with_unfinished_trials_is_not_regraded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("store");
        store
            .create_run(
                "r",
                &serde_json::json!({}),
                &[planned("a", "generic-csv-stats")],
            )
            .await
            .expect("run");
        let err = start(&store, "r", current()).await.expect_err("refused");
        assert_eq!(
            err.to_string(),
            "run r has 1 unfinished trial(s): `green-agent resume r` finishes them first, then `--regrade` grades every trial again"
        );
        let rows = store.trials("r").await.expect("trials");
        assert_eq!(unfinished(&store, "r", &rows).await.expect("unfinished"), 0);
    }
}
