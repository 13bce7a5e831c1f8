//! Containers ahead of need (`green_agent::trial::ahead`): a batch at `--concurrency 1` whose
//! agent runs a few seconds, so that while the first trial runs the second one's containers
//! are created, started and staged while it is still `pending` (no attempt recorded).
//!
//! - SIGKILL of the green agent at that moment, then `resume`: every trial finishes once (one
//!   A2A task per trial over its attempts, one model call per trial in the proxy's own log on
//!   the host), the prepared trial had no attempt when the process died, and nothing of the
//!   run is left in Docker.
//! - SIGTERM at that moment: the run is interrupted and every container and network of the
//!   run, the prepared ones included, is removed before the process exits.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_tests::{
    a2a_tasks, attempt_lines, counting_proxy_config, docker, leftovers, model_call_command,
    proxy_calls, run_green, spawn_green, write_done_task,
};
use green_agent::store::Store;
use sandbox::child::SupervisedChild;

/// The run's containers: (role, trial id) each.
async fn containers(run_id: &str) -> Vec<(String, String)> {
    let mut ps = docker(vec![
        "ps".into(),
        "-a".into(),
        "--filter".into(),
        format!("label={}={run_id}", sandbox::labels::RUN),
        "--format".into(),
        format!(
            "{{{{.Label \"{}\"}}}} {{{{.Label \"{}\"}}}}",
            sandbox::labels::ROLE,
            sandbox::labels::TRIAL
        ),
    ]);
    let mut out = Vec::new();
    while let Some(line) = ps.next_stdout_line().await {
        if let Some((role, trial)) = line.trim().split_once(' ') {
            out.push((role.to_owned(), trial.to_owned()));
        }
    }
    let _ = ps.wait().await;
    out
}

struct Batch {
    _tasks: tempfile::TempDir,
    results: tempfile::TempDir,
    calls: tempfile::TempDir,
    run_id: String,
    child: SupervisedChild,
}

/// Starts a 3-trial batch at `--concurrency 1` of a `cmd:` agent that calls the scripted model
/// once, then works `secs` seconds.
fn start_batch(label: &str, secs: u32) -> Batch {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "echo-done");
    let calls = tempfile::tempdir().expect("tempdir");
    let proxy = calls.path().join("proxy.toml");
    std::fs::write(&proxy, counting_proxy_config(calls.path(), "once")).expect("proxy");
    let cmd = format!(
        "cmd:{} && sleep {secs} && echo done > out.txt",
        model_call_command("once")
    );
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-ahead-{label}-{}", std::process::id());
    let args = [
        "run",
        "--tasks",
        &tasks.path().display().to_string(),
        "--agent",
        &cmd,
        "--proxy-config",
        &proxy.display().to_string(),
        "--repeats",
        "3",
        "--concurrency",
        "1",
        "--poll-interval",
        "100ms",
        "--run-id",
        &run_id,
        "--results-dir",
        &results.path().display().to_string(),
    ]
    .map(|s| s.to_owned());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let child = spawn_green(&args, &BTreeMap::new());
    Batch {
        _tasks: tasks,
        results,
        calls,
        run_id,
        child,
    }
}

/// Waits until one trial runs while another, still pending, has its agent and grading
/// containers; returns that trial's id.
async fn wait_for_a_trial_prepared_ahead(b: &mut Batch) -> String {
    let run_dir = b.results.path().join(&b.run_id);
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no trial was prepared ahead: {}",
            b.child.stderr_tail()
        );
        assert!(b.child.try_exit().is_none(), "{}", b.child.stderr_tail());
        tokio::time::sleep(Duration::from_millis(200)).await;
        if !run_dir.join(green_agent::store::DB_FILE).is_file() {
            continue;
        }
        let Ok(store) = Store::open_existing(&run_dir, &b.run_id).await else {
            continue;
        };
        let trials = store.trials(&b.run_id).await.unwrap_or_default();
        store.close().await;
        if !trials.iter().any(|t| t.state == "running") {
            continue;
        }
        let objects = containers(&b.run_id).await;
        let has = |role: &str, trial: &str| objects.iter().any(|(r, t)| r == role && t == trial);
        if let Some(t) = trials.iter().find(|t| {
            t.state == "pending" && has("agent", &t.planned.id) && has("grader", &t.planned.id)
        }) {
            return t.planned.id.clone();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_while_a_trial_is_prepared_ahead_then_resume_runs_every_trial_once() {
    let mut b = start_batch("kill", 8);
    let prepared = wait_for_a_trial_prepared_ahead(&mut b).await;
    b.child.kill_tree();
    let _ = b.child.wait().await;
    let run_dir = b.results.path().join(&b.run_id);
    let results_s = b.results.path().display().to_string();

    // What the killed process left: the prepared trial pending, without an attempt.
    let store = Store::open_existing(&run_dir, &b.run_id)
        .await
        .expect("store");
    let before = store.trials(&b.run_id).await.expect("trials");
    let t = before
        .iter()
        .find(|t| t.planned.id == prepared)
        .expect("planned");
    assert_eq!(t.state, "pending", "still waiting for its slot at the kill");
    let attempts = store
        .attempts(&b.run_id, &prepared)
        .await
        .expect("attempts");
    assert!(
        attempts.is_empty(),
        "no attempt while prepared ahead: {}",
        attempt_lines(&attempts)
    );
    store.close().await;
    assert!(
        containers(&b.run_id)
            .await
            .iter()
            .any(|(role, t)| role == "agent" && t == &prepared),
        "the prepared agent's container outlived the kill"
    );

    let out = run_green(
        &["resume", &b.run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();

    let store = Store::open_existing(&run_dir, &b.run_id)
        .await
        .expect("store");
    let trials = store.trials(&b.run_id).await.expect("trials");
    assert_eq!(trials.len(), 3);
    for t in &trials {
        let id = &t.planned.id;
        let attempts = store.attempts(&b.run_id, id).await.expect("attempts");
        assert_eq!(t.state, "done", "{id}: {}", attempt_lines(&attempts));
        assert_eq!(
            t.result.as_ref().and_then(|r| r.score),
            Some(1.0),
            "{id}: {:?}\n{}",
            t.result,
            attempt_lines(&attempts)
        );
        let tasks = a2a_tasks(&attempts);
        assert_eq!(
            tasks.len(),
            1,
            "{id}: one A2A task: {}",
            attempt_lines(&attempts)
        );
        let calls = proxy_calls(b.calls.path(), id);
        assert_eq!(calls.len(), 1, "{id}: its agent ran once: {calls:?}");
    }
    let ahead = trials
        .iter()
        .find(|t| t.planned.id == prepared)
        .and_then(|t| t.result.as_ref())
        .expect("the prepared trial's result");
    assert!(
        ahead.phases.contains_key("ahead"),
        "prepared ahead again by the resume: {:?}",
        ahead.phases
    );
    assert_eq!(store.run(&b.run_id).await.expect("run").status, "finished");
    store.close().await;
    assert_eq!(leftovers(&b.run_id).await, 0, "nothing of the run is left");
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_a_trial_is_prepared_ahead_removes_its_containers() {
    let mut b = start_batch("term", 8);
    wait_for_a_trial_prepared_ahead(&mut b).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(b.child.pid()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("signal");
    let exit = tokio::time::timeout(Duration::from_secs(60), b.child.wait())
        .await
        .expect("exits promptly");
    assert_eq!(exit.code, Some(143), "{}", b.child.stderr_tail());
    assert_eq!(
        containers(&b.run_id).await,
        Vec::new(),
        "the interrupted run removed its containers, the prepared ones included"
    );
    assert_eq!(leftovers(&b.run_id).await, 0, "nor any network");
}
