//! Leaderboards: per agent over every kind (best mean first), then per agent and task kind,
//! from the summary rows; and the chart of the overall means with their intervals.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

/// One row of a leaderboard: an agent on a task kind (or on every kind: `task_kind` = `*`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LeaderRow {
    pub agent: String,
    pub task_kind: String,
    pub trials: usize,
    pub finished: usize,
    pub scored: usize,
    pub mean: Option<f64>,
    /// Half-width of the 95% confidence interval of the mean.
    pub ci95: Option<f64>,
    /// Repeats per task.
    pub k: u32,
    pub pass_at_k: Option<f64>,
    /// Fraction of scored trials that passed every dimension.
    pub callback_rate: Option<f64>,
    pub dimensions: BTreeMap<String, f64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// Cause → count of trials that did not complete cleanly.
    pub failures: BTreeMap<String, usize>,
}

impl From<super::summary::SummaryRow> for LeaderRow {
    fn from(r: super::summary::SummaryRow) -> Self {
        Self {
            agent: r.agent,
            task_kind: r.task_kind,
            trials: r.trials,
            finished: r.finished,
            scored: r.scored,
            mean: r.mean,
            ci95: r.ci95,
            k: r.k,
            pass_at_k: r.pass_at_k,
            callback_rate: r.callback_rate,
            dimensions: r.dimensions,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cost_usd: r.cost_usd,
            failures: r.failures,
        }
    }
}

/// A run's leaderboard: per agent over every kind, then per agent and task kind.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Leaderboard {
    pub run: String,
    /// One row per agent, over all its trials (`task_kind` = `*`), best mean first.
    pub overall: Vec<LeaderRow>,
    /// One row per agent and task kind (each a real kind: an agent over all its kinds is its
    /// `overall` row).
    pub by_kind: Vec<LeaderRow>,
}

impl Leaderboard {
    /// The overall means with their 95% intervals, as a chart.
    pub fn ci_plot(&self) -> Option<super::plots::BandChart> {
        let rows: Vec<_> = self
            .overall
            .iter()
            .map(|row| (row.agent.clone(), row.mean, row.ci95))
            .collect();
        super::plots::means_with_ci(&rows)
    }

    /// Every dimension some row has a mean for (the table's columns).
    pub fn dimensions(&self) -> std::collections::BTreeSet<String> {
        self.by_kind
            .iter()
            .flat_map(|row| row.dimensions.keys().cloned())
            .collect()
    }
}

/// A leaderboard over any set of trials (one run, or several runs together).
pub fn leaderboard_of(label: &str, rows: &[crate::store::TrialRow]) -> Leaderboard {
    // an agent's row over all its kinds is its `overall` row: not shown twice
    let by_kind = super::summary::summarize(rows)
        .into_iter()
        .filter(|r| r.task_kind != super::summary::ALL_KINDS)
        .map(LeaderRow::from)
        .collect();
    let mut overall: Vec<LeaderRow> = super::summary::summarize_agents(rows, "*")
        .into_iter()
        .map(LeaderRow::from)
        .collect();
    overall.sort_by(|a, b| {
        b.mean
            .unwrap_or(f64::NEG_INFINITY)
            .total_cmp(&a.mean.unwrap_or(f64::NEG_INFINITY))
            .then_with(|| a.agent.cmp(&b.agent))
    });
    Leaderboard {
        run: label.to_owned(),
        overall,
        by_kind,
    }
}
