//! `unittest`: held-out unittest files run by our runner against the agent's code.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::checks::PathField;
use crate::checks::agent_run::{AgentRun, CanaryAt, Listing};
use crate::checks::canary::{Canary, checked_outcome};
use crate::env::{Env, FileRead, Outcome, exit_note, tryf};
use crate::report::TestResult;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// `python -m unittest` over held-out test files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unittest {
    pub hidden_tests: String,
}

impl CheckSpec for Unittest {
    fn kind(&self) -> &'static str {
        "unittest"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("hidden_tests", &self.hidden_tests)]
    }
}

/// The trusted probe this kind's tool needs (see [`Run::probes`]).
const PROBE: &[&str] = &["python3", "-I", "-B", "-c", "import unittest"];

#[async_trait]
impl Run for Unittest {
    fn probes(&self) -> Vec<Vec<String>> {
        vec![crate::env::sv(PROBE)]
    }
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        unittest(env, &self.hidden_tests).await
    }
}

async fn unittest(env: &Env<'_, '_>, tests: &str) -> Outcome {
    // The run's preparation lists the held-out tests and writes the canary module.
    let canary = Canary::new();
    let (name, text) = (
        format!("canary_{}.py", canary.nonce),
        canary.unittest_source(true),
    );
    let lite = canary.unittest_source(false);
    let listing = Listing {
        bridged: true,
        framework: "unittest",
        tests,
        canary: CanaryAt::InRunDir(&name),
        text: &text,
        lite: Some(&lite),
    };
    let prepared = AgentRun::prepare_listed_after_probe(
        env,
        PROBE,
        "python3 (unittest) is not available in the grading image",
        "unittest",
        listing,
    )
    .await;
    let (run, listed, planted) = match prepared {
        Ok(p) => p,
        Err(o) => return o,
    };
    let held = run.held(tests);
    let canary_file = planted.path;
    let result = format!("{}/unittest.json", run.dir);
    // The tests run in the trusted process, the agent's modules in its worker (the bridge).
    let argv = vec![held, result.clone(), canary_file];
    let (out, read) = tryf!(run.exec_bridged(env, "unittest", argv, &result).await);
    let FileRead::Bytes(bytes) = read else {
        return if out.timed_out {
            Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out))
        } else {
            Outcome::new(Status::Error, 0.0).detail(format!(
                "the test run produced no report: {}",
                exit_note(&out)
            ))
        };
    };
    let v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return Outcome::new(Status::Error, 0.0)
                .detail(format!("unreadable unittest report: {e}"));
        }
    };
    if let Some(err) = v["load_error"].as_str() {
        return Outcome::new(Status::Error, 0.0)
            .detail(format!("loading the tests failed:\n{err}"));
    }
    let tests: Vec<TestResult> = v["tests"]
        .as_array()
        .map(|a| a.iter().map(row_to_test).collect())
        .unwrap_or_default();
    checked_outcome(&canary, &listed, tests, false)
}

pub(crate) fn row_to_test(r: &serde_json::Value) -> TestResult {
    let status = match r["status"].as_str() {
        Some("pass") => Status::Pass,
        Some("fail") => Status::Fail,
        Some("timeout") => Status::Timeout,
        _ => Status::Error,
    };
    let mut t = TestResult::new(r["name"].as_str().unwrap_or("?"), status);
    if let Some(m) = r["message"].as_str() {
        t = t.with_message(m);
    }
    t.duration_secs = r["duration_secs"].as_f64();
    t
}
