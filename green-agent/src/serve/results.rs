//! What an assessment returns as A2A artifacts: one `trial` artifact per finished trial while it
//! runs, and at the end the `result` data part (`score`, `max_score`, `pass_rate` over the
//! participants' trials, `per_agent` by participant role, `calibration` apart, `per_task`, from
//! [`crate::presentation::summary`]: the numbers `green-agent report` shows), each PRBench
//! trial's `eval_report.json`, and the report files (inline, or `url` parts served by the
//! service under the assessment's secret token when large).
//!
//! Calibration agents ([`CALIBRATION_AGENTS`]: the oracle, which reads the reference solution)
//! validate the tasks and the grading; their trials are reported under `calibration` and never
//! enter a participant's numbers or the headline.

use std::collections::BTreeMap;
use std::path::Path;

use a2a_protocol::{Artifact, Metadata, Part};
use serde_json::{Value, json};

use crate::model::{PlannedTrial, TrialResult};
use crate::presentation::prbench;
use crate::presentation::summary::{ALL_KINDS, SummaryRow, failure_cause, summarize};
use crate::report::{Format, ReportData};
use crate::store::TrialRow;

/// Agent specs that calibrate an assessment rather than take part in it.
pub const CALIBRATION_AGENTS: &[&str] = &["oracle"];

/// Whether `agent` (a spec) is a calibration agent.
pub fn is_calibration(agent: &str) -> bool {
    CALIBRATION_AGENTS.contains(&agent)
}

fn kind(name: &str) -> Option<Metadata> {
    let mut m = Metadata::new();
    m.insert("kind".into(), json!(name));
    Some(m)
}

/// The artifact of one finished trial.
pub fn trial_artifact(
    planned: &PlannedTrial,
    result: &TrialResult,
    roles: &BTreeMap<String, String>,
) -> Artifact {
    let data = json!({
        "trial_id": planned.id,
        "task_id": planned.task_id,
        "task_kind": planned.task_kind,
        "role": roles.get(&planned.agent),
        "agent": planned.agent,
        "repeat_index": planned.repeat_index,
        "outcome": result.outcome.as_str(),
        "score": result.score,
        "passed": result.passed,
        "grade_status": result.grade_status,
        "failure": failure_cause(result),
        "dimensions": result.dimensions,
        "usage": result.usage,
        "error": result.error,
    });
    let mut a = Artifact::data(format!("trial:{}", planned.id), data);
    a.metadata = kind("trial");
    a
}

/// The trial artifacts of every finished trial of a stored run (after a restart).
pub fn trial_artifacts(trials: &[TrialRow], roles: &BTreeMap<String, String>) -> Vec<Artifact> {
    trials
        .iter()
        .filter_map(|t| {
            t.result
                .as_ref()
                .map(|r| trial_artifact(&t.planned, r, roles))
        })
        .collect()
}

/// A group's overall row: its all-kinds row when it has several kinds, else its one row.
fn overall<'a>(rows: &[&'a SummaryRow]) -> Option<&'a SummaryRow> {
    rows.iter()
        .find(|r| r.task_kind == ALL_KINDS)
        .or_else(|| rows.first())
        .copied()
}

/// `score` (sum of the trials' scores, one without a score counting 0) out of `max_score` (one
/// point per planned trial) and `pass_rate` (share of planned trials that passed) over `trials`.
fn headline<'a>(trials: impl Iterator<Item = &'a TrialRow>) -> (f64, usize, f64) {
    let (mut score, mut planned, mut passed) = (0.0, 0, 0);
    for t in trials {
        planned += 1;
        score += t.result.as_ref().and_then(|r| r.score).unwrap_or(0.0);
        passed += usize::from(
            t.result
                .as_ref()
                .is_some_and(|r| r.score.is_some() && r.passed),
        );
    }
    let rate = if planned == 0 {
        0.0
    } else {
        passed as f64 / planned as f64
    };
    (score, planned, rate)
}

/// The result data part. The headline (`score` out of `max_score`, `pass_rate`) is over the
/// participants' trials only; `per_agent` holds each participant role's own headline and its
/// summary rows (those of `green-agent report`), `calibration` the same for calibration agents,
/// which never count in a participant's numbers; `per_task` has a row per task and agent.
pub fn result_data(data: &ReportData, roles: &BTreeMap<String, String>) -> Value {
    let trials = &data.trials;
    let participants = || trials.iter().filter(|t| !is_calibration(&t.planned.agent));
    let (score, planned, pass_rate) = headline(participants());
    let finished = trials.iter().filter(|t| t.state == "done").count();
    let role_of = |agent: &str| {
        roles
            .get(agent)
            .cloned()
            .unwrap_or_else(|| agent.to_owned())
    };
    let mut per_agent = serde_json::Map::new();
    let mut calibration = serde_json::Map::new();
    let mut by_agent: BTreeMap<&str, Vec<&SummaryRow>> = BTreeMap::new();
    for row in &data.summary {
        by_agent.entry(row.agent.as_str()).or_default().push(row);
    }
    for (agent, rows) in &by_agent {
        let all = overall(rows);
        let (score, max_score, pass_rate) =
            headline(trials.iter().filter(|t| t.planned.agent == *agent));
        let entry = json!({
            "agent": agent,
            "score": score,
            "max_score": max_score as f64,
            "pass_rate": pass_rate,
            "trials": all.map(|r| r.trials),
            "mean": all.and_then(|r| r.mean),
            "ci95": all.and_then(|r| r.ci95),
            "strict_mean": all.and_then(|r| r.strict_mean),
            "pass_at_k": all.and_then(|r| r.pass_at_k),
            "k": all.map(|r| r.k),
            "callback_rate": all.and_then(|r| r.callback_rate),
            "cost_usd": all.map(|r| r.cost_usd),
            "failures": all.map(|r| &r.failures),
            "by_kind": rows.iter().filter(|r| r.task_kind != ALL_KINDS).collect::<Vec<_>>(),
        });
        if is_calibration(agent) {
            calibration.insert(role_of(agent), entry);
        } else {
            per_agent.insert(role_of(agent), entry);
        }
    }
    let mut by_task: BTreeMap<&str, Vec<TrialRow>> = BTreeMap::new();
    for t in trials {
        by_task
            .entry(t.planned.task_id.as_str())
            .or_default()
            .push(t.clone());
    }
    let per_task: Vec<Value> = by_task
        .iter()
        .flat_map(|(task, rows)| {
            summarize(rows).into_iter().map(move |row| {
                json!({
                    "task_id": task,
                    "task_kind": row.task_kind,
                    "role": role_of(&row.agent),
                    "agent": row.agent,
                    "calibration": is_calibration(&row.agent),
                    "trials": row.trials,
                    "mean": row.mean,
                    "strict_mean": row.strict_mean,
                    "pass_at_k": row.pass_at_k,
                    "callback_rate": row.callback_rate,
                    "failures": row.failures,
                })
            })
        })
        .collect();
    json!({
        "run_id": data.run.id,
        "status": data.run.status,
        "score": score,
        "max_score": planned as f64,
        "pass_rate": pass_rate,
        "trials": trials.len(),
        "participant_trials": planned,
        "finished": finished,
        "per_task": per_task,
        "per_agent": per_agent,
        "calibration": calibration,
    })
}

/// The assessment's final status line: per participant role its score out of its trials and
/// pass rate, then the calibration agents apart.
pub fn headline_text(result: &Value) -> String {
    let role_line = |role: &str, r: &Value| {
        format!(
            "{role} {:.2} of {}, pass rate {:.2}",
            r["score"].as_f64().unwrap_or(0.0),
            r["max_score"].as_f64().unwrap_or(0.0),
            r["pass_rate"].as_f64().unwrap_or(0.0)
        )
    };
    let roles = |key: &str| -> Vec<String> {
        result[key]
            .as_object()
            .map(|m| m.iter().map(|(role, r)| role_line(role, r)).collect())
            .unwrap_or_default()
    };
    let mut text = format!(
        "run {}: {} trial(s)",
        result["run_id"].as_str().unwrap_or(""),
        result["trials"]
    );
    let participants = roles("per_agent");
    if !participants.is_empty() {
        text.push_str(&format!("; score {}", participants.join("; ")));
    }
    let calibration = roles("calibration");
    if !calibration.is_empty() {
        text.push_str(&format!(
            " (calibration, not scored: {})",
            calibration.join("; ")
        ));
    }
    text
}

/// Every artifact of a finished assessment: the result, each PRBench trial's eval report, and
/// the report files (inline up to `inline_max` bytes, else a `url` part
/// `{base_url}/files/{token}/{name}`).
pub fn final_artifacts(
    data: &ReportData,
    roles: &BTreeMap<String, String>,
    run_dir: &Path,
    base_url: &str,
    token: &str,
    inline_max: u64,
) -> Vec<Artifact> {
    let mut out = Vec::new();
    let mut result = Artifact::data("result", result_data(data, roles));
    result.metadata = kind("result");
    out.push(result);
    for t in &data.trials {
        if let Some(v) = prbench::eval_report(t) {
            let mut a = Artifact::new(
                Some(format!("eval_report:{}", t.planned.id)),
                vec![
                    Part::raw(
                        serde_json::to_vec_pretty(&v).unwrap_or_default(),
                        Some(prbench::FILE.into()),
                        Some("application/json".into()),
                    ),
                    Part::data(v),
                ],
            );
            a.metadata = kind("eval_report");
            out.push(a);
        }
    }
    for format in Format::all() {
        let (name, media) = (format.file_name(), format.media_type());
        let path = run_dir.join(&name);
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        let part = if meta.len() <= inline_max {
            match std::fs::read(&path) {
                Ok(bytes) => Part::raw(bytes, Some(name.clone()), Some(media.into())),
                Err(e) => {
                    tracing::warn!(file = %path.display(), error = %e, "report file unreadable");
                    continue;
                }
            }
        } else {
            let mut m = Metadata::new();
            m.insert("size".into(), json!(meta.len()));
            Part::url(
                format!("{}/files/{token}/{name}", base_url.trim_end_matches('/')),
                Some(name.clone()),
                Some(media.into()),
            )
            .with_metadata(m)
        };
        let mut a = Artifact::new(Some(name), vec![part]);
        a.metadata = kind("report");
        out.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Outcome, RunRow, Usage};

    fn trial(agent: &str, task: &str, kind: &str, score: Option<f64>) -> TrialRow {
        TrialRow {
            planned: PlannedTrial {
                id: format!("{agent}-{task}"),
                task_id: task.into(),
                task_kind: kind.into(),
                task_hash: format!("h-{task}"),
                agent: agent.into(),
                repeat_index: 0,
            },
            state: if score.is_some() { "done" } else { "pending" }.into(),
            result: score.map(|s| TrialResult {
                outcome: Outcome::Completed,
                exit_code: Some(0),
                score: Some(s),
                passed: s >= 1.0,
                grade_status: Some(if s >= 1.0 { "pass" } else { "fail" }.into()),
                dimensions: BTreeMap::from([("code_correctness".to_owned(), s)]),
                flags: vec![],
                phases: BTreeMap::new(),
                attempts: 1,
                error: None,
                isolated: true,
                grade_report: None,
                usage: Usage::default(),
                artifacts: vec![],
            }),
            started_at: None,
            finished_at: None,
        }
    }

    fn data() -> ReportData {
        ReportData::new(
            RunRow {
                id: "run-1".into(),
                created_at: "now".into(),
                finished_at: None,
                plan: Value::Null,
                status: "finished".into(),
            },
            vec![
                trial("oracle", "p1", "prbench", Some(1.0)),
                trial("a2a:http://x/", "p1", "prbench", Some(0.5)),
                trial("oracle", "g1", "generic", Some(1.0)),
                trial("a2a:http://x/", "g1", "generic", None),
            ],
        )
    }

    fn roles() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("oracle".to_owned(), "oracle".to_owned()),
            ("a2a:http://x/".to_owned(), "agent".to_owned()),
        ])
    }

    #[test]
    fn the_headline_counts_every_planned_trial_of_the_participants_only() {
        let r = result_data(&data(), &roles());
        // the participant: 0.5 on p1, nothing on g1; the oracle's two 1.0 are calibration
        assert_eq!(r["score"], 0.5);
        assert_eq!(r["max_score"], 2.0);
        assert_eq!(r["pass_rate"], 0.0);
        assert_eq!(r["trials"], 4);
        assert_eq!(r["participant_trials"], 2);
        assert_eq!(r["finished"], 3);
        assert_eq!(r["per_agent"]["agent"]["mean"], 0.5);
        assert_eq!(r["per_agent"]["agent"]["strict_mean"], 0.25);
        assert_eq!(r["per_agent"]["agent"]["score"], 0.5);
        assert_eq!(r["per_agent"]["agent"]["max_score"], 2.0);
        assert!(r["per_agent"].get("oracle").is_none(), "{r}");
        assert_eq!(r["calibration"]["oracle"]["mean"], 1.0);
        assert_eq!(r["calibration"]["oracle"]["score"], 2.0);
        let per_task = r["per_task"].as_array().expect("per task");
        assert_eq!(per_task.len(), 4, "{per_task:?}");
        assert!(per_task.iter().any(|t| t["task_id"] == "p1"
            && t["role"] == "agent"
            && t["mean"] == 0.5
            && t["calibration"] == false));
        assert!(
            per_task
                .iter()
                .any(|t| t["role"] == "oracle" && t["calibration"] == true)
        );
        let text = headline_text(&r);
        assert_eq!(
            text,
            "run run-1: 4 trial(s); score agent 0.50 of 2, pass rate 0.00 \
             (calibration, not scored: oracle 2.00 of 2, pass rate 1.00)"
        );
    }

    #[test]
    fn prbench_trials_get_eval_reports_and_big_reports_are_urls() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("report.md"), "# small\n").expect("write");
        std::fs::write(dir.path().join("report.html"), "x".repeat(2000)).expect("write");
        let out = final_artifacts(&data(), &roles(), dir.path(), "http://h:1/", "tok", 1000);
        let names: Vec<&str> = out.iter().filter_map(|a| a.name.as_deref()).collect();
        assert_eq!(
            names,
            [
                "result",
                "eval_report:oracle-p1",
                "eval_report:a2a:http://x/-p1",
                "report.md",
                "report.html"
            ]
        );
        let eval = &out[2].parts[1];
        assert_eq!(eval.as_data().expect("data")["overall_score"], 0.5);
        assert_eq!(out[3].parts[0].as_raw(), Some(&b"# small\n"[..]));
        assert_eq!(
            out[4].parts[0].as_url(),
            Some("http://h:1/files/tok/report.html")
        );
    }
}
