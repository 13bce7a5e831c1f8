//! The reap policy every backend applies: which of our objects (those carrying
//! [`labels::MANAGED`]) a reap removes, from their labels alone: an owner process that is dead
//! (pid and start time), no one holding the owner lock it names, agents parked for a resume
//! kept. Objects without the label are never touched. The listing and removal are each
//! backend's (`docker::reap`, `swarm::reap`).

use std::collections::HashMap;

use crate::child::{proc_stat_field, process_alive};
use crate::labels;

/// Whether the object's owner is alive: the process recorded in its labels still runs (and is
/// the same process: a recorded start time that differs means the pid was reused), or someone
/// holds the owner lock it names (a resumed run that adopted it).
pub(crate) fn owner_alive(object_labels: &HashMap<String, String>) -> bool {
    creator_alive(object_labels)
        || object_labels
            .get(labels::OWNER_LOCK)
            .is_some_and(|p| crate::OwnerLock::is_held(std::path::Path::new(p)))
}

fn creator_alive(object_labels: &HashMap<String, String>) -> bool {
    let Some(pid) = object_labels
        .get(labels::OWNER_PID)
        .and_then(|p| p.parse::<u32>().ok())
    else {
        // No owner recorded: treat as dead (it is ours, by the MANAGED label).
        return false;
    };
    if !process_alive(pid) {
        return false;
    }
    match object_labels
        .get(labels::OWNER_START)
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(start) => proc_stat_field(pid, 22) == Some(start),
        None => true,
    }
}

/// Which objects a reap removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reap {
    /// Every object (of the run given).
    All,
    /// Objects whose owner is dead, but not the parked agent objects of a run whose owner
    /// died less than [`crate::owner_lock::PARKED_FOR`] ago (kept for its resume).
    Dead,
    /// Objects whose owner is dead, parked ones too (`green-agent reap`).
    DeadAndParked,
}

/// Whether the reaper removes an object: ours, in `run_id` if given, and as `mode` says.
pub(crate) fn doomed(
    object_labels: &HashMap<String, String>,
    run_id: Option<&str>,
    mode: Reap,
) -> bool {
    if object_labels.get(labels::MANAGED).map(String::as_str) != Some("true") {
        return false;
    }
    if let Some(run) = run_id
        && object_labels.get(labels::RUN).map(String::as_str) != Some(run)
    {
        return false;
    }
    match mode {
        Reap::All => true,
        Reap::DeadAndParked => !owner_alive(object_labels),
        Reap::Dead => !owner_alive(object_labels) && !parked(object_labels),
    }
}

/// An agent object of a dead owner whose owner lock says it was alive a short while ago.
fn parked(object_labels: &HashMap<String, String>) -> bool {
    object_labels.get(labels::ROLE).map(String::as_str) == Some("agent")
        && object_labels
            .get(labels::OWNER_LOCK)
            .is_some_and(|p| crate::OwnerLock::parked(std::path::Path::new(p)))
}

pub(crate) fn filters(run_id: Option<&str>) -> HashMap<String, Vec<String>> {
    let mut label = vec![format!("{}=true", labels::MANAGED)];
    if let Some(run) = run_id {
        label.push(format!("{}={run}", labels::RUN));
    }
    HashMap::from([("label".to_string(), label)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels_for(pid: u32, start: Option<u64>) -> HashMap<String, String> {
        let mut l = HashMap::from([
            (labels::MANAGED.to_string(), "true".to_string()),
            (labels::RUN.to_string(), "r1".to_string()),
            (labels::OWNER_PID.to_string(), pid.to_string()),
        ]);
        if let Some(start) = start {
            l.insert(labels::OWNER_START.to_string(), start.to_string());
        }
        l
    }

    #[test]
    fn owner_liveness_uses_pid_and_start_time() {
        let me = std::process::id();
        let start = proc_stat_field(me, 22).expect("own start time");
        assert!(owner_alive(&labels_for(me, Some(start))));
        assert!(owner_alive(&labels_for(me, None)));
        // Same pid, different start time: a reused pid.
        assert!(!owner_alive(&labels_for(me, Some(start + 1))));
        assert!(!owner_alive(&labels_for(u32::MAX - 1, None)));
    }

    #[test]
    fn a_dead_owners_objects_live_while_their_owner_lock_is_held() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("owner.lock");
        let mut l = labels_for(u32::MAX - 1, None);
        l.insert(labels::OWNER_LOCK.to_string(), path.display().to_string());
        assert!(!owner_alive(&l), "no lock file: dead");
        let file = std::fs::File::create(&path).expect("create");
        // Held as a resumed run holds it (a plain flock, as another process would).
        let held = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| e)
            .expect("lock");
        assert!(owner_alive(&l), "the lock is held: adopted, not reaped");
        assert!(!doomed(&l, None, Reap::Dead));
        drop(held);
        assert!(!owner_alive(&l), "released: dead again");
        assert!(doomed(&l, None, Reap::DeadAndParked));
        // An agent object of an owner alive a moment ago is parked for a resume.
        l.insert(labels::ROLE.to_string(), "agent".to_string());
        assert!(!doomed(&l, None, Reap::Dead), "parked");
        assert!(doomed(&l, None, Reap::DeadAndParked));
        l.insert(labels::ROLE.to_string(), "grader".to_string());
        assert!(doomed(&l, None, Reap::Dead), "only agents are parked");
    }

    #[test]
    fn only_managed_objects_are_doomed() {
        let mut l = labels_for(u32::MAX - 1, None);
        assert!(doomed(&l, None, Reap::Dead));
        assert!(doomed(&l, Some("r1"), Reap::Dead));
        assert!(!doomed(&l, Some("r2"), Reap::All));
        let alive = labels_for(std::process::id(), None);
        assert!(
            !doomed(&alive, None, Reap::Dead),
            "a live owner's objects stay"
        );
        assert!(
            doomed(&alive, Some("r1"), Reap::All),
            "a run's objects go when asked"
        );
        l.remove(labels::MANAGED);
        assert!(!doomed(&l, None, Reap::Dead));
        assert!(!doomed(&l, Some("r1"), Reap::All));
    }
}
