//! `green-agent resume RUN --regrade`: a finished run's trials graded again from the outputs
//! their agents left, with the tasks' current graders, and no agent run again.
//!
//! Evidence that no agent ran, independent of the green agent's word: the engine's event stream
//! shows no agent container created for the run while it regrades; the store's attempt history
//! holds still one `fresh` attempt per trial (plus a `regrade` one). The unchanged regrade runs
//! once with per-run SQLite files, once with every row in a real PostgreSQL server.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use e2e_tests::postgres::Postgres;
use e2e_tests::{AgentCreations, leftovers, report_json, run_green, spawn_green, write_task};
use green_agent::database::DatabaseUrl;
use green_agent::store::Store;

const WANTS_DONE: &str = r#"import os


def test_out():
    assert open(os.path.join(os.environ.get("WORKSPACE", "/workspace"), "out.txt")).read().strip() == "done"
"#;

const WANTS_NOPE: &str = r#"import os


def test_out():
    assert open(os.path.join(os.environ.get("WORKSPACE", "/workspace"), "out.txt")).read().strip() == "nope"
"#;

/// The run's store (in `db` when given, else the run folder's SQLite file).
async fn open(results: &Path, run_id: &str, db: Option<&DatabaseUrl>) -> Store {
    Store::open_existing_with(&results.join(run_id), run_id, db)
        .await
        .expect("store")
}

/// Score per (task, agent) of the run's stored trials (every trial done).
async fn scores(
    results: &Path,
    run_id: &str,
    db: Option<&DatabaseUrl>,
) -> BTreeMap<(String, String), Option<f64>> {
    let store = open(results, run_id, db).await;
    let trials = store.trials(run_id).await.expect("trials");
    store.close().await;
    trials
        .iter()
        .map(|t| {
            assert_eq!(t.state, "done", "{t:?}");
            (
                (t.planned.task_id.clone(), t.planned.agent.clone()),
                t.result.as_ref().and_then(|r| r.score),
            )
        })
        .collect()
}

/// Attempt kinds per trial, in order.
async fn attempt_kinds(
    results: &Path,
    run_id: &str,
    db: Option<&DatabaseUrl>,
) -> BTreeMap<String, Vec<String>> {
    let store = open(results, run_id, db).await;
    let mut out = BTreeMap::new();
    for t in store.trials(run_id).await.expect("trials") {
        let kinds = store
            .attempts(run_id, &t.planned.id)
            .await
            .expect("attempts")
            .into_iter()
            .map(|a| a.kind)
            .collect();
        out.insert(t.planned.id, kinds);
    }
    store.close().await;
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn regrading_the_bundled_suite_changes_nothing_and_runs_no_agent() {
    regrade_changes_nothing(None, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn regrading_the_bundled_suite_changes_nothing_and_runs_no_agent_on_postgres() {
    let pg = Postgres::start().await;
    regrade_changes_nothing(Some(pg.url("rb_regrade")), "pg").await;
    drop(pg);
}

async fn regrade_changes_nothing(database: Option<String>, label: &str) {
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let run_id = format!("e2e-regrade-same-{label}-{}", std::process::id());
    let env: BTreeMap<String, String> = database
        .iter()
        .map(|u| ("RB_DATABASE_URL".to_owned(), u.clone()))
        .collect();
    let db: Option<DatabaseUrl> = database.as_deref().map(|u| u.parse().expect("url"));
    let db = db.as_ref();
    let out = run_green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--filter",
            "generic-csv-stats",
            "--agents",
            "oracle,nop",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &env,
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    let before = scores(results.path(), &run_id, db).await;
    assert_eq!(before.len(), 2);

    // The finished run's message names the flag.
    let plain = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &env,
        Duration::from_secs(120),
    )
    .await;
    plain.assert_success();
    assert!(plain.stdout.contains("--regrade"), "{}", plain.stdout);

    let report_before = std::fs::metadata(results.path().join(&run_id).join("report.json"))
        .and_then(|m| m.modified())
        .expect("report.json");
    let watch = AgentCreations::watch(&run_id).await;
    let regrade = run_green(
        &["resume", &run_id, "--regrade", "--results-dir", &results_s],
        &env,
        Duration::from_secs(600),
    )
    .await;
    let created = watch.stop().await;
    regrade.assert_success();
    assert!(created.is_empty(), "no agent container: {created:?}");
    assert!(
        regrade.stdout.contains(
            "regraded 2 trial(s) from their stored outputs (no agent ran): 0 changed (0 up, 0 down), 2 unchanged"
        ),
        "{}",
        regrade.stdout
    );
    assert_eq!(
        scores(results.path(), &run_id, db).await,
        before,
        "same scores"
    );
    for (trial, kinds) in attempt_kinds(results.path(), &run_id, db).await {
        assert_eq!(kinds, ["fresh", "regrade"], "trial {trial}");
    }
    let report_after = std::fs::metadata(results.path().join(&run_id).join("report.json"))
        .and_then(|m| m.modified())
        .expect("report.json");
    assert!(
        report_after > report_before,
        "the reports are written again"
    );
    let report = report_json(results.path(), &run_id);
    assert_eq!(report["trials"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        leftovers(&run_id).await,
        0,
        "no container of the run is left"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_regrade_with_an_edited_held_out_test_changes_the_scores_and_keeps_the_old_ones() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let task = write_task(
        tasks.path(),
        "echo-done",
        "Write `done` to out.txt.\n",
        WANTS_DONE,
        "echo done > out.txt",
        "python",
    );
    let tasks_s = tasks.path().display().to_string();
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let run_id = format!("e2e-regrade-edit-{}", std::process::id());
    let env = BTreeMap::new();
    let wrong = "cmd:echo nope > out.txt";
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks_s,
            "--agent",
            "oracle",
            "--agent",
            wrong,
            "--agent",
            "nop",
            "--concurrency",
            "1",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &env,
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    let key = |agent: &str| ("echo-done".to_owned(), agent.to_owned());
    let before = scores(results.path(), &run_id, None).await;
    assert_eq!(before[&key("oracle")], Some(1.0));
    assert_eq!(before[&key("cmd:echo nope > out.txt")], Some(0.0));

    // The held-out test changes after the run: `nope` is now the right answer.
    std::fs::write(task.join("hidden/tests/test_out.py"), WANTS_NOPE).expect("edit");

    // A regrade killed as soon as it started leaves a consistent store ...
    let run_dir = results.path().join(&run_id);
    let mut child = spawn_green(
        &["resume", &run_id, "--regrade", "--results-dir", &results_s],
        &env,
    );
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the regrade never started: {}",
            child.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let Ok(store) = Store::open_existing(&run_dir, &run_id).await else {
            continue;
        };
        let events = store.events(&run_id, None).await.unwrap_or_default();
        store.close().await;
        if events.iter().any(|e| e.kind == "trial_regrade") {
            child.kill_tree();
            break;
        }
    }
    let _ = child.wait().await;

    // ... and a plain resume finishes it as a regrade, running no agent.
    let watch = AgentCreations::watch(&run_id).await;
    let resumed = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &env,
        Duration::from_secs(600),
    )
    .await;
    let created = watch.stop().await;
    resumed.assert_success();
    assert!(created.is_empty(), "no agent container: {created:?}");
    assert!(
        resumed
            .stderr
            .contains("an earlier regrade was stopped; grading its"),
        "the stopped regrade is taken up:\n{}",
        resumed.stderr
    );
    let after = scores(results.path(), &run_id, None).await;
    assert_eq!(after[&key("oracle")], Some(0.0), "{}", resumed.stdout);
    assert_eq!(after[&key(wrong)], Some(1.0), "{}", resumed.stdout);
    assert_eq!(after[&key("nop")], Some(0.0));
    assert!(
        resumed
            .stdout
            .contains("echo-done × cmd:echo nope > out.txt #0: 0.00 [fail] → 1.00 [pass]"),
        "{}",
        resumed.stdout
    );
    assert!(
        resumed
            .stdout
            .contains("echo-done × oracle #0: 1.00 [pass] → 0.00 [fail]"),
        "{}",
        resumed.stdout
    );
    assert!(
        resumed
            .stdout
            .contains("2 changed (1 up, 1 down), 1 unchanged"),
        "{}",
        resumed.stdout
    );
    // No agent started again: one fresh attempt per trial.
    for (trial, kinds) in attempt_kinds(results.path(), &run_id, None).await {
        assert_eq!(
            kinds.iter().filter(|k| *k == "fresh").count(),
            1,
            "trial {trial}: {kinds:?}"
        );
        assert!(kinds.iter().any(|k| k == "regrade"), "{trial}: {kinds:?}");
    }
    // The old grades are kept in the event log.
    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    let kept: Vec<Option<f64>> = store
        .events(&run_id, None)
        .await
        .expect("events")
        .into_iter()
        .filter(|e| e.kind == "trial_regrade")
        .filter_map(|e| e.data.get("previous").cloned())
        .filter(|p| !p.is_null())
        .map(|p| p["score"].as_f64())
        .collect();
    store.close().await;
    let mut kept = kept;
    kept.sort_by(|a, b| a.partial_cmp(b).expect("scores"));
    assert_eq!(
        kept,
        [Some(0.0), Some(0.0), Some(1.0)],
        "the previous scores"
    );
    let report = report_json(results.path(), &run_id);
    let text = report.to_string();
    assert!(text.contains("echo-done"), "the report is written");
    assert_eq!(
        leftovers(&run_id).await,
        0,
        "no container of the run is left"
    );
}
