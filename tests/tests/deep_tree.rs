//! A hosted agent that leaves a folder nested 450 levels deep beside its correct output: the
//! green agent does not abort (every walk over the agent's tree is iterative), what lies deeper
//! than `sandbox::MAX_TREE_DEPTH` is cut, listed and flagged, and the trial is graded on the
//! rest (an outcome, never an infrastructure error).

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{leftovers, report_json, run_green, write_done_task};

const AGENT: &str = "cmd:echo done > out.txt && python3 -c 'import os; p = \"d/\" * 450; os.makedirs(p); open(p + \"f\", \"w\").write(\"x\"); open(\"d/top.txt\", \"w\").write(\"kept\")'";

#[tokio::test(flavor = "multi_thread")]
async fn a_450_level_folder_is_cut_and_the_trial_graded() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "deep-tree");
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-deep-tree-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks.path().display().to_string(),
            "--agent",
            AGENT,
            "--poll-interval",
            "200ms",
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
    let t = &report_json(results.path(), &run_id)["trials"][0];
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    let flags = t["flags"].to_string();
    assert!(flags.contains("dropped_special_files"), "{t}");
    assert!(!flags.contains("infra_error"), "{t}");
    let names: Vec<&str> = t["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(names.contains(&"file:out.txt"), "{t}");
    assert!(names.contains(&"file:d/top.txt"), "kept above the cut: {t}");
    assert!(
        !names.iter().any(|n| n.ends_with("/f")),
        "the file below the cut is not collected: {t}"
    );
    assert_eq!(leftovers(&run_id).await, 0);
}
