//! What the `serve_*` tests share: starting `green-agent serve` on a free port, a one-task
//! suite, the official a2a-sdk agent as an external participant, raw JSON-RPC calls and the
//! official SDK clients (`tests/tests/agents/serve_client*.py`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e_tests::{KilledOnDrop, repo_root, spawn_green, venv_python, write_task};
use sandbox::child::{ChildSpec, SupervisedChild};
use serde_json::{Value, json};

pub const TESTS: &str = r#"import os


def test_out():
    assert open(os.path.join(os.environ.get("WORKSPACE", "/workspace"), "out.txt")).read().strip() == "done"
"#;

/// A one-task suite (`out.txt` must hold `done`), to be served as `e2e=<dir>`.
pub fn suite() -> tempfile::TempDir {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_task(
        tasks.path(),
        "serve-e2e",
        "Write `done` to out.txt.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    tasks
}

/// Starts `green-agent serve --bind 127.0.0.1:0 --tasks e2e=TASKS --results-dir RESULTS EXTRA`;
/// returns it and its base URL (`http://127.0.0.1:PORT`).
pub async fn start_serve(
    tasks: &Path,
    results: &Path,
    extra: &[&str],
    env: &BTreeMap<String, String>,
) -> (KilledOnDrop, String) {
    let suite = format!("e2e={}", tasks.display());
    let results = results.display().to_string();
    let mut args = vec![
        "serve",
        "--bind",
        "127.0.0.1:0",
        "--tasks",
        &suite,
        "--results-dir",
        &results,
        "--poll-interval",
        "200ms",
    ];
    args.extend_from_slice(extra);
    let mut child = spawn_green(&args, env);
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(120), child.next_stdout_line())
            .await
            .expect("green-agent serve announces its address")
            .unwrap_or_else(|| panic!("green-agent serve exited: {}", child.stderr_tail()));
        if let Some(rest) = line.strip_prefix("listening on ") {
            break rest.trim().trim_end_matches('/').to_owned();
        }
    };
    (KilledOnDrop(child), url)
}

/// Starts the official a2a-sdk 1.x agent (`tests/tests/agents/sdk_agent.py ok`): it writes
/// `out.txt` holding `done`. Returns it, its URL and the file counting its starts.
pub async fn start_sdk_agent(dir: &Path) -> (KilledOnDrop, String, PathBuf) {
    let (agent, port, count) = e2e_tests::start_sdk_agent("ok", dir).await;
    (agent, format!("http://127.0.0.1:{port}/"), count)
}

/// Runs an official SDK client script (`serve_client.py` with `.venv`, `serve_client03.py` with
/// `.venv-a2a03`) against the service; returns its JSON observations.
pub async fn sdk_client(v03: bool, url: &str, request: &Value, mode: &str) -> Value {
    let (venv, script) = if v03 {
        (".venv-a2a03", "serve_client03.py")
    } else {
        (".venv", "serve_client.py")
    };
    let mut child = SupervisedChild::spawn(ChildSpec {
        program: venv_python(venv).display().to_string(),
        args: vec![
            repo_root()
                .join("tests/tests/agents")
                .join(script)
                .display()
                .to_string(),
            url.to_owned(),
            request.to_string(),
            mode.to_owned(),
        ],
        env: BTreeMap::new(),
        clear_env: false,
        cwd: repo_root(),
        limits: None,
    })
    .expect("start the SDK client");
    let mut last = String::new();
    let finished = tokio::time::timeout(Duration::from_secs(900), async {
        while let Some(line) = child.next_stdout_line().await {
            last = line;
        }
        child.wait().await
    })
    .await;
    let exit = finished.unwrap_or_else(|_| {
        child.kill_tree();
        panic!("{script} did not finish: {}", child.stderr_tail())
    });
    assert!(
        exit.success(),
        "{script} failed ({exit:?}): {}",
        child.stderr_tail()
    );
    serde_json::from_str(&last)
        .unwrap_or_else(|e| panic!("{script} printed {last:?} ({e}): {}", child.stderr_tail()))
}

/// One JSON-RPC call in A2A 1.0 (with `A2A-Version: 1.0`) or 0.3; returns the HTTP status and
/// the body.
pub async fn rpc(
    url: &str,
    v1: bool,
    method: &str,
    params: Value,
    bearer: Option<&str>,
) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client.post(format!("{url}/")).json(&json!({
        "jsonrpc": "2.0", "id": 1, "method": method, "params": params
    }));
    if v1 {
        req = req.header("A2A-Version", "1.0");
    }
    if let Some(token) = bearer {
        req = req.bearer_auth(token);
    }
    let resp = req.send().await.expect("request sent");
    let status = resp.status().as_u16();
    let body = resp.json::<Value>().await.unwrap_or(Value::Null);
    (status, body)
}

/// SendMessage (1.0) with the request as a data part; returns the task.
pub async fn submit(url: &str, request: &Value) -> Value {
    let (_, body) = rpc(
        url,
        true,
        "SendMessage",
        json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "parts": [{"data": request}]}}),
        None,
    )
    .await;
    body["result"]["task"].clone()
}

pub fn uuid() -> String {
    format!(
        "m-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    )
}

/// GetTask (1.0).
pub async fn get_task(url: &str, id: &str) -> Value {
    let (_, body) = rpc(url, true, "GetTask", json!({"id": id}), None).await;
    body["result"].clone()
}

/// ListTasks (1.0) of the tasks whose status changed at or after `after` (RFC 3339): their ids.
pub async fn listed_after(url: &str, after: &str) -> Vec<String> {
    let (_, body) = rpc(
        url,
        true,
        "ListTasks",
        json!({"statusTimestampAfter": after}),
        None,
    )
    .await;
    body["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("ListTasks: {body}"))
        .iter()
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect()
}

/// The task's status text.
pub fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Polls GetTask until `done(task)` holds (bounded).
pub async fn wait_for(url: &str, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..3000 {
        let task = get_task(url, id).await;
        if done(&task) {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("assessment {id}: {what} did not happen within 10 minutes");
}

/// How many `trial:` artifacts the task has.
pub fn trial_artifacts(task: &Value) -> usize {
    task["artifacts"].as_array().map_or(0, |a| {
        a.iter()
            .filter(|a| a["name"].as_str().is_some_and(|n| n.starts_with("trial:")))
            .count()
    })
}

/// Opens a streaming call and returns its first SSE event's JSON-RPC body (or the plain JSON
/// body when the answer is not a stream).
pub async fn first_event(url: &str, v1: bool, method: &str, params: Value) -> Value {
    let client = reqwest::Client::new();
    let mut req = client.post(format!("{url}/")).json(&json!({
        "jsonrpc": "2.0", "id": 7, "method": method, "params": params
    }));
    if v1 {
        req = req.header("A2A-Version", "1.0");
    }
    let mut resp = req.send().await.expect("request sent");
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !sse {
        return resp.json().await.unwrap_or(Value::Null);
    }
    let mut text = String::new();
    let read = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(chunk) = resp.chunk().await.expect("stream chunk") {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(line) = text.lines().find(|l| l.starts_with("data:"))
                && text.contains("\n\n")
            {
                return serde_json::from_str::<Value>(line.trim_start_matches("data:").trim())
                    .expect("event json");
            }
        }
        panic!("the stream ended without an event: {text}");
    })
    .await;
    read.expect("a first event within 30 s")
}
