//! One trial as its page shows it: the context `trial_body.html` renders, built here once for
//! the viewer's trial page and the HTML report's trial sections. What differs between the two
//! comes in as [`Inputs`]: which stored artifacts the caller read (the viewer: every one, the
//! first bytes; the report: the answer, the agent's log and the trajectory, whole), whether
//! shown artifacts link to a raw file ([`Links`]), and where the agent's files are compared
//! with the task's workspace, for their diffs (a [`Workspace`]: the viewer's reads the task
//! folder; the report has none). Nothing here reads a store or a file.

use std::collections::BTreeMap;

use serde::Serialize;

use super::plots;
use super::templates::trajectory_parts;
use super::trials::TrialDetail;

/// What a caller read of one stored artifact: its first bytes (all of them unless `cut`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Body {
    pub bytes: Vec<u8>,
    pub cut: bool,
}

/// The artifacts a caller read, by name (`answer`, `agent_log`, `trajectory`, `file:<path>`…).
pub type Bodies = BTreeMap<String, Body>;

/// Where a shown artifact links.
#[derive(Debug, Clone, Copy)]
pub enum Links<'a> {
    /// Nowhere (the HTML report is one file).
    None,
    /// The viewer's raw artifact of this run's trial.
    Viewer { run: &'a str, trial: &'a str },
}

/// The task workspace's copy of a file the agent wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Original {
    /// The workspace has no such file: the agent created it.
    Absent,
    /// The workspace has it but it could not be compared (too big, not text).
    Unreadable,
    Text(String),
}

/// Where a trial's files are compared with the task's workspace.
pub trait Workspace: std::fmt::Debug {
    /// The workspace's copy of the agent's file `rel` (its path in the workspace).
    fn original(&self, rel: &str) -> Original;
}

/// What differs between the places a trial is shown.
#[derive(Debug)]
pub struct Inputs<'a> {
    /// The stored artifacts read. An agent's file not here is listed without its content; any
    /// other artifact not here is not shown.
    pub bodies: &'a Bodies,
    pub links: Links<'a>,
    /// The task workspace's copy of a file (by its path in the workspace); `None`: the files
    /// are not compared (task not found, or a report that does not look).
    pub workspace: Option<&'a dyn Workspace>,
}

/// One line of a unified diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffLine {
    /// `add`, `del`, `eq` or `hunk` (a `@@` header).
    pub tag: &'static str,
    pub text: String,
}

/// A stored artifact as the templates' file blocks show it.
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    pub name: String,
    pub label: String,
    pub size: u64,
    /// The text (first bytes), when it is UTF-8 and was read.
    pub text: Option<String>,
    pub cut: bool,
    pub url: Option<String>,
    /// Against the task's workspace: `new`, `changed`, `unchanged` or `unknown` (not compared).
    pub status: &'static str,
    pub diff: Vec<DiffLine>,
}

/// The context of `trial_body.html` (less `p`, the element ids' prefix, which the page sets).
#[derive(Debug, Clone, Serialize)]
pub struct TrialView {
    pub t: TrialDetail,
    pub grade: Option<serde_json::Value>,
    pub instruction: Option<String>,
    pub steps: Vec<serde_json::Value>,
    pub steps_cut: bool,
    pub final_metrics: Option<serde_json::Value>,
    pub agent_info: Option<serde_json::Value>,
    pub trajectory_note: Option<String>,
    pub files: Vec<Shown>,
    pub logs: Vec<Shown>,
    pub answer: Option<Shown>,
    pub usage_doc: Option<Shown>,
    pub timeline: Option<plots::BandChart>,
}

/// Builds a trial's view from its detail, its grade report (as stored) and what the caller
/// read of its artifacts.
pub fn trial_view(
    detail: TrialDetail,
    grade: Option<serde_json::Value>,
    inputs: &Inputs<'_>,
) -> TrialView {
    let mut files = Vec::new();
    let mut logs = Vec::new();
    let mut answer = None;
    let mut usage_doc = None;
    let mut trajectory = None;
    let mut trajectory_note = None;
    for a in &detail.artifacts {
        let body = inputs.bodies.get(&a.name);
        if a.name == "trajectory" {
            match body {
                Some(b) if b.cut => {
                    trajectory_note = Some(format!(
                        "the trajectory is {} bytes; only the raw file is available",
                        a.size
                    ));
                }
                Some(b) => match serde_json::from_slice::<serde_json::Value>(&b.bytes) {
                    Ok(v) => trajectory = Some(v),
                    Err(e) => trajectory_note = Some(format!("the trajectory is not JSON: {e}")),
                },
                None => {}
            }
            continue;
        }
        let file = a.name.strip_prefix("file:");
        if body.is_none() && file.is_none() {
            continue;
        }
        let text = body.and_then(text_of);
        let cut = body.is_some_and(|b| b.cut);
        let (status, diff) = match (file, inputs.workspace, &text) {
            (Some(rel), Some(workspace), Some(new)) if !cut => match workspace.original(rel) {
                Original::Text(old) if old == *new => ("unchanged", Vec::new()),
                Original::Text(old) => ("changed", diff(&old, new)),
                Original::Unreadable => ("unknown", Vec::new()),
                Original::Absent => ("new", Vec::new()),
            },
            _ => ("unknown", Vec::new()),
        };
        let url = match inputs.links {
            Links::None => None,
            Links::Viewer { run, trial } => Some(format!(
                "/api/runs/{}/trials/{}/artifacts/{}",
                encode(run),
                encode(trial),
                encode(&a.name)
            )),
        };
        let shown = Shown {
            name: a.name.clone(),
            label: file.unwrap_or(&a.name).to_owned(),
            size: a.size,
            text,
            cut,
            url,
            status,
            diff,
        };
        match a.name.as_str() {
            _ if file.is_some() => files.push(shown),
            "answer" => answer = Some(shown),
            "usage" => usage_doc = Some(shown),
            _ => logs.push(shown),
        }
    }
    let (instruction, steps, steps_cut) = match &trajectory {
        Some(t) => trajectory_parts(t),
        None => (None, Vec::new(), false),
    };
    TrialView {
        timeline: plots::timeline(&detail.summary.phases),
        t: detail,
        grade,
        instruction,
        steps,
        steps_cut,
        final_metrics: trajectory.as_ref().map(|t| t["final_metrics"].clone()),
        agent_info: trajectory.as_ref().map(|t| t["agent"].clone()),
        trajectory_note,
        files,
        logs,
        answer,
        usage_doc,
    }
}

/// The text of what was read: UTF-8, or UTF-8 cut inside a character at the end of what was
/// read (that partial character dropped); `None` for anything else (binary content).
fn text_of(b: &Body) -> Option<String> {
    match std::str::from_utf8(&b.bytes) {
        Ok(s) => Some(s.to_owned()),
        Err(e) if b.cut && e.error_len().is_none() => {
            std::str::from_utf8(&b.bytes[..e.valid_up_to()])
                .ok()
                .map(str::to_owned)
        }
        Err(_) => None,
    }
}

/// A unified diff (3 lines of context) from `old` to `new`; empty when they are equal.
pub fn diff(old: &str, new: &str) -> Vec<DiffLine> {
    let d = similar::TextDiff::from_lines(old, new);
    let mut out = Vec::new();
    for hunk in d.unified_diff().context_radius(3).iter_hunks() {
        out.push(DiffLine {
            tag: "hunk",
            text: hunk.header().to_string(),
        });
        for change in hunk.iter_changes() {
            let tag = match change.tag() {
                similar::ChangeTag::Insert => "add",
                similar::ChangeTag::Delete => "del",
                similar::ChangeTag::Equal => "eq",
            };
            out.push(DiffLine {
                tag,
                text: change.value().trim_end_matches('\n').to_owned(),
            });
        }
    }
    out
}

/// Percent-encodes a path segment (keeping `/` and `:`, which artifact names use).
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/:".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presentation::trials::{Artifact, TrialSummary};

    fn detail(artifacts: &[(&str, u64)]) -> TrialDetail {
        TrialDetail {
            summary: TrialSummary {
                id: "t1".into(),
                task_id: "task".into(),
                task_kind: "generic".into(),
                agent: "nop".into(),
                repeat_index: 0,
                state: "done".into(),
                outcome: Some("completed".into()),
                score: Some(0.0),
                passed: Some(false),
                grade_status: Some("ok".into()),
                failure: None,
                input_tokens: 0,
                output_tokens: 0,
                cost_usd: 0.0,
                started_at: None,
                finished_at: None,
                phases: BTreeMap::new(),
                duration_ms: 0,
            },
            task_hash: "h".into(),
            dimensions: BTreeMap::new(),
            flags: vec![],
            attempts: 1,
            error: None,
            isolated: Some(true),
            exit_code: Some(0),
            requests: 0,
            artifacts: artifacts
                .iter()
                .map(|(name, size)| Artifact {
                    name: (*name).into(),
                    sha256: "ab".into(),
                    size: *size,
                    media_type: None,
                })
                .collect(),
        }
    }

    fn body(text: &[u8], cut: bool) -> Body {
        Body {
            bytes: text.to_vec(),
            cut,
        }
    }

    #[test]
    fn a_diff_marks_added_and_removed_lines() {
        let d = diff("a\nb\nc\n", "a\nB\nc\nd\n");
        let tags: Vec<(&str, &str)> = d.iter().map(|l| (l.tag, l.text.as_str())).collect();
        assert_eq!(tags[0].0, "hunk");
        assert!(tags.contains(&("del", "b")) && tags.contains(&("add", "B")));
        assert!(tags.contains(&("add", "d")) && tags.contains(&("eq", "a")));
        assert!(diff("same\n", "same\n").is_empty());
    }

    /// The viewer's inputs: every artifact read, links, files against the workspace.
    #[test]
    fn the_viewer_sees_links_diffs_and_the_usage_document() {
        let d = detail(&[
            ("agent_log", 3),
            ("answer", 2),
            ("file:a.py", 6),
            ("file:b.py", 2),
            ("file:new.py", 2),
            ("file:big.bin", 9),
            ("grader_log", 2),
            ("trajectory", 40),
            ("usage", 2),
        ]);
        let bodies: Bodies = [
            ("agent_log", body(b"log", false)),
            ("answer", body(b"42", false)),
            ("file:a.py", body(b"x = 2\n", false)),
            ("file:b.py", body(b"y\n", false)),
            ("file:new.py", body(b"z\n", false)),
            ("file:big.bin", body(&[0xff, 0xfe], false)),
            ("grader_log", body(b"gl", false)),
            ("trajectory", body(b"{\"steps\": [", true)),
            ("usage", body(b"{}", false)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        #[derive(Debug)]
        struct Task;
        impl Workspace for Task {
            fn original(&self, rel: &str) -> Original {
                match rel {
                    "a.py" => Original::Text("x = 1\n".into()),
                    "b.py" => Original::Text("y\n".into()),
                    "big.bin" => Original::Unreadable,
                    _ => Original::Absent,
                }
            }
        }
        let v = trial_view(
            d,
            None,
            &Inputs {
                bodies: &bodies,
                links: Links::Viewer {
                    run: "r 1",
                    trial: "t1",
                },
                workspace: Some(&Task),
            },
        );
        let status: Vec<(&str, &str)> = v
            .files
            .iter()
            .map(|f| (f.label.as_str(), f.status))
            .collect();
        assert_eq!(
            status,
            [
                ("a.py", "changed"),
                ("b.py", "unchanged"),
                ("new.py", "new"),
                ("big.bin", "unknown")
            ]
        );
        assert!(v.files[0].diff.iter().any(|l| l.tag == "add"));
        assert_eq!(v.files[3].text, None, "binary: no text");
        assert_eq!(
            v.files[0].url.as_deref(),
            Some("/api/runs/r%201/trials/t1/artifacts/file:a.py")
        );
        let logs: Vec<&str> = v.logs.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(logs, ["agent_log", "grader_log"]);
        assert_eq!(
            v.usage_doc.and_then(|u| u.text).as_deref(),
            Some("{}"),
            "the usage document"
        );
        assert_eq!(v.answer.and_then(|a| a.text).as_deref(), Some("42"));
        assert_eq!(
            v.trajectory_note.as_deref(),
            Some("the trajectory is 40 bytes; only the raw file is available")
        );
    }

    /// The report's inputs: a few artifacts read, no links, no comparison.
    #[test]
    fn the_report_lists_files_unread_and_shows_only_what_it_read() {
        let d = detail(&[
            ("agent_log", 3),
            ("file:a.py", 6),
            ("grader_log", 2),
            ("trajectory", 5),
            ("usage", 2),
        ]);
        let bodies: Bodies = [
            ("agent_log".to_owned(), body(b"log", false)),
            ("trajectory".to_owned(), body(b"nope!", false)),
        ]
        .into_iter()
        .collect();
        let v = trial_view(
            d,
            Some(serde_json::json!({"score": 0.0})),
            &Inputs {
                bodies: &bodies,
                links: Links::None,
                workspace: None,
            },
        );
        assert_eq!(v.files.len(), 1);
        assert_eq!(
            (v.files[0].text.as_deref(), v.files[0].status),
            (None, "unknown")
        );
        assert_eq!(v.files[0].url, None);
        let logs: Vec<&str> = v.logs.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(logs, ["agent_log"], "what was not read is not shown");
        assert!(v.usage_doc.is_none() && v.answer.is_none());
        assert!(
            v.trajectory_note
                .as_deref()
                .is_some_and(|n| n.starts_with("the trajectory is not JSON: ")),
            "{:?}",
            v.trajectory_note
        );
    }

    #[test]
    fn text_cut_inside_a_character_keeps_what_came_before() {
        // "é" is two bytes; cut after the first
        assert_eq!(text_of(&body(b"ab\xc3", true)).as_deref(), Some("ab"));
        assert_eq!(text_of(&body(b"ab\xc3", false)), None);
        assert_eq!(text_of(&body(b"a\xffb", true)), None);
    }
}
