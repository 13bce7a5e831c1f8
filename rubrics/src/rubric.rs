//! The rubric engine: grader results → dimension scores → overall score.
//!
//! A dimension's score is the weighted mean of its graders' scores. A `forbidden_api` or
//! `fabricated_data` verdict in a dimension sets that dimension to 0. An infrastructure status in a dimension makes the
//! dimension's score `None` (and so the overall score): we report that we could not grade rather
//! than inventing a number. The overall score is the weighted mean of the dimensions, computed
//! here and never taken from a judge. A dimension of weight 0 is reported and decides nothing
//! (neither score, pass nor status).

use std::collections::BTreeMap;

use crate::report::{DimensionScore, GradeReport, GraderResult};
use crate::spec::{GradingSpec, prbench_dimensions};
use crate::status::Status;

/// The dimension weights in force: the run's override, else the task's, else PRBench's defaults
/// restricted to the dimensions the graders feed. Dimensions that no weight names get weight 0
/// unless no dimension has a positive weight, in which case all get equal weights. The result is
/// normalised to sum to 1.
pub fn effective_weights(
    spec: &GradingSpec,
    run_override: Option<&BTreeMap<String, f64>>,
) -> BTreeMap<String, f64> {
    let used: Vec<&str> = spec.graders.iter().map(|g| g.dimension.as_str()).collect();
    let source = run_override
        .cloned()
        .or_else(|| spec.dimensions.clone())
        .unwrap_or_else(prbench_dimensions);
    let mut weights: BTreeMap<String, f64> = used
        .iter()
        .map(|d| {
            let w = source.get(*d).copied().unwrap_or(0.0);
            (
                (*d).to_owned(),
                if w.is_finite() && w > 0.0 { w } else { 0.0 },
            )
        })
        .collect();
    let total: f64 = weights.values().sum();
    if total <= 0.0 {
        let n = weights.len().max(1) as f64;
        weights.values_mut().for_each(|w| *w = 1.0 / n);
    } else {
        weights.values_mut().for_each(|w| *w /= total);
    }
    weights
}

/// Combines grader results into a report.
pub fn combine(
    graders: Vec<GraderResult>,
    weights: &BTreeMap<String, f64>,
    pass_threshold: f64,
) -> GradeReport {
    let mut by_dim: BTreeMap<String, Vec<&GraderResult>> = BTreeMap::new();
    for g in &graders {
        by_dim.entry(g.dimension.clone()).or_default().push(g);
    }
    let mut dimensions = BTreeMap::new();
    for (dim, members) in &by_dim {
        let weight = weights.get(dim).copied().unwrap_or(0.0);
        let names = members.iter().map(|g| g.name.clone()).collect();
        let infra = members
            .iter()
            .map(|g| g.status)
            .find(|s| s.is_infrastructure());
        let forbidden = members.iter().any(|g| g.status == Status::ForbiddenApi);
        let fabricated = members.iter().any(|g| g.status == Status::FabricatedData);
        let (score, status) = if forbidden {
            (Some(0.0), Status::ForbiddenApi)
        } else if fabricated {
            (Some(0.0), Status::FabricatedData)
        } else if let Some(s) = infra {
            (None, s)
        } else {
            let wsum: f64 = members.iter().map(|g| g.weight.max(0.0)).sum();
            let score = if wsum > 0.0 {
                members
                    .iter()
                    .map(|g| g.weight.max(0.0) * g.score.unwrap_or(0.0))
                    .sum::<f64>()
                    / wsum
            } else {
                members.iter().map(|g| g.score.unwrap_or(0.0)).sum::<f64>() / members.len() as f64
            };
            let status = if score >= pass_threshold {
                Status::Pass
            } else {
                Status::Fail
            };
            (Some(score), status)
        };
        dimensions.insert(
            dim.clone(),
            DimensionScore {
                weight,
                score,
                status,
                passed: score.is_some_and(|s| s >= pass_threshold),
                graders: names,
            },
        );
    }
    // A dimension of weight 0 is shown, not scored (PRBench imports: our deterministic evidence
    // beside the judged dimensions): it decides neither the score, the pass nor the status.
    let scored = || dimensions.values().filter(|d| d.weight > 0.0);
    let infra = scored().map(|d| d.status).find(|s| s.is_infrastructure());
    let score = if infra.is_some() || dimensions.is_empty() {
        None
    } else {
        let wsum: f64 = dimensions.values().map(|d| d.weight).sum();
        (wsum > 0.0).then(|| {
            dimensions
                .values()
                .map(|d| d.weight * d.score.unwrap_or(0.0))
                .sum::<f64>()
                / wsum
        })
    };
    // Forging a verdict anywhere voids the whole trial, whatever else could or could not be
    // graded.
    let tampered = graders
        .iter()
        .any(|g| g.status == Status::TamperingDetected);
    let score = if tampered { Some(0.0) } else { score };
    let passed = !tampered && score.is_some() && scored().all(|d| d.passed);
    let status = if tampered {
        Status::TamperingDetected
    } else if let Some(s) = infra {
        s
    } else if scored().any(|d| d.status == Status::ForbiddenApi) {
        Status::ForbiddenApi
    } else if scored().any(|d| d.status == Status::FabricatedData) {
        Status::FabricatedData
    } else if passed {
        Status::Pass
    } else {
        Status::Fail
    };
    GradeReport {
        score,
        status,
        passed,
        pass_threshold,
        dimensions,
        graders,
        flags: Vec::new(),
    }
}

/// Recomputes a stored report with other weights or threshold (e.g. a per-run override).
pub fn rescore(
    report: &GradeReport,
    weights: &BTreeMap<String, f64>,
    pass_threshold: f64,
) -> GradeReport {
    let mut r = combine(report.graders.clone(), weights, pass_threshold);
    r.flags = report.flags.clone();
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Check, GraderSpec};

    fn g(name: &str, dim: &str, weight: f64, status: Status, score: f64) -> GraderResult {
        GraderResult::outcome(name, "command", dim, weight, status, score)
    }

    fn spec(dims: &[&str], weights: Option<&[(&str, f64)]>) -> GradingSpec {
        GradingSpec {
            dimensions: weights.map(|w| w.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders: dims
                .iter()
                .map(|d| GraderSpec {
                    name: (*d).to_owned(),
                    dimension: (*d).to_owned(),
                    weight: 1.0,
                    check: Check::FilesExist(crate::checks::files_exist::FilesExist {
                        outputs: vec![],
                    }),
                })
                .collect(),
        }
    }

    #[test]
    fn prbench_defaults_are_restricted_and_renormalised() {
        let w = effective_weights(&spec(&["code_correctness", "data_accuracy"], None), None);
        assert!((w["code_correctness"] - 0.30 / 0.90).abs() < 1e-12);
        assert!((w["data_accuracy"] - 0.60 / 0.90).abs() < 1e-12);
        let all = effective_weights(
            &spec(
                &[
                    "methodology",
                    "code_correctness",
                    "data_accuracy",
                    "task_completeness",
                ],
                None,
            ),
            None,
        );
        assert_eq!(all, prbench_dimensions());
    }

    #[test]
    fn task_weights_then_run_override_win() {
        let s = spec(&["a", "b"], Some(&[("a", 3.0), ("b", 1.0)]));
        let w = effective_weights(&s, None);
        assert!((w["a"] - 0.75).abs() < 1e-12);
        let o: BTreeMap<String, f64> = [("a".to_owned(), 1.0), ("b".to_owned(), 1.0)].into();
        let w = effective_weights(&s, Some(&o));
        assert!((w["a"] - 0.5).abs() < 1e-12);
    }

    #[test]
    fn unknown_dimensions_alone_get_equal_weights() {
        let w = effective_weights(&spec(&["x", "y"], None), None);
        assert_eq!(w["x"], 0.5);
        assert_eq!(w["y"], 0.5);
    }

    #[test]
    fn weighted_dimensions_and_callback() {
        let w: BTreeMap<String, f64> = [("code".to_owned(), 0.4), ("data".to_owned(), 0.6)].into();
        let r = combine(
            vec![
                g("t1", "code", 3.0, Status::Pass, 1.0),
                g("t2", "code", 1.0, Status::Fail, 0.6),
                g("csv", "data", 1.0, Status::Pass, 1.0),
            ],
            &w,
            0.9,
        );
        let code = r.dimensions["code"].score.expect("code scored");
        assert!((code - 0.9).abs() < 1e-12);
        assert!(r.dimensions["code"].passed);
        assert!((r.score.expect("scored") - (0.4 * 0.9 + 0.6)).abs() < 1e-12);
        assert!(r.passed);
        assert_eq!(r.status, Status::Pass);

        let r = rescore(&r, &w, 0.95);
        assert!(!r.passed, "0.9 < 0.95 fails the callback");
        assert_eq!(r.status, Status::Fail);
    }

    #[test]
    fn infrastructure_failure_is_reported_never_zero() {
        let w: BTreeMap<String, f64> = [("m".to_owned(), 0.5), ("d".to_owned(), 0.5)].into();
        let r = combine(
            vec![
                g("judge", "m", 1.0, Status::JudgeInvalid, 0.0),
                g("csv", "d", 1.0, Status::Pass, 1.0),
            ],
            &w,
            0.9,
        );
        assert_eq!(r.score, None);
        assert_eq!(r.status, Status::JudgeInvalid);
        assert_eq!(r.dimensions["m"].score, None);
        assert_eq!(r.dimensions["d"].score, Some(1.0));
        assert!(!r.passed);
    }

    #[test]
    fn tampering_zeroes_the_whole_trial_even_beside_an_infrastructure_status() {
        let w: BTreeMap<String, f64> = [("c".to_owned(), 0.5), ("d".to_owned(), 0.5)].into();
        let r = combine(
            vec![
                g("tests", "c", 1.0, Status::TamperingDetected, 0.0),
                g("judge", "d", 1.0, Status::JudgeInvalid, 0.0),
                g("csv", "d", 1.0, Status::Pass, 1.0),
            ],
            &w,
            0.9,
        );
        assert_eq!(r.score, Some(0.0));
        assert_eq!(r.status, Status::TamperingDetected);
        assert!(!r.passed);
    }

    #[test]
    fn forbidden_api_zeroes_its_dimension() {
        let w: BTreeMap<String, f64> = [("c".to_owned(), 0.5), ("d".to_owned(), 0.5)].into();
        let r = combine(
            vec![
                g("tests", "c", 1.0, Status::Pass, 1.0),
                g("no fft", "c", 1.0, Status::ForbiddenApi, 0.0),
                g("csv", "d", 1.0, Status::Pass, 1.0),
            ],
            &w,
            0.9,
        );
        assert_eq!(r.dimensions["c"].score, Some(0.0));
        assert_eq!(r.score, Some(0.5));
        assert_eq!(r.status, Status::ForbiddenApi);
        assert!(!r.passed);
    }

    #[test]
    fn fabricated_data_zeroes_its_dimension() {
        let w: BTreeMap<String, f64> = [("c".to_owned(), 0.4), ("d".to_owned(), 0.6)].into();
        let r = combine(
            vec![
                g("tests", "c", 1.0, Status::Pass, 1.0),
                g("csv", "d", 3.0, Status::Pass, 1.0),
                g("re-run", "d", 1.0, Status::FabricatedData, 0.0),
            ],
            &w,
            0.9,
        );
        assert_eq!(r.dimensions["d"].score, Some(0.0));
        assert_eq!(r.dimensions["d"].status, Status::FabricatedData);
        assert_eq!(r.dimensions["c"].score, Some(1.0));
        assert!((r.score.expect("scored") - 0.4).abs() < 1e-12);
        assert_eq!(r.status, Status::FabricatedData);
        assert!(!r.passed);

        // A forbidden API outranks fabrication in the overall status.
        let r = combine(
            vec![
                g("no fft", "c", 1.0, Status::ForbiddenApi, 0.0),
                g("re-run", "d", 1.0, Status::FabricatedData, 0.0),
            ],
            &w,
            0.9,
        );
        assert_eq!(r.score, Some(0.0));
        assert_eq!(r.status, Status::ForbiddenApi);
    }

    #[test]
    fn weight_zero_dimensions_are_shown_and_decide_nothing() {
        let w: BTreeMap<String, f64> = [
            ("judged".to_owned(), 1.0),
            ("measured".to_owned(), 0.0),
            ("banned".to_owned(), 0.0),
            ("broken".to_owned(), 0.0),
        ]
        .into();
        let r = combine(
            vec![
                g("a", "judged", 1.0, Status::Pass, 1.0),
                g("b", "measured", 1.0, Status::Fail, 0.25),
                g("c", "banned", 1.0, Status::ForbiddenApi, 0.0),
                g("d", "broken", 1.0, Status::GraderError, 0.0),
            ],
            &w,
            0.9,
        );
        assert_eq!(r.score, Some(1.0));
        assert!(r.passed);
        assert_eq!(r.status, Status::Pass);
        assert_eq!(r.dimensions["measured"].score, Some(0.25));
        assert_eq!(r.dimensions["banned"].status, Status::ForbiddenApi);
        assert_eq!(r.dimensions["broken"].score, None);
    }
}
