//! Claude Code `-p --output-format stream-json --verbose`: one JSON object per line with `type`
//! `system` (subtypes `init`, `api_retry`, ...), `assistant` (a model message: `message.content`
//! blocks `text`, `thinking`, `tool_use`; `message.usage`), `user` (tool results:
//! `tool_result` blocks with `is_error`) and the terminal `result` (`subtype` `success` or
//! `error_*`, `is_error`, `result`, `num_turns`, `usage`, `total_cost_usd`, `errors`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{
    EventState, Events, RunState, Terminal, content_text, json_line, str_field, summarize_call,
    u64_field,
};
use crate::trajectory::{StepMetrics, StepSource, ToolCall};

/// Per-message usage, keyed by message id: Claude Code repeats a message's usage on every
/// content block it streams, so sums are taken over distinct messages.
#[derive(Debug, Clone, Default)]
pub(super) struct ClaudeState {
    per_message: BTreeMap<String, [u64; 4]>,
}

fn usage_of(usage: &Value) -> [u64; 4] {
    [
        u64_field(usage, "input_tokens"),
        u64_field(usage, "output_tokens"),
        u64_field(usage, "cache_read_input_tokens"),
        u64_field(usage, "cache_creation_input_tokens"),
    ]
}

/// The Claude Code stream-json format.
pub(super) struct Claude;

impl Events for Claude {
    fn name(&self) -> &'static str {
        "claude-code"
    }
    fn start(&self) -> Box<dyn EventState> {
        Box::new(ClaudeState::default())
    }
}

impl EventState for ClaudeState {
    fn line(&mut self, state: &mut RunState, line: &str) -> bool {
        json_line(line, |event| apply(self, state, event))
    }
}

/// Applies one event; returns false when the event has an unknown shape.
fn apply(claude: &mut ClaudeState, state: &mut RunState, event: &Map<String, Value>) -> bool {
    let event = Value::Object(event.clone());
    match str_field(&event, "type") {
        Some("system") => {
            match str_field(&event, "subtype") {
                Some("init") => {
                    state.trajectory.session_id =
                        str_field(&event, "session_id").map(str::to_owned);
                    state.trajectory.model_name = str_field(&event, "model").map(str::to_owned);
                    state.trajectory.agent_version =
                        str_field(&event, "claude_code_version").map(str::to_owned);
                }
                Some("api_retry") => {
                    let attempt = u64_field(&event, "attempt");
                    let error = str_field(&event, "error").unwrap_or("unknown");
                    let status = event
                        .get("error_status")
                        .filter(|status| !status.is_null())
                        .map(|status| format!(" (HTTP {status})"))
                        .unwrap_or_default();
                    state.last_error = Some(format!(
                        "model API request failed{status}: {error}; retry attempt {attempt}"
                    ));
                }
                _ => {}
            }
            true
        }
        Some("assistant") => {
            let Some(message) = event.get("message") else {
                return false;
            };
            assistant(claude, state, message);
            true
        }
        Some("user") => {
            let Some(content) = event.pointer("/message/content") else {
                return false;
            };
            if let Value::Array(blocks) = content {
                for block in blocks {
                    if str_field(block, "type") == Some("tool_result") {
                        let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
                        if is_error {
                            state.tool_errors += 1;
                        }
                        let text = content_text(block.get("content").unwrap_or(&Value::Null));
                        state.trajectory.attach_result(
                            str_field(block, "tool_use_id"),
                            &text,
                            is_error,
                        );
                    }
                }
            }
            true
        }
        Some("result") => {
            result(state, &event);
            true
        }
        Some("stream_event" | "rate_limit_event" | "control_request" | "control_response") => true,
        _ => false,
    }
}

fn assistant(claude: &mut ClaudeState, state: &mut RunState, message: &Value) {
    if let Some(usage) = message.get("usage") {
        let id = str_field(message, "id").unwrap_or("").to_owned();
        let new = usage_of(usage);
        let old = claude.per_message.insert(id, new);
        if old.is_none() {
            state.usage.turns += 1;
        }
        let old = old.unwrap_or_default();
        state.usage.input_tokens =
            state.usage.input_tokens + new[0] - old[0].min(state.usage.input_tokens);
        state.usage.output_tokens =
            state.usage.output_tokens + new[1] - old[1].min(state.usage.output_tokens);
        state.usage.cache_read_tokens =
            state.usage.cache_read_tokens + new[2] - old[2].min(state.usage.cache_read_tokens);
        state.usage.cache_write_tokens =
            state.usage.cache_write_tokens + new[3] - old[3].min(state.usage.cache_write_tokens);
    }
    let Some(Value::Array(blocks)) = message.get("content") else {
        return;
    };
    let mut text = Vec::new();
    let mut reasoning = Vec::new();
    let mut calls = Vec::new();
    for block in blocks {
        match str_field(block, "type") {
            Some("text") => text.push(str_field(block, "text").unwrap_or("").to_owned()),
            Some("thinking") => {
                reasoning.push(str_field(block, "thinking").unwrap_or("").to_owned())
            }
            Some("tool_use" | "server_tool_use") => {
                let name = str_field(block, "name").unwrap_or("tool").to_owned();
                let arguments = block.get("input").cloned().unwrap_or(Value::Null);
                state.last_tool = Some(summarize_call(&name, &arguments));
                calls.push(ToolCall::new(
                    str_field(block, "id").unwrap_or("").to_owned(),
                    name,
                    arguments,
                ));
            }
            _ => {}
        }
    }
    let joined = text.join("\n");
    if !joined.trim().is_empty() {
        state.answer = Some(joined.clone());
    }
    let index = state.trajectory.push(StepSource::Agent, joined);
    if let Some(step) = state.trajectory.step_mut(index) {
        if !reasoning.is_empty() {
            step.reasoning_content = Some(reasoning.join("\n"));
        }
        step.tool_calls = calls;
        if let Some(usage) = message.get("usage") {
            let [input, output, cache_read, _] = usage_of(usage);
            step.metrics = Some(StepMetrics {
                prompt_tokens: input,
                completion_tokens: output,
                cached_tokens: Some(cache_read),
                cost_usd: None,
            });
        }
    }
}

fn result(state: &mut RunState, event: &Value) {
    if let Some(usage) = event.get("usage") {
        let [input, output, cache_read, cache_write] = usage_of(usage);
        state.usage.input_tokens = input;
        state.usage.output_tokens = output;
        state.usage.cache_read_tokens = cache_read;
        state.usage.cache_write_tokens = cache_write;
    }
    if let Some(cost) = event.get("total_cost_usd").and_then(Value::as_f64) {
        state.usage.cost_usd = Some(cost);
    }
    if let Some(turns) = event.get("num_turns").and_then(Value::as_u64) {
        state.usage.turns = turns;
    }
    if state.trajectory.session_id.is_none() {
        state.trajectory.session_id = str_field(event, "session_id").map(str::to_owned);
    }
    let subtype = str_field(event, "subtype").unwrap_or("");
    let is_error = event.get("is_error").and_then(Value::as_bool) == Some(true);
    let text = str_field(event, "result").map(str::to_owned);
    if subtype == "success" && !is_error {
        if let Some(text) = text {
            state.answer = Some(text);
        }
        state.terminal = Some(Terminal::Success);
        return;
    }
    let errors: Vec<String> = match event.get("errors") {
        Some(Value::Array(errors)) => errors
            .iter()
            .map(|error| match error {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect(),
        _ => Vec::new(),
    };
    let reason = match subtype {
        "error_max_turns" => format!(
            "Claude Code stopped at its turn limit after {} turns",
            state.usage.turns
        ),
        "error_max_budget_usd" => "Claude Code stopped at its budget limit".to_owned(),
        _ if !errors.is_empty() => format!("Claude Code {subtype}: {}", errors.join("; ")),
        "success" => format!(
            "Claude Code reported an error: {}",
            text.clone().unwrap_or_else(|| "no reason given".to_owned())
        ),
        _ => format!(
            "Claude Code {}: {}",
            if subtype.is_empty() { "error" } else { subtype },
            text.clone().unwrap_or_else(|| "no reason given".to_owned())
        ),
    };
    if let Some(text) = text.filter(|text| !text.trim().is_empty()) {
        state.answer = Some(text);
    }
    state.terminal = Some(Terminal::Failed { reason });
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{fixture, run};
    use super::super::{Dialect, Terminal};
    use crate::trajectory::StepSource;

    #[test]
    fn success_stream_gives_answer_usage_cost_and_trajectory() {
        let state = run(Dialect::CLAUDE_CODE, &fixture("claude/success.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(
            state.answer.as_deref(),
            Some("The mean is 4.2; I wrote it to result.txt.")
        );
        assert_eq!(state.usage.input_tokens, 2100);
        assert_eq!(state.usage.output_tokens, 180);
        assert_eq!(state.usage.cache_read_tokens, 1500);
        assert_eq!(state.usage.cost_usd, Some(0.0123));
        assert_eq!(state.usage.turns, 3);
        assert_eq!(state.ignored_lines, 0);
        let trajectory = state.trajectory("claude-code");
        assert_eq!(trajectory.session_id, "sess-ok-1");
        assert_eq!(
            trajectory.agent.model_name.as_deref(),
            Some("claude-sonnet-4-5")
        );
        assert_eq!(trajectory.steps[0].source, StepSource::User);
        let call_step = trajectory
            .steps
            .iter()
            .find(|step| !step.tool_calls.is_empty())
            .expect("a step with a tool call");
        assert_eq!(call_step.tool_calls[0].function_name, "Bash");
        let observation = call_step
            .observation
            .as_ref()
            .expect("tool result attached");
        assert_eq!(observation.results[0].content, "4.2");
        insta::assert_json_snapshot!(
            "claude_success_trajectory",
            super::super::test_support::without_timestamps(trajectory)
        );
    }

    #[test]
    fn tool_error_text_does_not_fail_the_run() {
        let state = run(Dialect::CLAUDE_CODE, &fixture("claude/tool_error.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.tool_errors, 1);
        assert_eq!(state.last_tool.as_deref(), Some("Bash: python solve.py"));
    }

    #[test]
    fn max_turns_is_a_failure_with_a_reason() {
        let state = run(Dialect::CLAUDE_CODE, &fixture("claude/max_turns.jsonl"));
        let Some(Terminal::Failed { reason }) = state.terminal else {
            panic!("expected failure, got {:?}", state.terminal);
        };
        assert!(reason.contains("turn limit after 2 turns"), "{reason}");
        assert_eq!(state.usage.turns, 2);
    }

    #[test]
    fn crash_mid_stream_has_no_terminal_event_but_keeps_progress() {
        let state = run(Dialect::CLAUDE_CODE, &fixture("claude/crash.jsonl"));
        assert_eq!(state.terminal, None);
        assert_eq!(
            state.last_tool.as_deref(),
            Some("Write: /workspace/out.txt")
        );
        assert_eq!(state.usage.output_tokens, 40);
        assert_eq!(
            state.last_error.as_deref(),
            Some("model API request failed (HTTP 529): overloaded; retry attempt 1")
        );
    }

    #[test]
    fn garbage_lines_are_counted_and_skipped() {
        let state = run(Dialect::CLAUDE_CODE, &fixture("claude/garbage.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.ignored_lines, 4);
        assert_eq!(state.answer.as_deref(), Some("done"));
    }

    #[test]
    fn api_error_result_fails_with_the_message() {
        let state = run(
            Dialect::CLAUDE_CODE,
            r#"{"type":"result","subtype":"success","is_error":true,"duration_ms":10,"duration_api_ms":0,"num_turns":1,"session_id":"s","result":"API Error: 401 invalid token","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#,
        );
        assert_eq!(
            state.terminal,
            Some(Terminal::Failed {
                reason: "Claude Code reported an error: API Error: 401 invalid token".into()
            })
        );
    }
}
