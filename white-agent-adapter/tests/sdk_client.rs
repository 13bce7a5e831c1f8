//! The official a2a-sdk (Python, in the repository venv) drives the adapter: send with
//! returnImmediately, poll GetTask to COMPLETED, receive the file artifact.

// Test harness: starts the official Python SDK client (clippy.toml bans spawning elsewhere).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use white_agent_adapter::drivers::DriverKind;

fn venv_python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    assert!(
        python.exists(),
        "the Python venv with a2a-sdk is missing at {}; create it with scripts/bootstrap",
        python.display()
    );
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_sdk_client_drives_the_adapter_to_completion() {
    let script = "sleep 0.5; tr a-z A-Z < input.txt > result.txt; echo converted";
    let adapter = common::start(DriverKind::Command, &["bash", "-c", script], |_, _| {}).await;
    let python = venv_python();
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/drive_adapter.py");
    let base_url = adapter.base_url.clone();
    let output = tokio::task::spawn_blocking(move || {
        let child = std::process::Command::new(python)
            .arg(driver)
            .arg(base_url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start python");
        child.wait_with_output().expect("python output")
    });
    let output = tokio::time::timeout(Duration::from_secs(90), output)
        .await
        .expect("the SDK script finished within 90 s")
        .expect("join");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "SDK script failed:\n{stdout}\n{stderr}"
    );
    let last = stdout.lines().last().expect("a JSON line");
    let report: serde_json::Value = serde_json::from_str(last).expect("JSON report");
    assert_eq!(report["first_state"], "TASK_STATE_WORKING");
    assert_eq!(report["final_state"], "TASK_STATE_COMPLETED", "{report:#}");
    assert!(report["polls"].as_u64().unwrap_or(0) >= 1);
    assert!(
        report["progress_sample"][0]
            .as_str()
            .unwrap_or("")
            .contains("tokens so far"),
        "{report:#}"
    );
    let artifacts = report["artifacts"].as_array().expect("artifacts");
    let result = artifacts
        .iter()
        .find(|a| a["filename"] == "result.txt")
        .expect("result.txt artifact");
    assert_eq!(result["kind"], "raw");
    assert_eq!(result["media_type"], "text/plain");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(result["raw_b64"].as_str().unwrap_or(""))
        .expect("base64");
    assert_eq!(bytes, b"HELLO FROM THE SDK\n");
    // The input file written from the message is not reported as an output.
    assert!(!artifacts.iter().any(|a| a["filename"] == "input.txt"));
    let answer = artifacts
        .iter()
        .find(|a| a["name"] == "answer")
        .expect("answer");
    assert_eq!(answer["text"], "converted");
    let trajectory = artifacts
        .iter()
        .find(|a| a["name"] == "trajectory")
        .expect("trajectory");
    assert_eq!(trajectory["kind"], "data");
    assert!(
        trajectory["data_keys"]
            .as_array()
            .is_some_and(|k| k.iter().any(|k| k == "steps"))
    );
    assert!(
        artifacts
            .iter()
            .any(|a| a["name"] == "usage" && a["kind"] == "data")
    );
    assert_eq!(report["listed"][0], report["task_id"]);
    // The instruction the agent got includes the expected outputs from the data part.
    let instruction =
        std::fs::read_to_string(adapter.state.path().join("instruction.md")).expect("instruction");
    assert!(instruction.contains("- `result.txt`"), "{instruction}");
}
