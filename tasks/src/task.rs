//! A loaded, validated task and the three views of it: what the agent may see ([`AgentView`]),
//! what only graders see ([`HeldOut`]) and what only the `oracle` agent gets
//! ([`OracleSolution`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::TaskError;
use crate::spec::{Constraints, Environment, TaskKind};

/// The oracle's entry point inside `solution/`.
pub const SOLVE_SCRIPT: &str = "solve.sh";

/// One ordered stage with its prompt (prompt files already read).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stage {
    pub id: String,
    pub title: Option<String>,
    pub prompt: String,
    pub depends_on: Vec<String>,
}

/// A validated task. Only [`Task::agent_view`] may feed agent-side code.
#[derive(Debug, Clone)]
pub struct Task {
    pub(crate) id: String,
    pub(crate) kind: TaskKind,
    pub(crate) instruction: String,
    pub(crate) attachments: Vec<String>,
    pub(crate) workspace_dir: PathBuf,
    pub(crate) hidden_dir: Option<PathBuf>,
    pub(crate) solution_dir: Option<PathBuf>,
    pub(crate) expected_outputs: Vec<String>,
    pub(crate) environment: Environment,
    pub(crate) constraints: Constraints,
    /// In dependency order (stable with respect to the file's order).
    pub(crate) stages: Vec<Stage>,
    /// `[turns]`: the stages are sent one per turn.
    pub(crate) turns: Option<crate::Turns>,
    pub(crate) metadata: BTreeMap<String, toml::Value>,
    pub(crate) grading: rubrics::GradingSpec,
    pub(crate) content_hash: String,
    pub(crate) task_toml: PathBuf,
}

impl Task {
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn kind(&self) -> TaskKind {
        self.kind
    }

    pub fn environment(&self) -> &Environment {
        &self.environment
    }

    pub fn constraints(&self) -> &Constraints {
        &self.constraints
    }

    pub fn expected_outputs(&self) -> &[String] {
        &self.expected_outputs
    }

    /// Stages in the order they are presented (dependencies first).
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// `[turns]`: the stages are sent one per turn ([`crate::turns`]).
    pub fn turns(&self) -> Option<&crate::Turns> {
        self.turns.as_ref()
    }

    /// Free-form provenance from `[metadata]`.
    pub fn metadata(&self) -> &BTreeMap<String, toml::Value> {
        &self.metadata
    }

    /// Notes an importer left for whoever runs the task (`[metadata] import_notes`, e.g. a
    /// SciCoQA task imported without its paper and code); `tasks validate` prints them.
    pub fn notes(&self) -> Vec<String> {
        match self.metadata.get(crate::IMPORT_NOTES_KEY) {
            Some(toml::Value::String(s)) => vec![s.clone()],
            Some(toml::Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The `task.toml` this task was loaded from (for messages).
    pub fn task_toml(&self) -> &Path {
        &self.task_toml
    }

    /// The grading section.
    pub fn grading(&self) -> &rubrics::GradingSpec {
        &self.grading
    }

    /// sha256 over every file of the task folder (sorted relative paths, kinds, contents),
    /// computed at load time; a trial's identity includes it.
    pub fn content_hash(&self) -> String {
        self.content_hash.clone()
    }

    /// Everything an agent may see. It holds no path to a held-out or solution file.
    pub fn agent_view(&self) -> AgentView {
        AgentView {
            task_id: self.id.clone(),
            kind: self.kind,
            instruction: crate::instruction::render(&crate::instruction::Parts {
                kind: self.kind,
                instruction: &self.instruction,
                stages: self
                    .stages
                    .iter()
                    .map(|s| (s.id.as_str(), s.title.as_deref(), s.prompt.as_str()))
                    .collect(),
                attachments: &self.attachments,
                expected_outputs: &self.expected_outputs,
                constraints: &self.constraints,
            }),
            stages: self.stages.clone(),
            turns: self.turns.clone(),
            workspace: Workspace {
                dir: self.workspace_dir.clone(),
            },
            attachments: self.attachments.clone(),
            expected_outputs: self.expected_outputs.clone(),
            constraints: self.constraints.clone(),
            environment: self.environment.clone(),
        }
    }

    /// The held-out files, for grading containers only (mounted at `/grader/hidden`).
    pub fn held_out(&self) -> HeldOut {
        HeldOut {
            dir: self.hidden_dir.clone(),
        }
    }

    /// The reference solution, for the `oracle` agent only (mounted at `/oracle/solution`).
    pub fn oracle_solution(&self) -> Option<OracleSolution> {
        self.solution_dir.as_ref().map(|dir| OracleSolution {
            dir: dir.clone(),
            entrypoint: SOLVE_SCRIPT.to_owned(),
        })
    }
}

/// What agent-side code gets: the rendered instruction, the workspace folder, and the task's
/// public settings. Nothing in it names a held-out or solution path.
#[derive(Debug, Clone, Serialize)]
pub struct AgentView {
    pub task_id: String,
    pub kind: TaskKind,
    /// The instruction with stages, attachments, expected outputs and constraints rendered.
    pub instruction: String,
    pub stages: Vec<Stage>,
    /// `[turns]`: the stages are sent one per turn ([`crate::turns::prompt`]).
    pub turns: Option<crate::Turns>,
    pub workspace: Workspace,
    /// Attached files (e.g. the paper), relative to the workspace.
    pub attachments: Vec<String>,
    pub expected_outputs: Vec<String>,
    pub constraints: Constraints,
    pub environment: Environment,
}

/// The agent-visible files of a task. Only the loader can make one, always from the task's
/// validated `workspace/` folder, which neither holds nor links to held-out files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Workspace {
    dir: PathBuf,
}

/// One agent-visible file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkspaceFile {
    /// Relative to the workspace, `/`-separated.
    pub relative: String,
    pub host_path: PathBuf,
}

impl Workspace {
    /// The host folder to copy into `/workspace`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every regular file of the workspace, sorted.
    pub fn files(&self) -> Result<Vec<WorkspaceFile>, TaskError> {
        let mut files = Vec::new();
        for entry in walkdir::WalkDir::new(&self.dir).sort_by_file_name() {
            let entry = entry.map_err(|err| TaskError::Io {
                path: err
                    .path()
                    .map_or_else(|| self.dir.clone(), Path::to_path_buf),
                source: err.into(),
            })?;
            if entry.file_type().is_file() {
                files.push(WorkspaceFile {
                    relative: crate::paths::relative_slash(entry.path(), &self.dir),
                    host_path: entry.path().to_path_buf(),
                });
            }
        }
        Ok(files)
    }
}

/// The held-out files (tests, expected data, rubrics, reference code): grading containers only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldOut {
    dir: Option<PathBuf>,
}

impl HeldOut {
    /// The host folder to mount at `/grader/hidden`; `None` when the task has no held-out files.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }
}

/// The reference solution: the `oracle` agent only. It runs `entrypoint` with cwd `/workspace`
/// and the folder mounted at `/oracle/solution`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OracleSolution {
    pub dir: PathBuf,
    /// `solve.sh`, relative to `dir`.
    pub entrypoint: String,
}
