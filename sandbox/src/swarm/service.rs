//! A sandbox as a Swarm service: the spec, waiting for its one task to run (on this node with
//! the `engine` transport), reaching it (adopting the task's container, or its sandbox runner),
//! removal.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::models::{
    EndpointSpec, EndpointSpecModeEnum, Limit, Mount, MountType, NetworkAttachmentConfig,
    ResourceObject, ServiceSpec, ServiceSpecMode, ServiceSpecModeReplicated, TaskSpec,
    TaskSpecContainerSpec, TaskSpecContainerSpecPrivileges, TaskSpecPlacement, TaskSpecResources,
    TaskSpecRestartPolicy, TaskSpecRestartPolicyConditionEnum, TaskState,
};
use bollard::query_parameters::ListTasksOptions;

use super::names::service_name;
use super::runner::{MAX_UPLOAD, RUNNER_PATH, RUNNER_PORT, Runner, TOKEN_FILE};
use super::secrets::RunnerObjects;
use super::{
    Access, PrivateNetwork, SANDBOX_ALIAS, SwarmBackend, SwarmSandbox, Transport, network, secrets,
};
use crate::DEFAULT_USER;
use crate::docker::{DockerSandbox, api_error, remove_container, status_of};
use crate::objects::{object_labels, object_name};
use crate::spec_check::validate_spec;
use crate::{CopyIn, NetworkPolicy, SandboxError, SandboxSpec};

/// What the `http` transport adds to a service: the runner's objects and its one peer.
struct RunnerSetup<'a> {
    objects: &'a RunnerObjects,
    /// The relay's overlay address.
    peer: std::net::Ipv4Addr,
}

/// The service spec of a sandbox.
fn service_spec(
    backend: &SwarmBackend,
    spec: &SandboxSpec,
    name: &str,
    image_id: &str,
    user: &str,
    network: &str,
    runner: Option<&RunnerSetup<'_>>,
) -> Result<ServiceSpec, SandboxError> {
    let labels = object_labels(&spec.owner);
    let main = match &spec.command {
        None => vec!["sleep".to_string(), "infinity".to_string()],
        Some(command) => command.clone(),
    };
    // Over `http`, the runner (root) is the init's child and starts the main command as the
    // sandbox user; `main_exit`, `logs` and `stop` are the main command's.
    let (command, args, container_user) = match runner {
        None => (vec![main[0].clone()], main[1..].to_vec(), user.to_string()),
        Some(setup) => {
            let mut args = vec![
                "-I".to_string(),
                RUNNER_PATH.into(),
                "--port".into(),
                RUNNER_PORT.to_string(),
                "--token-file".into(),
                format!("/run/secrets/{TOKEN_FILE}"),
                "--user".into(),
                user.to_string(),
                "--workdir".into(),
                spec.workdir.clone(),
                "--peer".into(),
                setup.peer.to_string(),
                "--max-upload".into(),
                MAX_UPLOAD.to_string(),
            ];
            if spec.env.contains_key("HOME") {
                args.push("--home-set".into());
            }
            // The main command waits until the sandbox's files (its mounts among them) are in.
            args.push("--hold".into());
            args.push("--".into());
            args.extend(main);
            (vec!["python3".to_string()], args, "0:0".to_string())
        }
    };
    let memory = i64::try_from(spec.limits.memory_bytes)
        .map_err(|_| SandboxError::InvalidLimits("memory_bytes is too large".into()))?;
    let nano_cpus = (spec.limits.cpus * 1e9).round() as i64;
    let constraints = super::nodes::constraints(backend);
    let aliases = match (&spec.network, runner) {
        // (`Loopback` is refused before: it is `None` here.)
        (NetworkPolicy::Internal(_), _)
        | (NetworkPolicy::None | NetworkPolicy::Loopback, Some(_)) => {
            Some(vec![SANDBOX_ALIAS.to_string()])
        }
        (NetworkPolicy::None | NetworkPolicy::Loopback, None) => None,
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
                // Over `http` the runner creates the working directory as the sandbox user
                // (the engine would create it as root, the container's user).
                dir: Some(if runner.is_some() {
                    "/".to_string()
                } else {
                    spec.workdir.clone()
                }),
                user: Some(container_user),
                configs: runner.map(|r| vec![r.objects.config_mount()]),
                secrets: runner.map(|r| vec![r.objects.secret_mount()]),
                init: Some(true),
                privileges: Some(TaskSpecContainerSpecPrivileges {
                    no_new_privileges: Some(true),
                    ..Default::default()
                }),
                // Over `http` a mount travels as a read-only root-owned copy instead: a host
                // path means nothing on another node.
                mounts: Some(
                    spec.mounts
                        .iter()
                        .filter(|_| runner.is_none())
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

/// Creates the service of `spec` holding `files` (and, over `http`, copies of its mounts)
/// before its main command starts.
pub(super) async fn create(
    backend: &SwarmBackend,
    spec: SandboxSpec,
    files: &[CopyIn],
) -> Result<SwarmSandbox, SandboxError> {
    validate_spec(&spec)?;
    if spec.network == NetworkPolicy::Loopback {
        return Err(SandboxError::InvalidSpec(
            "the swarm backend cannot reach a sandbox's loopback (`Backend::reaches_loopback` is false): give it an internal network".into(),
        ));
    }
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
    let http = backend.transport == Transport::Http;
    let mut private_network: Option<PrivateNetwork> = None;
    let mut objects: Option<RunnerObjects> = None;
    let mut service_id = None;
    let made = async {
        let (network_id, relay_address, relay) = match &spec.network {
            NetworkPolicy::Internal(handle) => {
                let relay = network::relay_of(backend, handle)?;
                (handle.id.clone(), Some(relay.host_address), Some(relay))
            }
            NetworkPolicy::None | NetworkPolicy::Loopback if http => {
                let handle = network::create(backend, &spec.owner, None, true).await?;
                let relay = network::relay_of(backend, &handle)?;
                let id = handle.id.clone();
                private_network = Some(PrivateNetwork::Relayed(handle));
                (id, None, Some(relay))
            }
            NetworkPolicy::None | NetworkPolicy::Loopback => {
                let (id, _, _) = network::create_overlay(
                    backend,
                    &spec.owner,
                    service_name(format!("{name}-iso")),
                )
                .await?;
                private_network = Some(PrivateNetwork::Bare(id.clone()));
                (id, None, None)
            }
        };
        let mut token = None;
        if http {
            let t = super::runner::new_token()?;
            objects = Some(secrets::create(backend, &spec.owner, &name, &t).await?);
            token = Some(t);
        }
        let setup = match (&objects, &relay) {
            (Some(objects), Some(relay)) if http => Some(RunnerSetup {
                objects,
                peer: relay.overlay_address,
            }),
            _ => None,
        };
        let body = service_spec(
            backend,
            &spec,
            &name,
            &image_id,
            &user,
            &network_id,
            setup.as_ref(),
        )?;
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
        let (container_id, node_id) = wait_running(backend, &id, &name).await?;
        let access = match (token, relay) {
            (Some(token), Some(relay)) => {
                let address = std::net::SocketAddr::new(relay.host_address, RUNNER_PORT);
                let runner = Runner::new(address, token, name.clone());
                // A node that goes down while its runner starts is named at once, not after
                // the runner's readiness timeout.
                let health = tokio::select! {
                    health = runner.ready() => health.map_err(|e| SandboxError::Scheduling {
                        service: name.clone(),
                        detail: format!("its sandbox runner did not answer: {e}"),
                    })?,
                    lost = node_gone(backend, &name, &node_id) => return Err(lost),
                };
                (
                    Access::Http {
                        runner,
                        user: user.clone(),
                        workdir: spec.workdir.clone(),
                        ids: (health.uid, health.gid),
                    },
                    health.nnp,
                )
            }
            _ => {
                let container = DockerSandbox::adopt(
                    &backend.docker,
                    container_id.clone(),
                    name.clone(),
                    user.clone(),
                    spec.workdir.clone(),
                )
                .await?;
                let nnp = container.has_no_new_privileges().await?;
                (Access::Engine(container), nnp)
            }
        };
        Ok::<_, SandboxError>((id, container_id, access, relay_address))
    }
    .await;
    match made {
        Ok((service_id, container_id, (access, nnp), relay_address)) => {
            let sandbox = SwarmSandbox {
                backend: backend.clone(),
                service_id,
                service_name: name.clone(),
                container_id,
                access,
                relay_address,
                private_network,
                objects,
            };
            let ready = async {
                super::setid::harden(backend, &sandbox, nnp, &image_id, &name).await?;
                place_files(&sandbox, &spec, files).await
            };
            if let Err(e) = ready.await {
                if let Err(cleanup) = crate::Sandbox::remove(&sandbox).await {
                    tracing::warn!(service = %name, error = %cleanup, "removing a half-created service failed");
                }
                return Err(e);
            }
            tracing::info!(
                service = %name,
                image = %spec.image,
                run = %spec.owner.run_id,
                role = %spec.owner.role,
                transport = %backend.transport,
                "created service"
            );
            Ok(sandbox)
        }
        Err(e) => {
            let cleanup = async {
                if let Some(id) = &service_id {
                    remove(backend, id, None, None).await?;
                }
                match &private_network {
                    Some(PrivateNetwork::Bare(net)) => {
                        network::remove_overlay(backend, net).await?
                    }
                    Some(PrivateNetwork::Relayed(handle)) => {
                        network::remove(backend, handle).await?
                    }
                    None => {}
                }
                if let Some(objects) = &objects {
                    secrets::remove(backend, objects).await?;
                }
                Ok::<_, SandboxError>(())
            };
            if let Err(cleanup) = cleanup.await {
                tracing::warn!(service = %name, error = %cleanup, "removing a half-created service failed");
            }
            Err(e)
        }
    }
}

/// Puts `files` into a just-created sandbox and starts its main command: over `http` in one
/// upload with the spec's mounts as read-only root-owned copies, then the held command is
/// started; over `engine` (mounts bound, command running) the files are copied after.
async fn place_files(
    sandbox: &SwarmSandbox,
    spec: &SandboxSpec,
    files: &[CopyIn],
) -> Result<(), SandboxError> {
    match &sandbox.access {
        Access::Http { runner, ids, .. } => {
            let mut all: Vec<CopyIn> = spec
                .mounts
                .iter()
                .map(|m| {
                    CopyIn::new(&m.host_path, m.sandbox_path.clone())
                        .owned_by(0, 0)
                        .read_only()
                })
                .collect();
            all.extend(files.iter().cloned());
            if !all.is_empty() {
                runner.copy_in(all, *ids, None).await?;
            }
            runner.start().await
        }
        Access::Engine(container) => {
            if files.is_empty() {
                Ok(())
            } else {
                crate::Sandbox::copy_in_many(container, files).await
            }
        }
    }
}

/// The exit code of the service's task running `container_id` once it ended (`None`: it did
/// not, or reported none).
pub(super) async fn task_exit(
    backend: &SwarmBackend,
    service_id: &str,
    container_id: &str,
) -> Result<Option<i64>, SandboxError> {
    let tasks = backend
        .docker
        .client()
        .list_tasks(Some(ListTasksOptions {
            filters: Some(HashMap::from([(
                "service".to_string(),
                vec![service_id.to_string()],
            )])),
        }))
        .await
        .map_err(|e| api_error(&backend.docker.endpoint, "list_tasks", e))?;
    for task in tasks {
        let status = task.status.unwrap_or_default();
        let container = status.container_status.unwrap_or_default();
        if container.container_id.as_deref() != Some(container_id) {
            continue;
        }
        if matches!(
            status.state,
            Some(TaskState::COMPLETE | TaskState::FAILED | TaskState::SHUTDOWN)
        ) {
            return Ok(container.exit_code);
        }
    }
    Ok(None)
}

/// Resolves once the node `node_id` leaves the usable nodes (checked every [`NODE_CHECK`]; an
/// engine error is taken as no news).
async fn node_gone(backend: &SwarmBackend, name: &str, node_id: &str) -> SandboxError {
    loop {
        tokio::time::sleep(NODE_CHECK).await;
        if node_id.is_empty() {
            continue;
        }
        match super::nodes::assigned_node_lost(backend, name, node_id).await {
            Ok(Some(lost)) => return lost,
            Ok(None) => {}
            Err(e) => tracing::debug!(service = name, error = %e, "checking a task's node failed"),
        }
    }
}

/// How often a task waiting on its node has that node checked.
const NODE_CHECK: Duration = Duration::from_secs(1);

/// Waits for the service's task to run (on this node with the `engine` transport); returns its
/// container id and its node's id. A task assigned to a node that then leaves is
/// [`SandboxError::NodeLost`] at once.
async fn wait_running(
    backend: &SwarmBackend,
    service_id: &str,
    name: &str,
) -> Result<(String, String), SandboxError> {
    let docker = backend.docker.client();
    let began = Instant::now();
    let mut pause = Duration::from_millis(20);
    let mut node_checked = Instant::now();
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
                    if backend.transport == Transport::Engine
                        && task.node_id.as_deref() != Some(backend.node_id.as_str())
                    {
                        return Err(SandboxError::Scheduling {
                            service: name.to_string(),
                            detail: format!(
                                "its task runs on node {:?}, not on this one ({}); files move through this engine only",
                                task.node_id, backend.node_id
                            ),
                        });
                    }
                    if let Some(id) = status.container_status.and_then(|c| c.container_id) {
                        return Ok((id, task.node_id.unwrap_or_default()));
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
                _ => {
                    // Assigned to a node that then went down: Swarm keeps it there.
                    if let Some(node) = task.node_id.as_deref().filter(|n| !n.is_empty())
                        && node_checked.elapsed() >= NODE_CHECK
                    {
                        node_checked = Instant::now();
                        if let Some(lost) =
                            super::nodes::assigned_node_lost(backend, name, node).await?
                        {
                            return Err(lost);
                        }
                    }
                }
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
