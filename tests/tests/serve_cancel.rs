//! Queue, shared trial slots and cancel in `green-agent serve`: with one assessment at a time
//! a second request waits with its queue position (and a cancel while queued runs nothing);
//! assessments running together share the service's trial slots; CancelTask mid-run stops the
//! run, leaves no container, keeps the finished trials, and `green-agent resume` finishes the
//! rest without running a finished trial again.

mod serve_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{leftovers, report_json, run_green};
use serde_json::{Value, json};
use serve_support::{
    first_event, get_task, rpc, start_serve, status_text, submit, suite, trial_artifacts, wait_for,
};

#[tokio::test(flavor = "multi_thread")]
async fn cancel_stops_the_run_and_keeps_what_finished() {
    let tasks = suite();
    let results = tempfile::tempdir().expect("tempdir");
    let (_serve, url) = start_serve(
        tasks.path(),
        results.path(),
        &["--max-running", "1", "--concurrency", "1"],
        &BTreeMap::new(),
    )
    .await;
    let request =
        json!({"participants": {"agent": "nop"}, "config": {"tasks": "e2e", "repeats": 4}});
    let first = submit(&url, &request).await;
    let first_id = first["id"].as_str().expect("id").to_owned();
    let second = submit(&url, &request).await;
    let second_id = second["id"].as_str().expect("id").to_owned();

    // The second waits, told its position; canceled there, it never runs.
    let queued = wait_for(&url, &second_id, "queued", |t| {
        status_text(t).contains("queued: position 1 of 1")
    })
    .await;
    assert_eq!(
        queued["status"]["state"], "TASK_STATE_SUBMITTED",
        "{queued}"
    );
    let (_, canceled) = rpc(&url, true, "CancelTask", json!({"id": second_id}), None).await;
    assert_eq!(
        canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    assert!(
        status_text(&canceled["result"]).contains("nothing ran"),
        "{canceled}"
    );
    assert!(
        canceled["result"]["metadata"]["run_id"].is_null(),
        "no run: {canceled}"
    );

    // The first is canceled after its first trial.
    let running = wait_for(&url, &first_id, "a finished trial", |t| {
        trial_artifacts(t) >= 1
    })
    .await;
    assert!(status_text(&running).contains("trials done"), "{running}");
    let run_id = running["metadata"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    // A client that lost its stream reattaches (1.0 SubscribeToTask, 0.3 tasks/resubscribe):
    // the first event is the task as it is now.
    let sub = first_event(&url, true, "SubscribeToTask", json!({"id": first_id})).await;
    assert_eq!(sub["result"]["task"]["id"], first_id.as_str(), "{sub}");
    assert_eq!(
        sub["result"]["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{sub}"
    );
    let sub = first_event(&url, false, "tasks/resubscribe", json!({"id": first_id})).await;
    assert_eq!(sub["result"]["kind"], "task", "{sub}");
    assert_eq!(sub["result"]["id"], first_id.as_str(), "{sub}");
    let (_, canceled) = rpc(&url, true, "CancelTask", json!({"id": first_id}), None).await;
    let task = &canceled["result"];
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    assert!(status_text(task).contains("canceled: removed"), "{task}");
    // Canceling again is refused (-32002); a finished task is read, not subscribed to.
    let (_, again) = rpc(&url, true, "CancelTask", json!({"id": first_id}), None).await;
    assert_eq!(again["error"]["code"], -32002, "{again}");
    let sub = first_event(&url, true, "SubscribeToTask", json!({"id": first_id})).await;
    assert_eq!(sub["error"]["code"], -32004, "{sub}");
    assert_eq!(leftovers(&run_id).await, 0, "no container or network left");

    // What finished is kept, and listed in the result.
    let kept = trial_artifacts(&get_task(&url, &first_id).await);
    assert!(
        (1..4).contains(&kept),
        "{kept} trial(s) finished before the cancel"
    );
    let result = get_task(&url, &first_id).await["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .find(|a| a["name"] == "result")
        .cloned()
        .expect("a result artifact");
    assert_eq!(result["parts"][0]["data"]["finished"], kept, "{result}");
    let report = report_json(results.path(), &run_id);
    assert_eq!(report["run"]["status"], "canceled");
    let finished_before: BTreeMap<String, Value> = report["trials"]
        .as_array()
        .expect("trials")
        .iter()
        .filter(|t| t["state"] == "done")
        .map(|t| (t["id"].as_str().unwrap_or_default().to_owned(), t.clone()))
        .collect();
    assert_eq!(finished_before.len(), kept);

    // The store is resumable: the rest runs, the finished trials are not run again.
    let resumed = run_green(
        &[
            "resume",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    resumed.assert_success();
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 4);
    assert!(trials.iter().all(|t| t["state"] == "done"), "{report}");
    for (id, before) in &finished_before {
        let after = trials
            .iter()
            .find(|t| t["id"] == id.as_str())
            .expect("trial");
        assert_eq!(
            after["phases_ms"], before["phases_ms"],
            "trial {id} did not run again"
        );
        assert_eq!(after["attempts"], before["attempts"], "trial {id}");
    }
    assert_eq!(leftovers(&run_id).await, 0);
}

/// Two assessments at once, each allowed 2 trials at a time, on a service with 1 trial slot:
/// no two trials of the service ever overlap.
#[tokio::test(flavor = "multi_thread")]
async fn assessments_share_the_services_trial_slots() {
    let tasks = suite();
    let results = tempfile::tempdir().expect("tempdir");
    let (_serve, url) = start_serve(
        tasks.path(),
        results.path(),
        &[
            "--max-running",
            "2",
            "--max-trials-running",
            "1",
            "--concurrency",
            "2",
        ],
        &BTreeMap::new(),
    )
    .await;
    let request = json!({"participants": {"agent": "nop"},
        "config": {"tasks": "e2e", "repeats": 2, "concurrency": 2}});
    let ids = [
        submit(&url, &request).await["id"]
            .as_str()
            .expect("id")
            .to_owned(),
        submit(&url, &request).await["id"]
            .as_str()
            .expect("id")
            .to_owned(),
    ];
    let mut intervals = Vec::new();
    for id in &ids {
        let task = wait_for(&url, id, "completion", |t| {
            t["status"]["state"] == "TASK_STATE_COMPLETED"
                || t["status"]["state"] == "TASK_STATE_FAILED"
        })
        .await;
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
        let run_id = task["metadata"]["run_id"]
            .as_str()
            .expect("run id")
            .to_owned();
        let store =
            green_agent::store::Store::open_existing(&results.path().join(&run_id), &run_id)
                .await
                .expect("store");
        for t in store.trials(&run_id).await.expect("trials") {
            intervals.push((
                t.started_at.expect("started"),
                t.finished_at.expect("finished"),
                run_id.clone(),
            ));
        }
        store.close().await;
        assert_eq!(leftovers(&run_id).await, 0);
    }
    assert_eq!(intervals.len(), 4);
    // RFC 3339 UTC timestamps of one format sort as text.
    intervals.sort();
    for pair in intervals.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "two trials ran at once on a service with one trial slot: {pair:?}"
        );
    }
}
