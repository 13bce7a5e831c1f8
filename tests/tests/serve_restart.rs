//! A `green-agent serve` killed (SIGKILL, or SIGTERM) mid-assessment and started again on the
//! same results directory resumes the assessment under the same A2A task id: it finishes, the
//! trials finished before the kill are not run again, and no container is left.

mod serve_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{leftovers, report_via_cli};
use serde_json::{Value, json};
use serve_support::{
    get_task, listed_after, start_serve, status_text, submit, suite, trial_artifacts, wait_for,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_service_resumes_its_assessment_without_running_a_trial_twice() {
    stop_and_restart(false).await;
}

/// SIGTERM: the service stops its run (the run's containers removed, the run recorded
/// `interrupted`), exits 143, and the next start finishes the assessment.
#[tokio::test(flavor = "multi_thread")]
async fn a_terminated_service_cleans_up_and_resumes_its_assessment() {
    stop_and_restart(true).await;
}

async fn stop_and_restart(graceful: bool) {
    let tasks = suite();
    let results = tempfile::tempdir().expect("tempdir");
    let args = ["--concurrency", "1"];
    let (serve, url) = start_serve(tasks.path(), results.path(), &args, &BTreeMap::new()).await;
    let request =
        json!({"participants": {"agent": "nop"}, "config": {"tasks": "e2e", "repeats": 4}});
    let id = submit(&url, &request).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let running = wait_for(&url, &id, "a finished trial", |t| trial_artifacts(t) >= 1).await;
    let run_id = running["metadata"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    let mut serve = serve;
    if graceful {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(serve.0.pid()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let exit = tokio::time::timeout(Duration::from_secs(120), serve.0.wait())
            .await
            .expect("the service stops within 120 s of SIGTERM");
        assert_eq!(exit.code, Some(143), "{exit:?}: {}", serve.0.stderr_tail());
        assert_eq!(
            leftovers(&run_id).await,
            0,
            "the service removed its containers"
        );
    } else {
        serve.0.kill_tree(); // SIGKILL: no cleanup at all
    }
    drop(serve);

    let before = report_via_cli(results.path(), &run_id, &BTreeMap::new()).await;
    if graceful {
        assert_eq!(before["run"]["status"], "interrupted", "{}", before["run"]);
    }
    let done_before: BTreeMap<String, Value> = before["trials"]
        .as_array()
        .expect("trials")
        .iter()
        .filter(|t| t["state"] == "done")
        .map(|t| (t["id"].as_str().unwrap_or_default().to_owned(), t.clone()))
        .collect();
    assert!(
        (1..4).contains(&done_before.len()),
        "killed mid-run: {} done",
        done_before.len()
    );

    let (_serve, url) = start_serve(tasks.path(), results.path(), &args, &BTreeMap::new()).await;
    let task = wait_for(&url, &id, "completion after the restart", |t| {
        t["status"]["state"]
            .as_str()
            .is_some_and(|s| s != "TASK_STATE_WORKING" && s != "TASK_STATE_SUBMITTED")
    })
    .await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(task["metadata"]["run_id"], run_id.as_str(), "the same run");
    assert!(status_text(&task).contains("4 trial(s)"), "{task}");
    let names: Vec<&str> = task["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .filter(|n| n.starts_with("trial:"))
        .collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!((names.len(), unique.len()), (4, 4), "{names:?}");

    let after = report_via_cli(results.path(), &run_id, &BTreeMap::new()).await;
    let trials = after["trials"].as_array().expect("trials");
    assert!(trials.iter().all(|t| t["state"] == "done"), "{after}");
    for (trial, old) in &done_before {
        let new = trials
            .iter()
            .find(|t| t["id"] == trial.as_str())
            .expect("trial");
        assert_eq!(
            new["phases_ms"], old["phases_ms"],
            "trial {trial} did not run again"
        );
    }
    assert_eq!(get_task(&url, &id).await["id"], id.as_str());

    // A finished task's status is stamped once: reads keep its stamp, and ListTasks with
    // `statusTimestampAfter` lists it from that stamp on, never after it (an old task is not
    // listed as changed however often it was read).
    let stamp = task["status"]["timestamp"]
        .as_str()
        .expect("status timestamp")
        .to_owned();
    for _ in 0..2 {
        assert_eq!(
            get_task(&url, &id).await["status"]["timestamp"],
            stamp.as_str()
        );
    }
    let at: chrono::DateTime<chrono::Utc> = stamp.parse().expect("an RFC 3339 stamp");
    let later = (at + chrono::Duration::milliseconds(1)).to_rfc3339();
    assert!(
        listed_after(&url, &stamp).await.contains(&id),
        "listed from its stamp on"
    );
    assert!(
        !listed_after(&url, &later).await.contains(&id),
        "a task finished before {later} is not listed as changed after it"
    );
    assert_eq!(leftovers(&run_id).await, 0);
}
