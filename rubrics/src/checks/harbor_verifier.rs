//! `harbor_verifier`: a Harbor task's held-out verifier script writes the reward.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::checks::PathField;
use crate::checks::agent_run::{AgentRun, author_env};
use crate::checks::author_script::exec_author;
use crate::env::{AUTHOR_USER, Env, FileRead, Outcome, tail, tryf};
use crate::report::{TestResult, cap_text};
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// Harbor verifier: run the held-out script; it writes `/logs/verifier/reward.txt` (a number)
/// or `reward.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarborVerifier {
    pub hidden_script: String,
}

impl CheckSpec for HarborVerifier {
    fn kind(&self) -> &'static str {
        "harbor_verifier"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        vec![PathField::new("hidden_script", &self.hidden_script)]
    }
}

/// The trusted probe this kind's tool needs (see [`Run::probes`]).
const PROBE: &[&str] = &["sh", "-c", "command -v bash"];

#[async_trait]
impl Run for HarborVerifier {
    fn probes(&self) -> Vec<Vec<String>> {
        vec![crate::env::sv(PROBE)]
    }
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        harbor(env, &self.hidden_script).await
    }
}

/// Runs a Harbor verifier script as the task-author uid (neither root nor the agent's), in a
/// folder of its own holding copies of the script's folder (its tests), with no agent file on
/// any import path; it writes `/logs/verifier/reward.txt` or `reward.json`. Agent code the
/// script executes gets that uid's rights.
async fn harbor(env: &Env<'_, '_>, script: &str) -> Outcome {
    if !tryf!(env.probe(PROBE).await) {
        return Outcome::new(Status::EnvBroken, 0.0).detail("bash is not available in the image");
    }
    let folder = script.rsplit_once('/').map_or("", |(d, _)| d);
    let run = match AgentRun::prepare_as(env, "verifier", &[folder], AUTHOR_USER).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let tests = if folder == "tests" || folder.ends_with("/tests") {
        run.held(folder)
    } else {
        run.held(&format!("{folder}/tests"))
    };
    let vars = author_env(env, &run);
    // One exec: our root wrapper lays out Harbor's paths (`/logs/verifier` emptied, root-owned,
    // sticky, with root-made reward files the script can write but neither replace nor chmod;
    // `/tests`, `/app`), runs the script as the author's uid and reads the reward files with
    // that uid's rights once its processes are gone (`python/author_run.py`).
    let ran = tryf!(
        exec_author(
            env,
            &run,
            vec!["bash".into(), run.held(script)],
            vars,
            Some(&tests)
        )
        .await
    );
    if let Some(why) = &ran.layout_error {
        return Outcome::new(Status::EnvBroken, 0.0).detail(why.clone());
    }
    let mut o = match ran.outlived_detail() {
        Some(why) => Outcome::new(Status::TamperingDetected, 0.0).detail(why),
        None => verdict(env, &ran.out, ran.rewards.as_ref()).await,
    };
    if let Some(d) = ran.ran_detail() {
        o = o.detail(d);
    }
    explain(o, &ran.out)
}

/// Bytes of the verifier's output kept in the grade (its end: where test runners summarise).
const OUTPUT_KEPT: usize = 6000;

/// Why the verifier decided as it did, kept in the grade: its output (stdout and stderr, which
/// our wrapper sends to one stream; the end, bounded), how it ended, the reward (in `data`),
/// and the failing tests a pytest run inside it named in its short summary (`FAILED name -
/// message` lines, `pytest -rA`/`-ra`); those are shown, never scored: the reward is the score.
fn explain(mut o: Outcome, out: &sandbox::ExecOutcome) -> Outcome {
    let text = tail(&out.stderr, OUTPUT_KEPT);
    let reward = (!o.status.is_infrastructure()
        && matches!(o.status, Status::Pass | Status::Fail))
    .then_some(o.score);
    let mut data = serde_json::json!({
        "reward": reward,
        "ended": out.ended(),
        "output_bytes": out.stderr.len(),
    });
    if let Some(written) = o.data.take() {
        data["reward_json"] = written;
    }
    o.data = Some(data);
    if o.status != Status::Pass {
        o.tests.extend(short_summary(&text));
        if !o.tests.is_empty() {
            let total = o.tests.len();
            let failed = o.tests.iter().filter(|t| t.status != Status::Pass).count();
            o.details.insert(
                0,
                format!("the verifier's tests: {failed} of {total} failed (from its output)"),
            );
        }
    }
    let shown = if text.trim().is_empty() {
        format!("the verifier printed nothing ({})", out.ended())
    } else if out.stderr.len() > OUTPUT_KEPT {
        format!(
            "verifier output ({}; last {OUTPUT_KEPT} of {} bytes):\n{text}",
            out.ended(),
            out.stderr.len()
        )
    } else {
        format!("verifier output ({}):\n{text}", out.ended())
    };
    o.detail(shown)
}

/// The tests a pytest short test summary names: `FAILED path::test - message`, `ERROR …`,
/// `PASSED path::test`; at most 200.
pub(crate) fn short_summary(output: &str) -> Vec<TestResult> {
    let mut tests: Vec<TestResult> = Vec::new();
    for line in output.lines() {
        let (status, rest) = if let Some(r) = line.strip_prefix("FAILED ") {
            (Status::Fail, r)
        } else if let Some(r) = line.strip_prefix("ERROR ") {
            (Status::Error, r)
        } else if let Some(r) = line.strip_prefix("PASSED ") {
            (Status::Pass, r)
        } else {
            continue;
        };
        let (name, message) = match rest.split_once(" - ") {
            Some((n, m)) => (n.trim(), Some(m.trim())),
            None => (rest.trim(), None),
        };
        if name.is_empty() || name.contains(char::is_whitespace) || tests.len() >= 200 {
            continue;
        }
        let t = TestResult::new(name, status);
        tests.push(match message {
            Some(m) if !m.is_empty() => t.with_message(m),
            _ if status != Status::Pass => t.with_message("failed (the verifier's output gives no message)"),
            _ => t,
        });
    }
    tests
}

/// A reward file as the wrapper read it (`rewards`, see [`crate::checks::author_script::AuthorRun::rewards`]),
/// else read here with the verifier's rights (a link planted there reads nothing held out).
async fn reward_file(
    env: &Env<'_, '_>,
    rewards: Option<&serde_json::Value>,
    name: &str,
    cap: usize,
) -> Result<FileRead, crate::env::Fault> {
    let Some(read) = rewards.map(|r| &r[name]) else {
        return env
            .read_file_as(AUTHOR_USER, &format!("/logs/verifier/{name}"), cap)
            .await;
    };
    Ok(match read["text"].as_str() {
        // The wrapper read at most `cap` bytes (its text: the bytes, invalid UTF-8 replaced).
        Some(text) => FileRead::Bytes(text.as_bytes().to_vec()),
        None if read["too_large"] == true => FileRead::TooLarge,
        None => FileRead::Missing,
    })
}

/// The reward the verifier wrote (`reward.txt` first, then `reward.json`; an empty file is one
/// it did not write).
async fn verdict(
    env: &Env<'_, '_>,
    out: &sandbox::ExecOutcome,
    rewards: Option<&serde_json::Value>,
) -> Outcome {
    let txt = tryf!(reward_file(env, rewards, "reward.txt", 4096).await);
    if let FileRead::Bytes(b) = txt
        && !String::from_utf8_lossy(&b).trim().is_empty()
    {
        let s = String::from_utf8_lossy(&b);
        return match s.trim().parse::<f64>() {
            Ok(r) if r.is_finite() => reward(r, out),
            _ => Outcome::new(Status::Error, 0.0).detail(format!(
                "reward.txt is not a number: `{}`",
                cap_text(s.trim(), 200)
            )),
        };
    }
    let js = tryf!(reward_file(env, rewards, "reward.json", 65536).await);
    if let FileRead::Bytes(b) = js
        && !String::from_utf8_lossy(&b).trim().is_empty()
    {
        let v: Option<serde_json::Value> = serde_json::from_slice(&b).ok();
        let r = v.as_ref().and_then(|v| {
            v.as_f64()
                .or_else(|| v.get("reward").and_then(serde_json::Value::as_f64))
                .or_else(|| {
                    let nums: Vec<f64> = v
                        .as_object()?
                        .values()
                        .filter_map(serde_json::Value::as_f64)
                        .collect();
                    (!nums.is_empty()).then(|| nums.iter().sum::<f64>() / nums.len() as f64)
                })
        });
        return match r {
            Some(r) if r.is_finite() => {
                let mut o = reward(r, out);
                o.data = v;
                o
            }
            _ => Outcome::new(Status::Error, 0.0).detail("reward.json holds no numeric reward"),
        };
    }
    if out.timed_out {
        return Outcome::new(Status::Timeout, 0.0)
            .detail(format!("the verifier wrote no reward: {}", out.ended()));
    }
    // The script is proven by the task's oracle run; a run that ends without a reward was
    // stopped by what it checked (the agent's outputs or code).
    Outcome::new(Status::Error, 0.0).detail(format!(
        "the verifier wrote no reward.txt or reward.json ({})",
        out.ended()
    ))
}

fn reward(r: f64, out: &sandbox::ExecOutcome) -> Outcome {
    let written = r;
    let r = r.clamp(0.0, 1.0);
    let pass = r >= 1.0;
    let mut said = format!("the verifier's reward: {written}");
    if written != r {
        said.push_str(&format!(" (taken as {r})"));
    }
    if !pass {
        said.push_str(" (1 passes)");
    }
    if !out.success() {
        said.push_str(&format!("; the script then ended with {}", out.ended()));
    }
    Outcome::new(if pass { Status::Pass } else { Status::Fail }, r).detail(said)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_short_summary_names_the_failing_tests() {
        let out = "collected 3 items\n\
            tests/test_x.py .F.\n\
            =========================== short test summary info ============================\n\
            PASSED tests/test_x.py::test_a\n\
            FAILED tests/test_x.py::test_b - AssertionError: assert 3 == 4\n\
            ERROR tests/test_x.py::test_c\n\
            FAILED to start something else entirely\n";
        let t = short_summary(out);
        let got: Vec<(&str, Status, Option<&str>)> = t
            .iter()
            .map(|t| (t.name.as_str(), t.status, t.message.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("tests/test_x.py::test_a", Status::Pass, None),
                (
                    "tests/test_x.py::test_b",
                    Status::Fail,
                    Some("AssertionError: assert 3 == 4")
                ),
                (
                    "tests/test_x.py::test_c",
                    Status::Error,
                    Some("failed (the verifier's output gives no message)")
                ),
            ]
        );
    }
}
