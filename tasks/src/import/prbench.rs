//! PRBench importer: PRBench's published task folders (`task.yaml` with `task_id`, a `paper`
//! map, `instruction_file`, `metadata_file`, `ground_truth_data_dir`, `ground_truth_code_dir`,
//! `expected_outputs` as `analysis`/`code`/`data` lists, `docker` with `image`, `memory_limit`,
//! `timeout`, `pip_install`, `grading.dimensions` as `{name, weight, description}` and an
//! optional `code_only` section) → `prbench` tasks; a folder of such folders imports each.
//!
//! Every field of that schema is read; a field it does not have is named (all of them, in one
//! error) rather than dropped. Text files are read as text (CRLF line ends become LF).
//!
//! What a task becomes:
//! - the agent sees PRBench's instruction as written, inside our framing that names the paper
//!   file (copied into the workspace), the Python packages and the expected outputs; the
//!   code-only variant (`<id>-code-only`, when the task has a `code_only` section) adds its
//!   `instruction_suffix` and uses its own outputs and dimensions;
//! - each grading dimension, with its own name, weight and description, is a
//!   `prbench_dimension` grader: a judge that reads the ground truth (metadata, reference data
//!   and code, all held out under `hidden/ground_truth/`) and our deterministic evidence;
//!   `code_correctness` is capped at 0.2 when a banned library is used (PRBench's rule);
//! - the evidence, reported beside the judged dimensions with weight 0 (shown, never scored):
//!   `measured_data_accuracy` (each data file against its ground truth, relative tolerance from
//!   the task's text, else [`DEFAULT_RTOL`]), `measured_completeness` (every expected output
//!   exists), `banned_libraries` (the metadata's "Banned" table, a `forbidden_api` scan) and
//!   `measured_reproduction` (full mode, when the task expects CSV data: a `reproduce` grader
//!   re-runs the agent's entry script, the first of [`ENTRY_CANDIDATES`] it delivered, and
//!   compares the CSV files it regenerates with those it submitted at the data tolerance; none
//!   delivered: "no entry script delivered", score 0, weight 0 so the overall is unchanged);
//!   the instruction asks for `reproduce.sh` or `reproduce.py`;
//! - fabrication caps like a banned library: when the re-run finds `fabricated_data`,
//!   `code_correctness` and every dimension whose name holds `data` score 0
//!   ([`zero_if_fabricated`]);
//! - reference code that writes every expected data file (each file name appears in a script
//!   with a `__main__` block) is the oracle: its folder goes to `/workspace/<code dir>`, where
//!   it writes `../<data dir>/...` as in the task's own layout, and each such script runs from
//!   there; other tasks have no reference solution (`no_reference`);
//! - `docker.image` `python:3.*` is the platform's `python` image (Debian's Python 3.11 with
//!   numpy, scipy, pandas, matplotlib, pytest); `memory_limit` and `timeout` are honoured;
//!   `pip_install` packages the image lacks become `environment.pip_install`: a per-task image
//!   built from PyPI wheels (`sandbox::images::derived`; `green-agent tasks import` builds it
//!   once to check that every package has a wheel, and a run builds or reuses it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rubrics::{Check, GraderSpec, GradingSpec};
use serde::Deserialize;

use super::{ImportError, TaskDir, TaskToml, io_err};
use crate::spec::{Constraints, Environment, TaskKind};

/// Relative tolerance of the data comparison when the task states none: within PRBench's
/// range (its format: tables ~1%, figures 1-30%; its judge: ~10% deterministic, ~30% Monte
/// Carlo; DMRG-like deterministic tasks state ~5%).
pub const DEFAULT_RTOL: f64 = 0.05;
/// Absolute tolerance beside it (values that should be 0).
pub const DEFAULT_ATOL: f64 = 1e-8;
/// PRBench's cap on `code_correctness` when a banned library is used.
pub const BANNED_CAP: f64 = 0.2;

/// The entry scripts the re-run looks for at the top of `/workspace`, in order (the instruction
/// names the first two).
pub const ENTRY_CANDIDATES: &[&str] = rubrics::checks::reproduce::DEFAULT_ENTRY_CANDIDATES;

/// Whether a dimension is set to 0 when the re-run finds fabricated data: the code's
/// correctness and every data dimension (the numbers do not come from the code).
pub fn zero_if_fabricated(dimension: &str) -> bool {
    dimension == "code_correctness" || dimension.contains("data")
}

/// Python packages the platform's `python` image has (Debian bookworm, Python 3.11).
const PLATFORM_PACKAGES: &[&str] = &["numpy", "scipy", "pandas", "matplotlib", "pytest"];

#[derive(Debug, Deserialize)]
struct TaskYaml {
    task_id: String,
    paper: Paper,
    instruction_file: String,
    #[serde(default)]
    metadata_file: Option<String>,
    #[serde(default)]
    ground_truth_data_dir: Option<String>,
    #[serde(default)]
    ground_truth_code_dir: Option<String>,
    #[serde(default)]
    ground_truth_copy_all: bool,
    #[serde(default)]
    expected_outputs: Outputs,
    #[serde(default)]
    docker: Docker,
    grading: Grading,
    #[serde(default)]
    code_only: Option<CodeOnly>,
}

#[derive(Debug, Deserialize)]
struct Paper {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    author: Option<String>,
    #[serde(default)]
    doi: Option<serde_yaml::Value>,
    #[serde(default)]
    year: Option<serde_yaml::Value>,
    paper_file: String,
}

#[derive(Debug, Default, Clone, Deserialize)]
struct Outputs {
    #[serde(default)]
    analysis: Vec<String>,
    #[serde(default)]
    code: Vec<String>,
    #[serde(default)]
    data: Vec<String>,
}

impl Outputs {
    fn all(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in self.analysis.iter().chain(&self.code).chain(&self.data) {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }
}

#[derive(Debug, Default, Deserialize)]
struct Docker {
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    memory_limit: Option<serde_yaml::Value>,
    #[serde(default)]
    timeout: Option<serde_yaml::Value>,
    #[serde(default)]
    pip_install: Vec<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
struct Grading {
    #[serde(default)]
    dimensions: Vec<Dimension>,
}

#[derive(Debug, Clone, Deserialize)]
struct Dimension {
    name: String,
    weight: f64,
    #[serde(default)]
    description: String,
}

#[derive(Debug, Deserialize)]
struct CodeOnly {
    #[serde(default)]
    instruction_suffix: String,
    #[serde(default)]
    expected_outputs: Option<Outputs>,
    #[serde(default)]
    grading: Option<Grading>,
}

/// The fields of the published schema, by path (`[]` = each element of a list).
const KNOWN: &[&str] = &[
    "task_id",
    "paper",
    "paper.title",
    "paper.author",
    "paper.doi",
    "paper.year",
    "paper.paper_file",
    "instruction_file",
    "metadata_file",
    "ground_truth_data_dir",
    "ground_truth_code_dir",
    "ground_truth_copy_all",
    "expected_outputs",
    "expected_outputs.analysis",
    "expected_outputs.code",
    "expected_outputs.data",
    "docker",
    "docker.image",
    "docker.memory_limit",
    "docker.timeout",
    "docker.pip_install",
    "grading",
    "grading.dimensions",
    "grading.dimensions[].name",
    "grading.dimensions[].weight",
    "grading.dimensions[].description",
    "code_only",
    "code_only.instruction_suffix",
    "code_only.expected_outputs",
    "code_only.expected_outputs.analysis",
    "code_only.expected_outputs.code",
    "code_only.expected_outputs.data",
    "code_only.grading",
    "code_only.grading.dimensions",
    "code_only.grading.dimensions[].name",
    "code_only.grading.dimensions[].weight",
    "code_only.grading.dimensions[].description",
];

/// Every key of `value` (maps within maps and lists of maps) not in [`KNOWN`].
fn unknown_fields(value: &serde_yaml::Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        serde_yaml::Value::Mapping(map) => {
            for (k, v) in map {
                let key = match k {
                    serde_yaml::Value::String(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                let path = if prefix.is_empty() {
                    key
                } else {
                    format!("{prefix}.{key}")
                };
                if KNOWN.contains(&path.as_str()) {
                    unknown_fields(v, &path, out);
                } else {
                    out.push(path);
                }
            }
        }
        serde_yaml::Value::Sequence(items) => {
            for item in items {
                if item.is_mapping() {
                    unknown_fields(item, &format!("{prefix}[]"), out);
                }
            }
        }
        _ => {}
    }
}

fn source_err(path: &Path, message: impl Into<String>) -> ImportError {
    ImportError::Source {
        path: path.to_path_buf(),
        line: None,
        message: message.into(),
    }
}

/// A file or folder the yaml names, inside the source folder.
fn named(src: &Path, yaml: &Path, rel: &str, what: &str) -> Result<PathBuf, ImportError> {
    let normal = crate::paths::normalize_relative(rel).map_err(|p| {
        source_err(
            yaml,
            format!("{what}: {}", p.describe(rel, "the task folder")),
        )
    })?;
    let path = src.join(normal);
    if !path.exists() {
        return Err(source_err(yaml, format!("{what} `{rel}` does not exist")));
    }
    Ok(path)
}

/// A text file as text: CRLF (and lone CR) line ends become LF.
fn read_text(path: &Path) -> Result<String, ImportError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    let text = String::from_utf8_lossy(&bytes);
    Ok(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// Parses `8g`, `512m`, `2048` (MiB) into MiB.
fn memory_mb(value: &serde_yaml::Value) -> Option<u64> {
    match value {
        serde_yaml::Value::Number(n) => n.as_u64(),
        serde_yaml::Value::String(s) => {
            let s = s.trim().to_ascii_lowercase();
            let (num, unit) = s.split_at(
                s.find(|c: char| !c.is_ascii_digit() && c != '.')
                    .unwrap_or(s.len()),
            );
            let num: f64 = num.parse().ok()?;
            let mb = match unit.trim().trim_end_matches('b').trim_end_matches('i') {
                "" | "m" => num,
                "g" => num * 1024.0,
                "k" => num / 1024.0,
                _ => return None,
            };
            Some(mb.round() as u64)
        }
        _ => None,
    }
}

/// Parses `14400`, `14400s`, `30m`, `4h` into seconds.
fn seconds(value: &serde_yaml::Value) -> Option<u64> {
    match value {
        serde_yaml::Value::Number(n) => n.as_u64().or_else(|| n.as_f64().map(|f| f.ceil() as u64)),
        serde_yaml::Value::String(s) => {
            let s = s.trim().to_ascii_lowercase();
            let (num, unit) = s.split_at(
                s.find(|c: char| !c.is_ascii_digit() && c != '.')
                    .unwrap_or(s.len()),
            );
            let num: f64 = num.parse().ok()?;
            let factor = match unit.trim() {
                "" | "s" | "sec" | "secs" => 1.0,
                "m" | "min" | "mins" => 60.0,
                "h" | "hr" | "hours" => 3600.0,
                _ => return None,
            };
            Some((num * factor).ceil() as u64)
        }
        _ => None,
    }
}

/// The relative tolerance a text states: the first `N%` within a few words of "tolerance"
/// (`~5% tolerance`, `tolerance of 2%`, `relative tolerance ~1%`).
pub fn stated_rtol(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    for (at, _) in lower.match_indices('%') {
        let mut start = at;
        while start > 0 && (bytes[start - 1].is_ascii_digit() || bytes[start - 1] == b'.') {
            start -= 1;
        }
        if start == at {
            continue;
        }
        let Ok(pct) = lower[start..at].parse::<f64>() else {
            continue;
        };
        let lo = lower[..start]
            .char_indices()
            .rev()
            .nth(40)
            .map_or(0, |(i, _)| i);
        let hi = lower[at..]
            .char_indices()
            .nth(40)
            .map_or(lower.len(), |(i, _)| at + i);
        if lower[lo..hi].contains("toleran") && pct > 0.0 && pct <= 100.0 {
            return Some(pct / 100.0);
        }
    }
    None
}

/// Python module names in a metadata's banned-library table: the backquoted names in the
/// "Banned" column of the tables under a heading that mentions "banned".
pub fn banned_modules(metadata: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut in_section = false;
    let mut column: Option<usize> = None;
    for line in metadata.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            in_section = t.to_ascii_lowercase().contains("banned");
            column = None;
            continue;
        }
        if !in_section || !t.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = t.trim_matches('|').split('|').map(str::trim).collect();
        if column.is_none() {
            column = cells
                .iter()
                .position(|c| c.to_ascii_lowercase().contains("banned"));
            continue;
        }
        let Some(cell) = column.and_then(|c| cells.get(c)) else {
            continue;
        };
        for (i, part) in cell.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let name = match part.trim().to_ascii_lowercase().as_str() {
                "pytorch" => "torch".to_owned(),
                "scikit-learn" => "sklearn".to_owned(),
                other => other.replace('-', "_"),
            };
            let valid = !name.is_empty()
                && name.split('.').all(|s| {
                    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                });
            if valid && !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// What importing one task folder gave (a folder of tasks: one per task).
#[derive(Debug)]
pub struct TaskImport {
    /// The source task folder.
    pub source: PathBuf,
    /// The task folders written (the full task, then its code-only variant), or why not.
    pub result: Result<Vec<PathBuf>, ImportError>,
}

/// Imports `src` (one task folder, or a folder of task folders) into `dest`: every task's
/// result, in name order.
pub fn import_all(src: &Path, dest: &Path) -> Vec<TaskImport> {
    if is_task(src) || !src.is_dir() {
        return vec![TaskImport {
            source: src.to_path_buf(),
            result: import_one(src, dest),
        }];
    }
    let mut folders: Vec<PathBuf> = match std::fs::read_dir(src) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| is_task(p))
            .collect(),
        Err(source) => {
            return vec![TaskImport {
                source: src.to_path_buf(),
                result: Err(ImportError::Io {
                    path: src.to_path_buf(),
                    source,
                }),
            }];
        }
    };
    folders.sort();
    if folders.is_empty() {
        return vec![TaskImport {
            source: src.to_path_buf(),
            result: Err(source_err(
                src,
                "neither a PRBench task folder (no task.yaml) nor a folder of them",
            )),
        }];
    }
    folders
        .into_iter()
        .map(|f| TaskImport {
            result: import_one(&f, dest),
            source: f,
        })
        .collect()
}

fn is_task(dir: &Path) -> bool {
    dir.join("task.yaml").is_file() || dir.join("task.yml").is_file()
}

/// Imports `src` (one task folder or a folder of them); fails on the first task that fails.
/// [`import_all`] reports every task's result.
pub fn import(src: &Path, dest: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let mut out = Vec::new();
    for t in import_all(src, dest) {
        out.extend(t.result?);
    }
    Ok(out)
}

/// One task folder → `dest/<id>/` (and `dest/<id>-code-only/`).
pub fn import_one(src: &Path, dest: &Path) -> Result<Vec<PathBuf>, ImportError> {
    let yaml_path = ["task.yaml", "task.yml"]
        .iter()
        .map(|n| src.join(n))
        .find(|p| p.is_file())
        .unwrap_or_else(|| src.join("task.yaml"));
    let text = read_text(&yaml_path)?;
    let value: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|err| ImportError::Source {
            path: yaml_path.clone(),
            line: err.location().map(|l| l.line()),
            message: err.to_string(),
        })?;
    let mut unknown = Vec::new();
    unknown_fields(&value, "", &mut unknown);
    if !unknown.is_empty() {
        return Err(source_err(
            &yaml_path,
            format!(
                "field(s) not in PRBench's task format, not imported: {}; remove them or rename them to a field of the format (task_format.md)",
                unknown.join(", ")
            ),
        ));
    }
    let spec: TaskYaml = serde_yaml::from_value(value).map_err(|err| ImportError::Source {
        path: yaml_path.clone(),
        line: None,
        message: err.to_string(),
    })?;
    let mut out = vec![write(src, &yaml_path, &spec, dest, false)?];
    if spec.code_only.is_some() {
        out.push(write(src, &yaml_path, &spec, dest, true)?);
    }
    Ok(out)
}

/// The platform image for `docker.image` and the packages it lacks.
fn environment(yaml: &Path, spec: &TaskYaml) -> Result<Environment, ImportError> {
    let mut environment = Environment::default();
    if let Some(image) = &spec.docker.image {
        let ok = image
            .strip_prefix("python:3")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('-'))
            || image == "python";
        if !ok {
            return Err(source_err(
                yaml,
                format!(
                    "docker.image `{image}`: only Python images (`python:3.X`) map to a platform image"
                ),
            ));
        }
        environment.image = "python".into();
    }
    // What the platform image has is not installed again; the rest is the task's own image
    // (`environment.pip_install`: a per-task image built from PyPI wheels before a run).
    for p in &spec.docker.pip_install {
        if let Some(problem) = sandbox::images::derived::requirement_problem(p) {
            return Err(source_err(yaml, format!("docker.pip_install: {problem}")));
        }
        let name = p
            .split(|c: char| "<>=!~[; ".contains(c))
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        if !PLATFORM_PACKAGES.contains(&name.as_str()) && !environment.pip_install.contains(p) {
            environment.pip_install.push(p.trim().to_owned());
        }
    }
    if let Some(memory) = &spec.docker.memory_limit {
        environment.memory_mb = memory_mb(memory).ok_or_else(|| {
            source_err(
                yaml,
                format!("docker.memory_limit `{memory:?}` is not a size like `2g`"),
            )
        })?;
    }
    if let Some(timeout) = &spec.docker.timeout {
        environment.agent_timeout_secs = seconds(timeout).ok_or_else(|| {
            source_err(
                yaml,
                format!("docker.timeout `{timeout:?}` is not a number of seconds"),
            )
        })?;
    }
    Ok(environment)
}

fn yaml_text(v: &Option<serde_yaml::Value>) -> Option<String> {
    match v {
        Some(serde_yaml::Value::String(s)) => Some(s.clone()),
        Some(serde_yaml::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// The ground-truth data file an expected data output is compared with (`data/fig2.csv` →
/// `<data dir>/fig2.csv`, else the data dir's file of the same name).
fn truth_of(data_dir: &Path, data_rel: &str, output: &str) -> Option<String> {
    let inside = output
        .strip_prefix(&format!("{}/", data_rel.trim_end_matches('/')))
        .map(str::to_owned)
        .or_else(|| {
            Path::new(output)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })?;
    data_dir.join(&inside).is_file().then_some(inside)
}

/// Whether the reference code writes every expected data file: each file's name appears in
/// a script that has a `__main__` block. Returns those scripts (relative, sorted).
fn oracle_scripts(code: &Path, data: &[String]) -> Result<Option<Vec<String>>, ImportError> {
    if data.is_empty() {
        return Ok(None);
    }
    let mut scripts = Vec::new();
    let mut written = BTreeSet::new();
    let Ok(entries) = std::fs::read_dir(code) else {
        return Ok(None);
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.extension().is_none_or(|e| e != "py") || !p.is_file() {
            continue;
        }
        let text = read_text(&p)?;
        if !text.contains("__main__") {
            continue;
        }
        let mut mine = false;
        for d in data {
            let name = Path::new(d)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !name.is_empty() && text.contains(&name) {
                written.insert(d.clone());
                mine = true;
            }
        }
        if mine {
            scripts.push(
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            );
        }
    }
    Ok((written.len() == data.len()).then_some(scripts))
}

fn write(
    src: &Path,
    yaml: &Path,
    spec: &TaskYaml,
    dest: &Path,
    code_only: bool,
) -> Result<PathBuf, ImportError> {
    let base = super::slug(&spec.task_id);
    if base.is_empty() {
        return Err(source_err(yaml, "task_id is empty"));
    }
    let id = if code_only {
        format!("{base}-code-only")
    } else {
        base
    };
    let co = spec.code_only.as_ref().filter(|_| code_only);
    let outputs = co
        .and_then(|c| c.expected_outputs.clone())
        .unwrap_or_else(|| spec.expected_outputs.clone());
    // The data files the agent's entry script must regenerate (full mode only: code-only
    // agents run nothing).
    let regenerated: Vec<String> = if code_only {
        Vec::new()
    } else {
        outputs
            .data
            .iter()
            .filter(|o| o.ends_with(".csv"))
            .cloned()
            .collect()
    };
    let grading = co
        .and_then(|c| c.grading.clone())
        .unwrap_or_else(|| spec.grading.clone());
    let which = if code_only {
        "code_only.grading.dimensions"
    } else {
        "grading.dimensions"
    };
    if grading.dimensions.is_empty() {
        return Err(source_err(
            yaml,
            format!("{which} is empty: nothing to grade"),
        ));
    }
    let mut seen = BTreeSet::new();
    for d in &grading.dimensions {
        if !seen.insert(d.name.as_str()) {
            return Err(source_err(
                yaml,
                format!("{which}: dimension `{}` is named twice", d.name),
            ));
        }
        if !(d.weight.is_finite() && d.weight >= 0.0) {
            return Err(source_err(
                yaml,
                format!("{which}: `{}` has weight {}", d.name, d.weight),
            ));
        }
    }
    let total: f64 = grading.dimensions.iter().map(|d| d.weight).sum();
    if (total - 1.0).abs() > 1e-6 {
        return Err(source_err(
            yaml,
            format!(
                "{which}: the weights sum to {total}; PRBench's overall score is their weighted sum, so they must sum to 1"
            ),
        ));
    }
    // Code-only dimensions may omit the description the full mode gives the same dimension.
    let full_description = |name: &str| {
        spec.grading
            .dimensions
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.description.clone())
            .unwrap_or_default()
    };

    let instruction_src = named(src, yaml, &spec.instruction_file, "instruction_file")?;
    let paper_src = named(src, yaml, &spec.paper.paper_file, "paper.paper_file")?;
    let metadata = match &spec.metadata_file {
        Some(m) => Some(read_text(&named(src, yaml, m, "metadata_file")?)?),
        None => None,
    };
    let data_rel = spec.ground_truth_data_dir.clone();
    let data_dir = match &data_rel {
        Some(d) => Some(named(src, yaml, d, "ground_truth_data_dir")?),
        None => None,
    };
    let code_dir = match &spec.ground_truth_code_dir {
        Some(c) => Some(named(src, yaml, c, "ground_truth_code_dir")?),
        None => None,
    };
    let environment = environment(yaml, spec)?;
    let dir = TaskDir::create(dest, &id)?;

    // The agent's side: the paper, and PRBench's instruction in our framing.
    let paper_name = paper_src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "paper.md".into());
    let paper_bytes = std::fs::read(&paper_src).map_err(io_err(&paper_src))?;
    dir.write(&format!("workspace/{paper_name}"), paper_bytes)?;
    let mut instruction_text = read_text(&instruction_src)?;
    if let Some(c) = co
        && !c.instruction_suffix.trim().is_empty()
    {
        instruction_text = format!(
            "{}\n\n{}",
            instruction_text.trim_end(),
            c.instruction_suffix.replace("\r\n", "\n")
        );
    }
    let paper_line = {
        let mut s = spec
            .paper
            .title
            .as_deref()
            .map(|t| format!("\"{t}\""))
            .unwrap_or_else(|| "a scientific paper".into());
        if let Some(a) = &spec.paper.author {
            s.push_str(&format!(" by {a}"));
        }
        s
    };
    let packages = if spec.docker.pip_install.is_empty() {
        PLATFORM_PACKAGES.join(", ")
    } else {
        spec.docker.pip_install.join(", ")
    };
    let entry_step = if regenerated.is_empty() {
        ""
    } else {
        "\n4. Deliver an entry script at the top of the workspace, `reproduce.sh` (run with bash) or `reproduce.py` (run with python3), that regenerates every data file from scratch: it is re-run from /workspace after you finish, without your data files, and what it writes must match what you submitted (fix random seeds)."
    };
    let steps = if code_only {
        "1. Analyse the paper's method and write your analysis.\n2. Implement all the required code yourself.\n3. Do not run simulations and do not produce data files: write the code only."
    } else {
        "1. Analyse the paper's method and write your analysis.\n2. Implement all the required code yourself.\n3. Run your code to produce the expected data files. Every number in them must come from running your code: no hard-coded, transcribed or invented values."
    };
    // The expected outputs and the attached paper are listed after it by the task's rendering.
    let prompt = format!(
        "# Reproduce {paper_line}\n\n\
Your working directory is /workspace. The full paper is in the workspace: `/workspace/{paper_name}` \
(read it first). Python packages available: {packages}. Paths are relative to /workspace; \
create folders as needed.\n\n\
Steps:\n{steps}{entry_step}\n\n\
## Instruction\n\n{}\n",
        instruction_text.trim_end(),
    );
    dir.write("instruction.md", prompt)?;

    // Held out: the ground truth the judge reads.
    let mut references = Vec::new();
    if let Some(m) = &metadata {
        dir.write("hidden/ground_truth/metadata.md", m)?;
        references.push("ground_truth/metadata.md".to_owned());
    }
    if !code_only && let Some(data) = &data_dir {
        for entry in walkdir::WalkDir::new(data).sort_by_file_name() {
            let entry = entry.map_err(|e| ImportError::Io {
                path: data.clone(),
                source: e.into(),
            })?;
            if entry.path_is_symlink() {
                return Err(source_err(
                    entry.path(),
                    "symlinks are not imported; replace it with the file",
                ));
            }
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = crate::paths::relative_slash(entry.path(), data);
            if !spec.ground_truth_copy_all && !rel.ends_with(".csv") {
                continue;
            }
            let bytes = std::fs::read(entry.path()).map_err(io_err(entry.path()))?;
            dir.write(&format!("hidden/ground_truth/data/{rel}"), bytes)?;
            references.push(format!("ground_truth/data/{rel}"));
        }
    }
    let code_name = spec.ground_truth_code_dir.as_deref().map(|c| {
        c.trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(c)
            .to_owned()
    });
    if let (Some(code), Some(name)) = (&code_dir, &code_name) {
        for entry in walkdir::WalkDir::new(code)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(|e| e.file_name() != "__pycache__")
        {
            let entry = entry.map_err(|e| ImportError::Io {
                path: code.clone(),
                source: e.into(),
            })?;
            if entry.path_is_symlink() {
                return Err(source_err(
                    entry.path(),
                    "symlinks are not imported; replace it with the file",
                ));
            }
            if !entry.file_type().is_file() || entry.path().extension().is_some_and(|e| e == "pyc")
            {
                continue;
            }
            let rel = crate::paths::relative_slash(entry.path(), code);
            let bytes = std::fs::read(entry.path()).map_err(io_err(entry.path()))?;
            dir.write(&format!("hidden/ground_truth/{name}/{rel}"), bytes)?;
            references.push(format!("ground_truth/{name}/{rel}"));
        }
    }

    // The oracle: reference code that writes every expected data file, in its own layout.
    let mut oracle = None;
    if !code_only
        && let (Some(code), Some(name), Some(data_rel)) = (&code_dir, &code_name, &data_rel)
        && let Some(scripts) = oracle_scripts(code, &outputs.data)?
    {
        dir.copy_dir(code, &format!("solution/{name}"))?;
        let runs: String = scripts
            .iter()
            .map(|s| format!("(cd \"$here/{name}\" && python3 {s})\n"))
            .collect();
        // The same runs as the entry script the instruction asks for (`reproduce.sh`), which the
        // re-run evidence finds.
        let entry = format!(
            "#!/bin/sh\n# Regenerates the data files with the reference code.\nset -eu\nhere=/workspace\nmkdir -p \"$here/{data_rel}\"\n{runs}"
        );
        dir.write_script(
            "solution/solve.sh",
            &format!(
                "#!/bin/sh\n# Oracle: the task's reference code, run where it expects to be (its folder beside\n# `{data_rel}/`), writes the expected data files; `reproduce.sh` (the entry script\n# the instruction asks for) does it again.\nset -eu\nhere=/workspace\nrm -rf \"$here/{name}\"\ncp -r /oracle/solution/{name} \"$here/{name}\"\ncat > \"$here/reproduce.sh\" <<'RB_ENTRY'\n{entry}RB_ENTRY\nsh \"$here/reproduce.sh\"\n"
            ),
        )?;
        oracle = Some(scripts);
    }

    // Evidence (weight 0): data against ground truth, deliverables, banned libraries.
    let rtol_source;
    let rtol = {
        let data_desc = grading
            .dimensions
            .iter()
            .filter(|d| d.name.contains("data"))
            .map(|d| d.description.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        if let Some(r) = stated_rtol(&data_desc) {
            rtol_source = "the data dimension's description";
            r
        } else if let Some(r) = metadata.as_deref().and_then(stated_rtol) {
            rtol_source = "metadata";
            r
        } else {
            rtol_source = "default";
            DEFAULT_RTOL
        }
    };
    let mut graders = Vec::new();
    let mut evidence_dims = BTreeSet::new();
    if !code_only && let (Some(data), Some(data_rel)) = (&data_dir, &data_rel) {
        for output in &outputs.data {
            let Some(inside) = truth_of(data, data_rel, output) else {
                continue;
            };
            if !output.ends_with(".csv") {
                continue;
            }
            graders.push(GraderSpec {
                name: format!("data: {output}"),
                dimension: "measured_data_accuracy".into(),
                weight: 1.0,
                check: Check::Csv(rubrics::checks::csv::Csv {
                    output: output.clone(),
                    hidden_expected: format!("ground_truth/data/{inside}"),
                    x_column: None,
                    rtol: Some(rtol),
                    atol: Some(DEFAULT_ATOL),
                    column_tolerances: BTreeMap::new(),
                    nan_policy: rubrics::spec::NanPolicy::default(),
                }),
            });
            evidence_dims.insert("measured_data_accuracy");
        }
    }
    // The agent's code re-run (full mode): its entry script, found among the conventional names,
    // must regenerate the CSV files it submitted, at the data tolerance.
    if !regenerated.is_empty() {
        graders.push(GraderSpec {
            name: "re-run of the agent's entry script".into(),
            dimension: "measured_reproduction".into(),
            weight: 1.0,
            check: Check::Reproduce(rubrics::checks::reproduce::Reproduce {
                argv: Vec::new(),
                entry_candidates: ENTRY_CANDIDATES.iter().map(|c| (*c).to_owned()).collect(),
                outputs: regenerated,
                rtol: Some(rtol),
                atol: Some(DEFAULT_ATOL),
            }),
        });
        evidence_dims.insert("measured_reproduction");
    }
    let all_outputs = outputs.all();
    if !all_outputs.is_empty() {
        graders.push(GraderSpec {
            name: "deliverables".into(),
            dimension: "measured_completeness".into(),
            weight: 1.0,
            check: Check::FilesExist(rubrics::checks::files_exist::FilesExist {
                outputs: all_outputs.clone(),
            }),
        });
        evidence_dims.insert("measured_completeness");
    }
    let banned = metadata.as_deref().map(banned_modules).unwrap_or_default();
    if !banned.is_empty() {
        graders.push(GraderSpec {
            name: "banned libraries".into(),
            dimension: "banned_libraries".into(),
            weight: 1.0,
            check: Check::ForbiddenApi(rubrics::checks::forbidden_api::ForbiddenApi {
                forbidden: banned.clone(),
                outputs: Vec::new(),
            }),
        });
        evidence_dims.insert("banned_libraries");
    }
    let paper = paper_line.clone();
    for d in &grading.dimensions {
        if evidence_dims.contains(d.name.as_str()) {
            return Err(source_err(
                yaml,
                format!(
                    "{which}: `{}` is the name of our evidence dimension; rename the dimension",
                    d.name
                ),
            ));
        }
        let description = if d.description.trim().is_empty() {
            full_description(&d.name)
        } else {
            d.description.clone()
        };
        graders.push(GraderSpec {
            name: d.name.clone(),
            dimension: d.name.clone(),
            weight: 1.0,
            check: Check::PrbenchDimension(rubrics::checks::prbench_dimension::PrbenchDimension {
                name: d.name.clone(),
                weight: d.weight,
                description,
                paper: paper.clone(),
                code_only,
                hidden_references: references.clone(),
                outputs: all_outputs.clone(),
                banned_cap: (d.name == "code_correctness").then_some(BANNED_CAP),
                zero_if_fabricated: zero_if_fabricated(&d.name),
            }),
        });
    }
    let mut dimensions: BTreeMap<String, f64> = grading
        .dimensions
        .iter()
        .map(|d| (d.name.clone(), d.weight))
        .collect();
    for e in &evidence_dims {
        dimensions.insert((*e).to_owned(), 0.0);
    }

    let mut meta = BTreeMap::new();
    meta.insert("source".into(), toml::Value::String("PRBench".into()));
    meta.insert(
        "source_id".into(),
        toml::Value::String(spec.task_id.clone()),
    );
    meta.insert("code_only".into(), toml::Value::Boolean(code_only));
    let mut paper_meta = toml::map::Map::new();
    if let Some(t) = &spec.paper.title {
        paper_meta.insert("title".into(), toml::Value::String(t.clone()));
    }
    if let Some(a) = &spec.paper.author {
        paper_meta.insert("author".into(), toml::Value::String(a.clone()));
    }
    if let Some(d) = yaml_text(&spec.paper.doi) {
        paper_meta.insert("doi".into(), toml::Value::String(d));
    }
    if let Some(y) = yaml_text(&spec.paper.year) {
        paper_meta.insert("year".into(), toml::Value::String(y));
    }
    paper_meta.insert("paper_file".into(), toml::Value::String(paper_name.clone()));
    meta.insert("paper".into(), toml::Value::Table(paper_meta));
    if let Some(image) = &spec.docker.image {
        meta.insert("docker_image".into(), toml::Value::String(image.clone()));
    }
    meta.insert(
        "pip_install".into(),
        toml::Value::Array(
            spec.docker
                .pip_install
                .iter()
                .map(|p| toml::Value::String(p.clone()))
                .collect(),
        ),
    );
    meta.insert("data_rtol".into(), toml::Value::Float(rtol));
    meta.insert(
        "data_rtol_from".into(),
        toml::Value::String(rtol_source.into()),
    );
    if let Some(scripts) = &oracle {
        meta.insert(
            "oracle_scripts".into(),
            toml::Value::Array(scripts.iter().cloned().map(toml::Value::String).collect()),
        );
    }
    let toml = TaskToml {
        id,
        kind: TaskKind::Prbench,
        instruction: "instruction.md".into(),
        attachments: vec![paper_name],
        expected_outputs: all_outputs,
        environment,
        constraints: Constraints {
            forbidden_modules: banned,
            notes: Vec::new(),
        },
        metadata: meta,
        stages: Vec::new(),
        turns: None,
        grading: GradingSpec {
            dimensions: Some(dimensions),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders,
        },
    };
    dir.finish(&toml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_and_timeouts() {
        let v = |s: &str| serde_yaml::Value::String(s.into());
        assert_eq!(memory_mb(&v("8g")), Some(8192));
        assert_eq!(memory_mb(&v("512m")), Some(512));
        assert_eq!(memory_mb(&v("1.5GiB")), Some(1536));
        assert_eq!(memory_mb(&v("lots")), None);
        assert_eq!(
            seconds(&serde_yaml::Value::Number(14400.into())),
            Some(14400)
        );
        assert_eq!(seconds(&v("4h")), Some(14400));
    }

    #[test]
    fn tolerances_stated_in_text() {
        assert_eq!(
            stated_rtol("DMRG is deterministic so results should match closely (~5% tolerance)."),
            Some(0.05)
        );
        assert_eq!(
            stated_rtol("a relative tolerance of 2.5% applies"),
            Some(0.025)
        );
        assert_eq!(
            stated_rtol(
                "50% of the weight goes to this dimension, which is about the data files; tolerance unstated"
            ),
            None
        );
        assert_eq!(stated_rtol("nothing"), None);
    }

    #[test]
    fn banned_table_to_modules() {
        let md = "# Notes\n| Banned | x |\n|--|--|\n| `notthis` | y |\n\n## Banned Libraries & Practices\n\n| Category | Banned | Allowed |\n|---|---|---|\n| **Tensor** | `TeNPy`, `quimb` | numpy |\n| **GPU** | `PyTorch`, `JAX` | `NumPy` |\n| **CLI** | `exact diag tool` | - |\n";
        assert_eq!(banned_modules(md), ["tenpy", "quimb", "torch", "jax"]);
    }

    #[test]
    fn unknown_fields_are_all_named() {
        let v: serde_yaml::Value = serde_yaml::from_str(
            "task_id: x\nextra: 1\npaper: {paper_file: p.md, venue: y}\ngrading:\n  dimensions:\n    - {name: a, weight: 1, rubric: z}\n",
        )
        .expect("yaml");
        let mut out = Vec::new();
        unknown_fields(&v, "", &mut out);
        assert_eq!(out, ["extra", "paper.venue", "grading.dimensions[].rubric"]);
    }
}
