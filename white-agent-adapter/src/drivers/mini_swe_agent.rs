//! mini-swe-agent (PyPI `mini-swe-agent`, staged as a package tree): `python3 -m
//! minisweagent.run.mini -m openai/M -t PROMPT -y --exit-immediately -l 0 -o TRAJ` against the
//! proxy's Chat Completions endpoint (litellm's `OPENAI_API_BASE`); the model works through one
//! `bash` tool and ends with `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`.
//!
//! Its stdout is for people; what it did is in the trajectory file it rewrites after every step
//! (`trajectory_format` `mini-swe-agent-1.1`): `messages` (`system`, `user`, `assistant` with
//! `tool_calls` and `extra.response.usage`, `tool` observations, a final `exit` with
//! `extra.exit_status`: `Submitted` on success) and `info.model_stats`. It is parsed once the
//! CLI exited.

use serde_json::Value;

use super::{Driver, DriverError, DriverOptions, Plan, Staging, python_module, required_model};
use crate::parse::{
    Dialect, EventState, Events, RunState, Terminal, content_text, str_field, summarize_call,
    u64_field,
};
use crate::trajectory::{StepMetrics, StepSource, ToolCall};

#[derive(Debug)]
pub struct MiniSweAgent;

impl Driver for MiniSweAgent {
    fn staging(&self) -> Staging {
        Staging::Packages
    }

    fn required_key(&self, _model: &str) -> Option<&'static str> {
        Some("OPENAI_API_KEY")
    }

    fn plan(
        &self,
        options: &DriverOptions,
        instruction: &str,
        check_binaries: bool,
    ) -> Result<Plan, DriverError> {
        let model = required_model(options)?;
        let mut plan = python_module(
            options,
            check_binaries,
            "minisweagent.run.mini",
            Dialect(&MiniTrajectory),
        )?;
        let state = options.state_dir.join("mini-swe-agent");
        let transcript = state.join("trajectory.json");
        for (key, value) in [
            ("MSWEA_CONFIGURED", "true"),
            ("MSWEA_SILENT_STARTUP", "1"),
            ("MSWEA_COST_TRACKING", "ignore_errors"),
        ] {
            plan.env.insert(key.to_owned(), value.to_owned());
        }
        plan.env.insert(
            "MSWEA_GLOBAL_CONFIG_DIR".to_owned(),
            state.join("config").to_string_lossy().into_owned(),
        );
        let args = &mut plan.args;
        args.push("-m".to_owned());
        args.push(format!("openai/{model}"));
        args.extend(["-y", "--exit-immediately", "-l", "0", "-o"].map(str::to_owned));
        args.push(transcript.to_string_lossy().into_owned());
        args.extend(["-t".to_owned(), instruction.to_owned()]);
        plan.dirs = vec![options.state_dir.join("home"), state];
        plan.transcript = Some(transcript);
        Ok(Plan::Run(plan))
    }
}

/// mini-swe-agent's trajectory file.
struct MiniTrajectory;

impl Events for MiniTrajectory {
    fn name(&self) -> &'static str {
        "mini-swe-agent"
    }
    fn start(&self) -> Box<dyn EventState> {
        Box::new(MiniState)
    }
}

#[derive(Debug)]
struct MiniState;

impl EventState for MiniState {
    /// Stdout is for people: kept nowhere, never an error.
    fn line(&mut self, _state: &mut RunState, _line: &str) -> bool {
        true
    }

    fn transcript(&mut self, state: &mut RunState, text: &str) {
        let Ok(doc) = serde_json::from_str::<Value>(text) else {
            state.last_error = Some("its trajectory file is not JSON".to_owned());
            return;
        };
        let messages = doc
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for message in messages {
            apply(state, message);
        }
        if let Some(version) = doc.pointer("/info/mini_version").and_then(Value::as_str) {
            state.trajectory.agent_version = Some(version.to_owned());
        }
        if let Some(cost) = doc
            .pointer("/info/model_stats/instance_cost")
            .and_then(Value::as_f64)
            .filter(|c| *c > 0.0)
        {
            state.usage.cost_usd = Some(cost);
        }
    }
}

fn apply(state: &mut RunState, message: &Value) {
    let content = message.get("content").map(content_text).unwrap_or_default();
    match str_field(message, "role") {
        Some("assistant") => {
            let index = state.trajectory.push(StepSource::Agent, content.clone());
            let usage = message
                .pointer("/extra/response/usage")
                .cloned()
                .unwrap_or(Value::Null);
            let prompt = u64_field(&usage, "prompt_tokens");
            let completion = u64_field(&usage, "completion_tokens");
            let cached = usage
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            state.usage.input_tokens += prompt.saturating_sub(cached);
            state.usage.cache_read_tokens += cached;
            state.usage.output_tokens += completion;
            state.usage.turns += 1;
            if !content.trim().is_empty() {
                state.answer = Some(content);
            }
            let calls: Vec<ToolCall> = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|call| {
                    let name = call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("bash");
                    let arguments = call
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .and_then(|a| serde_json::from_str(a).ok())
                        .unwrap_or(Value::Null);
                    state.last_tool = Some(summarize_call(name, &arguments));
                    ToolCall::new(str_field(call, "id").unwrap_or(""), name, arguments)
                })
                .collect();
            if let Some(step) = state.trajectory.step_mut(index) {
                step.tool_calls = calls;
                step.metrics = Some(StepMetrics {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    cached_tokens: (cached > 0).then_some(cached),
                    cost_usd: message.pointer("/extra/cost").and_then(Value::as_f64),
                });
            }
        }
        Some("tool") => {
            let failed = message
                .pointer("/extra/returncode")
                .and_then(Value::as_i64)
                .is_some_and(|code| code > 0);
            if failed {
                state.tool_errors += 1;
            }
            state
                .trajectory
                .attach_result(str_field(message, "tool_call_id"), &content, failed);
        }
        Some("exit") => {
            let status = message
                .pointer("/extra/exit_status")
                .and_then(Value::as_str)
                .unwrap_or("");
            state.terminal = Some(if status == "Submitted" {
                Terminal::Success
            } else {
                Terminal::Failed {
                    reason: format!(
                        "mini-swe-agent ended with {status:?}{}",
                        if content.is_empty() {
                            String::new()
                        } else {
                            format!(": {content}")
                        }
                    ),
                }
            });
        }
        Some("user") if state.trajectory.session_id.is_none() => {
            // The task prompt: the instruction is already the first step.
            state.trajectory.session_id = Some("mini-swe-agent".to_owned());
        }
        Some("user") => {
            state.trajectory.push(StepSource::User, content);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::StreamParser;
    use serde_json::json;

    fn trajectory(exit_status: &str) -> String {
        json!({
            "info": {"model_stats": {"instance_cost": 0.0, "api_calls": 2}, "mini_version": "2.4.6", "exit_status": exit_status},
            "messages": [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "Please solve this issue: write done"},
                {"role": "assistant", "content": "writing", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"printf done > out.txt\"}"}}],
                 "extra": {"response": {"usage": {"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 40}}}, "cost": 0.0}},
                {"role": "tool", "tool_call_id": "c1", "content": "{\"returncode\": 0, \"output\": \"\"}", "extra": {"returncode": 0}},
                {"role": "assistant", "content": "finish", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\"}"}}],
                 "extra": {"response": {"usage": {"prompt_tokens": 130, "completion_tokens": 9}}}},
                {"role": "tool", "tool_call_id": "c2", "content": "not executed", "extra": {"returncode": -1}},
                {"role": "exit", "content": "", "extra": {"exit_status": exit_status, "submission": ""}}
            ],
            "trajectory_format": "mini-swe-agent-1.1"
        })
        .to_string()
    }

    fn parse(transcript: &str) -> RunState {
        let mut parser = StreamParser::new(Dialect(&MiniTrajectory));
        parser.record_instruction("write done");
        parser.feed_line("mini-swe-agent (step 1, $0.00):");
        parser.feed_transcript(transcript);
        parser.finish()
    }

    #[test]
    fn a_submitted_run_gives_steps_usage_and_success() {
        let state = parse(&trajectory("Submitted"));
        assert_eq!(state.terminal, Some(Terminal::Success));
        assert_eq!(state.usage.input_tokens, 60 + 130);
        assert_eq!(state.usage.cache_read_tokens, 40);
        assert_eq!(state.usage.output_tokens, 29);
        assert_eq!(state.usage.turns, 2);
        assert_eq!(state.ignored_lines, 0);
        assert_eq!(
            state.last_tool.as_deref(),
            Some("bash: echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")
        );
        let trajectory = state.trajectory("mini-swe-agent");
        assert_eq!(trajectory.agent.version, "2.4.6");
        // the instruction, two agent steps (their tool results attached)
        assert_eq!(trajectory.steps.len(), 3, "{:#?}", trajectory.steps);
        let first = &trajectory.steps[1];
        assert_eq!(first.tool_calls[0].arguments["command"], "printf done > out.txt");
        assert_eq!(
            first.observation.as_ref().expect("result").results[0]
                .source_call_id
                .as_deref(),
            Some("c1")
        );
    }

    #[test]
    fn any_other_exit_status_fails_the_run_and_a_broken_file_says_so() {
        let state = parse(&trajectory("LimitsExceeded"));
        assert!(
            matches!(state.terminal, Some(Terminal::Failed { ref reason }) if reason.contains("LimitsExceeded"))
        );
        let state = parse("{not json");
        assert_eq!(state.terminal, None);
        assert!(state.last_error.expect("error").contains("not JSON"));
    }
}
