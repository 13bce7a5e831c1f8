//! The sabotage test: an agent that solves two of four tasks and, on the other two, makes
//! grading fail (startup code that ends the grader before it reports) must not gain by it: its
//! strict mean is 0.5, not the 1.0 a mean over graded trials alone would show. The oracle
//! scores 1.0 and nop 0.0 on the same tasks.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use e2e_tests::{leftovers, repo_root, report_json, run_green};

#[tokio::test(flavor = "multi_thread")]
async fn sabotaging_half_the_tasks_reports_a_strict_mean_of_one_half() {
    let root = repo_root().join("tests/adversarial");
    let lib = std::fs::read_to_string(root.join("agents/lib.sh")).expect("lib.sh");
    let body = std::fs::read_to_string(root.join("agents/sabotage.sh")).expect("sabotage.sh");
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{lib}\n{body}\n"));
    let saboteur = format!("cmd:: saboteur; echo {b64} | base64 -d | sh");
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-sabotage-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            &root.join("sabotage").display().to_string(),
            "--agents",
            "oracle,nop",
            "--agent",
            &saboteur,
            "--concurrency",
            "4",
            "--poll-interval",
            "200ms",
            "--wide",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(900),
    )
    .await;
    out.assert_success();
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 12, "three agents × four tasks");
    for t in trials {
        let (agent, task) = (
            t["agent"].as_str().expect("a"),
            t["task_id"].as_str().expect("t"),
        );
        let want = match agent {
            "oracle" => Some(1.0),
            "nop" => Some(0.0),
            _ if matches!(task, "sab-square" | "sab-hello") => Some(1.0),
            // sabotaged: 0 once grading charges it to the agent; no score while it does not
            _ => None,
        };
        match want {
            Some(w) => assert_eq!(t["score"].as_f64(), Some(w), "{agent} on {task}: {t}"),
            None => assert_ne!(t["score"].as_f64(), Some(1.0), "{task}: {t}"),
        }
    }
    let row = |agent: &str| {
        report["summary"]
            .as_array()
            .expect("summary")
            .iter()
            .find(|r| r["agent"].as_str().is_some_and(|a| a.starts_with(agent)))
            .unwrap_or_else(|| panic!("a summary row for {agent}"))
            .clone()
    };
    let s = row("cmd:: saboteur");
    eprintln!(
        "saboteur: mean over graded {} (n = {}), strict mean {}, not graded {}, pass@k {}",
        s["mean"], s["scored"], s["strict_mean"], s["excluded"], s["pass_at_k"]
    );
    assert_eq!(s["trials"], 4, "{s}");
    assert_eq!(s["strict_mean"].as_f64(), Some(0.5), "{s}");
    assert_eq!(
        s["excluded"].as_u64().expect("excluded") + s["scored"].as_u64().expect("scored"),
        4,
        "{s}"
    );
    // the graded mean is 0.5 too once sabotage is scored 0; it is never above what was solved
    // unless trials were left out, and the report says how many
    if s["excluded"] == 0 {
        assert_eq!(s["mean"].as_f64(), Some(0.5), "{s}");
    }
    assert_eq!(s["pass_at_k"].as_f64(), Some(0.5), "{s}");
    assert_eq!(row("oracle")["strict_mean"].as_f64(), Some(1.0));
    assert_eq!(row("nop")["strict_mean"].as_f64(), Some(0.0));
    // the terminal table (`--wide`) and the Markdown report show the strict mean beside the
    // graded one (no interval over four trials)
    assert!(out.stdout.contains("strict mean"), "{}", out.stdout);
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("saboteur"))
        .expect("the saboteur's row in the terminal table");
    assert!(line.contains("| 0.500 | "), "strict mean shown: {line}");
    let md = std::fs::read_to_string(results.path().join(&run_id).join("report.md")).expect("md");
    assert!(
        md.contains("strict mean ± 95% CI") && md.contains("| 0.500 | "),
        "{md}"
    );
    assert_eq!(leftovers(&run_id).await, 0);
}
