//! `--backend swarm` on a single-node Swarm of this machine's engine (initialised for the test
//! if the engine is in none, and left afterwards only then, through the machine-wide lease):
//!
//! - the node is drained while a trial's agent runs: the attempt fails as an infrastructure
//!   failure naming the node and why it left, the node is made active again, and the retry
//!   runs the agent (which had not reported) to its real grade; nothing is left behind;
//! - the node is drained while the trial grades (the agent reported, its outputs are
//!   collected): the retry grades the stored outputs, the agent does not run again;
//! - a task whose grading sandbox no node can hold fails at planning, naming the task, what it
//!   needs and the largest node.
//!
//! The node's availability is restored whatever happens (it was active before the test, or the
//! test does not drain it).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use e2e_tests::{AgentCreations, report_json, run_green, write_task};
use green_agent::store::Store;
use sandbox::child::{ChildSpec, SupervisedChild};
use sandbox::swarm::{Availability, ensure_single_node_swarm, leave_swarm_if_ours};
use sandbox::{Backend, DockerBackend, SwarmBackend};

/// The ingress pool of a Swarm this test initialises; the same as the other Swarm tests.
const TEST_ADDR_POOL: &str = "10.217.0.0/16";

const TESTS: &str = r#"import os

W = os.environ.get("WORKSPACE", "/workspace")


def test_out():
    assert open(os.path.join(W, "out.txt")).read().strip() == "done"
"#;

/// The agent: long enough to be caught running, then the right answer.
const AGENT: &str = "cmd:sleep 12; echo done > out.txt";

async fn swarm_backend(docker: &DockerBackend) -> SwarmBackend {
    let relay = sandbox::images::resolve("python").await;
    SwarmBackend::new(docker.clone(), relay)
        .await
        .expect("swarm backend")
}

/// Runs `body` on a single-node Swarm lease; afterwards the node is active again if it was
/// active before, and the lease is released, even when `body` panics.
async fn on_swarm<F, Fut>(body: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let docker = DockerBackend::connect().await.expect("docker");
    let lease_file = std::env::temp_dir().join("research-bench-swarm-lease.json");
    let lease = ensure_single_node_swarm(&docker, TEST_ADDR_POOL, &lease_file)
        .await
        .expect("a single-node Swarm");
    let swarm = swarm_backend(&docker).await;
    let node = swarm.node_id().to_owned();
    let was_active = swarm
        .capacity()
        .await
        .expect("capacity")
        .nodes
        .iter()
        .any(|n| n.id == node && n.unusable.is_none());
    let outcome = tokio::spawn(body()).await;
    if was_active {
        swarm
            .set_node_availability(&node, Availability::Active)
            .await
            .expect("the node is active again");
    }
    leave_swarm_if_ours(&docker, lease)
        .await
        .expect("release the Swarm lease");
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// The run's services, containers and networks on the engine, as `docker ... ls` lists them.
async fn objects_of_run(run_id: &str) -> Vec<String> {
    let filter = format!("label={}={run_id}", sandbox::labels::RUN);
    let mut out = Vec::new();
    for (kind, extra) in [
        ("service", None),
        ("container", Some("--all")),
        ("network", None),
    ] {
        let mut args = vec![
            kind.to_owned(),
            "ls".into(),
            "--filter".into(),
            filter.clone(),
        ];
        args.extend(extra.map(String::from));
        args.extend([
            "--format".into(),
            "{{.ID}} {{.Names}}".replace(
                ".Names",
                if kind == "container" {
                    ".Names"
                } else {
                    ".Name"
                },
            ),
        ]);
        let mut child = SupervisedChild::spawn(ChildSpec {
            program: "docker".into(),
            args,
            env: std::env::vars().collect(),
            clear_env: true,
            cwd: std::env::temp_dir(),
            limits: None,
        })
        .expect("docker ls");
        while let Some(line) = child.next_stdout_line().await {
            if !line.trim().is_empty() {
                out.push(format!("{kind} {line}"));
            }
        }
        child.wait().await;
    }
    out
}

/// Polls `probe` every 200 ms until it returns something (panics after `limit`).
async fn until<T, Fut>(what: &str, limit: Duration, mut probe: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// When the test drains the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    /// While the first attempt's agent runs (it has not reported).
    AgentRuns,
    /// While the first attempt grades (the agent reported and its outputs are collected).
    Grading,
}

#[tokio::test(flavor = "multi_thread")]
async fn a_drained_node_fails_the_attempt_as_infrastructure_and_the_retry_scores() {
    on_swarm(|| node_loss(When::AgentRuns)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_drained_while_grading_regrades_without_running_the_agent_again() {
    on_swarm(|| node_loss(When::Grading)).await;
}

async fn node_loss(when: When) {
    let docker = DockerBackend::connect().await.expect("docker");
    let swarm = swarm_backend(&docker).await;
    let node_id = swarm.node_id().to_owned();
    let capacity = swarm.capacity().await.expect("capacity");
    let node = capacity
        .nodes
        .iter()
        .find(|n| n.id == node_id)
        .expect("this node")
        .clone();
    assert!(node.unusable.is_none(), "the node takes services: {node:?}");
    assert!(node.cpus >= 1.0 && node.memory_bytes > 0, "{node:?}");

    // Draining while the agent runs: a slow agent. While grading: a quick agent, slow tests.
    let (agent, tests) = match when {
        When::AgentRuns => (AGENT.to_owned(), TESTS.to_owned()),
        When::Grading => (
            "cmd:echo done > out.txt".to_owned(),
            TESTS.replace(
                "def test_out():\n",
                "def test_out():\n    import time\n    time.sleep(10)\n",
            ),
        ),
    };
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "node-loss",
        "Write `done` to out.txt.\n",
        &tests,
        "echo done > out.txt",
        "python",
    );
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-node-loss-{:?}-{}", when, std::process::id()).to_lowercase();
    let run_dir = results.path().join(&run_id);
    let args: Vec<String> = [
        "run",
        "--tasks",
        &dir.display().to_string(),
        "--agents",
        &agent,
        "--concurrency",
        "2",
        "--infra-retries",
        "3",
        "--backend",
        "swarm",
        "--run-id",
        &run_id,
        "--results-dir",
        &results.path().display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    // Agent containers created (Swarm task containers carry the labels): the evidence,
    // independent of the green agent, of how often the agent ran.
    let creations = AgentCreations::watch(&run_id).await;
    let started = Instant::now();
    let run = tokio::spawn(async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_green(&args, &BTreeMap::new(), Duration::from_secs(900)).await
    });

    // The first attempt is recorded once the agent's card is served and the task goes out;
    // its outputs once collected (grading starts then).
    let store = until("the run's store", Duration::from_secs(300), || {
        let run_dir = run_dir.clone();
        let run_id = run_id.clone();
        async move { Store::open_existing(&run_dir, &run_id).await.ok() }
    })
    .await;
    let trial = until("the planned trial", Duration::from_secs(60), || async {
        store
            .trials(&run_id)
            .await
            .ok()
            .and_then(|t| t.first().map(|t| t.planned.id.clone()))
    })
    .await;
    until("the first attempt", Duration::from_secs(300), || async {
        store
            .attempts(&run_id, &trial)
            .await
            .ok()
            .filter(|a| match when {
                When::AgentRuns => !a.is_empty(),
                When::Grading => a.first().is_some_and(|a| a.collected.is_some()),
            })
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let caught = started.elapsed();
    let before = swarm
        .set_node_availability(&node_id, Availability::Drain)
        .await
        .expect("drain");
    assert_eq!(before, Availability::Active);
    let drained = Instant::now();

    // The attempt fails as an infrastructure failure naming the node and why it left.
    let infra_error = || async {
        store
            .events(&run_id, Some(&trial))
            .await
            .ok()?
            .into_iter()
            .find(|e| e.kind == "infra_error")
            .map(|e| e.data["error"].as_str().unwrap_or_default().to_owned())
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let error = loop {
        if let Some(e) = infra_error().await {
            break e;
        }
        if Instant::now() > deadline || run.is_finished() {
            let events = store.events(&run_id, Some(&trial)).await;
            let attempts = store.attempts(&run_id, &trial).await;
            panic!("no infra_error event; events: {events:#?}; attempts: {attempts:#?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let detected = drained.elapsed();
    swarm
        .set_node_availability(&node_id, Availability::Active)
        .await
        .expect("active again");
    let reactivated = Instant::now();
    assert!(
        error.contains(&format!("node {} ({node_id}) left", node.name))
            && error.contains("availability drain"),
        "{error}"
    );

    // The retry is graded.
    let out = run.await.expect("the run");
    let retried = reactivated.elapsed();
    out.assert_success();
    let agents = creations.stop().await;
    let report = report_json(results.path(), &run_id);
    let t = &report["trials"][0];
    assert_eq!(t["state"], "done", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "the retry was graded: {t}");
    let attempts = store.attempts(&run_id, &trial).await.expect("attempts");
    assert!(attempts.len() >= 2, "{attempts:?}");
    assert_eq!(t["attempts"].as_u64(), Some(attempts.len() as u64), "{t}");
    let first = &attempts[0];
    assert_eq!(first.ended.as_deref(), Some("infra_error"), "{first:?}");
    assert!(
        first
            .detail
            .as_deref()
            .is_some_and(|d| d.contains(&node.name)),
        "{first:?}"
    );
    let last = attempts.last().expect("attempts");
    assert_eq!(last.ended.as_deref(), Some("finished"), "{attempts:?}");
    // Every attempt but the last ended as an infrastructure failure (none as the agent's).
    assert!(
        attempts[..attempts.len() - 1]
            .iter()
            .all(|a| a.ended.as_deref() == Some("infra_error")),
        "{attempts:?}"
    );
    // A trial's agent side on Swarm is two containers with the agent role: the service's task
    // and the relay of its network.
    let agent_runs = agents.get(&trial).copied().unwrap_or(0) / 2;
    match when {
        When::AgentRuns => {
            assert!(
                first.driven.is_none() && first.collected.is_none(),
                "the lost agent had not reported: running it again repeats nothing: {first:?}"
            );
            assert!(last.collected.is_some(), "{last:?}");
            assert_eq!(
                agent_runs,
                attempts.len(),
                "one agent per attempt: {agents:?}"
            );
        }
        When::Grading => {
            assert!(first.collected.is_some(), "{first:?}");
            assert_eq!(
                agent_runs, 1,
                "the agent had reported: the retry grades its stored outputs, it does not run again: {agents:?}"
            );
        }
    }
    // The effective concurrency and why were printed.
    assert!(
        out.stderr.contains("concurrency 2: --concurrency 2 (the cluster holds at least that many): a trial reserves"),
        "{}",
        out.stderr
    );
    store.close().await;

    // Nothing of the run is left (reaping counts what it removes) once Swarm has finished
    // removing the task containers of deleted services (it does so on its own, a moment later).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut left = objects_of_run(&run_id).await;
    if !left.is_empty() {
        eprintln!("still going away when the run ended: {left:?}");
    }
    while !left.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        left = objects_of_run(&run_id).await;
    }
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(
        swarm.reap(Some(&run_id)).await.expect("reap"),
        0,
        "no service, container or network of the run is left"
    );
    eprintln!(
        "node loss ({when:?}): drained {:.1} s after start; failure recorded {:.1} s after the \
         drain; retry finished {:.1} s after reactivation; {} attempt(s), {agent_runs} agent \
         run(s); whole run {:.1} s",
        caught.as_secs_f64(),
        detected.as_secs_f64(),
        retried.as_secs_f64(),
        attempts.len(),
        started.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_no_node_can_hold_fails_at_planning() {
    on_swarm(too_large).await;
}

async fn too_large() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "huge",
        "Write `done` to out.txt.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    let toml = dir.join("task.toml");
    let text = std::fs::read_to_string(&toml).expect("task.toml");
    // 1 TiB (the largest a task may ask): more than any node of this machine.
    std::fs::write(
        &toml,
        text.replace("memory_mb = 512", "memory_mb = 1048576"),
    )
    .expect("write");
    let results = tempfile::tempdir().expect("tempdir");
    let out = run_green(
        &[
            "run",
            "--tasks",
            &dir.display().to_string(),
            "--agents",
            "oracle",
            "--backend",
            "swarm",
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(300),
    )
    .await;
    assert!(!out.exit.success(), "{}", out.stderr);
    // The agent's memory is capped by --memory-mb (2 GiB); the grader takes the task's.
    assert!(
        out.stderr.contains("task huge: its grading sandbox needs 1 CPUs, 1024.0 GiB memory, more than any node of the swarm backend can hold: the largest node is "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("lower the task's environment.cpus / memory_mb"),
        "{}",
        out.stderr
    );
    // Nothing was stored: the run never started.
    for entry in std::fs::read_dir(results.path())
        .expect("results")
        .flatten()
    {
        assert!(
            !Path::new(&entry.path()).join("store.sqlite").exists(),
            "{}",
            entry.path().display()
        );
    }
}
