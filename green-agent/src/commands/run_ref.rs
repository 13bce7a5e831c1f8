//! A run named on the command line: its id under the results directory, or its folder (the
//! path `run` prints).

use std::path::{Path, PathBuf};

use crate::store::DB_FILE;

/// Where a named run lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    /// The results directory holding the run's folder.
    pub results_dir: PathBuf,
    pub run_id: String,
}

impl RunRef {
    /// `given` is a run folder (a directory holding the run's store, or, with a shared
    /// database, a directory whose name is the run id) or a run id under `results_dir`.
    pub fn resolve(given: &str, results_dir: &Path, shared_database: bool) -> Self {
        let as_path = Path::new(given);
        let is_id = !given.contains('/') && results_dir.join(given).join(DB_FILE).is_file();
        let is_folder = as_path.join(DB_FILE).is_file()
            || (shared_database && given.contains('/') && as_path.is_dir());
        if !is_id && is_folder {
            let folder = std::fs::canonicalize(as_path).unwrap_or_else(|_| as_path.to_path_buf());
            if let Some(name) = folder.file_name() {
                let parent = folder
                    .parent()
                    .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
                return Self {
                    results_dir: parent,
                    run_id: name.to_string_lossy().into_owned(),
                };
            }
        }
        Self {
            results_dir: results_dir.to_path_buf(),
            run_id: given.trim_end_matches('/').to_owned(),
        }
    }

    /// The run's folder.
    pub fn dir(&self) -> PathBuf {
        crate::run::run_dir(&self.results_dir, &self.run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_named_by_id_or_by_folder() {
        let results = tempfile::tempdir().expect("tempdir");
        let run = results.path().join("r1");
        std::fs::create_dir(&run).expect("mkdir");
        std::fs::write(run.join(DB_FILE), b"").expect("store");
        let by_id = RunRef::resolve("r1", results.path(), false);
        assert_eq!(by_id.run_id, "r1");
        assert_eq!(by_id.dir(), results.path().join("r1"));
        let elsewhere = tempfile::tempdir().expect("tempdir");
        let by_folder = RunRef::resolve(&run.display().to_string(), elsewhere.path(), false);
        assert_eq!(by_folder.run_id, "r1");
        assert_eq!(
            by_folder.dir(),
            std::fs::canonicalize(&run).expect("canonical")
        );
        let trailing = RunRef::resolve(&format!("{}/", run.display()), elsewhere.path(), false);
        assert_eq!(trailing.run_id, "r1");
        let unknown = RunRef::resolve("r2", results.path(), false);
        assert_eq!(unknown.dir(), results.path().join("r2"));
    }
}
