//! Aider (PyPI `aider-chat`, staged as a package tree): `python3 -m aider --model openai/M
//! --message PROMPT --yes-always --no-git ...` against the proxy's Chat Completions endpoint
//! (litellm's `OPENAI_API_BASE`). Aider offers the model no tools: it edits through its answers'
//! text, in the edit format it picks for the model.
//!
//! Its stdout (`--no-pretty --no-stream`) is text: the model's answer, then
//! `Tokens: N sent[, N cache write][, N cache hit], N received.[ Cost: ...]` per model call
//! (counts over 1000 rounded by Aider: `1.2k`, `12k`), `Applied edit to PATH` per file written,
//! and errors such as `litellm.APIConnectionError: ...`. Each answer is a step (its usage as
//! metrics), each applied edit a tool call of that step. The chat and input histories go to the
//! state folder, never into the workspace.

use serde_json::json;

use super::{
    ConfigFile, Driver, DriverError, DriverOptions, Plan, Staging, python_module, required_model,
};
use crate::parse::{Dialect, EventState, Events, PlainState, RunState, Terminal};
use crate::trajectory::{ObservationResult, StepMetrics, StepSource, ToolCall};

#[derive(Debug)]
pub struct Aider;

impl Driver for Aider {
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
        let mut plan = python_module(options, check_binaries, "aider", Dialect(&AiderText))?;
        let state = options.state_dir.join("aider");
        let home = options.state_dir.join("home");
        plan.env
            .insert("AIDER_CHECK_UPDATE".to_owned(), "false".to_owned());
        plan.env
            .insert("AIDER_ANALYTICS".to_owned(), "false".to_owned());
        let path = |name: &str| state.join(name).to_string_lossy().into_owned();
        let args = &mut plan.args;
        args.push("--model".to_owned());
        args.push(format!("openai/{model}"));
        args.extend(
            [
                "--yes-always",
                "--no-git",
                "--no-check-update",
                "--no-analytics",
                "--no-show-model-warnings",
                "--no-show-release-notes",
                "--no-pretty",
                "--no-stream",
                "--no-fancy-input",
                "--no-auto-lint",
                "--no-auto-test",
                "--no-detect-urls",
                "--no-restore-chat-history",
                "--chat-history-file",
            ]
            .map(str::to_owned),
        );
        args.push(path("chat.history.md"));
        args.push("--input-history-file".to_owned());
        args.push(path("input.history"));
        args.extend(["--message".to_owned(), instruction.to_owned()]);
        // A model list in Aider's cache: it would otherwise download one at every start.
        plan.files = vec![ConfigFile {
            path: home.join(".aider/caches/model_prices_and_context_window.json"),
            contents: "{\"research-bench\": {}}\n".to_owned(),
        }];
        plan.dirs = vec![home, state];
        Ok(Plan::Run(plan))
    }
}

/// Aider's text output.
struct AiderText;

impl Events for AiderText {
    fn name(&self) -> &'static str {
        "aider"
    }
    fn start(&self) -> Box<dyn EventState> {
        Box::new(AiderState::default())
    }
    fn needs_terminal(&self) -> bool {
        false
    }
}

#[derive(Debug, Default)]
struct AiderState {
    /// Text since the last usage line: the answer being printed.
    text: PlainState,
    /// Whether the start-up banner is over (its lines are not the answer).
    past_banner: bool,
    /// The step of the last answer (edits attach to it).
    last_step: Option<usize>,
    edits: u64,
    answered: bool,
}

/// How the lines Aider prints before its first answer start.
const BANNER: &[&str] = &[
    "Aider v",
    "Main model:",
    "Model:",
    "Weak model:",
    "Editor model:",
    "Git repo:",
    "Git working dir:",
    "Repo-map:",
    "Cur working dir:",
    "Added ",
    "Warning:",
    "https://aider.chat/",
];

/// A token count as Aider prints it (`950`, `1.2k`, `12k`).
fn tokens(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_suffix('k') {
        Some(thousands) => thousands
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .map(|t| (t * 1000.0).round() as u64),
        None => text.parse().ok(),
    }
}

/// `Tokens: 1.2k sent, 30 cache hit, 45 received. Cost: ...` → (sent, cache hit, cache write,
/// received).
fn usage_line(line: &str) -> Option<[u64; 4]> {
    let rest = line.strip_prefix("Tokens: ")?;
    let rest = rest.split(". Cost:").next().unwrap_or(rest);
    let mut counts = [0u64; 4];
    for part in rest.trim_end_matches('.').split(", ") {
        let (number, what) = part.split_once(' ')?;
        let n = tokens(number)?;
        match what {
            "sent" => counts[0] = n,
            "cache hit" => counts[1] = n,
            "cache write" => counts[2] = n,
            "received" => counts[3] = n,
            _ => return None,
        }
    }
    Some(counts)
}

impl EventState for AiderState {
    fn line(&mut self, state: &mut RunState, line: &str) -> bool {
        if !self.past_banner {
            if line.trim().is_empty() || BANNER.iter().any(|p| line.starts_with(p)) {
                return true;
            }
            self.past_banner = true;
        }
        if let Some([sent, hit, write, received]) = usage_line(line) {
            let answer = self.text.take();
            let index = state.trajectory.push(StepSource::Agent, answer.clone());
            if let Some(step) = state.trajectory.step_mut(index) {
                step.metrics = Some(StepMetrics {
                    prompt_tokens: sent,
                    completion_tokens: received,
                    cached_tokens: (hit > 0).then_some(hit),
                    cost_usd: None,
                });
            }
            state.usage.input_tokens += sent.saturating_sub(hit + write);
            state.usage.cache_read_tokens += hit;
            state.usage.cache_write_tokens += write;
            state.usage.output_tokens += received;
            state.usage.turns += 1;
            if !answer.is_empty() {
                state.answer = Some(answer);
            }
            self.last_step = Some(index);
            self.answered = true;
            return true;
        }
        if let Some(path) = line.strip_prefix("Applied edit to ") {
            self.edits += 1;
            let id = format!("edit-{}", self.edits);
            let index = match self.last_step {
                Some(index) => index,
                None => state.trajectory.push(StepSource::Agent, ""),
            };
            if let Some(step) = state.trajectory.step_mut(index) {
                step.tool_calls
                    .push(ToolCall::new(&id, "edit", json!({ "path": path.trim() })));
                step.observation
                    .get_or_insert_with(Default::default)
                    .results
                    .push(ObservationResult {
                        source_call_id: Some(id),
                        content: format!("Applied edit to {}", path.trim()),
                    });
            }
            state.last_tool = Some(format!("edit: {}", path.trim()));
            return true;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with("litellm.") && trimmed.contains("Error") {
            state.last_error = Some(trimmed.to_owned());
        }
        self.text.push(line);
        true
    }

    fn finish(&mut self, state: &mut RunState) {
        // Text after the last answer is Aider's own chatter (the names of the files it edits);
        // text without any answer is all there is.
        let rest = self.text.take();
        if !self.answered && !rest.is_empty() {
            state.trajectory.push(StepSource::Agent, rest);
        }
        // No model answer at all and an API error: the run failed, whatever the exit code.
        if !self.answered
            && let Some(reason) = &state.last_error
        {
            state.terminal = Some(Terminal::Failed {
                reason: reason.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::StreamParser;

    const STDOUT: &str = "
Aider v0.86.2
Model: openai/scripted:x with whole edit format
Git repo: none
Repo-map: disabled

out.txt

```
done

```

Tokens: 1.2k sent, 200 cache hit, 20 received.

out.txt
Applied edit to out.txt
";

    fn parse(text: &str) -> RunState {
        let mut parser = StreamParser::new(Dialect(&AiderText));
        parser.record_instruction("write done");
        for line in text.lines() {
            parser.feed_line(line);
        }
        parser.finish()
    }

    #[test]
    fn answers_usage_and_edits_become_steps() {
        let state = parse(STDOUT);
        assert_eq!(state.usage.input_tokens, 1000);
        assert_eq!(state.usage.cache_read_tokens, 200);
        assert_eq!(state.usage.output_tokens, 20);
        assert_eq!(state.usage.turns, 1);
        assert_eq!(
            state.answer.as_deref(),
            Some("out.txt\n\n```\ndone\n\n```")
        );
        assert_eq!(state.last_tool.as_deref(), Some("edit: out.txt"));
        assert_eq!(state.terminal, None);
        let trajectory = state.trajectory("aider");
        assert_eq!(trajectory.steps.len(), 2);
        let step = &trajectory.steps[1];
        assert_eq!(step.tool_calls[0].function_name, "edit");
        assert_eq!(step.tool_calls[0].arguments["path"], "out.txt");
        assert_eq!(
            step.observation.as_ref().expect("observation").results[0]
                .source_call_id
                .as_deref(),
            Some("edit-1")
        );
        assert_eq!(step.metrics.as_ref().expect("metrics").prompt_tokens, 1200);
    }

    #[test]
    fn an_api_error_without_any_answer_fails_the_run() {
        let state = parse(
            "Aider v0.86.2\n\nlitellm.APIConnectionError: OpenAIException - Connection error.\n",
        );
        assert!(matches!(state.terminal, Some(Terminal::Failed { ref reason }) if reason.contains("APIConnectionError")));
    }

    #[test]
    fn token_counts_read_as_aider_prints_them() {
        assert_eq!(tokens("950"), Some(950));
        assert_eq!(tokens("1.2k"), Some(1200));
        assert_eq!(tokens("12k"), Some(12000));
        assert_eq!(tokens("x"), None);
        assert_eq!(
            usage_line("Tokens: 12k sent, 1.0k cache write, 45 received. Cost: $0.01 message, $0.01 session."),
            Some([12000, 0, 1000, 45])
        );
        assert_eq!(usage_line("Tokens are nice"), None);
    }
}
