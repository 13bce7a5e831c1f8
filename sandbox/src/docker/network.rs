//! Internal networks: a Docker bridge with `internal: true` (no route out), plus host firewall
//! rules on its bridge interface so containers reach exactly one host port and nothing else on
//! the host.
//!
//! `internal: true` only fences forwarded traffic; packets from a container to the bridge's own
//! gateway address are *input* to the host and would reach every host service. So each network
//! gets an iptables chain `RB-<id12>` jumped to from `INPUT -i br-<id12>`: accept replies to
//! connections the host opened, accept TCP to the allowed port on the gateway address, reject
//! the rest.
//!
//! Each network gets an explicit small subnet from the backend's [`super::SubnetPool`] (default
//! `10.213.0.0/16` in `/28`s), never one of the engine's default address pools (which hold ~31
//! networks): see `subnets`. A full pool or an engine refusal is a typed error carrying the cause
//! ([`SandboxError::NetworkPoolExhausted`], [`SandboxError::NetworkCreate`] with Docker's message).

use std::net::{IpAddr, SocketAddr};

use bollard::errors::Error as BollardError;
use bollard::models::{Ipam, IpamConfig, NetworkCreateRequest};
use bollard::query_parameters::ListNetworksOptions;

use super::subnets::SubnetAllocator;
use super::{DockerBackend, api_error, status_of};
use crate::objects::{object_labels, object_name};
use crate::{NetworkHandle, Owner, SandboxError};

const IPTABLES: &str = "iptables";

pub(super) async fn create(
    backend: &DockerBackend,
    owner: &Owner,
    allowed_host_port: Option<u16>,
) -> Result<NetworkHandle, SandboxError> {
    create_fenced(backend, owner, allowed_host_port)
        .await
        .map(|(handle, _)| handle)
}

/// [`create`], also returning the network's gateway (the host's address on it).
pub(crate) async fn create_fenced(
    backend: &DockerBackend,
    owner: &Owner,
    allowed_host_port: Option<u16>,
) -> Result<(NetworkHandle, IpAddr), SandboxError> {
    let name = format!("{}-net", object_name(owner));
    let (id, subnet, gateway) =
        create_in_pool(backend, &backend.subnets, owner, &name, Driver::Bridge).await?;
    let result = async {
        install_rules(&id, gateway, allowed_host_port).await?;
        Ok::<_, SandboxError>(gateway)
    }
    .await;
    let gateway = match result {
        Ok(gateway) => gateway,
        Err(e) => {
            if let Err(cleanup) = remove(backend, &id).await {
                tracing::warn!(network = %name, error = %cleanup, "removing a half-created network failed");
            }
            return Err(e);
        }
    };
    tracing::info!(network = %name, %subnet, %gateway, ?allowed_host_port, "created internal network");
    let handle = NetworkHandle {
        id,
        name,
        allowed_endpoint: allowed_host_port.map(|port| SocketAddr::new(gateway, port)),
    };
    Ok((handle, gateway))
}

/// The kind of internal network [`create_in_pool`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Driver {
    /// A local bridge (not attachable by Swarm services).
    Bridge,
    /// A Swarm-scoped overlay, attachable by plain containers too (the swarm backend's relay).
    Overlay,
}

/// Docker's message in an API error (the reply body's `message`, else the error's text).
pub(crate) fn docker_message(e: &BollardError) -> String {
    match e {
        BollardError::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Whether the engine refused a subnet because another network holds (part of) it.
fn is_overlap(e: &BollardError) -> bool {
    let m = docker_message(e).to_ascii_lowercase();
    m.contains("overlap") || m.contains("already in use") || m.contains("conflicts with")
}

/// The engine's networks and their IPv4 subnets, to learn what the pool must skip.
pub(crate) async fn list_subnets(
    backend: &DockerBackend,
) -> Result<Vec<(String, Vec<String>)>, SandboxError> {
    let networks = backend
        .docker
        .list_networks(None::<ListNetworksOptions>)
        .await
        .map_err(|e| api_error(&backend.endpoint, "list_networks", e))?;
    Ok(networks
        .into_iter()
        .map(|n| {
            let subnets = n
                .ipam
                .and_then(|i| i.config)
                .into_iter()
                .flatten()
                .filter_map(|c| c.subnet)
                .collect();
            (n.id.unwrap_or_default(), subnets)
        })
        .collect())
}

/// Creates the network on a free subnet of the backend's pool, moving on past subnets the
/// engine reports as overlapping (another process's networks). Returns `(id, subnet,
/// gateway)`.
pub(crate) async fn create_in_pool(
    backend: &DockerBackend,
    pool: &SubnetAllocator,
    owner: &Owner,
    name: &str,
    driver: Driver,
) -> Result<(String, String, IpAddr), SandboxError> {
    if pool.needs_listing() {
        pool.learn(&list_subnets(backend).await?);
    }
    let mut relisted = false;
    loop {
        let Some(index) = pool.reserve() else {
            if !relisted {
                // Networks may have gone since the last look: learn again, then retry once.
                relisted = true;
                pool.learn(&list_subnets(backend).await?);
                continue;
            }
            let used = pool.usage();
            return Err(SandboxError::NetworkPoolExhausted {
                pool: pool.pool().to_string(),
                size: pool.pool().len(),
                ours: used.ours,
                foreign: used.foreign,
            });
        };
        let subnet = pool.pool().cidr(index);
        let gateway = pool.pool().subnet(index).1;
        let request = NetworkCreateRequest {
            name: name.to_string(),
            driver: Some(
                match driver {
                    Driver::Bridge => "bridge",
                    Driver::Overlay => "overlay",
                }
                .to_string(),
            ),
            internal: Some(true),
            attachable: Some(driver == Driver::Overlay),
            labels: Some(object_labels(owner)),
            ipam: Some(Ipam {
                driver: Some("default".to_string()),
                config: Some(vec![IpamConfig {
                    subnet: Some(subnet.clone()),
                    gateway: Some(gateway.to_string()),
                    ..Default::default()
                }]),
                options: None,
            }),
            ..Default::default()
        };
        match backend.docker.create_network(request).await {
            Ok(created) => {
                pool.bind(index, &created.id);
                return Ok((created.id, subnet, IpAddr::V4(gateway)));
            }
            Err(e) if is_overlap(&e) => {
                tracing::debug!(%subnet, message = %docker_message(&e), "subnet taken elsewhere; trying the next");
                pool.taken_elsewhere(index);
            }
            Err(e) => {
                pool.cancel(index);
                return Err(match e {
                    BollardError::DockerResponseServerError { .. } => SandboxError::NetworkCreate {
                        name: name.to_string(),
                        subnet,
                        docker: docker_message(&e),
                    },
                    e => api_error(&backend.endpoint, "create_network", e),
                });
            }
        }
    }
}

/// The bridge interface Docker creates for a user-defined network.
pub(crate) fn bridge_name(network_id: &str) -> String {
    format!("br-{}", &network_id[..network_id.len().min(12)])
}

/// The firewall chain for a network.
pub(crate) fn chain_name(network_id: &str) -> String {
    format!("RB-{}", &network_id[..network_id.len().min(12)])
}

async fn iptables(args: &[&str]) -> Result<(), String> {
    let output = tokio::process::Command::new(IPTABLES)
        .arg("-w")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("could not run {IPTABLES}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{IPTABLES} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

async fn install_rules(
    network_id: &str,
    gateway: IpAddr,
    allowed_port: Option<u16>,
) -> Result<(), SandboxError> {
    let chain = chain_name(network_id);
    let bridge = bridge_name(network_id);
    let fail = |detail: String| {
        SandboxError::Firewall(format!(
            "cannot fence network {network_id} with iptables (needs root and iptables): {detail}"
        ))
    };
    iptables(&["-N", &chain]).await.map_err(fail)?;
    iptables(&[
        "-A",
        &chain,
        "-m",
        "conntrack",
        "--ctstate",
        "ESTABLISHED,RELATED",
        "-j",
        "ACCEPT",
    ])
    .await
    .map_err(fail)?;
    if let Some(port) = allowed_port {
        let port = port.to_string();
        let gateway = format!("{gateway}/32");
        iptables(&[
            "-A", &chain, "-d", &gateway, "-p", "tcp", "--dport", &port, "-j", "ACCEPT",
        ])
        .await
        .map_err(fail)?;
    }
    // Reject (not drop): a forbidden connection fails at once instead of hanging an agent.
    iptables(&["-A", &chain, "-j", "REJECT"])
        .await
        .map_err(fail)?;
    iptables(&["-I", "INPUT", "1", "-i", &bridge, "-j", &chain])
        .await
        .map_err(fail)?;
    Ok(())
}

/// Removes a network's firewall rules (if any); never fails.
pub(crate) async fn remove_rules(network_id: &str) {
    let chain = chain_name(network_id);
    let bridge = bridge_name(network_id);
    // The jump may have been inserted more than once by a retry: delete until gone.
    for _ in 0..8 {
        if iptables(&["-D", "INPUT", "-i", &bridge, "-j", &chain])
            .await
            .is_err()
        {
            break;
        }
    }
    let _ = iptables(&["-F", &chain]).await;
    let _ = iptables(&["-X", &chain]).await;
}

/// Removes the network (idempotent) and its firewall rules.
pub(crate) async fn remove(backend: &DockerBackend, id: &str) -> Result<(), SandboxError> {
    let full_id = match backend.docker.inspect_network(id, None).await {
        Ok(info) => info.id.unwrap_or_else(|| id.to_string()),
        Err(e) if status_of(&e) == Some(404) => {
            remove_rules(id).await;
            return Ok(());
        }
        Err(e) => return Err(api_error(&backend.endpoint, "inspect_network", e)),
    };
    match backend.docker.remove_network(&full_id).await {
        Ok(()) => {}
        Err(e) if status_of(&e) == Some(404) => {}
        Err(e) => return Err(api_error(&backend.endpoint, "remove_network", e)),
    }
    backend.subnets.release(&full_id);
    remove_rules(&full_id).await;
    Ok(())
}

/// The network-id prefixes of every `RB-*` chain in the filter table.
pub(super) async fn chains() -> Vec<String> {
    let Ok(output) = tokio::process::Command::new(IPTABLES)
        .args(["-w", "-S"])
        .output()
        .await
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("-N RB-"))
        .map(|prefix| prefix.trim().to_string())
        .collect()
}
