//! One owner per run, however it was started. `green-agent serve` is SIGKILLed mid-assessment;
//! then two `serve` processes start on the same results folder and a CLI `resume` of the run is
//! tried while the service runs it: exactly one service takes the assessment over, the other
//! is refused (one service per results folder), the CLI `resume` is refused naming the
//! service, and every trial runs exactly once (one A2A task per trial; one agent container
//! started per trial, but the launch in flight at the kill, whose untasked container may have
//! started before its attempt was recorded).

mod serve_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{
    AgentCreations, KilledOnDrop, a2a_tasks, attempt_lines, leftovers, report_via_cli, run_green,
    spawn_green,
};
use serde_json::json;
use serve_support::{start_serve, status_text, submit, suite, trial_artifacts, wait_for};

/// Starts `green-agent serve` on `results`: its URL, or its stderr when it exits first.
async fn try_start_serve(
    tasks: &std::path::Path,
    results: &std::path::Path,
) -> Result<(KilledOnDrop, String), String> {
    let suite = format!("e2e={}", tasks.display());
    let results = results.display().to_string();
    let args = [
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--tasks",
        &suite,
        "--results-dir",
        &results,
        "--poll-interval",
        "200ms",
        "--concurrency",
        "1",
    ];
    let mut child = spawn_green(&args, &BTreeMap::new());
    loop {
        let line = tokio::time::timeout(Duration::from_secs(120), child.next_stdout_line())
            .await
            .expect("green-agent serve announces its address or exits");
        match line {
            Some(line) => {
                if let Some(rest) = line.strip_prefix("listening on ") {
                    return Ok((
                        KilledOnDrop(child),
                        rest.trim().trim_end_matches('/').to_owned(),
                    ));
                }
            }
            None => {
                let exit = child.wait().await;
                assert!(!exit.success(), "a refused service exits with an error");
                return Err(child.stderr_tail());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_crash_two_services_and_a_resume_run_each_trial_once() {
    let tasks = suite();
    let results = tempfile::tempdir().expect("tempdir");
    let (first, url) = start_serve(
        tasks.path(),
        results.path(),
        &["--concurrency", "1"],
        &BTreeMap::new(),
    )
    .await;
    let request =
        json!({"participants": {"agent": "nop"}, "config": {"tasks": "e2e", "repeats": 6}});
    let id = submit(&url, &request).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let named = wait_for(&url, &id, "the run's id", |t| {
        t["metadata"]["run_id"].is_string()
    })
    .await;
    let run_id = named["metadata"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    // Agent containers created per trial from here on (the first trial's may precede it).
    // Starts are watched first: a create the second watcher sees has its start seen by the
    // first (the other order lost the first trial's start when it came within the second).
    let starts = AgentCreations::watch_starts(&run_id).await;
    let creations = AgentCreations::watch(&run_id).await;
    wait_for(&url, &id, "a finished trial", |t| trial_artifacts(t) >= 1).await;
    first.0.kill_tree(); // SIGKILL: no cleanup at all
    drop(first);

    // Two services at once on the same folder: one serves, the other is refused.
    let (a, b) = tokio::join!(
        try_start_serve(tasks.path(), results.path()),
        try_start_serve(tasks.path(), results.path())
    );
    let (serving, refused) = match (a, b) {
        (Ok(s), Err(e)) | (Err(e), Ok(s)) => (s, e),
        (Ok(_), Ok(_)) => panic!("two services serve one results folder"),
        (Err(a), Err(b)) => panic!("no service started:\n{a}\n{b}"),
    };
    assert!(
        refused.contains("served by another `green-agent serve`"),
        "{refused}"
    );
    let (_serving, url) = serving;
    wait_for(&url, &id, "the run taken up", |t| {
        status_text(t).starts_with(&format!("run {run_id}:"))
    })
    .await;

    // The CLI: refused while the service owns the run, naming it.
    let results_s = results.path().display().to_string();
    let out = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
        Duration::from_secs(120),
    )
    .await;
    assert!(!out.exit.success(), "{:?}\n{}", out.exit, out.stderr);
    assert!(
        out.stderr.contains("is owned by another process")
            && out.stderr.contains("green-agent serve"),
        "{}",
        out.stderr
    );

    let task = wait_for(&url, &id, "completion", |t| {
        t["status"]["state"]
            .as_str()
            .is_some_and(|s| s != "TASK_STATE_WORKING" && s != "TASK_STATE_SUBMITTED")
    })
    .await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let created = creations.stop().await;
    let started = starts.stop().await;
    let report = report_via_cli(results.path(), &run_id, &BTreeMap::new()).await;
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 6);
    assert!(trials.iter().all(|t| t["state"] == "done"), "{report}");
    // Every trial's agent started once, but the one whose launch was in flight at the kill:
    // its first container may have started before its attempt was recorded (the record comes
    // right after the engine's start returns); the new owner then removes it, never tasked (a
    // task is sent only after the record), and starts one. A create the killed service had in
    // flight can also land after the new owner looked: that container is never started and is
    // reaped at the end. Either way each trial holds one A2A task over all its attempts.
    let store = green_agent::store::Store::open_existing(&results.path().join(&run_id), &run_id)
        .await
        .expect("store");
    for (trial, n) in &started {
        let attempts = store.attempts(&run_id, trial).await.expect("attempts");
        let tasks = a2a_tasks(&attempts);
        assert_eq!(
            tasks.len(),
            1,
            "trial {trial}: one A2A task over its attempts:{}",
            attempt_lines(&attempts)
        );
        assert!(
            *n == 1 || *n == 2,
            "trial {trial}'s agent started {n} times: {started:?}{}",
            attempt_lines(&attempts)
        );
    }
    assert!(
        started.values().filter(|n| **n == 2).count() <= 1,
        "only the launch in flight at the kill may have started twice: {started:?}"
    );
    for (trial, n) in &created {
        assert!(
            *n <= 2 && started.get(trial).is_some_and(|s| (1..=*n).contains(s)),
            "trial {trial}: {n} agent container(s) created, started {:?}: {created:?}",
            started.get(trial)
        );
    }
    assert!(
        created.values().filter(|n| **n == 2).count() <= 1,
        "only the create in flight at the kill may be doubled: {created:?}"
    );
    assert!(started.len() >= 5, "{started:?}");
    assert_eq!(leftovers(&run_id).await, 0);
}
