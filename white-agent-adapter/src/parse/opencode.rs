//! OpenCode `run --format json`: one JSON object per line with `type`, `timestamp`, `sessionID`
//! and a `part`: `step_start`, `text` (`part.text`), `reasoning` (`part.text`), `tool_use`
//! (`part.tool`, `part.callID`, `part.state` with `status` `pending`/`running`/`completed`/`error`,
//! `input`, `output`), `step_finish` (`part.reason` `stop`/`tool-calls`/`length`/...,
//! `part.tokens` `{input, output, reasoning, cache: {read, write}}`, `part.cost`) and `error`
//! (`error.name`, `error.data.message`; terminal). OpenCode exits 0 even after an error event,
//! so the event decides.

use serde_json::{Map, Value};

use super::{
    EventState, Events, RunState, Terminal, content_text, json_line, str_field, summarize_call,
    u64_field,
};
use crate::trajectory::{StepMetrics, StepSource, ToolCall};

/// The OpenCode JSON-lines format.
pub(super) struct OpenCode;

impl Events for OpenCode {
    fn name(&self) -> &'static str {
        "open-code"
    }
    fn start(&self) -> Box<dyn EventState> {
        Box::new(OpenCodeState)
    }
}

/// OpenCode keeps no state between events.
#[derive(Debug)]
struct OpenCodeState;

impl EventState for OpenCodeState {
    fn line(&mut self, state: &mut RunState, line: &str) -> bool {
        json_line(line, |event| apply(state, event))
    }
}

/// Applies one event; returns false when the event has an unknown shape.
fn apply(state: &mut RunState, event: &Map<String, Value>) -> bool {
    let event = Value::Object(event.clone());
    if state.trajectory.session_id.is_none() {
        state.trajectory.session_id = str_field(&event, "sessionID").map(str::to_owned);
    }
    let part = event.get("part").cloned().unwrap_or(Value::Null);
    match str_field(&event, "type") {
        Some("step_start") => true,
        Some("text") => {
            let text = str_field(&part, "text").unwrap_or("").to_owned();
            if !text.trim().is_empty() {
                state.answer = Some(text.clone());
            }
            state.trajectory.push(StepSource::Agent, text);
            true
        }
        Some("reasoning") => {
            let index = state.trajectory.push(StepSource::Agent, "");
            if let Some(step) = state.trajectory.step_mut(index) {
                step.reasoning_content = str_field(&part, "text").map(str::to_owned);
            }
            true
        }
        Some("tool_use") => {
            tool_use(state, &part);
            true
        }
        Some("step_finish") => {
            step_finish(state, &part);
            true
        }
        Some("error") => {
            let error = event.get("error").cloned().unwrap_or(Value::Null);
            let name = str_field(&error, "name").unwrap_or("Error");
            let message = error
                .pointer("/data/message")
                .and_then(Value::as_str)
                .or_else(|| str_field(&error, "message"))
                .or_else(|| str_field(&event, "message"))
                .unwrap_or("no message");
            state.terminal = Some(Terminal::Failed {
                reason: format!("OpenCode {name}: {message}"),
            });
            true
        }
        _ => false,
    }
}

fn tool_use(state: &mut RunState, part: &Value) {
    let name = str_field(part, "tool").unwrap_or("tool").to_owned();
    let call_id = str_field(part, "callID").unwrap_or("").to_owned();
    let tool_state = part.get("state").cloned().unwrap_or(Value::Null);
    let input = tool_state.get("input").cloned().unwrap_or(Value::Null);
    state.last_tool = Some(summarize_call(&name, &input));
    let status = str_field(&tool_state, "status").unwrap_or("");
    if status != "completed" && status != "error" {
        return;
    }
    let index = state.trajectory.push(StepSource::Agent, "");
    if let Some(step) = state.trajectory.step_mut(index) {
        step.tool_calls
            .push(ToolCall::new(call_id.clone(), name, input));
    }
    let is_error = status == "error";
    if is_error {
        state.tool_errors += 1;
    }
    let output = if is_error {
        content_text(tool_state.get("error").unwrap_or(&Value::Null))
    } else {
        content_text(tool_state.get("output").unwrap_or(&Value::Null))
    };
    state
        .trajectory
        .attach_result(Some(&call_id), &output, is_error);
}

fn step_finish(state: &mut RunState, part: &Value) {
    let tokens = part.get("tokens").cloned().unwrap_or(Value::Null);
    let input = u64_field(&tokens, "input");
    let output = u64_field(&tokens, "output") + u64_field(&tokens, "reasoning");
    let cache_read = tokens
        .pointer("/cache/read")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let cache_write = tokens
        .pointer("/cache/write")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    state.usage.input_tokens += input;
    state.usage.output_tokens += output;
    state.usage.cache_read_tokens += cache_read;
    state.usage.cache_write_tokens += cache_write;
    state.usage.turns += 1;
    let cost = part.get("cost").and_then(Value::as_f64);
    if let Some(cost) = cost {
        state.usage.cost_usd = Some(state.usage.cost_usd.unwrap_or(0.0) + cost);
    }
    if let Some(step) = state.trajectory.last_agent_step() {
        step.metrics = Some(StepMetrics {
            prompt_tokens: input,
            completion_tokens: output,
            cached_tokens: Some(cache_read),
            cost_usd: cost,
        });
    }
    if matches!(state.terminal, Some(Terminal::Failed { .. })) {
        return;
    }
    state.terminal = match str_field(part, "reason") {
        Some("stop" | "end_turn") => Some(Terminal::Success),
        Some("length") => Some(Terminal::Failed {
            reason: "OpenCode stopped: the model hit its output token limit".to_owned(),
        }),
        // `tool-calls` and anything else: the loop goes on; not terminal yet.
        _ => None,
    };
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{fixture, run};
    use super::super::{Dialect, Terminal};

    #[test]
    fn success_stream_gives_answer_usage_cost_and_trajectory() {
        let state = run(Dialect::OPENCODE, &fixture("opencode/success.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(
            state.answer.as_deref(),
            Some("result.txt now holds the mean, 4.2.")
        );
        assert_eq!(state.usage.input_tokens, 3000);
        assert_eq!(state.usage.output_tokens, 150);
        assert_eq!(state.usage.cache_read_tokens, 1000);
        assert_eq!(state.usage.cost_usd, Some(0.0075));
        assert_eq!(state.usage.turns, 2);
        let trajectory = state.trajectory("opencode");
        assert_eq!(trajectory.session_id, "ses_494719016ffe85dkDMj0FPRbHK");
        insta::assert_json_snapshot!(
            "opencode_success_trajectory",
            super::super::test_support::without_timestamps(trajectory)
        );
    }

    #[test]
    fn tool_error_does_not_fail_the_run() {
        let state = run(Dialect::OPENCODE, &fixture("opencode/tool_error.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.tool_errors, 1);
        assert_eq!(state.last_tool.as_deref(), Some("bash: python solve.py"));
    }

    #[test]
    fn max_steps_ends_with_the_forced_summary_and_length_stop_fails() {
        let state = run(Dialect::OPENCODE, &fixture("opencode/max_turns.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.usage.turns, 3);
        assert_eq!(
            state.answer.as_deref(),
            Some("Maximum steps reached. Done so far: read the data. Remaining: write result.txt.")
        );
        let cut = run(
            Dialect::OPENCODE,
            r#"{"type":"step_finish","timestamp":1,"sessionID":"ses_x","part":{"type":"step-finish","reason":"length","tokens":{"input":1,"output":2,"reasoning":0,"cache":{"read":0,"write":0}},"cost":0}}"#,
        );
        assert!(matches!(cut.terminal, Some(Terminal::Failed { .. })));
    }

    #[test]
    fn error_event_is_terminal_even_if_a_step_finishes_later() {
        let state = run(Dialect::OPENCODE, &fixture("opencode/crash.jsonl"));
        assert_eq!(
            state.terminal,
            Some(Terminal::Failed {
                reason: "OpenCode APIError: Connection refused: 127.0.0.1:8080".into()
            })
        );
    }

    #[test]
    fn stream_cut_without_finish_has_no_terminal_event() {
        let fixture = fixture("opencode/success.jsonl");
        let cut: String = fixture
            .lines()
            .take(3)
            .map(|line| format!("{line}\n"))
            .collect();
        let state = run(Dialect::OPENCODE, &cut);
        assert_eq!(state.terminal, None);
        assert!(state.last_tool.is_some());
    }

    #[test]
    fn garbage_lines_are_counted_and_skipped() {
        let state = run(Dialect::OPENCODE, &fixture("opencode/garbage.jsonl"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.ignored_lines, 3);
        assert_eq!(state.answer.as_deref(), Some("ok"));
    }
}
