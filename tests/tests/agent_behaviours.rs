//! Real A2A agents (the official a2a-sdk, Python, in the repository venv) that behave in ways
//! the green agent must handle: each gives its specified outcome with the agent's reason in the
//! report, and no agent ever gets the task twice.
//!
//! The agent is `tests/tests/agents/sdk_agent.py MODE COUNT_FILE` (it appends a line to
//! COUNT_FILE whenever it starts on the task); the task asks for `out.txt` holding `done`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use e2e_tests::{
    KilledOnDrop, leftovers, report_json, run_green, start_sdk_agent, write_done_task,
};
use serde_json::Value;

/// Starts the SDK agent in `mode`; returns it, its agent spec and its start-count file.
async fn start_agent(mode: &str, dir: &std::path::Path) -> (KilledOnDrop, String, PathBuf) {
    let (agent, port, count) = start_sdk_agent(mode, dir).await;
    (agent, format!("a2a:http://127.0.0.1:{port}"), count)
}

/// Runs the one-task assessment against the agent in `mode`; returns the trial's report entry
/// and how many times the agent started on the task.
async fn assess(mode: &str, extra: &[&str]) -> (Value, usize) {
    assess_with(mode, extra, &BTreeMap::new()).await.0
}

/// [`assess`] with extra environment; also returns every byte the run left in its results
/// folder (to check what was stored).
async fn assess_with(
    mode: &str,
    extra: &[&str],
    env: &BTreeMap<String, String>,
) -> ((Value, usize), Vec<u8>) {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "behaviour");
    let scratch = tempfile::tempdir().expect("tempdir");
    let (agent, spec, count) = start_agent(mode, scratch.path()).await;
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-behaviour-{mode}-{}", std::process::id());
    let tasks_arg = tasks.path().display().to_string();
    let results_arg = results.path().display().to_string();
    let mut args = vec![
        "run",
        "--tasks",
        &tasks_arg,
        "--agent",
        &spec,
        "--run-id",
        &run_id,
        "--results-dir",
        &results_arg,
        "--poll-interval",
        "200ms",
    ];
    args.extend_from_slice(extra);
    let out = run_green(&args, env, Duration::from_secs(400)).await;
    drop(agent);
    assert!(
        results.path().join(&run_id).join("report.json").is_file(),
        "no report; stdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    let report = report_json(results.path(), &run_id);
    let trial = report["trials"][0].clone();
    assert!(
        !trial.is_null(),
        "no trial in the report; stdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    let starts = std::fs::read_to_string(&count)
        .unwrap_or_default()
        .lines()
        .count();
    assert_eq!(leftovers(&run_id).await, 0);
    let mut stored = out.stdout.into_bytes();
    stored.extend(out.stderr.into_bytes());
    for entry in walk(results.path()) {
        stored.extend(std::fs::read(entry).unwrap_or_default());
    }
    ((trial, starts), stored)
}

fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn flags(t: &Value) -> String {
    t["flags"].to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_blocking_60s_on_send_runs_exactly_once_and_scores() {
    let (t, starts) = assess("block", &[]).await;
    assert_eq!(starts, 1, "the agent got the task once: {t}");
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    assert_eq!(t["attempts"], 1, "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streaming_only_agent_scores() {
    let (t, starts) = assess("stream-only", &[]).await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_agent_keeps_its_reason() {
    let (t, starts) = assess("failed", &[]).await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "failed", "{t}");
    assert!(
        t["error"]
            .as_str()
            .is_some_and(|e| e.contains("I could not find the input data")),
        "{t}"
    );
    assert!(flags(&t).contains("agent_failed"), "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rejecting_agent_keeps_its_reason() {
    let (t, starts) = assess("rejected", &[]).await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "failed", "{t}");
    assert!(
        t["error"]
            .as_str()
            .is_some_and(|e| e.contains("I only work on astronomy tasks")),
        "{t}"
    );
    assert!(flags(&t).contains("agent_rejected"), "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_asking_for_input_gets_one_reply_and_finishes() {
    let (t, starts) = assess("input-once", &["--input-reply", "Use plain text."]).await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    let f = flags(&t);
    assert!(f.contains("Which output format do you want?"), "{t}");
    assert!(f.contains("Use plain text."), "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_asking_twice_is_canceled_with_its_question_shown() {
    let (t, starts) = assess("input-twice", &[]).await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "failed", "{t}");
    assert!(
        t["error"]
            .as_str()
            .is_some_and(|e| e.contains("I still need the output format")),
        "{t}"
    );
    assert!(flags(&t).contains("input_required_again"), "{t}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_message_result_is_collected_and_scores() {
    let (t, starts) = assess("message", &[]).await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    assert!(flags(&t).contains("answered with a message"), "{t}");
    let names: Vec<&str> = t["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(
        names.contains(&"file:out.txt") && names.contains(&"answer"),
        "{t}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unnamed_text_artifact_becomes_the_answer_flagged() {
    let (t, starts) = assess("unnamed", &[]).await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    assert!(flags(&t).contains("taken as the answer"), "{t}");
    assert!(
        t["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .any(|a| a["name"] == "answer"),
        "{t}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_behind_a_bearer_token_gets_it_from_the_environment_only() {
    const SECRET: &str = "e2e-secret-token";
    let env = BTreeMap::from([("E2E_AGENT_TOKEN".to_owned(), format!("Bearer {SECRET}"))]);
    let ((t, starts), stored) = assess_with(
        "auth",
        &["--agent-header", "Authorization=env:E2E_AGENT_TOKEN"],
        &env,
    )
    .await;
    assert_eq!(starts, 1, "{t}");
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    let text = String::from_utf8_lossy(&stored);
    assert!(!text.contains(SECRET), "the token was stored or printed");

    // Without the header the agent refuses (HTTP 401): a fixed refusal, not retried.
    let (t, starts) = assess("auth", &[]).await;
    assert_eq!(starts, 0, "{t}");
    assert_eq!(t["outcome"], "agent_incompatible", "{t}");
    assert_eq!(t["attempts"], 1, "{t}");
    assert!(
        t["error"].as_str().is_some_and(|e| e.contains("401")),
        "{t}"
    );
}
