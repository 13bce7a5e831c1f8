//! The judge's accepted verdicts persist in the run's store: SIGKILL the green agent while a
//! trial's second judge question is in flight (its first one answered), then `resume`: the
//! resumed run asks the mock judge only the unanswered question, never the answered one again,
//! and the trial's grade is complete.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use e2e_tests::{leftovers, report_json, run_green, spawn_green};
use green_agent::store::Store;
use serde_json::{Value, json};

const METHOD: &str = "The note names a stable integrator for stiff problems.";
const LIMIT: &str = "The note states the largest step size it allows.";

#[derive(Clone, Default)]
struct Mock {
    /// The question (criteria) of every request, in arrival order.
    seen: Arc<Mutex<Vec<&'static str>>>,
    /// While set, the LIMIT question is never answered (the green agent is killed meanwhile).
    hold_limit: Arc<AtomicBool>,
}

impl Mock {
    fn count(&self, question: &str) -> usize {
        self.seen
            .lock()
            .expect("lock")
            .iter()
            .filter(|q| **q == question)
            .count()
    }
}

async fn answer(State(m): State<Mock>, Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let question = if user.contains(METHOD) {
        METHOD
    } else if user.contains(LIMIT) {
        LIMIT
    } else {
        "other"
    };
    m.seen.lock().expect("lock").push(question);
    if question == LIMIT && m.hold_limit.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let text = json!({"score": 1, "justification": format!("{question} met")}).to_string();
    Json(
        json!({"choices": [{"message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 40, "completion_tokens": 8}}),
    )
}

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, text).expect("write");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_run_never_asks_the_judge_an_answered_question_again() {
    let mock = Mock::default();
    mock.hold_limit.store(true, Ordering::SeqCst);
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(answer))
        .with_state(mock.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await.expect("serve") });

    let dir = tempfile::tempdir().expect("tempdir");
    let tasks = dir.path().join("tasks");
    let task = tasks.join("judged-twice");
    write(
        &task,
        "task.toml",
        r#"id = "judged-twice"
kind = "generic"
instruction = "instruction.md"
expected_outputs = ["method.md"]

[environment]
image = "python"
memory_mb = 512
agent_timeout_secs = 300
grading_timeout_secs = 600

[grading]
[grading.dimensions]
methodology = 1.0

[[grading.graders]]
name = "method"
dimension = "methodology"
check = { kind = "judge", hidden_criteria = "method.md", outputs = ["method.md"] }

[[grading.graders]]
name = "limit"
dimension = "methodology"
check = { kind = "judge", hidden_criteria = "limit.md", outputs = ["method.md"] }
"#,
    );
    write(
        &task,
        "instruction.md",
        "Describe your method in method.md.\n",
    );
    write(&task, "workspace/README.md", "Write method.md here.\n");
    write(&task, "hidden/method.md", &format!("{METHOD}\n"));
    write(&task, "hidden/limit.md", &format!("{LIMIT}\n"));
    write(
        &task,
        "solution/solve.sh",
        "#!/bin/sh\nset -eu\necho 'Implicit Euler, steps up to 0.1 s.' > method.md\n",
    );
    let settings = dir.path().join("rb.toml");
    std::fs::write(
        &settings,
        format!(
            "[[judges]]\nbase_url = \"http://{addr}/v1\"\nmodel = \"mock-judge\"\napi_key_env = \"\"\n\
             backoff_ms = 10\ntimeout_secs = 900\n"
        ),
    )
    .expect("settings");

    let results = tempfile::tempdir().expect("results");
    let results_s = results.path().display().to_string();
    let run_id = format!("e2e-judge-cache-{}", std::process::id());
    let run_dir = results.path().join(&run_id);
    let settings_s = settings.display().to_string();
    let tasks_s = tasks.display().to_string();
    let child = spawn_green(
        &[
            "run",
            "--config",
            &settings_s,
            "--tasks",
            &tasks_s,
            "--agents",
            "oracle",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &BTreeMap::new(),
    );

    // Kill once the second question is in flight (graders run in order: the first question
    // was answered, and its verdict stored, before the second was asked).
    let started = Instant::now();
    while mock.count(LIMIT) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "the judge was never asked the second question: {}",
            child.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill_tree();
    drop(child);
    assert_eq!(mock.count(METHOD), 1, "asked once before the kill");
    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    assert_eq!(
        store.judge_verdict_count(&run_id).await.expect("count"),
        1,
        "the answered question's verdict is stored, the open one is not"
    );
    let trials = store.trials(&run_id).await.expect("trials");
    store.close().await;
    assert!(
        trials.iter().all(|t| t.state != "done"),
        "the trial was still grading when killed"
    );
    let before = mock.seen.lock().expect("lock").len();

    mock.hold_limit.store(false, Ordering::SeqCst);
    let out = run_green(
        &[
            "resume",
            &run_id,
            "--config",
            &settings_s,
            "--results-dir",
            &results_s,
        ],
        &BTreeMap::new(),
        Duration::from_secs(900),
    )
    .await;
    out.assert_success();

    // The resumed run re-ran the trial (it was not done), and asked only the open question.
    let asked_on_resume: Vec<&str> = mock.seen.lock().expect("lock")[before..].to_vec();
    assert_eq!(
        asked_on_resume,
        vec![LIMIT],
        "the answered question is served from the run's store"
    );
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 1);
    let t = &trials[0];
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    let graders = t["grade"]["graders"].as_array().expect("graders");
    let attempts: Vec<u64> = graders
        .iter()
        .map(|g| g["data"]["attempts"].as_u64().expect("attempts"))
        .collect();
    assert_eq!(
        attempts,
        vec![0, 1],
        "method from the cache, limit asked once"
    );
    for g in graders {
        assert_eq!(g["status"], "pass", "{g}");
        assert_eq!(g["score"].as_f64(), Some(1.0), "{g}");
    }

    // Both accepted verdicts are in the run's store (failures never are).
    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    assert_eq!(store.judge_verdict_count(&run_id).await.expect("count"), 2);
    store.close().await;
    assert_eq!(leftovers(&run_id).await, 0, "no container left behind");
}
