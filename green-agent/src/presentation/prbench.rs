//! PRBench compatibility, in one place: which trials get an `eval_report.json` and what it holds
//! (PRBench's shape: per-dimension score and justification, the weighted overall score).

use crate::store::TrialRow;

/// The task kind whose trials get an `eval_report.json`.
pub const KIND: &str = "prbench";

/// The file name of a trial's PRBench report (in its trial folder, and as an A2A artifact).
pub const FILE: &str = "eval_report.json";

/// A PRBench trial's `eval_report.json` (`None`: another kind, or unfinished), in PRBench's
/// shape (`task_id`, `paper`, `grading` with `scores.<dimension>.{score, justification}`,
/// `overall_score` and `summary`, `time_used_seconds`, `workspace_files`) and ours beside it:
/// `measured` (the deterministic evidence: dimensions of weight 0, each evidence grader, and
/// `reproduction`: the re-run of the agent's entry script, [`reproduction`]), the end-to-end
/// callback, the statuses. The overall score is ours (the weighted sum we computed),
/// never the judge's.
pub fn eval_report(t: &TrialRow) -> Option<serde_json::Value> {
    use serde_json::{Map, Value, json};
    if t.planned.task_kind != KIND {
        return None;
    }
    let r = t.result.as_ref()?;
    let report = r.grade_report.as_ref();
    let graders: Vec<&Value> = report
        .and_then(|g| g["graders"].as_array())
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let dims = report.and_then(|g| g["dimensions"].as_object());
    let justification = |dim: &str| -> String {
        let mine: Vec<&&Value> = graders.iter().filter(|g| g["dimension"] == dim).collect();
        let judged = mine.iter().find_map(|g| {
            let text = g["data"]["justification"].as_str()?;
            let notes: Vec<&str> = g["details"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .filter(|d| !d.starts_with("judge: ") && *d != text)
                        .collect()
                })
                .unwrap_or_default();
            Some(if notes.is_empty() {
                text.to_owned()
            } else {
                format!("{text} ({})", notes.join("; "))
            })
        });
        judged.unwrap_or_else(|| {
            mine.iter()
                .filter_map(|g| {
                    let details: Vec<&str> = g["details"]
                        .as_array()
                        .map(|d| d.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    Some(format!(
                        "{}: {} {}",
                        g["name"].as_str()?,
                        g["status"].as_str().unwrap_or(""),
                        details.join(" ")
                    ))
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
    };
    let mut scores = Map::new();
    let mut measured = Map::new();
    match dims {
        Some(dims) => {
            for (name, d) in dims {
                let entry = json!({
                    "score": d["score"],
                    "weight": d["weight"],
                    "status": d["status"],
                    "justification": justification(name),
                });
                if d["weight"].as_f64().is_some_and(|w| w > 0.0) {
                    scores.insert(name.clone(), entry);
                } else {
                    measured.insert(name.clone(), entry);
                }
            }
        }
        None => {
            for (name, score) in &r.dimensions {
                scores.insert(name.clone(), json!({"score": score, "justification": ""}));
            }
        }
    }
    let evidence: Vec<Value> = graders
        .iter()
        .filter(|g| g["kind"] != "prbench_dimension")
        .map(|g| json!({"name": g["name"], "kind": g["kind"], "dimension": g["dimension"], "status": g["status"], "score": g["score"]}))
        .collect();
    let reproduction = graders
        .iter()
        .find(|g| g["kind"] == "reproduce")
        .map(|g| reproduction(g));
    let paper = graders
        .iter()
        .find_map(|g| g["data"]["paper"].as_str().map(str::to_owned));
    let overall = r.score;
    let summary = {
        let mut s = match overall {
            Some(x) => format!(
                "overall {x:.3}: the weighted sum of {} judged dimension(s)",
                scores.len()
            ),
            None => format!(
                "no overall score: {}",
                r.grade_status.as_deref().unwrap_or(r.outcome.as_str())
            ),
        };
        if let Some(m) = measured
            .get("measured_data_accuracy")
            .and_then(|m| m["score"].as_f64())
        {
            s.push_str(&format!("; measured data accuracy {m:.3}"));
        }
        if let Some(b) = measured.get("banned_libraries")
            && b["status"] == "forbidden_api"
        {
            s.push_str("; a banned library is used (code_correctness capped at 0.2)");
        }
        if let Some(r) = &reproduction
            && let Some(said) = r["said"].as_str()
        {
            s.push_str("; ");
            s.push_str(said);
        }
        s.push_str(if r.passed {
            "; every dimension passes"
        } else {
            "; not every dimension passes"
        });
        s
    };
    let grading = json!({
        "scores": scores,
        "overall_score": overall,
        "summary": summary,
    });
    Some(json!({
        "task_id": t.planned.task_id,
        "paper": paper,
        "grading": grading,
        "time_used_seconds": r.phases.values().sum::<u64>() as f64 / 1000.0,
        "workspace_files": r.artifacts.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
        "agent": t.planned.agent,
        "trial_id": t.planned.id,
        "scores": grading["scores"],
        "overall_score": overall,
        "measured": {"dimensions": measured, "graders": evidence, "reproduction": reproduction},
        "end_to_end_callback": r.passed,
        "status": r.grade_status,
        "outcome": r.outcome.as_str(),
    }))
}

/// The re-run of the agent's entry script (a `reproduce` grader's result) for the report:
/// `status`, `score`, `entry` (the script found, `null`: none delivered), `said` (one sentence),
/// `details` and the per-output `outputs` (`name`, `status`, `message`).
fn reproduction(g: &serde_json::Value) -> serde_json::Value {
    use rubrics::checks::reproduce::NO_ENTRY;
    let details: Vec<&str> = g["details"]
        .as_array()
        .map(|d| d.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let entry = details
        .iter()
        .find_map(|d| d.strip_prefix("entry script: "))
        .and_then(|e| e.split(" (run as").next());
    let status = g["status"].as_str().unwrap_or_default();
    let said = match status {
        "pass" => "the agent's entry script, re-run, regenerates its data".to_owned(),
        "fabricated_data" => "the agent's entry script, re-run, does not regenerate the data it submitted (fabricated_data: code correctness and data accuracy set to 0)".to_owned(),
        _ if details.iter().any(|d| d.starts_with(NO_ENTRY)) => {
            format!("{NO_ENTRY} (the agent's code was not re-run)")
        }
        other => format!("the re-run of the agent's entry script did not regenerate its data ({other})"),
    };
    let outputs: Vec<serde_json::Value> = g["tests"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| serde_json::json!({"name": t["name"], "status": t["status"], "message": t["message"]}))
                .collect()
        })
        .unwrap_or_default();
    serde_json::json!({
        "status": g["status"],
        "score": g["score"],
        "entry": entry,
        "said": said,
        "details": details,
        "outputs": outputs,
    })
}

#[cfg(test)]
mod tests {
    use super::reproduction;
    use serde_json::json;

    #[test]
    fn the_rerun_is_reported_in_one_sentence() {
        let pass = reproduction(&json!({
            "kind": "reproduce", "status": "pass", "score": 1.0,
            "details": ["entry script: reproduce.py (run as `python3 reproduce.py`)"],
            "tests": [{"name": "data/a.csv", "status": "pass", "message": "regenerated, matches the submitted file"}],
        }));
        assert_eq!(pass["entry"], "reproduce.py");
        assert_eq!(
            pass["said"],
            "the agent's entry script, re-run, regenerates its data"
        );
        assert_eq!(pass["outputs"][0]["name"], "data/a.csv");
        let none = reproduction(&json!({
            "kind": "reproduce", "status": "fail", "score": 0.0,
            "details": ["no entry script delivered (looked for reproduce.sh, in /workspace): the agent's code was not re-run"],
        }));
        assert_eq!(none["entry"], serde_json::Value::Null);
        assert_eq!(
            none["said"],
            "no entry script delivered (the agent's code was not re-run)"
        );
        let fab = reproduction(
            &json!({"kind": "reproduce", "status": "fabricated_data", "score": 0.0, "details": []}),
        );
        assert!(
            fab["said"]
                .as_str()
                .is_some_and(|s| s.contains("fabricated_data"))
        );
        let broke = reproduction(
            &json!({"kind": "reproduce", "status": "fail", "score": 0.0, "details": ["entry script: run.sh (run as `bash run.sh`)", "`bash run.sh` did not regenerate the outputs: exit 1"]}),
        );
        assert_eq!(broke["entry"], "run.sh");
        assert_eq!(
            broke["said"],
            "the re-run of the agent's entry script did not regenerate its data (fail)"
        );
    }
}
