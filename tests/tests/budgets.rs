//! Model budgets enforced end to end, with the proxy's scripted mock model: a per-trial token
//! budget stops a stubborn agent (outcome `budget_exceeded`, its partial output graded), and a
//! run cost cap stops the running agent and keeps the next trial from starting.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use e2e_tests::{leftovers, report_json, run_green, write_task};

/// One step of 400 + 100 tokens, priced at $1000 per million tokens: $0.50 a call.
const PROXY: &str = r#"
[scripts.chatty]
[[scripts.chatty.steps]]
text = "part"
usage = { input_tokens = 400, output_tokens = 100 }

[prices."scripted:*"]
input_per_mtok = 1000.0
output_per_mtok = 1000.0
"#;

/// Calls the scripted model again and again (offering a tool, as agent CLIs do, so each call
/// is counted), appending a line to partial.txt per answer; a refused call does not stop it:
/// only the platform can.
const AGENT: &str = r#"python3 -c '
import json, os, time, urllib.request, urllib.error
body = json.dumps({"model": "scripted:chatty", "max_tokens": 64,
    "tools": [{"name": "Bash", "description": "run a command",
               "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
    "messages": [{"role": "user", "content": "go on"}]}).encode()
for i in range(600):
    req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=body,
        headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01",
                 "content-type": "application/json"})
    try:
        text = json.load(urllib.request.urlopen(req, timeout=20))["content"][0]["text"]
        open("partial.txt", "a").write(text + "\n")
    except urllib.error.HTTPError:
        time.sleep(0.5)
'"#;

const TESTS: &str = r#"import os


def test_some_output():
    lines = open(os.path.join(os.environ.get("WORKSPACE", "/workspace"), "partial.txt")).read().split()
    assert lines and all(l == "part" for l in lines)
"#;

fn setup(root: &Path, tasks: &[&str]) -> String {
    for id in tasks {
        write_task(
            root,
            id,
            "Write parts to partial.txt.\n",
            TESTS,
            "echo part > partial.txt",
            "python",
        );
    }
    let config = root.join("proxy.toml");
    std::fs::write(&config, PROXY).expect("proxy config");
    config.display().to_string()
}

fn blob_text(results: &Path, sha: &str) -> String {
    let path = results.join(&sha[..2]).join(sha);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trial_token_budget_stops_the_agent_and_its_partial_output_is_graded() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let config = setup(tasks.path(), &["budget-tokens"]);
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-budget-tokens-{}", std::process::id());
    let agent = format!("cmd:{AGENT}");
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks.path().join("budget-tokens").display().to_string(),
            "--agent",
            &agent,
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
            "--proxy-config",
            &config,
            "--max-tokens-per-trial",
            "1000",
            "--poll-interval",
            "200ms",
        ],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    let t = &report_json(results.path(), &run_id)["trials"][0];
    assert_eq!(t["outcome"], "budget_exceeded", "{t}");
    assert!(
        t["flags"].to_string().contains("token budget of 1000"),
        "the reason is recorded: {t}"
    );
    // Two calls of 500 tokens spent the budget; the third was refused.
    assert_eq!(t["usage"]["input_tokens"], 800, "{t}");
    assert_eq!(t["usage"]["output_tokens"], 200, "{t}");
    // Graded on what it produced before it was stopped.
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    let partial = t["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .find(|a| a["name"] == "file:partial.txt")
        .unwrap_or_else(|| panic!("partial output collected: {t}"));
    let text = blob_text(
        &results.path().join(&run_id).join("blobs"),
        partial["sha256"].as_str().expect("sha"),
    );
    assert_eq!(text, "part\npart\n");
    assert_eq!(leftovers(&run_id).await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_cost_cap_stops_the_running_agent_and_starts_no_new_trial() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let config = setup(tasks.path(), &["budget-run-a", "budget-run-b"]);
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-budget-run-{}", std::process::id());
    let agent = format!("cmd:{AGENT}");
    let out = run_green(
        &[
            "run",
            "--tasks",
            &format!(
                "{},{}",
                tasks.path().join("budget-run-a").display(),
                tasks.path().join("budget-run-b").display()
            ),
            "--agent",
            &agent,
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
            "--proxy-config",
            &config,
            "--max-cost-per-run",
            "0.9",
            "--concurrency",
            "1",
            "--poll-interval",
            "200ms",
        ],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    assert_eq!(out.exit.code, Some(3), "{}", out.stderr);
    assert!(out.stderr.contains("cost cap"), "{}", out.stderr);
    let store = green_agent::store::Store::open_existing(&results.path().join(&run_id), &run_id)
        .await
        .expect("store");
    assert_eq!(
        store.run(&run_id).await.expect("run").status,
        "budget_exceeded"
    );
    let trials = store.trials(&run_id).await.expect("trials");
    let done: Vec<_> = trials.iter().filter_map(|t| t.result.as_ref()).collect();
    assert_eq!(done.len(), 1, "one trial ran: {trials:?}");
    assert_eq!(done[0].outcome, green_agent::model::Outcome::BudgetExceeded);
    // $0.50 a call: the second would pass the $0.90 cap, so it is refused, never served
    // (budgets are reservations: the cap is never overrun).
    assert!(
        (done[0].usage.cost_usd - 0.5).abs() < 1e-9,
        "{:?}",
        done[0].usage
    );
    assert_eq!(done[0].score, Some(1.0), "graded on its partial output");
    let pending: Vec<_> = trials.iter().filter(|t| t.state == "pending").collect();
    assert_eq!(
        pending.len(),
        1,
        "the other trial never started: {trials:?}"
    );
    let events = store.events(&run_id, None).await.expect("events");
    assert_eq!(
        events.iter().filter(|e| e.kind == "trial_started").count(),
        1
    );
    assert!(events.iter().any(|e| e.kind == "trial_not_started"));
    store.close().await;
    assert_eq!(leftovers(&run_id).await, 0);
}
