//! An agent that leaves 100,000 tiny files: collection and grading move them as one archive
//! stream each way, the grading budget counts from the start of grading (the upload of the
//! outputs included) and is enforced, and the trial ends graded, or scored 0 for running over
//! the budget; never `infra_error`. The phase times are printed (a measurement, not asserted:
//! the machine's load decides them), the grading phase's end is checked against its budget.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_tests::{leftovers, report_json, run_green, write_task};

const TESTS: &str = r#"import os

W = os.environ.get("WORKSPACE", "/workspace")


def test_out():
    assert open(os.path.join(W, "out.txt")).read().strip() == "done"
"#;

/// The task's grading budget.
const GRADING_SECS: u64 = 60;

#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_thousand_files_are_graded_within_the_budgets_never_infra_error() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "many-files",
        "Write out.txt, and many small files.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    let toml = dir.join("task.toml");
    let text = std::fs::read_to_string(&toml).expect("task.toml").replace(
        "grading_timeout_secs = 120",
        &format!("grading_timeout_secs = {GRADING_SECS}"),
    );
    std::fs::write(&toml, text).expect("task.toml");
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-many-files-{}", std::process::id());
    // 100 folders of 1,000 files each, a few bytes apiece.
    let agent = "cmd:python3 -c \"import os\nfor d in range(100):\n os.makedirs(f'many/{d}', exist_ok=True)\n for f in range(1000):\n  open(f'many/{d}/{f}.txt', 'w').write(str(f))\" && echo done > out.txt";
    let started = Instant::now();
    let out = run_green(
        &[
            "run",
            "--tasks",
            &dir.display().to_string(),
            "--agent",
            agent,
            "--poll-interval",
            "200ms",
            // What is measured here is grading; collection's own budget is
            // `collect_budget.rs`'s.
            "--collect-timeout",
            "30m",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(900),
    )
    .await;
    let took = started.elapsed();
    out.assert_success();
    let t = &report_json(results.path(), &run_id)["trials"][0];
    eprintln!(
        "100k files: {took:?} in all; phases {}",
        serde_json::to_string_pretty(&t["phases_ms"]).unwrap_or_default()
    );
    assert_ne!(t["outcome"], "infra_error", "{t}");
    assert_eq!(t["attempts"], 1, "{t}");
    let score = t["score"].as_f64();
    // Over the budget, every grader is `timeout` (the trial's own status is the combined
    // verdict, `fail`) and the flag says why.
    let graders = t["grade"]["graders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let timed_out = !graders.is_empty() && graders.iter().all(|g| g["status"] == "timeout");
    assert!(
        score == Some(1.0) || (score == Some(0.0) && timed_out),
        "graded (1.0), or 0 for running over the grading budget: {t}"
    );
    // The grading budget is enforced from the start of grading (the upload included): the
    // grade phase ends within it, plus the time to stop what ran at its deadline.
    let grade_ms = t["phases_ms"]["grade"].as_u64().expect("a grade phase");
    assert!(
        grade_ms <= (GRADING_SECS + 60) * 1000,
        "grading took {grade_ms} ms against a {GRADING_SECS} s budget: {t}"
    );
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}
