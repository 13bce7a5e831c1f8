//! The reaper: removes our objects (containers, networks, volumes carrying
//! [`labels::MANAGED`]) whose owner process is dead, or all of one run's. Objects without the
//! label are never touched.

use std::collections::HashMap;

use bollard::query_parameters::{ListContainersOptions, ListNetworksOptions, ListVolumesOptions};

use super::{DockerBackend, api_error, network, remove_container, status_of};
use crate::child::{proc_stat_field, process_alive};
use crate::{SandboxError, labels};

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

pub(crate) async fn reap(
    backend: &DockerBackend,
    run_id: Option<&str>,
    mode: Reap,
) -> Result<usize, SandboxError> {
    let docker = &backend.docker;
    let mut removed = 0;

    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters(run_id)),
            ..Default::default()
        }))
        .await
        .map_err(|e| api_error(&backend.endpoint, "list_containers", e))?;
    for c in containers {
        let (Some(id), Some(l)) = (c.id, c.labels) else {
            continue;
        };
        if doomed(&l, run_id, mode) {
            remove_container(docker, &backend.endpoint, &id).await?;
            tracing::info!(container = %id, run = ?l.get(labels::RUN), "reaped container");
            removed += 1;
        }
    }

    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(filters(run_id)),
        }))
        .await
        .map_err(|e| api_error(&backend.endpoint, "list_networks", e))?;
    for n in networks {
        let (Some(id), Some(l)) = (n.id, n.labels) else {
            continue;
        };
        if doomed(&l, run_id, mode) {
            match network::remove(backend, &id).await {
                Ok(()) => {
                    tracing::info!(network = %id, "reaped network");
                    removed += 1;
                }
                Err(e) => {
                    tracing::warn!(network = %id, error = %e, "reaping a network failed");
                }
            }
        }
    }
    if run_id.is_none() && mode != Reap::All {
        // Firewall chains whose network is gone (a crash between the two steps). Chains are
        // listed *before* networks: a chain is only ever created after its network exists, so
        // one created concurrently is never mistaken for stale.
        let chains = network::chains().await;
        if let Ok(all) = docker.list_networks(None::<ListNetworksOptions>).await {
            let ids: Vec<String> = all.into_iter().filter_map(|n| n.id).collect();
            for prefix in chains {
                if !ids.iter().any(|id| id.starts_with(&prefix)) {
                    network::remove_rules(&prefix).await;
                }
            }
        }
    }

    let volumes = docker
        .list_volumes(Some(ListVolumesOptions {
            filters: Some(filters(run_id)),
        }))
        .await
        .map_err(|e| api_error(&backend.endpoint, "list_volumes", e))?;
    for v in volumes.volumes.unwrap_or_default() {
        if doomed(&v.labels, run_id, mode) {
            match docker
                .remove_volume(
                    &v.name,
                    Some(bollard::query_parameters::RemoveVolumeOptions { force: true }),
                )
                .await
            {
                Ok(()) => removed += 1,
                Err(e) if status_of(&e) == Some(404) => {}
                Err(e) => tracing::warn!(volume = %v.name, error = %e, "reaping a volume failed"),
            }
        }
    }
    Ok(removed)
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
