//! The cluster's nodes: what they can hold ([`crate::Capacity`]: resources, reservations of
//! the tasks on them, which take the backend's services), a node's availability (drain,
//! active), and why a service's task left its node.
//!
//! A node takes the backend's services when it is `ready`, `active` and matches every
//! placement constraint of the services (the configured ones, plus `node.id==<this node>`
//! with the `engine` transport: over `http` every such node takes sandboxes). Constraints are evaluated here for `node.id`,
//! `node.hostname`, `node.role`, `node.platform.os`, `node.platform.arch`, `node.labels.*` and
//! `engine.labels.*` with `==` and `!=`; any other expression is assumed to match (Swarm
//! decides; the capacity is then an upper bound).

use std::collections::HashMap;

use bollard::models::{Node, NodeSpecAvailabilityEnum, NodeSpecRoleEnum, NodeState, TaskState};
use bollard::query_parameters::{ListTasksOptions, UpdateNodeOptions};

use super::SwarmBackend;
use crate::docker::{api_error, status_of};
use crate::{Capacity, NodeCapacity, SandboxError, labels};

/// A node's availability for new tasks (`docker node update --availability`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Takes tasks.
    Active,
    /// Keeps its tasks, takes no new ones.
    Pause,
    /// Its tasks are shut down (and rescheduled elsewhere); takes no new ones.
    Drain,
}

impl Availability {
    fn to_api(self) -> NodeSpecAvailabilityEnum {
        match self {
            Availability::Active => NodeSpecAvailabilityEnum::ACTIVE,
            Availability::Pause => NodeSpecAvailabilityEnum::PAUSE,
            Availability::Drain => NodeSpecAvailabilityEnum::DRAIN,
        }
    }

    fn from_api(a: Option<NodeSpecAvailabilityEnum>) -> Self {
        match a {
            Some(NodeSpecAvailabilityEnum::PAUSE) => Availability::Pause,
            Some(NodeSpecAvailabilityEnum::DRAIN) => Availability::Drain,
            _ => Availability::Active,
        }
    }
}

/// A node's hostname (its id when it reports none).
fn hostname(node: &Node) -> String {
    node.description
        .as_ref()
        .and_then(|d| d.hostname.clone())
        .filter(|h| !h.is_empty())
        .or_else(|| node.id.clone())
        .unwrap_or_default()
}

/// Whether `node` matches the placement constraint `expr` (`None`: not evaluated here).
fn constraint_matches(expr: &str, node: &Node) -> Option<bool> {
    let (key, want, equal) = if let Some((k, v)) = expr.split_once("!=") {
        (k, v, false)
    } else if let Some((k, v)) = expr.split_once("==") {
        (k, v, true)
    } else {
        return None;
    };
    let (key, want) = (key.trim(), want.trim());
    let spec = node.spec.clone().unwrap_or_default();
    let description = node.description.clone().unwrap_or_default();
    let platform = description.platform.clone().unwrap_or_default();
    let have: Option<String> = if key == "node.id" {
        node.id.clone()
    } else if key == "node.hostname" {
        description.hostname.clone()
    } else if key == "node.role" {
        spec.role.map(|r| match r {
            NodeSpecRoleEnum::MANAGER => "manager".to_string(),
            NodeSpecRoleEnum::WORKER => "worker".to_string(),
            NodeSpecRoleEnum::EMPTY => String::new(),
        })
    } else if key == "node.platform.os" {
        platform.os.clone()
    } else if key == "node.platform.arch" {
        platform.architecture.clone()
    } else if let Some(label) = key.strip_prefix("node.labels.") {
        spec.labels.unwrap_or_default().get(label).cloned()
    } else if let Some(label) = key.strip_prefix("engine.labels.") {
        description
            .engine
            .and_then(|e| e.labels)
            .unwrap_or_default()
            .get(label)
            .cloned()
    } else {
        return None;
    };
    // Swarm compares case-insensitively; a missing value matches only `!=`.
    let same = have.is_some_and(|h| h.eq_ignore_ascii_case(want));
    Some(same == equal)
}

/// Why `node` takes none of the backend's services (`None`: it does).
fn unusable(node: &Node, constraints: &[String]) -> Option<String> {
    let status = node.status.clone().unwrap_or_default();
    if status.state != Some(NodeState::READY) {
        let state = status.state.map_or("unknown".into(), |s| s.to_string());
        let message = status.message.filter(|m| !m.is_empty());
        return Some(match message {
            Some(m) => format!("state {state} ({m})"),
            None => format!("state {state}"),
        });
    }
    let availability = node.spec.as_ref().and_then(|s| s.availability);
    if Availability::from_api(availability) != Availability::Active {
        let a = availability.map_or(String::new(), |a| a.to_string());
        return Some(format!("availability {a}"));
    }
    constraints
        .iter()
        .find(|c| constraint_matches(c, node) == Some(false))
        .map(|c| format!("placement constraint `{c}` excludes it"))
}

/// [`SandboxError::NodeLost`] when the node `node_id` a service's not yet running task was
/// assigned to is gone or no longer takes tasks (down, drained): Swarm keeps such a task
/// assigned to it, so waiting longer would not run it.
pub(super) async fn assigned_node_lost(
    backend: &SwarmBackend,
    service_name: &str,
    node_id: &str,
) -> Result<Option<SandboxError>, SandboxError> {
    let docker = backend.docker.client();
    let (node, why) = match docker.inspect_node(node_id).await {
        Ok(n) => match unusable(&n, &[]) {
            Some(why) => (hostname(&n), format!("it left the usable nodes: {why}")),
            None => return Ok(None),
        },
        Err(e) if status_of(&e) == Some(404) => (
            node_id.to_string(),
            "it was removed from the cluster".into(),
        ),
        Err(e) => return Err(api_error(&backend.docker.endpoint, "inspect_node", e)),
    };
    Ok(Some(SandboxError::NodeLost {
        service: service_name.to_string(),
        node,
        node_id: node_id.to_string(),
        why,
    }))
}

/// Every placement constraint of the backend's services: the configured ones, and with the
/// `engine` transport the pin to this node.
pub(super) fn constraints(backend: &SwarmBackend) -> Vec<String> {
    let mut all = Vec::new();
    if backend.transport == super::Transport::Engine {
        all.push(format!("node.id=={}", backend.node_id));
    }
    all.extend(backend.constraints.iter().cloned());
    all
}

/// The cluster's capacity for the backend's services: every node with its resources, the
/// memory reserved by the tasks assigned to it (desired state running), by run for the
/// platform's, and why it is unusable if it is.
pub(super) async fn capacity(backend: &SwarmBackend) -> Result<Capacity, SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    let nodes = docker
        .list_nodes(None)
        .await
        .map_err(|e| api_error(endpoint, "list_nodes", e))?;
    let tasks = docker
        .list_tasks(Some(ListTasksOptions {
            filters: Some(HashMap::from([(
                "desired-state".to_string(),
                vec!["running".to_string()],
            )])),
        }))
        .await
        .map_err(|e| api_error(endpoint, "list_tasks", e))?;
    let constraints = constraints(backend);
    let mut out: Vec<NodeCapacity> = nodes
        .iter()
        .map(|n| {
            let resources = n
                .description
                .as_ref()
                .and_then(|d| d.resources.clone())
                .unwrap_or_default();
            let mut node = NodeCapacity::new(
                n.id.clone().unwrap_or_default(),
                hostname(n),
                resources.nano_cpus.unwrap_or(0) as f64 / 1e9,
                u64::try_from(resources.memory_bytes.unwrap_or(0)).unwrap_or(0),
            );
            node.unusable = unusable(n, &constraints);
            node
        })
        .collect();
    for task in tasks {
        let Some(node) = out
            .iter_mut()
            .find(|n| task.node_id.as_deref() == Some(n.id.as_str()))
        else {
            continue; // not assigned yet: it reserves nothing on any node
        };
        let spec = task.spec.unwrap_or_default();
        let reserved = spec
            .resources
            .and_then(|r| r.reservations)
            .and_then(|r| r.memory_bytes)
            .and_then(|b| u64::try_from(b).ok())
            .unwrap_or(0);
        if reserved == 0 {
            continue;
        }
        let task_labels = spec
            .container_spec
            .and_then(|c| c.labels)
            .unwrap_or_default();
        let ours = task_labels.get(labels::MANAGED).map(String::as_str) == Some("true");
        match task_labels.get(labels::RUN) {
            Some(run) if ours => {
                *node.reserved_by_run.entry(run.clone()).or_default() += reserved;
            }
            _ => node.reserved_other += reserved,
        }
    }
    Ok(Capacity {
        nodes: out,
        reserves_memory: true,
    })
}

/// Sets a node's availability; returns what it was.
pub(super) async fn set_availability(
    backend: &SwarmBackend,
    node_id: &str,
    availability: Availability,
) -> Result<Availability, SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    let node = docker
        .inspect_node(node_id)
        .await
        .map_err(|e| api_error(endpoint, "inspect_node", e))?;
    let mut spec = node.spec.unwrap_or_default();
    let before = Availability::from_api(spec.availability);
    spec.availability = Some(availability.to_api());
    let version = node
        .version
        .and_then(|v| v.index)
        .and_then(|i| i64::try_from(i).ok())
        .unwrap_or(0);
    docker
        .update_node(node_id, spec, UpdateNodeOptions { version })
        .await
        .map_err(|e| api_error(endpoint, "update_node", e))?;
    tracing::info!(
        node = node_id,
        ?availability,
        ?before,
        "node availability set"
    );
    Ok(before)
}

/// Why the service's task running `container_id` was taken off its node (`None`: it was
/// not): the orchestrator shut it down while it ran (its node drained, down or gone), or it is
/// orphaned. A task that ended on its own (complete, failed: its container and files are
/// still there) counts only when `failed` (an operation on it failed) and its node is
/// unusable or gone.
pub(super) async fn task_lost(
    backend: &SwarmBackend,
    service_id: &str,
    service_name: &str,
    container_id: &str,
    failed: bool,
) -> Result<Option<SandboxError>, SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    let tasks = docker
        .list_tasks(Some(ListTasksOptions {
            filters: Some(HashMap::from([(
                "service".to_string(),
                vec![service_id.to_string()],
            )])),
        }))
        .await;
    let tasks = match tasks {
        Ok(t) => t,
        // The service is gone (removed by us): nothing was lost.
        Err(e) if status_of(&e) == Some(404) => return Ok(None),
        Err(e) => return Err(api_error(endpoint, "list_tasks", e)),
    };
    let Some(task) = tasks.into_iter().find(|t| {
        t.status
            .as_ref()
            .and_then(|s| s.container_status.as_ref())
            .and_then(|c| c.container_id.as_deref())
            == Some(container_id)
    }) else {
        return Ok(None);
    };
    let state = task.status.as_ref().and_then(|s| s.state);
    let shut_down = matches!(
        task.desired_state,
        Some(TaskState::SHUTDOWN | TaskState::REMOVE)
    );
    // Swarm also wants a task that ended on its own shut down (restart condition none).
    let ended_itself = matches!(
        state,
        Some(TaskState::COMPLETE | TaskState::FAILED | TaskState::REJECTED)
    );
    let taken = (shut_down && !ended_itself) || state == Some(TaskState::ORPHANED);
    if !taken && !failed {
        return Ok(None);
    }
    let node_id = task.node_id.unwrap_or_default();
    let (node, why) = match docker.inspect_node(&node_id).await {
        Ok(n) => {
            let name = hostname(&n);
            let why = match unusable(&n, &[]) {
                Some(why) => format!("it left the usable nodes: {why}"),
                None if !taken => return Ok(None),
                None => {
                    let message = task
                        .status
                        .and_then(|s| s.message)
                        .filter(|m| !m.is_empty())
                        .unwrap_or_else(|| "no reason given".into());
                    format!("the orchestrator shut the task down ({message})")
                }
            };
            (name, why)
        }
        Err(e) if status_of(&e) == Some(404) => {
            (node_id.clone(), "it was removed from the cluster".into())
        }
        Err(e) => return Err(api_error(endpoint, "inspect_node", e)),
    };
    Ok(Some(SandboxError::NodeLost {
        service: service_name.to_string(),
        node,
        node_id,
        why,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{NodeDescription, NodeSpec, NodeStatus, Platform};

    fn node(state: NodeState, availability: NodeSpecAvailabilityEnum) -> Node {
        Node {
            id: Some("n1".into()),
            spec: Some(NodeSpec {
                availability: Some(availability),
                role: Some(NodeSpecRoleEnum::WORKER),
                labels: Some(HashMap::from([("rb".to_string(), "yes".to_string())])),
                ..Default::default()
            }),
            description: Some(NodeDescription {
                hostname: Some("box".into()),
                platform: Some(Platform {
                    architecture: Some("x86_64".into()),
                    os: Some("linux".into()),
                }),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                state: Some(state),
                message: None,
                addr: None,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_node_is_usable_when_ready_active_and_matching_every_constraint() {
        let ready = node(NodeState::READY, NodeSpecAvailabilityEnum::ACTIVE);
        let ok = [
            "node.id==n1",
            "node.hostname==box",
            "node.role==worker",
            "node.role!=manager",
            "node.labels.rb==yes",
            "node.labels.gpu!=yes",
            "node.platform.os==linux",
            "node.platform.arch == x86_64",
        ]
        .map(String::from);
        assert_eq!(unusable(&ready, &ok), None);
        let no = unusable(&ready, &["node.id==other".into()]);
        assert_eq!(
            no.as_deref(),
            Some("placement constraint `node.id==other` excludes it")
        );
        assert!(unusable(&ready, &["node.labels.gpu==yes".into()]).is_some());
        assert_eq!(constraint_matches("node.custom==x", &ready), None);
        assert_eq!(
            unusable(
                &node(NodeState::READY, NodeSpecAvailabilityEnum::DRAIN),
                &ok
            )
            .as_deref(),
            Some("availability drain")
        );
        assert_eq!(
            unusable(
                &node(NodeState::DOWN, NodeSpecAvailabilityEnum::ACTIVE),
                &ok
            )
            .as_deref(),
            Some("state down")
        );
    }
}
