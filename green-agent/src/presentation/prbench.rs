//! PRBench compatibility, in one place: which trials get an `eval_report.json` and what it holds
//! (PRBench's dimension scores and the weighted overall score on a 0–1 scale).

use crate::store::TrialRow;

/// The task kind whose trials get an `eval_report.json`.
pub const KIND: &str = "prbench";

/// The file name of a trial's PRBench report (in its trial folder, and as an A2A artifact).
pub const FILE: &str = "eval_report.json";

/// The PRBench-compatible report of a finished PRBench trial (`None`: another kind, or
/// unfinished).
pub fn eval_report(t: &TrialRow) -> Option<serde_json::Value> {
    if t.planned.task_kind != KIND {
        return None;
    }
    let r = t.result.as_ref()?;
    let dims = &r.dimensions;
    Some(serde_json::json!({
        "task_id": t.planned.task_id,
        "agent": t.planned.agent,
        "trial_id": t.planned.id,
        "scores": {
            "methodology": dims.get("methodology"),
            "code_correctness": dims.get("code_correctness"),
            "data_accuracy": dims.get("data_accuracy"),
            "task_completeness": dims.get("task_completeness"),
        },
        "overall_score": r.score,
        "end_to_end_callback": r.passed,
        "status": r.grade_status,
        "outcome": r.outcome.as_str(),
    }))
}
