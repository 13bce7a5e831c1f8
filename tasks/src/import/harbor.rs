//! Harbor importer: a Harbor task folder → a `harbor` task.
//!
//! Source: `task.toml` (Harbor's: `[agent] timeout_sec`, `[verifier] timeout_sec`,
//! `[environment] cpus, memory_mb`, `[metadata]`), `instruction.md`, `environment/Dockerfile`
//! (+ build context), `tests/test.sh` (writes `/logs/verifier/reward.txt` or `reward.json`),
//! `solution/solve.sh`.
//!
//! Mapping: the build context's files (all but the Dockerfile) become the workspace; `tests/`
//! is held out and graded by `harbor_verifier` running `tests/test.sh`; `solution/` is the
//! oracle's. There is no registry, so the Dockerfile is not built: the image is `sci` when it
//! installs compilers or R, else `python` (override with [`HarborOptions::image`]); the
//! Dockerfile itself is kept, held out, under `hidden/environment/`.
//!
//! Paths: Harbor copies the tests to `/tests`, runs the agent and the verifier in the image's
//! working directory (`WORKDIR`, usually `/app`) and reads `/logs/verifier/reward.{txt,json}`.
//! Here the agent's files are in `/workspace` and the tests in the held-out folder, so the
//! grader runs [`VERIFIER_WRAPPER`] (held out as `rb_verifier.sh`), which runs a copy of the
//! tests with `/tests` and the working directory rewritten to where they are (the verifier runs
//! as an unprivileged uid and cannot create `/tests`); the instruction says where the working
//! directory is. Multi-container tasks (`environment/docker-compose.yaml`) are
//! refused: a trial has one container.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rubrics::{Check, GraderSpec, GradingSpec};

use super::{ImportError, TaskDir, TaskToml, io_err, one_dimension};
use crate::spec::{Constraints, Environment, TaskKind};

/// Held-out entry point of the verifier: Harbor's paths, then `tests/test.sh`. `$1` is the
/// image's working directory.
pub const VERIFIER_WRAPPER: &str = r#"#!/bin/bash
# Written by the research-bench importer. Harbor runs tests/test.sh with the tests in /tests,
# the agent's files in the image's working directory and rewards under /logs/verifier. Here the
# tests are beside this script and the agent's files in $RB_WORKSPACE (/workspace), and the
# verifier may not create /tests: a copy of the tests with those paths rewritten runs instead.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
ws="${RB_WORKSPACE:-/workspace}"
workdir="${1:-/app}"
t="$(mktemp -d)" || exit 1
cp -R "$here/tests/." "$t/" || exit 1
swap() { # every text file of the copy: the path $1 (a whole path component) becomes $2
  grep -rlI -e "$1" "$t" 2>/dev/null | while IFS= read -r f; do
    for _ in 1 2; do
      sed -E -i "s#(^|[^[:alnum:]_./-])$1(/|[^[:alnum:]_.-]|\$)#\1$2\2#g" "$f"
    done
  done
}
swap /tests "$t"
if [ "$workdir" != "$ws" ]; then swap "$workdir" "$ws"; fi
mkdir -p /logs/verifier
cd "$ws" || exit 1
bash "$t/test.sh"
status=$?
rm -rf "$t"
exit $status
"#;

/// Files that make a Harbor task multi-container (not supported).
const COMPOSE_FILES: [&str; 4] = [
    "docker-compose.yaml",
    "docker-compose.yml",
    "compose.yaml",
    "compose.yml",
];

/// The last `WORKDIR` of a Dockerfile (Harbor's agent and verifier run there).
fn workdir(dockerfile: &str) -> Option<String> {
    dockerfile
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let (word, rest) = l.split_once(char::is_whitespace)?;
            word.eq_ignore_ascii_case("WORKDIR")
                .then(|| rest.trim().trim_matches('"').to_owned())
        })
        .rfind(|w| w.starts_with('/'))
}

/// How to import.
#[derive(Debug, Clone, Default)]
pub struct HarborOptions {
    /// Task id (default: the source folder's name).
    pub id: Option<String>,
    /// Image to use instead of the one guessed from the Dockerfile.
    pub image: Option<String>,
}

fn source_err(path: &Path, message: impl Into<String>) -> ImportError {
    ImportError::Source {
        path: path.to_path_buf(),
        line: None,
        message: message.into(),
    }
}

/// `python` unless the Dockerfile installs a compiler toolchain or R.
fn guess_image(dockerfile: &str) -> &'static str {
    let lower = dockerfile.to_ascii_lowercase();
    let sci = [
        "gcc",
        "g++",
        "build-essential",
        "cmake",
        "r-base",
        "rscript",
        "gfortran",
    ];
    if sci.iter().any(|word| lower.contains(word)) {
        "sci"
    } else {
        "python"
    }
}

fn number(table: &toml::Table, section: &str, key: &str) -> Option<f64> {
    let value = table.get(section)?.get(key)?;
    value
        .as_float()
        .or_else(|| value.as_integer().map(|i| i as f64))
}

/// Imports one Harbor task folder into `dest/<id>/`.
pub fn import(src: &Path, dest: &Path, options: &HarborOptions) -> Result<PathBuf, ImportError> {
    let toml_path = src.join("task.toml");
    let text = std::fs::read_to_string(&toml_path).map_err(io_err(&toml_path))?;
    let table: toml::Table = toml::from_str(&text).map_err(|err| ImportError::Source {
        path: toml_path.clone(),
        line: err.span().map(|s| crate::error::line_col(&text, s.start).0),
        message: err.message().to_owned(),
    })?;
    for compose in COMPOSE_FILES {
        if src.join("environment").join(compose).is_file() {
            return Err(source_err(
                &src.join("environment").join(compose),
                "multi-container Harbor tasks (a docker-compose file in environment/) are not supported: a research-bench trial runs one agent container; keep only environment/Dockerfile with everything the task needs",
            ));
        }
    }
    for required in ["instruction.md", "tests/test.sh", "solution/solve.sh"] {
        if !src.join(required).is_file() {
            return Err(source_err(src, format!("a Harbor task needs `{required}`")));
        }
    }
    let id = match &options.id {
        Some(id) => id.clone(),
        None => super::slug(
            &src.canonicalize()
                .map_err(io_err(src))?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ),
    };
    let dir = TaskDir::create(dest, &id)?;
    let env_dir = src.join("environment");
    let dockerfile_path = env_dir.join("Dockerfile");
    let dockerfile = if dockerfile_path.is_file() {
        std::fs::read_to_string(&dockerfile_path).map_err(io_err(&dockerfile_path))?
    } else {
        String::new()
    };
    let harbor_workdir = workdir(&dockerfile).unwrap_or_else(|| "/app".into());
    let mut instruction = std::fs::read_to_string(src.join("instruction.md"))
        .map_err(io_err(&src.join("instruction.md")))?;
    if harbor_workdir != "/workspace" && instruction.contains(&harbor_workdir) {
        instruction.push_str(&format!(
            "\n\n(Imported from Harbor: this task was written for a container whose working directory is `{harbor_workdir}`. Here it is `/workspace`: read `{harbor_workdir}/...` as `/workspace/...`.)\n"
        ));
    }
    dir.write("instruction.md", instruction)?;

    let mut workspace_files = 0;
    if env_dir.is_dir() {
        for entry in std::fs::read_dir(&env_dir).map_err(io_err(&env_dir))? {
            let entry = entry.map_err(io_err(&env_dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name == "Dockerfile" {
                continue;
            }
            let path = entry.path();
            if path.is_dir() {
                super::copy_tree(&path, &dir.root.join("workspace").join(&name))?;
            } else {
                let bytes = std::fs::read(&path).map_err(io_err(&path))?;
                dir.write(&format!("workspace/{name}"), bytes)?;
            }
            workspace_files += 1;
        }
    }
    if workspace_files == 0 {
        dir.write("workspace/.gitkeep", "")?;
    }
    if !dockerfile.is_empty() {
        dir.write("hidden/environment/Dockerfile", &dockerfile)?;
    }
    dir.copy_dir(&src.join("tests"), "hidden/tests")?;
    super::set_executable(&dir.root.join("hidden/tests/test.sh"))?;
    dir.write_script(
        "hidden/rb_verifier.sh",
        &VERIFIER_WRAPPER.replace(
            "workdir=\"${1:-/app}\"",
            &format!("workdir=\"${{1:-{}}}\"", harbor_workdir.replace('"', "")),
        ),
    )?;
    dir.copy_dir(&src.join("solution"), "solution")?;
    super::set_executable(&dir.root.join("solution/solve.sh"))?;

    let mut environment = Environment {
        image: options
            .image
            .clone()
            .unwrap_or_else(|| guess_image(&dockerfile).to_owned()),
        ..Environment::default()
    };
    if let Some(t) = number(&table, "agent", "timeout_sec") {
        environment.agent_timeout_secs = t.ceil().max(1.0) as u64;
    }
    if let Some(t) = number(&table, "verifier", "timeout_sec") {
        environment.grading_timeout_secs = t.ceil().max(1.0) as u64;
    }
    if let Some(cpus) = number(&table, "environment", "cpus") {
        environment.cpus = cpus;
    }
    if let Some(memory) = number(&table, "environment", "memory_mb") {
        environment.memory_mb = memory as u64;
    }
    let mut metadata = BTreeMap::new();
    metadata.insert(
        "source".into(),
        toml::Value::String("Harbor task folder".into()),
    );
    metadata.insert(
        "harbor_workdir".into(),
        toml::Value::String(harbor_workdir.clone()),
    );
    if let Some(meta) = table.get("metadata").and_then(toml::Value::as_table) {
        for (key, value) in meta {
            metadata.insert(format!("harbor_{key}"), value.clone());
        }
    }
    let toml = TaskToml {
        id,
        kind: TaskKind::Harbor,
        instruction: "instruction.md".into(),
        attachments: Vec::new(),
        expected_outputs: Vec::new(),
        environment,
        constraints: Constraints::default(),
        metadata,
        stages: Vec::new(),
        turns: None,
        grading: GradingSpec {
            dimensions: one_dimension("task_completeness"),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders: vec![GraderSpec {
                name: "harbor verifier".into(),
                dimension: "task_completeness".into(),
                weight: 1.0,
                check: Check::HarborVerifier(rubrics::checks::harbor_verifier::HarborVerifier {
                    hidden_script: "rb_verifier.sh".into(),
                }),
            }],
        },
    };
    dir.finish(&toml)
}

#[cfg(test)]
mod tests {
    use super::{guess_image, workdir};

    #[test]
    fn finds_the_last_workdir() {
        assert_eq!(
            workdir("FROM x\nWORKDIR /srv\nRUN y\nworkdir \"/app\"\n").as_deref(),
            Some("/app")
        );
        assert_eq!(workdir("FROM x\nWORKDIR relative\n"), None);
    }

    #[test]
    fn guesses_images() {
        assert_eq!(
            guess_image("FROM python:3.11\nRUN pip install numpy"),
            "python"
        );
        assert_eq!(
            guess_image("FROM debian\nRUN apt-get install -y build-essential"),
            "sci"
        );
        assert_eq!(guess_image("RUN apt-get install r-base"), "sci");
    }
}
