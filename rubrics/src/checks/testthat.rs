//! `testthat`: held-out R testthat files run against the agent's code. The tests run in a
//! referee R process that never sources an agent file; the agent's functions run in a worker
//! R process (the agent's uid) and only plain data crosses (see `r/rb_bridge.R`).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::checks::PathField;
use crate::checks::agent_run::{AgentRun, CanaryAt, Listing};
use crate::checks::canary::{Canary, checked_outcome};
use crate::env::{Env, Outcome, REPORT_CAP, exit_note, tryf};
use std::time::Duration;
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
    // Root starts the two R processes (`r/r_launch.sh`, `r/rb_bridge.R`): the agent's files
    // are sourced only by the worker (uid 1000); the referee (its own uid, no agent code)
    // runs the tests and the canaries and writes the report, which the launcher prints after
    // every process of both uids is gone (so no kill of leftovers is needed here).
    let seconds = env
        .remaining()
        .saturating_sub(Duration::from_secs(5))
        .as_secs()
        .max(1);
    let argv = vec![
        "sh".into(),
        format!("{}/r_launch.sh", env.rb_dir),
        env.rb_dir.clone(),
        run.dir.clone(),
        held,
        planted.path,
        env.ctx.workspace.clone(),
        seconds.to_string(),
    ];
    let out = tryf!(
        env.exec_as("root", argv, run.vars(), Some("/"), None, REPORT_CAP + 1)
            .await
    );
    if out.exit_code == Some(81) {
        return Outcome::new(Status::EnvBroken, 0.0)
            .detail("the grading image lacks setpriv (util-linux), which the testthat grader needs");
    }
    if out.exit_code == Some(4) || out.timed_out {
        return Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out));
    }
    if out.exit_code == Some(3) {
        return Outcome::new(Status::Error, 0.0).detail(format!(
            "the R test run produced no report: {}",
            exit_note(&out)
        ));
    }
    if !out.success() || out.stdout.len() > REPORT_CAP {
        return Outcome::new(Status::EnvBroken, 0.0).detail(format!(
            "the R test launcher failed: {}",
            exit_note(&out)
        ));
    }
    match parse_testthat_tsv(&String::from_utf8_lossy(&out.stdout)) {
        Some(tests) => checked_outcome(&canary, &listed, tests, true),
        None => Outcome::new(Status::EnvBroken, 0.0).detail(format!(
            "the R referee wrote an unreadable report: {}",
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
    // The referee's reason for a failure (absent from older reports).
    let message = col("message");
    let mut out = Vec::new();
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split('\t').collect();
        let num = |i: usize| {
            f.get(i)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let t = TestResult::new(f.get(name).copied().unwrap_or("?"), Status::Pass);
        let why = message
            .and_then(|i| f.get(i))
            .map(|m| m.trim())
            .filter(|m| !m.is_empty());
        let failed_test = if num(error) > 0.0 {
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
        };
        out.push(match why {
            Some(m) if failed_test.status != Status::Pass => {
                let head = failed_test.message.clone().unwrap_or_default();
                failed_test.with_message(format!("{head}: {m}"))
            }
            _ => failed_test,
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
        let m = parse_testthat_tsv("name\tfailed\terror\tskipped\tpassed\tmessage\nt.R::a\t1\t0\t0\t0\ttrapz(x) not equal to 4.5.\nt.R::b\t0\t0\t0\t1\t\n")
            .expect("parses");
        assert_eq!(
            m[0].message.as_deref(),
            Some("1 expectation(s) failed: trapz(x) not equal to 4.5.")
        );
        assert_eq!((m[1].status, m[1].message.as_deref()), (Status::Pass, None));
        assert!(parse_testthat_tsv("a\tb\n").is_none());
    }

}
