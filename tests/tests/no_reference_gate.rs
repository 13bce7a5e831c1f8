//! A task without a reference solution (no `solution/`, like an imported SciCode test-set
//! problem) is first-class: `tasks check` runs the nop side, says that no oracle exists, and
//! passes the task; the oracle's trial is `no_reference` (no container, no score), not a failure.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use e2e_tests::{leftovers, repo_root, report_json, run_green};

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_without_reference_passes_the_gate_on_nop_and_says_so() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let task = tasks.path().join("generic-csv-stats");
    copy_tree(&repo_root().join("tasks/examples/generic-csv-stats"), &task);
    std::fs::remove_dir_all(task.join("solution")).expect("remove the reference solution");

    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-no-reference-{}", std::process::id());
    let out = run_green(
        &[
            "tasks",
            "check",
            &tasks.path().display().to_string(),
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    assert!(
        out.stdout.contains(
            "pass  generic-csv-stats  no reference solution: no oracle to run  nop 0.000"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("1 of 1 task(s) pass the gate"),
        "{}",
        out.stdout
    );
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    let oracle = trials
        .iter()
        .find(|t| t["agent"] == "oracle")
        .expect("the oracle's trial is recorded");
    assert_eq!(oracle["outcome"], "no_reference", "{oracle}");
    assert!(oracle["score"].is_null(), "{oracle}");
    let nop = trials.iter().find(|t| t["agent"] == "nop").expect("nop");
    assert_eq!(nop["score"].as_f64(), Some(0.0), "{nop}");
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}
