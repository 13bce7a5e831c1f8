//! Tasks delivered in turns (`[turns]` in `task.toml`): the stages are sent one per turn, in
//! order, in one conversation, each turn only once the one before it ended. A turn's prompt is
//! its stage's prompt with [`KEPT_TOKEN`] replaced by the agent's own `kept_file` as the
//! previous turn left it ([`prompt`]); after each turn the green agent keeps that file, and
//! graders read it at [`snapshot_path`] (stage id, file): the code of a turn is graded as it was
//! when the next prompt showed it, whatever later turns did to it. SciCode's step-by-step
//! protocol is built on this (`import::scicode`).

use serde::Serialize;

/// Replaced in a stage's prompt by the agent's kept file (as the previous turn left it).
pub const KEPT_TOKEN: &str = "{{kept_file}}";
/// Where the kept file of each turn is put among the agent's outputs for grading (the agent's
/// own files under it are dropped first).
pub const SNAPSHOT_DIR: &str = ".turns";

/// A task's `[turns]`, validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Turns {
    /// Relative to `/workspace`.
    pub kept_file: String,
    /// Each turn's wall-clock budget (seconds); `None`: what is left of the trial's.
    pub timeout_secs: Option<u64>,
}

/// Where the kept file of `stage`'s turn is graded, relative to `/workspace`.
pub fn snapshot_path(stage: &str, kept_file: &str) -> String {
    format!("{SNAPSHOT_DIR}/{stage}/{kept_file}")
}

/// Whether a stage id can name a snapshot folder (`[A-Za-z0-9._-]`, not `.` or `..`).
pub(crate) fn usable_stage_id(id: &str) -> bool {
    !id.is_empty()
        && id != "."
        && id != ".."
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The message of a turn: `stage_prompt` with [`KEPT_TOKEN`] replaced by `kept` (the kept file
/// as the previous turn left it; `None` when there was none).
pub fn prompt(stage_prompt: &str, kept: Option<&str>) -> String {
    let shown = match kept {
        Some(text) if !text.trim().is_empty() => text.trim_end().to_owned(),
        Some(_) => "# (the file is empty)".to_owned(),
        None => "# (there is no such file: the previous turn left none)".to_owned(),
    };
    stage_prompt.replace(KEPT_TOKEN, &shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_file_replaces_the_token_and_its_absence_is_said() {
        assert_eq!(
            prompt("a\n```\n{{kept_file}}\n```", Some("x = 1\n\n")),
            "a\n```\nx = 1\n```"
        );
        assert!(prompt("{{kept_file}}", None).contains("left none"));
        assert!(prompt("{{kept_file}}", Some(" \n")).contains("empty"));
        assert_eq!(
            snapshot_path("1.2", "solution.py"),
            ".turns/1.2/solution.py"
        );
        assert!(usable_stage_id("13.6") && !usable_stage_id("..") && !usable_stage_id("a/b"));
    }
}
