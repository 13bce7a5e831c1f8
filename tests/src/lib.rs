//! Cross-crate end-to-end tests (in `tests/`) and what they share: locating the platform's
//! binaries, running `green-agent` as a supervised child, and writing small task folders.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::child::{ChildExit, ChildSpec, SupervisedChild};

pub mod postgres;

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

/// The held-out test of [`write_done_task`]: `out.txt` in the workspace holds `done`.
pub const DONE_TESTS: &str = r#"import os


def test_out():
    assert open(os.path.join(os.environ.get("WORKSPACE", "/workspace"), "out.txt")).read().strip() == "done"
"#;

/// The smallest task most end-to-end tests need: write `done` to `out.txt` ([`DONE_TESTS`];
/// the oracle echoes it), on the python image.
pub fn write_done_task(root: &Path, id: &str) -> PathBuf {
    write_task(
        root,
        id,
        "Write `done` to out.txt.\n",
        DONE_TESTS,
        "echo done > out.txt",
        "python",
    )
}

/// `docker ARGS` as a supervised child of this test (its stdout read line by line).
pub fn docker(args: Vec<String>) -> SupervisedChild {
    SupervisedChild::spawn(ChildSpec {
        program: "docker".into(),
        args,
        env: std::env::vars().collect(),
        clear_env: true,
        cwd: repo_root(),
        limits: None,
    })
    .expect("docker starts")
}

/// The A2A task ids of a trial's attempts (an agent run once holds one over all its attempts).
pub fn a2a_tasks(attempts: &[green_agent::store::AttemptRow]) -> std::collections::BTreeSet<&str> {
    attempts
        .iter()
        .filter_map(|a| a.a2a_task_id.as_deref())
        .collect()
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

/// `green-agent report RUN --format json` over `results` (with `env`, e.g. a database URL),
/// asserted to succeed and parsed.
pub async fn report_via_cli(
    results: &Path,
    run_id: &str,
    env: &BTreeMap<String, String>,
) -> serde_json::Value {
    let results = results.display().to_string();
    let out = run_green(
        &[
            "report",
            run_id,
            "--format",
            "json",
            "--results-dir",
            &results,
        ],
        env,
        std::time::Duration::from_secs(120),
    )
    .await;
    out.assert_success();
    serde_json::from_str(&out.stdout).expect("report JSON")
}

/// The stored report of a run as JSON.
pub fn report_json(results: &Path, run_id: &str) -> serde_json::Value {
    let path = results.join(run_id).join("report.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("report.json parses")
}

/// The model calls the proxy logged for one trial (`call_log_dir` of the proxy configuration,
/// appended to by every green-agent process of the run).
pub fn proxy_calls(call_log_dir: &Path, trial_id: &str) -> Vec<serde_json::Value> {
    let path = call_log_dir.join(format!("{trial_id}.calls.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a call record"))
        .collect()
}

/// Watches the engine's event stream for the agent containers created for `run_id` (removed
/// ones too): the evidence, independent of the green agent, that an agent was started once.
/// Start it before the run; [`AgentCreations::stop`] gives the count per trial. (The engine
/// keeps too few past events to ask afterwards on a busy machine.)
#[derive(Debug)]
pub struct AgentCreations {
    pid: u32,
    reader: tokio::task::JoinHandle<BTreeMap<String, usize>>,
}

impl AgentCreations {
    pub async fn watch(run_id: &str) -> AgentCreations {
        Self::watch_event(run_id, "create").await
    }

    /// Like [`AgentCreations::watch`], for the agent containers *started*: a create a killed
    /// green agent had in flight can complete after its successor looked (docs/resume.md); such
    /// a container is never started (the dead process cannot ask) and is reaped at the end.
    pub async fn watch_starts(run_id: &str) -> AgentCreations {
        Self::watch_event(run_id, "start").await
    }

    async fn watch_event(run_id: &str, event: &str) -> AgentCreations {
        let mut child = docker(vec![
            "events".into(),
            "--filter".into(),
            "type=container".into(),
            "--filter".into(),
            format!("event={event}"),
            "--filter".into(),
            format!("label={}={run_id}", sandbox::labels::RUN),
            "--format".into(),
            format!(
                "{{{{index .Actor.Attributes \"{}\"}}}} {{{{index .Actor.Attributes \"{}\"}}}}",
                sandbox::labels::ROLE,
                sandbox::labels::TRIAL
            ),
        ]);
        let pid = child.pid();
        let reader = tokio::spawn(async move {
            let mut out = BTreeMap::new();
            while let Some(line) = child.next_stdout_line().await {
                if let Some(trial) = line.trim().strip_prefix("agent ") {
                    *out.entry(trial.to_owned()).or_insert(0) += 1;
                }
            }
            out
        });
        // The stream is open once the daemon answers: give it a moment before the run starts.
        tokio::time::sleep(Duration::from_secs(1)).await;
        AgentCreations { pid, reader }
    }

    /// Stops watching; agent containers created per trial.
    pub async fn stop(self) -> BTreeMap<String, usize> {
        // The watcher runs in its own process group (SupervisedChild).
        let group = nix::unistd::Pid::from_raw(i32::try_from(self.pid).expect("pid"));
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        self.reader.await.expect("the event reader")
    }
}

/// Watches the engine's event stream for the networks created for `run_id` (removed ones too):
/// the evidence that a trial ran without a network of its own. Network events carry no labels,
/// so they are told by name: every object of a run is named `rb-<run>-…` (`run_id` must be a
/// short Docker-safe name). Start it before the run.
#[derive(Debug)]
pub struct NetworkCreations {
    pid: u32,
    reader: tokio::task::JoinHandle<Vec<String>>,
}

impl NetworkCreations {
    pub async fn watch(run_id: &str) -> NetworkCreations {
        assert!(
            run_id.len() <= 40
                && run_id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "a run id that names its objects verbatim: {run_id}"
        );
        let prefix = format!("rb-{run_id}-");
        let mut child = docker(
            [
                "events",
                "--filter",
                "type=network",
                "--filter",
                "event=create",
                "--format",
                "{{.Actor.Attributes.name}}",
            ]
            .map(String::from)
            .to_vec(),
        );
        let pid = child.pid();
        let reader = tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some(line) = child.next_stdout_line().await {
                if line.trim().starts_with(&prefix) {
                    out.push(line.trim().to_owned());
                }
            }
            out
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        NetworkCreations { pid, reader }
    }

    /// Stops watching; the names of the run's networks created meanwhile.
    pub async fn stop(self) -> Vec<String> {
        let group = nix::unistd::Pid::from_raw(i32::try_from(self.pid).expect("pid"));
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGTERM);
        self.reader.await.expect("the event reader")
    }
}

/// A shell command making one call to the scripted model `scripted:<script>` through the model
/// proxy the agent was given (its URL and dummy token from the environment); it fails when the
/// proxy answers with an error. A refused connection (no proxy listening: its green agent is
/// restarting) is retried for up to 120 s, and an answer is awaited up to 300 s, as the real
/// agent CLIs do (a resumed run's proxy holds a call until its trial is reattached).
pub fn model_call_command(script: &str) -> String {
    format!(
        r#"python3 -c '
import json, os, urllib.request
body = json.dumps({{"model": "scripted:{script}", "max_tokens": 16,
    "tools": [{{"name": "Bash", "description": "run a command",
               "input_schema": {{"type": "object", "properties": {{"command": {{"type": "string"}}}}}}}}],
    "messages": [{{"role": "user", "content": "hi"}}]}}).encode()
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=body,
    headers={{"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01",
             "content-type": "application/json"}})
import time, urllib.error
deadline = time.time() + 120
while True:
    try:
        urllib.request.urlopen(req, timeout=300).read()
        break
    except urllib.error.URLError as e:
        # Nothing listening (the green agent restarting): the call never arrived, retry as
        # the real CLIs do; anything else is an answer and ends the agent.
        if not isinstance(e.reason, ConnectionRefusedError) or time.time() > deadline:
            raise
        time.sleep(0.5)
'"#
    )
}

/// A model-proxy configuration that logs every call to `call_log_dir` (one JSONL file per
/// trial) and has the script `script` answering a few calls.
pub fn counting_proxy_config(call_log_dir: &Path, script: &str) -> String {
    format!(
        "call_log_dir = {:?}\n\n[scripts.{script}]\n[[scripts.{script}.steps]]\ntext = \"one\"\n[[scripts.{script}.steps]]\ntext = \"two\"\n",
        call_log_dir.display().to_string()
    )
}

/// The Python of a repository venv (`.venv`: a2a-sdk 1.x and the CLIs; `.venv-a2a03`: a2a-sdk
/// 0.3), which `scripts/bootstrap-tests` creates.
pub fn venv_python(venv: &str) -> PathBuf {
    let p = repo_root().join(venv).join("bin/python");
    assert!(
        p.exists(),
        "the Python venv with a2a-sdk is missing at {}; run scripts/bootstrap-tests",
        p.display()
    );
    p
}

/// A child process killed (whole tree) when dropped.
#[derive(Debug)]
pub struct KilledOnDrop(pub SupervisedChild);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        self.0.kill_tree();
    }
}

/// Starts the official a2a-sdk 1.x agent `tests/tests/agents/sdk_agent.py MODE COUNT_FILE` in
/// `dir` (it appends a line to COUNT_FILE, `dir/MODE.count`, whenever it starts on a task).
/// Returns it, the port it listens on and the count file.
pub async fn start_sdk_agent(mode: &str, dir: &Path) -> (KilledOnDrop, String, PathBuf) {
    let count = dir.join(format!("{mode}.count"));
    let mut child = SupervisedChild::spawn(ChildSpec {
        program: venv_python(".venv").display().to_string(),
        args: vec![
            repo_root()
                .join("tests/tests/agents/sdk_agent.py")
                .display()
                .to_string(),
            mode.to_owned(),
            count.display().to_string(),
        ],
        env: BTreeMap::new(),
        clear_env: false,
        cwd: dir.to_path_buf(),
        limits: None,
    })
    .expect("start the SDK agent");
    let port = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), child.next_stdout_line())
            .await
            .expect("the agent printed its port within 60 s")
            .unwrap_or_else(|| panic!("the agent exited: {}", child.stderr_tail()));
        if let Some(p) = line.strip_prefix("PORT ") {
            break p.trim().to_owned();
        }
    };
    (KilledOnDrop(child), port, count)
}

/// One line per attempt of a trial (each starting on a new line): what a failure message about
/// "exactly once" needs to tell the paths apart (the rows themselves, with the agent's whole
/// final task, drown the rest of the output).
pub fn attempt_lines(attempts: &[green_agent::store::AttemptRow]) -> String {
    attempts
        .iter()
        .map(|a| {
            format!(
                "\n  #{} {} pid {} task {:?} driven {} collected {} ended {:?} ({:?}) container {:?}",
                a.attempt,
                a.kind,
                a.pid,
                a.a2a_task_id,
                a.driven.is_some(),
                a.collected.is_some(),
                a.ended,
                a.detail,
                a.place.container.as_deref().map(|c| &c[..12.min(c.len())])
            )
        })
        .collect()
}
