//! A judge-graded task end to end through `green-agent run`: a panel of three scripted local
//! judges (two speaking Anthropic Messages, one Chat Completions, 127.0.0.1 only) configured
//! by `[[judges]]` in the settings file. The oracle's methodology note wins 2 of 3 votes; nop's
//! missing note loses all three. The key reaches the judges, never a report or a log.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use e2e_tests::{leftovers, report_json, run_green};
use serde_json::{Value, json};

const KEY: &str = "sk-judge-e2e-SECRET";
const PHRASE: &str = "implicit Euler with adaptive steps";

/// (key header, user prompt) of each request.
type Seen = Arc<Mutex<Vec<(Option<String>, String)>>>;

#[derive(Clone)]
struct Judge {
    anthropic: bool,
    /// Always answers 0 (the dissenter).
    contrarian: bool,
    seen: Seen,
}

async fn answer(
    State(j): State<Judge>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Json<Value> {
    let (user, key) = if j.anthropic {
        (
            body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            headers
                .get("x-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        )
    } else {
        (
            body["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
            headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        )
    };
    j.seen.lock().expect("lock").push((key, user.clone()));
    // The note counts only inside the fenced agent file, not in the (trusted) criteria.
    let fenced = user
        .split_once("AGENT FILE \"method.md\"")
        .is_some_and(|(_, rest)| rest.contains(PHRASE));
    let score = if fenced && !j.contrarian { 1 } else { 0 };
    let text =
        json!({"score": score, "justification": format!("note present: {fenced}")}).to_string();
    Json(if j.anthropic {
        json!({"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
               "stop_reason": "end_turn", "usage": {"input_tokens": 50, "output_tokens": 10}})
    } else {
        json!({"choices": [{"message": {"role": "assistant", "content": text}}],
               "usage": {"prompt_tokens": 40, "completion_tokens": 8}})
    })
}

async fn serve(j: Judge) -> String {
    let path = if j.anthropic {
        "/v1/messages"
    } else {
        "/v1/chat/completions"
    };
    let app = axum::Router::new().route(path, post(answer)).with_state(j);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await.expect("serve") });
    format!("http://{addr}/v1")
}

fn write(root: &std::path::Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(&p, text).expect("write");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panel_of_judges_grades_a_task_by_majority() {
    let judges: Vec<Judge> = [(true, false), (true, false), (false, true)]
        .into_iter()
        .map(|(anthropic, contrarian)| Judge {
            anthropic,
            contrarian,
            seen: Arc::default(),
        })
        .collect();
    let mut urls = Vec::new();
    for j in &judges {
        urls.push(serve(j.clone()).await);
    }

    let dir = tempfile::tempdir().expect("tempdir");
    let tasks = dir.path().join("tasks");
    let task = tasks.join("judged-method");
    write(
        &task,
        "task.toml",
        r#"id = "judged-method"
kind = "generic"
instruction = "instruction.md"
expected_outputs = ["method.md"]

[environment]
image = "python"
memory_mb = 512
agent_timeout_secs = 300
grading_timeout_secs = 120

[grading]
[grading.dimensions]
methodology = 1.0

[[grading.graders]]
name = "method"
dimension = "methodology"
check = { kind = "judge", hidden_criteria = "criteria.md", outputs = ["method.md"] }
"#,
    );
    write(
        &task,
        "instruction.md",
        "Describe your integration method in method.md.\n",
    );
    write(&task, "workspace/README.md", "Write method.md here.\n");
    write(
        &task,
        "hidden/criteria.md",
        "The note names a stable integrator for stiff problems.\n",
    );
    write(
        &task,
        "solution/solve.sh",
        &format!("#!/bin/sh\nset -eu\necho 'We use {PHRASE}.' > method.md\n"),
    );
    let settings = dir.path().join("rb.toml");
    std::fs::write(
        &settings,
        format!(
            "[[judges]]\napi = \"anthropic_messages\"\nbase_url = \"{}\"\nmodel = \"claude-a\"\napi_key_env = \"JUDGE_E2E_KEY\"\nbackoff_ms = 10\n\n\
             [[judges]]\napi = \"anthropic_messages\"\nbase_url = \"{}\"\nmodel = \"claude-b\"\napi_key_env = \"JUDGE_E2E_KEY\"\nbackoff_ms = 10\n\n\
             [[judges]]\nbase_url = \"{}\"\nmodel = \"local-c\"\napi_key_env = \"\"\nbackoff_ms = 10\nprice = {{ input_usd_per_mtok = 1.0, output_usd_per_mtok = 2.0 }}\n",
            urls[0], urls[1], urls[2]
        ),
    )
    .expect("settings");

    let results = tempfile::tempdir().expect("results");
    let run_id = format!("e2e-judges-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--config",
            &settings.display().to_string(),
            "--tasks",
            &tasks.display().to_string(),
            "--agents",
            "oracle,nop",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::from([("JUDGE_E2E_KEY".to_owned(), KEY.to_owned())]),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 2);
    for t in trials {
        let agent = t["agent"].as_str().expect("agent");
        let grader = &t["grade"]["graders"][0];
        let votes: Vec<Option<f64>> = grader["data"]["votes"]
            .as_array()
            .unwrap_or_else(|| panic!("votes kept for {agent}: {grader}"))
            .iter()
            .map(|v| v["score"].as_f64())
            .collect();
        match agent {
            "oracle" => {
                assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
                assert_eq!(votes, vec![Some(1.0), Some(1.0), Some(0.0)], "{grader}");
            }
            "nop" => {
                assert_eq!(t["score"].as_f64(), Some(0.0), "{t}");
                assert_eq!(votes, vec![Some(0.0), Some(0.0), Some(0.0)], "{grader}");
            }
            other => panic!("unexpected agent {other}"),
        }
        assert_eq!(grader["data"]["model"], "panel");
        assert_eq!(grader["data"]["prompt_tokens"], 50 + 50 + 40, "{grader}");
        // Only the third member is priced: 40 × $1/M + 8 × $2/M.
        let cost = grader["data"]["cost_usd"].as_f64().expect("cost");
        assert!((cost - 56e-6).abs() < 1e-12, "{cost}");
    }
    // Each judge was asked once per trial; the Anthropic members got the key, the keyless one none.
    for (i, j) in judges.iter().enumerate() {
        let seen = j.seen.lock().expect("lock");
        assert_eq!(seen.len(), 2, "judge {i}");
        for (key, _) in seen.iter() {
            let want = if j.anthropic { Some(KEY) } else { None };
            assert_eq!(key.as_deref(), want, "judge {i}");
        }
    }
    // The key is in no stored file and no log line.
    assert!(!out.stderr.contains(KEY) && !out.stdout.contains(KEY));
    for entry in walk(&results.path().join(&run_id)) {
        let bytes = std::fs::read(&entry).expect("read");
        assert!(
            !String::from_utf8_lossy(&bytes).contains(KEY),
            "{} holds the judge's key",
            entry.display()
        );
    }
    assert_eq!(leftovers(&run_id).await, 0, "no container left behind");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
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
