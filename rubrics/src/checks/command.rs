//! `command`: a task-author command; exit 0 passes.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::checks::agent_run::{AgentRun, author_env};
use crate::checks::author_script::exec_author;
use crate::checks::{Problem, non_empty};
use crate::env::{AUTHOR_USER, Env, Outcome, exit_note, tryf};
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// Any command; exit 0 = 1.0, else 0.0. `{hidden}` and `{workspace}` are substituted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Command {
    pub argv: Vec<String>,
}

impl CheckSpec for Command {
    fn kind(&self) -> &'static str {
        "command"
    }
    fn validate(&self) -> Vec<Problem> {
        non_empty("argv", &self.argv, "empty command").into_iter().collect()
    }
}

#[async_trait]
impl Run for Command {
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        command(env, &self.argv).await
    }
}

/// Held-out paths a command names (`{hidden}/rel`); a bare `{hidden}` names the whole folder.
fn named_held_out(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for a in argv {
        let mut rest = a.as_str();
        while let Some(i) = rest.find("{hidden}") {
            rest = &rest[i + "{hidden}".len()..];
            let rel: String = rest
                .strip_prefix('/')
                .unwrap_or("")
                .chars()
                .take_while(|c| !c.is_whitespace() && !matches!(c, '\'' | '"' | ';' | '|' | '&' | ')'))
                .collect();
            let rel = rel.trim_end_matches('/').to_owned();
            if rel.is_empty() || rel.split('/').any(|p| p == "..") {
                return vec![String::new()];
            }
            out.push(rel);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Runs the task's own grader command as the task-author uid (neither root nor the agent's),
/// in a folder of its own (not the workspace) holding copies of only the held-out files it
/// names, with no agent file on any import path. Agent code the command runs gets that uid's
/// rights: it can read those copies, never the rest of the held-out folder.
async fn command(env: &Env<'_, '_>, argv: &[String]) -> Outcome {
    if argv.is_empty() {
        return Outcome::new(Status::GraderError, 0.0).detail("empty command");
    }
    let named = named_held_out(argv);
    let held: Vec<&str> = named.iter().map(String::as_str).collect();
    let run = match AgentRun::prepare_as(env, "command", &held, AUTHOR_USER).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let argv: Vec<String> = argv
        .iter()
        .map(|a| {
            a.replace("{hidden}", &run.held(""))
                .replace("{workspace}", &env.ctx.workspace)
        })
        .collect();
    let vars = author_env(env, &run);
    let ran = tryf!(exec_author(env, &run, argv, vars, None).await);
    let out = &ran.out;
    let o = if out.success() {
        Outcome::new(Status::Pass, 1.0)
    } else if out.timed_out {
        Outcome::new(Status::Timeout, 0.0).detail(exit_note(out))
    } else {
        Outcome::new(Status::Fail, 0.0).detail(exit_note(out))
    };
    match ran.ran_detail() {
        Some(d) => o.detail(d),
        None => o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_paths() {
        let v = |a: &[&str]| named_held_out(&a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(v(&["python3", "{hidden}/check.py", "{workspace}/x"]), vec!["check.py"]);
        assert_eq!(
            v(&["sh", "-c", "python3 {hidden}/a/b.py && cat '{hidden}/c.txt'"]),
            vec!["a/b.py", "c.txt"]
        );
        assert_eq!(v(&["ls", "{hidden}"]), vec![""]);
        assert_eq!(v(&["cat", "{hidden}/../etc"]), vec![""]);
        assert!(v(&["true"]).is_empty());
    }
}
