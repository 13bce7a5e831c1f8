//! SciCode's scored example: the dev problems (`../shared/benchmarks/scicode/problems_dev.jsonl`)
//! imported in both protocols, `whole-problem` (one agent run writes every step) and
//! `step-by-step` (upstream's main setting: the steps one per turn, each prompt showing the
//! agent's own code for the steps before it, each step graded on its turn's code), then graded with the `oracle` agent (it submits the gold code) and
//! `nop`. Scored as upstream reports SciCode (`rubrics::scicode_score`): steps passed of all
//! tested steps, main problems solved (every step passed). Gold scores every step and every
//! problem in both protocols, nop none.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e_tests::{leftovers, report_json, run_green};
use rubrics::scicode_score::{ScicodeScore, TaskSteps, TrialSteps, score};

const PROBLEMS: usize = 10;
const STEPS: usize = 27;

async fn import_and_score(protocol: &str) -> Vec<ScicodeScore> {
    let src = bench_data::path("scicode/problems_dev.jsonl");
    let dest = tempfile::tempdir().expect("tempdir");
    let t0 = Instant::now();
    let out = run_green(
        &[
            "tasks",
            "import",
            "scicode",
            &src.display().to_string(),
            &dest.path().display().to_string(),
            "--protocol",
            protocol,
        ],
        &BTreeMap::new(),
        Duration::from_secs(1500),
    )
    .await;
    out.assert_success();
    // Either protocol: one task per main problem.
    let tasks_expected = PROBLEMS;
    assert!(
        out.stdout.contains(&format!(
            "{tasks_expected} task(s) imported and validated, 0 problem(s) failed"
        )),
        "{}",
        out.stdout
    );
    println!(
        "{protocol}: imported {tasks_expected} tasks in {:?}",
        t0.elapsed()
    );

    let mut tasks: BTreeMap<String, TaskSteps> = BTreeMap::new();
    let dirs: Vec<PathBuf> = std::fs::read_dir(dest.path())
        .expect("tasks")
        .map(|e| e.expect("entry").path())
        .collect();
    for dir in &dirs {
        let task = tasks::load_task(dir).expect("an imported task validates");
        let steps = tasks::import::scicode::task_steps(&task).expect("SciCode metadata");
        tasks.insert(task.id().to_owned(), steps);
    }
    assert_eq!(tasks.len(), tasks_expected);

    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-scicode-{protocol}-{}", std::process::id());
    let t0 = Instant::now();
    let out = run_green(
        &[
            "tasks",
            "check",
            &dest.path().display().to_string(),
            "--concurrency",
            "3",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(2400),
    )
    .await;
    out.assert_success();
    assert!(
        out.stdout.contains(&format!(
            "{tasks_expected} of {tasks_expected} task(s) pass the gate"
        )),
        "{}",
        out.stdout
    );
    println!("{protocol}: oracle and nop graded in {:?}", t0.elapsed());
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), tasks_expected * 2);
    // Whole-problem: one grader for every step; step-by-step: a grader per step (its turn's
    // code). Their steps together.
    let data: Vec<Option<serde_json::Value>> = trials
        .iter()
        .map(|t| {
            let graders = t["grade"]["graders"].as_array()?;
            let steps: Vec<serde_json::Value> = graders
                .iter()
                .flat_map(|g| g["data"]["steps"].as_array().cloned().unwrap_or_default())
                .collect();
            Some(serde_json::json!({ "steps": steps }))
        })
        .collect();
    let rows: Vec<TrialSteps<'_>> = trials
        .iter()
        .zip(&data)
        .map(|(t, d)| TrialSteps {
            task_id: t["task_id"].as_str().expect("task id"),
            agent: t["agent"].as_str().expect("agent"),
            repeat: t["repeat_index"].as_u64().expect("repeat") as u32,
            data: d.as_ref(),
        })
        .collect();
    for t in trials {
        let expected = if t["agent"] == "oracle" { 1.0 } else { 0.0 };
        assert_eq!(
            t["score"].as_f64(),
            Some(expected),
            "{} on {}",
            t["agent"],
            t["task_id"]
        );
    }
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
    score(&tasks, &rows)
}

fn assert_scores(protocol: &str, scores: &[ScicodeScore]) {
    for s in scores {
        println!("SciCode dev, {protocol}: {s}");
    }
    let texts: Vec<String> = scores.iter().map(ToString::to_string).collect();
    assert_eq!(
        texts,
        [
            format!("nop: steps 0/{STEPS}, main problems 0/{PROBLEMS}"),
            format!("oracle: steps {STEPS}/{STEPS}, main problems {PROBLEMS}/{PROBLEMS}"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_data_dev_problems_score_gold_full_and_nop_zero_whole_problem() {
    let scores = import_and_score("whole-problem").await;
    assert_scores("whole-problem", &scores);
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_data_dev_problems_score_gold_full_and_nop_zero_step_by_step() {
    let scores = import_and_score("step-by-step").await;
    assert_scores("step-by-step", &scores);
}
