//! An owner lock: an OS file lock (`flock`) whose holder owns a run's Docker objects, so the
//! ownership of containers can pass from a dead process to the one that takes the lock over
//! (labels cannot change on a running container).
//!
//! While a process holds an [`OwnerLock`], every object it creates carries the lock file's path
//! ([`crate::labels::OWNER_LOCK`]), and the reaper counts an object as alive while its owner
//! process lives **or** anyone holds that lock ([`OwnerLock::is_held`]). A crashed holder frees
//! the lock at once (the kernel drops it with the process), so nothing is ever stuck.
//!
//! The holder touches the file every minute (a heartbeat thread), so its modification time
//! tells when the holder was last alive: for [`PARKED_FOR`] after that, a dead holder's agent
//! objects are *parked* ([`OwnerLock::parked`]), kept by automatic reapers for a resume to
//! adopt; after that any reaper removes them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::SandboxError;

/// The lock file path recorded on the objects this process creates (set while a lock is held).
static LABELLED: Mutex<Option<PathBuf>> = Mutex::new(None);

/// How often acquisition is tried before the lock counts as held by someone else: a reaper's
/// probe holds a shared lock for microseconds, which must not look like an owner.
const TRIES: u32 = 10;
const PAUSE: Duration = Duration::from_millis(30);

/// How often the holder touches the lock file.
const HEARTBEAT: Duration = Duration::from_secs(60);

/// How long after its holder was last alive a dead holder's agent objects stay parked.
pub const PARKED_FOR: Duration = Duration::from_secs(30 * 60);

/// A held owner lock; dropping it (or the process ending, however) releases it.
#[derive(Debug)]
pub struct OwnerLock {
    path: PathBuf,
    _lock: Flock<File>,
    /// Dropped with the lock: ends the heartbeat thread.
    _heartbeat: mpsc::Sender<()>,
}

impl OwnerLock {
    /// Takes the exclusive lock on `path` (created if missing) and writes `holder` (who holds
    /// it, for the message others get) into the file. Fails with [`SandboxError::LockHeld`],
    /// carrying what the holder wrote, when another process (or another open of the file)
    /// holds it. From now on objects this process creates carry the lock's path.
    pub fn acquire(path: &Path, holder: &str) -> Result<Self, SandboxError> {
        Self::take(path, holder, true)
    }

    /// Like [`OwnerLock::acquire`], for a lock that owns no objects (a service's hold on its
    /// folder): the objects this process creates do not carry its path.
    pub fn acquire_unlabelled(path: &Path, holder: &str) -> Result<Self, SandboxError> {
        Self::take(path, holder, false)
    }

    fn take(path: &Path, holder: &str, label: bool) -> Result<Self, SandboxError> {
        let io = |source| SandboxError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let mut tries = 0;
        let mut lock = loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => break lock,
                Err((f, Errno::EWOULDBLOCK)) if tries + 1 < TRIES => {
                    tries += 1;
                    file = f;
                    std::thread::sleep(PAUSE);
                }
                Err((mut f, Errno::EWOULDBLOCK)) => {
                    let mut holder = String::new();
                    let _ = f.rewind();
                    let _ = (&mut f).take(4096).read_to_string(&mut holder);
                    return Err(SandboxError::LockHeld {
                        path: path.to_path_buf(),
                        holder: holder.trim().to_owned(),
                    });
                }
                Err((_, e)) => return Err(io(e.into())),
            }
        };
        lock.set_len(0).map_err(io)?;
        lock.rewind().map_err(io)?;
        lock.write_all(holder.as_bytes()).map_err(io)?;
        lock.sync_all().map_err(io)?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if label {
            *LABELLED
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(path.clone());
        }
        let (stop, stopped) = mpsc::channel::<()>();
        let beat = lock.try_clone().map_err(io)?;
        std::thread::Builder::new()
            .name("owner-lock-heartbeat".into())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(HEARTBEAT) {
                    let _ = beat.set_modified(SystemTime::now());
                }
            })
            .map_err(io)?;
        Ok(Self {
            path,
            _lock: lock,
            _heartbeat: stop,
        })
    }

    /// Whether the objects of a dead holder of `path` are parked: no one holds the lock, and
    /// its holder was alive less than [`PARKED_FOR`] ago (the file's modification time).
    pub fn parked(path: &Path) -> bool {
        let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified()) else {
            return false;
        };
        let now = SystemTime::now();
        // A time in the future (a clock step) counts as recent.
        let recent = now
            .duration_since(modified)
            .map_or(true, |age| age < PARKED_FOR);
        recent && !Self::is_held(path)
    }

    /// The lock file (absolute).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether someone holds the lock on `path` now (a missing or unreadable file: no one).
    /// Probes with a shared lock released at once.
    pub fn is_held(path: &Path) -> bool {
        let Ok(file) = File::open(path) else {
            return false;
        };
        match Flock::lock(file, FlockArg::LockSharedNonblock) {
            Ok(probe) => {
                drop(probe);
                false
            }
            Err((_, Errno::EWOULDBLOCK)) => true,
            Err((_, e)) => {
                tracing::debug!(path = %path.display(), error = %e, "cannot probe an owner lock; taken as free");
                false
            }
        }
    }
}

impl Drop for OwnerLock {
    fn drop(&mut self) {
        let mut labelled = LABELLED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if labelled.as_deref() == Some(self.path.as_path()) {
            *labelled = None;
        }
    }
}

/// The lock file this process's new objects are labelled with, if it holds one.
pub(crate) fn labelled() -> Option<PathBuf> {
    LABELLED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_a_released_lock_is_free() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("owner.lock");
        assert!(!OwnerLock::is_held(&path), "no file: not held");
        let first = OwnerLock::acquire(&path, "pid 1 on host a").expect("first");
        assert!(OwnerLock::is_held(&path));
        assert_eq!(labelled().as_deref(), Some(first.path()));
        // A second open of the file is a second holder, even in the same process.
        match OwnerLock::acquire(&path, "pid 2") {
            Err(SandboxError::LockHeld { holder, .. }) => assert_eq!(holder, "pid 1 on host a"),
            other => panic!("expected LockHeld, got {other:?}"),
        }
        // Probing does not take the lock away from its holder.
        assert!(OwnerLock::is_held(&path));
        assert!(!OwnerLock::parked(&path), "held: alive, not parked");
        drop(first);
        assert!(!OwnerLock::is_held(&path));
        assert!(OwnerLock::parked(&path), "its holder was alive just now");
        let old = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        old.set_modified(SystemTime::now() - PARKED_FOR - Duration::from_secs(1))
            .expect("age it");
        assert!(!OwnerLock::parked(&path), "parked no longer");
        assert_eq!(labelled(), None);
        let second = OwnerLock::acquire(&path, "pid 3").expect("free again");
        assert_eq!(
            std::fs::read_to_string(second.path()).expect("read"),
            "pid 3",
            "the new holder replaced the old text"
        );
    }
}
