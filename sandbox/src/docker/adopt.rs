//! Adoption: a resumed run takes over the agent containers its dead owner left running, and
//! removes the rest of the run's objects (see [`crate::Backend::adopt`]).

use std::collections::{HashMap, HashSet};

use bollard::query_parameters::{ListContainersOptions, ListNetworksOptions};

use super::{DockerBackend, DockerSandbox, Reach, api_error, archive, network, remove_container};
use crate::{Adopted, Adoption, NetworkHandle, Role, SandboxError, labels};

fn run_filter(run_id: &str) -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        vec![
            format!("{}=true", labels::MANAGED),
            format!("{}={run_id}", labels::RUN),
        ],
    )])
}

pub(super) async fn adopt(backend: &DockerBackend, run_id: &str) -> Result<Adoption, SandboxError> {
    let docker = &backend.docker;
    let mut out = Adoption::default();
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(run_filter(run_id)),
            ..Default::default()
        }))
        .await
        .map_err(|e| api_error(&backend.endpoint, "list_containers", e))?;
    let mut kept_networks = HashSet::new();
    for c in containers {
        let Some(id) = c.id else { continue };
        let l = c.labels.unwrap_or_default();
        let trial = l.get(labels::TRIAL).cloned();
        let agent = l.get(labels::ROLE).map(String::as_str) == Some(&Role::Agent.to_string());
        let taken = match (agent, trial) {
            (true, Some(trial)) => take(backend, &id, &trial).await?,
            _ => None,
        };
        match taken {
            Some(a) => {
                if let Some(n) = &a.network {
                    kept_networks.insert(n.id.clone());
                }
                tracing::info!(container = %id, trial = %a.trial_id, "adopted a live agent container");
                out.agents.push(a);
            }
            None => {
                remove_container(docker, &backend.endpoint, &id).await?;
                tracing::info!(container = %id, "removed a container of the resumed run");
                out.removed += 1;
            }
        }
    }
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(run_filter(run_id)),
        }))
        .await
        .map_err(|e| api_error(&backend.endpoint, "list_networks", e))?;
    for n in networks {
        let Some(id) = n.id else { continue };
        if kept_networks.contains(&id) {
            continue;
        }
        match network::remove(backend, &id).await {
            Ok(()) => out.removed += 1,
            Err(e) => {
                tracing::warn!(network = %id, error = %e, "removing a network of the resumed run failed")
            }
        }
    }
    Ok(out)
}

/// The container as a sandbox (running or stopped: a stopped agent's workspace can still be
/// copied out); `None` when it is gone.
async fn take(
    backend: &DockerBackend,
    id: &str,
    trial: &str,
) -> Result<Option<Adopted>, SandboxError> {
    let info = match backend.docker.inspect_container(id, None).await {
        Ok(info) => info,
        Err(e) if super::status_of(&e) == Some(404) => return Ok(None),
        Err(e) => return Err(api_error(&backend.endpoint, "inspect_container", e)),
    };
    let config = info.config.unwrap_or_default();
    let network_mode = info.host_config.and_then(|h| h.network_mode);
    let network = info
        .network_settings
        .and_then(|s| s.networks)
        .unwrap_or_default()
        .into_iter()
        .find(|(name, _)| name != "none" && name != "bridge" && name != "host")
        .map(|(name, endpoint)| NetworkHandle {
            id: endpoint.network_id.unwrap_or_else(|| name.clone()),
            name,
            allowed_endpoint: None,
        });
    let user = config
        .user
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| crate::DEFAULT_USER.to_string());
    let mut sandbox = DockerSandbox {
        docker: backend.docker.clone(),
        endpoint: backend.endpoint.clone(),
        id: id.to_string(),
        name: info
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        user: user.clone(),
        ids: (1000, 1000),
        workdir: config.working_dir.unwrap_or_else(|| "/".to_string()),
        // On an internal network: at its address there; on none (`lo` only): an agent created
        // with `NetworkPolicy::Loopback`, reached through a new forwarder into its namespace.
        reach: match &network {
            Some(n) => Reach::Network(n.name.clone()),
            None if network_mode.as_deref() == Some("none") => Reach::Loopback,
            None => Reach::Nothing,
        },
        forwarders: Default::default(),
        // Its runner (if any) is not attached to: execs go through Docker's exec.
        channel: None,
    };
    // A name needs the container's /etc/passwd (an exec: running containers only).
    sandbox.ids = archive::resolve_user(&sandbox, &user)
        .await
        .unwrap_or((1000, 1000));
    Ok(Some(Adopted {
        trial_id: trial.to_string(),
        sandbox: Box::new(sandbox),
        network,
    }))
}
