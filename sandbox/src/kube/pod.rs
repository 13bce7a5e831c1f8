//! A sandbox as a Pod: create, poll until it runs (or say clearly why it cannot), read its
//! status, logs and address, delete.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use ::kube::Api;
use ::kube::api::{DeleteParams, LogParams, PostParams};
use k8s_openapi::api::core::v1::{Pod, PodStatus};

use super::{KubeBackend, KubeError, KubeSandbox, MAIN_CONTAINER, network, objects};
use crate::docker::{object_name, validate_spec};
use crate::{NetworkPolicy, SandboxError, SandboxSpec};

/// Waiting reasons of a container whose image will not come: the wait ends at once.
const IMAGE_PULL_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
];

/// Waiting reasons of a container that cannot be created as specified.
const CONFIG_REASONS: &[&str] = &[
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
];

pub(super) fn pods(backend: &KubeBackend) -> Api<Pod> {
    Api::namespaced(backend.client.clone(), &backend.namespace)
}

/// Creates the pod (and, without a network, its deny-all policy first, so the pod never runs
/// unfenced), then polls it until it runs. On any failure what was created is deleted.
pub(super) async fn create(
    backend: &KubeBackend,
    spec: SandboxSpec,
) -> Result<KubeSandbox, SandboxError> {
    validate_spec(&spec)?;
    let name = objects::dns_name(&object_name(&spec.owner));
    let (network_name, networked) = match &spec.network {
        NetworkPolicy::Internal(handle) => (handle.name.clone(), true),
        NetworkPolicy::None => (name.clone(), false),
    };
    let body = objects::pod(&spec, &name, &network_name, &backend.pod_settings())?;
    let isolation_policy = if networked {
        None
    } else {
        let policy = objects::isolation(&format!("{name}-isolated"), &name, &spec.owner);
        Some(network::create_policy(backend, &policy).await?)
    };
    let made = async {
        pods(backend)
            .create(&PostParams::default(), &body)
            .await
            .map_err(|e| KubeError::api("create pod", e))?;
        wait_started(backend, &name, &spec.image).await
    }
    .await;
    match made {
        Ok(phase) => {
            tracing::info!(
                pod = %name,
                image = %spec.image,
                run = %spec.owner.run_id,
                role = %spec.owner.role,
                phase,
                "created pod"
            );
            Ok(KubeSandbox {
                backend: backend.clone(),
                name,
                networked,
                isolation_policy,
            })
        }
        Err(e) => {
            let mut cleanup = delete(backend, &name, Some(Duration::ZERO)).await;
            if let Some(policy) = &isolation_policy {
                cleanup = cleanup.and(network::remove(backend, policy).await);
            }
            if let Err(cleanup) = cleanup {
                tracing::warn!(pod = %name, error = %cleanup, "removing a half-created pod failed");
            }
            Err(e)
        }
    }
}

/// What one look at a starting pod says.
#[derive(Debug, PartialEq, Eq)]
enum Started {
    /// Running, Succeeded or Failed after its container ran: the phase.
    Yes(String),
    /// Still pending; why, as far as the API says, and whether the scheduler refused it.
    Pending { last: String, unschedulable: bool },
}

/// Reads a pod's status: started, pending, or a typed error for what will not resolve.
fn judge(name: &str, image: &str, status: &PodStatus) -> Result<Started, SandboxError> {
    let phase = status
        .phase
        .clone()
        .unwrap_or_else(|| "Pending".to_string());
    let main = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == MAIN_CONTAINER);
    let state = main.and_then(|c| c.state.as_ref());
    if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
        let reason = waiting.reason.clone().unwrap_or_default();
        let message = waiting.message.clone().unwrap_or_default();
        if IMAGE_PULL_REASONS.contains(&reason.as_str()) {
            return Err(KubeError::ImagePull {
                pod: name.to_string(),
                image: image.to_string(),
                reason,
                message,
            }
            .into());
        }
        if CONFIG_REASONS.contains(&reason.as_str()) {
            return Err(KubeError::StartFailed {
                pod: name.to_string(),
                detail: format!("{reason}: {message}"),
            }
            .into());
        }
    }
    let ran = state.is_some_and(|s| s.running.is_some() || s.terminated.is_some());
    match phase.as_str() {
        "Running" | "Succeeded" => return Ok(Started::Yes(phase)),
        "Failed" if ran => return Ok(Started::Yes(phase)),
        "Failed" => {
            return Err(KubeError::StartFailed {
                pod: name.to_string(),
                detail: format!(
                    "phase Failed before its container ran ({}: {})",
                    status.reason.as_deref().unwrap_or("no reason"),
                    status.message.as_deref().unwrap_or("no message")
                ),
            }
            .into());
        }
        _ => {}
    }
    let scheduled = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled");
    let unschedulable = scheduled
        .is_some_and(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    let last = match (scheduled, state.and_then(|s| s.waiting.as_ref())) {
        (Some(c), _) if c.status == "False" => format!(
            "{}: {}",
            c.reason.as_deref().unwrap_or("not scheduled"),
            c.message.as_deref().unwrap_or("")
        ),
        (_, Some(w)) => format!(
            "container waiting: {} {}",
            w.reason.as_deref().unwrap_or(""),
            w.message.as_deref().unwrap_or("")
        )
        .trim_end()
        .to_string(),
        _ => phase,
    };
    Ok(Started::Pending {
        last,
        unschedulable,
    })
}

/// Polls the pod (GET, 50 ms doubling up to the backend's cap) until it has started, or the
/// schedule timeout passes.
async fn wait_started(
    backend: &KubeBackend,
    name: &str,
    image: &str,
) -> Result<String, SandboxError> {
    let api = pods(backend);
    let began = Instant::now();
    let mut pause = Duration::from_millis(50).min(backend.poll_cap);
    loop {
        let pod = api
            .get(name)
            .await
            .map_err(|e| KubeError::api("get pod", e))?;
        let status = pod.status.unwrap_or_default();
        let (last, unschedulable) = match judge(name, image, &status)? {
            Started::Yes(phase) => return Ok(phase),
            Started::Pending {
                last,
                unschedulable,
            } => (last, unschedulable),
        };
        if began.elapsed() >= backend.schedule_timeout {
            let pod = name.to_string();
            let waited_secs = began.elapsed().as_secs();
            return Err(if unschedulable {
                KubeError::Unschedulable {
                    pod,
                    waited_secs,
                    message: last,
                }
            } else {
                KubeError::StartTimeout {
                    pod,
                    waited_secs,
                    last,
                }
            }
            .into());
        }
        tracing::debug!(pod = %name, %last, "waiting for pod");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(backend.poll_cap);
    }
}

/// Deletes a pod (`grace` as its grace period); a pod already gone is fine.
pub(super) async fn delete(
    backend: &KubeBackend,
    name: &str,
    grace: Option<Duration>,
) -> Result<(), SandboxError> {
    let params = DeleteParams {
        grace_period_seconds: grace.map(|g| u32::try_from(g.as_secs()).unwrap_or(u32::MAX)),
        ..DeleteParams::background()
    };
    match pods(backend).delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if super::error::is_not_found(&e) => Ok(()),
        Err(e) => Err(KubeError::api("delete pod", e)),
    }
}

/// The main container's exit code once it has ended.
pub(super) async fn main_exit(
    backend: &KubeBackend,
    name: &str,
) -> Result<Option<i64>, SandboxError> {
    let pod = pods(backend)
        .get_status(name)
        .await
        .map_err(|e| KubeError::api("get pod status", e))?;
    Ok(pod
        .status
        .and_then(|s| s.container_statuses)
        .into_iter()
        .flatten()
        .find(|c| c.name == MAIN_CONTAINER)
        .and_then(|c| c.state)
        .and_then(|s| s.terminated)
        .map(|t| i64::from(t.exit_code)))
}

/// The pod's IP.
pub(super) async fn address(backend: &KubeBackend, name: &str) -> Result<IpAddr, SandboxError> {
    let pod = pods(backend)
        .get_status(name)
        .await
        .map_err(|e| KubeError::api("get pod status", e))?;
    let ip = pod
        .status
        .and_then(|s| s.pod_ip)
        .ok_or_else(|| KubeError::StartFailed {
            pod: name.to_string(),
            detail: "it has no pod IP".to_string(),
        })?;
    ip.parse().map_err(|_| {
        KubeError::StartFailed {
            pod: name.to_string(),
            detail: format!("its pod IP `{ip}` is not an address"),
        }
        .into()
    })
}

/// The main container's output, at most `max_bytes` (the API server cuts it: `limitBytes`).
pub(super) async fn logs(
    backend: &KubeBackend,
    name: &str,
    max_bytes: usize,
) -> Result<String, SandboxError> {
    let params = LogParams {
        container: Some(MAIN_CONTAINER.to_string()),
        limit_bytes: Some(i64::try_from(max_bytes).unwrap_or(i64::MAX)),
        ..Default::default()
    };
    pods(backend)
        .logs(name, &params)
        .await
        .map_err(|e| KubeError::api("read pod logs", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(v: serde_json::Value) -> PodStatus {
        serde_json::from_value(v).expect("a pod status")
    }

    #[test]
    fn a_pod_that_ran_and_failed_counts_as_started() {
        let s = status(serde_json::json!({
            "phase": "Failed",
            "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false,
              "restartCount": 0, "state": {"terminated": {"exitCode": 3}}}]
        }));
        assert_eq!(
            judge("p", "i", &s).expect("started"),
            Started::Yes("Failed".into())
        );
        let evicted = status(serde_json::json!({"phase": "Failed", "reason": "Evicted"}));
        let e = judge("p", "i", &evicted).expect_err("never ran");
        assert!(e.to_string().contains("Evicted"), "{e}");
    }

    #[test]
    fn a_bad_container_config_fails_at_once() {
        let s = status(serde_json::json!({
            "phase": "Pending",
            "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false,
              "restartCount": 0, "state": {"waiting": {"reason": "CreateContainerConfigError",
              "message": "container has runAsNonRoot and image will run as root"}}}]
        }));
        let e = judge("p", "i", &s).expect_err("config error");
        assert!(e.to_string().contains("runAsNonRoot"), "{e}");
    }
}
