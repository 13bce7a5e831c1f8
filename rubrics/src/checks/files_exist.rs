//! `files_exist`: the agent's named outputs exist and are non-empty.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use std::time::Duration;

use crate::checks::{PathField, Problem, non_empty};
use crate::env::{Env, Outcome, sv, tryf};
use crate::report::TestResult;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// Agent files must exist and be non-empty (task completeness).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilesExist {
    pub outputs: Vec<String>,
}

impl CheckSpec for FilesExist {
    fn kind(&self) -> &'static str {
        "files_exist"
    }
    fn output_paths(&self) -> Vec<PathField<'_>> {
        PathField::all("outputs", &self.outputs).collect()
    }
    fn validate(&self) -> Vec<Problem> {
        non_empty("outputs", &self.outputs, "no files listed")
            .into_iter()
            .collect()
    }
}

#[async_trait]
impl Run for FilesExist {
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        files_exist(env, &self.outputs).await
    }
}

async fn files_exist(env: &Env<'_, '_>, outputs: &[String]) -> Outcome {
    let mut tests = Vec::new();
    for o in outputs {
        let out = tryf!(
            env.exec(
                // The snapshot holds only regular files and folders: nothing to follow.
                sv(&[
                    "sh",
                    "-c",
                    "test -f \"$1\" || exit 3; test -s \"$1\" || exit 4",
                    "sh",
                    &env.out(o)
                ]),
                false,
                Some("/"),
                Some(Duration::from_secs(30)),
                1024
            )
            .await
        );
        let t = TestResult::new(o.clone(), Status::Pass);
        tests.push(match out.exit_code {
            Some(0) if out.success() => t,
            Some(3) => TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message(format!("/workspace/{o} does not exist (or is not a regular file)")),
            Some(4) => TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message(format!("/workspace/{o} is empty")),
            _ => TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message(format!("/workspace/{o} could not be checked ({})", out.ended())),
        });
    }
    if tests.is_empty() {
        return Outcome::new(Status::GraderError, 0.0).detail("files_exist names no file");
    }
    Outcome::from_tests(tests)
}
