//! `csv`: numeric comparison of an agent's CSV output with held-out expected data.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::checks::{Locate, PathField, Problem, tolerance};
use crate::csv_compare::{self, CsvError, CsvRules, MAX_CSV_BYTES, NanPolicy};
use crate::env::{Env, FileRead, Outcome, tryf};
use crate::report::TestResult;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// Numeric CSV comparison of an agent output with held-out expected data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Csv {
    pub output: String,
    pub hidden_expected: String,
    /// Column used to align rows (interpolating where grids differ); row order if absent.
    #[serde(default)]
    pub x_column: Option<String>,
    #[serde(default)]
    pub rtol: Option<f64>,
    #[serde(default)]
    pub atol: Option<f64>,
    /// Per-column overrides: column name → (rtol, atol).
    #[serde(default)]
    pub column_tolerances: BTreeMap<String, (f64, f64)>,
    /// How NaN cells compare (default: NaN matches NaN and nothing else).
    #[serde(default)]
    pub nan_policy: NanPolicy,
}

impl CheckSpec for Csv {
    fn kind(&self) -> &'static str {
        "csv"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("hidden_expected", &self.hidden_expected)]
    }
    fn output_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("output", &self.output)]
    }
    fn validate(&self) -> Vec<Problem> {
        let columns = self.column_tolerances.iter().flat_map(|(column, (r, a))| {
            [("rtol", r), ("atol", a)].into_iter().filter_map(move |(k, t)| {
                let message = crate::bounds::TOLERANCE.outside(*t)?;
                Some(Problem::new(
                    "column_tolerances",
                    Locate::Key,
                    format!("column `{column}`: {k} {message}"),
                ))
            })
        });
        [tolerance("rtol", self.rtol), tolerance("atol", self.atol)]
            .into_iter()
            .flatten()
            .chain(columns)
            .collect()
    }
}

#[async_trait]
impl Run for Csv {
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        let mut rules = CsvRules {
            x_column: self.x_column.clone(),
            column_tolerances: self.column_tolerances.clone(),
            nan_policy: self.nan_policy,
            ..CsvRules::default()
        };
        if let Some(r) = self.rtol {
            rules.rtol = r;
        }
        if let Some(a) = self.atol {
            rules.atol = a;
        }
        csv(env, &self.output, &self.hidden_expected, &rules).await
    }
}

async fn csv(env: &Env<'_, '_>, output: &str, expected: &str, rules: &CsvRules) -> Outcome {
    // Both files in one exec (each read as root: the held-out file and the snapshot's copy).
    let mut reads = tryf!(
        env.read_files(&[env.hidden(expected), env.out(output)], MAX_CSV_BYTES)
            .await
    )
    .into_iter();
    let (Some(exp), Some(act)) = (reads.next(), reads.next()) else {
        return Outcome::from_fault(crate::env::Fault::Broken("reading the CSV files failed".into()));
    };
    let exp = match exp {
        FileRead::Bytes(b) => b,
        other => {
            return Outcome::new(Status::GraderError, 0.0)
                .detail(format!("held-out expected data {expected} {other}"));
        }
    };
    let exp = match csv_compare::parse(&exp) {
        Ok(t) => t,
        Err(e) => {
            return Outcome::new(Status::GraderError, 0.0).detail(format!(
                "held-out expected data {expected} is unusable: {e}"
            ));
        }
    };
    let act = match act {
        FileRead::Bytes(b) => b,
        FileRead::Missing => {
            return Outcome::new(Status::ExtractFailed, 0.0)
                .detail(format!("the agent's output {output} does not exist"));
        }
        FileRead::TooLarge => {
            return Outcome::new(Status::ExtractFailed, 0.0).detail(format!(
                "the agent's output {output} is larger than {MAX_CSV_BYTES} bytes; not read"
            ));
        }
    };
    let act = match csv_compare::parse(&act) {
        Ok(t) => t,
        Err(e) => {
            return Outcome::new(Status::ExtractFailed, 0.0)
                .detail(format!("the agent's output {output}: {e}"));
        }
    };
    match csv_compare::compare(&exp, &act, rules) {
        Ok(rep) => {
            let status = if rep.score >= 1.0 {
                Status::Pass
            } else {
                Status::Fail
            };
            let mut o = Outcome::new(status, rep.score);
            o.tests = rep
                .columns
                .iter()
                .map(|c| {
                    let st = if c.present && c.matched == c.compared {
                        Status::Pass
                    } else {
                        Status::Fail
                    };
                    // The column's worst listed miss says where and by how much.
                    let worst = rep.misses.iter().find(|m| m.column == c.name);
                    let msg = match worst {
                        Some(m) if st != Status::Pass => {
                            format!("{}; worst: {}", c.summary(), m.describe())
                        }
                        _ => c.summary(),
                    };
                    TestResult::new(format!("column {}", c.name), st).with_message(msg)
                })
                .collect();
            o.details = rep.describe();
            o.data = serde_json::to_value(&rep).ok();
            o
        }
        Err(e @ CsvError::MissingX(..))
            if !exp.headers.iter().any(|h| {
                rules.x_column.as_deref().is_some_and(|x| {
                    csv_compare::normalise_header(h) == csv_compare::normalise_header(x)
                })
            }) =>
        {
            Outcome::new(Status::GraderError, 0.0).detail(format!("held-out data: {e}"))
        }
        Err(e) => Outcome::new(Status::ExtractFailed, 0.0)
            .detail(format!("the agent's output {output}: {e}")),
    }
}
