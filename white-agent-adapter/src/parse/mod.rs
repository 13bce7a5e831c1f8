//! Streaming parsers for the agent CLIs' JSON-lines output.
//!
//! One [`StreamParser`] per run: feed it every stdout line as it arrives
//! ([`StreamParser::feed_line`]); read [`StreamParser::state`] at any time for progress (last
//! tool call, tokens so far) and at the end for the answer, usage, trajectory and the terminal
//! verdict. Errors are taken **only** from terminal or error events of the CLI's protocol
//! ([`Terminal`]); a tool result that says "error" (echoed tool output) never fails a run.
//! Lines that are not JSON, or JSON of an unknown shape, are counted and otherwise ignored.

mod claude;
mod codex;
mod opencode;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::trajectory::{StepSource, Totals, Trajectory, TrajectoryBuilder};

/// One agent CLI's output format: how its stdout lines (and, for CLIs that write one, its
/// transcript file) become steps, usage and a verdict. The JSON-stream CLIs' formats live in
/// this module's files; a driver may bring its own (see `drivers::aider`).
pub trait Events: Send + Sync + 'static {
    /// The format's name (launch-plan snapshots, logs).
    fn name(&self) -> &'static str;
    /// Fresh state for one run.
    fn start(&self) -> Box<dyn EventState>;
    /// Whether a run must end with the format's terminal event; when false the exit code
    /// decides.
    fn needs_terminal(&self) -> bool {
        true
    }
}

/// One run's parsing state.
pub trait EventState: Send + std::fmt::Debug {
    /// One stdout line (without its newline); returns whether it was understood.
    fn line(&mut self, state: &mut RunState, line: &str) -> bool;
    /// The transcript file the launch plan names, read after the CLI exited.
    fn transcript(&mut self, _state: &mut RunState, _text: &str) {}
    /// The end of the run.
    fn finish(&mut self, _state: &mut RunState) {}
}

/// Which event format a driver's stdout speaks: a handle on an [`Events`].
#[derive(Clone, Copy)]
pub struct Dialect(pub &'static dyn Events);

impl Dialect {
    /// Claude Code `-p --output-format stream-json --verbose`.
    pub const CLAUDE_CODE: Dialect = Dialect(&claude::Claude);
    /// Codex `exec --json`.
    pub const CODEX: Dialect = Dialect(&codex::Codex);
    /// OpenCode `run --format json`.
    pub const OPENCODE: Dialect = Dialect(&opencode::OpenCode);
    /// Free text (the `command`, `oracle` and `nop` drivers): no events, the exit code decides.
    pub const PLAIN: Dialect = Dialect(&Plain);

    pub fn name(self) -> &'static str {
        self.0.name()
    }

    pub fn needs_terminal(self) -> bool {
        self.0.needs_terminal()
    }
}

impl PartialEq for Dialect {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Dialect {}

impl std::fmt::Debug for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Dialect {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Parses a JSON-lines stdout: each non-empty line must be one JSON object, handed to `apply`
/// (which says whether it knew the event's shape).
pub(crate) fn json_line(line: &str, apply: impl FnOnce(&Map<String, Value>) -> bool) -> bool {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return true;
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(event)) => apply(&event),
        _ => false,
    }
}

/// Free text: the stdout tail is the answer.
struct Plain;

impl Events for Plain {
    fn name(&self) -> &'static str {
        "plain"
    }
    fn start(&self) -> Box<dyn EventState> {
        Box::new(PlainState::default())
    }
    fn needs_terminal(&self) -> bool {
        false
    }
}

/// The last [`PLAIN_ANSWER_BYTES`] of stdout.
#[derive(Debug, Default)]
pub(crate) struct PlainState {
    tail: String,
}

fn cut_front(text: &mut String, keep: usize) {
    if text.len() > keep {
        let mut cut = text.len() - keep;
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text.drain(..cut);
    }
}

impl PlainState {
    /// Keeps `line` in the tail.
    pub(crate) fn push(&mut self, line: &str) {
        self.tail.push_str(line);
        self.tail.push('\n');
        if self.tail.len() > 2 * PLAIN_ANSWER_BYTES {
            cut_front(&mut self.tail, PLAIN_ANSWER_BYTES);
        }
    }

    /// The tail, at most [`PLAIN_ANSWER_BYTES`], trimmed.
    pub(crate) fn take(&mut self) -> String {
        let mut tail = std::mem::take(&mut self.tail);
        cut_front(&mut tail, PLAIN_ANSWER_BYTES);
        tail.trim_end().to_owned()
    }
}

impl EventState for PlainState {
    fn line(&mut self, _state: &mut RunState, line: &str) -> bool {
        self.push(line);
        true
    }
    fn finish(&mut self, state: &mut RunState) {
        let answer = self.take();
        if !answer.is_empty() {
            state.trajectory.push(StepSource::Agent, answer.clone());
            state.answer = Some(answer);
        }
    }
}

/// Token usage of a run (sums over model calls).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: u64,
    /// Only when the CLI emits it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Model turns (assistant messages / steps / turns, as the CLI counts them).
    pub turns: u64,
}

impl Usage {
    /// Input + output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}

/// How the CLI's own protocol said the run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Terminal {
    /// A terminal success event (Claude `result`/`success`, Codex `turn.completed`, OpenCode
    /// `step_finish` without a later error).
    Success,
    /// A terminal error event, with the CLI's reason.
    Failed { reason: String },
}

/// Everything learnt from a stream so far.
#[derive(Debug, Clone, Default)]
pub struct RunState {
    /// Short description of the last tool call (for progress messages).
    pub last_tool: Option<String>,
    /// The final answer text (the CLI's result, or the last assistant message).
    pub answer: Option<String>,
    pub usage: Usage,
    /// `None` while no terminal event was seen.
    pub terminal: Option<Terminal>,
    /// The last non-terminal error the CLI reported (retries, warnings): used as the reason
    /// when the stream ends without a terminal event.
    pub last_error: Option<String>,
    /// Tool calls whose result was an error (informational).
    pub tool_errors: u64,
    /// Lines that were not JSON objects of a known shape.
    pub ignored_lines: u64,
    pub trajectory: TrajectoryBuilder,
}

/// Parses one run's stdout.
#[derive(Debug)]
pub struct StreamParser {
    dialect: Dialect,
    state: RunState,
    events: Box<dyn EventState>,
}

/// Bytes of plain stdout kept as the answer of `Plain` runs.
pub const PLAIN_ANSWER_BYTES: usize = 64 * 1024;

impl StreamParser {
    pub fn new(dialect: Dialect) -> Self {
        Self {
            dialect,
            state: RunState::default(),
            events: dialect.0.start(),
        }
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Records the instruction as the trajectory's first (user) step.
    pub fn record_instruction(&mut self, instruction: &str) {
        self.state.trajectory.push(StepSource::User, instruction);
    }

    /// The model the driver asked for, used in the trajectory when the stream names none.
    pub fn set_model_hint(&mut self, model: Option<&str>) {
        if self.state.trajectory.model_name.is_none() {
            self.state.trajectory.model_name = model.map(str::to_owned);
        }
    }

    /// Feeds one line of stdout (without its newline).
    pub fn feed_line(&mut self, line: &str) {
        if !self.events.line(&mut self.state, line) {
            self.state.ignored_lines += 1;
        }
    }

    /// Feeds the transcript file the CLI wrote (read after it exited).
    pub fn feed_transcript(&mut self, text: &str) {
        self.events.transcript(&mut self.state, text);
    }

    /// What is known so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Ends the stream (for `Plain` runs the answer is the stdout tail).
    pub fn finish(mut self) -> RunState {
        self.events.finish(&mut self.state);
        self.state
    }
}

impl RunState {
    /// The trajectory with the run's totals.
    pub fn trajectory(&self, agent_name: &str) -> Trajectory {
        self.trajectory.build(
            agent_name,
            Totals {
                prompt_tokens: self.usage.input_tokens,
                completion_tokens: self.usage.output_tokens,
                cached_tokens: self.usage.cache_read_tokens,
                cost_usd: self.usage.cost_usd,
            },
        )
    }
}

/// `value[key]` as a string, if it is one.
pub(crate) fn str_field<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// `value[key]` as an unsigned integer (0 when missing or of another type).
pub(crate) fn u64_field(value: &Value, key: &str) -> u64 {
    value.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// A one-line summary of a tool call for progress messages (at most 120 characters).
pub(crate) fn summarize_call(name: &str, arguments: &Value) -> String {
    let detail = [
        "command",
        "cmd",
        "file_path",
        "filePath",
        "path",
        "pattern",
        "query",
        "url",
    ]
    .iter()
    .find_map(|key| match arguments.get(*key) {
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    });
    let line = match detail {
        Some(detail) => format!("{name}: {}", detail.replace('\n', " ")),
        None => name.to_owned(),
    };
    if line.chars().count() > 120 {
        let cut: String = line.chars().take(117).collect();
        format!("{cut}...")
    } else {
        line
    }
}

/// Tool result content as text (strings as is; arrays of text blocks joined; other JSON dumped).
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|block| match str_field(block, "text") {
                Some(text) => text.to_owned(),
                None => block.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    /// Feeds a whole fixture and finishes the stream.
    pub fn run(dialect: Dialect, fixture: &str) -> RunState {
        let mut parser = StreamParser::new(dialect);
        parser.record_instruction("do the task");
        for line in fixture.lines() {
            parser.feed_line(line);
        }
        parser.finish()
    }

    /// The trajectory with timestamps removed (for snapshots).
    pub fn without_timestamps(mut trajectory: Trajectory) -> Trajectory {
        for step in &mut trajectory.steps {
            step.timestamp = None;
        }
        trajectory
    }

    /// Reads `tests/fixtures/<name>`.
    pub fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("fixture {} unreadable: {err}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_runs_keep_the_stdout_tail_as_answer() {
        let mut parser = StreamParser::new(Dialect::PLAIN);
        for i in 0..20_000 {
            parser.feed_line(&format!("line {i}"));
        }
        let state = parser.finish();
        let answer = state.answer.expect("answer");
        assert!(answer.len() <= PLAIN_ANSWER_BYTES);
        assert!(answer.ends_with("line 19999"));
        assert_eq!(state.terminal, None);
    }

    #[test]
    fn call_summaries_are_short_and_name_the_target() {
        let summary = summarize_call("Bash", &serde_json::json!({"command": "ls -la\n/tmp"}));
        assert_eq!(summary, "Bash: ls -la /tmp");
        let long = summarize_call("Read", &serde_json::json!({"file_path": "x".repeat(300)}));
        assert_eq!(long.chars().count(), 120);
    }
}

#[cfg(test)]
mod atif_conformance {
    //! The ATIF v1.4 rules trajectory viewers and validators rely on, checked on every recorded
    //! stream: known fields only, step ids 1..n, agent-only fields only on agent steps, tool-call
    //! arguments are objects, and every observation's `source_call_id` names a call of its step.
    use super::test_support::{fixture, run};
    use super::*;

    const ROOT: &[&str] = &[
        "schema_version",
        "session_id",
        "agent",
        "steps",
        "notes",
        "final_metrics",
        "extra",
    ];
    const STEP: &[&str] = &[
        "step_id",
        "timestamp",
        "source",
        "model_name",
        "reasoning_effort",
        "message",
        "reasoning_content",
        "tool_calls",
        "observation",
        "metrics",
        "is_copied_context",
        "extra",
    ];
    const AGENT_ONLY: &[&str] = &[
        "model_name",
        "reasoning_effort",
        "reasoning_content",
        "tool_calls",
        "metrics",
    ];
    const RESULT: &[&str] = &["source_call_id", "content", "subagent_trajectory_ref"];
    const METRICS: &[&str] = &[
        "prompt_tokens",
        "completion_tokens",
        "cached_tokens",
        "cost_usd",
        "prompt_token_ids",
        "completion_token_ids",
        "logprobs",
        "extra",
    ];

    fn keys_within(value: &Value, allowed: &[&str], what: &str) {
        for key in value.as_object().expect("an object").keys() {
            assert!(
                allowed.contains(&key.as_str()),
                "unknown {what} field {key:?}"
            );
        }
    }

    fn check(trajectory: &Value) {
        keys_within(trajectory, ROOT, "root");
        assert_eq!(trajectory["schema_version"], "ATIF-v1.4");
        assert!(trajectory["session_id"].is_string());
        assert!(
            trajectory["agent"]["name"].is_string() && trajectory["agent"]["version"].is_string()
        );
        let steps = trajectory["steps"].as_array().expect("steps");
        assert!(!steps.is_empty());
        for (index, step) in steps.iter().enumerate() {
            keys_within(step, STEP, "step");
            assert_eq!(step["step_id"], index + 1);
            assert!(step["message"].is_string());
            let source = step["source"].as_str().expect("source");
            assert!(["user", "agent", "system"].contains(&source));
            if source != "agent" {
                for key in AGENT_ONLY {
                    assert!(step.get(*key).is_none(), "{key} on a {source} step");
                }
            }
            let calls: Vec<&str> = step["tool_calls"]
                .as_array()
                .map(|calls| {
                    calls
                        .iter()
                        .map(|call| {
                            assert!(
                                call["arguments"].is_object(),
                                "arguments must be an object: {call}"
                            );
                            assert!(call["function_name"].is_string());
                            call["tool_call_id"].as_str().expect("tool_call_id")
                        })
                        .collect()
                })
                .unwrap_or_default();
            if let Some(results) = step["observation"]["results"].as_array() {
                for result in results {
                    keys_within(result, RESULT, "observation result");
                    if let Some(id) = result["source_call_id"].as_str() {
                        assert!(
                            calls.contains(&id),
                            "result for {id} not in its step's calls"
                        );
                    }
                }
            }
            if let Some(metrics) = step.get("metrics") {
                keys_within(metrics, METRICS, "metrics");
            }
        }
        assert_eq!(trajectory["final_metrics"]["total_steps"], steps.len());
    }

    #[test]
    fn every_recorded_stream_gives_a_conforming_trajectory() {
        let cases = [
            (Dialect::CLAUDE_CODE, "claude"),
            (Dialect::CODEX, "codex"),
            (Dialect::OPENCODE, "opencode"),
        ];
        for (dialect, dir) in cases {
            for name in ["success", "tool_error", "max_turns", "crash", "garbage"] {
                let state = run(dialect, &fixture(&format!("{dir}/{name}.jsonl")));
                let trajectory = serde_json::to_value(state.trajectory(dir)).expect("serializes");
                check(&trajectory);
            }
        }
        let plain = {
            let mut parser = StreamParser::new(Dialect::PLAIN);
            parser.record_instruction("x");
            parser.feed_line("done");
            parser.finish()
        };
        check(&serde_json::to_value(plain.trajectory("command")).expect("serializes"));
    }
}
