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

/// For each path (`$@`), one line: `0` a non-empty regular file, `3` none, `4` empty.
const CHECK_ALL: &str = r#"for f; do
  if [ ! -f "$f" ]; then echo 3; elif [ ! -s "$f" ]; then echo 4; else echo 0; fi
done
"#;

async fn files_exist(env: &Env<'_, '_>, outputs: &[String]) -> Outcome {
    // One exec for every path. The snapshot holds only regular files and folders: nothing to
    // follow.
    let mut argv = sv(&["sh", "-c", CHECK_ALL, "sh"]);
    argv.extend(outputs.iter().map(|o| env.out(o)));
    let out = tryf!(
        env.exec(argv, false, Some("/"), Some(Duration::from_secs(30)), 64 * 1024)
            .await
    );
    let codes: Vec<&str> = if out.success() && !out.truncated {
        std::str::from_utf8(&out.stdout)
            .unwrap_or("")
            .lines()
            .collect()
    } else {
        Vec::new()
    };
    let mut tests = Vec::new();
    for (i, o) in outputs.iter().enumerate() {
        let t = TestResult::new(o.clone(), Status::Pass);
        tests.push(match codes.get(i).copied() {
            Some("0") if codes.len() == outputs.len() => t,
            Some("3") => TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message(format!("/workspace/{o} does not exist (or is not a regular file)")),
            Some("4") => TestResult {
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
