//! The command line as a user meets it: an invalid command leaves no run folder and says what
//! was probably meant; a run names its folder, and `report` and `resume` take that folder;
//! `resume` of a finished run has nothing to do; piped output shows a line per finished trial.

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::run_green;

/// Folders a results directory holds.
fn entries(dir: &std::path::Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// One invalid command: its flags, its environment, and what its error must say.
type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

#[tokio::test(flavor = "multi_thread")]
async fn invalid_commands_leave_no_run_folder_and_name_what_was_meant() {
    let results = tempfile::tempdir().expect("tempdir");
    let dir = results.path().join("results");
    let dir_arg = dir.display().to_string();
    let cases: [Case; 5] = [
        (
            &["--agents", "orcale"],
            &[],
            "unknown agent `orcale` (did you mean `oracle`?)",
        ),
        (&[], &[], "no agents given"),
        (
            &["--agents", "oracle", "--kind", "prbnch"],
            &[],
            "(did you mean `prbench`?)",
        ),
        (
            &["--agents", "oracle", "--filter", "csv-statz"],
            &[],
            "(did you mean --filter csv-stats?)",
        ),
        (
            &["--agents", "oracle"],
            &[("DOCKER_HOST", "unix:///nonexistent/docker.sock")],
            "the Docker daemon is unreachable",
        ),
    ];
    for (extra, env, expected) in cases {
        let mut args = vec![
            "run",
            "--tasks",
            "tasks/examples",
            "--results-dir",
            &dir_arg,
            "--run-id",
            "invalid",
        ];
        args.extend_from_slice(extra);
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let out = run_green(&args, &env, Duration::from_secs(60)).await;
        assert!(!out.exit.success(), "{args:?} fails");
        assert!(
            out.stderr.contains(expected),
            "{args:?}: {expected:?} in:\n{}",
            out.stderr
        );
        let first = out.stderr.lines().next().unwrap_or_default();
        let sentences: Vec<&str> = first.split("; ").collect();
        let mut seen = std::collections::BTreeSet::new();
        assert!(
            sentences.iter().all(|s| seen.insert(*s)),
            "no sentence repeated: {first}"
        );
        assert!(
            entries(&dir).is_empty(),
            "{args:?} left {:?} in the results directory",
            entries(&dir)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unwritable_results_directory_is_named_by_its_flag() {
    let results = tempfile::tempdir().expect("tempdir");
    // A file where the results directory would be: nothing can be created under it.
    let blocked = results.path().join("blocked");
    std::fs::write(&blocked, b"").expect("write");
    let out = run_green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--filter",
            "generic-csv-stats",
            "--agents",
            "nop",
            "--results-dir",
            &blocked.join("results").display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(300),
    )
    .await;
    assert!(!out.exit.success());
    assert!(
        out.stderr.contains("--results-dir"),
        "the flag is named:\n{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn report_and_resume_take_the_run_folder_and_a_finished_run_has_nothing_to_resume() {
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-cli-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--filter",
            "generic-csv-stats",
            "--agents",
            "oracle,nop",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(600),
    )
    .await;
    out.assert_success();
    // Not a terminal: one line per finished trial, with counts, mean and cost so far.
    let progress: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains(" trials, ") && l.contains(" | "))
        .collect();
    assert_eq!(progress.len(), 2, "a line per trial:\n{}", out.stderr);
    assert!(progress[0].starts_with("1/2 trials, "), "{}", progress[0]);
    assert!(progress[1].starts_with("2/2 trials, "), "{}", progress[1]);
    assert!(
        progress[1].contains("mean 0.50 (2 scored) · $0.00"),
        "{}",
        progress[1]
    );

    // The folder `run` printed, from another working directory's point of view.
    let folder = results.path().join(&run_id);
    let folder_arg = folder.display().to_string();
    let report = run_green(
        &["report", &folder_arg, "--format", "json"],
        &BTreeMap::new(),
        Duration::from_secs(120),
    )
    .await;
    report.assert_success();
    let json: serde_json::Value = serde_json::from_str(&report.stdout).expect("report JSON");
    assert_eq!(json["trials"].as_array().map(Vec::len), Some(2));

    let before = std::fs::metadata(folder.join("report.md"))
        .and_then(|m| m.modified())
        .expect("report.md");
    let resume = run_green(
        &["resume", &folder_arg],
        &BTreeMap::new(),
        Duration::from_secs(120),
    )
    .await;
    resume.assert_success();
    assert!(
        resume.stdout.contains("nothing to resume"),
        "{}",
        resume.stdout
    );
    let after = std::fs::metadata(folder.join("report.md"))
        .and_then(|m| m.modified())
        .expect("report.md");
    assert_eq!(before, after, "the reports are not rewritten");

    let missing = run_green(
        &[
            "report",
            "no-such-run",
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(60),
    )
    .await;
    assert!(!missing.exit.success());
    assert!(
        missing.stderr.contains("`no-such-run` not found"),
        "{}",
        missing.stderr
    );
}
