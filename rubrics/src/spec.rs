//! The grading section of a task (`[grading]` in `task.toml`): which graders run, on what, and
//! how their results combine into dimensions and the overall score.
//!
//! This is the contract between `tasks` (which embeds [`GradingSpec`] and checks that every path
//! it names exists in the task folder) and `rubrics` (which executes it in a grading sandbox).
//! Paths named `hidden_*` are relative to the task's held-out folder (mounted at
//! `/grader/hidden`); paths named `output*`/`workspace_*` are relative to `/workspace`.
//!
//! Example:
//! ```toml
//! [grading]
//! [grading.dimensions]          # optional; defaults to PRBench's weights
//! code_correctness = 0.4
//! data_accuracy = 0.6
//!
//! [[grading.graders]]
//! name = "unit tests"
//! dimension = "code_correctness"
//! check = { kind = "pytest", hidden_tests = "tests" }
//!
//! [[grading.graders]]
//! name = "figure 2 data"
//! dimension = "data_accuracy"
//! check = { kind = "csv", output = "results/fig2.csv", hidden_expected = "expected/fig2.csv", x_column = "t", rtol = 0.01 }
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::checks::Check;
pub use crate::csv_compare::NanPolicy;

/// PRBench's default dimension weights (methodology 0.05, code correctness 0.30, data accuracy
/// 0.60, task completeness 0.05).
pub fn prbench_dimensions() -> BTreeMap<String, f64> {
    [
        ("methodology", 0.05),
        ("code_correctness", 0.30),
        ("data_accuracy", 0.60),
        ("task_completeness", 0.05),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

fn default_pass_threshold() -> f64 {
    0.9
}

fn default_weight() -> f64 {
    1.0
}

/// A task's grading: graders grouped into weighted dimensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GradingSpec {
    /// Weight of each dimension in the overall score; must sum to 1. Only dimensions that some
    /// grader feeds may be named. Default: [`prbench_dimensions`] restricted to the dimensions
    /// the graders use, renormalised.
    #[serde(default)]
    pub dimensions: Option<BTreeMap<String, f64>>,
    /// A trial "passes" (for pass@k and the end-to-end callback rate) when every dimension
    /// scores above this.
    #[serde(default = "default_pass_threshold")]
    pub pass_threshold: f64,
    /// Wall-clock budget for all graders together, in seconds (the task's environment may
    /// override it).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    pub graders: Vec<GraderSpec>,
}

/// One grader: a check feeding one dimension with a weight inside that dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraderSpec {
    /// Human-readable, unique within the task.
    pub name: String,
    /// The dimension this grader's score feeds (e.g. `code_correctness`).
    pub dimension: String,
    /// Weight within its dimension (a dimension's score is the weighted mean of its graders).
    #[serde(default = "default_weight")]
    pub weight: f64,
    pub check: Check,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let spec: GradingSpec = toml::from_str(
            r#"
            [dimensions]
            code_correctness = 0.4
            data_accuracy = 0.6
            [[graders]]
            name = "unit tests"
            dimension = "code_correctness"
            check = { kind = "pytest", hidden_tests = "tests" }
            [[graders]]
            name = "figure 2 data"
            dimension = "data_accuracy"
            check = { kind = "csv", output = "results/fig2.csv", hidden_expected = "expected/fig2.csv", x_column = "t", rtol = 0.01 }
            "#,
        )
        .expect("example parses");
        assert_eq!(spec.graders.len(), 2);
        assert_eq!(spec.pass_threshold, 0.9);
        assert!(matches!(&spec.graders[1].check, Check::Csv(c) if c.rtol == Some(0.01)));
    }

    #[test]
    fn parses_reproduce_and_nan_policy() {
        let spec: GradingSpec = toml::from_str(
            r#"
            [[graders]]
            name = "re-run"
            dimension = "data_accuracy"
            check = { kind = "reproduce", argv = ["python3", "reproduce.py"], outputs = ["results/a.csv"], rtol = 1e-6 }
            [[graders]]
            name = "csv"
            dimension = "data_accuracy"
            check = { kind = "csv", output = "a.csv", hidden_expected = "a.csv", nan_policy = "skip_expected_nan" }
            [[graders]]
            name = "csv default nan"
            dimension = "data_accuracy"
            check = { kind = "csv", output = "a.csv", hidden_expected = "a.csv" }
            "#,
        )
        .expect("parses");
        assert_eq!(
            spec.graders[0].check,
            Check::Reproduce(crate::checks::reproduce::Reproduce {
                argv: vec!["python3".into(), "reproduce.py".into()],
                entry_candidates: Vec::new(),
                outputs: vec!["results/a.csv".into()],
                rtol: Some(1e-6),
                atol: None,
            })
        );
        assert!(matches!(
            &spec.graders[1].check,
            Check::Csv(c) if c.nan_policy == NanPolicy::SkipExpectedNan
        ));
        assert!(matches!(
            &spec.graders[2].check,
            Check::Csv(c) if c.nan_policy == NanPolicy::MatchNan
        ));
        let err = toml::from_str::<GradingSpec>(
            r#"
            [[graders]]
            name = "csv"
            dimension = "d"
            check = { kind = "csv", output = "a.csv", hidden_expected = "a.csv", nan_policy = "ignore" }
            "#,
        )
        .expect_err("unknown NaN policy");
        assert!(err.to_string().contains("ignore"), "{err}");
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let err = toml::from_str::<GradingSpec>(
            r#"
            [[graders]]
            name = "t"
            dimension = "code_correctness"
            check = { kind = "pytest", hidden_tests = "tests", bogus = 1 }
            "#,
        )
        .expect_err("unknown key");
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    /// Every kind still rejects keys it does not know (and names them), and an unknown kind is
    /// refused.
    #[test]
    fn unknown_keys_are_rejected_per_kind() {
        let valid = [
            r#"kind = "pytest", hidden_tests = "t""#,
            r#"kind = "unittest", hidden_tests = "t""#,
            r#"kind = "testthat", hidden_tests = "t""#,
            r#"kind = "c_test", compiler = "gcc", workspace_sources = [], hidden_sources = []"#,
            r#"kind = "command", argv = ["true"]"#,
            r#"kind = "harbor_verifier", hidden_script = "t.sh""#,
            r#"kind = "scicode_steps", hidden_cases = "c.json", output = "s.py""#,
            r#"kind = "csv", output = "a.csv", hidden_expected = "a.csv""#,
            r#"kind = "reproduce", argv = ["true"], outputs = ["a"]"#,
            r#"kind = "files_exist", outputs = ["a"]"#,
            r#"kind = "forbidden_api", forbidden = ["numpy.fft"]"#,
            r#"kind = "paperbench_tree", hidden_rubric = "r.json""#,
            r#"kind = "discrepancy", output = "r.md", hidden_reference = "d.md""#,
            r#"kind = "judge", hidden_criteria = "c.md", outputs = []"#,
        ];
        let parse = |inner: &str| {
            toml::from_str::<GradingSpec>(&format!(
                "[[graders]]\nname = \"t\"\ndimension = \"d\"\ncheck = {{ {inner} }}\n"
            ))
        };
        let mut kinds = Vec::new();
        for v in valid {
            let spec = parse(v).unwrap_or_else(|e| panic!("{v}: {e}"));
            let check = &spec.graders[0].check;
            kinds.push(crate::checks::CheckSpec::kind(check));
            // Round trip keeps the kind tag and the fields.
            let back: Check =
                toml::from_str(&toml::to_string(check).expect("serialise")).expect("re-parse");
            assert_eq!(&back, check);
            let err = parse(&format!("{v}, bogus_key = 1")).expect_err(v);
            assert!(err.to_string().contains("bogus_key"), "{v}: {err}");
        }
        kinds.dedup();
        assert_eq!(kinds.len(), valid.len());
        let err = parse(r#"kind = "no_such_kind""#).expect_err("unknown kind");
        assert!(err.to_string().contains("no_such_kind"), "{err}");
    }
}
