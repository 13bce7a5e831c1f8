//! Bad input gets a clear message and a non-zero exit before any container starts.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use sandbox::child::{ChildSpec, SupervisedChild};

struct Out {
    code: Option<i32>,
    stderr: String,
}

async fn green(args: &[&str], env: BTreeMap<String, String>, results: &Path) -> Out {
    let mut full: BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| !k.ends_with("_API_KEY") && !k.starts_with("RB_"))
        .collect();
    full.extend(env);
    let mut argv: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    argv.extend(["--results-dir".to_owned(), results.display().to_string()]);
    let mut child = SupervisedChild::spawn(ChildSpec {
        program: env!("CARGO_BIN_EXE_green-agent").to_owned(),
        args: argv,
        env: full,
        clear_env: true,
        cwd: Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
        limits: None,
    })
    .expect("spawn");
    let exit = tokio::time::timeout(Duration::from_secs(60), async {
        while child.next_stdout_line().await.is_some() {}
        child.wait().await
    })
    .await
    .expect("exits promptly, never hangs");
    Out {
        code: exit.code,
        stderr: child.stderr_tail(),
    }
}

/// Asserts a failure naming `needle`, and that no run directory (hence no trial, hence no
/// container) was created.
fn assert_refused(out: &Out, needle: &str, results: &Path) {
    assert!(
        matches!(out.code, Some(c) if c != 0),
        "non-zero exit, got {:?}: {}",
        out.code,
        out.stderr
    );
    assert!(
        out.stderr.contains(needle),
        "message names the cause ({needle}):\n{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("panicked"),
        "no panic:\n{}",
        out.stderr
    );
    let runs = std::fs::read_dir(results)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().join("store.sqlite").exists())
                .count()
        })
        .unwrap_or(0);
    assert_eq!(runs, 0, "no run was started");
}

#[tokio::test]
async fn unknown_agent_spec() {
    let results = tempfile::tempdir().expect("tempdir");
    let out = green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--agents",
            "oracle,gpt4",
        ],
        BTreeMap::new(),
        results.path(),
    )
    .await;
    assert_refused(&out, "unknown agent `gpt4`", results.path());
}

#[tokio::test]
async fn missing_api_key_for_a_chosen_agent() {
    let results = tempfile::tempdir().expect("tempdir");
    let out = green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--agents",
            "nop,claude-code:model=claude-sonnet-4-5",
        ],
        BTreeMap::new(),
        results.path(),
    )
    .await;
    assert_refused(&out, "ANTHROPIC_API_KEY", results.path());
    let out = green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--agents",
            "codex:model=gpt-5-codex",
        ],
        BTreeMap::new(),
        results.path(),
    )
    .await;
    assert_refused(&out, "OPENAI_API_KEY", results.path());
}

#[tokio::test]
async fn unreadable_task_folder() {
    let results = tempfile::tempdir().expect("tempdir");
    let missing = results.path().join("no-such-suite");
    let out = green(
        &[
            "run",
            "--tasks",
            &missing.display().to_string(),
            "--agents",
            "oracle",
        ],
        BTreeMap::new(),
        results.path(),
    )
    .await;
    assert_refused(&out, "no-such-suite", results.path());

    let tasks = tempfile::tempdir().expect("tempdir");
    let bad = tasks.path().join("broken");
    std::fs::create_dir_all(&bad).expect("mkdir");
    std::fs::write(
        bad.join("task.toml"),
        "id = \"broken\"\nkind = \"nonsense\"\n",
    )
    .expect("write");
    let out = green(
        &[
            "run",
            "--tasks",
            &tasks.path().display().to_string(),
            "--agents",
            "oracle",
        ],
        BTreeMap::new(),
        results.path(),
    )
    .await;
    assert_refused(&out, "task.toml", results.path());
}

#[tokio::test]
async fn port_in_use() {
    let results = tempfile::tempdir().expect("tempdir");
    let busy = std::net::TcpListener::bind(("0.0.0.0", 0)).expect("bind");
    let port = busy.local_addr().expect("addr").port().to_string();
    let out = green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--agents",
            "oracle",
            "--proxy-port",
            &port,
        ],
        BTreeMap::new(),
        results.path(),
    )
    .await;
    assert_refused(
        &out,
        &format!("port {port} is already in use"),
        results.path(),
    );
}

#[tokio::test]
async fn bad_settings_and_unknown_runs() {
    let results = tempfile::tempdir().expect("tempdir");
    let env = BTreeMap::from([("RB_CONCURRENCY".to_string(), "lots".to_string())]);
    let out = green(
        &["run", "--tasks", "tasks/examples", "--agents", "oracle"],
        env,
        results.path(),
    )
    .await;
    assert_refused(&out, "RB_CONCURRENCY", results.path());
    let out = green(&["resume", "no-such-run"], BTreeMap::new(), results.path()).await;
    assert_refused(&out, "run `no-such-run` not found", results.path());
    let out = green(&["report", "no-such-run"], BTreeMap::new(), results.path()).await;
    assert_refused(&out, "run `no-such-run` not found", results.path());
}

#[tokio::test]
async fn a_judge_without_its_key() {
    let results = tempfile::tempdir().expect("tempdir");
    for (judge_args, cause) in [
        (&["--judge-model", "gpt-5-mini"][..], "OPENAI_API_KEY"),
        (
            &["--judge-model", "claude-judge", "--judge-api", "anthropic"][..],
            "ANTHROPIC_API_KEY",
        ),
        (
            &["--judge-model", "m", "--judge-api", "gemini"][..],
            "unknown judge API",
        ),
    ] {
        let mut args = vec!["run", "--tasks", "tasks/examples", "--agents", "oracle"];
        args.extend_from_slice(judge_args);
        let out = green(&args, BTreeMap::new(), results.path()).await;
        assert_refused(&out, cause, results.path());
    }
}

#[tokio::test]
async fn docker_unreachable_is_said_once() {
    let results = tempfile::tempdir().expect("tempdir");
    let socket = results.path().join("no-docker.sock");
    let out = green(
        &["run", "--tasks", "tasks/examples", "--agents", "nop"],
        BTreeMap::from([(
            "DOCKER_HOST".to_owned(),
            format!("unix://{}", socket.display()),
        )]),
        results.path(),
    )
    .await;
    assert_refused(&out, "cannot use Docker", results.path());
    assert_eq!(
        out.stderr
            .matches("the Docker daemon is unreachable")
            .count(),
        1,
        "the cause is said once:\n{}",
        out.stderr
    );
    assert!(out.stderr.contains("DOCKER_HOST"), "{}", out.stderr);
}
