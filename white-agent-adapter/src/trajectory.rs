//! The trajectory of one run in an ATIF-compatible JSON shape (Agent Trajectory Interchange
//! Format, v1.4): a root with `schema_version`, `session_id`, `agent`, `steps` and
//! `final_metrics`; each step has a `source` (`user`, `agent`, `system`), a `message`, optional
//! `reasoning_content`, `tool_calls`, an `observation` with results tied to the calls, and
//! per-step `metrics`. Written by the stream parsers, read by trajectory viewers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// ATIF schema version this shape follows.
pub const SCHEMA_VERSION: &str = "ATIF-v1.4";

/// Root object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    pub schema_version: String,
    pub session_id: String,
    pub agent: AgentInfo,
    pub steps: Vec<Step>,
    pub final_metrics: FinalMetrics,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// Which agent produced the trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentInfo {
    pub name: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
}

/// Who a step comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    User,
    Agent,
    System,
}

/// One interaction step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// 1-based, in order.
    pub step_id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    pub source: StepSource,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<StepMetrics>,
}

/// A tool invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub function_name: String,
    /// Always a JSON object (ATIF requires one): other values are wrapped as `{"input": ...}`.
    pub arguments: Value,
}

impl ToolCall {
    pub fn new(
        tool_call_id: impl Into<String>,
        function_name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        let arguments = match arguments {
            Value::Object(_) => arguments,
            Value::Null => Value::Object(serde_json::Map::new()),
            other => serde_json::json!({ "input": other }),
        };
        Self {
            tool_call_id: tool_call_id.into(),
            function_name: function_name.into(),
            arguments,
        }
    }
}

/// What the environment answered to a step's tool calls.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Observation {
    pub results: Vec<ObservationResult>,
}

/// One tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservationResult {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_call_id: Option<String>,
    pub content: String,
}

/// Prefix of a tool result's content when the tool reported an error (ATIF has no error flag).
pub const TOOL_ERROR_PREFIX: &str = "[tool error] ";

/// Per-step model usage.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StepMetrics {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// Totals over the run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FinalMetrics {
    pub total_prompt_tokens: u64,
    pub total_completion_tokens: u64,
    pub total_cached_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    pub total_steps: u32,
}

/// Longest text kept per message or tool result (characters); longer ones are cut and marked.
pub const MAX_TEXT_CHARS: usize = 16 * 1024;

/// Cuts `text` to [`MAX_TEXT_CHARS`], marking the cut.
pub fn clip(text: &str) -> String {
    if text.chars().count() <= MAX_TEXT_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(MAX_TEXT_CHARS).collect();
    format!("{kept}\n[... truncated by white-agent-adapter]")
}

/// Collects steps as a stream is parsed.
#[derive(Debug, Clone, Default)]
pub struct TrajectoryBuilder {
    steps: Vec<Step>,
    pub session_id: Option<String>,
    pub model_name: Option<String>,
    /// The CLI's own version when it reports one (else the adapter's version is used).
    pub agent_version: Option<String>,
}

impl TrajectoryBuilder {
    /// Appends a step and returns its index.
    pub fn push(&mut self, source: StepSource, message: impl Into<String>) -> usize {
        let step_id = u32::try_from(self.steps.len() + 1).unwrap_or(u32::MAX);
        self.steps.push(Step {
            step_id,
            timestamp: Some(
                chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
            source,
            message: clip(&message.into()),
            reasoning_content: None,
            tool_calls: Vec::new(),
            observation: None,
            metrics: None,
        });
        self.steps.len() - 1
    }

    /// The step at `index`.
    pub fn step_mut(&mut self, index: usize) -> Option<&mut Step> {
        self.steps.get_mut(index)
    }

    /// The last step, if it is an agent step.
    pub fn last_agent_step(&mut self) -> Option<&mut Step> {
        self.steps
            .last_mut()
            .filter(|step| step.source == StepSource::Agent)
    }

    /// Attaches a tool result to the step that made call `call_id` (the latest one), or to a new
    /// system step (without a call id) when no step made it. Errors are marked in the content
    /// with [`TOOL_ERROR_PREFIX`].
    pub fn attach_result(&mut self, call_id: Option<&str>, content: &str, is_error: bool) {
        let owner = call_id.and_then(|id| {
            self.steps
                .iter()
                .rposition(|step| step.tool_calls.iter().any(|call| call.tool_call_id == id))
        });
        let content = if is_error {
            clip(&format!("{TOOL_ERROR_PREFIX}{content}"))
        } else {
            clip(content)
        };
        let result = ObservationResult {
            source_call_id: owner.and(call_id).map(str::to_owned),
            content,
        };
        let index = match owner {
            Some(index) => index,
            None => self.push(StepSource::System, "tool result"),
        };
        if let Some(step) = self.steps.get_mut(index) {
            step.observation
                .get_or_insert_with(Observation::default)
                .results
                .push(result);
        }
    }

    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Finishes the trajectory with the run's totals.
    pub fn build(&self, agent_name: &str, totals: Totals) -> Trajectory {
        Trajectory {
            schema_version: SCHEMA_VERSION.to_owned(),
            session_id: self
                .session_id
                .clone()
                .unwrap_or_else(|| "unknown".to_owned()),
            agent: AgentInfo {
                name: agent_name.to_owned(),
                version: self
                    .agent_version
                    .clone()
                    .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned()),
                model_name: self.model_name.clone(),
            },
            steps: self.steps.clone(),
            final_metrics: FinalMetrics {
                total_prompt_tokens: totals.prompt_tokens,
                total_completion_tokens: totals.completion_tokens,
                total_cached_tokens: totals.cached_tokens,
                total_cost_usd: totals.cost_usd,
                total_steps: u32::try_from(self.steps.len()).unwrap_or(u32::MAX),
            },
            extra: None,
        }
    }
}

/// A run's totals, as the trajectory's final metrics state them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: u64,
    pub cost_usd: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_attach_to_the_step_that_made_the_call() {
        let mut builder = TrajectoryBuilder::default();
        let first = builder.push(StepSource::Agent, "");
        builder.steps[first].tool_calls.push(ToolCall::new(
            "a",
            "Bash",
            serde_json::json!({"command": "ls"}),
        ));
        builder.push(StepSource::Agent, "thinking aloud");
        builder.attach_result(Some("a"), "file.txt", false);
        builder.attach_result(Some("zzz"), "orphan", true);
        let steps = &builder.steps;
        assert_eq!(steps.len(), 3);
        assert_eq!(
            steps[0]
                .observation
                .as_ref()
                .map(|o| o.results[0].content.as_str()),
            Some("file.txt")
        );
        assert_eq!(steps[2].source, StepSource::System);
        let orphan = &steps[2].observation.as_ref().expect("observation").results[0];
        assert_eq!(orphan.content, "[tool error] orphan");
        assert_eq!(orphan.source_call_id, None);
    }

    #[test]
    fn long_text_is_clipped_and_marked() {
        let long = "x".repeat(MAX_TEXT_CHARS + 10);
        let clipped = clip(&long);
        assert!(clipped.ends_with("[... truncated by white-agent-adapter]"));
        assert!(clipped.len() < long.len() + 60);
    }
}
