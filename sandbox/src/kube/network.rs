//! Trial networks as NetworkPolicies, and the model proxy's address.

use std::net::{IpAddr, SocketAddr};

use ::kube::Api;
use ::kube::api::{DeleteParams, PostParams};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::NetworkPolicy;

use super::{KubeBackend, KubeError, objects};
use crate::docker::object_name;
use crate::{NetworkHandle, Owner, SandboxError};

pub(super) fn policies(backend: &KubeBackend) -> Api<NetworkPolicy> {
    Api::namespaced(backend.client.clone(), &backend.namespace)
}

/// Creates a NetworkPolicy; returns its name.
pub(super) async fn create_policy(
    backend: &KubeBackend,
    policy: &NetworkPolicy,
) -> Result<String, SandboxError> {
    let created = policies(backend)
        .create(&PostParams::default(), policy)
        .await
        .map_err(|e| KubeError::api("create networkpolicy", e))?;
    Ok(created
        .metadata
        .name
        .or_else(|| policy.metadata.name.clone())
        .unwrap_or_default())
}

/// A trial network: its NetworkPolicy, and (with egress to the proxy) the proxy Service's
/// ClusterIP and port as the allowed endpoint.
pub(super) async fn create(
    backend: &KubeBackend,
    owner: &Owner,
    egress_to_proxy: bool,
) -> Result<NetworkHandle, SandboxError> {
    let name = objects::dns_name(&format!("{}-net", object_name(owner)));
    let allowed_endpoint = if egress_to_proxy {
        Some(proxy_endpoint(backend).await?)
    } else {
        None
    };
    let policy = objects::trial_network(&name, owner, &backend.peers(), egress_to_proxy);
    let name = create_policy(backend, &policy).await?;
    tracing::info!(networkpolicy = %name, run = %owner.run_id, "created trial network");
    Ok(NetworkHandle {
        id: name.clone(),
        name,
        allowed_endpoint,
    })
}

/// The model proxy Service's ClusterIP and first port.
async fn proxy_endpoint(backend: &KubeBackend) -> Result<SocketAddr, SandboxError> {
    let services: Api<Service> = Api::namespaced(backend.client.clone(), &backend.namespace);
    let service = &backend.model_proxy.service;
    let svc = services
        .get(service)
        .await
        .map_err(|e| KubeError::api("get model proxy service", e))?;
    let spec = svc.spec.unwrap_or_default();
    let missing = |what: &str| {
        SandboxError::InvalidSpec(format!(
            "the model proxy Service `{service}` in namespace `{}` has no {what}; it must be a ClusterIP Service",
            backend.namespace
        ))
    };
    let ip: IpAddr = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| missing("cluster IP"))?;
    let port = spec
        .ports
        .unwrap_or_default()
        .first()
        .and_then(|p| u16::try_from(p.port).ok())
        .ok_or_else(|| missing("port"))?;
    Ok(SocketAddr::new(ip, port))
}

/// Deletes a NetworkPolicy; one already gone is fine.
pub(super) async fn remove(backend: &KubeBackend, name: &str) -> Result<(), SandboxError> {
    match policies(backend)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if super::error::is_not_found(&e) => Ok(()),
        Err(e) => Err(KubeError::api("delete networkpolicy", e)),
    }
}
