//! SciCode importer: one task per main problem, one stage per sub-step.
//!
//! SciCode's numeric targets are not public, so [`import`] derives them: it runs the shipped
//! `scicode_targets.py` in a sandbox, which executes each test snippet with the gold code of the
//! step (and of every earlier step) loaded and records the value compared against `target`.
//! The cases land in `hidden/scicode_cases.json` (the format the `scicode_steps` grader reads):
//!
//! ```json
//! {"problem_id": "1", "required_dependencies": "import numpy as np\n...",
//!  "steps": [{"step_id": "1.1", "function_header": "def f(...):",
//!             "test_cases": [{"test": "<snippet using target>", "target": <encoded>}]}]}
//! ```
//! Encoded values are plain JSON, or tagged: `{"$float": "nan"|"inf"|"-inf"}`,
//! `{"$complex": [re, im]}`, `{"$tuple": [...]}`, `{"$dict": [[k, v], ...]}`,
//! `{"$ndarray": {"dtype", "shape", "data"}}`.
//!
//! With [`ScicodeOptions::verify_gold`] the importer also checks, in the same sandbox, that the
//! gold code passes every derived case (this catches non-deterministic tests).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rubrics::{Check, GraderSpec, GradingSpec};

use super::scicode_h5;

mod stepwise;
use sandbox::{Backend, ExecRequest, Limits, NetworkPolicy, Owner, Sandbox, SandboxSpec};
use serde::{Deserialize, Serialize};

use super::{
    ImportError, StageToml, TaskDir, TaskToml, io_err, one_dimension, write_scicode_runner,
};
use crate::spec::{Constraints, Environment, TaskKind};

/// The derive/check script run inside the sandbox, beside the `scicode_steps` grader's runner
/// and its modules ([`write_scicode_runner`]): derivation splits snippets exactly as grading
/// does, and the gold check goes through the runner.
pub const TARGETS_SCRIPT: &str = include_str!("../scicode_targets.py");
/// Task metadata: the problem's tested steps (both protocols).
pub const PROBLEM_STEPS_KEY: &str = "problem_steps";
/// Task metadata: the one step a task grades (step-by-step tasks imported one per step, before
/// the protocol delivered the steps in turns; still read).
pub const STEP_KEY: &str = "step_id";
/// Where the cases live in a task's `hidden/` folder.
pub const CASES_FILE: &str = "scicode_cases.json";
/// The agent's solution file in `/workspace`.
pub const SOLUTION_FILE: &str = "solution.py";

const WORKDIR: &str = "/work";
/// Key of the cases file: how long the gold code's slowest case took when imported (seconds).
const SLOWEST_KEY: &str = "gold_slowest_case_secs";
/// A graded case may take this many times as long as the gold code's slowest (at least
/// [`MIN_CASE_TIMEOUT_SECS`]): machines differ, and so does their load.
const CASE_TIMEOUT_FACTOR: f64 = 10.0;
const MIN_CASE_TIMEOUT_SECS: u64 = 60;
/// Default memory of the derivation sandbox (MB).
pub const DEFAULT_MEMORY_MB: u64 = 2048;
const MAX_OUTPUT_BYTES: u64 = 512 * 1024 * 1024;

/// What an imported SciCode task grades, from its metadata (for
/// [`rubrics::scicode_score::score`]); `None` for other tasks.
pub fn task_steps(task: &crate::Task) -> Option<rubrics::scicode_score::TaskSteps> {
    let meta = task.metadata();
    let problem_id = meta.get("problem_id")?.as_str()?.to_owned();
    let problem_steps: Vec<String> = meta
        .get(PROBLEM_STEPS_KEY)?
        .as_array()?
        .iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    let graded = match meta.get(STEP_KEY).and_then(|v| v.as_str()) {
        Some(step) => vec![step.to_owned()],
        None => problem_steps.clone(),
    };
    Some(rubrics::scicode_score::TaskSteps {
        problem_id,
        problem_steps,
        graded,
    })
}

/// Which of SciCode's settings the imported tasks follow (`--protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// One task per main problem: one agent run writes every step, every step is graded
    /// (`whole-problem`).
    #[default]
    WholeProblem,
    /// Upstream's main setting (`step-by-step`): one task per main problem whose tested steps
    /// are asked one per turn, each prompt showing the agent's own code for the steps before
    /// (upstream's code for an untested step); step k is graded on the code as it was at the
    /// end of turn k. A problem counts as solved when every one of its steps passes.
    StepByStep,
}

impl Protocol {
    /// The name used by `--protocol` and in task metadata.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::WholeProblem => "whole-problem",
            Protocol::StepByStep => "step-by-step",
        }
    }
}

impl std::str::FromStr for Protocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "whole-problem" => Ok(Protocol::WholeProblem),
            "step-by-step" => Ok(Protocol::StepByStep),
            other => Err(format!(
                "unknown SciCode protocol `{other}`: use `whole-problem` (one agent run writes \
                 every step) or `step-by-step` (upstream's main setting: the steps one per turn, \
                 each prompt showing the agent's own code for the steps before it)"
            )),
        }
    }
}

/// How to import.
#[derive(Debug, Clone)]
pub struct ScicodeOptions {
    /// Include the scientific background of the problem and of each step.
    pub with_background: bool,
    pub protocol: Protocol,
    /// Image reference for deriving targets (e.g. `sandbox::images::resolve("python")`).
    pub image: String,
    /// Labels of the utility sandbox.
    pub owner: Owner,
    /// Deadline of each problem's derivation (and of its gold check): `--timeout-secs`.
    pub timeout: Duration,
    /// Memory of the derivation sandbox, and of the imported tasks' containers: `--memory-mb`.
    pub memory_mb: u64,
    /// Check that the gold code passes every derived case.
    pub verify_gold: bool,
    /// Add a perturbed copy of each case that compares against `target` (`--perturbed-inputs`,
    /// off by default): float inputs moved a little, the target derived from the gold code.
    /// Each copy is marked `"perturbed": {"of": <case>, "inputs": [...], "seed": n}` in
    /// `scicode_cases.json`, and counted in the file's `perturbed_cases`.
    pub perturbed_inputs: bool,
    /// Only these problem ids (all when empty).
    pub only: Vec<String>,
    /// Upstream's targets file (`test_data.h5`, `--targets`): its targets win over derived
    /// ones, and a problem without gold code is imported from it (without an oracle).
    pub targets: Option<PathBuf>,
    /// The Python (with h5py) that reads the targets file ([`scicode_h5::default_python`]).
    pub python: PathBuf,
}

impl ScicodeOptions {
    /// Options deriving in the platform's `python` image (`sandbox::images::resolve`).
    pub async fn platform(owner: Owner) -> Self {
        Self::new(sandbox::images::resolve("python").await, owner)
    }

    pub fn new(image: impl Into<String>, owner: Owner) -> Self {
        Self {
            with_background: false,
            protocol: Protocol::WholeProblem,
            image: image.into(),
            owner,
            timeout: Duration::from_secs(1800),
            memory_mb: DEFAULT_MEMORY_MB,
            verify_gold: true,
            perturbed_inputs: false,
            only: Vec::new(),
            targets: None,
            python: scicode_h5::default_python(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct Problem {
    pub(super) problem_id: String,
    #[serde(default, deserialize_with = "text")]
    pub(super) problem_name: String,
    #[serde(default, deserialize_with = "text")]
    pub(super) problem_description_main: String,
    #[serde(default, deserialize_with = "text")]
    pub(super) problem_background_main: String,
    #[serde(default, deserialize_with = "text")]
    pub(super) problem_io: String,
    #[serde(default, deserialize_with = "text")]
    pub(super) required_dependencies: String,
    pub(super) sub_steps: Vec<SubStep>,
}

#[derive(Debug, Clone, Deserialize)]
pub(super) struct SubStep {
    pub(super) step_number: String,
    #[serde(default, deserialize_with = "text")]
    pub(super) step_description_prompt: String,
    #[serde(default, deserialize_with = "text")]
    pub(super) step_background: String,
    /// Absent from the test set's records (graded from a targets file instead).
    #[serde(default)]
    pub(super) ground_truth_code: Option<String>,
    pub(super) function_header: String,
    pub(super) test_cases: Vec<String>,
    #[serde(default, deserialize_with = "text")]
    pub(super) return_line: String,
}

/// A text field that a record may also give as `null` (the test set's `return_line`).
fn text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Serialize)]
struct DeriveInput<'a> {
    problems: Vec<DeriveProblem<'a>>,
}

#[derive(Debug, Serialize)]
struct DeriveProblem<'a> {
    problem_id: &'a str,
    required_dependencies: &'a str,
    steps: Vec<DeriveStep<'a>>,
}

#[derive(Debug, Serialize)]
struct DeriveStep<'a> {
    step_id: &'a str,
    function_header: &'a str,
    gold_code: Option<&'a str>,
    tests: &'a [String],
    /// From the targets file, one per test.
    #[serde(skip_serializing_if = "Option::is_none")]
    targets: Option<Vec<serde_json::Value>>,
}

#[derive(Debug, Deserialize)]
struct DeriveOutput {
    problems: BTreeMap<String, serde_json::Value>,
    errors: Vec<DeriveFailure>,
    /// Per problem, how long the gold code's slowest case took (with `verify_gold`).
    #[serde(default)]
    slowest_case_secs: BTreeMap<String, f64>,
    #[serde(default)]
    disagreements: Vec<Disagreement>,
}

/// A test whose published target (the targets file) differs from the one derived from gold
/// code; the published one is kept.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Disagreement {
    pub problem_id: String,
    pub step_id: String,
    /// 1-based test case of the step.
    pub test: usize,
    pub why: String,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "problem {}, step {}, test {}: the targets file and the gold code disagree: {}",
            self.problem_id, self.step_id, self.test, self.why
        )
    }
}

#[derive(Debug, Deserialize)]
struct DeriveFailure {
    problem_id: String,
    step_id: Option<String>,
    test: Option<usize>,
    stage: String,
    cause: String,
    limit: Option<String>,
}

impl DeriveFailure {
    fn into_failure(self, options: &ScicodeOptions) -> ProblemFailure {
        let limit = match self.limit.as_deref() {
            Some("memory") => Some(Limit::Memory),
            Some("time") => Some(Limit::Time),
            _ => None,
        };
        ProblemFailure::new(
            &self.problem_id,
            self.step_id,
            self.test,
            &self.stage,
            self.cause,
            limit,
            options,
        )
    }
}

/// A resource limit a derivation hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Memory,
    Time,
}

/// Why one problem was not imported: where (step, test case, stage) and what, with the flag
/// that raises the limit it hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProblemFailure {
    pub problem_id: String,
    pub step_id: Option<String>,
    /// 1-based test case of the step.
    pub test: Option<usize>,
    /// `derive`, `verify` (the gold code against its derived cases), `gold code`, `write`.
    pub stage: String,
    pub cause: String,
    pub limit: Option<Limit>,
    /// How to get past the limit, when one was hit.
    pub hint: Option<String>,
}

impl ProblemFailure {
    /// A whole task that did not import (importers of folders of tasks: PRBench).
    pub fn import_failed(task: &str, cause: String) -> Self {
        Self {
            problem_id: task.to_owned(),
            step_id: None,
            test: None,
            stage: "import".into(),
            cause,
            limit: None,
            hint: None,
        }
    }

    fn new(
        problem_id: &str,
        step_id: Option<String>,
        test: Option<usize>,
        stage: &str,
        cause: String,
        limit: Option<Limit>,
        options: &ScicodeOptions,
    ) -> Self {
        let hint = limit.map(|l| match l {
            Limit::Memory => format!(
                "memory limit {} MB hit: raise it with `--memory-mb` (e.g. --memory-mb {})",
                options.memory_mb,
                options.memory_mb * 2
            ),
            Limit::Time => format!(
                "time limit {} s per problem hit: raise it with `--timeout-secs` (e.g. --timeout-secs {})",
                options.timeout.as_secs(),
                options.timeout.as_secs() * 2
            ),
        });
        Self {
            problem_id: problem_id.to_owned(),
            step_id,
            test,
            stage: stage.to_owned(),
            cause,
            limit,
            hint,
        }
    }

    /// `step 1.2` / `-`.
    pub fn step_text(&self) -> String {
        self.step_id.clone().unwrap_or_else(|| "-".into())
    }

    /// `test 3` / `-`.
    pub fn test_text(&self) -> String {
        self.test.map_or_else(|| "-".into(), |t| t.to_string())
    }
}

impl std::fmt::Display for ProblemFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "problem {}, step {}, test {} ({}): {}",
            self.problem_id,
            self.step_text(),
            self.test_text(),
            self.stage,
            self.cause.trim_end()
        )?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  {hint}")?;
        }
        Ok(())
    }
}

/// What a SciCode import did: the task folders written, the problems that failed, and the
/// tests whose published and derived targets differ (imported with the published one).
#[derive(Debug, Default)]
pub struct ScicodeImport {
    pub written: Vec<PathBuf>,
    pub failed: Vec<ProblemFailure>,
    pub disagreements: Vec<Disagreement>,
}

/// The result of running a solution against a cases file (`scicode_targets.py check`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CheckReport {
    pub steps: Vec<StepReport>,
    /// Every step passed all its cases.
    pub passed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StepReport {
    pub step_id: String,
    pub passed: usize,
    pub total: usize,
    pub errors: Vec<String>,
}

/// Reads a SciCode JSONL file.
fn read_problems(src: &Path) -> Result<Vec<Problem>, ImportError> {
    let text = std::fs::read_to_string(src).map_err(io_err(src))?;
    let mut problems = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let problem: Problem = serde_json::from_str(line).map_err(|err| ImportError::Source {
            path: src.to_path_buf(),
            line: Some(index + 1),
            message: format!("not a SciCode problem record: {err}"),
        })?;
        if problem.sub_steps.is_empty() {
            return Err(ImportError::Source {
                path: src.to_path_buf(),
                line: Some(index + 1),
                message: format!("problem {} has no sub-steps", problem.problem_id),
            });
        }
        problems.push(problem);
    }
    if problems.is_empty() {
        return Err(ImportError::Source {
            path: src.to_path_buf(),
            line: None,
            message: "no problems in the file".into(),
        });
    }
    Ok(problems)
}

/// Imports every problem of `src` (SciCode JSONL) into `dest/scicode-<id>/`, deriving targets
/// in a sandbox of `backend`. Returns the task folders, each validated; an error lists every
/// problem that failed (the others are written all the same).
pub async fn import(
    src: &Path,
    dest: &Path,
    options: &ScicodeOptions,
    backend: &dyn Backend,
) -> Result<Vec<PathBuf>, ImportError> {
    let done = import_all(src, dest, options, backend).await?;
    if done.failed.is_empty() {
        Ok(done.written)
    } else {
        Err(ImportError::Problems(done.failed))
    }
}

/// [`import`], reporting per problem: one problem that fails (its derivation, its gold check,
/// its task folder) does not stop the others. `Err` only for what stops every problem (an
/// unreadable source, a destination in the way, the sandbox itself).
pub async fn import_all(
    src: &Path,
    dest: &Path,
    options: &ScicodeOptions,
    backend: &dyn Backend,
) -> Result<ScicodeImport, ImportError> {
    let mut problems = read_problems(src)?;
    if !options.only.is_empty() {
        problems.retain(|p| options.only.contains(&p.problem_id));
    }
    for problem in &problems {
        let ids = match options.protocol {
            Protocol::WholeProblem => vec![task_id(problem)],
            Protocol::StepByStep => vec![stepwise::task_id(problem)],
        };
        for id in ids {
            let root = dest.join(id);
            if root.exists() {
                return Err(ImportError::DestinationExists { path: root });
            }
        }
    }
    let mut failed = Vec::new();
    // Steps upstream does not test (13.6, 62.1, 76.3): their code is given to the agent, from
    // the gold code or from upstream's `step_<id>.txt` beside the problems file.
    let mut given = BTreeMap::new();
    for problem in &problems {
        match given_code(problem, src) {
            Ok(code) => {
                given.insert(problem.problem_id.clone(), code);
            }
            Err(cause) => failed.push(ProblemFailure::new(
                &problem.problem_id,
                None,
                None,
                "given code",
                cause,
                None,
                options,
            )),
        }
    }
    problems.retain(|p| given.contains_key(&p.problem_id));
    let mut published = match &options.targets {
        Some(file) => {
            let steps: Vec<scicode_h5::StepRequest> = problems
                .iter()
                .flat_map(|p| {
                    tested(p).map(|s| scicode_h5::StepRequest {
                        step_id: s.step_number.clone(),
                        tests: s.test_cases.len(),
                    })
                })
                .collect();
            let read = scicode_h5::read(&options.python, file, &steps, options.timeout).await?;
            for e in read.errors {
                if let Some(p) = problems
                    .iter()
                    .find(|p| p.sub_steps.iter().any(|s| s.step_number == e.step_id))
                {
                    failed.push(ProblemFailure::new(
                        &p.problem_id,
                        Some(e.step_id),
                        Some(e.test),
                        "targets",
                        format!("{}: {}", file.display(), e.cause),
                        None,
                        options,
                    ));
                }
            }
            Some(read.steps)
        }
        None => None,
    };
    problems.retain(|p| {
        if failed.iter().any(|f| f.problem_id == p.problem_id) {
            return false;
        }
        if published.is_none() && !has_gold(p) {
            failed.push(ProblemFailure::new(
                &p.problem_id,
                None,
                None,
                "derive",
                "the record has no gold code (`ground_truth_code`), so its targets cannot be \
                 derived: pass upstream's targets file with `--targets test_data.h5`"
                    .into(),
                None,
                options,
            ));
            return false;
        }
        true
    });
    let input = DeriveInput {
        problems: problems
            .iter()
            .map(|p| DeriveProblem {
                problem_id: &p.problem_id,
                required_dependencies: &p.required_dependencies,
                steps: tested(p)
                    .map(|s| DeriveStep {
                        step_id: &s.step_number,
                        function_header: &s.function_header,
                        gold_code: s.ground_truth_code.as_deref(),
                        tests: &s.test_cases,
                        targets: published.as_mut().and_then(|t| t.remove(&s.step_number)),
                    })
                    .collect(),
            })
            .collect(),
    };
    let input = serde_json::to_vec(&input).map_err(|err| ImportError::Derive(err.to_string()))?;
    let golds: Vec<(String, Option<String>)> = problems
        .iter()
        .map(|p| {
            let gold =
                has_gold(p).then(|| solution_code(p, &given[&p.problem_id], p.sub_steps.len()));
            (p.problem_id.clone(), gold)
        })
        .collect();
    let (mut cases, derive_failed, disagreements) =
        derive_in_sandbox(backend, options, &input, &golds).await?;
    failed.extend(derive_failed);

    let mut written = Vec::new();
    for problem in &problems {
        let Some(cases) = cases.remove(&problem.problem_id) else {
            if !failed.iter().any(|f| f.problem_id == problem.problem_id) {
                failed.push(ProblemFailure::new(
                    &problem.problem_id,
                    None,
                    None,
                    "derive",
                    "the derivation returned no cases for this problem".into(),
                    None,
                    options,
                ));
            }
            continue;
        };
        let given = &given[&problem.problem_id];
        let wrote = match options.protocol {
            Protocol::WholeProblem => {
                write_task(problem, given, cases, options, dest).map(|d| vec![d])
            }
            Protocol::StepByStep => {
                stepwise::write_task(problem, given, cases, options, dest).map(|d| vec![d])
            }
        };
        match wrote {
            Ok(dirs) => written.extend(dirs),
            Err(err) => failed.push(ProblemFailure::new(
                &problem.problem_id,
                None,
                None,
                "write",
                err.to_string(),
                None,
                options,
            )),
        }
    }
    Ok(ScicodeImport {
        written,
        failed,
        disagreements,
    })
}

/// The steps upstream tests (those with test cases).
pub(super) fn tested(problem: &Problem) -> impl Iterator<Item = &SubStep> {
    problem
        .sub_steps
        .iter()
        .filter(|s| !s.test_cases.is_empty())
}

/// Whether every tested step has gold code (then targets can be derived, and an oracle exists).
pub(super) fn has_gold(problem: &Problem) -> bool {
    tested(problem).all(|s| s.ground_truth_code.is_some())
}

/// The code of each untested step (step id → code): its gold code, else upstream's
/// `step_<id>.txt` beside the problems file. Err names the missing file.
fn given_code(problem: &Problem, src: &Path) -> Result<BTreeMap<String, String>, String> {
    let dir = src.parent().unwrap_or(Path::new("."));
    let mut out = BTreeMap::new();
    for step in problem.sub_steps.iter().filter(|s| s.test_cases.is_empty()) {
        let code = match &step.ground_truth_code {
            Some(code) => code.clone(),
            None => {
                let file = dir.join(format!("step_{}.txt", step.step_number));
                std::fs::read_to_string(&file).map_err(|err| {
                    format!(
                        "step {} is not tested upstream and its code is given to the agent, \
                         but {} cannot be read ({err}): put upstream's code for it there",
                        step.step_number,
                        file.display()
                    )
                })?
            }
        };
        out.insert(step.step_number.clone(), code);
    }
    Ok(out)
}

/// A step's code for a solution file: its gold code or the given code of an untested step.
pub(super) fn step_code<'a>(
    step: &'a SubStep,
    given: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    given
        .get(&step.step_number)
        .map(String::as_str)
        .or(step.ground_truth_code.as_deref())
}

pub(super) fn task_id(problem: &Problem) -> String {
    format!("scicode-{}", super::slug(&problem.problem_id))
}

/// Dependencies, then the code (gold or given) of the first `steps` steps that have any.
pub(super) fn solution_code(
    problem: &Problem,
    given: &BTreeMap<String, String>,
    steps: usize,
) -> String {
    let mut out = problem.required_dependencies.trim_end().to_owned();
    out.push_str("\n\n");
    for step in problem.sub_steps.iter().take(steps) {
        if let Some(code) = step_code(step, given) {
            out.push_str(code.trim_end());
            out.push_str("\n\n\n");
        }
    }
    out
}

fn spec(options: &ScicodeOptions) -> SandboxSpec {
    SandboxSpec {
        image: options.image.clone(),
        owner: options.owner.clone(),
        env: BTreeMap::new(),
        workdir: WORKDIR.into(),
        // As in a grading container: the grader's runner starts as root and runs the code
        // under test (here, the gold code's check) as the agent's uid.
        user: Some("root".into()),
        limits: Limits {
            memory_bytes: options.memory_mb.max(256) * 1024 * 1024,
            ..Limits::default()
        },
        mounts: Vec::new(),
        network: NetworkPolicy::None,
        command: None,
    }
}

fn sandbox_err(during: &str) -> impl FnOnce(sandbox::SandboxError) -> ImportError + '_ {
    move |source| ImportError::Sandbox {
        during: during.to_owned(),
        source,
    }
}

/// Runs `body` in a fresh utility sandbox and always removes it.
async fn in_sandbox<T>(
    backend: &dyn Backend,
    options: &ScicodeOptions,
    staging: &Path,
    body: impl AsyncFnOnce(&dyn Sandbox) -> Result<T, ImportError>,
) -> Result<T, ImportError> {
    let sandbox = backend
        .create(spec(options))
        .await
        .map_err(sandbox_err("creating the sandbox"))?;
    let result = match sandbox.copy_in(staging, WORKDIR).await {
        Ok(()) => body(sandbox.as_ref()).await,
        Err(err) => Err(sandbox_err("copying files in")(err)),
    };
    let removed = sandbox.remove().await;
    let value = result?;
    removed.map_err(sandbox_err("removing the sandbox"))?;
    Ok(value)
}

async fn run_script(
    sandbox: &dyn Sandbox,
    args: &[&str],
    timeout: Duration,
) -> Result<sandbox::ExecOutcome, ImportError> {
    let mut argv = vec![
        "python3".to_owned(),
        format!("{WORKDIR}/scicode_targets.py"),
    ];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    let mut request = ExecRequest::new(argv);
    request.timeout = timeout;
    request.workdir = Some(WORKDIR.into());
    sandbox
        .exec(request)
        .await
        .map_err(sandbox_err("running scicode_targets.py"))
}

fn stderr_tail(outcome: &sandbox::ExecOutcome) -> String {
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let chars: Vec<char> = stderr.chars().collect();
    chars[chars.len().saturating_sub(2000)..].iter().collect()
}

fn staging_dir() -> Result<tempfile::TempDir, ImportError> {
    tempfile::tempdir().map_err(io_err(Path::new("temporary folder")))
}

/// Derives (and with `verify_gold`, checks) every problem in one sandbox; each problem runs in
/// its own process there, so one that fails leaves the others' cases intact.
async fn derive_in_sandbox(
    backend: &dyn Backend,
    options: &ScicodeOptions,
    input: &[u8],
    golds: &[(String, Option<String>)],
) -> Result<
    (
        BTreeMap<String, serde_json::Value>,
        Vec<ProblemFailure>,
        Vec<Disagreement>,
    ),
    ImportError,
> {
    let staging = staging_dir()?;
    let write = |name: &str, bytes: &[u8]| {
        let path = staging.path().join(name);
        std::fs::write(&path, bytes).map_err(io_err(&path))
    };
    write("scicode_targets.py", TARGETS_SCRIPT.as_bytes())?;
    write_scicode_runner(staging.path())?;
    write("problems.json", input)?;
    for (index, (_, gold)) in golds.iter().enumerate() {
        if let Some(gold) = gold {
            write(&format!("gold_{index}.py"), gold.as_bytes())?;
        }
    }
    let out_dir = staging_dir()?;
    // Copied out as a folder (the sandbox copies items to the exact destination path).
    let out_path = out_dir.path().join("out");
    let per_problem = options.timeout.as_secs().max(1);
    // Derivation and verification of every problem, plus start-up.
    let total = Duration::from_secs(per_problem * 2 * golds.len() as u64 + 120);
    let memory = options.memory_mb.to_string();
    let per_problem_text = per_problem.to_string();
    let mut args = vec![
        "derive",
        "problems.json",
        "out/derived.json",
        per_problem_text.as_str(),
        memory.as_str(),
    ];
    if options.verify_gold {
        args.push("--verify");
    }
    if options.perturbed_inputs {
        args.push("--perturbed-inputs");
    }
    let (outcome, derived) = in_sandbox(
        backend,
        options,
        staging.path(),
        async |sandbox: &dyn Sandbox| {
            let outcome = run_script(sandbox, &args, total).await?;
            // Whatever was written survives a crash of the whole run.
            let copied = sandbox
                .copy_out(&format!("{WORKDIR}/out"), &out_path, MAX_OUTPUT_BYTES)
                .await;
            let derived = match copied {
                Ok(_) => std::fs::read(out_path.join("derived.json"))
                    .ok()
                    .and_then(|bytes| serde_json::from_slice::<DeriveOutput>(&bytes).ok()),
                Err(_) => None,
            };
            Ok((outcome, derived))
        },
    )
    .await?;
    let derived = derived.unwrap_or(DeriveOutput {
        problems: BTreeMap::new(),
        errors: Vec::new(),
        slowest_case_secs: BTreeMap::new(),
        disagreements: Vec::new(),
    });
    let mut failures: Vec<ProblemFailure> = derived
        .errors
        .into_iter()
        .map(|e| e.into_failure(options))
        .collect();
    if !outcome.success() {
        // The run as a whole ended early: every problem it did not finish fails with its cause.
        let (limit, why) = if outcome.timed_out {
            (
                Some(Limit::Time),
                format!("the derivation run hit its {}s deadline", total.as_secs()),
            )
        } else if outcome.oom_killed {
            (
                Some(Limit::Memory),
                format!(
                    "the derivation run ran out of memory ({} MB)",
                    options.memory_mb
                ),
            )
        } else {
            (
                None,
                format!(
                    "the derivation run failed ({}): {}",
                    outcome.ended(),
                    stderr_tail(&outcome)
                ),
            )
        };
        for (problem_id, _) in golds {
            let done = derived.problems.contains_key(problem_id)
                || failures.iter().any(|f| &f.problem_id == problem_id);
            if !done {
                failures.push(ProblemFailure::new(
                    problem_id,
                    None,
                    None,
                    "derive",
                    why.clone(),
                    limit,
                    options,
                ));
            }
        }
    }
    let mut problems = derived.problems;
    for (problem_id, cases) in problems.iter_mut() {
        if let (Some(secs), Some(map)) = (
            derived.slowest_case_secs.get(problem_id),
            cases.as_object_mut(),
        ) {
            map.insert(SLOWEST_KEY.into(), serde_json::json!(secs));
        }
    }
    Ok((problems, failures, derived.disagreements))
}

fn parse_report(stdout: &[u8]) -> Result<CheckReport, ImportError> {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line)
        .map_err(|err| ImportError::Derive(format!("unreadable check report ({err}): {text}")))
}

/// Runs `solution` against a cases file in a fresh sandbox through the grader's own runner (what
/// the `scicode_steps` grader does), for validating imports and tests.
pub async fn check_in_sandbox(
    backend: &dyn Backend,
    options: &ScicodeOptions,
    cases: &Path,
    solution: &Path,
) -> Result<CheckReport, ImportError> {
    let staging = staging_dir()?;
    std::fs::write(staging.path().join("scicode_targets.py"), TARGETS_SCRIPT)
        .map_err(io_err(staging.path()))?;
    write_scicode_runner(staging.path())?;
    std::fs::copy(cases, staging.path().join("cases.json")).map_err(io_err(cases))?;
    std::fs::copy(solution, staging.path().join("solution.py")).map_err(io_err(solution))?;
    let timeout = options.timeout;
    in_sandbox(
        backend,
        options,
        staging.path(),
        async |sandbox: &dyn Sandbox| {
            let outcome = run_script(sandbox, &["check", "cases.json", "solution.py"], timeout).await?;
            if !outcome.success() {
                return Err(ImportError::Derive(format!(
                    "`scicode_targets.py check` failed ({}; the limits are --timeout-secs {} and --memory-mb {}):\n{}",
                    outcome.ended(),
                    options.timeout.as_secs(),
                    options.memory_mb,
                    stderr_tail(&outcome)
                )));
            }
            parse_report(&outcome.stdout)
        },
    )
    .await
}

pub(super) fn step_prompt(step: &SubStep, with_background: bool) -> String {
    let mut prompt = step.step_description_prompt.trim().to_owned();
    if with_background && !step.step_background.trim().is_empty() {
        prompt.push_str("\n\n");
        prompt.push_str(step.step_background.trim());
    }
    prompt.push_str("\n\n```python\n");
    prompt.push_str(step.function_header.trim_end());
    prompt.push('\n');
    if !step.return_line.trim().is_empty() {
        prompt.push('\n');
        prompt.push_str(step.return_line.trim_end());
        prompt.push('\n');
    }
    prompt.push_str("```\n");
    prompt
}

/// What a task of either protocol shares: its timeouts, memory, metadata and grader.
pub(super) struct TaskFrame<'a> {
    pub problem: &'a Problem,
    pub options: &'a ScicodeOptions,
    /// Each graded case's deadline, from the gold code's slowest case.
    pub case_timeout_secs: Option<u64>,
}

impl TaskFrame<'_> {
    pub(super) fn new<'a>(
        problem: &'a Problem,
        cases: &serde_json::Value,
        options: &'a ScicodeOptions,
    ) -> TaskFrame<'a> {
        let case_timeout_secs = cases
            .get(SLOWEST_KEY)
            .and_then(serde_json::Value::as_f64)
            .map(|slowest| {
                ((slowest * CASE_TIMEOUT_FACTOR).ceil() as u64).max(MIN_CASE_TIMEOUT_SECS)
            });
        TaskFrame {
            problem,
            options,
            case_timeout_secs,
        }
    }

    pub(super) fn environment(&self) -> Environment {
        Environment {
            image: "python".into(),
            agent_timeout_secs: 1800,
            // Some upstream tests are slow (51.4 runs 1000 MD steps in pure Python).
            grading_timeout_secs: self
                .options
                .timeout
                .as_secs()
                .max(self.case_timeout_secs.unwrap_or(0) * 2)
                .clamp(1200, 24 * 3600),
            // What the gold code needed to derive its targets, it needs to be graded.
            memory_mb: self.options.memory_mb.max(DEFAULT_MEMORY_MB),
            ..Environment::default()
        }
    }

    pub(super) fn metadata(&self, reference: bool) -> BTreeMap<String, toml::Value> {
        let mut metadata = BTreeMap::new();
        let text = |s: &str| toml::Value::String(s.to_owned());
        metadata.insert("source".into(), text("SciCode (scicode-bench/SciCode)"));
        metadata.insert("problem_id".into(), text(&self.problem.problem_id));
        metadata.insert("protocol".into(), text(self.options.protocol.as_str()));
        metadata.insert(
            "with_background".into(),
            toml::Value::Boolean(self.options.with_background),
        );
        metadata.insert(
            "targets".into(),
            text(if self.options.targets.is_some() {
                "published"
            } else {
                "derived"
            }),
        );
        metadata.insert("reference_solution".into(), toml::Value::Boolean(reference));
        // Every tested step of the problem: a run's per-problem score needs them all, also in
        // tasks that grade one step (`rubrics::scicode_score`).
        metadata.insert(
            PROBLEM_STEPS_KEY.into(),
            toml::Value::Array(
                tested(self.problem)
                    .map(|s| toml::Value::String(s.step_number.clone()))
                    .collect(),
            ),
        );
        metadata
    }

    pub(super) fn grading(&self) -> GradingSpec {
        GradingSpec {
            dimensions: one_dimension("code_correctness"),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders: vec![GraderSpec {
                name: "scicode steps".into(),
                dimension: "code_correctness".into(),
                weight: 1.0,
                check: Check::ScicodeSteps(rubrics::checks::scicode_steps::ScicodeSteps {
                    hidden_cases: CASES_FILE.into(),
                    output: SOLUTION_FILE.into(),
                    case_timeout_secs: self.case_timeout_secs,
                }),
            }],
        }
    }
}

pub(super) fn write_cases(dir: &TaskDir, cases: &serde_json::Value) -> Result<(), ImportError> {
    let cases_text =
        serde_json::to_string(cases).map_err(|err| ImportError::Derive(err.to_string()))?;
    dir.write(&format!("hidden/{CASES_FILE}"), cases_text)?;
    Ok(())
}

/// The oracle: `solution.py` with the code of the first `steps` steps.
pub(super) fn write_oracle(
    dir: &TaskDir,
    problem: &Problem,
    given: &BTreeMap<String, String>,
    steps: usize,
) -> Result<(), ImportError> {
    dir.write(
        &format!("solution/{SOLUTION_FILE}"),
        solution_code(problem, given, steps),
    )?;
    dir.write_script(
        "solution/solve.sh",
        &format!("#!/bin/sh\n# Oracle: the gold code of the graded step(s) and of those before (cwd = /workspace).\nset -eu\ncp /oracle/solution/{SOLUTION_FILE} {SOLUTION_FILE}\n"),
    )?;
    Ok(())
}

/// The whole-problem protocol: one task, one agent run writes every step.
fn write_task(
    problem: &Problem,
    given: &BTreeMap<String, String>,
    cases: serde_json::Value,
    options: &ScicodeOptions,
    dest: &Path,
) -> Result<PathBuf, ImportError> {
    let frame = TaskFrame::new(problem, &cases, options);
    let id = task_id(problem);
    let steps = &problem.sub_steps;
    let reference = has_gold(problem);
    let dir = TaskDir::create(dest, &id)?;

    let mut instruction = format!(
        "# SciCode problem {}{}\n\n{}\n",
        problem.problem_id,
        if problem.problem_name.is_empty() {
            String::new()
        } else {
            format!(": {}", problem.problem_name)
        },
        problem.problem_description_main.trim()
    );
    if options.with_background && !problem.problem_background_main.trim().is_empty() {
        instruction.push_str(&format!("\n{}\n", problem.problem_background_main.trim()));
    }
    if !problem.problem_io.trim().is_empty() {
        instruction.push_str(&format!(
            "\nInputs and outputs:\n\n```\n{}\n```\n",
            problem.problem_io.trim().trim_matches('"').trim()
        ));
    }
    instruction.push_str(&format!(
        "\nWrite the function of every step below in `/workspace/{SOLUTION_FILE}`, keeping the \
         given names and signatures. These dependencies are imported before your code runs; \
         use only them:\n\n```python\n{}\n```\n\nDo not include tests or example usage.\n",
        problem.required_dependencies.trim_end()
    ));
    if !given.is_empty() {
        let ids: Vec<&str> = given.keys().map(String::as_str).collect();
        instruction.push_str(&format!(
            "\n`{SOLUTION_FILE}` already holds the code of step(s) {} (given, as in SciCode's own \
             prompts; not graded). Keep it and add the other steps.\n",
            ids.join(", ")
        ));
    }
    dir.write("instruction.md", instruction)?;
    if !given.is_empty() {
        let mut code = problem.required_dependencies.trim_end().to_owned();
        code.push_str("\n\n");
        for step in steps.iter().filter(|s| given.contains_key(&s.step_number)) {
            code.push_str(&format!(
                "# Step {} (given)\n{}\n\n\n",
                step.step_number,
                given[&step.step_number].trim_end()
            ));
        }
        dir.write(&format!("workspace/{SOLUTION_FILE}"), code)?;
    } else {
        dir.write(
            "workspace/README.md",
            format!("Write your functions in `{SOLUTION_FILE}` here.\n"),
        )?;
    }
    write_cases(&dir, &cases)?;
    // A record without gold code (the test set) has no reference solution: no oracle.
    if reference {
        write_oracle(&dir, problem, given, steps.len())?;
    }

    let stages = steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let mut prompt = step_prompt(step, options.with_background);
            if given.contains_key(&step.step_number) {
                prompt.push_str(
                    "\n(Given: this step's code is already in `solution.py`; it is not graded.)\n",
                );
            }
            StageToml {
                id: step.step_number.clone(),
                title: None,
                prompt,
                depends_on: if i == 0 {
                    Vec::new()
                } else {
                    vec![steps[i - 1].step_number.clone()]
                },
            }
        })
        .collect();
    let toml = TaskToml {
        id,
        kind: TaskKind::Scicode,
        instruction: "instruction.md".into(),
        attachments: Vec::new(),
        expected_outputs: vec![SOLUTION_FILE.into()],
        environment: frame.environment(),
        constraints: Constraints::default(),
        metadata: frame.metadata(reference),
        stages,
        turns: None,
        grading: frame.grading(),
    };
    dir.finish(&toml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_data_reads_the_vendored_problems() {
        let src = bench_data::path("scicode/problems_dev.jsonl");
        let problems = read_problems(&src).expect("vendored SciCode problems parse");
        let ids: Vec<&str> = problems.iter().map(|p| p.problem_id.as_str()).collect();
        assert_eq!(
            ids,
            ["1", "3", "4", "6", "19", "29", "38", "44", "51", "70"]
        );
        let gold = solution_code(&problems[9], &BTreeMap::new(), 8);
        assert!(gold.starts_with("import numpy as np"));
        assert_eq!(
            problems.iter().map(|p| p.sub_steps.len()).sum::<usize>(),
            27
        );
    }

    #[test]
    fn bad_lines_are_located() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.jsonl");
        std::fs::write(&path, "\n{\"problem_id\": \"1\"}\n").expect("write");
        let err = read_problems(&path).expect_err("missing sub_steps");
        assert!(err.to_string().contains("p.jsonl:2:"), "{err}");
    }
}
