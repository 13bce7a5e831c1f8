//! A trial as the viewer and the reports show it: its listed row and its detail (a stored
//! trial row converted; no grade report or artifact bytes).

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::TrialRow;

/// A trial as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TrialSummary {
    pub id: String,
    pub task_id: String,
    pub task_kind: String,
    pub agent: String,
    pub repeat_index: u32,
    /// `pending`, `running` or `done`.
    pub state: String,
    pub outcome: Option<String>,
    pub score: Option<f64>,
    pub passed: Option<bool>,
    pub grade_status: Option<String>,
    /// Why the trial counts as a failure, if it does (see `summary::failure_cause`).
    pub failure: Option<String>,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// Phase name → milliseconds.
    pub phases: BTreeMap<String, u64>,
    /// Sum of the phases, milliseconds.
    pub duration_ms: u64,
}

/// A stored artifact.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Artifact {
    /// `file:<path>`, `answer`, `trajectory`, `usage`, `agent_log`, `grader_log`.
    pub name: String,
    pub sha256: String,
    pub size: u64,
    pub media_type: Option<String>,
}

/// Everything about one trial but its grade report and artifact bytes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TrialDetail {
    #[serde(flatten)]
    pub summary: TrialSummary,
    pub task_hash: String,
    pub dimensions: BTreeMap<String, f64>,
    pub flags: Vec<String>,
    pub attempts: u32,
    pub error: Option<String>,
    pub isolated: Option<bool>,
    pub exit_code: Option<i64>,
    pub requests: i64,
    pub artifacts: Vec<Artifact>,
}

/// A domain trial row as the viewer lists it (its grade report and artifacts are not copied).
pub fn summary_of_ref(t: &TrialRow) -> TrialSummary {
    let r = t.result.as_ref();
    let failure = r.and_then(super::summary::failure_cause);
    let usage = r.map(|r| &r.usage);
    TrialSummary {
        id: t.planned.id.clone(),
        task_id: t.planned.task_id.clone(),
        task_kind: t.planned.task_kind.clone(),
        agent: t.planned.agent.clone(),
        repeat_index: t.planned.repeat_index,
        outcome: r.map(|r| r.outcome.as_str().to_owned()),
        score: r.and_then(|r| r.score),
        passed: r.map(|r| r.passed),
        grade_status: r.and_then(|r| r.grade_status.clone()),
        failure,
        input_tokens: usage.map_or(0, |u| i64::try_from(u.input_tokens).unwrap_or(i64::MAX)),
        output_tokens: usage.map_or(0, |u| i64::try_from(u.output_tokens).unwrap_or(i64::MAX)),
        cost_usd: usage.map_or(0.0, |u| u.cost_usd),
        duration_ms: r.map_or(0, |r| r.phases.values().sum()),
        phases: r.map(|r| r.phases.clone()).unwrap_or_default(),
        state: t.state.clone(),
        started_at: t.started_at.clone(),
        finished_at: t.finished_at.clone(),
    }
}

/// A domain trial row (with its result's artifacts) as the trial page shows it.
pub fn detail_of_row(t: &TrialRow) -> TrialDetail {
    let r = t.result.as_ref();
    TrialDetail {
        task_hash: t.planned.task_hash.clone(),
        dimensions: r.map(|r| r.dimensions.clone()).unwrap_or_default(),
        flags: r.map(|r| r.flags.clone()).unwrap_or_default(),
        attempts: r.map_or(0, |r| r.attempts),
        error: r.and_then(|r| r.error.clone()),
        isolated: r.map(|r| r.isolated),
        exit_code: r.and_then(|r| r.exit_code),
        requests: r.map_or(0, |r| i64::try_from(r.usage.requests).unwrap_or(i64::MAX)),
        artifacts: r
            .map(|r| {
                r.artifacts
                    .iter()
                    .map(|a| Artifact {
                        name: a.name.clone(),
                        sha256: a.sha256.clone(),
                        size: a.size,
                        media_type: a.media_type.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        summary: summary_of_ref(t),
    }
}
