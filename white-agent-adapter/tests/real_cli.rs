//! The real Claude Code and Codex binaries (from the project's venv) behind the adapter, driven
//! end to end by the model proxy's scripted mock model: the adapter launches the CLI with its
//! generated flags, environment and config, the scripted model makes it write and run a file,
//! and the A2A task completes with the file artifact, the answer, the usage and the trajectory.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use a2a_protocol::TaskState;
use model_proxy::{ModelProxy, ProxyConfig, RunningProxy, Script, TrialOptions};
use white_agent_adapter::drivers::DriverKind;
use white_agent_adapter::staging;

fn venv() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv")
}

fn script() -> Script {
    Script::from_toml(
        r#"
        [[steps]]
        text = "Writing the script."
        write_file = { path = "hello.py", content = "print('hello from the scripted model')\n" }
        usage = { input_tokens = 1000, output_tokens = 40 }
        [[steps]]
        run = "python3 hello.py"
        usage = { input_tokens = 1100, output_tokens = 10 }
        [[steps]]
        text = "Done: wrote and ran hello.py."
        usage = { input_tokens = 1200, output_tokens = 8 }
        "#,
    )
    .expect("valid script")
}

async fn proxy() -> RunningProxy {
    let mut scripts = BTreeMap::new();
    scripts.insert("write-hello".to_owned(), script());
    let config = ProxyConfig {
        scripts,
        ..ProxyConfig::default()
    };
    let bind: SocketAddr = "127.0.0.1:0".parse().expect("addr");
    ModelProxy::start(config, bind).await.expect("proxy starts")
}

async fn run_cli(kind: DriverKind) {
    let proxy = proxy().await;
    let trial = format!("adapter-{}", kind.name());
    let token = proxy
        .register_trial_with(
            &trial,
            TrialOptions {
                provider_override: Some("scripted:write-hello".into()),
                ..Default::default()
            },
        )
        .expect("register trial");
    // Stage the CLI from the venv exactly as the green agent does, and run the staged copy.
    // A cache shared by test runs (as on a host): the first run copies, later runs reuse.
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("agent-staging");
    let venv = venv();
    let sources = staging::Sources {
        venv: &venv,
        agent_packages: &venv,
    };
    let staged = staging::stage(kind, sources, &cache).expect("stage the CLI from the venv");
    let binary = staged.host_dir.join(kind.binary_name().expect("binary"));
    let base = proxy.base_url();
    let token = token.as_str().to_owned();
    let adapter = common::start(kind, &[], move |driver, _| {
        driver.agent_bin = Some(binary);
        driver.model = Some("scripted-model".into());
        match kind {
            DriverKind::ClaudeCode => {
                driver.env.insert(
                    "ANTHROPIC_BASE_URL".into(),
                    base.trim_end_matches('/').to_owned(),
                );
                driver.env.insert("ANTHROPIC_API_KEY".into(), token);
            }
            _ => {
                driver.env.insert(
                    "OPENAI_BASE_URL".into(),
                    format!("{}/v1", base.trim_end_matches('/')),
                );
                driver.env.insert("OPENAI_API_KEY".into(), token);
            }
        }
    })
    .await;
    let task = adapter.send("Write hello.py, run it, and report.").await;
    let (task, _) = adapter
        .wait_terminal(&task.id, Duration::from_secs(240))
        .await;
    assert_eq!(
        task.status.state,
        TaskState::Completed,
        "{}\nmetadata: {:#}",
        common::status_text(&task),
        common::metadata(&task)
    );
    let file = task.artifact("hello.py").expect("hello.py artifact");
    assert_eq!(
        file.parts[0].as_raw(),
        Some(&b"print('hello from the scripted model')\n"[..])
    );
    assert_eq!(
        task.artifact("answer").map(|a| a.text_content()),
        Some("Done: wrote and ran hello.py.".to_owned())
    );
    let usage = task
        .artifact("usage")
        .and_then(|a| a.parts[0].as_data().cloned())
        .expect("usage");
    let expected = script().expected_usage();
    assert_eq!(usage["output_tokens"], expected.output_tokens, "{usage}");
    let trajectory = task
        .artifact("trajectory")
        .and_then(|a| a.parts[0].as_data().cloned())
        .expect("trajectory");
    let steps = trajectory["steps"].as_array().expect("steps");
    assert!(
        steps.iter().any(|s| s["observation"]
            .to_string()
            .contains("hello from the scripted model")),
        "the run's output should be in the trajectory: {trajectory:#}"
    );
    let proxy_usage = proxy.usage(&trial).expect("trial usage");
    assert_eq!(proxy_usage.requests, 3);
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_claude_code_behind_the_adapter_completes_a_scripted_task() {
    run_cli(DriverKind::ClaudeCode).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_codex_behind_the_adapter_completes_a_scripted_task() {
    run_cli(DriverKind::Codex).await;
}
