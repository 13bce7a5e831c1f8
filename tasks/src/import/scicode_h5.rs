//! SciCode targets files (`test_data.h5`, upstream's layout): read for an import, written from
//! our own cases files (fixtures, or a user's export of derived targets).
//!
//! HDF5 is read and written by h5py, as upstream does, in a host Python process
//! (`scicode_h5.py`, run through `sandbox::child`): the repository's `.venv` (where
//! `scripts/bootstrap` installs h5py) or the interpreter named by `RB_SCICODE_PYTHON`. The file is
//! the operator's own download, never an agent's, and the script only reads numbers and text
//! from it (no pickles, no references followed). Values come back in the runner's tagged JSON
//! (the `target` of a case in `scicode_cases.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::child::{ChildSpec, SupervisedChild};
use serde::{Deserialize, Serialize};

use super::{ImportError, io_err, write_scicode_runner};

/// The script run on the host.
pub const H5_SCRIPT: &str = include_str!("scicode_h5.py");
/// Environment variable naming the Python (with h5py and numpy) that reads targets files.
pub const PYTHON_ENV: &str = "RB_SCICODE_PYTHON";
/// Largest JSON the reader may hand back.
const MAX_JSON_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// The Python that reads and writes targets files: `RB_SCICODE_PYTHON`, else the repository's
/// `.venv/bin/python` (created by `scripts/bootstrap` with h5py).
pub fn default_python() -> PathBuf {
    match std::env::var_os(PYTHON_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"),
    }
}

/// How many test cases to read for a step.
#[derive(Debug, Clone, Serialize)]
pub struct StepRequest {
    pub step_id: String,
    pub tests: usize,
}

/// A value the file lacks or holds in a form we cannot read.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TargetError {
    pub step_id: String,
    pub test: usize,
    pub cause: String,
}

/// What a targets file holds for the steps asked for: per step, the encoded target of each
/// test (`null` where [`ReadTargets::errors`] says why).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ReadTargets {
    pub steps: BTreeMap<String, Vec<serde_json::Value>>,
    pub errors: Vec<TargetError>,
}

/// What writing a targets file did.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct WriteReport {
    /// Steps written.
    pub written: usize,
    /// Values that have no form in upstream's layout (left out).
    pub errors: Vec<TargetError>,
}

/// Reads the targets of `steps` from `file`.
pub async fn read(
    python: &Path,
    file: &Path,
    steps: &[StepRequest],
    timeout: Duration,
) -> Result<ReadTargets, ImportError> {
    if !file.is_file() {
        return Err(ImportError::Targets(format!(
            "{}: no such file (SciCode's `test_data.h5`, downloaded from upstream)",
            file.display()
        )));
    }
    let staging = staging()?;
    let request = staging.path().join("request.json");
    let out = staging.path().join("targets.json");
    let body = serde_json::to_vec(&serde_json::json!({ "steps": steps }))
        .map_err(|e| ImportError::Targets(e.to_string()))?;
    std::fs::write(&request, body).map_err(io_err(&request))?;
    let file = std::path::absolute(file).map_err(io_err(file))?;
    run(
        python,
        staging.path(),
        vec![
            "read".into(),
            file.display().to_string(),
            request.display().to_string(),
            out.display().to_string(),
        ],
        timeout,
    )
    .await?;
    let len = std::fs::metadata(&out).map_err(io_err(&out))?.len();
    if len > MAX_JSON_BYTES {
        return Err(ImportError::Targets(format!(
            "the targets read from {} exceed {MAX_JSON_BYTES} bytes as JSON",
            file.display()
        )));
    }
    let bytes = std::fs::read(&out).map_err(io_err(&out))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ImportError::Targets(format!("unreadable targets from the reader: {e}")))
}

/// Writes the targets of our `scicode_cases.json` files to `out` in upstream's layout.
pub async fn write(
    python: &Path,
    cases: &[PathBuf],
    out: &Path,
    timeout: Duration,
) -> Result<WriteReport, ImportError> {
    let staging = staging()?;
    let mut args = vec!["write".to_owned()];
    for c in cases {
        args.push(
            std::path::absolute(c)
                .map_err(io_err(c))?
                .display()
                .to_string(),
        );
    }
    args.push(
        std::path::absolute(out)
            .map_err(io_err(out))?
            .display()
            .to_string(),
    );
    let stdout = run(python, staging.path(), args, timeout).await?;
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_default();
    serde_json::from_str(line).map_err(|e| {
        ImportError::Targets(format!("unreadable report of the writer ({e}): {stdout}"))
    })
}

fn staging() -> Result<tempfile::TempDir, ImportError> {
    let dir = tempfile::tempdir().map_err(io_err(Path::new("temporary folder")))?;
    let path = dir.path().join("scicode_h5.py");
    std::fs::write(&path, H5_SCRIPT).map_err(io_err(&path))?;
    // The runner's modules: the tagged JSON of values (`scicode_codec`).
    write_scicode_runner(dir.path())?;
    Ok(dir)
}

/// Runs `python scicode_h5.py ARGS` in `dir`; its stdout, or an error naming the cause and fix.
async fn run(
    python: &Path,
    dir: &Path,
    args: Vec<String>,
    timeout: Duration,
) -> Result<String, ImportError> {
    let mut argv = vec![dir.join("scicode_h5.py").display().to_string()];
    argv.extend(args);
    let mut env = BTreeMap::new();
    env.insert("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned());
    let spec = ChildSpec {
        program: python.display().to_string(),
        args: argv,
        env,
        clear_env: false,
        cwd: dir.to_path_buf(),
        limits: None,
    };
    let fix = format!(
        "targets files are read with h5py: run scripts/bootstrap (it installs h5py into .venv) \
         or set {PYTHON_ENV} to a Python that has h5py and numpy"
    );
    let mut child = SupervisedChild::spawn(spec).map_err(|e| {
        ImportError::Targets(format!("cannot start {}: {e}; {fix}", python.display()))
    })?;
    let collect = async {
        let mut out = String::new();
        while let Some(line) = child.next_stdout_line().await {
            if out.len() < 1024 * 1024 {
                out.push_str(&line);
                out.push('\n');
            }
        }
        let exit = child.wait().await;
        (out, exit)
    };
    let Ok((out, exit)) = tokio::time::timeout(timeout, collect).await else {
        child.kill_tree();
        return Err(ImportError::Targets(format!(
            "reading or writing the targets file took longer than {}s (--timeout-secs)",
            timeout.as_secs()
        )));
    };
    if !exit.success() {
        let tail = child.stderr_tail();
        let hint = if tail.contains("No module named 'h5py'")
            || tail.contains("No module named 'numpy'")
        {
            format!("; {fix}")
        } else {
            String::new()
        };
        return Err(ImportError::Targets(format!(
            "scicode_h5.py failed ({exit}){hint}:\n{tail}"
        )));
    }
    Ok(out)
}
