//! Exactly once across a crash of the green agent: SIGKILL it while hosted agents are mid-work,
//! `resume`, and the resumed run reattaches to the agents still running (it does not start
//! them again), re-registers their model-proxy tokens on the same port, follows their tasks
//! by id and grades what they finish. A second `resume` of the run while the first owns it
//! refuses, naming the owner.
//!
//! The agent calls the scripted model once when it starts and once when it ends (the proxy's
//! call log, on the host, is written by both green-agent processes), records its start in its
//! workspace, and sleeps in between. So the evidence that it ran once is independent of the
//! green agent's own records: two calls per trial in the call log (a rerun would make three or
//! four, a lost token would make the second one fail), one `start` line in the graded
//! workspace, and one agent container created per trial in the engine's event log.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use e2e_tests::{
    AgentCreations, NetworkCreations, counting_proxy_config, leftovers, model_call_command,
    proxy_calls, run_green, spawn_green, write_task,
};
use green_agent::store::Store;

const TESTS: &str = r#"import os

WS = os.environ.get("WORKSPACE", "/workspace")


def test_ran_once_to_the_end():
    assert open(os.path.join(WS, "starts.txt")).read().split() == ["start"]
    assert open(os.path.join(WS, "out.txt")).read().strip() == "done"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_run_resumes_by_reattaching_and_a_second_resume_refuses() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_task(
        tasks.path(),
        "sleepy",
        "Write `done` to out.txt.\n",
        TESTS,
        "echo start > starts.txt && echo done > out.txt",
        "python",
    );
    let calls_dir = tasks.path().join("calls");
    std::fs::create_dir_all(&calls_dir).expect("calls dir");
    let proxy = tasks.path().join("proxy.toml");
    std::fs::write(&proxy, counting_proxy_config(&calls_dir, "hello")).expect("proxy config");
    let call = model_call_command("hello");
    let agent = format!(
        "cmd:{call} && echo start >> starts.txt && sleep 12 && {call} && echo done > out.txt"
    );
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let run_id = format!("e2e-reattach-{}", std::process::id());
    let run_dir = results.path().join(&run_id);
    let creations = AgentCreations::watch(&run_id).await;
    let mut child = spawn_green(
        &[
            "run",
            "--tasks",
            &tasks.path().join("sleepy").display().to_string(),
            "--agent",
            &agent,
            "--repeats",
            "2",
            "--concurrency",
            "2",
            "--proxy-config",
            &proxy.display().to_string(),
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &BTreeMap::new(),
    );

    // Both agents accepted their task (its id is in the store) and made their first call.
    let started = Instant::now();
    let trial_ids = loop {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the agents did not start: {}",
            child.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        if !run_dir.join(green_agent::store::DB_FILE).is_file() {
            continue;
        }
        // (the green agent may be creating the store right now)
        let Ok(store) = Store::open_existing(&run_dir, &run_id).await else {
            continue;
        };
        let trials = store.trials(&run_id).await.unwrap_or_default();
        let mut ready = Vec::new();
        for t in &trials {
            let attempts = store
                .attempts(&run_id, &t.planned.id)
                .await
                .unwrap_or_default();
            if attempts.iter().any(|a| a.a2a_task_id.is_some())
                && proxy_calls(&calls_dir, &t.planned.id).len() == 1
            {
                ready.push(t.planned.id.clone());
            }
        }
        store.close().await;
        if trials.len() == 2 && ready.len() == 2 {
            break ready;
        }
    };
    child.kill_tree();
    let _ = child.wait().await;

    // The first resume owns the run; a second one refuses while it does.
    let mut first = spawn_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
    );
    let owner = format!("pid {}", first.pid());
    let waited = Instant::now();
    while !std::fs::read_to_string(run_dir.join(green_agent::ownership::LOCK_FILE))
        .unwrap_or_default()
        .contains(&owner)
    {
        assert!(
            waited.elapsed() < Duration::from_secs(60),
            "the resume did not take the run: {}",
            first.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let second = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
        Duration::from_secs(120),
    )
    .await;
    assert!(!second.exit.success(), "the second resume must refuse");
    assert!(
        second.stderr.contains(&format!(
            "run {run_id} is owned by another process ({owner} on host"
        )) && second.stderr.contains("`green-agent resume`")
            && second
                .stderr
                .contains(&format!("green-agent resume {run_id}")),
        "who owns it and how to proceed: {}",
        second.stderr
    );
    let exit = tokio::time::timeout(Duration::from_secs(600), async {
        while first.next_stdout_line().await.is_some() {}
        first.wait().await
    })
    .await
    .expect("the resume finishes");
    assert!(exit.success(), "resume: {}", first.stderr_tail());

    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    let trials = store.trials(&run_id).await.expect("trials");
    assert_eq!(store.run(&run_id).await.expect("run").status, "finished");
    for t in &trials {
        let id = &t.planned.id;
        let r = t.result.as_ref().expect("done");
        let history = (
            store.attempts(&run_id, id).await.expect("attempts"),
            store.events(&run_id, Some(id)).await.expect("events"),
        );
        eprintln!("{id}: {history:#?}");
        // Graded on what the reattached agent finished (one start, and done).
        assert_eq!(r.score, Some(1.0), "{id}: {r:?}");
        assert!(
            r.flags
                .iter()
                .any(|f| f.starts_with("reattached after a restart of the green agent")),
            "{id}: {:?}",
            r.flags
        );
        let attempts = store.attempts(&run_id, id).await.expect("attempts");
        let kinds: Vec<(&str, Option<&str>)> = attempts
            .iter()
            .map(|a| (a.kind.as_str(), a.ended.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("fresh", Some("abandoned")),
                ("reattached", Some("finished"))
            ],
            "{id}"
        );
        assert_eq!(
            attempts[0].a2a_task_id, attempts[1].a2a_task_id,
            "{id}: the same task was followed"
        );
        // The trial's attempts count is the attempts table's (the dead process's one included).
        assert_eq!(r.attempts as usize, attempts.len(), "{id}: {r:?}");
        // Its start call (first process) and its end call (the resumed proxy, same token).
        let calls = proxy_calls(&calls_dir, id);
        let statuses: Vec<u64> = calls
            .iter()
            .map(|c| c["status"].as_u64().unwrap_or(0))
            .collect();
        assert_eq!(statuses, [200, 200], "{id}: {calls:?}");
    }
    assert_eq!(trial_ids.len(), 2);
    store.close().await;
    let created = creations.stop().await;
    for id in &trial_ids {
        assert_eq!(
            created.get(id),
            Some(&1),
            "one agent container for {id}: {created:?}"
        );
    }
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}

/// An agent that uses no model (the oracle, here a slow reference solution) runs with no
/// network: a resumed run reaches the container it adopts through a new loopback forwarder
/// (the dead process's died with it), follows its task to the end and grades it; one agent
/// container per trial, and no network created for the run at any point.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_run_reattaches_an_agent_without_a_network() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_task(
        tasks.path(),
        "slow-oracle",
        "Write `done` to out.txt.\n",
        TESTS,
        "echo start >> starts.txt && sleep 12 && echo done > out.txt",
        "python",
    );
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let run_id = format!("e2e-reattach-lo-{}", std::process::id());
    let run_dir = results.path().join(&run_id);
    let creations = AgentCreations::watch(&run_id).await;
    let networks = NetworkCreations::watch(&run_id).await;
    let mut child = spawn_green(
        &[
            "run",
            "--tasks",
            &tasks.path().join("slow-oracle").display().to_string(),
            "--agent",
            "oracle",
            "--repeats",
            "2",
            "--concurrency",
            "2",
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &BTreeMap::new(),
    );
    // Both agents accepted their task (its id is in the store): kill the green agent.
    let started = Instant::now();
    let trial_ids = loop {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the agents did not start: {}",
            child.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(store) = Store::open_existing(&run_dir, &run_id).await else {
            continue;
        };
        let trials = store.trials(&run_id).await.unwrap_or_default();
        let mut accepted = Vec::new();
        for t in &trials {
            let attempts = store
                .attempts(&run_id, &t.planned.id)
                .await
                .unwrap_or_default();
            if attempts.iter().any(|a| a.a2a_task_id.is_some()) {
                accepted.push(t.planned.id.clone());
            }
        }
        store.close().await;
        if trials.len() == 2 && accepted.len() == 2 {
            break accepted;
        }
    };
    child.kill_tree();
    let _ = child.wait().await;
    let out = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
        Duration::from_secs(300),
    )
    .await;
    out.assert_success();

    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    assert_eq!(store.run(&run_id).await.expect("run").status, "finished");
    for t in store.trials(&run_id).await.expect("trials") {
        let id = &t.planned.id;
        let r = t.result.as_ref().expect("done");
        assert_eq!(r.score, Some(1.0), "{id}: {r:?}");
        assert!(
            r.flags
                .iter()
                .any(|f| f.starts_with("reattached after a restart of the green agent")),
            "{id}: {:?}",
            r.flags
        );
        let attempts = store.attempts(&run_id, id).await.expect("attempts");
        let kinds: Vec<(&str, Option<&str>)> = attempts
            .iter()
            .map(|a| (a.kind.as_str(), a.ended.as_deref()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("fresh", Some("abandoned")),
                ("reattached", Some("finished"))
            ],
            "{id}"
        );
        assert_eq!(attempts[0].a2a_task_id, attempts[1].a2a_task_id, "{id}");
    }
    store.close().await;
    let created = creations.stop().await;
    for id in &trial_ids {
        assert_eq!(
            created.get(id),
            Some(&1),
            "one agent container for {id}: {created:?}"
        );
    }
    let networks = networks.stop().await;
    assert!(networks.is_empty(), "no network for the run: {networks:?}");
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}

/// An external `a2a:URL` agent (the official SDK, outside any container, so it outlives the
/// green agent) is reattached by its stored task id: it starts on the task once, and what it
/// finishes after the restart is graded.
#[tokio::test(flavor = "multi_thread")]
async fn an_external_agent_is_followed_by_its_task_id_after_a_restart() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_task(
        tasks.path(),
        "external",
        "Write `done` to out.txt.\n",
        r#"import os


def test_out():
    assert open(os.path.join(os.environ.get("WORKSPACE", "/workspace"), "out.txt")).read().strip() == "done"
"#,
        "echo done > out.txt",
        "python",
    );
    let scratch = tempfile::tempdir().expect("tempdir");
    let starts = scratch.path().join("slow.count");
    let python = e2e_tests::repo_root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/bootstrap-tests: {} is missing",
        python.display()
    );
    let mut agent = sandbox::child::SupervisedChild::spawn(sandbox::child::ChildSpec {
        program: python.display().to_string(),
        args: vec![
            e2e_tests::repo_root()
                .join("tests/tests/agents/sdk_agent.py")
                .display()
                .to_string(),
            "slow".into(),
            starts.display().to_string(),
        ],
        env: BTreeMap::new(),
        clear_env: false,
        cwd: scratch.path().to_path_buf(),
        limits: None,
    })
    .expect("the SDK agent starts");
    let port = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), agent.next_stdout_line())
            .await
            .expect("the agent printed its port")
            .unwrap_or_else(|| panic!("the agent exited: {}", agent.stderr_tail()));
        if let Some(p) = line.strip_prefix("PORT ") {
            break p.trim().to_owned();
        }
    };
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let run_id = format!("e2e-reattach-ext-{}", std::process::id());
    let run_dir = results.path().join(&run_id);
    let spec = format!("a2a:http://127.0.0.1:{port}");
    let mut child = spawn_green(
        &[
            "run",
            "--tasks",
            &tasks.path().join("external").display().to_string(),
            "--agent",
            &spec,
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &BTreeMap::new(),
    );
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the agent did not accept the task: {}",
            child.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Ok(store) = Store::open_existing(&run_dir, &run_id).await else {
            continue;
        };
        let trials = store.trials(&run_id).await.unwrap_or_default();
        let mut accepted = false;
        for t in &trials {
            let attempts = store
                .attempts(&run_id, &t.planned.id)
                .await
                .unwrap_or_default();
            accepted |= attempts.iter().any(|a| a.a2a_task_id.is_some());
        }
        store.close().await;
        if accepted {
            break;
        }
    }
    child.kill_tree();
    let _ = child.wait().await;
    let out = run_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
        Duration::from_secs(300),
    )
    .await;
    out.assert_success();
    agent.kill_tree();
    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    let trials = store.trials(&run_id).await.expect("trials");
    let t = &trials[0];
    let r = t.result.as_ref().expect("done");
    assert_eq!(r.score, Some(1.0), "{r:?}");
    assert!(
        r.flags
            .iter()
            .any(|f| f.starts_with("reattached after a restart of the green agent")),
        "{:?}",
        r.flags
    );
    let attempts = store
        .attempts(&run_id, &t.planned.id)
        .await
        .expect("attempts");
    let kinds: Vec<&str> = attempts.iter().map(|a| a.kind.as_str()).collect();
    assert_eq!(kinds, ["fresh", "reattached"], "{attempts:#?}");
    assert_eq!(attempts[0].a2a_task_id, attempts[1].a2a_task_id);
    store.close().await;
    assert_eq!(
        std::fs::read_to_string(&starts)
            .expect("count")
            .lines()
            .count(),
        1,
        "the agent started on the task once"
    );
    assert_eq!(leftovers(&run_id).await, 0);
}
