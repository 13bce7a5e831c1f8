//! Why did it fail? (issue 28): graders the bundled examples do not fail (see
//! `tests/tests/failures.rs` for those) keep the failing check's name and message, and no
//! grader text shows a Rust debug form.

mod common;

use std::time::Duration;

use common::Grading;
use rubrics::{GradeReport, Status};

/// The debug forms of Rust values that must never reach a user.
fn assert_no_debug_forms(report: &GradeReport) {
    for g in &report.graders {
        let texts = g
            .details
            .iter()
            .map(String::as_str)
            .chain(g.tests.iter().filter_map(|t| t.message.as_deref()));
        for text in texts {
            for form in ["Some(", "None", "{ code:", "Ok(", "Err("] {
                assert!(!text.contains(form), "{}: {form} in {text:?}", g.name);
            }
        }
    }
}

#[tokio::test]
async fn files_exist_command_and_harbor_say_what_failed() {
    let g = Grading::new(
        "python",
        &[("empty.txt", b""), ("answer.txt", b"41\n")],
        &[
            (
                "check.sh",
                b"read -r a < \"$1\"; [ \"$a\" = 42 ] || { echo \"answer is $a, expected 42\" >&2; exit 3; }\n",
            ),
            (
                "verifier/test.sh",
                b"echo 'collected 2 items'\n\
                  echo '=== short test summary info ==='\n\
                  echo 'PASSED tests/test_answer.py::test_present'\n\
                  echo 'FAILED tests/test_answer.py::test_value - assert 41 == 42' >&2\n\
                  echo 0 > /logs/verifier/reward.txt\n",
            ),
        ],
    )
    .await;
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "outputs"
            dimension = "code_correctness"
            check = { kind = "files_exist", outputs = ["answer.txt", "empty.txt", "missing.txt"] }
            [[graders]]
            name = "checker"
            dimension = "code_correctness"
            check = { kind = "command", argv = ["sh", "{hidden}/check.sh", "{workspace}/answer.txt"] }
            [[graders]]
            name = "verifier"
            dimension = "code_correctness"
            check = { kind = "harbor_verifier", hidden_script = "verifier/test.sh" }
            "#,
            None,
            Duration::from_secs(120),
        )
        .await;
    g.remove().await;
    for gr in &report.graders {
        eprintln!(
            "{}: {} {:?}\n  {:#?}",
            gr.name, gr.status, gr.details, gr.tests
        );
    }
    assert_no_debug_forms(&report);

    let files = &report.graders[0];
    let said: Vec<(&str, Status, Option<&str>)> = files
        .tests
        .iter()
        .map(|t| (t.name.as_str(), t.status, t.message.as_deref()))
        .collect();
    assert_eq!(
        said,
        vec![
            ("answer.txt", Status::Pass, None),
            (
                "empty.txt",
                Status::Fail,
                Some("/workspace/empty.txt is empty")
            ),
            (
                "missing.txt",
                Status::Fail,
                Some("/workspace/missing.txt does not exist (or is not a regular file)")
            ),
        ]
    );

    let checker = &report.graders[1];
    assert_eq!(checker.status, Status::Fail);
    assert!(
        checker
            .details
            .iter()
            .any(|d| d.starts_with("exit 3; stderr tail:")
                && d.contains("answer is 41, expected 42")),
        "{:?}",
        checker.details
    );

    let verifier = &report.graders[2];
    assert_eq!((verifier.status, verifier.score), (Status::Fail, Some(0.0)));
    let failed: Vec<(&str, Option<&str>)> = verifier
        .tests
        .iter()
        .filter(|t| t.status == Status::Fail)
        .map(|t| (t.name.as_str(), t.message.as_deref()))
        .collect();
    assert_eq!(
        failed,
        vec![("tests/test_answer.py::test_value", Some("assert 41 == 42"))]
    );
    assert!(
        verifier
            .details
            .iter()
            .any(|d| d.contains("the verifier's reward: 0 (1 passes)")),
        "{:?}",
        verifier.details
    );
    assert!(
        verifier
            .details
            .iter()
            .any(|d| d.starts_with("verifier output (exit 0)") && d.contains("collected 2 items")),
        "stdout and stderr are kept: {:?}",
        verifier.details
    );
    let data = verifier.data.as_ref().expect("data");
    assert_eq!(data["reward"], 0.0, "{data}");
    assert_eq!(data["ended"], "exit 0", "{data}");
}
