//! The main job (`scripts/assess-examples`): the bundled suite in real containers with the
//! key-free agents. The oracle scores 1.0 on every task, nop 0.0; every report exists and parses.

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{leftovers, report_json, run_green};

#[tokio::test(flavor = "multi_thread")]
async fn oracle_scores_one_and_nop_zero_on_the_bundled_suite() {
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-examples-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--agents",
            "oracle,nop",
            "--concurrency",
            "3",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(1800),
    )
    .await;
    out.assert_success();
    assert!(
        out.stdout.lines().any(|l| l.starts_with("oracle ")),
        "the summary table is printed:\n{}",
        out.stdout
    );

    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    let tasks = std::fs::read_dir(e2e_tests::repo_root().join("tasks/examples"))
        .expect("examples")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().join("task.toml").is_file())
        })
        .count();
    assert_eq!(
        trials.len(),
        tasks * 2,
        "one oracle and one nop trial per task"
    );
    // Every bundled task is graded deterministically (the main job is key-free), so every trial
    // has a score: the oracle 1.0, nop 0.0.
    let mut problems = Vec::new();
    for t in trials {
        let agent = t["agent"].as_str().expect("agent");
        let task = t["task_id"].as_str().expect("task");
        assert_eq!(t["state"], "done", "{t}");
        assert_eq!(t["isolated"], true);
        // The sandboxes are made before the trial's slot (`ahead`) or, when that was not
        // possible, in its first attempt (`create`).
        assert!(
            t["phases_ms"]["ahead"].is_u64() || t["phases_ms"]["create"].is_u64(),
            "phase ahead or create timed: {}",
            t["phases_ms"]
        );
        for phase in ["ready", "agent", "collect", "grade"] {
            assert!(
                t["phases_ms"][phase].is_u64(),
                "phase {phase} timed: {}",
                t["phases_ms"]
            );
        }
        let expected = if agent == "oracle" { 1.0 } else { 0.0 };
        if t["score"].as_f64() != Some(expected) {
            problems.push(format!(
                "{agent} on {task}: score {} (expected {expected}); grade: {}",
                t["score"], t["grade"]
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} trial(s) off:\n{}",
        problems.len(),
        problems.join("\n")
    );
    let dir = results.path().join(&run_id);
    let md = std::fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert!(md.contains("## Summary") && md.contains("| oracle |"));
    let csv_text = std::fs::read_to_string(dir.join("report.csv")).expect("report.csv");
    assert_eq!(
        csv::Reader::from_reader(csv_text.as_bytes())
            .records()
            .count(),
        tasks * 2
    );
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
    for t in trials.iter().filter(|t| t["task_kind"] == "prbench") {
        let p = dir
            .join("trials")
            .join(t["id"].as_str().expect("id"))
            .join("eval_report.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).expect("eval_report.json"))
                .expect("parses");
        assert!(v["scores"].is_object());
    }
    assert_eq!(
        leftovers(&run_id).await,
        0,
        "no container or network of the run is left"
    );
}
