//! The agent's files against the task's workspace: finds the task's folder from the run's plan
//! (read-only, bounded) and reads the workspace file of a collected file's path (the diff is
//! `presentation::trial_view`'s).
//! Artifact paths come from the agent: only plain relative paths resolving inside the task's
//! `workspace/` are ever read.

use std::path::{Component, Path, PathBuf};

use crate::presentation::trial_view::{Original, Workspace};

/// Largest task.toml read while looking for a task.
const MAX_TOML_BYTES: u64 = 1024 * 1024;
/// Most folders looked at under one suite path.
const MAX_ENTRIES: usize = 10_000;

fn task_id_of(dir: &Path) -> Option<String> {
    let toml_path = dir.join("task.toml");
    let meta = std::fs::metadata(&toml_path).ok()?;
    if !meta.is_file() || meta.len() > MAX_TOML_BYTES {
        return None;
    }
    let text = std::fs::read_to_string(&toml_path).ok()?;
    let value: toml::Value = toml::from_str(&text).ok()?;
    value.get("id")?.as_str().map(str::to_owned)
}

/// The folder of `task_id` among the plan's task paths (each a task folder or a suite of them).
pub fn task_folder(plan: &serde_json::Value, task_id: &str) -> Option<PathBuf> {
    for p in plan["tasks"].as_array()?.iter().filter_map(|v| v.as_str()) {
        let p = PathBuf::from(p);
        if task_id_of(&p).as_deref() == Some(task_id) {
            return Some(p);
        }
        let Ok(entries) = std::fs::read_dir(&p) else {
            continue;
        };
        for e in entries.flatten().take(MAX_ENTRIES) {
            let dir = e.path();
            if dir.is_dir() && task_id_of(&dir).as_deref() == Some(task_id) {
                return Some(dir);
            }
        }
    }
    None
}

/// The task workspace's text of `rel` (`None` when absent, unreadable, too big, not UTF-8, or
/// when `rel` is not a plain relative path inside the workspace).
pub fn original(task: &Path, rel: &str, max: u64) -> Option<String> {
    let rel_path = Path::new(rel);
    if rel.is_empty()
        || !rel_path
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let root = task.join("workspace").canonicalize().ok()?;
    let file = root.join(rel_path).canonicalize().ok()?;
    if !file.starts_with(&root) {
        return None;
    }
    let meta = std::fs::metadata(&file).ok()?;
    if !meta.is_file() || meta.len() > max {
        return None;
    }
    String::from_utf8(std::fs::read(&file).ok()?).ok()
}

/// A task's folder, as the trial page compares the agent's files with its workspace (files
/// over `max` bytes are not compared).
#[derive(Debug)]
pub struct TaskWorkspace<'a> {
    pub task: &'a Path,
    pub max: u64,
}

impl Workspace for TaskWorkspace<'_> {
    /// The workspace's text of `rel`; absent (the agent created the file); or unreadable (too
    /// big, not UTF-8, not a plain path inside it).
    fn original(&self, rel: &str) -> Original {
        match original(self.task, rel, self.max) {
            Some(text) => Original::Text(text),
            None if self.task.join("workspace").join(rel).exists() => Original::Unreadable,
            None => Original::Absent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_paths_inside_the_workspace_are_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let task = dir.path().join("t");
        std::fs::create_dir_all(task.join("workspace/sub")).expect("mkdir");
        std::fs::create_dir_all(task.join("hidden")).expect("mkdir");
        std::fs::write(task.join("workspace/sub/a.py"), "x = 1\n").expect("write");
        std::fs::write(task.join("hidden/secret.csv"), "expected\n").expect("write");
        std::os::unix::fs::symlink(task.join("hidden/secret.csv"), task.join("workspace/link"))
            .expect("symlink");
        assert_eq!(
            original(&task, "sub/a.py", 1024).as_deref(),
            Some("x = 1\n")
        );
        for bad in [
            "../hidden/secret.csv",
            "/etc/passwd",
            "sub/../../hidden/secret.csv",
            "link",
            "",
            "sub",
        ] {
            assert_eq!(original(&task, bad, 1024), None, "{bad}");
        }
        assert_eq!(original(&task, "sub/a.py", 3), None, "over the size cap");
        let ws = |max| TaskWorkspace { task: &task, max };
        assert_eq!(ws(1024).original("sub/b.py"), Original::Absent);
        assert_eq!(ws(3).original("sub/a.py"), Original::Unreadable);
        assert_eq!(ws(1024).original("link"), Original::Unreadable);
        assert_eq!(
            ws(1024).original("sub/a.py"),
            Original::Text("x = 1\n".into())
        );
    }

    #[test]
    fn a_task_is_found_in_a_suite_by_its_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let task = dir.path().join("folder-name");
        std::fs::create_dir_all(&task).expect("mkdir");
        std::fs::write(
            task.join("task.toml"),
            "id = \"the-id\"\nkind = \"generic\"\n",
        )
        .expect("write");
        let plan = serde_json::json!({"tasks": [dir.path()]});
        assert_eq!(task_folder(&plan, "the-id"), Some(task.clone()));
        let plan = serde_json::json!({"tasks": [task]});
        assert_eq!(task_folder(&plan, "the-id"), Some(task));
        assert_eq!(task_folder(&plan, "other"), None);
    }
}
