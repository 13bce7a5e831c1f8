//! PRBench dimensions graded in a real grading container with a scripted local judge
//! (127.0.0.1): each dimension judged with the ground truth and our evidence, weighted as
//! written (checked against a hand computation), `code_correctness` capped at 0.2 when a banned
//! library is used, a data file 3% off measured at PRBench's tolerance, and a submission with no
//! deliverable scored 0 without asking the judge. The agent's entry script, found among the
//! conventional names, is re-run: said to the judge when it regenerates the data; when it only
//! copies them, `code_correctness` and `data_accuracy` are 0 without a judge call.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use common::Grading;
use rubrics::Status;
use rubrics::judge::{Judge, JudgeConfig};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<String>>>;

/// Scores by dimension: methodology 0.8, code correctness 0.9, data accuracy 0.7.
async fn judge(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    seen.lock().expect("lock").push(user.clone());
    let score = if user.contains("DIMENSION: methodology_understanding") {
        0.8
    } else if user.contains("DIMENSION: code_correctness") {
        0.9
    } else if user.contains("DIMENSION: data_accuracy") {
        0.7
    } else {
        0.0
    };
    let content = json!({"score": score, "justification": format!("scored {score}")}).to_string();
    Json(
        json!({"choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    )
}

async fn mock() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(judge))
        .with_state(seen.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await.expect("serve") });
    (format!("http://{addr}/v1"), seen)
}

/// The grading section the importer writes for such a task (weights as the task wrote them,
/// evidence at weight 0, the default 5% tolerance; a 1% comparison beside it for the note).
const SPEC: &str = r#"
pass_threshold = 0.9
[dimensions]
methodology_understanding = 0.2
code_correctness = 0.3
data_accuracy = 0.5
measured_data_accuracy = 0.0
measured_completeness = 0.0
banned_libraries = 0.0
strict_data_accuracy = 0.0

[[graders]]
name = "data: data/fig1.csv"
dimension = "measured_data_accuracy"
check = { kind = "csv", output = "data/fig1.csv", hidden_expected = "ground_truth/data/fig1.csv", rtol = 0.05, atol = 1e-8 }
[[graders]]
name = "data at 1%: data/fig1.csv"
dimension = "strict_data_accuracy"
check = { kind = "csv", output = "data/fig1.csv", hidden_expected = "ground_truth/data/fig1.csv", rtol = 0.01, atol = 1e-8 }
[[graders]]
name = "deliverables"
dimension = "measured_completeness"
check = { kind = "files_exist", outputs = ["reproduction/ANALYSIS.md", "reproduction/fit.py", "data/fig1.csv"] }
[[graders]]
name = "banned libraries"
dimension = "banned_libraries"
check = { kind = "forbidden_api", forbidden = ["sklearn"] }

[[graders]]
name = "methodology_understanding"
dimension = "methodology_understanding"
check = { kind = "prbench_dimension", name = "methodology_understanding", weight = 0.2, description = "Is the method explained?", paper = "\"Fits\" by us", hidden_references = ["ground_truth/metadata.md", "ground_truth/data/fig1.csv"], outputs = ["reproduction/ANALYSIS.md", "reproduction/fit.py", "data/fig1.csv"] }
[[graders]]
name = "code_correctness"
dimension = "code_correctness"
check = { kind = "prbench_dimension", name = "code_correctness", weight = 0.3, description = "Is the fit right?", paper = "\"Fits\" by us", hidden_references = ["ground_truth/metadata.md", "ground_truth/data/fig1.csv"], outputs = ["reproduction/ANALYSIS.md", "reproduction/fit.py", "data/fig1.csv"], banned_cap = 0.2 }
[[graders]]
name = "data_accuracy"
dimension = "data_accuracy"
check = { kind = "prbench_dimension", name = "data_accuracy", weight = 0.5, description = "Does the data match?", paper = "\"Fits\" by us", hidden_references = ["ground_truth/metadata.md", "ground_truth/data/fig1.csv"], outputs = ["reproduction/ANALYSIS.md", "reproduction/fit.py", "data/fig1.csv"] }
"#;

const TRUTH: &[u8] = b"x,y\n0,1.0\n1,3.0\n2,5.0\n3,7.0\n";
/// Every value 3% above the truth.
const OFF_BY_3: &[u8] = b"x,y\n0,1.03\n1,3.09\n2,5.15\n3,7.21\n";
const METADATA: &[u8] = b"# Ground truth\nThe line is y = 2x + 1 (METADATA-MARKER).\n";

#[tokio::test]
async fn prbench_dimensions_weighted_as_written_with_the_banned_cap_and_evidence() {
    let g = Grading::new(
        "python",
        &[
            (
                "reproduction/ANALYSIS.md",
                b"Least squares via the normal equations.",
            ),
            (
                "reproduction/fit.py",
                b"from sklearn.linear_model import LinearRegression\n",
            ),
            ("data/fig1.csv", OFF_BY_3),
        ],
        &[
            ("ground_truth/metadata.md", METADATA),
            ("ground_truth/data/fig1.csv", TRUTH),
        ],
    )
    .await;
    let (base, seen) = mock().await;
    let mut cfg = JudgeConfig::new(base, "mock-judge");
    cfg.backoff_ms = 10;
    let judge = Judge::with_key(cfg, None).expect("judge");
    let report = g.grade(SPEC, Some(&judge), Duration::from_secs(300)).await;
    g.remove().await;
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));

    let dim = |n: &str| report.dimensions[n].score.expect(n);
    // Each dimension as the judge scored it, code_correctness capped at 0.2 (banned library).
    assert_eq!(dim("methodology_understanding"), 0.8);
    assert_eq!(dim("code_correctness"), 0.2);
    assert_eq!(dim("data_accuracy"), 0.7);
    // By hand: 0.2 * 0.8 + 0.3 * 0.2 + 0.5 * 0.7 = 0.16 + 0.06 + 0.35 = 0.57.
    let overall = report.score.expect("overall");
    assert!((overall - 0.57).abs() < 1e-12, "{overall}");
    // Evidence beside it, weight 0: 3% off is within the default 5% (1.0); at 1% only the x
    // column (exact) matches, the y values all miss (0.5).
    assert_eq!(dim("measured_data_accuracy"), 1.0);
    assert_eq!(dim("strict_data_accuracy"), 0.5);
    assert_eq!(dim("measured_completeness"), 1.0);
    assert_eq!(
        report.dimensions["banned_libraries"].status,
        Status::ForbiddenApi
    );
    assert_eq!(
        report.status,
        Status::Fail,
        "the evidence decides neither the status nor the pass"
    );
    let capped = report
        .graders
        .iter()
        .find(|r| r.name == "code_correctness")
        .expect("graded");
    assert!(
        capped.details.iter().any(|d| d.contains("capped at 0.2")),
        "{capped:?}"
    );

    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 3, "one question per dimension");
    for prompt in seen.iter() {
        assert!(
            prompt.contains("METADATA-MARKER"),
            "the judge reads the ground truth"
        );
        assert!(
            prompt.contains("- data: data/fig1.csv (csv): pass, score 1.000"),
            "the judge sees our evidence: {prompt}"
        );
        assert!(prompt.contains("A banned library IS used"));
    }
}

#[tokio::test]
async fn prbench_dimension_without_deliverables_scores_zero_without_a_judge_call() {
    let g = Grading::new(
        "python",
        &[("paper.md", b"the paper")],
        &[
            ("ground_truth/metadata.md", METADATA),
            ("ground_truth/data/fig1.csv", TRUTH),
        ],
    )
    .await;
    // No judge configured at all: nothing to judge is still a 0, not judge_unavailable.
    let report = g.grade(SPEC, None, Duration::from_secs(300)).await;
    g.remove().await;
    assert_eq!(report.score, Some(0.0), "{report:?}");
    for d in [
        "methodology_understanding",
        "code_correctness",
        "data_accuracy",
    ] {
        assert_eq!(report.dimensions[d].score, Some(0.0), "{d}");
    }
}

/// The re-run evidence as the importer writes it (issue 30): the entry script is discovered.
const RERUN_SPEC: &str = r#"
pass_threshold = 0.9
[dimensions]
methodology_understanding = 0.2
code_correctness = 0.3
data_accuracy = 0.5
measured_reproduction = 0.0

[[graders]]
name = "re-run of the agent's entry script"
dimension = "measured_reproduction"
check = { kind = "reproduce", entry_candidates = ["reproduce.sh", "reproduce.py", "run.sh", "run.py", "main.py"], outputs = ["data/fig1.csv"], rtol = 0.05, atol = 1e-8 }

[[graders]]
name = "methodology_understanding"
dimension = "methodology_understanding"
check = { kind = "prbench_dimension", name = "methodology_understanding", weight = 0.2, hidden_references = ["ground_truth/metadata.md"], outputs = ["reproduction/fit.py", "data/fig1.csv"] }
[[graders]]
name = "code_correctness"
dimension = "code_correctness"
check = { kind = "prbench_dimension", name = "code_correctness", weight = 0.3, hidden_references = ["ground_truth/metadata.md"], outputs = ["reproduction/fit.py", "data/fig1.csv"], banned_cap = 0.2, zero_if_fabricated = true }
[[graders]]
name = "data_accuracy"
dimension = "data_accuracy"
check = { kind = "prbench_dimension", name = "data_accuracy", weight = 0.5, hidden_references = ["ground_truth/metadata.md"], outputs = ["reproduction/fit.py", "data/fig1.csv"], zero_if_fabricated = true }
"#;

/// y = 2x + 1 for x = 0..6, as the honest code writes it.
const LINE: &[u8] = b"x,y\n0,1\n1,3\n2,5\n3,7\n4,9\n5,11\n";
const FIT: &[u8] = b"import os\nos.makedirs('data', exist_ok=True)\nwith open('data/fig1.csv', 'w') as f:\n    f.write('x,y\\n')\n    for x in range(6):\n        f.write(f'{x},{2 * x + 1}\\n')\n";

async fn grade_rerun(files: &[(&str, &[u8])]) -> (rubrics::GradeReport, Vec<String>) {
    let g = Grading::new("python", files, &[("ground_truth/metadata.md", METADATA)]).await;
    let (base, seen) = mock().await;
    let mut cfg = JudgeConfig::new(base, "mock-judge");
    cfg.backoff_ms = 10;
    let judge = Judge::with_key(cfg, None).expect("judge");
    let report = g
        .grade(RERUN_SPEC, Some(&judge), Duration::from_secs(300))
        .await;
    g.remove().await;
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    let seen = seen.lock().expect("lock").clone();
    (report, seen)
}

#[tokio::test]
async fn a_discovered_entry_script_that_regenerates_the_data_is_shown_to_the_judge() {
    // `reproduce.sh` comes before `run.py` (which would fail): the list's order decides.
    let (report, seen) = grade_rerun(&[
        ("reproduction/fit.py", FIT),
        ("reproduce.sh", b"set -e\npython3 reproduction/fit.py\n"),
        ("run.py", b"raise SystemExit(3)\n"),
        ("data/fig1.csv", LINE),
    ])
    .await;
    let rerun = report
        .graders
        .iter()
        .find(|r| r.kind == "reproduce")
        .expect("re-run");
    assert_eq!(rerun.status, Status::Pass, "{rerun:?}");
    assert_eq!(
        rerun.details.first().map(String::as_str),
        Some("entry script: reproduce.sh (run as `bash reproduce.sh`)")
    );
    // By hand: 0.2 * 0.8 + 0.3 * 0.9 + 0.5 * 0.7 = 0.16 + 0.27 + 0.35 = 0.78: the judges' scores.
    let overall = report.score.expect("overall");
    assert!((overall - 0.78).abs() < 1e-12, "{overall}");
    assert_eq!(seen.len(), 3, "one question per dimension");
    for prompt in &seen {
        assert!(
            prompt.contains("- re-run of the agent's entry script (reproduce): pass, score 1.000"),
            "{prompt}"
        );
        assert!(
            prompt.contains("REPRODUCTION: the agent's entry script (reproduce.sh (run as `bash reproduce.sh`)), re-run by the benchmark without the data files it delivered, regenerated them"),
            "{prompt}"
        );
    }
}

#[tokio::test]
async fn an_entry_script_that_only_copies_its_data_zeroes_code_and_data() {
    // The data are written by hand, and `reproduce.py` writes them again from a constant.
    let copy = b"import os\nos.makedirs('data', exist_ok=True)\nopen('data/fig1.csv', 'w').write('''x,y\n0,1\n1,3\n2,5\n3,7\n4,9\n5,11\n''')\n";
    let (report, seen) = grade_rerun(&[
        ("reproduction/fit.py", FIT),
        ("reproduce.py", copy),
        ("data/fig1.csv", LINE),
    ])
    .await;
    assert_eq!(
        report.dimensions["measured_reproduction"].status,
        Status::FabricatedData
    );
    for d in ["code_correctness", "data_accuracy"] {
        assert_eq!(report.dimensions[d].score, Some(0.0), "{d}");
        assert_eq!(report.dimensions[d].status, Status::FabricatedData, "{d}");
    }
    assert_eq!(
        report.dimensions["methodology_understanding"].score,
        Some(0.8)
    );
    // By hand: 0.2 * 0.8 = 0.16.
    let overall = report.score.expect("overall");
    assert!((overall - 0.16).abs() < 1e-12, "{overall}");
    assert_eq!(report.status, Status::FabricatedData);
    let zeroed = report
        .graders
        .iter()
        .find(|r| r.name == "data_accuracy")
        .expect("graded");
    assert!(
        zeroed
            .details
            .iter()
            .any(|d| d.contains("does not regenerate the data it submitted")),
        "{zeroed:?}"
    );
    assert_eq!(
        seen.len(),
        1,
        "the zeroed dimensions are not sent to the judge"
    );
    assert!(
        seen[0].contains("does NOT regenerate the data it submitted (fabricated_data)"),
        "{}",
        seen[0]
    );
}
