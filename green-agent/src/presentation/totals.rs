//! A run's totals (trials by state, scored, passed, mean score, tokens, cost, tasks): computed
//! here from its trial rows, the one place the viewer's run list, the run page and the HTML
//! report take them from.

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::TrialRow;

/// A run as listed.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunInfo {
    pub id: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    /// `running`, `finished`, `interrupted`, ...
    pub status: String,
    pub trials: i64,
    pub done: i64,
    pub running: i64,
    pub scored: i64,
    pub passed: i64,
    pub mean_score: Option<f64>,
    pub cost_usd: f64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub agents: Vec<String>,
    pub tasks: i64,
    /// Sequence number of the run's last event (where a live feed starts).
    pub last_event: i64,
}

impl RunInfo {
    /// A stored run's counts computed from its trials (what [`Results::run`] asks the
    /// database for).
    pub fn of_rows(run: &crate::store::RunRow, rows: &[TrialRow]) -> Self {
        let results: Vec<&crate::model::TrialResult> =
            rows.iter().filter_map(|t| t.result.as_ref()).collect();
        let scores: Vec<f64> = results.iter().filter_map(|r| r.score).collect();
        let count = |state: &str| rows.iter().filter(|t| t.state == state).count() as i64;
        let tokens = |f: fn(&crate::model::Usage) -> u64| {
            results
                .iter()
                .map(|r| i64::try_from(f(&r.usage)).unwrap_or(i64::MAX))
                .fold(0i64, i64::saturating_add)
        };
        Self {
            id: run.id.clone(),
            created_at: run.created_at.clone(),
            finished_at: run.finished_at.clone(),
            status: run.status.clone(),
            trials: rows.len() as i64,
            done: count("done"),
            running: count("running"),
            scored: scores.len() as i64,
            passed: results.iter().filter(|r| r.passed).count() as i64,
            mean_score: (!scores.is_empty())
                .then(|| scores.iter().sum::<f64>() / scores.len() as f64),
            cost_usd: results.iter().map(|r| r.usage.cost_usd).sum::<f64>() + 0.0,
            input_tokens: tokens(|u| u.input_tokens),
            output_tokens: tokens(|u| u.output_tokens),
            agents: run.plan["agents"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            tasks: rows
                .iter()
                .map(|t| t.planned.task_id.as_str())
                .collect::<std::collections::BTreeSet<_>>()
                .len() as i64,
            last_event: 0,
        }
    }
}
