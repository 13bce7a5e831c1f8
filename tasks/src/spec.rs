//! The on-disk format of `task.toml`: every key is declared here and unknown keys are errors.
//!
//! ```toml
//! id = "damped-oscillator"
//! kind = "prbench"
//! instruction = "instruction.md"      # markdown, relative to the task folder
//! attachments = ["paper.md"]          # agent-visible files, relative to `workspace/`
//! expected_outputs = ["results/trajectory.csv"]
//!
//! [environment]
//! image = "python"                    # `python`, `sci` or any image reference the engine has
//! cpus = 1.0
//! memory_mb = 2048
//! agent_timeout_secs = 900
//! grading_timeout_secs = 300
//! network = "model_proxy"             # or "none"
//! pip_install = ["tabulate==0.9.0"]   # PyPI packages: a per-task image FROM `image` (python/sci)
//!
//! [constraints]
//! forbidden_modules = ["numpy.fft"]
//! notes = ["Do not edit tests."]
//!
//! [[stages]]                          # optional, rendered in dependency order
//! id = "1.1"
//! prompt = "Write f(x)."               # or prompt_file = "stages/1.md"
//! depends_on = []
//!
//! [turns]                             # optional: the stages are sent one per turn (crate::turns)
//! kept_file = "solution.py"           # shown in later turns' prompts, kept per turn for grading
//! timeout_secs = 1800                 # each turn's budget (the trial's stays agent_timeout_secs)
//!
//! [grading]                           # `rubrics::GradingSpec`
//! ```
//! Folders default to `workspace/` (agent-visible), `hidden/` (held out, graders only) and
//! `solution/` (the oracle's reference solution, with `solve.sh`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// Which benchmark family a task belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    Prbench,
    Scicode,
    Mmsicode,
    Arbench,
    Scicoqa,
    Paperbench,
    Harbor,
    Generic,
}

impl TaskKind {
    /// Every kind.
    pub const ALL: [TaskKind; 8] = [
        TaskKind::Prbench,
        TaskKind::Scicode,
        TaskKind::Mmsicode,
        TaskKind::Arbench,
        TaskKind::Scicoqa,
        TaskKind::Paperbench,
        TaskKind::Harbor,
        TaskKind::Generic,
    ];

    /// The snake_case name used in `task.toml`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskKind::Prbench => "prbench",
            TaskKind::Scicode => "scicode",
            TaskKind::Mmsicode => "mmsicode",
            TaskKind::Arbench => "arbench",
            TaskKind::Scicoqa => "scicoqa",
            TaskKind::Paperbench => "paperbench",
            TaskKind::Harbor => "harbor",
            TaskKind::Generic => "generic",
        }
    }
}

/// What an agent container may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkAccess {
    /// Only the platform's model proxy (the default).
    #[default]
    ModelProxy,
    /// Nothing at all.
    None,
}

fn default_image() -> String {
    "python".to_owned()
}
fn default_cpus() -> f64 {
    1.0
}
fn default_memory_mb() -> u64 {
    2048
}
fn default_agent_timeout() -> u64 {
    1800
}
fn default_grading_timeout() -> u64 {
    600
}

/// Where and with what resources the task runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    /// `python`, `sci` (platform images, resolved by `sandbox::images`) or any image reference.
    #[serde(default = "default_image")]
    pub image: String,
    #[serde(default = "default_cpus")]
    pub cpus: f64,
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u64,
    #[serde(default = "default_agent_timeout")]
    pub agent_timeout_secs: u64,
    #[serde(default = "default_grading_timeout")]
    pub grading_timeout_secs: u64,
    #[serde(default)]
    pub network: NetworkAccess,
    /// Python packages from PyPI (`name` or `name<specifier>`) the task needs beyond the
    /// image: both the agent's and the grading container then run a per-task image built
    /// `FROM` the platform image `image` (`sandbox::images::derived`), once per run before any
    /// trial, cached by (base image, packages, pip version).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pip_install: Vec<String>,
}

impl Default for Environment {
    fn default() -> Self {
        Self {
            image: default_image(),
            cpus: default_cpus(),
            memory_mb: default_memory_mb(),
            agent_timeout_secs: default_agent_timeout(),
            grading_timeout_secs: default_grading_timeout(),
            network: NetworkAccess::default(),
            pip_install: Vec::new(),
        }
    }
}

/// Rules the agent is told about (and that graders such as `forbidden_api` enforce).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraints {
    /// Python modules or attribute chains the solution must not use (e.g. `numpy.fft`).
    #[serde(default)]
    pub forbidden_modules: Vec<String>,
    /// Free-form rules shown to the agent.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One ordered stage (a SciCode step, a milestone) with its own prompt.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageFile {
    pub id: Spanned<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Inline prompt (markdown).
    #[serde(default)]
    pub prompt: Option<Spanned<String>>,
    /// Prompt in a markdown file relative to the task folder.
    #[serde(default)]
    pub prompt_file: Option<Spanned<String>>,
    /// Stages that must come before this one.
    #[serde(default)]
    pub depends_on: Vec<Spanned<String>>,
}

/// `[turns]`: the stages are delivered one per turn, in order, in one conversation; each turn's
/// prompt may show the agent's own `kept_file` as the previous turn left it (see
/// [`crate::turns`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnsFile {
    /// The workspace file (relative to `/workspace`) shown in later prompts and kept per turn.
    pub kept_file: String,
    /// Each turn's wall-clock budget; the whole trial keeps `environment.agent_timeout_secs`.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// `task.toml` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskFile {
    pub id: Spanned<String>,
    pub kind: TaskKind,
    pub instruction: Spanned<String>,
    #[serde(default)]
    pub attachments: Vec<Spanned<String>>,
    #[serde(default)]
    pub workspace: Option<Spanned<String>>,
    #[serde(default)]
    pub hidden: Option<Spanned<String>>,
    #[serde(default)]
    pub solution: Option<Spanned<String>>,
    #[serde(default)]
    pub expected_outputs: Vec<Spanned<String>>,
    #[serde(default)]
    pub environment: Environment,
    #[serde(default)]
    pub constraints: Constraints,
    #[serde(default)]
    pub stages: Vec<StageFile>,
    #[serde(default)]
    pub turns: Option<Spanned<TurnsFile>>,
    /// Free-form provenance (source benchmark, upstream id, import options).
    #[serde(default)]
    pub metadata: BTreeMap<String, toml::Value>,
    pub grading: Spanned<rubrics::GradingSpec>,
}
