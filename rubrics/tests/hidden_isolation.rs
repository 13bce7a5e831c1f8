//! Test graders run the agent's code as the agent's uid (in the bridge's worker; the held-out
//! tests in a trusted process of another uid): a module imported by a held-out pytest
//! test cannot read the held-out expected data, a sibling held-out file nor another grader's
//! copied tests, while an honest
//! agent still passes, and the grader-side CSV comparison (root) still reads the expected data.

mod common;

use std::time::Duration;

use common::Grading;
use rubrics::{GradeReport, Status};

const EXPECTED: &[u8] = b"x,y\n0,0\n1,2\n2,4\n";

const SPEC: &str = r#"
[dimensions]
correctness = 0.5
data_accuracy = 0.5

[[graders]]
name = "other tests"
dimension = "correctness"
check = { kind = "pytest", hidden_tests = "tests2/test_other.py" }

[[graders]]
name = "held-out tests"
dimension = "correctness"
check = { kind = "pytest", hidden_tests = "tests" }

[[graders]]
name = "data"
dimension = "data_accuracy"
check = { kind = "csv", output = "out.csv", hidden_expected = "expected/out.csv", x_column = "x", rtol = 1e-9 }
"#;

/// The held-out test: imports the agent's module and checks its answer.
const TEST: &[u8] = br#"import os, sys
sys.path.insert(0, os.environ.get("WORKSPACE", "/workspace"))


def test_double():
    import mod
    # The test runs in the trusted process (a uid of its own), the agent's code as uid 1000.
    assert os.getuid() not in (0, 1000, 2000)
    assert mod.agent_uid() == 1000
    assert mod.double(21) == 42
"#;

/// Another grader's held-out test, run (and copied to its own folder) first.
const OTHER_TEST: &[u8] = b"def test_other():\n    assert True\n";

/// Tries to read the copy of the other grader's test from its folder under the scratch dir:
/// only a refused read (PermissionError) escapes; its own folder holds no such file.
const CHEAT_OTHER: &[u8] = br#"import os

_RUNS = "/grader/work/runs"
for _n in sorted(os.listdir(_RUNS)):
    try:
        with open(os.path.join(_RUNS, _n, "h", "tests2", "test_other.py")) as f:
            f.read()
    except (FileNotFoundError, NotADirectoryError):
        pass


def double(v):
    return 2 * v


def agent_uid():
    return os.getuid()
"#;

const HONEST: &[u8] =
    b"import os\n\n\ndef double(v):\n    return 2 * v\n\n\ndef agent_uid():\n    return os.getuid()\n";

/// Module that reads a held-out file at import time; any failure propagates into the test.
fn cheat(path: &str) -> Vec<u8> {
    format!(
        "import os\nwith open({path:?}) as f:\n    _STOLEN = f.read()\n\n\ndef double(v):\n    return 2 * v\n\n\ndef agent_uid():\n    return os.getuid()\n"
    )
    .into_bytes()
}

async fn grade_with(module: &[u8]) -> GradeReport {
    let g = Grading::new(
        "python",
        &[("mod.py", module), ("out.csv", EXPECTED)],
        &[
            ("tests/test_mod.py", TEST),
            ("expected/out.csv", EXPECTED),
            ("tests2/test_other.py", OTHER_TEST),
            ("reference/secret.py", b"ANSWER = 42\n"),
        ],
    )
    .await;
    let report = g.grade(SPEC, None, Duration::from_secs(300)).await;
    g.remove().await;
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("report serialises")
    );
    report
}

fn grader<'r>(r: &'r GradeReport, name: &str) -> &'r rubrics::GraderResult {
    r.graders
        .iter()
        .find(|g| g.name == name)
        .expect("grader present")
}

#[tokio::test]
async fn an_imported_agent_module_cannot_read_held_out_files() {
    let honest = grade_with(HONEST).await;
    assert_eq!(grader(&honest, "held-out tests").status, Status::Pass);
    assert_eq!(grader(&honest, "data").status, Status::Pass);

    // The held-out expected data and a sibling held-out file (reference code).
    for path in [
        "/grader/hidden/expected/out.csv",
        "/grader/hidden/reference/secret.py",
        "other",
    ] {
        let module = if path == "other" {
            CHEAT_OTHER.to_vec()
        } else {
            cheat(path)
        };
        let cheat = grade_with(&module).await;
        let tests = grader(&cheat, "held-out tests");
        assert_eq!(tests.status, Status::Fail, "{path}");
        assert_eq!(tests.score, Some(0.0), "{path}");
        let msg: String = tests
            .tests
            .iter()
            .filter_map(|t| t.message.clone())
            .collect::<Vec<_>>()
            .join("\n");
        let denied = if path == "other" {
            "PermissionError: [Errno 13] Permission denied: '/grader/work/runs/pytest-".to_owned()
        } else {
            format!("PermissionError: [Errno 13] Permission denied: '{path}'")
        };
        assert!(msg.contains(&denied), "{msg}");
        // The grader-side comparison still reads the expected data as root.
        assert_eq!(grader(&cheat, "data").status, Status::Pass, "{path}");
    }
}

const DRIVER: &[u8] = br#"#include <stdio.h>
int twice(int v);
int main(void) {
    printf("Results: %d/1 passed\n", twice(21) == 42);
    return 0;
}
"#;

/// C sources: honest; reading a held-out file at run time (answers right only if it can);
/// including a held-out file at compile time.
const C_HONEST: &[u8] = b"int twice(int v) { return 2 * v; }\n";
const C_READS: &[u8] = br#"#include <stdio.h>
int twice(int v) {
    FILE *f = fopen("/grader/hidden/expected.txt", "r");
    if (!f) return -1;
    fclose(f);
    return 2 * v;
}
"#;
const C_INCLUDES: &[u8] =
    b"#include \"/grader/hidden/expected.txt\"\nint twice(int v) { return 2 * v; }\n";

#[tokio::test]
async fn c_test_agent_code_cannot_read_held_out_files_at_compile_or_run_time() {
    let g = Grading::new(
        "sci",
        &[
            ("honest.c", C_HONEST),
            ("reads.c", C_READS),
            ("includes.c", C_INCLUDES),
        ],
        &[("driver.c", DRIVER), ("expected.txt", b"42\n")],
    )
    .await;
    let spec = |src: &str| {
        format!(
            "[[graders]]\nname = \"{src}\"\ndimension = \"code_correctness\"\n\
             check = {{ kind = \"c_test\", compiler = \"gcc\", workspace_sources = [\"{src}\"], hidden_sources = [\"driver.c\"] }}\n"
        )
    };
    let mut reports = Vec::new();
    for src in ["honest.c", "reads.c", "includes.c"] {
        reports.push(g.grade(&spec(src), None, Duration::from_secs(300)).await);
    }
    g.remove().await;
    println!(
        "{}",
        serde_json::to_string_pretty(&reports).expect("reports serialise")
    );
    assert_eq!(reports[0].graders[0].status, Status::Pass);
    assert_eq!(reports[1].graders[0].status, Status::Fail);
    assert_eq!(
        reports[1].graders[0].tests[1].message.as_deref(),
        Some("Results: 0/1 passed")
    );
    let inc = &reports[2].graders[0];
    assert_eq!(inc.status, Status::CompileFail);
    let msg = inc.tests[0].message.clone().unwrap_or_default();
    assert!(msg.contains("Permission denied"), "{msg}");
}
