//! A sandbox as a Swarm service: the spec, waiting for its one task to run on this node,
//! adopting the task's container, removal.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::models::{
    EndpointSpec, EndpointSpecModeEnum, Limit, Mount, MountType, NetworkAttachmentConfig,
    ResourceObject, ServiceSpec, ServiceSpecMode, ServiceSpecModeReplicated, TaskSpec,
    TaskSpecContainerSpec, TaskSpecContainerSpecPrivileges, TaskSpecPlacement, TaskSpecResources,
    TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum, TaskState,
};
use bollard::query_parameters::ListTasksOptions;

use super::{SANDBOX_ALIAS, SwarmBackend, SwarmSandbox, network};
use crate::docker::{
    DEFAULT_USER, DockerSandbox, api_error, object_labels, object_name, remove_container,
    status_of, validate_spec,
};
use crate::{NetworkPolicy, SandboxError, SandboxSpec};

/// Swarm's longest service name (a DNS label).
const MAX_SERVICE_NAME: usize = 63;

/// `name` within [`MAX_SERVICE_NAME`]: the run part is cut, the unique tail kept.
fn service_name(name: String) -> String {
    if name.len() <= MAX_SERVICE_NAME {
        return name;
    }
    // Object names are ASCII; the tail (role, pid, time, counter) makes them unique.
    let tail = &name[name.len() - 32..];
    format!("{}{tail}", &name[..MAX_SERVICE_NAME - 32])
}

/// The service spec of a sandbox.
fn service_spec(
    backend: &SwarmBackend,
    spec: &SandboxSpec,
    name: &str,
    image_id: &str,
    user: &str,
    network: &str,
) -> Result<ServiceSpec, SandboxError> {
    let labels = object_labels(&spec.owner);
    let (command, args) = match &spec.command {
        None => (vec!["sleep".to_string(), "infinity".to_string()], vec![]),
        Some(command) => (vec![command[0].clone()], command[1..].to_vec()),
    };
    let memory = i64::try_from(spec.limits.memory_bytes)
        .map_err(|_| SandboxError::InvalidLimits("memory_bytes is too large".into()))?;
    let nano_cpus = (spec.limits.cpus * 1e9).round() as i64;
    let mut constraints = vec![format!("node.id=={}", backend.node_id)];
    constraints.extend(backend.constraints.iter().cloned());
    let aliases = match spec.network {
        NetworkPolicy::Internal(_) => Some(vec![SANDBOX_ALIAS.to_string()]),
        NetworkPolicy::None => None,
    };
    Ok(ServiceSpec {
        name: Some(name.to_string()),
        labels: Some(labels.clone()),
        task_template: Some(TaskSpec {
            container_spec: Some(TaskSpecContainerSpec {
                image: Some(image_id.to_string()),
                labels: Some(labels),
                command: Some(command),
                args: Some(args),
                env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
                dir: Some(spec.workdir.clone()),
                user: Some(user.to_string()),
                init: Some(true),
                privileges: Some(TaskSpecContainerSpecPrivileges {
                    no_new_privileges: Some(true),
                    ..Default::default()
                }),
                mounts: Some(
                    spec.mounts
                        .iter()
                        .map(|m| Mount {
                            target: Some(m.sandbox_path.clone()),
                            source: Some(m.host_path.display().to_string()),
                            typ: Some(MountType::BIND),
                            read_only: Some(true),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            resources: Some(TaskSpecResources {
                limits: Some(Limit {
                    nano_cpus: Some(nano_cpus),
                    memory_bytes: Some(memory),
                    pids: Some(spec.limits.pids),
                }),
                // Memory is reserved; CPUs are only limited: the green agent creates a trial's
                // grading service while its agent runs, and CPU reservations of idle graders
                // would keep agents from being scheduled on a small node.
                reservations: Some(ResourceObject {
                    memory_bytes: Some(memory),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            restart_policy: Some(TaskSpecRestartPolicy {
                condition: Some(TaskSpecRestartPolicyConditionEnum::NONE),
                max_attempts: Some(0),
                ..Default::default()
            }),
            placement: Some(TaskSpecPlacement {
                constraints: Some(constraints),
                ..Default::default()
            }),
            networks: Some(vec![NetworkAttachmentConfig {
                target: Some(network.to_string()),
                aliases,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        mode: Some(ServiceSpecMode {
            replicated: Some(ServiceSpecModeReplicated { replicas: Some(1) }),
            ..Default::default()
        }),
        endpoint_spec: Some(EndpointSpec {
            mode: Some(EndpointSpecModeEnum::DNSRR),
            ports: None,
        }),
        ..Default::default()
    })
}

pub(super) async fn create(
    backend: &SwarmBackend,
    spec: SandboxSpec,
) -> Result<SwarmSandbox, SandboxError> {
    validate_spec(&spec)?;
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    // By id: a tag would make the node try a registry first.
    let image_id = match docker.inspect_image(&spec.image).await {
        Ok(info) => info
            .id
            .ok_or_else(|| SandboxError::ImageMissing(spec.image.clone()))?,
        Err(e) if matches!(status_of(&e), Some(404) | Some(400)) => {
            return Err(SandboxError::ImageMissing(spec.image.clone()));
        }
        Err(e) => return Err(api_error(endpoint, "inspect_image", e)),
    };
    let user = spec
        .user
        .clone()
        .unwrap_or_else(|| DEFAULT_USER.to_string());
    let name = service_name(object_name(&spec.owner));
    let (network_id, relay_address, private_network) = match &spec.network {
        NetworkPolicy::Internal(handle) => (
            handle.id.clone(),
            Some(network::relay_address(backend, handle).await?),
            None,
        ),
        NetworkPolicy::None => {
            let (id, _, _) =
                network::create_overlay(backend, &spec.owner, format!("{name}-iso")).await?;
            (id.clone(), None, Some(id))
        }
    };
    let mut service_id = None;
    let made = async {
        let body = service_spec(backend, &spec, &name, &image_id, &user, &network_id)?;
        let created = docker
            .create_service(body, None)
            .await
            .map_err(|e| match status_of(&e) {
                Some(400) => SandboxError::InvalidSpec(format!("Swarm refused the spec: {e}")),
                _ => api_error(endpoint, "create_service", e),
            })?;
        let id = created.id.ok_or_else(|| SandboxError::Scheduling {
            service: name.clone(),
            detail: "the engine returned no service id".into(),
        })?;
        service_id = Some(id.clone());
        let container_id = wait_running(backend, &id, &name).await?;
        let container = DockerSandbox::adopt(
            &backend.docker,
            container_id,
            name.clone(),
            user.clone(),
            spec.workdir.clone(),
        )
        .await?;
        super::setid::harden(backend, &container, &image_id, &name).await?;
        Ok::<_, SandboxError>((id, container))
    }
    .await;
    match made {
        Ok((service_id, container)) => {
            tracing::info!(
                service = %name,
                image = %spec.image,
                run = %spec.owner.run_id,
                role = %spec.owner.role,
                "created service"
            );
            Ok(SwarmSandbox {
                backend: backend.clone(),
                service_id,
                service_name: name,
                container,
                relay_address,
                private_network,
            })
        }
        Err(e) => {
            let cleanup = match &service_id {
                Some(id) => remove(backend, id, None, private_network.as_deref()).await,
                None => match &private_network {
                    Some(net) => network::remove_overlay(backend, net).await,
                    None => Ok(()),
                },
            };
            if let Err(cleanup) = cleanup {
                tracing::warn!(service = %name, error = %cleanup, "removing a half-created service failed");
            }
            Err(e)
        }
    }
}

/// Waits for the service's task to run on this node; returns its container id.
async fn wait_running(
    backend: &SwarmBackend,
    service_id: &str,
    name: &str,
) -> Result<String, SandboxError> {
    let docker = backend.docker.client();
    let began = Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        let tasks = docker
            .list_tasks(Some(ListTasksOptions {
                filters: Some(HashMap::from([(
                    "service".to_string(),
                    vec![service_id.to_string()],
                )])),
            }))
            .await
            .map_err(|e| api_error(&backend.docker.endpoint, "list_tasks", e))?;
        let mut last = String::from("no task yet");
        for task in tasks {
            let status = task.status.unwrap_or_default();
            let state = status.state;
            let detail = [status.err.as_deref(), status.message.as_deref()]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            last = format!(
                "task {}: {detail}",
                state.map_or("unknown".into(), |s| format!("{s:?}").to_ascii_lowercase())
            );
            match state {
                Some(TaskState::RUNNING) => {
                    if task.node_id.as_deref() != Some(backend.node_id.as_str()) {
                        return Err(SandboxError::Scheduling {
                            service: name.to_string(),
                            detail: format!(
                                "its task runs on node {:?}, not on this one ({}); files move through this engine only",
                                task.node_id, backend.node_id
                            ),
                        });
                    }
                    if let Some(id) = status.container_status.and_then(|c| c.container_id) {
                        return Ok(id);
                    }
                }
                Some(
                    TaskState::FAILED
                    | TaskState::REJECTED
                    | TaskState::COMPLETE
                    | TaskState::SHUTDOWN
                    | TaskState::ORPHANED
                    | TaskState::REMOVE,
                ) => {
                    return Err(SandboxError::Scheduling {
                        service: name.to_string(),
                        detail: last,
                    });
                }
                _ => {}
            }
        }
        if began.elapsed() > backend.schedule_timeout {
            return Err(SandboxError::Scheduling {
                service: name.to_string(),
                detail: format!(
                    "not running after {} s ({last}); the cluster may lack the CPUs or memory the task reserves",
                    backend.schedule_timeout.as_secs()
                ),
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

/// Removes a service, its task's container (at once, not when Swarm gets to it) and a private
/// overlay. Idempotent.
pub(super) async fn remove(
    backend: &SwarmBackend,
    service_id: &str,
    container_id: Option<&str>,
    private_network: Option<&str>,
) -> Result<(), SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    match docker.delete_service(service_id).await {
        Ok(()) => {}
        Err(e) if status_of(&e) == Some(404) => {}
        Err(e) => return Err(api_error(endpoint, "delete_service", e)),
    }
    if let Some(id) = container_id {
        remove_container(docker, endpoint, id).await?;
    }
    if let Some(net) = private_network {
        network::remove_overlay(backend, net).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_names_fit_a_dns_label_and_keep_their_unique_tail() {
        let short = "rb-run-agent-1a2b3c".to_string();
        assert_eq!(service_name(short.clone()), short);
        let long = format!("rb-{}-grader-7d85c1bc31b7deadbeef", "r".repeat(40));
        let cut = service_name(long.clone());
        assert_eq!(cut.len(), MAX_SERVICE_NAME);
        assert!(cut.starts_with("rb-rrr"), "{cut}");
        assert!(cut.ends_with("-grader-7d85c1bc31b7deadbeef"), "{cut}");
    }
}
