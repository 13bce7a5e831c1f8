//! The real Claude Code and Codex CLIs (staged from the venv's wheels) inside agent containers,
//! driven by the model proxy's scripted model: they write the file the task asks for, through
//! their own tools, and are graded in a fresh container. No provider key is involved.

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{leftovers, report_json, run_green, write_done_task};

const PROXY: &str = r#"
[scripts.write-done]
[[scripts.write-done.steps]]
write_file = { path = "out.txt", content = "done\n" }
[[scripts.write-done.steps]]
text = "I wrote out.txt."
"#;

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_and_codex_run_in_containers_against_the_scripted_model() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "write-done");
    let proxy = tasks.path().join("proxy.toml");
    std::fs::write(&proxy, PROXY).expect("write");
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-clis-{}", std::process::id());
    // no provider key may be needed (or leak): the scripted model lives in the proxy
    let env = BTreeMap::from([
        ("ANTHROPIC_API_KEY".to_string(), String::new()),
        ("OPENAI_API_KEY".to_string(), String::new()),
    ]);
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks.path().join("write-done").display().to_string(),
            "--agents",
            "claude-code:model=scripted:write-done,codex:model=scripted:write-done",
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
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 2);
    for t in trials {
        assert_eq!(t["outcome"], "completed", "{t}");
        assert_eq!(
            t["score"].as_f64(),
            Some(1.0),
            "{}: {}",
            t["agent"],
            t["grade"]
        );
        assert!(
            t["usage"]["requests"].as_u64().expect("requests") >= 2,
            "both script steps served: {}",
            t["usage"]
        );
        let names: Vec<&str> = t["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .filter_map(|a| a["name"].as_str())
            .collect();
        assert!(
            names.contains(&"file:out.txt") && names.contains(&"trajectory"),
            "{names:?}"
        );
    }
    assert_eq!(leftovers(&run_id).await, 0);
}
