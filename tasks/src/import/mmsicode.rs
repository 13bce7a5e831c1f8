//! MMSiCode-layout importer: a project with one function masked → a `mmsicode` task.
//!
//! Sample layout (ours; one sample a folder):
//! ```text
//! sample.toml     language = "python" | "c" | "cpp" | "r"
//!                 target_file = "stats/welford.py"     # relative to project/
//!                 target_function = "update"
//!                 description = "..."                   # optional, shown to the agent
//!                 sources = ["interp.c"]                # C/C++: agent sources to compile
//!                 flags = ["-lm"]                       # C/C++: compiler flags
//! project/        the project, target function masked  → workspace
//! reference/      the reference copy of target_file    → held out, and the oracle's
//! tests/          unit tests: pytest (python), test drivers printing `Results: x/y passed`
//!                 (c, cpp), testthat (r)                → held out
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rubrics::{Check, GraderSpec, GradingSpec};
use serde::Deserialize;

use super::{ImportError, TaskDir, TaskToml, io_err, one_dimension};
use crate::spec::{Constraints, Environment, TaskKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Language {
    Python,
    C,
    Cpp,
    R,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sample {
    language: Language,
    target_file: String,
    target_function: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    sources: Vec<String>,
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    id: Option<String>,
}

fn source_err(path: &Path, message: impl Into<String>) -> ImportError {
    ImportError::Source {
        path: path.to_path_buf(),
        line: None,
        message: message.into(),
    }
}

/// Imports one sample folder into `dest/<id>/` (id: `sample.toml`'s `id`, else
/// `mmsicode-<folder name>`).
pub fn import(src: &Path, dest: &Path) -> Result<PathBuf, ImportError> {
    let toml_path = src.join("sample.toml");
    let text = std::fs::read_to_string(&toml_path).map_err(io_err(&toml_path))?;
    let sample: Sample = toml::from_str(&text).map_err(|err| ImportError::Source {
        path: toml_path.clone(),
        line: err.span().map(|s| crate::error::line_col(&text, s.start).0),
        message: err.message().to_owned(),
    })?;
    let target = crate::paths::normalize_relative(&sample.target_file).map_err(|p| {
        source_err(
            &toml_path,
            format!(
                "target_file: {}",
                p.describe(&sample.target_file, "project/")
            ),
        )
    })?;
    let target_rel = crate::paths::relative_slash(&target, Path::new(""));
    let project = src.join("project");
    let masked_path = project.join(&target);
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let reference_path = src.join("reference").join(&file_name);
    let tests = src.join("tests");
    for (path, what) in [
        (&masked_path, "the masked target file"),
        (&reference_path, "the reference copy"),
        (&tests, "the tests folder"),
    ] {
        if !path.exists() {
            return Err(source_err(
                src,
                format!("{what} is missing ({})", path.display()),
            ));
        }
    }
    let masked = std::fs::read_to_string(&masked_path).map_err(io_err(&masked_path))?;
    let reference = std::fs::read_to_string(&reference_path).map_err(io_err(&reference_path))?;
    if masked == reference {
        return Err(source_err(
            &masked_path,
            "the project's target file equals the reference: nothing is masked",
        ));
    }
    if !reference.contains(&sample.target_function) || !masked.contains(&sample.target_function) {
        return Err(source_err(
            &toml_path,
            format!(
                "`{}` is not in both the masked and the reference file",
                sample.target_function
            ),
        ));
    }
    let id = match &sample.id {
        Some(id) => id.clone(),
        None => format!(
            "mmsicode-{}",
            super::slug(
                &src.canonicalize()
                    .map_err(io_err(src))?
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            )
        ),
    };
    let dir = TaskDir::create(dest, &id)?;
    dir.copy_dir(&project, "workspace")?;
    dir.copy_dir(&tests, "hidden/tests")?;
    dir.write(&format!("hidden/reference/{file_name}"), &reference)?;
    dir.write(&format!("solution/reference/{file_name}"), &reference)?;
    dir.write_script(
        "solution/solve.sh",
        &format!("#!/bin/sh\n# Oracle: restore the reference copy of the masked file (cwd = /workspace).\nset -eu\ncp /oracle/solution/reference/{file_name} {target_rel}\n"),
    )?;
    let language = match sample.language {
        Language::Python => "Python",
        Language::C => "C",
        Language::Cpp => "C++",
        Language::R => "R",
    };
    let mut instruction = format!(
        "# Complete a masked {language} function\n\nThe project in `/workspace` has one function whose body was removed: \
         `{}` in `{target_rel}`. Implement it so the project works as documented. Keep its signature and edit nothing else.\n",
        sample.target_function
    );
    if let Some(description) = &sample.description {
        instruction.push_str(&format!("\n{}\n", description.trim()));
    }
    dir.write("instruction.md", instruction)?;

    let check = match sample.language {
        Language::Python => Check::Pytest(rubrics::checks::pytest::Pytest {
            hidden_tests: "tests".into(),
            args: Vec::new(),
        }),
        Language::R => Check::Testthat(rubrics::checks::testthat::Testthat {
            hidden_tests: "tests".into(),
        }),
        Language::C | Language::Cpp => {
            let ext: &[&str] = if sample.language == Language::C {
                &["c"]
            } else {
                &["cpp", "cc", "cxx"]
            };
            let mut drivers: Vec<String> = std::fs::read_dir(&tests)
                .map_err(io_err(&tests))?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| ext.iter().any(|x| name.ends_with(&format!(".{x}"))))
                .map(|name| format!("tests/{name}"))
                .collect();
            drivers.sort();
            if drivers.is_empty() {
                return Err(source_err(
                    &tests,
                    format!("no test driver (*.{}) in tests/", ext[0]),
                ));
            }
            Check::CTest(rubrics::checks::c_test::CTest {
                compiler: if sample.language == Language::C {
                    "gcc"
                } else {
                    "g++"
                }
                .into(),
                workspace_sources: if sample.sources.is_empty() {
                    vec![target_rel.clone()]
                } else {
                    sample.sources.clone()
                },
                hidden_sources: drivers,
                flags: sample.flags.clone(),
            })
        }
    };
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "source".into(),
        toml::Value::String("MMSiCode-layout sample".into()),
    );
    metadata.insert("language".into(), toml::Value::String(language.into()));
    metadata.insert(
        "target_file".into(),
        toml::Value::String(target_rel.clone()),
    );
    metadata.insert(
        "target_function".into(),
        toml::Value::String(sample.target_function.clone()),
    );
    let toml = TaskToml {
        id,
        kind: TaskKind::Mmsicode,
        instruction: "instruction.md".into(),
        attachments: Vec::new(),
        expected_outputs: vec![target_rel],
        environment: Environment {
            image: if sample.language == Language::Python {
                "python"
            } else {
                "sci"
            }
            .into(),
            ..Environment::default()
        },
        constraints: Constraints::default(),
        metadata,
        stages: Vec::new(),
        turns: None,
        grading: GradingSpec {
            dimensions: one_dimension("code_correctness"),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders: vec![GraderSpec {
                name: "unit tests".into(),
                dimension: "code_correctness".into(),
                weight: 1.0,
                check,
            }],
        },
    };
    dir.finish(&toml)
}
