//! Agents that use no model (`oracle`, `nop`) get no Docker network at all: their container runs
//! on the engine's `none` network and the green agent reaches the adapter through the docker
//! backend's loopback forwarder. An agent that uses a model still gets its internal network,
//! through which it reaches the model proxy. The grades are what they always were.
//!
//! Evidence that does not rest on the green agent's word: the engine's event stream, watched
//! for the whole run, holds exactly one network created for the run (the model agent's), and
//! the model agent's answer needed the proxy.

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{NetworkCreations, leftovers, report_json, run_green, write_done_task};

/// Asks the proxy's built-in `mock` model, then writes `done`: without the proxy (no network)
/// the call fails and nothing is written.
const MODEL_AGENT: &str = r#"cmd:python3 -c '
import json, os, urllib.request
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
    data=json.dumps({"model": "mock", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01", "content-type": "application/json"})
json.load(urllib.request.urlopen(req, timeout=20))
' && echo done > out.txt"#;

#[tokio::test(flavor = "multi_thread")]
async fn oracle_and_nop_run_without_a_network_and_a_model_agent_keeps_its_own() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "echo-done");
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-nonet-{}", std::process::id());
    let networks = NetworkCreations::watch(&run_id).await;
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks.path().display().to_string(),
            "--agent",
            "oracle",
            "--agent",
            "nop",
            "--agent",
            MODEL_AGENT,
            "--concurrency",
            "3",
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    let created = networks.stop().await;

    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 3, "{report}");
    let by_agent = |prefix: &str| {
        trials
            .iter()
            .find(|t| t["agent"].as_str().is_some_and(|a| a.starts_with(prefix)))
            .unwrap_or_else(|| panic!("a trial of {prefix}: {report}"))
    };
    // The oracle and nop grade as they always did, reached through the forwarder.
    for (agent, score) in [("oracle", 1.0), ("nop", 0.0), ("cmd:", 1.0)] {
        let t = by_agent(agent);
        assert_eq!(t["outcome"], "completed", "{agent}: {t}");
        assert_eq!(t["score"].as_f64(), Some(score), "{agent}: {t}");
    }
    assert_eq!(
        created.len(),
        1,
        "one network for the run, the model agent's: {created:?}"
    );
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}
