//! One owner per run: `run` and `resume` hold an OS file lock on `<run dir>/owner.lock`
//! ([`sandbox::OwnerLock`]) for as long as they work on the run. A second one refuses, naming
//! the owner; the kernel frees the lock when its holder dies however it dies, so a crashed
//! owner never blocks a resume. The lock also keeps the run's containers alive across a crash:
//! they carry its path, and reapers leave alone the objects whose lock is held.
//!
//! `serve` takes the same lock for every run it works on (a CLI `resume` of a run a live
//! service runs is refused, and a restarted service waits for a run another live process
//! owns), and holds `<results>/serve/service.lock` while it runs: one service per results
//! folder, since its assessment records live there.

use std::path::{Path, PathBuf};

/// The lock file inside a run directory.
pub const LOCK_FILE: &str = "owner.lock";

/// Held while this process owns the run.
#[derive(Debug)]
pub struct RunOwnership {
    _lock: sandbox::OwnerLock,
}

#[derive(Debug, thiserror::Error)]
pub enum OwnershipError {
    #[error(
        "run {run} is owned by another process ({holder}); wait for it to finish, or stop it \
         (kill its pid) and continue with `green-agent resume {run}`"
    )]
    Held { run: String, holder: String },
    #[error(
        "{dir} is served by another `green-agent serve` ({holder}); stop it first, or give \
         this one another --results-dir"
    )]
    Served { dir: PathBuf, holder: String },
    #[error("cannot lock run {run} ({path})")]
    Lock {
        run: String,
        path: PathBuf,
        #[source]
        source: Box<sandbox::SandboxError>,
    },
}

/// The lock file of the service in a results folder.
pub fn service_lock(results_dir: &Path) -> PathBuf {
    results_dir.join("serve").join("service.lock")
}

/// Takes the results folder for a `serve` process: refused, naming the holder, while another
/// live service has it.
pub fn claim_service(results_dir: &Path) -> Result<RunOwnership, OwnershipError> {
    let path = service_lock(results_dir);
    let dir = path.parent().unwrap_or(results_dir);
    match claim_file(dir, "service.lock", "serve", "serve", false) {
        Ok(o) => Ok(o),
        Err(OwnershipError::Held { holder, .. }) => Err(OwnershipError::Served {
            dir: results_dir.to_path_buf(),
            holder,
        }),
        Err(e) => Err(e),
    }
}

/// Takes the run's ownership for `command` (`run`, `resume` or `serve`), creating the run
/// directory.
pub fn claim(run_dir: &Path, run_id: &str, command: &str) -> Result<RunOwnership, OwnershipError> {
    claim_file(run_dir, LOCK_FILE, run_id, command, true)
}

fn claim_file(
    run_dir: &Path,
    file: &str,
    run_id: &str,
    command: &str,
    labels_objects: bool,
) -> Result<RunOwnership, OwnershipError> {
    let path = run_dir.join(file);
    let failed = |source| OwnershipError::Lock {
        run: run_id.to_owned(),
        path: path.clone(),
        source: Box::new(source),
    };
    std::fs::create_dir_all(run_dir).map_err(|e| {
        failed(sandbox::SandboxError::Io {
            path: run_dir.to_path_buf(),
            source: e,
        })
    })?;
    let holder = format!(
        "pid {} on host {}, `green-agent {command}` since {}",
        std::process::id(),
        hostname(),
        chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    let taken = if labels_objects {
        sandbox::OwnerLock::acquire(&path, &holder)
    } else {
        sandbox::OwnerLock::acquire_unlabelled(&path, &holder)
    };
    match taken {
        Ok(lock) => Ok(RunOwnership { _lock: lock }),
        Err(sandbox::SandboxError::LockHeld { holder, .. }) => Err(OwnershipError::Held {
            run: run_id.to_owned(),
            holder: if holder.is_empty() {
                "unknown: it has not written its name yet".into()
            } else {
                holder
            },
        }),
        Err(e) => Err(failed(e)),
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_refuses_naming_the_owner_and_a_released_run_is_free() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run_dir = dir.path().join("r1");
        let first = claim(&run_dir, "r1", "run").expect("first claim");
        let err = claim(&run_dir, "r1", "resume").expect_err("second claim");
        let text = err.to_string();
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(text.contains("`green-agent run` since"), "{text}");
        assert!(text.contains("green-agent resume r1"), "{text}");
        drop(first);
        claim(&run_dir, "r1", "resume").expect("free once released");
    }

    #[test]
    fn one_service_per_results_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = claim_service(dir.path()).expect("first service");
        let err = claim_service(dir.path()).expect_err("second service");
        let text = err.to_string();
        assert!(
            text.contains("served by another `green-agent serve`"),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {}", std::process::id())),
            "{text}"
        );
        assert!(service_lock(dir.path()).is_file());
        // A run's lock is another file: the service can own its runs.
        let _run = claim(&dir.path().join("r1"), "r1", "serve").expect("a run of the service");
        drop(first);
        claim_service(dir.path()).expect("free once released");
    }
}
