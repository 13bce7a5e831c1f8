//! The stated exception to "verdicts are decided where agent code never runs": a check a
//! SciCode snippet makes on its own (not against `target`) runs in the agent's process, and the
//! trial says so (`verdict_in_agent_process` in the grader's details and the report's flags);
//! a snippet that only compares against `target` is not flagged. (The C driver without
//! `rb_check.h` is checked in `runners_sci.rs`.)

mod common;

use std::time::Duration;

use common::Grading;
use rubrics::Status;
use rubrics::checks::VERDICT_IN_AGENT_PROCESS;

const CASES: &str = r#"{"problem_id": "p", "required_dependencies": "import numpy as np\n",
 "steps": [
  {"step_id": "s.1", "test_cases": [
    {"test": "assert np.allclose(double(2.0), target)", "target": 4.0},
    {"test": "assert double(3.0) == 6.0", "target": null}]},
  {"step_id": "s.2", "test_cases": [
    {"test": "assert np.allclose(triple(1.0), target)", "target": 3.0}]}]}"#;

#[tokio::test]
async fn self_checking_scicode_snippets_are_named_as_the_exception() {
    let g = Grading::new(
        "python",
        &[(
            "solution.py",
            b"def double(x):\n    return 2 * x\n\n\ndef triple(x):\n    return 3 * x\n",
        )],
        &[("cases.json", CASES.as_bytes())],
    )
    .await;
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "steps"
            dimension = "code_correctness"
            check = { kind = "scicode_steps", hidden_cases = "cases.json", output = "solution.py" }
            "#,
            None,
            Duration::from_secs(600),
        )
        .await;
    g.remove().await;
    let r = &report.graders[0];
    println!("{}", serde_json::to_string_pretty(r).expect("json"));
    assert_eq!((r.status, r.score), (Status::Pass, Some(1.0)));
    let named: Vec<&String> = r
        .details
        .iter()
        .filter(|d| d.starts_with(VERDICT_IN_AGENT_PROCESS))
        .collect();
    assert_eq!(named.len(), 1, "{:?}", r.details);
    assert!(named[0].contains("step s.1 case 2 (1)"), "{}", named[0]);
    assert!(!named[0].contains("s.2"), "{}", named[0]);
    assert!(
        report
            .flags
            .iter()
            .any(|f| f.starts_with(VERDICT_IN_AGENT_PROCESS) && f.contains("`steps`")),
        "{:?}",
        report.flags
    );
    let steps = &r.data.as_ref().expect("data")["steps"];
    assert_eq!(steps[0]["cases"][1]["in_agent_process"], 1);
    assert!(steps[0]["cases"][0].get("in_agent_process").is_none());
}
