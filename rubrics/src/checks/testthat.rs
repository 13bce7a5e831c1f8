//! `testthat`: held-out R testthat files run against the agent's code.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::checks::PathField;
use crate::checks::agent_run::{AgentRun, CanaryAt, Listing};
use crate::checks::canary::{Canary, checked_outcome};
use crate::env::{AGENT_USER, Env, FileRead, Outcome, REPORT_CAP, exit_note, tryf};
use crate::report::TestResult;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// R testthat over a held-out test file or folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Testthat {
    pub hidden_tests: String,
}

impl CheckSpec for Testthat {
    fn kind(&self) -> &'static str {
        "testthat"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("hidden_tests", &self.hidden_tests)]
    }
}

/// The trusted probe this kind's tool needs (see [`Run::probes`]).
const PROBE: &[&str] = &["Rscript", "--vanilla", "-e", "library(testthat)"];

#[async_trait]
impl Run for Testthat {
    fn probes(&self) -> Vec<Vec<String>> {
        vec![crate::env::sv(PROBE)]
    }
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        testthat(env, &self.hidden_tests).await
    }
}

/// Our R runner: `Rscript --vanilla testthat_runner.R TESTS OUT_TSV [CANARY_FILE]` (the canary
/// file runs after the held-out tests, in the same R process).
pub(crate) const RUNNER: &str = r#"args <- commandArgs(TRUE)
run <- function(path) {
  if (dir.exists(path)) {
    testthat::test_dir(path, reporter = "silent", stop_on_failure = FALSE, stop_on_warning = FALSE)
  } else {
    testthat::test_file(path, reporter = "silent", stop_on_failure = FALSE)
  }
}
clean <- function(x) gsub("[\t\r\n]+", " ", as.character(x))
rows <- function(res) {
  df <- as.data.frame(res)
  data.frame(name = clean(paste(df$file, df$test, sep = "::")), failed = df$failed,
             error = as.integer(df$error), skipped = as.integer(df$skipped), passed = df$passed)
}
out <- rows(run(args[1]))
if (length(args) >= 3) {
  extra <- tryCatch(rows(run(args[3])), error = function(e) NULL)
  if (!is.null(extra)) out <- rbind(out, extra)
}
write.table(out, args[2], sep = "\t", quote = FALSE, row.names = FALSE)
"#;

async fn testthat(env: &Env<'_, '_>, tests: &str) -> Outcome {
    // `--vanilla`: no `.Rprofile`/`.Renviron` of the agent's (nor of the working folder).
    if !tryf!(
        env.probe(PROBE)
            .await
    ) {
        return Outcome::new(Status::EnvBroken, 0.0)
            .detail("R/testthat is not available in the grading image");
    }
    // The same root exec lists the held-out tests and writes the canary file.
    let canary = Canary::new();
    let (name, text) = (
        format!("test-{}.R", canary.nonce),
        canary.testthat_source(),
    );
    let listing = Listing {
        bridged: false,
        framework: "testthat",
        tests,
        canary: CanaryAt::InRunDir(&name),
        text: &text,
        lite: None,
    };
    let (run, listed, planted) = match AgentRun::prepare_listed(env, "testthat", listing).await {
        Ok(p) => p,
        Err(o) => return o,
    };
    let held = run.held(tests);
    let canary_file = planted.path;
    let tsv = format!("{}/testthat.tsv", run.dir);
    let argv = vec![
        "Rscript".into(),
        "--vanilla".into(),
        format!("{}/testthat_runner.R", env.rb_dir),
        held,
        tsv.clone(),
        canary_file,
    ];
    let out = tryf!(
        run.exec_plain(env, argv, run.vars(), Some(&run.dir), None)
            .await
    );
    match tryf!(env.read_file_as(AGENT_USER, &tsv, REPORT_CAP).await) {
        FileRead::Bytes(b) => match parse_testthat_tsv(&String::from_utf8_lossy(&b)) {
            Some(tests) => {
                let mut o = checked_outcome(&canary, &listed, tests, true);
                if out.timed_out && o.status != Status::TamperingDetected {
                    o.status = Status::Timeout;
                }
                o
            }
            None => Outcome::new(Status::Error, 0.0).detail(format!(
                "the R test run left an unreadable report: {}",
                exit_note(&out)
            )),
        },
        _ if out.timed_out => Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out)),
        _ => Outcome::new(Status::Error, 0.0).detail(format!(
            "the R test run produced no report: {}",
            exit_note(&out)
        )),
    }
}

/// Parses our testthat runner's TSV (`name failed error skipped passed`).
pub(crate) fn parse_testthat_tsv(tsv: &str) -> Option<Vec<TestResult>> {
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next()?.split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (name, failed, error, skipped) =
        (col("name")?, col("failed")?, col("error")?, col("skipped")?);
    let mut out = Vec::new();
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split('\t').collect();
        let num = |i: usize| {
            f.get(i)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let t = TestResult::new(f.get(name).copied().unwrap_or("?"), Status::Pass);
        out.push(if num(error) > 0.0 {
            TestResult {
                status: Status::Error,
                ..t
            }
            .with_message("the test raised an error")
        } else if num(failed) > 0.0 {
            TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message(format!("{} expectation(s) failed", num(failed)))
        } else if num(skipped) > 0.0 {
            TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message("skipped (or no expectation)")
        } else {
            t
        });
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testthat_tsv() {
        let t = parse_testthat_tsv("name\tfailed\terror\tskipped\tpassed\ntest-a.R::ok\t0\t0\t0\t2\ntest-a.R::bad\t1\t0\t0\t1\ntest-a.R::boom\t0\t1\t0\t0\ntest-a.R::skip\t0\t0\t1\t0\n").expect("parses");
        let st: Vec<Status> = t.iter().map(|t| t.status).collect();
        assert_eq!(
            st,
            vec![Status::Pass, Status::Fail, Status::Error, Status::Fail]
        );
        assert_eq!(t[0].name, "test-a.R::ok");
        assert!(parse_testthat_tsv("").is_none());
        assert!(parse_testthat_tsv("a\tb\n").is_none());
    }

}
