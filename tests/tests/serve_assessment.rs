//! `green-agent serve` driven by the official a2a-sdk clients, 1.x and 0.3.x (AgentBeats'
//! version): an assessment with two participants (our hosted `oracle` and an external a2a-sdk
//! agent started here) streams one status message and one artifact per finished trial and ends
//! COMPLETED with the result data part, whose numbers equal `green-agent report` on the run.

mod serve_support;

use std::collections::BTreeMap;

use e2e_tests::{leftovers, report_via_cli};
use serde_json::{Value, json};
use serve_support::{sdk_client, start_sdk_agent, start_serve, suite};

/// JSON equality with numbers compared as numbers (the 1.x SDK carries data parts as protobuf
/// Structs, whose numbers are all doubles).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

async fn assess_with_sdk(v03: bool, mode: &str) {
    let tasks = suite();
    let results = tempfile::tempdir().expect("tempdir");
    let scratch = tempfile::tempdir().expect("tempdir");
    let (_agent, agent_url, count) = start_sdk_agent(scratch.path()).await;
    let (_serve, url) = start_serve(tasks.path(), results.path(), &[], &BTreeMap::new()).await;
    let request = json!({
        "participants": {"agent": agent_url},
        "config": {"tasks": ["e2e"], "oracle": true},
    });
    let out = sdk_client(v03, &url, &request, mode).await;

    let (submitted, completed) = if v03 {
        ("submitted", "completed")
    } else {
        ("TASK_STATE_SUBMITTED", "TASK_STATE_COMPLETED")
    };
    assert_eq!(out["first_state"], submitted, "{out}");
    assert_eq!(out["final_state"], completed, "{out}");
    let statuses: Vec<&str> = out["statuses"]
        .as_array()
        .expect("statuses")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        statuses.last().is_some_and(|s| s.contains(
            "2 trial(s); score agent 1.00 of 1, pass rate 1.00 \
                 (calibration, not scored: oracle 1.00 of 1, pass rate 1.00)"
        )),
        "the final status sums the run up: {statuses:?}"
    );
    if mode == "stream" {
        // Every status is an event when streaming; a poller sees only the ones its polls
        // catch (two trials may finish between two polls).
        assert!(
            statuses.iter().any(|s| s.contains("1/2 trials done")),
            "a status per finished trial: {statuses:?}"
        );
        assert!(
            statuses
                .iter()
                .any(|s| s.contains("2/2 trials done, mean 1.00")),
            "{statuses:?}"
        );
        assert_eq!(
            out["streamed_trials"], 2,
            "one artifact event per trial: {out}"
        );
    }
    let trials = out["trials"].as_array().expect("trial artifacts");
    assert_eq!(trials.len(), 2, "{out}");
    let mut roles: Vec<&str> = trials.iter().filter_map(|t| t["role"].as_str()).collect();
    roles.sort_unstable();
    assert_eq!(roles, ["agent", "oracle"]);
    for t in trials {
        assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    }
    let artifacts: Vec<&str> = out["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for name in ["result", "report.md", "report.json", "report.html"] {
        assert!(artifacts.contains(&name), "{name} in {artifacts:?}");
    }

    // The result equals `green-agent report` on the same run.
    let result = &out["result"];
    let run_id = result["run_id"].as_str().expect("run id").to_owned();
    assert_eq!(
        out["run_id"],
        run_id.as_str(),
        "the task's metadata names the run"
    );
    let report = report_via_cli(results.path(), &run_id, &BTreeMap::new()).await;
    let report_trials = report["trials"].as_array().expect("trials");
    // the headline is the participant's: the calibration oracle's trials never count
    let participant: Vec<&Value> = report_trials
        .iter()
        .filter(|t| t["agent"] != "oracle")
        .collect();
    assert_eq!(participant.len(), 1);
    let score: f64 = participant
        .iter()
        .map(|t| t["score"].as_f64().unwrap_or(0.0))
        .sum();
    assert_eq!(result["score"].as_f64(), Some(score));
    assert_eq!(result["max_score"].as_f64(), Some(participant.len() as f64));
    let passed = participant
        .iter()
        .filter(|t| t["passed"] == true && !t["score"].is_null())
        .count();
    assert_eq!(
        result["pass_rate"].as_f64(),
        Some(passed as f64 / participant.len() as f64)
    );
    // Numbers cross the 1.x SDK's protobuf Struct as doubles.
    assert_eq!(result["trials"].as_f64(), Some(report_trials.len() as f64));
    let role_of = |agent: &str| {
        if agent == "oracle" {
            "oracle".to_owned()
        } else {
            assert_eq!(agent, format!("a2a:{agent_url}"));
            "agent".to_owned()
        }
    };
    let summary = report["summary"].as_array().expect("summary");
    assert_eq!(summary.len(), 2, "one kind per agent: {summary:?}");
    for row in summary {
        let role = role_of(row["agent"].as_str().expect("agent"));
        // the oracle calibrates: reported apart, never a participant
        let group = if role == "oracle" {
            "calibration"
        } else {
            "per_agent"
        };
        let mine = &result[group][&role];
        for key in [
            "mean",
            "strict_mean",
            "pass_at_k",
            "callback_rate",
            "cost_usd",
            "trials",
        ] {
            assert!(same(&mine[key], &row[key]), "{role}.{key}: {mine} vs {row}");
        }
        assert!(same(&mine["by_kind"][0], row), "{role}: {mine} vs {row}");
    }
    assert_eq!(
        std::fs::read_to_string(&count)
            .unwrap_or_default()
            .lines()
            .count(),
        1,
        "the external agent got the task once"
    );
    assert_eq!(leftovers(&run_id).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_1x_client_streams_an_assessment_to_its_result() {
    assess_with_sdk(false, "stream").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_03_client_streams_an_assessment_to_its_result() {
    assess_with_sdk(true, "stream").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_03_client_polls_an_assessment_to_its_result() {
    assess_with_sdk(true, "poll").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sdk_1x_client_polls_an_assessment_to_its_result() {
    assess_with_sdk(false, "poll").await;
}
