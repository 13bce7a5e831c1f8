//! Cross-crate end-to-end tests (in `tests/`) and what they share: locating the platform's
//! binaries, running `green-agent` as a supervised child, and writing small task folders.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::child::{ChildExit, ChildSpec, SupervisedChild};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// `target/debug` of the workspace (or `$CARGO_TARGET_DIR/debug`).
pub fn bin_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from)
        .join("debug")
}

/// A built binary of the workspace; panics with the command that builds it.
pub fn binary(name: &str) -> PathBuf {
    let p = bin_dir().join(name);
    assert!(
        p.is_file(),
        "{} is missing: build it first with `cargo build -p green-agent -p white-agent-adapter`",
        p.display()
    );
    p
}

/// What a finished `green-agent` invocation printed.
#[derive(Debug)]
pub struct CliOutput {
    pub exit: ChildExit,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    /// Panics, showing both streams, unless the command exited with 0.
    pub fn assert_success(&self) {
        assert!(
            self.exit.success(),
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            self.exit,
            self.stdout,
            self.stderr
        );
    }
}

/// Starts `green-agent ARGS` in the repository root with the test's environment plus `env`.
pub fn spawn_green(args: &[&str], env: &BTreeMap<String, String>) -> SupervisedChild {
    let mut full: BTreeMap<String, String> = std::env::vars().collect();
    full.extend(env.clone());
    full.insert(
        "RB_ADAPTER_BIN".into(),
        binary("white-agent-adapter").display().to_string(),
    );
    SupervisedChild::spawn(ChildSpec {
        program: binary("green-agent").display().to_string(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env: full,
        clear_env: true,
        cwd: repo_root(),
        limits: None,
    })
    .expect("green-agent starts")
}

/// Runs `green-agent ARGS` to completion (bounded by `timeout`).
pub async fn run_green(
    args: &[&str],
    env: &BTreeMap<String, String>,
    timeout: Duration,
) -> CliOutput {
    let mut child = spawn_green(args, env);
    let mut stdout = String::new();
    let collected = tokio::time::timeout(timeout, async {
        while let Some(line) = child.next_stdout_line().await {
            stdout.push_str(&line);
            stdout.push('\n');
        }
        child.wait().await
    })
    .await;
    let exit = match collected {
        Ok(exit) => exit,
        Err(_) => {
            child.kill_tree();
            panic!(
                "green-agent {args:?} did not finish within {timeout:?}; stderr:\n{}",
                child.stderr_tail()
            );
        }
    };
    CliOutput {
        exit,
        stdout,
        stderr: child.stderr_tail(),
    }
}

/// Writes a small generic task: `hidden/tests/test_out.py` holds `tests`, the oracle's
/// `solve.sh` runs `solve`.
pub fn write_task(
    root: &Path,
    id: &str,
    instruction: &str,
    tests: &str,
    solve: &str,
    image: &str,
) -> PathBuf {
    let dir = root.join(id);
    let w = |rel: &str, text: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    };
    w(
        "task.toml",
        &format!(
            r#"id = "{id}"
kind = "generic"
instruction = "instruction.md"

[environment]
image = "{image}"
memory_mb = 512
agent_timeout_secs = 300
grading_timeout_secs = 120

[grading]
[grading.dimensions]
code_correctness = 1.0

[[grading.graders]]
name = "tests"
dimension = "code_correctness"
check = {{ kind = "pytest", hidden_tests = "tests" }}
"#
        ),
    );
    w("instruction.md", instruction);
    w("workspace/README.md", "The task's workspace.\n");
    w("hidden/tests/test_out.py", tests);
    w(
        "solution/solve.sh",
        &format!("#!/bin/sh\nset -eu\n{solve}\n"),
    );
    dir
}

/// Removes (and counts) every Docker object still labelled with `run_id`.
pub async fn leftovers(run_id: &str) -> usize {
    let backend = sandbox::docker::DockerBackend::connect()
        .await
        .expect("docker");
    sandbox::Backend::reap(&backend, Some(run_id))
        .await
        .expect("reap")
}

/// The stored report of a run as JSON.
pub fn report_json(results: &Path, run_id: &str) -> serde_json::Value {
    let path = results.join(run_id).join("report.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("report.json parses")
}
