//! SciCoQA importer: discrepancy records (JSONL) → one `scicoqa` task per paper.
//!
//! The agent gets the paper and code URLs (pinned versions) and writes `report.md` listing the
//! paper–code discrepancies it finds. Each reference discrepancy of the paper is held out
//! (`hidden/references/<discrepancy_id>.md`) and graded by its own `discrepancy` grader (a
//! judge decides whether the report names it), so the task's score is the paper's recall.
//! The oracle writes the reference descriptions as its report.
//!
//! Papers and code are external: an agent needs them fetched for it (the platform gives agents
//! no internet), or a workspace with the sources; see [`ScicoqaOptions::sources`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rubrics::{Check, GraderSpec, GradingSpec};
use serde::Deserialize;

use super::{ImportError, TaskDir, TaskToml, io_err, one_dimension};
use crate::spec::{Constraints, Environment, TaskKind};

/// The agent's report.
pub const REPORT_FILE: &str = "report.md";
/// How a task imported without its paper and code gets them.
const NO_SOURCES_FIX: &str = "To grade agents on the sources, re-import with `--sources DIR` (a mirror holding `DIR/<task id>/` with the paper and code) or `--fetch` (when the network is allowed).";
const DIMENSION: &str = "discrepancy_recall";

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct ScicoqaOptions {
    /// A folder holding, per task id, a folder with the paper and the code to put in the
    /// workspace (`<sources>/<task id>/...`); without it the workspace holds only the URLs.
    pub sources: Option<PathBuf>,
    /// Keep records marked invalid or removed in post-processing (default: skip them).
    pub keep_invalid: bool,
}

#[derive(Debug, Clone, Deserialize)]
struct Record {
    discrepancy_id: String,
    paper_url: String,
    #[serde(default)]
    paper_url_versioned: Option<String>,
    #[serde(default)]
    code_url: Option<String>,
    #[serde(default)]
    code_url_versioned: Option<String>,
    discrepancy_description: String,
    #[serde(default)]
    relevant_paper_sections: Vec<serde_json::Value>,
    #[serde(default)]
    relevant_code_files: Vec<serde_json::Value>,
    #[serde(default)]
    origin_type: Option<String>,
    #[serde(default = "yes")]
    is_valid_discrepancy: bool,
    #[serde(default)]
    removed_in_postproc: bool,
}

fn yes() -> bool {
    true
}

fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What one task of a SciCoQA source needs fetched: its id, its paper and its code (pinned
/// versions when the records give them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcesToFetch {
    pub task_id: String,
    pub paper_url: String,
    pub code_url: Option<String>,
}

/// The paper and code of every task `import` would write (for `--fetch`).
pub fn sources_to_fetch(
    src: &Path,
    options: &ScicoqaOptions,
) -> Result<Vec<SourcesToFetch>, ImportError> {
    Ok(papers(src, options)?
        .into_iter()
        .map(|(_, records)| {
            let first = &records[0];
            SourcesToFetch {
                task_id: task_id(first),
                paper_url: first
                    .paper_url_versioned
                    .clone()
                    .unwrap_or_else(|| first.paper_url.clone()),
                code_url: first
                    .code_url_versioned
                    .clone()
                    .or_else(|| first.code_url.clone()),
            }
        })
        .collect())
}

fn task_id(first: &Record) -> String {
    format!("scicoqa-{}", super::slug(&first.discrepancy_id))
}

/// Imports every paper of `src` into `dest/scicoqa-<first discrepancy id>/`.
pub fn import(
    src: &Path,
    dest: &Path,
    options: &ScicoqaOptions,
) -> Result<Vec<PathBuf>, ImportError> {
    papers(src, options)?
        .iter()
        .map(|(_, records)| write(records, dest, options))
        .collect()
}

/// Records grouped by paper, in order of first appearance.
fn papers(src: &Path, options: &ScicoqaOptions) -> Result<Vec<(String, Vec<Record>)>, ImportError> {
    let text = std::fs::read_to_string(src).map_err(io_err(src))?;
    // Papers in order of first appearance, each with its records.
    let mut papers: Vec<(String, Vec<Record>)> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: Record = serde_json::from_str(line).map_err(|err| ImportError::Source {
            path: src.to_path_buf(),
            line: Some(index + 1),
            message: format!("not a SciCoQA record: {err}"),
        })?;
        if !options.keep_invalid && (!record.is_valid_discrepancy || record.removed_in_postproc) {
            continue;
        }
        match papers.iter_mut().find(|(url, _)| *url == record.paper_url) {
            Some((_, records)) => records.push(record),
            None => papers.push((record.paper_url.clone(), vec![record])),
        }
    }
    if papers.is_empty() {
        return Err(ImportError::Source {
            path: src.to_path_buf(),
            line: None,
            message: "no records to import".into(),
        });
    }
    Ok(papers)
}

fn write(
    records: &[Record],
    dest: &Path,
    options: &ScicoqaOptions,
) -> Result<PathBuf, ImportError> {
    let first = &records[0];
    let id = task_id(first);
    let dir = TaskDir::create(dest, &id)?;
    let paper = first
        .paper_url_versioned
        .clone()
        .unwrap_or_else(|| first.paper_url.clone());
    let code = first
        .code_url_versioned
        .clone()
        .or_else(|| first.code_url.clone())
        .unwrap_or_default();
    let instruction = format!(
        "# Find where the code disagrees with the paper\n\n\
         Paper: <{paper}>\n\nCode: <{code}>\n\n\
         Read the paper and its code and find the discrepancies: places where the code does \
         something different from what the paper describes (equations, hyper-parameters, \
         algorithm steps, data handling). Ignore differences that do not change behaviour.\n\n\
         Write `/workspace/{REPORT_FILE}`: one section per discrepancy, saying what the paper \
         says (with the section), what the code does (with the file), and why they differ.\n"
    );
    let sources = options
        .sources
        .as_ref()
        .map(|s| s.join(&id))
        .filter(|p| p.is_dir());
    let mut instruction = instruction;
    if sources.is_none() {
        instruction.push_str(&format!(
            "\n**Imported without sources**: the paper and the code are not in your workspace \
             (only their addresses, in `SOURCES.md`), and this environment may have no internet \
             access. {}\n",
            NO_SOURCES_FIX
        ));
    }
    dir.write("instruction.md", instruction)?;
    match &sources {
        Some(path) => dir.copy_dir(path, "workspace")?,
        None => {
            dir.write(
                "workspace/SOURCES.md",
                format!("Paper: {paper}\nCode: {code}\n"),
            )?;
        }
    }
    let mut graders = Vec::new();
    let mut oracle = String::from("# Discrepancies\n");
    for record in records {
        let rel = format!("references/{}.md", super::slug(&record.discrepancy_id));
        let mut reference = format!("{}\n", record.discrepancy_description.trim());
        if !record.relevant_paper_sections.is_empty() {
            reference.push_str("\nRelevant paper sections:\n");
            for section in &record.relevant_paper_sections {
                reference.push_str(&format!("- {}\n", text_of(section).trim()));
            }
        }
        if !record.relevant_code_files.is_empty() {
            reference.push_str("\nRelevant code files:\n");
            for file in &record.relevant_code_files {
                reference.push_str(&format!("- {}\n", text_of(file).trim()));
            }
        }
        dir.write(&format!("hidden/{rel}"), &reference)?;
        oracle.push_str(&format!("\n## {}\n\n{}", record.discrepancy_id, reference));
        graders.push(GraderSpec {
            name: format!("discrepancy {}", record.discrepancy_id),
            dimension: DIMENSION.into(),
            weight: 1.0,
            check: Check::Discrepancy(rubrics::checks::discrepancy::Discrepancy {
                output: REPORT_FILE.into(),
                hidden_reference: rel,
            }),
        });
    }
    dir.write(&format!("solution/{REPORT_FILE}"), oracle)?;
    dir.write_script(
        "solution/solve.sh",
        &format!("#!/bin/sh\n# Oracle: report the reference discrepancies (cwd = /workspace).\nset -eu\ncp /oracle/solution/{REPORT_FILE} {REPORT_FILE}\n"),
    )?;
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "source".into(),
        toml::Value::String("SciCoQA (UKPLab/scicoqa)".into()),
    );
    metadata.insert(
        "paper_url".into(),
        toml::Value::String(first.paper_url.clone()),
    );
    metadata.insert("code_url".into(), toml::Value::String(code.clone()));
    metadata.insert(
        "discrepancy_ids".into(),
        toml::Value::Array(
            records
                .iter()
                .map(|r| toml::Value::String(r.discrepancy_id.clone()))
                .collect(),
        ),
    );
    if let Some(origin) = &first.origin_type {
        metadata.insert("origin_type".into(), toml::Value::String(origin.clone()));
    }
    metadata.insert(
        "sources_in_workspace".into(),
        toml::Value::Boolean(sources.is_some()),
    );
    if sources.is_none() {
        metadata.insert(
            crate::IMPORT_NOTES_KEY.into(),
            toml::Value::Array(vec![toml::Value::String(format!(
                "imported without its paper and code (the workspace holds only their addresses): {NO_SOURCES_FIX}"
            ))]),
        );
    }
    let toml = TaskToml {
        id,
        kind: TaskKind::Scicoqa,
        instruction: "instruction.md".into(),
        attachments: Vec::new(),
        expected_outputs: vec![REPORT_FILE.into()],
        environment: Environment::default(),
        constraints: Constraints::default(),
        metadata,
        stages: Vec::new(),
        turns: None,
        grading: GradingSpec {
            dimensions: one_dimension(DIMENSION),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders,
        },
    };
    dir.finish(&toml)
}
