//! Codex `exec --json`: one JSON object per line with `type` `thread.started` (`thread_id`),
//! `turn.started`, `item.started` / `item.updated` / `item.completed` (an `item` with `type`
//! `agent_message`, `reasoning`, `command_execution`, `file_change`, `mcp_tool_call`,
//! `web_search`, `todo_list` or `error` (non-fatal, e.g. a warning)), `turn.completed` (with
//! `usage`: `input_tokens`, `cached_input_tokens`, `output_tokens`), `turn.failed` (`error.message`,
//! terminal) and `error` (`message`; Codex also uses it for "Reconnecting..." retries, so it is
//! only the reason when no terminal event follows). Codex emits no cost.

use serde_json::{Map, Value, json};

use super::{
    EventState, Events, RunState, Terminal, json_line, str_field, summarize_call, u64_field,
};
use crate::trajectory::{StepMetrics, StepSource, ToolCall};

/// The Codex JSON-lines format.
pub(super) struct Codex;

impl Events for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }
    fn start(&self) -> Box<dyn EventState> {
        Box::new(CodexState)
    }
}

/// Codex keeps no state between events.
#[derive(Debug)]
struct CodexState;

impl EventState for CodexState {
    fn line(&mut self, state: &mut RunState, line: &str) -> bool {
        json_line(line, |event| apply(state, event))
    }
}

/// Applies one event; returns false when the event has an unknown shape.
fn apply(state: &mut RunState, event: &Map<String, Value>) -> bool {
    let event = Value::Object(event.clone());
    match str_field(&event, "type") {
        Some("thread.started") => {
            state.trajectory.session_id = str_field(&event, "thread_id").map(str::to_owned);
            true
        }
        Some("turn.started") => true,
        Some("item.started" | "item.updated") => {
            let Some(item) = event.get("item") else {
                return false;
            };
            if let Some((name, arguments)) = tool_of(item) {
                state.last_tool = Some(summarize_call(&name, &arguments));
            }
            true
        }
        Some("item.completed") => {
            let Some(item) = event.get("item") else {
                return false;
            };
            completed(state, item);
            true
        }
        Some("turn.completed") => {
            let usage = event.get("usage").cloned().unwrap_or(Value::Null);
            let input = u64_field(&usage, "input_tokens");
            let cached = u64_field(&usage, "cached_input_tokens");
            let output = u64_field(&usage, "output_tokens");
            state.usage.input_tokens += input;
            state.usage.cache_read_tokens += cached;
            state.usage.output_tokens += output;
            state.usage.turns += 1;
            if let Some(step) = state.trajectory.last_agent_step() {
                step.metrics = Some(StepMetrics {
                    prompt_tokens: input,
                    completion_tokens: output,
                    cached_tokens: Some(cached),
                    cost_usd: None,
                });
            }
            state.terminal = Some(Terminal::Success);
            true
        }
        Some("turn.failed") => {
            let message = event
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            state.terminal = Some(Terminal::Failed {
                reason: format!("Codex turn failed: {message}"),
            });
            true
        }
        Some("error") => {
            let message = str_field(&event, "message").unwrap_or("unknown error");
            state.last_error = Some(format!("Codex error: {message}"));
            true
        }
        _ => false,
    }
}

/// The tool call an item stands for, if it is one.
fn tool_of(item: &Value) -> Option<(String, Value)> {
    match str_field(item, "type")? {
        "command_execution" => Some((
            "shell".to_owned(),
            json!({"command": str_field(item, "command").unwrap_or("")}),
        )),
        "file_change" => Some((
            "apply_patch".to_owned(),
            json!({"changes": item.get("changes").cloned().unwrap_or(Value::Null),
                   "path": item.pointer("/changes/0/path").cloned().unwrap_or(Value::Null)}),
        )),
        "mcp_tool_call" => Some((
            format!(
                "{}.{}",
                str_field(item, "server").unwrap_or("mcp"),
                str_field(item, "tool").unwrap_or("tool")
            ),
            item.get("arguments").cloned().unwrap_or(Value::Null),
        )),
        "web_search" => Some((
            "web_search".to_owned(),
            json!({"query": str_field(item, "query").unwrap_or("")}),
        )),
        _ => None,
    }
}

fn completed(state: &mut RunState, item: &Value) {
    let id = str_field(item, "id").unwrap_or("").to_owned();
    match str_field(item, "type") {
        Some("agent_message") => {
            let text = str_field(item, "text").unwrap_or("").to_owned();
            if !text.trim().is_empty() {
                state.answer = Some(text.clone());
            }
            state.trajectory.push(StepSource::Agent, text);
        }
        Some("reasoning") => {
            let index = state.trajectory.push(StepSource::Agent, "");
            if let Some(step) = state.trajectory.step_mut(index) {
                step.reasoning_content = str_field(item, "text").map(str::to_owned);
            }
        }
        Some("error") => {
            // A non-fatal notice from Codex (e.g. missing model metadata): recorded, never fatal.
            let message = str_field(item, "message").unwrap_or("").to_owned();
            state.trajectory.push(StepSource::System, message);
        }
        Some("todo_list") => {}
        _ => {
            let Some((name, arguments)) = tool_of(item) else {
                return;
            };
            state.last_tool = Some(summarize_call(&name, &arguments));
            let index = state.trajectory.push(StepSource::Agent, "");
            if let Some(step) = state.trajectory.step_mut(index) {
                step.tool_calls
                    .push(ToolCall::new(id.clone(), name, arguments));
            }
            let failed = str_field(item, "status") == Some("failed")
                || item
                    .get("exit_code")
                    .and_then(Value::as_i64)
                    .is_some_and(|code| code != 0);
            if failed {
                state.tool_errors += 1;
            }
            let output = match str_field(item, "type") {
                Some("command_execution") => {
                    let text = str_field(item, "aggregated_output").unwrap_or("");
                    match item.get("exit_code").and_then(Value::as_i64) {
                        Some(code) => format!("{text}\n[exit code {code}]"),
                        None => text.to_owned(),
                    }
                }
                Some("mcp_tool_call") => item
                    .get("result")
                    .or_else(|| item.get("error"))
                    .map(Value::to_string)
                    .unwrap_or_default(),
                _ => str_field(item, "status").unwrap_or("").to_owned(),
            };
            state.trajectory.attach_result(Some(&id), &output, failed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{fixture, run};
    use super::super::{Dialect, Terminal};

    #[test]
    fn success_stream_gives_answer_usage_and_trajectory() {
        let state = run(Dialect::CODEX, &fixture("codex/success.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(
            state.answer.as_deref(),
            Some("Wrote result.txt with the mean 4.2.")
        );
        assert_eq!(state.usage.input_tokens, 5400);
        assert_eq!(state.usage.cache_read_tokens, 3000);
        assert_eq!(state.usage.output_tokens, 320);
        assert_eq!(state.usage.cost_usd, None);
        assert_eq!(state.usage.turns, 1);
        assert_eq!(state.ignored_lines, 0);
        let trajectory = state.trajectory("codex");
        assert_eq!(
            trajectory.session_id,
            "0199a213-81c0-7800-8aa1-bbab2a035a53"
        );
        insta::assert_json_snapshot!(
            "codex_success_trajectory",
            super::super::test_support::without_timestamps(trajectory)
        );
    }

    #[test]
    fn failing_command_and_echoed_error_text_do_not_fail_the_run() {
        let state = run(Dialect::CODEX, &fixture("codex/tool_error.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.tool_errors, 1);
        assert_eq!(
            state.last_tool.as_deref(),
            Some("shell: bash -lc 'python solve.py'")
        );
    }

    #[test]
    fn turn_failed_at_the_limit_is_a_failure_with_the_reason() {
        let state = run(Dialect::CODEX, &fixture("codex/max_turns.jsonl"));
        assert_eq!(
            state.terminal,
            Some(Terminal::Failed {
                reason: "Codex turn failed: Your input exceeds the context window of this model. Please adjust your input and try again.".into()
            })
        );
    }

    #[test]
    fn crash_mid_stream_keeps_the_last_retry_error_as_a_hint() {
        let state = run(Dialect::CODEX, &fixture("codex/crash.jsonl"));
        assert_eq!(state.terminal, None);
        assert_eq!(
            state.last_error.as_deref(),
            Some(
                "Codex error: Reconnecting... waiting for network (Connection failed: error sending request)"
            )
        );
        assert_eq!(
            state.last_tool.as_deref(),
            Some("shell: bash -lc 'sleep 1000'")
        );
    }

    #[test]
    fn garbage_lines_are_counted_and_skipped() {
        let state = run(Dialect::CODEX, &fixture("codex/garbage.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.ignored_lines, 3);
        assert_eq!(state.answer.as_deref(), Some("ok"));
    }
}
