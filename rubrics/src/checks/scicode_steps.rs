//! `scicode_steps`: SciCode's per-step held-out cases run against the agent's functions.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use serde_json::json;

use crate::checks::{Locate, PathField, Problem};
use crate::checks::agent_run::AgentRun;
use crate::checks::unittest::row_to_test;
use crate::env::{Env, FileRead, Outcome, REPORT_CAP, exit_note, tryf};
use crate::report::TestResult;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// SciCode: per step, run the agent's function against the held-out test cases and targets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScicodeSteps {
    /// Held-out JSON with the steps, their test snippets and derived targets.
    pub hidden_cases: String,
    /// The agent's solution file, relative to `/workspace`.
    pub output: String,
    /// Deadline of one test snippet, overriding the run's (60 s by default): the importer sets
    /// it from how long the gold code took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_timeout_secs: Option<u64>,
}

impl CheckSpec for ScicodeSteps {
    fn kind(&self) -> &'static str {
        "scicode_steps"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("hidden_cases", &self.hidden_cases)]
    }
    fn output_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("output", &self.output)]
    }
    fn validate(&self) -> Vec<Problem> {
        let message = self
            .case_timeout_secs
            .and_then(|t| crate::bounds::TIMEOUT_SECS.outside(t));
        message
            .map(|m| Problem::new("case_timeout_secs", Locate::Key, m))
            .into_iter()
            .collect()
    }
}

/// The trusted probe this kind's tool needs (see [`Run::probes`]).
const PROBE: &[&str] = &["python3", "-I", "-B", "-c", "import numpy"];

#[async_trait]
impl Run for ScicodeSteps {
    fn probes(&self) -> Vec<Vec<String>> {
        vec![crate::env::sv(PROBE)]
    }
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        let case_timeout = self
            .case_timeout_secs
            .unwrap_or_else(|| env.ctx.case_timeout.as_secs());
        scicode(env, &self.hidden_cases, &self.output, case_timeout).await
    }
}

/// The runner is the trusted side (root, `python3 -I`, reading the held-out cases where they
/// are): it runs the agent's code in a worker as the agent's uid, which never sees a target, and
/// compares the values the worker records itself (see `python/scicode_runner.py` and its
/// modules, [`crate::grade::SCICODE_FILES`]). Its result goes to the root-owned scratch folder,
/// out of the agent's reach.
async fn scicode(env: &Env<'_, '_>, cases: &str, output: &str, case_timeout: u64) -> Outcome {
    // Evidence for an infrastructure status comes from a trusted probe, never from what the
    // agent's code prints.
    // (The run's folder is prepared, as root, while the probe answers.)
    let (probed, run) =
        futures::future::join(env.probe(PROBE), AgentRun::prepare(env, "scicode", &[])).await;
    if !tryf!(probed) {
        return Outcome::new(Status::EnvBroken, 0.0)
            .detail("python3 with numpy is not available in the grading image");
    }
    let run = match run {
        Ok(r) => r,
        Err(o) => return o,
    };
    let result = format!("{}.result.json", run.dir);
    let argv = vec![
        "python3".into(),
        "-I".into(),
        format!("{}/scicode_runner.py", env.rb_dir),
        env.hidden(cases),
        env.ws(output),
        result.clone(),
        case_timeout.max(1).to_string(),
    ];
    let out = tryf!(run.exec_trusted(env, argv, None).await);
    let read = tryf!(env.read_file(&result, REPORT_CAP).await);
    let FileRead::Bytes(bytes) = read else {
        if out.timed_out {
            return Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out));
        }
        // The runner works (probed): a run that ends without a result was stopped by the
        // agent's code (it killed the runner, say).
        return Outcome::new(Status::Error, 0.0).detail(format!(
            "the SciCode runner wrote no result: {}",
            exit_note(&out)
        ));
    };
    let v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return Outcome::new(Status::GraderError, 0.0)
                .detail(format!("unreadable SciCode result: {e}"));
        }
    };
    let steps: Vec<TestResult> = v["steps"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let mut t = row_to_test(&json!({"name": format!("step {}", s["step_id"].as_str().unwrap_or("?")), "status": s["status"], "message": s["message"]}));
                    let bad = s["cases"].as_array().and_then(|c| c.iter().find(|c| c["status"] != "pass"));
                    if let (None, Some(bad)) = (&t.message, bad) {
                        let copy = bad["perturbed_of"].as_u64().map_or(String::new(), |of| format!(" (a perturbed copy of case {of})"));
                        t = t.with_message(format!("case {}{copy}: {}", bad["case"], bad["message"].as_str().unwrap_or("")));
                    }
                    t
                })
                .collect()
        })
        .unwrap_or_default();
    if steps.is_empty() {
        return Outcome::new(Status::GraderError, 0.0)
            .detail("the held-out SciCode cases hold no step");
    }
    let mut o = Outcome::from_tests(steps);
    if v["tampering_detected"] == true {
        // A must-fail canary was reported passing: the step's message says which.
        o.status = Status::TamperingDetected;
        o.score = 0.0;
        o = o.detail("tampering detected: the agent's code changed how its tests run");
    }
    // The stated exception: checks a snippet makes on its own (not against `target`) run in the
    // agent's process, guarded by the canaries only.
    let in_process: Vec<String> = v["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| {
            s["cases"].as_array().into_iter().flatten().filter_map(move |c| {
                c["in_agent_process"].as_u64().filter(|&n| n > 0).map(|n| {
                    format!(
                        "step {} case {} ({n})",
                        s["step_id"].as_str().unwrap_or("?"),
                        c["case"]
                    )
                })
            })
        })
        .collect();
    if !in_process.is_empty() {
        o = o.detail(format!(
            "{}: checks that do not compare against `target` ran in the agent's process (guarded by the canaries only): {}",
            crate::checks::VERDICT_IN_AGENT_PROCESS,
            in_process.iter().take(20).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let solved = o.status == Status::Pass;
    // How each step graded here did (`crate::scicode_score` reads `steps`).
    o.data = Some(json!({
        "main_problem_solved": solved,
        "problem_id": v["problem_id"],
        "steps": v["steps"],
    }));
    if !solved && o.tests.iter().all(|t| t.status == Status::Timeout) {
        o.status = Status::Timeout;
    }
    o
}
