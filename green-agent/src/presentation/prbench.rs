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
/// `measured` (the deterministic evidence: dimensions of weight 0 and each evidence grader), the
/// end-to-end callback, the statuses. The overall score is ours (the weighted sum we computed),
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
                        .filter(|d| !d.starts_with("judge: "))
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
        "measured": {"dimensions": measured, "graders": evidence},
        "end_to_end_callback": r.passed,
        "status": r.grade_status,
        "outcome": r.outcome.as_str(),
    }))
}
