//! `--backend swarm` on a single-node Swarm of this machine's engine (initialised for the test
//! if the engine is in none, and left afterwards only then, through a machine-wide lease): the
//! bundled suite with oracle and nop scores 1.0 and 0.0 on every task, leaves no service,
//! network or container, and every trial's grade equals the docker backend's, over both swarm
//! transports (`http`: files and grading through each sandbox's runner; `engine`: through this
//! engine).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use e2e_tests::{report_json, run_green};
use sandbox::swarm::{ensure_single_node_swarm, leave_swarm_if_ours};
use sandbox::{Backend, DockerBackend, SwarmBackend};

/// The ingress pool of a Swarm this test initialises (apart from the platform's 10.213.0.0/16
/// and the overlays' 10.214.0.0/16); the same as the sandbox crate's Swarm tests.
const TEST_ADDR_POOL: &str = "10.217.0.0/16";

/// Runs the bundled suite with oracle and nop on `backend` (with `env`); returns the report's
/// trials.
async fn assess(
    backend: &str,
    env: &BTreeMap<String, String>,
    results: &Path,
    run_id: &str,
) -> Vec<serde_json::Value> {
    let out = run_green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--agents",
            "oracle,nop",
            "--concurrency",
            "2",
            "--backend",
            backend,
            "--run-id",
            run_id,
            "--results-dir",
            &results.display().to_string(),
        ],
        env,
        Duration::from_secs(2400),
    )
    .await;
    out.assert_success();
    report_json(results, run_id)["trials"]
        .as_array()
        .expect("trials")
        .clone()
}

/// What must not differ between backends: the trial's score and status, each dimension's
/// score and status, each grader's status, score and test verdicts (not its timings or logs).
fn grade_essence(trial: &serde_json::Value) -> serde_json::Value {
    let grade = &trial["grade"];
    let dimensions: BTreeMap<String, serde_json::Value> = grade["dimensions"]
        .as_object()
        .map(|d| {
            d.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        serde_json::json!([v["score"], v["status"], v["passed"]]),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let graders: Vec<serde_json::Value> = grade["graders"]
        .as_array()
        .map(|gs| {
            gs.iter()
                .map(|g| {
                    let tests: Vec<serde_json::Value> = g["tests"]
                        .as_array()
                        .map(|ts| {
                            ts.iter()
                                .map(|t| serde_json::json!([t["name"], t["status"]]))
                                .collect()
                        })
                        .unwrap_or_default();
                    serde_json::json!({
                        "name": g["name"], "status": g["status"], "score": g["score"], "tests": tests,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "score": trial["score"],
        "status": grade["status"],
        "passed": grade["passed"],
        "dimensions": dimensions,
        "graders": graders,
    })
}

fn by_pair(trials: &[serde_json::Value]) -> BTreeMap<(String, String), serde_json::Value> {
    trials
        .iter()
        .map(|t| {
            (
                (
                    t["task_id"].as_str().expect("task").to_owned(),
                    t["agent"].as_str().expect("agent").to_owned(),
                ),
                t.clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bundled_suite_on_swarm_scores_and_grades_as_on_docker() {
    let docker = DockerBackend::connect().await.expect("docker");
    let lease_file = std::env::temp_dir().join("research-bench-swarm-lease.json");
    let lease = ensure_single_node_swarm(&docker, TEST_ADDR_POOL, &lease_file)
        .await
        .expect("a single-node Swarm");
    let outcome = tokio::spawn(check_suite()).await;
    leave_swarm_if_ours(&docker, lease)
        .await
        .expect("release the Swarm lease");
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn check_suite() {
    let results = tempfile::tempdir().expect("tempdir");
    let pid = std::process::id();
    let swarm_run = format!("e2e-swarm-{pid}");
    let docker_run = format!("e2e-swarm-docker-{pid}");
    let engine_run = format!("e2e-swarm-engine-{pid}");
    // Every backend at once (the engine is shared; grades must not depend on load): swarm over
    // the `http` transport (files and grading through each sandbox's runner) and over the
    // `engine` transport (this engine's archive and exec APIs), and docker.
    // The two swarm runs take their overlays from apart pools (two processes allocating from
    // one pool could race for a subnet).
    let http = BTreeMap::from([("RB_SWARM_TRANSPORT".to_string(), "http".to_string())]);
    let engine_env = BTreeMap::from([
        ("RB_SWARM_TRANSPORT".to_string(), "engine".to_string()),
        (
            "RB_SWARM_SUBNET_POOL".to_string(),
            "10.216.0.0/16:26".to_string(),
        ),
    ]);
    let none = BTreeMap::new();
    let (swarm_trials, engine_trials, docker_trials) = tokio::join!(
        assess("swarm", &http, results.path(), &swarm_run),
        assess("swarm", &engine_env, results.path(), &engine_run),
        assess("docker", &none, results.path(), &docker_run)
    );
    let tasks = std::fs::read_dir(e2e_tests::repo_root().join("tasks/examples"))
        .expect("examples")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().join("task.toml").is_file())
        })
        .count();
    assert_eq!(
        swarm_trials.len(),
        tasks * 2,
        "one oracle and one nop trial per task"
    );
    let mut problems = Vec::new();
    for t in &swarm_trials {
        let agent = t["agent"].as_str().expect("agent");
        let task = t["task_id"].as_str().expect("task");
        assert_eq!(t["state"], "done", "{t}");
        assert_eq!(t["isolated"], true);
        let expected = if agent == "oracle" { 1.0 } else { 0.0 };
        if t["score"].as_f64() != Some(expected) {
            problems.push(format!(
                "{agent} on {task}: score {} on swarm (expected {expected}); grade: {}",
                t["score"], t["grade"]
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // Every bundled task, both agents: the same grade on both backends.
    let swarm = by_pair(&swarm_trials);
    let docker = by_pair(&docker_trials);
    assert_eq!(
        swarm.keys().collect::<Vec<_>>(),
        docker.keys().collect::<Vec<_>>()
    );
    let engine = by_pair(&engine_trials);
    assert_eq!(
        engine.keys().collect::<Vec<_>>(),
        docker.keys().collect::<Vec<_>>()
    );
    for (pair, s) in &swarm {
        assert_eq!(
            grade_essence(s),
            grade_essence(&docker[pair]),
            "{pair:?}: the swarm (http) grade differs from the docker grade"
        );
        assert_eq!(
            grade_essence(&engine[pair]),
            grade_essence(&docker[pair]),
            "{pair:?}: the swarm (engine) grade differs from the docker grade"
        );
    }

    // Nothing of either run is left: no service, container or network (reaping counts them).
    let engine = DockerBackend::connect().await.expect("docker");
    let relay = sandbox::images::resolve("python").await;
    let swarm_backend = SwarmBackend::new(engine.clone(), relay)
        .await
        .expect("swarm backend");
    for run in [&swarm_run, &engine_run] {
        assert_eq!(
            swarm_backend.reap(Some(run)).await.expect("reap"),
            0,
            "no service, container, network, config or secret of {run} is left"
        );
    }
    assert_eq!(
        engine.reap(Some(&docker_run)).await.expect("reap"),
        0,
        "no container or network of the docker run is left"
    );
}
