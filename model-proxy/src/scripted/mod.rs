//! The scripted mock model: answers from a script, in whichever wire format is asked, with the
//! tool-call shapes the calling CLI offers.
//!
//! A script is a list of steps; each step is one model response. The step to answer with is the
//! number of tool results already in the request's conversation (stateless, so retries and
//! replays land on the same step). A step either calls one tool (`write_file` or `run`),
//! optionally after some `text`, or ends the turn with `text` alone. Past the last step the model
//! answers "Script finished." Requests that offer no tools at all (side requests such as titles)
//! get a short text with zero usage, so the script's token totals stay exact.
//!
//! ```toml
//! [[steps]]
//! write_file = { path = "hello.py", content = "print('hi')\n" }
//! usage = { input_tokens = 120, output_tokens = 30 }
//! [[steps]]
//! run = "python3 hello.py"
//! [[steps]]
//! text = "Wrote and ran hello.py."
//! ```
//!
//! Tool choice, from the tools the request offers:
//! - write_file: a tool named `Write`/`write` (Claude Code `{file_path, content}`, OpenCode
//!   `{filePath, content}`); else `apply_patch` (Codex: custom tool with a raw patch, or a function
//!   with `{input}`); else a shell tool running `printf '%s' '<content>' > '<path>'`.
//! - run: `Bash`/`bash` `{command}`; Codex `exec_command` `{cmd}`, `shell_command` `{command}`,
//!   `shell` `{command: ["bash", "-lc", cmd]}`.
//!
//! Relative paths are joined to the working directory the CLI states in its prompt when the
//! write tool wants absolute paths (Claude Code's `Write`).
//!
//! Agents that edit through the text of their answers and offer no tools (Aider) need a script
//! with `text_protocol = true`: every request is then a step (the step is the number of
//! script's step texts already answered in the conversation) and each step is answered with its
//! `text`, written in the agent's own edit format by the script's author.

mod render;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::wire::{TokenCounts, WireFormat};

pub(crate) use render::render;

/// Default usage of a step without an explicit `usage`.
pub const DEFAULT_STEP_USAGE: StepUsage = StepUsage {
    input_tokens: 100,
    output_tokens: 20,
};

/// A script for the mock model.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Script {
    /// One step per model response.
    pub steps: Vec<Step>,
    /// Characters per streamed text/argument delta (default 16).
    #[serde(default)]
    pub chunk_chars: Option<usize>,
    /// The agent offers no tools and edits through its answers' text: every request is a step
    /// (counted by the step texts already among the assistant messages), answered with the
    /// step's `text`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub text_protocol: bool,
}

/// One model response.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Step {
    /// Assistant text (before the tool call, or the final answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Write a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_file: Option<WriteFile>,
    /// Run a shell command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Token counts reported for this response (default [`DEFAULT_STEP_USAGE`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<StepUsage>,
}

/// A file to write.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct WriteFile {
    /// Path, relative to the agent's working directory or absolute.
    pub path: String,
    /// Exact file content.
    pub content: String,
}

/// Token counts a step reports.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepUsage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

/// A script that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// Not valid TOML/JSON for a script.
    #[error("script is not valid {format}: {message}")]
    Parse {
        /// "TOML" or "JSON".
        format: &'static str,
        /// Parser message.
        message: String,
    },
    /// A step is contradictory.
    #[error("script step {index}: {message}")]
    Step {
        /// Zero-based step index.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

impl Script {
    /// Parses a TOML script and validates it.
    pub fn from_toml(text: &str) -> Result<Self, ScriptError> {
        let s: Script = toml::from_str(text).map_err(|e| ScriptError::Parse {
            format: "TOML",
            message: e.to_string(),
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Reads a script file: `.json` as JSON, anything else as TOML.
    pub fn from_path(path: &std::path::Path) -> Result<Self, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|e| ScriptError::Parse {
            format: "file",
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        if path.extension().is_some_and(|e| e == "json") {
            Self::from_json(&text)
        } else {
            Self::from_toml(&text)
        }
    }

    /// Parses a JSON script and validates it.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let s: Script = serde_json::from_str(text).map_err(|e| ScriptError::Parse {
            format: "JSON",
            message: e.to_string(),
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Checks that every step does one thing.
    pub fn validate(&self) -> Result<(), ScriptError> {
        for (index, s) in self.steps.iter().enumerate() {
            if s.write_file.is_some() && s.run.is_some() {
                return Err(ScriptError::Step {
                    index,
                    message: "a step may either write_file or run, not both; split it in two"
                        .into(),
                });
            }
            if self.text_protocol && (s.write_file.is_some() || s.run.is_some()) {
                return Err(ScriptError::Step {
                    index,
                    message: "a text_protocol script answers in text only: write the edit in the agent's format under `text`".into(),
                });
            }
            if s.write_file.is_none() && s.run.is_none() && s.text.is_none() {
                return Err(ScriptError::Step {
                    index,
                    message: "empty step: give it text, write_file or run".into(),
                });
            }
        }
        Ok(())
    }

    /// The token counts the proxy must report for a complete run of this script (every step
    /// answered once, no extra steps).
    pub fn expected_usage(&self) -> TokenCounts {
        let mut c = TokenCounts::default();
        for s in &self.steps {
            let u = s.usage.unwrap_or(DEFAULT_STEP_USAGE);
            c.input_tokens += u.input_tokens;
            c.output_tokens += u.output_tokens;
        }
        c
    }

    /// A built-in script for the `mock` model: one text answer.
    pub fn builtin_mock() -> Self {
        Script {
            steps: vec![Step {
                text: Some("This is the mock model.".into()),
                ..Default::default()
            }],
            chunk_chars: None,
            text_protocol: false,
        }
    }
}

/// A tool the request offers, reduced to what the mock needs.
#[derive(Debug, Clone)]
pub(crate) struct OfferedTool {
    pub name: String,
    /// Custom (freeform) tool in the Responses API.
    pub custom: bool,
    pub properties: Vec<String>,
    pub required: Vec<String>,
}

/// How the mock answers one request: resolved against the offered tools.
#[derive(Debug, Clone)]
pub(crate) struct Turn {
    pub text: Option<String>,
    pub call: Option<ToolCall>,
    pub usage: StepUsage,
    pub chunk_chars: usize,
    /// Unique per (script step) so replays and tests are deterministic.
    pub id_seed: String,
}

#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    pub name: String,
    pub input: ToolInput,
}

#[derive(Debug, Clone)]
pub(crate) enum ToolInput {
    /// JSON arguments.
    Json(Value),
    /// Freeform text (Responses custom tool).
    Text(String),
}

impl ToolInput {
    /// The argument string as streamed.
    pub fn as_text(&self) -> String {
        match self {
            Self::Json(v) => v.to_string(),
            Self::Text(s) => s.clone(),
        }
    }
}

fn tools_of(format: WireFormat, req: &Value) -> Vec<OfferedTool> {
    let Some(tools) = req.get("tools").and_then(Value::as_array) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter_map(|t| {
            let (name, schema, custom) = match format {
                WireFormat::AnthropicMessages => {
                    (t.get("name")?.as_str()?, t.get("input_schema"), false)
                }
                WireFormat::OpenAiResponses => {
                    let custom = t.get("type").and_then(Value::as_str) == Some("custom");
                    (t.get("name")?.as_str()?, t.get("parameters"), custom)
                }
                WireFormat::OpenAiChat => {
                    let f = t.get("function")?;
                    (f.get("name")?.as_str()?, f.get("parameters"), false)
                }
            };
            let strings = |key: &str| -> Vec<String> {
                match schema.and_then(|s| s.get(key)) {
                    Some(Value::Object(m)) => m.keys().cloned().collect(),
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect(),
                    _ => Vec::new(),
                }
            };
            Some(OfferedTool {
                name: name.to_string(),
                custom,
                properties: strings("properties"),
                required: strings("required"),
            })
        })
        .collect()
}

/// Number of tool results already in the conversation = the step to answer with.
pub(crate) fn step_index(format: WireFormat, req: &Value) -> usize {
    match format {
        WireFormat::AnthropicMessages => req
            .get("messages")
            .and_then(Value::as_array)
            .map(|ms| {
                ms.iter()
                    .filter_map(|m| m.get("content").and_then(Value::as_array))
                    .flatten()
                    .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
                    .count()
            })
            .unwrap_or(0),
        WireFormat::OpenAiResponses => req
            .get("input")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter(|i| {
                        matches!(
                            i.get("type").and_then(Value::as_str),
                            Some(
                                "function_call_output"
                                    | "custom_tool_call_output"
                                    | "local_shell_call_output"
                            )
                        )
                    })
                    .count()
            })
            .unwrap_or(0),
        WireFormat::OpenAiChat => req
            .get("messages")
            .and_then(Value::as_array)
            .map(|ms| {
                ms.iter()
                    .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
                    .count()
            })
            .unwrap_or(0),
    }
}

/// The step of a text-protocol script: how many of its steps' texts are already assistant
/// messages in the conversation (an agent's few-shot examples are assistant messages too, so a
/// plain count would not do).
fn answers_so_far(script: &Script, format: WireFormat, req: &Value) -> usize {
    let key = match format {
        WireFormat::OpenAiResponses => "input",
        WireFormat::AnthropicMessages | WireFormat::OpenAiChat => "messages",
    };
    let texts: Vec<&str> = script
        .steps
        .iter()
        .filter_map(|s| s.text.as_deref().map(str::trim))
        .collect();
    req.get(key)
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .filter_map(|m| m.get("content").and_then(Value::as_str))
                .filter(|c| texts.contains(&c.trim()))
                .count()
        })
        .unwrap_or(0)
}

/// The working directory a CLI states in its prompt (Claude Code: "working directory: X";
/// Codex: `<cwd>X</cwd>`).
fn stated_cwd(req: &Value) -> Option<String> {
    let text = req.to_string();
    if let Some(i) = text.find("<cwd>") {
        let rest = &text[i + 5..];
        if let Some(j) = rest.find("</cwd>") {
            return Some(rest[..j].to_string());
        }
    }
    let i = text.find("orking directory: ")?;
    let rest = &text[i + "orking directory: ".len()..];
    let end = rest.find(['\\', '"', '\n']).unwrap_or(rest.len());
    Some(rest[..end].trim().to_string()).filter(|s| s.starts_with('/'))
}

fn find<'a>(tools: &'a [OfferedTool], names: &[&str]) -> Option<&'a OfferedTool> {
    names
        .iter()
        .find_map(|n| tools.iter().find(|t| t.name == *n))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Fills the required string parameters the mock does not know with a neutral value.
fn fill_required(tool: &OfferedTool, mut args: Map<String, Value>) -> Value {
    for r in &tool.required {
        if !args.contains_key(r) {
            args.insert(r.clone(), Value::String("scripted step".into()));
        }
    }
    Value::Object(args)
}

fn shell_call(tools: &[OfferedTool], command: &str) -> Option<ToolCall> {
    if let Some(t) = find(tools, &["Bash", "bash"]) {
        let mut m = Map::new();
        m.insert("command".into(), json!(command));
        return Some(ToolCall {
            name: t.name.clone(),
            input: ToolInput::Json(fill_required(t, m)),
        });
    }
    if let Some(t) = find(tools, &["exec_command"]) {
        return Some(ToolCall {
            name: t.name.clone(),
            input: ToolInput::Json(json!({"cmd": command})),
        });
    }
    if let Some(t) = find(tools, &["shell_command"]) {
        return Some(ToolCall {
            name: t.name.clone(),
            input: ToolInput::Json(json!({"command": command})),
        });
    }
    if let Some(t) = find(tools, &["shell", "container.exec"]) {
        return Some(ToolCall {
            name: t.name.clone(),
            input: ToolInput::Json(json!({"command": ["bash", "-lc", command]})),
        });
    }
    None
}

fn write_call(tools: &[OfferedTool], w: &WriteFile, cwd: Option<&str>) -> Option<ToolCall> {
    if let Some(t) = find(tools, &["Write", "write"]) {
        let key = ["file_path", "filePath", "path"]
            .into_iter()
            .find(|k| t.properties.iter().any(|p| p == k))
            .unwrap_or("file_path");
        let path = match (w.path.starts_with('/'), cwd) {
            (false, Some(cwd)) => format!("{}/{}", cwd.trim_end_matches('/'), w.path),
            _ => w.path.clone(),
        };
        let mut m = Map::new();
        m.insert(key.into(), json!(path));
        m.insert("content".into(), json!(w.content));
        return Some(ToolCall {
            name: t.name.clone(),
            input: ToolInput::Json(fill_required(t, m)),
        });
    }
    if let Some(t) = find(tools, &["apply_patch"]) {
        let mut patch = format!("*** Begin Patch\n*** Add File: {}\n", w.path);
        for line in w.content.lines() {
            patch.push('+');
            patch.push_str(line);
            patch.push('\n');
        }
        patch.push_str("*** End Patch\n");
        let input = if t.custom {
            ToolInput::Text(patch)
        } else {
            ToolInput::Json(json!({"input": patch}))
        };
        return Some(ToolCall {
            name: t.name.clone(),
            input,
        });
    }
    let cmd = format!(
        "printf '%s' {} > {}",
        shell_quote(&w.content),
        shell_quote(&w.path)
    );
    shell_call(tools, &cmd)
}

/// Resolves the script step for this request into a concrete turn.
pub(crate) fn plan_turn(
    script: &Script,
    script_name: &str,
    format: WireFormat,
    req: &Value,
) -> Turn {
    let chunk_chars = script.chunk_chars.unwrap_or(16).max(1);
    let tools = tools_of(format, req);
    if script.text_protocol {
        let idx = answers_so_far(script, format, req);
        let step = script.steps.get(idx);
        return Turn {
            text: Some(
                step.and_then(|s| s.text.clone())
                    .unwrap_or_else(|| "Script finished.".into()),
            ),
            call: None,
            usage: step.map_or(
                StepUsage {
                    input_tokens: 0,
                    output_tokens: 0,
                },
                |s| s.usage.unwrap_or(DEFAULT_STEP_USAGE),
            ),
            chunk_chars,
            id_seed: format!("{script_name}-{idx}"),
        };
    }
    if tools.is_empty() {
        return Turn {
            text: Some("ok".into()),
            call: None,
            usage: StepUsage {
                input_tokens: 0,
                output_tokens: 0,
            },
            chunk_chars,
            id_seed: format!("{script_name}-side"),
        };
    }
    let idx = step_index(format, req);
    let Some(step) = script.steps.get(idx) else {
        return Turn {
            text: Some("Script finished.".into()),
            call: None,
            usage: StepUsage {
                input_tokens: 0,
                output_tokens: 0,
            },
            chunk_chars,
            id_seed: format!("{script_name}-end{idx}"),
        };
    };
    let cwd = stated_cwd(req);
    let call = if let Some(w) = &step.write_file {
        write_call(&tools, w, cwd.as_deref())
    } else if let Some(cmd) = &step.run {
        shell_call(&tools, cmd)
    } else {
        None
    };
    let wanted_tool = step.write_file.is_some() || step.run.is_some();
    let text = match (&call, wanted_tool) {
        (None, true) => Some(format!(
            "The scripted model could not find a usable tool among: {}",
            tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => step.text.clone(),
    };
    Turn {
        text,
        call,
        usage: step.usage.unwrap_or(DEFAULT_STEP_USAGE),
        chunk_chars,
        id_seed: format!("{script_name}-{idx}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script() -> Script {
        Script::from_toml(
            r#"
            [[steps]]
            write_file = { path = "hello.py", content = "print('hi')\n" }
            usage = { input_tokens = 120, output_tokens = 30 }
            [[steps]]
            run = "python3 hello.py"
            [[steps]]
            text = "Done."
            "#,
        )
        .expect("valid script")
    }

    #[test]
    fn a_text_protocol_script_answers_every_request_by_its_assistant_count() {
        let script = Script::from_toml(
            r#"
            text_protocol = true
            [[steps]]
            text = "out.txt\n```\ndone\n```\n"
            [[steps]]
            text = "Done."
            usage = { input_tokens = 7, output_tokens = 3 }
            "#,
        )
        .expect("valid script");
        let first =
            json!({"messages": [{"role":"system","content":"s"},{"role":"user","content":"go"}]});
        let t = plan_turn(&script, "s", WireFormat::OpenAiChat, &first);
        assert!(t.call.is_none());
        assert_eq!(t.text.as_deref(), Some("out.txt\n```\ndone\n```\n"));
        assert_eq!(t.usage, DEFAULT_STEP_USAGE);
        // an agent's few-shot example answers do not count
        let second = json!({"messages": [{"role":"user","content":"e.g."},{"role":"assistant","content":"Ok."},{"role":"user","content":"go"},{"role":"assistant","content":"out.txt\n```\ndone\n```"},{"role":"user","content":"more"}]});
        let t = plan_turn(&script, "s", WireFormat::OpenAiChat, &second);
        assert_eq!(t.text.as_deref(), Some("Done."));
        assert_eq!(t.usage.input_tokens, 7);
        let third = json!({"messages": [{"role":"assistant","content":"out.txt\n```\ndone\n```\n"},{"role":"assistant","content":"Done."}]});
        let t = plan_turn(&script, "s", WireFormat::OpenAiChat, &third);
        assert_eq!(t.text.as_deref(), Some("Script finished."));
        assert_eq!(t.usage.output_tokens, 0);
        let bad = Script::from_toml("text_protocol = true\n[[steps]]\nrun = \"ls\"\n");
        assert!(bad.is_err());
    }

    #[test]
    fn expected_usage_sums_steps_with_defaults() {
        let u = script().expected_usage();
        assert_eq!((u.input_tokens, u.output_tokens), (320, 70));
    }

    #[test]
    fn rejects_a_step_that_does_two_things() {
        let err = Script::from_json(
            r#"{"steps":[{"write_file":{"path":"a","content":"b"},"run":"ls"}]}"#,
        )
        .expect_err("invalid");
        assert!(err.to_string().contains("step 0"));
    }

    #[test]
    fn claude_code_write_gets_absolute_path() {
        let req = json!({
            "system": [{"type":"text","text":"Primary working directory: /tmp/w\n"}],
            "messages": [{"role":"user","content":"go"}],
            "tools": [{"name":"Write","input_schema":{"properties":{"file_path":{},"content":{}},"required":["file_path","content"]}},
                      {"name":"Bash","input_schema":{"properties":{"command":{}},"required":["command"]}}]
        });
        let t = plan_turn(&script(), "s", WireFormat::AnthropicMessages, &req);
        let call = t.call.expect("tool call");
        assert_eq!(call.name, "Write");
        assert_eq!(
            call.input.as_text(),
            r#"{"content":"print('hi')\n","file_path":"/tmp/w/hello.py"}"#
        );
    }

    #[test]
    fn codex_exec_command_writes_through_the_shell() {
        let req = json!({
            "input": [],
            "tools": [{"type":"function","name":"exec_command","parameters":{"properties":{"cmd":{}},"required":["cmd"]}}]
        });
        let t = plan_turn(&script(), "s", WireFormat::OpenAiResponses, &req);
        let call = t.call.expect("tool call");
        assert_eq!(call.name, "exec_command");
        let ToolInput::Json(args) = call.input else {
            panic!("json args expected")
        };
        assert_eq!(
            args["cmd"],
            "printf '%s' 'print('\\''hi'\\'')\n' > 'hello.py'"
        );
    }

    #[test]
    fn opencode_bash_gets_required_description_and_step_counts_tool_messages() {
        let req = json!({
            "messages": [{"role":"user","content":"go"},{"role":"assistant","tool_calls":[]},{"role":"tool","content":"ok"}],
            "tools": [{"type":"function","function":{"name":"bash","parameters":{"properties":{"command":{},"description":{}},"required":["command","description"]}}}]
        });
        let t = plan_turn(&script(), "s", WireFormat::OpenAiChat, &req);
        let call = t.call.expect("tool call");
        assert_eq!(
            call.input.as_text(),
            r#"{"command":"python3 hello.py","description":"scripted step"}"#
        );
    }
}
