//! The swarm backend's reaper: services of dead runs (or of one run), their runners' configs
//! and secrets, then the docker
//! backend's reaper for containers (task containers and relays carry the labels too), bridges
//! and volumes, then overlays whose endpoints Swarm was still releasing on the first pass.

use bollard::query_parameters::{ListNetworksOptions, ListServicesOptions};

use super::{SwarmBackend, network};
use crate::SandboxError;
use crate::docker::api_error;
use crate::reap_policy::{Reap, doomed, filters};

pub(super) async fn reap(
    backend: &SwarmBackend,
    run_id: Option<&str>,
    mode: Reap,
) -> Result<usize, SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    let mut removed = 0;
    let services = docker
        .list_services(Some(ListServicesOptions {
            filters: Some(filters(run_id)),
            status: None,
        }))
        .await
        .map_err(|e| api_error(endpoint, "list_services", e))?;
    for s in services {
        let labels = s.spec.and_then(|spec| spec.labels).unwrap_or_default();
        let Some(id) = s.id else { continue };
        if doomed(&labels, run_id, mode) {
            super::service::remove(backend, &id, None, None).await?;
            tracing::info!(service = %id, run = ?labels.get(crate::labels::RUN), "reaped service");
            removed += 1;
        }
    }
    // The runners' configs and token secrets (free once their services are gone).
    removed += super::secrets::reap(backend, run_id, mode).await?;
    removed += crate::docker::reap::reap(&backend.docker, run_id, mode).await?;
    // Overlays the docker reaper could not remove yet (endpoints still held by going tasks).
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(filters(run_id)),
        }))
        .await
        .map_err(|e| api_error(endpoint, "list_networks", e))?;
    for n in networks {
        let (Some(id), Some(labels)) = (n.id, n.labels) else {
            continue;
        };
        if n.driver.as_deref() == Some("overlay") && doomed(&labels, run_id, mode) {
            match network::remove_overlay(backend, &id).await {
                Ok(()) => {
                    tracing::info!(network = %id, "reaped overlay");
                    removed += 1;
                }
                Err(e) => tracing::warn!(network = %id, error = %e, "reaping an overlay failed"),
            }
        }
    }
    Ok(removed)
}
