//! SIGKILL the green agent in the middle of a 20-trial run, then `resume`: the run finishes,
//! no completed trial is lost or re-run, every agent ran exactly once (the trials that were
//! running are reattached, or collected and graded from what they left, never started again),
//! and no container of the run is left (by label); then `report`. Once with per-run SQLite
//! files, once with every row in a real PostgreSQL server.
//!
//! And the narrowest window, made on purpose: a trial whose attempt ended `finished` with its
//! outputs stored while its result was never written (the process died between the two) is
//! graded from those outputs by `resume`; the agent is not started again.
//!
//! Evidence of "exactly once" that does not rest on the green agent's word: the `cmd` agent
//! calls the scripted model once, and the proxy's call log on the host (appended to by both
//! green-agent processes) must hold exactly one call per trial. For every trial the store's
//! attempt history holds exactly one A2A task (a second start would be a second task).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_tests::postgres::Postgres;
use e2e_tests::{
    AgentCreations, a2a_tasks, attempt_lines, counting_proxy_config, leftovers, model_call_command,
    proxy_calls, report_via_cli, run_green, spawn_green, write_done_task,
};
use green_agent::database::DatabaseUrl;
use green_agent::store::Store;

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_then_resume_finishes_the_run() {
    sigkill_then_resume(None, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_then_resume_finishes_the_run_on_postgres() {
    let pg = Postgres::start().await;
    sigkill_then_resume(Some(pg.url("rb_kill_resume")), "pg").await;
    drop(pg);
}

async fn sigkill_then_resume(database: Option<String>, label: &str) {
    // the database reaches every green-agent through the environment, as a team would set it
    let env: BTreeMap<String, String> = database
        .iter()
        .map(|u| ("RB_DATABASE_URL".to_owned(), u.clone()))
        .collect();
    let db: Option<DatabaseUrl> = database.as_deref().map(|u| u.parse().expect("url"));
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "echo-done");
    let calls_dir = tempfile::tempdir().expect("tempdir");
    let proxy = calls_dir.path().join("proxy.toml");
    std::fs::write(&proxy, counting_proxy_config(calls_dir.path(), "once")).expect("proxy");
    let proxy_s = proxy.display().to_string();
    let cmd = format!("cmd:{} && echo done > out.txt", model_call_command("once"));
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let tasks_s = tasks.path().display().to_string();
    let run_id = format!("e2e-kill-{label}-{}", std::process::id());
    let run_dir = results.path().join(&run_id);
    let args = [
        "run",
        "--tasks",
        &tasks_s,
        "--agent",
        "oracle",
        "--agent",
        &cmd,
        "--proxy-config",
        &proxy_s,
        "--repeats",
        "10",
        "--concurrency",
        "3",
        "--poll-interval",
        "100ms",
        "--run-id",
        &run_id,
        "--results-dir",
        &results_s,
    ];
    let mut child = spawn_green(&args, &env);

    // Wait until some trials are done (but not all), then SIGKILL.
    let started = Instant::now();
    let done_before = loop {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "no progress: {}",
            child.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        if db.is_none() && !run_dir.join(green_agent::store::DB_FILE).is_file() {
            continue;
        }
        // (the green agent may be creating the store right now)
        let Ok(store) = Store::open_existing_with(&run_dir, &run_id, db.as_ref()).await else {
            continue;
        };
        let trials = store.trials(&run_id).await.unwrap_or_default();
        store.close().await;
        let done: Vec<_> = trials
            .iter()
            .filter(|t| t.state == "done")
            .map(|t| (t.planned.id.clone(), t.finished_at.clone()))
            .collect();
        if done.len() >= 5 {
            assert_eq!(trials.len(), 20, "20 trials planned");
            child.kill_tree();
            break done;
        }
    };
    let _ = child.wait().await;
    // The killed process's warnings, as far as its stderr tail holds them.
    for line in child
        .stderr_tail()
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .take(40)
    {
        eprintln!("killed: {line}");
    }

    let out = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &env,
        Duration::from_secs(900),
    )
    .await;
    out.assert_success();
    // The resumed process's warnings (a failure below is read with them).
    for line in out
        .stderr
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .take(40)
    {
        eprintln!("resume: {line}");
    }

    let store = Store::open_existing_with(&run_dir, &run_id, db.as_ref())
        .await
        .expect("store");
    let trials = store.trials(&run_id).await.expect("trials");
    assert_eq!(trials.len(), 20);
    assert!(
        trials.iter().all(|t| t.state == "done"),
        "every trial finished"
    );
    for t in &trials {
        let score = t.result.as_ref().and_then(|r| r.score);
        if score != Some(1.0) {
            let attempts = store
                .attempts(&run_id, &t.planned.id)
                .await
                .expect("attempts");
            panic!(
                "{} {} scored {score:?}: {:#?}\nattempts: {}",
                t.planned.agent,
                t.planned.repeat_index,
                t.result.as_ref().map(|r| (
                    &r.outcome,
                    &r.exit_code,
                    &r.error,
                    &r.flags,
                    &r.phases,
                    &r.grade_report
                )),
                attempt_lines(&attempts)
            );
        }
    }
    // no completed trial lost or re-run
    for (id, finished_at) in &done_before {
        let t = trials
            .iter()
            .find(|t| &t.planned.id == id)
            .expect("still there");
        assert_eq!(&t.finished_at, finished_at, "trial {id} was not re-run");
    }
    let events = store.events(&run_id, None).await.expect("events");
    for t in &trials {
        let finished = events
            .iter()
            .filter(|e| e.kind == "trial_finished" && e.trial_id.as_deref() == Some(&t.planned.id))
            .count();
        assert_eq!(finished, 1, "trial {} recorded exactly once", t.planned.id);
    }
    assert!(events.iter().any(|e| e.kind == "run_resumed"));
    // Exactly once: one A2A task per trial over all its attempts, and for the `cmd` agent one
    // model call per trial in the proxy's log.
    let mut taken_over = 0;
    for t in &trials {
        let id = &t.planned.id;
        let attempts = store.attempts(&run_id, id).await.expect("attempts");
        let tasks = a2a_tasks(&attempts);
        assert_eq!(
            tasks.len(),
            1,
            "{id} ({}): {}\nevents: {}",
            t.planned.agent,
            attempt_lines(&attempts),
            trial_events(&events, id)
        );
        taken_over += attempts.iter().filter(|a| a.kind == "reattached").count();
        let counted = t.result.as_ref().map(|r| r.attempts as usize);
        assert_eq!(
            counted,
            Some(attempts.len()),
            "{id}: trials.attempts agrees with the attempts table"
        );
        if t.planned.agent.starts_with("cmd:") {
            let calls = proxy_calls(calls_dir.path(), id);
            assert_eq!(calls.len(), 1, "{id} ran once: {calls:?}");
            assert_eq!(calls[0]["status"], 200, "{calls:?}");
        }
    }
    eprintln!("{taken_over} trial(s) taken over after the kill");
    assert_eq!(store.run(&run_id).await.expect("run").status, "finished");
    store.close().await;
    assert_eq!(
        leftovers(&run_id).await,
        0,
        "no container or network of the killed run is left"
    );
    assert_eq!(
        run_dir.join(green_agent::store::DB_FILE).is_file(),
        db.is_none(),
        "the rows are in the run's SQLite file, or only in the database"
    );

    // the report, read back from the same store
    let report = report_via_cli(results.path(), &run_id, &env).await;
    assert_eq!(report["trials"].as_array().map(Vec::len), Some(20));
    assert_eq!(report["run"]["status"], "finished");
}

/// The run's events of one trial, one line each.
fn trial_events(events: &[green_agent::store::EventRow], trial: &str) -> String {
    events
        .iter()
        .filter(|e| e.trial_id.as_deref() == Some(trial))
        .map(|e| format!("\n  {} {} {}", e.at, e.kind, e.data))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trial_collected_but_never_recorded_is_graded_from_its_outputs() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "echo-done");
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let tasks_s = tasks.path().display().to_string();
    let run_id = format!("e2e-unrecorded-{}", std::process::id());
    let run_dir = results.path().join(&run_id);
    let creations = AgentCreations::watch(&run_id).await;
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks_s,
            "--agents",
            "oracle",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    // The state a process leaves when it dies after closing the attempt and before writing the
    // trial's result: the attempt `finished` with its outputs, the trial still running.
    let db = run_dir.join(green_agent::store::DB_FILE);
    let sql = format!(
        "UPDATE trials SET state = 'running', outcome = NULL, score = NULL, passed = NULL, \
         grade_status = NULL, finished_at = NULL WHERE run_id = '{run_id}'; \
         DELETE FROM grades WHERE run_id = '{run_id}'; \
         DELETE FROM events WHERE run_id = '{run_id}' AND kind IN ('trial_finished', 'run_finished'); \
         UPDATE runs SET status = 'running', finished_at = NULL WHERE id = '{run_id}';"
    );
    let mut sqlite = sandbox::child::SupervisedChild::spawn(sandbox::child::ChildSpec {
        program: "sqlite3".into(),
        args: vec![db.display().to_string(), sql],
        env: std::env::vars().collect(),
        clear_env: true,
        cwd: run_dir.clone(),
        limits: None,
    })
    .expect("sqlite3 starts");
    let edited = sqlite.wait().await;
    assert!(edited.success(), "sqlite3: {}", sqlite.stderr_tail());
    let out = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();

    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    let trials = store.trials(&run_id).await.expect("trials");
    assert_eq!(trials.len(), 1);
    let t = &trials[0];
    let r = t.result.as_ref().expect("recorded");
    assert_eq!(t.state, "done");
    assert_eq!(r.score, Some(1.0), "{r:?}");
    assert!(
        r.flags
            .iter()
            .any(|f| f.contains("graded from the outputs attempt 1 collected")),
        "{:?}",
        r.flags
    );
    let attempts = store
        .attempts(&run_id, &t.planned.id)
        .await
        .expect("attempts");
    assert_eq!(attempts.len(), 2, "{}", attempt_lines(&attempts));
    assert_eq!(attempts[0].ended.as_deref(), Some("finished"));
    assert_eq!(
        attempts[1].kind,
        "reattached",
        "{}",
        attempt_lines(&attempts)
    );
    assert_eq!(r.attempts, 2);
    let creations = creations.stop().await;
    assert_eq!(
        creations.get(&t.planned.id),
        Some(&1),
        "one agent container over both processes: {creations:?}"
    );
    assert_eq!(leftovers(&run_id).await, 0, "the run cleaned up");
}
