//! The `usage` artifact round-trips: the token counts (input, output, cache reads and writes),
//! the request count and the cost that the adapter writes reach the store and the report
//! unchanged. The adapter runs its `claude-code` driver on this host, as an external agent,
//! over a stand-in `claude` that prints a stream-json result with known usage.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use e2e_tests::{binary, leftovers, report_json, run_green, write_done_task};
use sandbox::child::{ChildSpec, SupervisedChild};
use white_agent_adapter::contract::{DriverKind, LaunchArgs, UsageReport};

/// What the stand-in CLI reports (every field distinct, so a swap shows).
fn reported() -> UsageReport {
    UsageReport {
        input_tokens: 1234,
        output_tokens: 567,
        cache_read_tokens: 8901,
        cache_write_tokens: 234,
        requests: 5,
        cost_usd: Some(0.0456),
        duration_ms: 0,
    }
}

fn fake_claude(dir: &Path) -> std::path::PathBuf {
    let u = reported();
    let result = serde_json::json!({
        "type": "result", "subtype": "success", "is_error": false,
        "num_turns": u.requests, "result": "wrote out.txt", "total_cost_usd": u.cost_usd,
        "usage": {
            "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "cache_read_input_tokens": u.cache_read_tokens,
            "cache_creation_input_tokens": u.cache_write_tokens,
        },
    });
    let path = dir.join("claude");
    std::fs::write(
        &path,
        format!("#!/bin/sh\necho done > out.txt\ncat <<'EOF'\n{result}\nEOF\n"),
    )
    .expect("fake claude");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_written_by_the_adapter_is_what_the_store_and_report_show() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "usage");
    let workspace = tempfile::tempdir().expect("tempdir");
    let bin = tempfile::tempdir().expect("tempdir");
    let mut args = LaunchArgs::new(DriverKind::ClaudeCode);
    args.host = std::net::Ipv4Addr::LOCALHOST.into();
    args.port = 0;
    args.workspace = workspace.path().to_path_buf();
    args.agent_bin = Some(fake_claude(bin.path()));
    args.model = Some("claude-sonnet-4-5".into());
    let mut agent = SupervisedChild::spawn(ChildSpec {
        program: binary("white-agent-adapter").display().to_string(),
        args: args.to_argv(),
        env: BTreeMap::from([
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into()),
            ("ANTHROPIC_API_KEY".into(), "dummy".into()),
        ]),
        clear_env: true,
        cwd: workspace.path().to_path_buf(),
        limits: None,
    })
    .expect("adapter starts");
    let line = tokio::time::timeout(Duration::from_secs(30), agent.next_stdout_line())
        .await
        .expect("adapter announces its port")
        .expect("a line");
    let port = line
        .rsplit(':')
        .next()
        .unwrap_or_else(|| panic!("unexpected line {line}: {}", agent.stderr_tail()))
        .to_owned();

    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-usage-{}", std::process::id());
    let spec = format!("a2a:http://127.0.0.1:{port}");
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks.path().display().to_string(),
            "--agent",
            &spec,
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
            "--poll-interval",
            "200ms",
        ],
        &BTreeMap::new(),
        Duration::from_secs(300),
    )
    .await;
    agent.kill_tree();
    out.assert_success();

    let u = reported();
    let store = green_agent::store::Store::open_existing(&results.path().join(&run_id), &run_id)
        .await
        .expect("store");
    let trials = store.trials(&run_id).await.expect("trials");
    let result = trials[0].result.as_ref().expect("finished");
    assert_eq!(result.outcome, green_agent::model::Outcome::Completed);
    assert_eq!(
        result.usage,
        green_agent::model::Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
            requests: u.requests,
            cost_usd: u.cost_usd.expect("cost"),
        }
    );
    // No proxy counted it: the agent's own report, marked as such.
    assert!(
        result.flags.iter().any(|f| f == "self_reported_usage"),
        "{:?}",
        result.flags
    );
    let t = &report_json(results.path(), &run_id)["trials"][0];
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    let shown = &t["usage"];
    assert_eq!(shown["input_tokens"], u.input_tokens, "{t}");
    assert_eq!(shown["output_tokens"], u.output_tokens, "{t}");
    assert_eq!(shown["cache_read_tokens"], u.cache_read_tokens, "{t}");
    assert_eq!(shown["cache_write_tokens"], u.cache_write_tokens, "{t}");
    assert_eq!(shown["requests"], u.requests, "{t}");
    assert_eq!(shown["cost_usd"].as_f64(), u.cost_usd, "{t}");
    assert_eq!(leftovers(&run_id).await, 0);
}
