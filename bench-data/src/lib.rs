//! Where tests find the third-party benchmark samples (SciCode, PaperBench, SciCoQA records).
//!
//! The samples are not part of the repository. One setting says where they are:
//! `RB_BENCHMARKS` (a folder holding `scicode/`, `paperbench/`, `scicoqa/`), by default
//! `../shared/benchmarks` beside the repository root when that exists.
//!
//! Every test that reads them has `shared_data` in its name. `scripts/test` leaves those tests
//! out when the folder is absent (and lists them at the end), except under `CI=true`, where every
//! test runs. A test that runs without the data fails here, naming the folder it looked for and
//! how to provide it: it never skips itself.

use std::path::{Path, PathBuf};

/// The environment variable naming the benchmarks folder.
pub const ENV: &str = "RB_BENCHMARKS";

/// Name fragment every test that reads the samples carries (what `scripts/test` filters on).
pub const TEST_MARK: &str = "shared_data";

/// The repository root (this crate lives one level below it).
fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Where the benchmarks folder is expected: `RB_BENCHMARKS` when set (and not empty), else
/// `<repo>/../shared/benchmarks`. Does not check that it exists.
pub fn location() -> PathBuf {
    match std::env::var_os(ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => repo_root().join("../shared/benchmarks"),
    }
}

/// Why the benchmarks folder cannot be used, with the fix; `None` when it is there.
pub fn missing() -> Option<String> {
    let from_env = std::env::var_os(ENV).is_some_and(|d| !d.is_empty());
    missing_at(&location(), from_env)
}

fn missing_at(dir: &Path, from_env: bool) -> Option<String> {
    if dir.is_dir() {
        return None;
    }
    Some(format!(
        "the benchmark samples are not at {} ({}): set {ENV}=DIR to a folder holding \
         scicode/, paperbench/ and scicoqa/ (or put them at ../shared/benchmarks beside the \
         repository). Without them, `scripts/test` leaves out the tests named *{TEST_MARK}*; \
         under CI=true they must be present",
        dir.display(),
        if from_env { ENV } else { "the default" }
    ))
}

/// The benchmarks folder. Panics (failing the test) with the cause and the fix when it is absent.
#[allow(clippy::panic)]
pub fn dir() -> PathBuf {
    if let Some(why) = missing() {
        panic!("{why}");
    }
    location()
}

/// A path inside the benchmarks folder, e.g. `path("scicode/problems_dev.jsonl")`. Panics like
/// [`dir`] when the folder is absent.
pub fn path(rel: &str) -> PathBuf {
    dir().join(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_folder_names_itself_and_the_fix() {
        let gone = Path::new("/nonexistent/rb-benchmarks");
        let why = missing_at(gone, true).expect("absent");
        assert!(why.contains("/nonexistent/rb-benchmarks"), "{why}");
        assert!(why.contains("(RB_BENCHMARKS)"), "{why}");
        assert!(why.contains("set RB_BENCHMARKS=DIR"), "{why}");
        assert!(why.contains("*shared_data*"), "{why}");
        let why = missing_at(gone, false).expect("absent");
        assert!(why.contains("(the default)"), "{why}");
        assert_eq!(missing_at(&std::env::temp_dir(), false), None);
    }
}
