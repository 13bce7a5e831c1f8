//! `green-agent serve` driven by the official Rust SDK client (a2a-client-lf), polling
//! (SendMessage, then GetTask until the task is terminal) and streaming (SendStreamingMessage):
//! the client resolves the service's card, picks its 1.0 interface, and an assessment of one
//! bundled example task (hosted `oracle` and `nop`, one repeat) ends COMPLETED with the
//! `result` data part, whose numbers equal `green-agent report` on the run; streaming, one
//! `trial:` artifact arrives per finished trial.

#![allow(clippy::unwrap_used)]

mod serve_support;

use std::collections::BTreeMap;
use std::time::Duration;

use a2a_client::A2AClientFactory;
use a2a_client::agent_card::AgentCardResolver;
use e2e_tests::{leftovers, repo_root, report_via_cli};
use futures::StreamExt;
use serde_json::{Value, json};
use serve_support::{start_serve, uuid};

const TASK: &str = "generic-csv-stats";

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

fn status_text(status: &Value) -> String {
    status["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The task's artifact named `name` (its first part), if any.
fn artifact<'a>(task: &'a Value, name: &str) -> Option<&'a Value> {
    task["artifacts"]
        .as_array()?
        .iter()
        .find(|a| a["name"] == name)
        .map(|a| &a["parts"][0])
}

async fn assess_with_lf(streaming: bool) {
    let results = tempfile::tempdir().expect("tempdir");
    let examples = repo_root().join("tasks/examples");
    let (_serve, url) = start_serve(&examples, results.path(), &[], &BTreeMap::new()).await;

    let card = AgentCardResolver::new(None)
        .resolve(&url)
        .await
        .expect("the SDK reads the service's card");
    assert_eq!(card.capabilities.streaming, Some(true));
    let (client, iface) = A2AClientFactory::builder()
        .build()
        .create_from_card_with_interface(&card)
        .await
        .expect("the SDK finds a transport on the card");
    assert_eq!(to_json(&iface.protocol_version), json!("1.0"), "{iface:?}");

    let assessment = json!({
        "participants": {"agent": "nop"},
        "config": {"task": TASK, "repeats": 1, "oracle": true},
    });
    let request: a2a::SendMessageRequest = serde_json::from_value(json!({
        "message": {"messageId": uuid(), "role": "ROLE_USER", "parts": [{"data": assessment}]},
        "configuration": {"returnImmediately": !streaming},
    }))
    .unwrap();

    let task_id = if streaming {
        let mut events = client
            .send_streaming_message(&request)
            .await
            .expect("SendStreamingMessage");
        let mut kinds = Vec::new();
        let mut task_id = None;
        let mut statuses = Vec::new();
        let mut last_state = Value::Null;
        let mut trial_roles = Vec::new();
        while let Some(ev) = tokio::time::timeout(Duration::from_secs(600), events.next())
            .await
            .expect("events keep coming")
        {
            let ev = to_json(&ev.expect("a valid event"));
            let kind = ev.as_object().unwrap().keys().next().unwrap().clone();
            match kind.as_str() {
                "task" => {
                    task_id.get_or_insert(ev["task"]["id"].as_str().unwrap().to_owned());
                }
                "statusUpdate" => {
                    let status = &ev["statusUpdate"]["status"];
                    last_state = status["state"].clone();
                    statuses.push(status_text(status));
                }
                "artifactUpdate" => {
                    let a = &ev["artifactUpdate"]["artifact"];
                    if a["name"].as_str().is_some_and(|n| n.starts_with("trial:")) {
                        trial_roles.push(a["parts"][0]["data"]["role"].clone());
                    }
                }
                _ => {}
            }
            kinds.push(kind);
        }
        assert_eq!(
            kinds[0], "task",
            "the stream starts with the Task: {kinds:?}"
        );
        assert_eq!(last_state, "TASK_STATE_COMPLETED", "{kinds:?} {statuses:?}");
        assert!(
            statuses.iter().any(|s| s.contains("1/2 trials done")),
            "a status per finished trial: {statuses:?}"
        );
        // The live mean is the participant's (nop's 0): the calibration oracle never counts.
        assert!(
            statuses
                .iter()
                .any(|s| s.contains("2/2 trials done, mean 0.00")),
            "{statuses:?}"
        );
        trial_roles.sort_by_key(Value::to_string);
        assert_eq!(
            trial_roles,
            [json!("agent"), json!("oracle")],
            "one trial artifact per trial: {kinds:?}"
        );
        task_id.expect("the stream named the task")
    } else {
        let sent = to_json(&client.send_message(&request).await.expect("SendMessage"));
        assert_eq!(
            sent["task"]["status"]["state"], "TASK_STATE_SUBMITTED",
            "the Task comes back at once: {sent}"
        );
        let task_id = sent["task"]["id"].as_str().unwrap().to_owned();
        let mut polls = 0;
        loop {
            let get: a2a::GetTaskRequest = serde_json::from_value(json!({"id": task_id})).unwrap();
            let task = to_json(&client.get_task(&get).await.expect("GetTask"));
            let state = task["status"]["state"].as_str().unwrap_or_default();
            if ![
                "TASK_STATE_SUBMITTED",
                "TASK_STATE_WORKING",
                "TASK_STATE_UNSPECIFIED",
            ]
            .contains(&state)
            {
                break;
            }
            polls += 1;
            assert!(polls < 3000, "not done within 10 minutes: {task:#}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(polls >= 1, "the assessment ran after SendMessage returned");
        task_id
    };

    let get: a2a::GetTaskRequest = serde_json::from_value(json!({"id": task_id})).unwrap();
    let task = to_json(&client.get_task(&get).await.expect("GetTask"));
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task:#}");
    for role in ["agent", "oracle"] {
        let score = task["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| &a["parts"][0]["data"])
            .find(|d| d["role"] == role && d["trial_id"].is_string())
            .unwrap_or_else(|| panic!("no trial artifact of {role}: {task:#}"))["score"]
            .as_f64();
        assert_eq!(score, Some(if role == "oracle" { 1.0 } else { 0.0 }));
    }
    let result = &artifact(&task, "result").expect("a result artifact")["data"];

    // The result's numbers equal `green-agent report` on the same run.
    let run_id = result["run_id"].as_str().expect("run id").to_owned();
    let report = report_via_cli(results.path(), &run_id, &BTreeMap::new()).await;
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 2, "{report:#}");
    // the headline is nop's alone: the calibration oracle's 1.0 never counts (it used to give
    // "score 1.00 of 2, pass rate 0.50", a 50% for nop)
    let score: f64 = trials.iter().filter_map(|t| t["score"].as_f64()).sum();
    assert_eq!(score, 1.0);
    assert_eq!(result["score"].as_f64(), Some(0.0));
    assert_eq!(result["max_score"].as_f64(), Some(1.0));
    assert_eq!(result["pass_rate"].as_f64(), Some(0.0));
    assert_eq!(result["calibration"]["oracle"]["score"].as_f64(), Some(1.0));
    assert_eq!(result["per_task"][0]["task_id"], TASK, "{result:#}");
    let summary = report["summary"].as_array().expect("summary");
    assert_eq!(summary.len(), 2, "one kind per agent: {summary:?}");
    for row in summary {
        let role = if row["agent"] == "oracle" {
            "oracle"
        } else {
            assert_eq!(row["agent"], "nop");
            "agent"
        };
        let group = if role == "oracle" {
            "calibration"
        } else {
            "per_agent"
        };
        let mine = &result[group][role];
        for key in [
            "mean",
            "strict_mean",
            "pass_at_k",
            "callback_rate",
            "cost_usd",
            "trials",
        ] {
            // numbers compared as numbers: the SDK carries data parts as protobuf Structs
            let (a, b) = (&mine[key], &row[key]);
            assert!(
                a == b || (a.as_f64().is_some() && a.as_f64() == b.as_f64()),
                "{role}.{key}: {mine} vs {row}"
            );
        }
    }
    assert_eq!(leftovers(&run_id).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lf_client_polls_an_assessment_to_its_result() {
    assess_with_lf(false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_lf_client_streams_an_assessment_to_its_result() {
    assess_with_lf(true).await;
}
