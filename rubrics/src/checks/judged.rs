//! Inputs of the judge-based graders: agent files (capped), the workspace listing, held-out
//! texts, and turning a judge's answer into an [`Outcome`].

use std::time::Duration;

use crate::env::{Env, Fault, FileRead, Outcome, sv};
use crate::judge::{self, AgentFile, JudgeRequest};
use crate::status::Status;

/// Reads agent files for the judge (capped); missing files are listed as such.
pub(crate) async fn agent_files(
    env: &Env<'_, '_>,
    paths: &[String],
) -> Result<Vec<AgentFile>, Fault> {
    let cap = env
        .ctx
        .judge
        .map_or(32 * 1024, judge::Judge::max_file_bytes);
    let mut out = Vec::new();
    for p in paths.iter().take(64) {
        let content = match env.read_file(&env.out(p), cap).await? {
            FileRead::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
            FileRead::TooLarge => {
                // Show the head of a large file.
                let head = env
                    .exec(
                        vec!["head".into(), "-c".into(), cap.to_string(), env.out(p)],
                        false,
                        Some("/"),
                        Some(Duration::from_secs(60)),
                        cap,
                    )
                    .await?;
                format!(
                    "{}\n[file truncated at {cap} bytes]",
                    String::from_utf8_lossy(&head.stdout)
                )
            }
            FileRead::Missing => "[this file does not exist]".into(),
        };
        out.push(AgentFile {
            name: p.clone(),
            content,
        });
    }
    Ok(out)
}

/// Every regular file of the workspace (for PaperBench leaves), capped in number.
pub(crate) async fn workspace_listing(env: &Env<'_, '_>) -> Result<Vec<String>, Fault> {
    let out = env
        .exec(
            sv(&[
                "sh",
                "-c",
                "cd \"$1\" && find . -type f -size -1000k -not -path './.git/*' | sort | head -n 40",
                "sh",
                &env.snap,
            ]),
            false,
            Some("/"),
            Some(Duration::from_secs(60)),
            1024 * 1024,
        )
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").to_owned())
        .filter(|l| !l.is_empty())
        .collect())
}

pub(crate) async fn hidden_text(env: &Env<'_, '_>, rel: &str) -> Result<String, Outcome> {
    match env.read_file(&env.hidden(rel), 4 * 1024 * 1024).await {
        Ok(FileRead::Bytes(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Ok(other) => {
            Err(Outcome::new(Status::GraderError, 0.0)
                .detail(format!("held-out file {rel} {other}")))
        }
        Err(f) => Err(Outcome::from_fault(f)),
    }
}

pub(crate) fn no_judge() -> Outcome {
    Outcome::new(Status::JudgeUnavailable, 0.0)
        .detail("no judge is configured for this run; this grader needs one")
}

pub(crate) async fn ask(
    env: &Env<'_, '_>,
    req: &JudgeRequest,
) -> Result<judge::Verdict, judge::JudgeFailure> {
    match env.ctx.judge {
        Some(j) => j.ask(req).await,
        None => Err(judge::JudgeFailure {
            status: Status::JudgeUnavailable,
            reason: "no judge configured".into(),
            raw: None,
            attempts: 0,
            model: String::new(),
            votes: Vec::new(),
        }),
    }
}

pub(crate) fn verdict_outcome(r: Result<judge::Verdict, judge::JudgeFailure>) -> Outcome {
    match r {
        Ok(v) => {
            let mut o = Outcome::new(
                if v.score >= 1.0 {
                    Status::Pass
                } else {
                    Status::Fail
                },
                v.score,
            )
            .detail(format!("judge: {}", v.justification));
            o.data = serde_json::to_value(&v).ok();
            o
        }
        Err(f) => {
            let mut o = Outcome::new(f.status, 0.0).detail(format!("judge: {}", f.reason));
            o.data = serde_json::to_value(&f).ok();
            o
        }
    }
}
