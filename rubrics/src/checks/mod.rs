//! One file per grader kind. Each kind is a struct holding its `task.toml` fields (serde) that
//! knows its `kind` tag, the held-out and workspace paths it names, what is wrong with it
//! statically ([`CheckSpec`]) and how to run it in a grading sandbox ([`Run`]).
//!
//! [`Check`] is the enum of those structs, internally tagged by `kind`; the [`checks!`] list
//! below is the only place that names every kind. To add a kind: write `checks/<kind>.rs`
//! (struct + `CheckSpec` + `Run`) and add one line to the list.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::env::{Env, Outcome};

pub(crate) mod agent_run;
pub mod author_script;
pub(crate) mod c_values;
pub(crate) mod canary;
pub use canary::VERDICT_IN_AGENT_PROCESS;
pub(crate) mod judged;

/// A path a check names, with the `task.toml` key it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathField<'a> {
    /// The key inside `check = { … }` (e.g. `hidden_tests`).
    pub key: &'static str,
    pub value: &'a str,
}

impl<'a> PathField<'a> {
    pub fn new(key: &'static str, value: &'a str) -> Self {
        Self { key, value }
    }

    /// One field per element of a list-valued key.
    pub fn all(key: &'static str, values: &'a [String]) -> impl Iterator<Item = Self> + 'a {
        values.iter().map(move |v| Self::new(key, v))
    }
}

/// Where in the check's `task.toml` text a problem points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locate {
    /// The quoted value (e.g. the compiler name).
    Value(String),
    /// The key (e.g. `rtol`).
    Key,
    /// The whole check.
    Check,
}

/// A problem found statically in a check (the task is invalid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key inside `check = { … }` the problem is about.
    pub key: &'static str,
    pub at: Locate,
    pub message: String,
}

impl Problem {
    pub fn new(key: &'static str, at: Locate, message: impl Into<String>) -> Self {
        Self {
            key,
            at,
            message: message.into(),
        }
    }
}

/// What `tasks` needs to validate a check without knowing its kind.
pub trait CheckSpec {
    /// The `kind` tag, as in `task.toml`.
    fn kind(&self) -> &'static str;
    /// Paths relative to the task's held-out folder; each must exist there.
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        Vec::new()
    }
    /// Paths relative to `/workspace` (the agent's outputs or sources); each must be relative
    /// and stay inside the workspace.
    fn output_paths(&self) -> Vec<PathField<'_>> {
        Vec::new()
    }
    /// Problems that make the check unusable (empty commands, bad tolerances).
    fn validate(&self) -> Vec<Problem> {
        Vec::new()
    }
}

/// How a check runs in the grading sandbox.
#[async_trait]
pub(crate) trait Run: CheckSpec + Sync {
    /// Grades; never fails (infrastructure problems become statuses).
    async fn run(&self, env: &Env<'_, '_>) -> Outcome;
    /// Checks that re-run the agent's code on its own outputs go after all others.
    fn runs_last(&self) -> bool {
        false
    }
    /// Checks that read the other graders' results ([`Env::evidence`]) go after every other.
    fn reads_evidence(&self) -> bool {
        false
    }
    /// Modules/attributes this check forbids (the import hook enforces them during every
    /// grader that runs agent code).
    fn forbidden(&self) -> &[String] {
        &[]
    }
    /// The trusted probes ([`Env::probe`]) this check asks for whatever the workspace holds:
    /// run (concurrently, with the snapshot) before any grader runs agent code, their answers
    /// kept for the check.
    fn probes(&self) -> Vec<Vec<String>> {
        Vec::new()
    }
}

/// A tolerance key that must lie in [`crate::bounds::TOLERANCE`] when present.
pub(crate) fn tolerance(key: &'static str, value: Option<f64>) -> Option<Problem> {
    let message = crate::bounds::TOLERANCE.outside(value?)?;
    Some(Problem::new(key, Locate::Key, message))
}

/// A list that must not be empty.
pub(crate) fn non_empty<T>(key: &'static str, list: &[T], message: &str) -> Option<Problem> {
    list.is_empty()
        .then(|| Problem::new(key, Locate::Check, message))
}

/// Declares the [`Check`] enum: one line per kind, `"tag" => Variant(module::Struct)`.
macro_rules! checks {
    ($($tag:literal => $variant:ident($module:ident::$ty:ident)),+ $(,)?) => {
        $(pub mod $module;)+

        /// What a grader does. Deterministic checks first; `judge`-based ones only where
        /// nothing else can decide.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum Check {
            $(#[serde(rename = $tag)] $variant($module::$ty),)+
        }

        impl Check {
            fn inner(&self) -> &dyn Run {
                match self {
                    $(Check::$variant(c) => c,)+
                }
            }
        }

        $(impl From<$module::$ty> for Check {
            fn from(c: $module::$ty) -> Self {
                Check::$variant(c)
            }
        })+
    };
}

checks! {
    "pytest" => Pytest(pytest::Pytest),
    "unittest" => Unittest(unittest::Unittest),
    "testthat" => Testthat(testthat::Testthat),
    "c_test" => CTest(c_test::CTest),
    "command" => Command(command::Command),
    "harbor_verifier" => HarborVerifier(harbor_verifier::HarborVerifier),
    "scicode_steps" => ScicodeSteps(scicode_steps::ScicodeSteps),
    "csv" => Csv(csv::Csv),
    "reproduce" => Reproduce(reproduce::Reproduce),
    "files_exist" => FilesExist(files_exist::FilesExist),
    "forbidden_api" => ForbiddenApi(forbidden_api::ForbiddenApi),
    "paperbench_tree" => PaperbenchTree(paperbench_tree::PaperbenchTree),
    "discrepancy" => Discrepancy(discrepancy::Discrepancy),
    "judge" => Judge(judge::Judge),
    "prbench_dimension" => PrbenchDimension(prbench_dimension::PrbenchDimension),
}

impl CheckSpec for Check {
    fn kind(&self) -> &'static str {
        self.inner().kind()
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        self.inner().held_out_paths()
    }
    fn output_paths(&self) -> Vec<PathField<'_>> {
        self.inner().output_paths()
    }
    fn validate(&self) -> Vec<Problem> {
        self.inner().validate()
    }
}

impl Check {
    pub(crate) async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        self.inner().run(env).await
    }
    pub(crate) fn runs_last(&self) -> bool {
        self.inner().runs_last()
    }
    pub(crate) fn reads_evidence(&self) -> bool {
        self.inner().reads_evidence()
    }
    pub(crate) fn forbidden(&self) -> &[String] {
        self.inner().forbidden()
    }
    pub(crate) fn probes(&self) -> Vec<Vec<String>> {
        self.inner().probes()
    }
}
