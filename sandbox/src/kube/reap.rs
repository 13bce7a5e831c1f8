//! The kube backend's reaper: Jobs, Pods and NetworkPolicies carrying the platform's labels,
//! deleted when the docker backend's reaper would remove them (`doomed`: owner dead, or all of
//! one run's). An object created on another host is never judged dead here: its pid means
//! nothing on this machine (the design's Lease-based liveness is not built).

use ::kube::api::{DeleteParams, ListParams};
use ::kube::{Api, Resource};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde::de::DeserializeOwned;

use super::{KubeBackend, KubeError, OWNER_HOST, objects};
use crate::docker::reap::{Reap, doomed};
use crate::{SandboxError, labels};

/// The label selector of the platform's objects, of one run when given.
pub(crate) fn selector(run_id: Option<&str>) -> String {
    let mut s = format!("{}=true", labels::MANAGED);
    if let Some(run) = run_id {
        s.push_str(&format!(",{}={}", labels::RUN, objects::label_value(run)));
    }
    s
}

pub(super) async fn reap(
    backend: &KubeBackend,
    run_id: Option<&str>,
    mode: Reap,
) -> Result<usize, SandboxError> {
    let client = &backend.client;
    let ns = &backend.namespace;
    // Jobs first (their pods go with them: background propagation), then pods, then the
    // policies that fenced them.
    let mut removed = reap_kind(
        Api::<Job>::namespaced(client.clone(), ns),
        "job",
        run_id,
        mode,
        DeleteParams::background(),
    )
    .await?;
    removed += reap_kind(
        Api::<Pod>::namespaced(client.clone(), ns),
        "pod",
        run_id,
        mode,
        DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::background()
        },
    )
    .await?;
    removed += reap_kind(
        Api::<NetworkPolicy>::namespaced(client.clone(), ns),
        "networkpolicy",
        run_id,
        mode,
        DeleteParams::default(),
    )
    .await?;
    Ok(removed)
}

async fn reap_kind<K>(
    api: Api<K>,
    kind: &'static str,
    run_id: Option<&str>,
    mode: Reap,
    params: DeleteParams,
) -> Result<usize, SandboxError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let listed = api
        .list(&ListParams::default().labels(&selector(run_id)))
        .await
        .map_err(|e| KubeError::api("list for reaping", e))?;
    let here = super::host_name();
    let mut removed = 0;
    for object in listed.items {
        let meta = object.meta();
        let Some(name) = meta.name.as_deref() else {
            continue;
        };
        let view = objects::owner_view(meta);
        let elsewhere = view.get(OWNER_HOST).is_some_and(|h| *h != here);
        if (mode != Reap::All && elsewhere) || !doomed(&view, run_id, mode) {
            continue;
        }
        match api.delete(name, &params).await {
            Ok(_) => {}
            Err(e) if super::error::is_not_found(&e) => continue,
            Err(e) => return Err(KubeError::api("delete while reaping", e)),
        }
        tracing::info!(kind, name, run = ?view.get(labels::RUN), "reaped");
        removed += 1;
    }
    Ok(removed)
}
