//! Collection has a budget of its own (`collect_timeout`): an agent that leaves a workspace
//! too slow to collect (here 8,000 small files against a 1 s budget) holds the trial no
//! longer than that budget. The trial is the agent's failure, never `infra_error`: scored 0,
//! flagged `collection_timeout` with the budget and the setting named, every grader
//! `timeout`, no output file kept; the run exits as with any failed trial, its containers are
//! removed and nothing of the collection stays in the green agent's temporary folder.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_tests::{leftovers, report_json, run_green, write_task};

const TESTS: &str = r#"import os

W = os.environ.get("WORKSPACE", "/workspace")


def test_out():
    assert open(os.path.join(W, "out.txt")).read().strip() == "done"
"#;

/// The collection budget of the run.
const BUDGET_SECS: u64 = 1;

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_too_slow_to_collect_scores_0_within_the_collection_budget() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "slow-collect",
        "Write out.txt, and many small files.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    let results = tempfile::tempdir().expect("tempdir");
    // The green agent's own temporary folder: empty again once the run ended.
    let tmp = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-collect-budget-{}", std::process::id());
    // 8 folders of 1,000 files each (about 4 s of collection on a loaded 2-core machine): the
    // solution itself (out.txt) is among them, so only the budget stands between the trial
    // and a score of 1.
    let agent = "cmd:python3 -c \"import os\nfor d in range(8):\n os.makedirs(f'many/{d}', exist_ok=True)\n for f in range(1000):\n  open(f'many/{d}/{f}.txt', 'w').write(str(f))\" && echo done > out.txt";
    let env = BTreeMap::from([("TMPDIR".to_owned(), tmp.path().display().to_string())]);
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
            "--collect-timeout",
            &format!("{BUDGET_SECS}s"),
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &env,
        Duration::from_secs(300),
    )
    .await;
    let took = started.elapsed();
    // A failed trial: the run itself succeeds.
    out.assert_success();
    let t = &report_json(results.path(), &run_id)["trials"][0];
    eprintln!(
        "8k files, {BUDGET_SECS} s collection budget: {took:?} in all; phases {}",
        serde_json::to_string_pretty(&t["phases_ms"]).unwrap_or_default()
    );
    assert_ne!(t["outcome"], "infra_error", "{t}");
    assert_eq!(t["attempts"], 1, "{t}");
    assert_eq!(t["score"].as_f64(), Some(0.0), "{t}");
    assert_eq!(t["passed"], false, "{t}");
    let flags: Vec<&str> = t["flags"]
        .as_array()
        .expect("flags")
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    let flag = flags
        .iter()
        .find(|f| f.starts_with("collection_timeout: "))
        .unwrap_or_else(|| panic!("flagged collection_timeout: {t}"));
    assert!(
        flag.contains("budget of 1s") && flag.contains("--collect-timeout"),
        "the flag names the budget and its setting: {flag}"
    );
    let graders = t["grade"]["graders"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !graders.is_empty() && graders.iter().all(|g| g["status"] == "timeout"),
        "every grader `timeout`, none ran: {t}"
    );
    let artifacts = t["artifacts"].as_array().cloned().unwrap_or_default();
    assert!(
        !artifacts
            .iter()
            .any(|a| a["name"].as_str().is_some_and(|n| n.starts_with("file:"))),
        "the partial copy is discarded: {t}"
    );
    // The budget held the phase: its end is the budget plus the time to stop what was
    // canceled (a file's write on the host, the engine's stream).
    let collect_ms = t["phases_ms"]["collect"].as_u64().expect("a collect phase");
    assert!(
        collect_ms < BUDGET_SECS * 1000 + 10_000,
        "collection took {collect_ms} ms against a {BUDGET_SECS} s budget: {t}"
    );
    assert!(
        t["phases_ms"].get("grade").is_none(),
        "nothing was graded: {t}"
    );
    assert_eq!(leftovers(&run_id).await, 0, "no container or network left");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("tmp")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert!(
        left.is_empty(),
        "the green agent's temporary files are gone: {left:?}"
    );
}
