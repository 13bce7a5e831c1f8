//! Why did it fail? (issue 28): the "wrong" agent (`tests/fixtures/failures/wrong.sh`) writes a
//! plausible but wrong solution on every bundled example task and on `unittest-mean`, so every
//! grader kind those tasks use fails. Each failing grader must say which check failed and why
//! (a failing test's name and message, or a note), and no report format may show a Rust debug
//! form (`Some(…)`, `None`, `{ code: … }`).
//!
//! The same run is then read as a user would, in a headless Chromium: every page of the viewer
//! crawled (`viewer_support::crawl`: every link answers, no empty list where a page says there
//! are trials, no debug formatting), and for every failing trial both its trial page and its
//! section of `report.html` name each failing check with its message (taken from the stored
//! grade report), plus a few known checks and messages named literally.

mod viewer_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use e2e_tests::{repo_root, report_json, run_green};
use green_agent::presentation::values::debug_leaks;
use viewer_support::crawl::{crawl, report_explains_failures, viewer_explains_failures};
use viewer_support::{Browser, start_viewer};

/// The `cmd:` spec of the wrong agent (the script shipped base64-encoded on its command line).
pub fn wrong_agent() -> String {
    let path = repo_root().join("tests/fixtures/failures/wrong.sh");
    let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let b64 = base64::engine::general_purpose::STANDARD.encode(body);
    format!("cmd:: wrong; echo {b64} | base64 -d | sh")
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read_dir") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
        }
    }
}

/// Debug forms of Rust values that must never reach a user.
const DEBUG_FORMS: &[&str] = &[
    "Some(",
    "{ code:",
    "ChildExit",
    "signal: None",
    "Ok(",
    "Err(",
];

/// The debug forms found in `text` (a bare `None` is not one: Python's tracebacks say it).
fn debug_forms(text: &str) -> Vec<&'static str> {
    DEBUG_FORMS
        .iter()
        .copied()
        .filter(|p| text.contains(*p))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_failure_names_its_check_and_message() {
    let tasks = tempfile::tempdir().expect("tempdir");
    let examples = repo_root().join("tasks/examples");
    for e in std::fs::read_dir(&examples).expect("examples") {
        let e = e.expect("entry");
        if e.path().join("task.toml").is_file() {
            copy_tree(&e.path(), &tasks.path().join(e.file_name()));
        }
    }
    copy_tree(
        &repo_root().join("tests/adversarial/tasks/unittest-mean"),
        &tasks.path().join("unittest-mean"),
    );
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-failures-{}", std::process::id());
    let agent = wrong_agent();
    let out = run_green(
        &[
            "run",
            "--tasks",
            &tasks.path().display().to_string(),
            "--agent",
            &agent,
            "--concurrency",
            "3",
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(1200),
    )
    .await;
    out.assert_success();
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 10, "nine examples and unittest-mean");

    let mut failed_kinds = BTreeSet::new();
    let mut problems: Vec<String> = Vec::new();
    let mut said = String::new();
    for t in trials {
        let task = t["task_id"].as_str().expect("task id");
        let grade = &t["grade"];
        let score = grade["score"].as_f64();
        assert!(
            score.is_some_and(|s| s < 1.0),
            "{task}: the wrong solution is graded and fails: {grade}"
        );
        for g in grade["graders"].as_array().expect("graders") {
            let (name, kind, status) = (
                g["name"].as_str().expect("name"),
                g["kind"].as_str().expect("kind"),
                g["status"].as_str().expect("status"),
            );
            let details: Vec<&str> = g["details"]
                .as_array()
                .map(|d| d.iter().filter_map(|d| d.as_str()).collect())
                .unwrap_or_default();
            let tests = g["tests"].as_array().cloned().unwrap_or_default();
            for text in details
                .iter()
                .copied()
                .chain(tests.iter().filter_map(|t| t["message"].as_str()))
            {
                let forms = debug_forms(text);
                if !forms.is_empty() {
                    problems.push(format!("{task}/{name}: {forms:?} in {text:?}"));
                }
                said.push_str(text);
                said.push('\n');
            }
            if status == "pass" {
                continue;
            }
            if matches!(
                status,
                "env_broken"
                    | "grader_error"
                    | "judge_invalid"
                    | "judge_unavailable"
                    | "judge_split"
            ) {
                problems.push(format!(
                    "{task}/{name}: a wrong solution is the agent's failure, not ours: {g}"
                ));
            }
            failed_kinds.insert(kind.to_owned());
            let failing: Vec<&serde_json::Value> = tests
                .iter()
                .filter(|t| !matches!(t["status"].as_str(), Some("pass" | "compile_ok")))
                .collect();
            if failing.is_empty() && details.iter().all(|d| d.trim().is_empty()) {
                problems.push(format!(
                    "{task}/{name} ({kind}, {status}): no failing test and no note says why: {g}"
                ));
            }
            for f in failing {
                let (tname, message) = (
                    f["name"].as_str().unwrap_or(""),
                    f["message"].as_str().unwrap_or(""),
                );
                if tname.trim().is_empty() || message.trim().is_empty() {
                    problems.push(format!(
                        "{task}/{name} ({kind}): a failing check without a name or a message: {f}"
                    ));
                }
            }
            eprintln!(
                "{task}/{name} ({kind}, {status}): tests {}\n  details {}",
                g["tests"], g["details"]
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let want: BTreeSet<String> = [
        "pytest",
        "unittest",
        "testthat",
        "c_test",
        "command",
        "harbor_verifier",
        "scicode_steps",
        "csv",
        "reproduce",
        "forbidden_api",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(failed_kinds, want, "every grader kind of the suite failed");
    // What each kind must have said (the check and its message).
    for needle in [
        // harbor_verifier: the verifier's own output is kept
        "missing primes: 199",
        // testthat: a failed expectation's message and a raised error's message
        "not equal to",
        "uneven grids are not supported by this implementation",
        // command: the task's checker's message
        "the planted discrepancy",
        // csv: where the worst miss is
        "worst: N at x=",
        // forbidden_api: the module named
        "numpy.fft",
        // scicode_steps: the raised error
        "erf_approx is not written yet",
        // unittest: the assertion
        "ValueError not raised",
    ] {
        assert!(said.contains(needle), "no grader said {needle:?}:\n{said}");
    }
    let c = trials
        .iter()
        .find(|t| t["task_id"] == "mmsicode-c-interp")
        .expect("the C task");
    let failing: Vec<&str> = c["grade"]["graders"][0]["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .filter(|t| t["status"] == "fail")
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        failing,
        ["clamp left", "clamp right"],
        "the C checks are named"
    );

    // No report format shows a debug form.
    for file in ["report.json", "report.md", "report.csv", "report.html"] {
        let path = results.path().join(&run_id).join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let forms = debug_forms(&text);
        assert!(forms.is_empty(), "{file} shows {forms:?}");
        let leaks = debug_leaks(&text);
        assert!(leaks.is_empty(), "{file}: {leaks:?}");
    }

    // The same run in the viewer and in report.html, in a headless Chromium.
    let (viewer, url) = start_viewer(results.path()).await;
    let http = reqwest::Client::new();
    let browser = Browser::start().await;
    let crawled = crawl(&browser, &http, &url).await;
    eprintln!(
        "crawled {} pages ({} trial lists), {} other links resolved",
        crawled.pages.len(),
        crawled.lists,
        crawled.other_links.len()
    );
    assert!(
        crawled.pages.iter().any(|p| p.contains("/trials/")),
        "the trial pages were reached by links"
    );
    assert!(
        crawled
            .other_links
            .iter()
            .any(|l| l.contains("/artifacts/")),
        "the raw artifact links were checked"
    );
    let (pages, in_viewer) = viewer_explains_failures(&browser, &http, &url, &run_id).await;
    let (sections, in_report) = report_explains_failures(
        &browser,
        &results.path().join(&run_id).join("report.html"),
        &report,
    )
    .await;
    eprintln!(
        "viewer: {} failing checks named with their messages, silent graders {:?}; report.html: {}, {:?}",
        in_viewer.checks, in_viewer.silent, in_report.checks, in_report.silent
    );
    assert_eq!(pages.len(), 10, "every trial fails, in the viewer");
    assert_eq!(sections.len(), 10, "every trial fails, in report.html");
    assert_eq!(in_viewer.checks, in_report.checks);
    assert!(
        in_viewer.checks >= 10,
        "failing checks were named: {}",
        in_viewer.checks
    );
    // what a user reads on each task's page and section, literally
    let task_of: BTreeMap<&str, &str> = trials
        .iter()
        .filter_map(|t| Some((t["id"].as_str()?, t["task_id"].as_str()?)))
        .collect();
    let literal: &[(&str, &[&str])] = &[
        ("harbor-primes", &["missing primes: 199"]),
        ("mmsicode-c-interp", &["clamp left", "clamp right"]),
        (
            "mmsicode-r-trapz",
            &["uneven grids are not supported by this implementation"],
        ),
        ("scicode-quadrature", &["erf_approx is not written yet"]),
        ("unittest-mean", &["ValueError not raised"]),
        ("arbench-fft", &["numpy.fft"]),
        ("prbench-logistic-growth", &["worst: N at x="]),
    ];
    for (place, shown) in [("viewer", &pages), ("report.html", &sections)] {
        for (task, needles) in literal {
            let (_, text) = shown
                .iter()
                .find(|(id, _)| task_of.get(id.as_str()) == Some(task))
                .unwrap_or_else(|| panic!("{place}: no failing trial of {task}"));
            for needle in *needles {
                assert!(
                    text.contains(needle),
                    "{place}, {task}: {needle:?} not shown"
                );
            }
        }
    }
    browser.quit().await;
    viewer.kill_tree();
}
