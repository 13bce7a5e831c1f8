//! The re-run evidence of an imported PRBench task (issue 30), end to end: a fixture in
//! PRBench's format (`tasks/tests/fixtures/prbench_repro/squares`, no command named) imported
//! through the CLI, then three scripted agents (`tests/fixtures/prbench_rerun/*.sh`) in real
//! containers with a scripted judge (127.0.0.1) that scores every dimension 1:
//! - `honest` delivers `reproduce.py`, which regenerates the CSV: the evidence passes, the
//!   judge is told so, overall 1;
//! - `copied` writes the CSV by hand and a `reproduce.py` that writes the same constants:
//!   `fabricated_data`, `code_correctness` and `data_accuracy` 0 without a judge call, overall
//!   0.2 (completeness alone);
//! - `no-entry` delivers no entry script: the evidence says "no entry script delivered", score
//!   0 at weight 0, the overall unchanged (1).
//!
//! Each trial's `eval_report.json` carries the re-run beside the other evidence.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use base64::Engine as _;
use e2e_tests::{leftovers, repo_root, report_json, run_green};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<String>>>;

/// Scores 1 and says which re-run sentence it was shown.
async fn judge(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let said = user
        .lines()
        .find(|l| l.starts_with("REPRODUCTION: "))
        .unwrap_or("no re-run shown")
        .to_owned();
    seen.lock().expect("lock").push(user);
    let content = json!({"score": 1, "justification": said}).to_string();
    Json(
        json!({"choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    )
}

/// The `cmd:` spec of a scripted agent (its script base64-encoded on the command line, named
/// by the leading `:` no-op).
fn agent(name: &str) -> String {
    let path = repo_root().join(format!("tests/fixtures/prbench_rerun/{name}.sh"));
    let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let b64 = base64::engine::general_purpose::STANDARD.encode(body);
    format!("cmd:: {name}; echo {b64} | base64 -d | sh")
}

#[tokio::test(flavor = "multi_thread")]
async fn prbench_rerun_evidence_for_honest_copied_and_missing_entry_scripts() {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(judge))
        .with_state(seen.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await.expect("serve") });

    let dest = tempfile::tempdir().expect("tempdir");
    let tasks = dest.path().join("tasks");
    let out = run_green(
        &[
            "tasks",
            "import",
            "prbench",
            &repo_root()
                .join("tasks/tests/fixtures/prbench_repro/squares")
                .display()
                .to_string(),
            &tasks.display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(120),
    )
    .await;
    out.assert_success();
    let settings = dest.path().join("rb.toml");
    std::fs::write(
        &settings,
        format!(
            "[[judges]]\nbase_url = \"http://{addr}/v1\"\nmodel = \"mock-judge\"\napi_key_env = \"\"\nbackoff_ms = 10\n"
        ),
    )
    .expect("settings");

    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-prbench-rerun-{}", std::process::id());
    let agents: Vec<String> = ["honest", "copied", "no-entry"]
        .into_iter()
        .map(agent)
        .collect();
    let mut args: Vec<&str> = vec![
        "run",
        "--config",
        settings.to_str().expect("utf-8"),
        "--tasks",
        tasks.to_str().expect("utf-8"),
        "--concurrency",
        "3",
        "--poll-interval",
        "200ms",
        "--run-id",
        &run_id,
        "--results-dir",
        results.path().to_str().expect("utf-8"),
    ];
    for a in &agents {
        args.push("--agent");
        args.push(a);
    }
    let out = run_green(&args, &BTreeMap::new(), Duration::from_secs(900)).await;
    println!("{}\n{}", out.stdout, out.stderr);
    out.assert_success();

    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 3, "one trial per agent");
    let eval = |name: &str| -> (Value, Value) {
        let t = trials
            .iter()
            .find(|t| {
                t["agent"]
                    .as_str()
                    .is_some_and(|a| a.starts_with(&format!("cmd:: {name};")))
            })
            .unwrap_or_else(|| panic!("{name}'s trial"));
        let path = results
            .path()
            .join(&run_id)
            .join("trials")
            .join(t["id"].as_str().expect("id"))
            .join("eval_report.json");
        let e: Value = serde_json::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
        )
        .expect("parses");
        println!(
            "{name}: {}",
            serde_json::to_string_pretty(&e).expect("json")
        );
        (t.clone(), e)
    };

    // (a) Regenerated: the evidence passes; every judge is told; the overall is the judges'.
    let (_, honest) = eval("honest");
    let rerun = &honest["measured"]["reproduction"];
    assert_eq!(rerun["status"], "pass", "{honest}");
    assert_eq!(rerun["entry"], "reproduce.py");
    assert_eq!(rerun["outputs"][0]["name"], "data/squares.csv");
    assert_eq!(
        honest["measured"]["dimensions"]["measured_reproduction"]["score"],
        1.0
    );
    assert_eq!(honest["grading"]["overall_score"], 1.0);
    assert!(
        honest["grading"]["summary"]
            .as_str()
            .is_some_and(|s| s.contains("the agent's entry script, re-run, regenerates its data")),
        "{honest}"
    );
    for dim in ["code_correctness", "data_accuracy", "completeness"] {
        let j = honest["grading"]["scores"][dim]["justification"]
            .as_str()
            .unwrap_or_default();
        assert!(
            j.contains("REPRODUCTION: the agent's entry script (reproduce.py (run as `python3 reproduce.py`)), re-run by the benchmark without the data files it delivered, regenerated them"),
            "{dim}: {j}"
        );
    }

    // (b) Copied constants: fabricated_data; code and data 0 without asking; completeness
    // alone (0.2) is left.
    let (copied_trial, copied) = eval("copied");
    assert_eq!(
        copied["measured"]["reproduction"]["status"],
        "fabricated_data"
    );
    assert!(
        copied["measured"]["reproduction"]["outputs"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("written verbatim in the agent's code")),
        "{copied}"
    );
    for dim in ["code_correctness", "data_accuracy"] {
        assert_eq!(copied["grading"]["scores"][dim]["score"], 0.0, "{dim}");
        assert_eq!(
            copied["grading"]["scores"][dim]["status"], "fabricated_data",
            "{dim}"
        );
    }
    assert_eq!(
        copied["grading"]["scores"]["data_accuracy"]["justification"],
        "0: the agent's code does not regenerate the data it submitted (re-run of the agent's entry script: fabricated_data); not sent to the judge",
        "said once"
    );
    assert_eq!(copied["grading"]["scores"]["completeness"]["score"], 1.0);
    let overall = copied["grading"]["overall_score"]
        .as_f64()
        .expect("overall");
    assert!((overall - 0.2).abs() < 1e-9, "{overall}");
    assert_eq!(
        copied_trial["grade_status"], "fabricated_data",
        "{copied_trial}"
    );
    assert!(
        copied["grading"]["scores"]["completeness"]["justification"]
            .as_str()
            .is_some_and(|j| j.contains("does NOT regenerate the data it submitted")),
        "{copied}"
    );

    // (c) No entry script: said so, score 0 at weight 0, the overall unchanged.
    let (_, none) = eval("no-entry");
    let rerun = &none["measured"]["reproduction"];
    assert_eq!(rerun["status"], "fail");
    assert_eq!(rerun["entry"], Value::Null);
    assert_eq!(
        rerun["said"],
        "no entry script delivered (the agent's code was not re-run)"
    );
    assert_eq!(
        none["measured"]["dimensions"]["measured_reproduction"]["score"],
        0.0
    );
    assert_eq!(none["grading"]["overall_score"], 1.0, "weight 0: unchanged");
    assert!(
        none["grading"]["scores"]["data_accuracy"]["justification"]
            .as_str()
            .is_some_and(|j| j.contains("delivered no entry script")),
        "{none}"
    );

    let asked = seen.lock().expect("lock").len();
    assert_eq!(
        asked,
        3 + 1 + 3,
        "the copied agent's code and data are not judged"
    );
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}
