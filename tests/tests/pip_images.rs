//! Per-task images with PyPI packages (`environment.pip_install`, PRBench's
//! `docker.pip_install`): built from wheels the host downloads, once per recipe, before any
//! trial; both the agent's container and the fresh grading container run it; a package that
//! cannot be had is refused at import, named, with the fix. These tests need PyPI (CI has it):
//! they do not skip without it.
//!
//! `tabulate` is the package: pure Python, small, and not in the platform images (checked
//! here through the nop side's grading: see the generic task's test).

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::routing::post;
use e2e_tests::{leftovers, repo_root, report_json, run_green, write_task};
use serde_json::{Value, json};

/// A scripted judge: 1 when every CSV comparison in the evidence passes (and there is one).
async fn judge(Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"][1]["content"].as_str().unwrap_or_default();
    let csv: Vec<&str> = user.lines().filter(|l| l.contains(" (csv): ")).collect();
    let ok = !csv.is_empty() && csv.iter().all(|l| l.contains(" (csv): pass"));
    let content =
        json!({"score": if ok { 1 } else { 0 }, "justification": format!("csv all pass: {ok}")})
            .to_string();
    Json(
        json!({"choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    )
}

/// The `images:` lines a command printed about per-task (`-pip`) images.
fn pip_image_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("images: ") && l.contains("-pip:"))
        .collect()
}

/// PRBench's `docker.pip_install: [numpy, tabulate]`: the import builds (or finds) the image
/// with tabulate; the gate's oracle runs reference code that imports it and scores 1; the
/// run does not build again ("up to date, reused"), nor does a second run.
#[tokio::test(flavor = "multi_thread")]
async fn a_prbench_task_with_pip_install_gets_its_image_once_and_the_oracle_scores() {
    let app = axum::Router::new().route("/v1/chat/completions", post(judge));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await.expect("serve") });

    let dest = tempfile::tempdir().expect("tempdir");
    let tasks = dest.path().join("tasks");
    let src = repo_root().join("tasks/tests/fixtures/prbench_pip/table-format");
    let out = import_prbench(&src, &tasks, Duration::from_secs(900)).await;
    out.assert_success();
    let at_import = pip_image_lines(&out.stderr);
    let tag = at_import
        .iter()
        .find_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with("research-bench/python-pip:"))
        })
        .unwrap_or_else(|| panic!("the import names the task's image:\n{}", out.stderr))
        .trim_end_matches(':')
        .to_owned();
    assert!(
        at_import
            .iter()
            .any(|l| l.contains("built") || l.contains("up to date")),
        "{at_import:?}"
    );

    let settings = dest.path().join("rb.toml");
    std::fs::write(
        &settings,
        format!(
            "[[judges]]\nbase_url = \"http://{addr}/v1\"\nmodel = \"mock-judge\"\napi_key_env = \"\"\nbackoff_ms = 10\n"
        ),
    )
    .expect("settings");
    for round in 0..2 {
        let results = tempfile::tempdir().expect("tempdir");
        let run_id = format!("e2e-pip-prbench-{}-{round}", std::process::id());
        let out = run_green(
            &[
                "tasks",
                "check",
                &tasks.display().to_string(),
                "--config",
                &settings.display().to_string(),
                "--run-id",
                &run_id,
                "--results-dir",
                &results.path().display().to_string(),
            ],
            &BTreeMap::new(),
            Duration::from_secs(900),
        )
        .await;
        println!("{}\n{}", out.stdout, out.stderr);
        out.assert_success();
        let lines = pip_image_lines(&out.stderr);
        assert_eq!(
            lines,
            [format!("images: {tag} (tabulate) up to date, reused")],
            "round {round}: the image the import built is reused, nothing is built"
        );
        assert!(
            out.stdout.contains("1 of 1 task(s) pass the gate"),
            "{}",
            out.stdout
        );
        let report = report_json(results.path(), &run_id);
        let oracle = report["trials"]
            .as_array()
            .expect("trials")
            .iter()
            .find(|t| t["agent"] == "oracle")
            .cloned()
            .expect("the oracle's trial");
        assert_eq!(oracle["score"].as_f64(), Some(1.0), "{oracle}");
        assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
    }
}

const TESTS: &str = r#"import os

import tabulate


def test_out():
    text = open(os.path.join(os.environ.get("WORKSPACE", "/workspace"), "out.txt")).read()
    assert text == tabulate.tabulate([[1, 2]], tablefmt="plain")
"#;

/// A generic task with `pip_install = ["tabulate"]`: the agent's code imports it (the oracle
/// writes a table with it) and so do the held-out tests, in the fresh grading container: both
/// run the per-task image. A `cmd:` agent shows the package is really in the agent's image.
#[tokio::test(flavor = "multi_thread")]
async fn a_generic_task_with_pip_install_runs_and_grades_in_its_image() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let dir = write_task(
        tasks.path(),
        "pip-tabulate",
        "Write tabulate's plain table of [[1, 2]] to out.txt.\n",
        TESTS,
        "python3 -c 'import tabulate; open(\"out.txt\", \"w\").write(tabulate.tabulate([[1, 2]], tablefmt=\"plain\"))'",
        "python",
    );
    let toml = dir.join("task.toml");
    let text = std::fs::read_to_string(&toml).expect("read").replace(
        "image = \"python\"\n",
        "image = \"python\"\npip_install = [\"tabulate\"]\n",
    );
    std::fs::write(&toml, text).expect("write");
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-pip-generic-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks.path().display().to_string(),
            "--agent",
            "oracle",
            "--agent",
            "cmd:python3 -c 'import tabulate' && echo has-tabulate > seen.txt",
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(900),
    )
    .await;
    println!("{}\n{}", out.stdout, out.stderr);
    assert!(
        !pip_image_lines(&out.stderr).is_empty(),
        "the run names the per-task image:\n{}",
        out.stderr
    );
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    let oracle = trials
        .iter()
        .find(|t| t["agent"] == "oracle")
        .expect("oracle");
    assert_eq!(oracle["score"].as_f64(), Some(1.0), "{oracle}");
    let cmd = trials.iter().find(|t| t["agent"] != "oracle").expect("cmd");
    assert_eq!(cmd["outcome"], "completed", "import tabulate ran: {cmd}");
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A package that is not on PyPI: the import fails, names it and says what to do; nothing is
/// left in the destination.
#[tokio::test(flavor = "multi_thread")]
async fn a_package_not_on_pypi_is_refused_at_import_by_name() {
    let work = tempfile::tempdir().expect("tempdir");
    let src = work.path().join("src");
    let from = repo_root().join("tasks/tests/fixtures/prbench_pip/table-format");
    copy_tree(&from, &src);
    let yaml = src.join("task.yaml");
    let text = std::fs::read_to_string(&yaml)
        .expect("read")
        .replace("    - tabulate\n", "    - rb-no-such-package-zq7\n");
    std::fs::write(&yaml, text).expect("write");
    let dest = work.path().join("tasks");
    let out = import_prbench(&src, &dest, Duration::from_secs(300)).await;
    assert!(!out.exit.success(), "{}\n{}", out.stdout, out.stderr);
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert!(
        all.contains("`rb-no-such-package-zq7` is not on the package index")
            && all.contains("check the name's spelling on pypi.org, or remove it"),
        "{all}"
    );
    let left: Vec<_> = std::fs::read_dir(&dest)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the refused task is not left: {left:?}");
}

/// `green-agent tasks import prbench SRC DEST`.
async fn import_prbench(
    src: &std::path::Path,
    dest: &std::path::Path,
    timeout: Duration,
) -> e2e_tests::CliOutput {
    run_green(
        &[
            "tasks",
            "import",
            "prbench",
            &src.display().to_string(),
            &dest.display().to_string(),
        ],
        &BTreeMap::new(),
        timeout,
    )
    .await
}
