//! An external agent (`a2a:URL`): already serving A2A elsewhere, it gets the task as message
//! parts, its files come back as artifacts and are graded in a fresh container.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use e2e_tests::{binary, leftovers, report_json, run_green, write_done_task, write_task};
use sandbox::child::{ChildSpec, SupervisedChild};

/// The external agent: the platform's adapter serving `sh -c SCRIPT` on this host, on a free
/// port; returns it with the port it announced.
async fn start_external_adapter(workspace: &Path, script: &str) -> (SupervisedChild, String) {
    let mut agent = SupervisedChild::spawn(ChildSpec {
        program: binary("white-agent-adapter").display().to_string(),
        args: [
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--driver",
            "command",
            "--workspace",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([
            workspace.display().to_string(),
            "--".into(),
            "sh".into(),
            "-c".into(),
            script.into(),
        ])
        .collect(),
        env: BTreeMap::from([
            (
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            ),
            ("RUST_LOG".to_string(), "info".to_string()),
        ]),
        clear_env: true,
        cwd: workspace.to_path_buf(),
        limits: None,
    })
    .expect("adapter starts");
    let line = tokio::time::timeout(Duration::from_secs(30), agent.next_stdout_line())
        .await
        .expect("adapter announces its port")
        .expect("a line");
    let addr = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected line {line}: {}", agent.stderr_tail()));
    let port = addr.rsplit(':').next().expect("port").to_owned();
    (agent, port)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_external_a2a_agent_is_assessed() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_done_task(tasks.path(), "external");
    // The external agent: the platform's adapter serving a command on this host.
    let workspace = tempfile::tempdir().expect("tempdir");
    let (agent, port) = start_external_adapter(workspace.path(), "echo done > out.txt").await;

    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-external-{}", std::process::id());
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
    let t = &report_json(results.path(), &run_id)["trials"][0];
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    assert!(
        t["artifacts"]
            .as_array()
            .expect("artifacts")
            .iter()
            .any(|a| a["name"] == "file:out.txt"),
        "{t}"
    );
    assert_eq!(leftovers(&run_id).await, 0);
}

const BIG_TESTS: &str = r#"import hashlib
import os

W = os.environ.get("WORKSPACE", "/workspace")


def sha(name):
    return hashlib.sha256(open(os.path.join(W, name), "rb").read()).hexdigest()


def test_input_arrived_and_output_came_back():
    assert open(os.path.join(W, "in_sha.txt")).read().split()[0] == sha("data/big.bin")
    assert os.path.getsize(os.path.join(W, "big_out.bin")) == 12000000
    assert open(os.path.join(W, "out_sha.txt")).read().split()[0] == sha("big_out.bin")
"#;

/// Files over the thresholds travel as `url` parts both ways: the 3 MB workspace file is served
/// by the green agent (the adapter logs fetching it by URL), the 12 MB output is served by the
/// adapter and downloaded into the store and the grading workspace.
#[tokio::test(flavor = "multi_thread")]
async fn big_files_travel_as_url_parts_to_and_from_an_external_agent() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "external-big",
        "Hash the input, write a big output.\n",
        BIG_TESTS,
        "true",
        "python",
    );
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::create_dir_all(dir.join("workspace/data")).expect("mkdir");
    std::fs::write(dir.join("workspace/data/big.bin"), &big).expect("write");
    let workspace = tempfile::tempdir().expect("tempdir");
    let script = "sha256sum data/big.bin > in_sha.txt && \
                  head -c 12000000 /dev/urandom > big_out.bin && \
                  sha256sum big_out.bin > out_sha.txt";
    let (agent, port) = start_external_adapter(workspace.path(), script).await;

    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-external-big-{}", std::process::id());
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
            "--file-server-host",
            "127.0.0.1",
        ],
        &BTreeMap::new(),
        Duration::from_secs(300),
    )
    .await;
    let log = agent.stderr_tail();
    agent.kill_tree();
    out.assert_success();
    assert!(
        log.contains("input file fetched by URL") && log.contains("data/big.bin"),
        "the agent did not fetch data/big.bin by URL: {log}"
    );
    let t = &report_json(results.path(), &run_id)["trials"][0];
    assert_eq!(t["outcome"], "completed", "{t}");
    assert_eq!(t["score"].as_f64(), Some(1.0), "{t}");
    let artifacts = t["artifacts"].as_array().expect("artifacts");
    let big_out = artifacts
        .iter()
        .find(|a| a["name"] == "file:big_out.bin")
        .unwrap_or_else(|| panic!("big_out.bin not stored: {t}"));
    assert_eq!(big_out["size"], 12_000_000u64, "{t}");
    assert_eq!(leftovers(&run_id).await, 0);
}
