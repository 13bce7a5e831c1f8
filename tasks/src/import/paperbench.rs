//! PaperBench importer: a rubric tree (`rubric.json`) → a `paperbench` task graded leaf by leaf.
//!
//! The rubric is held out (`hidden/rubric.json`); the agent gets the paper (when given) and
//! works in `/workspace`, which is the submission. A gold submission (PaperBench's fixtures have
//! them) becomes the oracle's solution. The code-only variant grades only `Code Development`
//! leaves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rubrics::{Check, GraderSpec, GradingSpec};
use serde::Deserialize;

use super::{ImportError, TaskDir, TaskToml, io_err, one_dimension};
use crate::spec::{Constraints, Environment, TaskKind};

const CATEGORIES: [&str; 3] = ["Code Development", "Code Execution", "Result Analysis"];
const DIMENSION: &str = "replication";

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct PaperbenchOptions {
    /// Task id (default: `paperbench-<rubric file stem>`).
    pub id: Option<String>,
    /// The paper (markdown or PDF), attached to the workspace.
    pub paper: Option<PathBuf>,
    /// Instruction markdown (default: a generic reproduction instruction).
    pub instruction: Option<PathBuf>,
    /// A submission folder that satisfies the rubric: the oracle copies it into the workspace.
    pub gold_submission: Option<PathBuf>,
    /// Grade only `Code Development` leaves.
    pub code_only: bool,
}

#[derive(Debug, Deserialize)]
struct Node {
    id: String,
    requirements: String,
    weight: f64,
    #[serde(default)]
    sub_tasks: Vec<Node>,
    #[serde(default)]
    task_category: Option<String>,
}

fn source_err(path: &Path, message: impl Into<String>) -> ImportError {
    ImportError::Source {
        path: path.to_path_buf(),
        line: None,
        message: message.into(),
    }
}

/// Checks the tree; returns (leaves, leaves in the graded categories).
fn check_tree(
    node: &Node,
    at: &str,
    file: &Path,
    categories: &[&str],
) -> Result<(usize, usize), ImportError> {
    if !(node.weight.is_finite() && node.weight >= 0.0) {
        return Err(source_err(
            file,
            format!(
                "node {at} (`{}`): weight {} is not a non-negative number",
                node.id, node.weight
            ),
        ));
    }
    if node.sub_tasks.is_empty() {
        // PaperBench's files are not consistent about case and spacing; the grader's filter
        // compares case-insensitively too.
        let known = |c: &str| {
            CATEGORIES
                .iter()
                .find(|k| k.eq_ignore_ascii_case(c.trim()))
                .copied()
        };
        let graded = match &node.task_category {
            Some(category) if known(category).is_some() => {
                categories.is_empty() || known(category).is_some_and(|k| categories.contains(&k))
            }
            Some(category) => {
                return Err(source_err(
                    file,
                    format!(
                        "leaf {at} (`{}`): unknown task_category `{category}`; expected one of {CATEGORIES:?}",
                        node.id
                    ),
                ));
            }
            None => categories.is_empty(),
        };
        return Ok((1, usize::from(graded)));
    }
    let (mut leaves, mut graded) = (0, 0);
    for (i, child) in node.sub_tasks.iter().enumerate() {
        let (l, g) = check_tree(child, &format!("{at}.sub_tasks[{i}]"), file, categories)?;
        leaves += l;
        graded += g;
    }
    Ok((leaves, graded))
}

/// Imports one rubric tree into `dest/<id>/`.
pub fn import(
    rubric: &Path,
    dest: &Path,
    options: &PaperbenchOptions,
) -> Result<PathBuf, ImportError> {
    let text = std::fs::read_to_string(rubric).map_err(io_err(rubric))?;
    let root: Node = serde_json::from_str(&text).map_err(|err| ImportError::Source {
        path: rubric.to_path_buf(),
        line: Some(err.line()),
        message: format!("not a PaperBench rubric tree: {err}"),
    })?;
    let categories: Vec<&str> = if options.code_only {
        vec!["Code Development"]
    } else {
        Vec::new()
    };
    let (leaves, graded) = check_tree(&root, "root", rubric, &categories)?;
    if graded == 0 {
        return Err(source_err(
            rubric,
            if categories.is_empty() {
                "no leaf to grade (the rubric has no leaves)".to_owned()
            } else {
                format!(
                    "no leaf to grade: none of the {leaves} leaves has task_category in {categories:?} (import without the category filter)"
                )
            },
        ));
    }
    let stem = rubric
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "rubric".into());
    let id = match &options.id {
        Some(id) => id.clone(),
        None => format!(
            "paperbench-{}{}",
            super::slug(&stem),
            if options.code_only { "-code-only" } else { "" }
        ),
    };
    let dir = TaskDir::create(dest, &id)?;
    dir.write("hidden/rubric.json", &text)?;

    let mut attachments = Vec::new();
    if let Some(paper) = &options.paper {
        let name = paper
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "paper.md".into());
        dir.write(
            &format!("workspace/{name}"),
            std::fs::read(paper).map_err(io_err(paper))?,
        )?;
        attachments.push(name);
    } else {
        dir.write("workspace/.gitkeep", "")?;
    }
    let instruction = match &options.instruction {
        Some(path) => std::fs::read_to_string(path).map_err(io_err(path))?,
        None => format!(
            "# Reproduce the paper\n\n{}\n\nYour submission is everything in `/workspace` when you finish. \
             It is judged against a hidden rubric of {graded} requirement(s){}.\n",
            if attachments.is_empty() {
                "Reproduce the work described below.".to_owned()
            } else {
                format!("The paper is attached as `{}`.", attachments[0])
            },
            if options.code_only {
                " about the code you write (it is not run)"
            } else {
                ""
            }
        ),
    };
    dir.write("instruction.md", instruction)?;
    let has_gold = match &options.gold_submission {
        Some(gold) => {
            if !gold.is_dir() {
                return Err(source_err(gold, "the gold submission is not a folder"));
            }
            dir.copy_dir(gold, "solution/submission")?;
            dir.write_script(
                "solution/solve.sh",
                "#!/bin/sh\n# Oracle: the gold submission (cwd = /workspace).\nset -eu\ncp -r /oracle/solution/submission/. .\n",
            )?;
            true
        }
        None => false,
    };
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "source".into(),
        toml::Value::String("PaperBench rubric tree".into()),
    );
    metadata.insert(
        "rubric_root_id".into(),
        toml::Value::String(root.id.clone()),
    );
    metadata.insert(
        "root_requirements".into(),
        toml::Value::String(root.requirements.clone()),
    );
    metadata.insert("leaves".into(), toml::Value::Integer(leaves as i64));
    metadata.insert("graded_leaves".into(), toml::Value::Integer(graded as i64));
    metadata.insert("has_oracle".into(), toml::Value::Boolean(has_gold));
    let toml = TaskToml {
        id,
        kind: TaskKind::Paperbench,
        instruction: "instruction.md".into(),
        attachments,
        expected_outputs: Vec::new(),
        environment: Environment::default(),
        constraints: Constraints::default(),
        metadata,
        stages: Vec::new(),
        turns: None,
        grading: GradingSpec {
            dimensions: one_dimension(DIMENSION),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders: vec![GraderSpec {
                name: "rubric tree".into(),
                dimension: DIMENSION.into(),
                weight: 1.0,
                check: Check::PaperbenchTree(rubrics::checks::paperbench_tree::PaperbenchTree {
                    hidden_rubric: "rubric.json".into(),
                    categories: categories.iter().map(|c| (*c).to_owned()).collect(),
                }),
            }],
        },
    };
    dir.finish(&toml)
}
