//! PRBench tasks in the published format, imported as a folder through the CLI
//! (`green-agent tasks import prbench DIR DEST`), pass the oracle/nop gate in real containers
//! with a scripted judge (127.0.0.1): the decay-chain task's oracle runs its reference code in
//! the layout it expects and its data match the ground truth; the tasks without reference code
//! (the trivial one, the banned-library one, the code-only variant) are held to the nop side;
//! nop scores 0 everywhere without a judge call. Each trial's `eval_report.json` has PRBench's
//! shape; the decay-chain oracle's `reproduce.sh`, re-run, regenerates its data.
//!
//! The scripted judge stands in for a model: it gives a dimension 1 when every CSV comparison
//! in the evidence it is shown passes (and there is one), else 0.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use e2e_tests::{leftovers, repo_root, report_json, run_green};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<String>>>;

async fn judge(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let csv: Vec<&str> = user.lines().filter(|l| l.contains(" (csv): ")).collect();
    let ok = !csv.is_empty() && csv.iter().all(|l| l.contains(" (csv): pass"));
    seen.lock().expect("lock").push(user.clone());
    let content = json!({"score": if ok { 1 } else { 0 }, "justification": format!("{} CSV comparison(s), all pass: {ok}", csv.len())})
        .to_string();
    Json(
        json!({"choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn prbench_published_tasks_pass_the_gate_with_a_scripted_judge() {
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
    let src = repo_root().join("tasks/tests/fixtures/prbench");
    let out = run_green(
        &[
            "tasks",
            "import",
            "prbench",
            &src.display().to_string(),
            &dest.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(120),
    )
    .await;
    out.assert_success();
    assert_eq!(
        out.stdout
            .lines()
            .filter(|l| l.starts_with("imported "))
            .count(),
        4,
        "each task of the folder (and the code-only variant):\n{}",
        out.stdout
    );

    let settings = dest.path().join("rb.toml");
    std::fs::write(
        &settings,
        format!(
            "[[judges]]\nbase_url = \"http://{addr}/v1\"\nmodel = \"mock-judge\"\napi_key_env = \"\"\nbackoff_ms = 10\n"
        ),
    )
    .expect("settings");
    let tasks = dest.path().join("tasks");
    std::fs::create_dir_all(&tasks).expect("tasks");
    for e in std::fs::read_dir(dest.path()).expect("dest").flatten() {
        if e.path().join("task.toml").is_file() {
            std::fs::rename(e.path(), tasks.join(e.file_name())).expect("move");
        }
    }
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-prbench-gate-{}", std::process::id());
    let out = run_green(
        &[
            "tasks",
            "check",
            &tasks.display().to_string(),
            "--config",
            &settings.display().to_string(),
            "--concurrency",
            "2",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(1200),
    )
    .await;
    println!("{}\n{}", out.stdout, out.stderr);
    out.assert_success();
    assert!(
        out.stdout.contains("4 of 4 task(s) pass the gate"),
        "{}",
        out.stdout
    );
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    let oracle = trials
        .iter()
        .find(|t| t["agent"] == "oracle" && t["task_id"] == "task_decay_chain")
        .expect("the decay chain's oracle");
    assert_eq!(oracle["score"].as_f64(), Some(1.0), "{oracle}");
    let eval: Value = serde_json::from_str(
        &std::fs::read_to_string(
            results
                .path()
                .join(&run_id)
                .join("trials")
                .join(oracle["id"].as_str().expect("id"))
                .join("eval_report.json"),
        )
        .expect("eval_report.json"),
    )
    .expect("parses");
    let scores = eval["grading"]["scores"].as_object().expect("scores");
    let names: Vec<&str> = scores.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "code_correctness",
            "completeness",
            "data_accuracy",
            "methodology_understanding"
        ]
    );
    assert!(scores.values().all(|s| {
        s["score"] == 1.0
            && s["justification"]
                .as_str()
                .is_some_and(|j| j.contains("all pass: true"))
    }));
    assert_eq!(eval["grading"]["overall_score"], 1.0);
    assert!(
        eval["grading"]["summary"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );
    assert!(
        eval["paper"]
            .as_str()
            .is_some_and(|p| p.contains("two-step decay chain")),
        "{eval}"
    );
    assert_eq!(
        eval["measured"]["dimensions"]["measured_data_accuracy"]["score"],
        1.0
    );
    // The oracle delivers the entry script the instruction asks for; re-run, it regenerates
    // both CSV files.
    assert_eq!(eval["measured"]["reproduction"]["status"], "pass", "{eval}");
    assert_eq!(eval["measured"]["reproduction"]["entry"], "reproduce.sh");
    assert!(eval["time_used_seconds"].as_f64().is_some());
    assert!(eval["workspace_files"].is_array());
    // No judge call for a submission without deliverables (every nop trial).
    let asked = seen.lock().expect("lock").len();
    assert_eq!(asked, 4, "one question per dimension of the one oracle");
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}
