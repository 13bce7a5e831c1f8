//! The reaper: removes our objects (containers, networks, volumes carrying
//! [`labels::MANAGED`]) whose owner process is dead, or all of one run's. Objects without the
//! label are never touched.

use bollard::query_parameters::{ListContainersOptions, ListNetworksOptions, ListVolumesOptions};

use super::{DockerBackend, api_error, network, remove_container, status_of};
pub(crate) use crate::reap_policy::Reap;
use crate::reap_policy::{doomed, filters};
use crate::{SandboxError, labels};

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
