//! `pytest`: held-out pytest files run against the agent's code (JUnit XML).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::checks::PathField;
use crate::checks::agent_run::{AgentRun, CanaryAt, Listing};
use crate::checks::canary::{Canary, StaticTests, checked_outcome};
use crate::env::{Env, FileRead, Outcome, exit_note, sv, tryf};
use crate::junit;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// pytest over held-out test files (JUnit XML); score = passed / total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pytest {
    pub hidden_tests: String,
    #[serde(default)]
    pub args: Vec<String>,
}

impl CheckSpec for Pytest {
    fn kind(&self) -> &'static str {
        "pytest"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("hidden_tests", &self.hidden_tests)]
    }
}

/// The trusted probe this kind's tool needs (see [`Run::probes`]).
const PROBE: &[&str] = &["python3", "-I", "-B", "-c", "import pytest"];

#[async_trait]
impl Run for Pytest {
    fn probes(&self) -> Vec<Vec<String>> {
        vec![crate::env::sv(PROBE)]
    }
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        pytest(env, &self.hidden_tests, &self.args).await
    }
}

async fn pytest(env: &Env<'_, '_>, tests: &str, args: &[String]) -> Outcome {
    // The run's preparation lists the held-out tests and plants the canary file beside them.
    // Its name sorts after the held-out test files, so it runs after every test that may import
    // (and patch) the agent's code.
    let canary = Canary::new();
    let (name, text) = (
        format!("test_zzzz{}.py", canary.nonce),
        canary.pytest_source(true),
    );
    let lite = canary.pytest_source(false);
    let listing = Listing {
        bridged: true,
        framework: "pytest",
        tests,
        canary: CanaryAt::Beside(&name),
        text: &text,
        lite: Some(&lite),
    };
    let prepared = AgentRun::prepare_listed_after_probe(
        env,
        PROBE,
        "pytest is not available in the grading image",
        "pytest",
        listing,
    )
    .await;
    let (run, listed, planted) = match prepared {
        Ok(p) => p,
        Err(o) => return o,
    };
    let held = run.held(tests);
    let (canary_file, is_dir) = (planted.path, planted.beside_folder);
    let xml = format!("{}/junit.xml", run.dir);
    let mut argv = sv(&[
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        // A test file that fails to import (the agent's module raising) must not stop the
        // others, nor the canaries.
        "--continue-on-collection-errors",
        // Python's own traceback (with pytest's assertion explanation): pytest's long style
        // maps every loaded module to its real path on the first failure (`inspect.getmodule`,
        // ~1,300 lstat calls), and the canaries always fail. A task's `args` may override it.
        "--tb=native",
        "--confcutdir",
        &run.held(""),
        "--junitxml",
        &xml,
        &held,
    ]);
    if !is_dir {
        argv.push(canary_file);
    }
    argv.extend(args.iter().cloned());
    // The tests run in the trusted process, the agent's modules in its worker (the bridge).
    let (out, report) = tryf!(run.exec_bridged(env, "pytest", argv, &xml).await);
    junit_verdict(&out, report, &canary, &listed)
}

/// Judges the JUnit XML the trusted test process wrote.
fn junit_verdict(
    out: &sandbox::ExecOutcome,
    report: FileRead,
    canary: &Canary,
    listed: &StaticTests,
) -> Outcome {
    let parsed = match report {
        FileRead::Bytes(b) => junit::parse(&String::from_utf8_lossy(&b)).ok(),
        _ => None,
    };
    match parsed {
        Some(tests) => {
            let mut o = checked_outcome(canary, listed, tests, false);
            if out.timed_out && o.status != Status::TamperingDetected {
                o.status = Status::Timeout;
                o = o.detail("the test run hit its deadline; results are partial");
            }
            o
        }
        None if out.timed_out => Outcome::new(Status::Timeout, 0.0).detail(exit_note(out)),
        // pytest itself works (probed) and the agent's code runs in another process: a run
        // that leaves no readable report ran out of the grading budget or broke on the
        // agent's data; either counts against the agent.
        None => Outcome::new(Status::Error, 0.0).detail(format!(
            "the test run produced no readable report: {}",
            exit_note(out)
        )),
    }
}
