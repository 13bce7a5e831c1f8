//! Turning an A2A message into the agent's instruction: text parts are the instruction, a data
//! part `{task_id, expected_outputs, constraints}` adds what the text does not say, raw file parts are
//! written into the workspace (for remote use, when the workspace was not copied in), and `url`
//! file parts (`http`/`https`, with a filename) are downloaded into it by the runner before the
//! agent starts (a sandboxed adapter has no network: the green agent sends it no URLs).

use std::path::Path;

use a2a_protocol::{Message, PartContent};
use serde_json::Value;

use crate::workspace::{self, WorkspaceError};

/// What a message asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInput {
    /// The full instruction handed to the agent.
    pub instruction: String,
    /// The green agent's task id, if sent.
    pub task_id: Option<String>,
    /// Files to write into the workspace before the run: (relative name, bytes).
    pub files: Vec<(String, Vec<u8>)>,
    /// Files to download into the workspace before the run: (relative name, URL).
    pub url_files: Vec<(String, String)>,
}

/// Why a message cannot be run.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InputError {
    #[error("the message has no text part; send the instruction as a text part")]
    NoInstruction,
    #[error(
        "file part {name:?} has the URL {url:?}; only http:// and https:// URLs can be fetched, send the file as a raw part (bytes) otherwise"
    )]
    UrlPart { name: String, url: String },
    #[error("a file part has no filename; set `filename` to a path relative to the workspace")]
    UnnamedFile,
}

/// Reads a message.
pub fn read_message(message: &Message) -> Result<TaskInput, InputError> {
    let mut texts = Vec::new();
    let mut data: Option<&Value> = None;
    let mut files = Vec::new();
    let mut url_files = Vec::new();
    for part in &message.parts {
        match &part.content {
            PartContent::Text(text) => texts.push(text.clone()),
            PartContent::Data(value) => {
                if data.is_none() {
                    data = Some(value);
                }
            }
            PartContent::Raw(bytes) => {
                let name = part.filename.clone().ok_or(InputError::UnnamedFile)?;
                files.push((name, bytes.clone()));
            }
            PartContent::Url(url) => {
                let name = part.filename.clone().ok_or(InputError::UnnamedFile)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(InputError::UrlPart {
                        name,
                        url: url.clone(),
                    });
                }
                url_files.push((name, url.clone()));
            }
        }
    }
    let text = texts.join("\n").trim().to_owned();
    if text.is_empty() {
        return Err(InputError::NoInstruction);
    }
    let mut instruction = text;
    let mut task_id = None;
    if let Some(data) = data {
        task_id = data
            .get("task_id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        append_missing_facts(&mut instruction, data);
    }
    Ok(TaskInput {
        instruction: instruction.trim_end().to_owned(),
        task_id,
        files,
        url_files,
    })
}

/// Adds what the data part says and the text does not: expected outputs the text does not
/// name, constraints in words. The green agent's text already holds every fact (so nothing is
/// added to it); a client that sends only data still gets them said once.
fn append_missing_facts(instruction: &mut String, data: &Value) {
    let strings = |v: Option<&Value>| -> Vec<String> {
        match v {
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| match i {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            _ => Vec::new(),
        }
    };
    let outputs: Vec<String> = strings(data.get("expected_outputs"))
        .into_iter()
        .filter(|o| !instruction.contains(&format!("`{o}`")))
        .collect();
    let constraints = data.get("constraints");
    let forbidden: Vec<String> = strings(constraints.and_then(|c| c.get("forbidden_modules")))
        .into_iter()
        .filter(|m| !instruction.contains(&format!("`{m}`")))
        .collect();
    let mut rules: Vec<String> = forbidden
        .iter()
        .map(|m| format!("Do not use `{m}`."))
        .collect();
    rules.extend(
        strings(constraints.and_then(|c| c.get("notes")))
            .into_iter()
            .filter(|n| !instruction.contains(n.as_str())),
    );
    if let Some(Value::String(text)) = constraints
        && !text.trim().is_empty()
        && !instruction.contains(text.trim())
    {
        rules.push(text.trim().to_owned());
    }
    if !outputs.is_empty() {
        section(instruction, "What to hand in");
        instruction.push_str(
            "Your work is graded on these files (paths relative to the working directory):\n\n",
        );
        for o in &outputs {
            instruction.push_str(&format!("- `{o}`\n"));
        }
    }
    if !rules.is_empty() {
        section(instruction, "Rules");
        for r in &rules {
            instruction.push_str(&format!("- {r}\n"));
        }
    }
}

/// Starts a Markdown section after the text so far.
fn section(instruction: &mut String, title: &str) {
    let kept = instruction.trim_end().len();
    instruction.truncate(kept);
    instruction.push_str(&format!("\n\n## {title}\n\n"));
}

/// Writes the input's files into the workspace.
pub fn write_files(root: &Path, input: &TaskInput) -> Result<(), WorkspaceError> {
    for (name, bytes) in &input.files {
        workspace::write_input_file(root, name, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use a2a_protocol::Part;
    use serde_json::json;

    use super::*;

    #[test]
    fn text_data_and_files_are_read() {
        let message = Message::user(vec![
            Part::text("Fit the model."),
            Part::data(
                json!({"task_id": "t1", "expected_outputs": ["fit.json", "plot.png"], "constraints": {"forbidden_modules": ["sklearn"], "notes": []}}),
            ),
            Part::raw(
                b"1,2".to_vec(),
                Some("data/in.csv".into()),
                Some("text/csv".into()),
            ),
        ]);
        let input = read_message(&message).expect("valid");
        assert_eq!(input.task_id.as_deref(), Some("t1"));
        assert_eq!(
            input.instruction,
            "Fit the model.\n\n## What to hand in\n\nYour work is graded on these files (paths relative to the working directory):\n\n- `fit.json`\n- `plot.png`\n\n## Rules\n\n- Do not use `sklearn`."
        );
        assert_eq!(
            input.files,
            vec![("data/in.csv".to_owned(), b"1,2".to_vec())]
        );
    }

    /// The green agent's text already says every fact of its data part: nothing is added,
    /// and empty constraints never show.
    #[test]
    fn a_complete_text_is_kept_as_sent() {
        let text = "Fit the model.\n\n## What to hand in\n\n- `fit.json`\n\n## Rules\n\n- Do not use `sklearn`.\n- Be brief.";
        let message = Message::user(vec![
            Part::text(text),
            Part::data(json!({"task_id": "t1", "expected_outputs": ["fit.json"],
                "constraints": {"forbidden_modules": ["sklearn"], "notes": ["Be brief."]}})),
        ]);
        assert_eq!(read_message(&message).expect("valid").instruction, text);
        let empty = Message::user(vec![
            Part::text("Go."),
            Part::data(json!({"task_id": "t1", "expected_outputs": [],
                "constraints": {"forbidden_modules": [], "notes": []}})),
        ]);
        assert_eq!(read_message(&empty).expect("valid").instruction, "Go.");
    }

    #[test]
    fn bad_messages_get_clear_errors() {
        assert_eq!(
            read_message(&Message::user(vec![])),
            Err(InputError::NoInstruction)
        );
        let url = Message::user(vec![
            Part::text("x"),
            Part::url("file:///etc/passwd", Some("f".into()), None),
        ]);
        assert!(matches!(
            read_message(&url),
            Err(InputError::UrlPart { .. })
        ));
        let fetched = Message::user(vec![
            Part::text("x"),
            Part::url("http://h/f", Some("data/f.bin".into()), None),
        ]);
        assert_eq!(
            read_message(&fetched).map(|input| input.url_files),
            Ok(vec![("data/f.bin".to_owned(), "http://h/f".to_owned())])
        );
        let unnamed = Message::user(vec![Part::text("x"), Part::raw(b"1".to_vec(), None, None)]);
        assert_eq!(read_message(&unnamed), Err(InputError::UnnamedFile));
    }
}
