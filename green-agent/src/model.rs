//! The domain of a trial, independent of how it is run or stored: what is planned
//! ([`PlannedTrial`]), how it ended ([`Outcome`]), what it cost ([`Usage`]), what it produced
//! ([`ArtifactRef`]) and everything recorded at its end ([`TrialResult`]). The store and the
//! reports depend on this module; it depends on nothing of the green agent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A trial as planned (before it runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedTrial {
    pub id: String,
    pub task_id: String,
    pub task_kind: String,
    pub task_hash: String,
    pub agent: String,
    pub repeat_index: u32,
}

/// How a trial ended (an outcome, never an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The agent finished its task.
    Completed,
    /// The agent reported failure (e.g. its command exited non-zero).
    Failed,
    /// The agent's process or container died.
    Crashed,
    /// Killed at the wall-clock timeout.
    Timeout,
    /// Killed at the inactivity timeout.
    Inactive,
    /// Stopped by a model budget (the trial's tokens or cost, or the run's cost cap); graded
    /// on what it produced.
    BudgetExceeded,
    /// The platform could not run the trial (after bounded retries); not counted against the agent.
    InfraError,
    /// The agent cannot be served by this platform's A2A client (no compatible interface, no
    /// card, a fixed refusal such as "only SendStreamingMessage", refused credentials): not
    /// retried, counted against the agent.
    AgentIncompatible,
    /// The `oracle` on a task without a reference solution (no `solution/`, e.g. SciCode's test
    /// set): nothing ran and nothing is graded. Neither the task's failure nor an agent's.
    NoReference,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Crashed => "crashed",
            Outcome::Timeout => "timeout",
            Outcome::Inactive => "inactive",
            Outcome::BudgetExceeded => "budget_exceeded",
            Outcome::InfraError => "infra_error",
            Outcome::AgentIncompatible => "agent_incompatible",
            Outcome::NoReference => "no_reference",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "completed" => Outcome::Completed,
            "failed" => Outcome::Failed,
            "crashed" => Outcome::Crashed,
            "timeout" => Outcome::Timeout,
            "inactive" => Outcome::Inactive,
            "budget_exceeded" => Outcome::BudgetExceeded,
            "infra_error" => Outcome::InfraError,
            "agent_incompatible" => Outcome::AgentIncompatible,
            "no_reference" => Outcome::NoReference,
            _ => return None,
        })
    }
}

/// Token usage of one trial (from the model proxy or the agent's usage artifact).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, not counting cache reads and writes.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Model requests.
    pub requests: u64,
    pub cost_usd: f64,
}

impl From<&white_agent_adapter::contract::UsageReport> for Usage {
    fn from(r: &white_agent_adapter::contract::UsageReport) -> Self {
        Self {
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cache_read_tokens: r.cache_read_tokens,
            cache_write_tokens: r.cache_write_tokens,
            requests: r.requests,
            cost_usd: r.cost_usd.unwrap_or(0.0),
        }
    }
}

/// A stored artifact: a name and the blob holding its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    pub name: String,
    pub sha256: String,
    pub size: u64,
    pub media_type: Option<String>,
}

/// Everything recorded when a trial ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    pub outcome: Outcome,
    pub exit_code: Option<i64>,
    /// `None` when there is no score (infrastructure error, judge invalid, ...).
    pub score: Option<f64>,
    pub passed: bool,
    /// The grade's status (`ok`, `judge_invalid`, `env_broken`, ...); `None` when not graded.
    pub grade_status: Option<String>,
    pub dimensions: BTreeMap<String, f64>,
    pub flags: Vec<String>,
    /// Phase name → duration in milliseconds.
    pub phases: BTreeMap<String, u64>,
    pub attempts: u32,
    pub error: Option<String>,
    pub isolated: bool,
    /// The grade report as JSON (whatever `rubrics` produced).
    pub grade_report: Option<serde_json::Value>,
    pub usage: Usage,
    pub artifacts: Vec<ArtifactRef>,
}

impl TrialResult {
    /// Takes the grade as `rubrics` computed it: its score (recomputed from its parts), pass,
    /// status and per-dimension scores, and the whole report.
    pub fn set_grade(&mut self, report: &rubrics::GradeReport) {
        self.score = report.score;
        self.passed = report.passed;
        self.grade_status = Some(report.status.as_str().to_owned());
        self.dimensions = report
            .dimensions
            .iter()
            .filter_map(|(k, d)| d.score.map(|s| (k.clone(), s)))
            .collect();
        self.grade_report = Some(serde_json::to_value(report).unwrap_or(serde_json::Value::Null));
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome;

    #[test]
    fn outcomes_round_trip_through_their_names() {
        for o in [
            Outcome::Completed,
            Outcome::Failed,
            Outcome::Crashed,
            Outcome::Timeout,
            Outcome::Inactive,
            Outcome::BudgetExceeded,
            Outcome::InfraError,
        ] {
            assert_eq!(Outcome::parse(o.as_str()), Some(o));
            assert_eq!(serde_json::to_value(o).expect("json"), o.as_str());
        }
    }
}
