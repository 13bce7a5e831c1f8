//! Aider and mini-swe-agent (PyPI packages staged from `.agent-packages/`, run by the image's
//! python3) inside agent containers, driven through the model proxy's Chat Completions by the
//! scripted model on the bundled `generic-csv-stats` task: a script that writes the reference
//! `summary.py` scores 1.0, one that writes a wrong one scores 0. Their trajectories become our
//! steps and their usage is counted. No provider key is involved.

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{leftovers, repo_root, report_json, run_green};

const WRONG: &str = "def summarise(path):\n    return {\"count\": 0, \"mean\": 0.0, \"min\": 0.0, \"max\": 0.0, \"hottest_day\": 0}\n";

/// A TOML basic string (JSON's escapes are TOML's).
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("string")
}

/// mini-swe-agent: its `bash` tool writes the file, then it submits.
fn mini_script(name: &str, content: &str) -> String {
    format!(
        "[scripts.{name}]\n\
         [[scripts.{name}.steps]]\n\
         text = \"I write summary.py.\"\n\
         write_file = {{ path = \"summary.py\", content = {} }}\n\
         [[scripts.{name}.steps]]\n\
         run = \"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\"\n",
        quoted(content)
    )
}

/// Aider: no tools; the answer holds the whole file in Aider's `whole` edit format (the one
/// it uses for a model it does not know).
fn aider_script(name: &str, content: &str) -> String {
    format!(
        "[scripts.{name}]\n\
         text_protocol = true\n\
         [[scripts.{name}.steps]]\n\
         text = {}\n",
        quoted(&format!("summary.py\n```python\n{content}```\n"))
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn aider_and_mini_swe_agent_solve_a_bundled_task_through_the_scripted_model() {
    let task = repo_root().join("tasks/examples/generic-csv-stats");
    let oracle = std::fs::read_to_string(task.join("solution/summary.py")).expect("oracle");
    let dir = tempfile::tempdir().expect("tempdir");
    let proxy = dir.path().join("proxy.toml");
    let config = [
        mini_script("mini-right", &oracle),
        mini_script("mini-wrong", WRONG),
        aider_script("aider-right", &oracle),
        aider_script("aider-wrong", WRONG),
    ]
    .join("\n");
    std::fs::write(&proxy, config).expect("write");
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-python-agents-{}", std::process::id());
    let env = BTreeMap::from([
        ("ANTHROPIC_API_KEY".to_string(), String::new()),
        ("OPENAI_API_KEY".to_string(), String::new()),
    ]);
    let out = run_green(
        &[
            "run",
            "--tasks",
            &task.display().to_string(),
            "--agents",
            "aider:model=scripted:aider-right,aider:model=scripted:aider-wrong,\
             mini-swe-agent:model=scripted:mini-right,mini-swe-agent:model=scripted:mini-wrong",
            "--proxy-config",
            &proxy.display().to_string(),
            "--concurrency",
            "2",
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &env,
        Duration::from_secs(900),
    )
    .await;
    out.assert_success();
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 4);
    for t in trials {
        let agent = t["agent"].as_str().expect("agent");
        assert_eq!(t["outcome"], "completed", "{agent}: {t}");
        let expected = if agent.ends_with("-right") { 1.0 } else { 0.0 };
        assert_eq!(
            t["score"].as_f64(),
            Some(expected),
            "{agent}: {}",
            t["grade"]
        );
        let steps = if agent.starts_with("aider") { 1 } else { 2 };
        assert_eq!(
            t["usage"]["requests"].as_u64(),
            Some(steps),
            "{agent}: every script step served once: {}",
            t["usage"]
        );
        assert!(
            t["usage"]["input_tokens"].as_u64().expect("tokens") > 0,
            "{agent}: {}",
            t["usage"]
        );
        let names: Vec<&str> = t["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .filter_map(|a| a["name"].as_str())
            .collect();
        assert!(
            names.contains(&"file:summary.py") && names.contains(&"trajectory"),
            "{agent}: {names:?}"
        );
        // nothing of the agent's own bookkeeping lands in the workspace
        assert!(
            !names
                .iter()
                .any(|n| n.contains(".aider") || n.contains("traj") && *n != "trajectory"),
            "{agent}: {names:?}"
        );
    }
    assert_eq!(leftovers(&run_id).await, 0);
}
