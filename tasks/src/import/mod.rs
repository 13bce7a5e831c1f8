//! Importers: turn a benchmark's own layout into task folders (`task.toml` + `workspace/`,
//! `hidden/`, `solution/`), each validated by [`crate::load_task`] before it is reported.
//!
//! - [`scicode`]: SciCode JSONL; targets from a targets file ([`scicode_h5`]) or derived by
//!   running gold code in a sandbox.
//! - [`prbench`]: PRBench task folders (`task.yaml`, `instruction.md`, `data/`, `reproduce/`).
//! - [`paperbench`]: PaperBench rubric trees.
//! - [`scicoqa`]: SciCoQA discrepancy records (JSONL).
//! - [`harbor`]: Harbor task folders (`task.toml`, `tests/test.sh`, `solution/solve.sh`).
//! - [`mmsicode`]: masked-function samples (Python, C, C++, R).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::TaskError;
use crate::spec::{Constraints, Environment, TaskKind};

pub mod harbor;
pub mod mmsicode;
pub mod paperbench;
pub mod prbench;
pub mod scicode;
pub mod scicode_h5;
pub mod scicoqa;

/// The source formats `green-agent tasks import KIND SRC DEST` understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportKind {
    Scicode,
    Prbench,
    Paperbench,
    Scicoqa,
    Harbor,
    Mmsicode,
}

impl ImportKind {
    pub const ALL: [ImportKind; 6] = [
        ImportKind::Scicode,
        ImportKind::Prbench,
        ImportKind::Paperbench,
        ImportKind::Scicoqa,
        ImportKind::Harbor,
        ImportKind::Mmsicode,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ImportKind::Scicode => "scicode",
            ImportKind::Prbench => "prbench",
            ImportKind::Paperbench => "paperbench",
            ImportKind::Scicoqa => "scicoqa",
            ImportKind::Harbor => "harbor",
            ImportKind::Mmsicode => "mmsicode",
        }
    }

    /// Whether the importer runs code in a sandbox (then use [`scicode::import`] directly).
    pub fn needs_sandbox(self) -> bool {
        self == ImportKind::Scicode
    }
}

impl std::str::FromStr for ImportKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ImportKind::ALL
            .into_iter()
            .find(|k| k.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = ImportKind::ALL.iter().map(|k| k.as_str()).collect();
                format!(
                    "unknown import kind `{text}`; use one of {}",
                    names.join(", ")
                )
            })
    }
}

/// Imports with default options every kind that needs no sandbox (all but SciCode). `src` is
/// the source file or folder; returns the task folders written under `dest`, validated.
pub fn import_local(
    kind: ImportKind,
    src: &Path,
    dest: &Path,
) -> Result<Vec<PathBuf>, ImportError> {
    match kind {
        ImportKind::Prbench => prbench::import(src, dest),
        ImportKind::Paperbench => Ok(vec![paperbench::import(src, dest, &Default::default())?]),
        ImportKind::Scicoqa => scicoqa::import(src, dest, &Default::default()),
        ImportKind::Harbor => Ok(vec![harbor::import(src, dest, &Default::default())?]),
        ImportKind::Mmsicode => Ok(vec![mmsicode::import(src, dest)?]),
        ImportKind::Scicode => Err(ImportError::Source {
            path: src.to_path_buf(),
            line: None,
            message: "SciCode imports run gold code in a sandbox: call `tasks::import::scicode::import` with a backend".into(),
        }),
    }
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The source is not in the expected format.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Source {
        path: PathBuf,
        line: Option<usize>,
        message: String,
    },
    /// The destination task folder exists already.
    #[error("{} exists already; remove it or import into another folder", path.display())]
    DestinationExists { path: PathBuf },
    /// Running code in the sandbox failed (not the code's own failure: the sandbox's).
    #[error("sandbox failed while {during}: {source}")]
    Sandbox {
        during: String,
        #[source]
        source: sandbox::SandboxError,
    },
    /// Deriving targets from gold code failed.
    #[error("deriving targets failed:\n{0}")]
    Derive(String),
    /// A SciCode targets file (`--targets test_data.h5`) could not be read or written.
    #[error("targets file: {0}")]
    Targets(String),
    /// Some problems could not be imported (each names its step, test case, cause and limit).
    #[error("{} problem(s) not imported:\n{}", .0.len(), .0.iter().map(|f| format!("  {f}")).collect::<Vec<_>>().join("\n"))]
    Problems(Vec<scicode::ProblemFailure>),
    /// The task we wrote does not validate (a bug in the importer or odd source data).
    #[error("the imported task does not validate: {0}")]
    Task(#[from] TaskError),
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ImportError + '_ {
    move |source| ImportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes the `scicode_steps` grader's runner and the modules it imports into `dir`, for the
/// SciCode importer's scripts that run beside it: the files grading ships
/// (`rubrics::grade::SCICODE_FILES`), never a copy of our own.
pub(crate) fn write_scicode_runner(dir: &Path) -> Result<(), ImportError> {
    for (name, text) in rubrics::grade::SCICODE_FILES {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(io_err(&path))?;
    }
    Ok(())
}

/// `task.toml` as importers write it.
#[derive(Debug, Serialize)]
pub(crate) struct TaskToml {
    pub id: String,
    pub kind: TaskKind,
    pub instruction: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expected_outputs: Vec<String>,
    pub environment: Environment,
    pub constraints: Constraints,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, toml::Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stages: Vec<StageToml>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turns: Option<crate::spec::TurnsFile>,
    pub grading: rubrics::GradingSpec,
}

#[derive(Debug, Serialize)]
pub(crate) struct StageToml {
    pub id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub prompt: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

/// A task folder being written: built in a hidden staging folder beside its destination and
/// moved into place only once it validates, so a failed import leaves nothing behind.
#[derive(Debug)]
pub(crate) struct TaskDir {
    /// The staging folder (files are written here).
    pub root: PathBuf,
    final_root: PathBuf,
    finished: bool,
}

impl TaskDir {
    /// Starts `dest/<id>`, refusing to replace an existing folder.
    pub fn create(dest: &Path, id: &str) -> Result<Self, ImportError> {
        let final_root = dest.join(id);
        if final_root.exists() {
            return Err(ImportError::DestinationExists { path: final_root });
        }
        let root = dest.join(format!(".{id}.partial-{}", std::process::id()));
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(io_err(&root))?;
        }
        std::fs::create_dir_all(root.join("workspace")).map_err(io_err(&root))?;
        Ok(Self {
            root,
            final_root,
            finished: false,
        })
    }

    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> Result<PathBuf, ImportError> {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        std::fs::write(&path, contents).map_err(io_err(&path))?;
        Ok(path)
    }

    pub fn write_script(&self, rel: &str, contents: &str) -> Result<PathBuf, ImportError> {
        let path = self.write(rel, contents)?;
        set_executable(&path)?;
        Ok(path)
    }

    /// Copies a folder's contents (regular files only; symlinks are refused) under `rel`.
    pub fn copy_dir(&self, from: &Path, rel: &str) -> Result<(), ImportError> {
        copy_tree(from, &self.root.join(rel))
    }

    /// Writes `task.toml`, proves the folder validates, and moves it into place.
    pub fn finish(mut self, toml: &TaskToml) -> Result<PathBuf, ImportError> {
        let text = toml::to_string_pretty(toml).map_err(|err| ImportError::Source {
            path: self.final_root.join(crate::TASK_FILE),
            line: None,
            message: format!("cannot serialise task.toml: {err}"),
        })?;
        let header = "# Written by the research-bench importer; edit freely.\n";
        self.write(crate::TASK_FILE, format!("{header}{text}"))?;
        crate::load_task(&self.root)?;
        if self.final_root.exists() {
            return Err(ImportError::DestinationExists {
                path: self.final_root.clone(),
            });
        }
        std::fs::rename(&self.root, &self.final_root).map_err(io_err(&self.final_root))?;
        self.finished = true;
        Ok(self.final_root.clone())
    }
}

impl Drop for TaskDir {
    fn drop(&mut self) {
        if !self.finished
            && let Err(err) = std::fs::remove_dir_all(&self.root)
        {
            tracing::warn!(path = %self.root.display(), %err, "could not remove a partial import");
        }
    }
}

pub(crate) fn set_executable(path: &Path) -> Result<(), ImportError> {
    use std::os::unix::fs::PermissionsExt;
    let mut perms = std::fs::metadata(path).map_err(io_err(path))?.permissions();
    perms.set_mode(perms.mode() | 0o755);
    std::fs::set_permissions(path, perms).map_err(io_err(path))
}

/// Copies regular files and folders from `from` into `to`; symlinks are an error (a source
/// could otherwise smuggle a file from outside into a task).
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), ImportError> {
    for entry in walkdir::WalkDir::new(from).sort_by_file_name() {
        let entry = entry.map_err(|err| ImportError::Io {
            path: err
                .path()
                .map_or_else(|| from.to_path_buf(), Path::to_path_buf),
            source: err.into(),
        })?;
        let rel = entry.path().strip_prefix(from).unwrap_or(entry.path());
        let target = to.join(rel);
        if entry.path_is_symlink() {
            return Err(ImportError::Source {
                path: entry.path().to_path_buf(),
                line: None,
                message: "symlinks are not imported; replace it with the file".into(),
            });
        } else if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).map_err(io_err(&target))?;
        } else {
            std::fs::copy(entry.path(), &target).map_err(io_err(entry.path()))?;
        }
    }
    Ok(())
}

/// A task id from free text: lowercase letters, digits and `-`.
pub(crate) fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

pub(crate) fn one_dimension(name: &str) -> Option<BTreeMap<String, f64>> {
    Some([(name.to_owned(), 1.0)].into_iter().collect())
}
