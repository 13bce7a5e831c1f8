//! A trial's networks on Swarm: an internal attachable overlay (subnet from the backend's
//! pool) where the service runs, and a relay container joining it and a fenced bridge of the
//! docker backend, through which the sandbox reaches the allowed host port and the host
//! reaches the sandbox.
//!
//! Names: the overlay `<object name>-ovl`, its relay `<overlay>-relay`. The relay takes the
//! bridge's second address (the gateway, the host, is the first) and the overlay's last one.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use bollard::models::{
    ContainerCreateBody, EndpointIpamConfig, EndpointSettings, HostConfig, NetworkConnectRequest,
    NetworkingConfig,
};
use bollard::query_parameters::{CreateContainerOptions, LogsOptions};
use futures::StreamExt;

use super::SwarmBackend;
use crate::docker::network::{Driver, create_fenced, create_in_pool, docker_message};
use crate::docker::{api_error, remove_container, status_of};
use crate::objects::{object_labels, object_name};
use crate::{Backend, NetworkHandle, Owner, SandboxError};

/// The embedded relay program (`python3 -I -c`).
const RELAY_PY: &str = include_str!("relay.py");

/// How long the relay may take to bind its listeners.
const RELAY_READY: Duration = Duration::from_secs(20);

/// How long an overlay's removal is retried while Swarm releases its tasks' endpoints.
const OVERLAY_RELEASE: Duration = Duration::from_secs(20);

/// One overlay's relay, as this process created it.
#[derive(Debug, Clone)]
pub(super) struct Relay {
    /// The fenced bridge the relay shares with the host.
    pub(super) link: NetworkHandle,
    /// The relay's address on that bridge (what the host connects to).
    pub(super) host_address: IpAddr,
    /// The relay's address on the overlay (the one peer the sandbox runner accepts).
    pub(super) overlay_address: Ipv4Addr,
    /// The relay container's id.
    pub(super) container: String,
}

/// The last usable host address of `cidr` (`a.b.c.d/n`).
fn last_host(cidr: &str) -> Option<Ipv4Addr> {
    let (addr, prefix) = cidr.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 30)?;
    let size = 1u32 << (32 - prefix);
    Some(Ipv4Addr::from(u32::from(addr) + size - 2))
}

/// The address after `ip` (the relay's on the bridge whose gateway is `ip`).
fn next_address(ip: IpAddr) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(v4) => u32::from(v4)
            .checked_add(1)
            .map(|n| Ipv4Addr::from(n).into()),
        IpAddr::V6(_) => None,
    }
}

/// Creates an internal attachable overlay on a free subnet of the backend's pool. Returns
/// `(id, name, subnet)`.
pub(super) async fn create_overlay(
    backend: &SwarmBackend,
    owner: &Owner,
    name: String,
) -> Result<(String, String, String), SandboxError> {
    let (id, subnet, _) = create_in_pool(
        &backend.docker,
        &backend.overlays,
        owner,
        &name,
        Driver::Overlay,
    )
    .await?;
    tracing::info!(network = %name, %subnet, "created internal overlay");
    Ok((id, name, subnet))
}

/// Removes an overlay, retrying while Swarm still holds endpoints on it; a missing one is fine.
pub(super) async fn remove_overlay(backend: &SwarmBackend, id: &str) -> Result<(), SandboxError> {
    let docker = backend.docker.client();
    let began = Instant::now();
    loop {
        match docker.remove_network(id).await {
            Ok(()) => break,
            // A removed overlay: 404, or 500 "not found" from the Swarm manager.
            Err(e)
                if status_of(&e) == Some(404)
                    || docker_message(&e)
                        .to_ascii_lowercase()
                        .contains("not found") =>
            {
                break;
            }
            // 403 "has active endpoints": the tasks' attachments are still being released.
            Err(e) if began.elapsed() < OVERLAY_RELEASE && status_of(&e) != Some(500) => {
                tracing::debug!(network = %id, error = %e, "overlay still in use; retrying");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => return Err(api_error(&backend.docker.endpoint, "remove_network", e)),
        }
    }
    backend.overlays.release(id);
    Ok(())
}

/// Creates a trial's network: overlay, fenced bridge, relay. `private`: the network of one
/// sandbox without a network of its own (`http` transport), whose relay forwards the host to
/// the sandbox runner only.
pub(super) async fn create(
    backend: &SwarmBackend,
    owner: &Owner,
    allowed_host_port: Option<u16>,
    private: bool,
) -> Result<NetworkHandle, SandboxError> {
    let name = if private {
        super::names::service_name(format!("{}-iso", object_name(owner)))
    } else {
        super::names::service_name(format!("{}-ovl", object_name(owner)))
    };
    let (overlay_id, overlay_name, subnet) = create_overlay(backend, owner, name).await?;
    let built = async {
        let relay_overlay = last_host(&subnet).ok_or_else(|| {
            SandboxError::InvalidSpec(format!("overlay subnet {subnet} is too small for a relay"))
        })?;
        let (link, gateway) = create_fenced(&backend.docker, owner, allowed_host_port).await?;
        let relay = start_relay(
            backend,
            owner,
            &overlay_name,
            link.clone(),
            gateway,
            relay_overlay,
            Forwards {
                to_sandbox: sandbox_ports(backend, private),
                allowed_host_port,
            },
        )
        .await;
        match relay {
            Ok(relay) => Ok((relay, relay_overlay)),
            Err(e) => {
                if let Err(cleanup) = backend.docker.remove_network(&link).await {
                    tracing::warn!(network = %link.name, error = %cleanup, "removing a half-created bridge failed");
                }
                Err(e)
            }
        }
    }
    .await;
    let (relay, relay_overlay) = match built {
        Ok(built) => built,
        Err(e) => {
            if let Err(cleanup) = remove_overlay(backend, &overlay_id).await {
                tracing::warn!(network = %overlay_name, error = %cleanup, "removing a half-created overlay failed");
            }
            return Err(e);
        }
    };
    tracing::info!(network = %overlay_name, relay = %relay.host_address, ?allowed_host_port, "relay up");
    backend
        .relays
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(overlay_id.clone(), relay);
    Ok(NetworkHandle {
        id: overlay_id,
        name: overlay_name,
        allowed_endpoint: allowed_host_port
            .map(|port| SocketAddr::new(IpAddr::V4(relay_overlay), port)),
    })
}

/// What a relay forwards.
struct Forwards {
    /// Ports of the sandbox the host reaches at the relay's bridge address.
    to_sandbox: Vec<u16>,
    /// The host port the sandbox reaches at the relay's overlay address.
    allowed_host_port: Option<u16>,
}

/// Host → sandbox: its forwarded ports (not for a private network) and, over `http`, the
/// sandbox runner's. Nothing new is reachable from the sandbox.
fn sandbox_ports(backend: &SwarmBackend, private: bool) -> Vec<u16> {
    let mut ports: Vec<u16> = if private {
        Vec::new()
    } else {
        backend.forwarded_ports.clone()
    };
    if backend.transport == super::Transport::Http {
        ports.push(super::runner::RUNNER_PORT);
    }
    ports
}

/// Starts the relay on `link` (at the address after `gateway`) and the overlay (at
/// `relay_overlay`), and waits until it listens.
async fn start_relay(
    backend: &SwarmBackend,
    owner: &Owner,
    overlay_name: &str,
    link: NetworkHandle,
    gateway: IpAddr,
    relay_overlay: Ipv4Addr,
    forwards: Forwards,
) -> Result<Relay, SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    let host_address = next_address(gateway).ok_or_else(|| {
        SandboxError::InvalidSpec(format!("bridge gateway {gateway} leaves no relay address"))
    })?;
    let allowed_host_port = forwards.allowed_host_port;
    let mut forwards: Vec<String> = forwards
        .to_sandbox
        .iter()
        .map(|p| format!("{host_address}:{p}={}:{p}", super::SANDBOX_ALIAS))
        .collect();
    if let Some(port) = allowed_host_port {
        forwards.push(format!("{relay_overlay}:{port}={gateway}:{port}"));
    }
    let mut cmd = vec![
        "python3".to_string(),
        "-I".into(),
        "-c".into(),
        RELAY_PY.into(),
    ];
    cmd.extend(forwards);
    let name = format!("{overlay_name}-relay");
    let body = ContainerCreateBody {
        image: Some(backend.relay_image.clone()),
        user: Some("0:0".into()),
        entrypoint: Some(cmd),
        cmd: Some(Vec::new()),
        labels: Some(object_labels(owner)),
        host_config: Some(HostConfig {
            network_mode: Some(link.name.clone()),
            nano_cpus: Some(250_000_000),
            memory: Some(128 * 1024 * 1024),
            memory_swap: Some(128 * 1024 * 1024),
            pids_limit: Some(64),
            init: Some(true),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            cap_add: Some(vec!["NET_BIND_SERVICE".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            sysctls: Some(HashMap::from([(
                "net.ipv4.ip_forward".to_string(),
                "0".to_string(),
            )])),
            ..Default::default()
        }),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(
                link.name.clone(),
                EndpointSettings {
                    ipam_config: Some(EndpointIpamConfig {
                        ipv4_address: Some(host_address.to_string()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
            )])),
        }),
        ..Default::default()
    };
    let created = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name.clone()),
                ..Default::default()
            }),
            body,
        )
        .await
        .map_err(|e| match status_of(&e) {
            Some(404) => SandboxError::ImageMissing(backend.relay_image.clone()),
            _ => api_error(endpoint, "create_container (relay)", e),
        })?;
    let relay = Relay {
        link,
        host_address,
        overlay_address: relay_overlay,
        container: created.id.clone(),
    };
    let started = async {
        docker
            .connect_network(
                overlay_name,
                NetworkConnectRequest {
                    container: created.id.clone(),
                    endpoint_config: Some(EndpointSettings {
                        ipam_config: Some(EndpointIpamConfig {
                            ipv4_address: Some(relay_overlay.to_string()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                },
            )
            .await
            .map_err(|e| api_error(endpoint, "connect_network (relay)", e))?;
        docker
            .start_container(&created.id, None)
            .await
            .map_err(|e| api_error(endpoint, "start_container (relay)", e))?;
        wait_ready(backend, &created.id, &name).await
    }
    .await;
    if let Err(e) = started {
        if let Err(cleanup) = remove_container(docker, endpoint, &created.id).await {
            tracing::warn!(container = %name, error = %cleanup, "removing a half-started relay failed");
        }
        return Err(e);
    }
    Ok(relay)
}

/// Waits for the relay's `ready` line; fails with its output if it exits first.
async fn wait_ready(backend: &SwarmBackend, id: &str, name: &str) -> Result<(), SandboxError> {
    let docker = backend.docker.client();
    let began = Instant::now();
    loop {
        let mut stream = docker.logs(
            id,
            Some(LogsOptions {
                stdout: true,
                stderr: true,
                tail: "50".into(),
                ..Default::default()
            }),
        );
        let mut text = String::new();
        while let Some(Ok(chunk)) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(chunk.as_ref()));
        }
        if text.lines().any(|l| l.trim() == "ready") {
            return Ok(());
        }
        let running = docker
            .inspect_container(id, None)
            .await
            .ok()
            .and_then(|i| i.state)
            .and_then(|s| s.running)
            .unwrap_or(false);
        if !running || began.elapsed() > RELAY_READY {
            return Err(SandboxError::Firewall(format!(
                "the relay {name} did not start listening within {} s: {}",
                RELAY_READY.as_secs(),
                text.trim()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The relay of a network this backend created.
pub(super) fn relay_of(
    backend: &SwarmBackend,
    network: &NetworkHandle,
) -> Result<Relay, SandboxError> {
    if let Some(relay) = backend
        .relays
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&network.id)
    {
        return Ok(relay.clone());
    }
    Err(SandboxError::InvalidSpec(format!(
        "network {} was not created by this swarm backend (no relay recorded for it)",
        network.name
    )))
}

/// Removes the relay, the overlay and the bridge of a network (idempotent).
pub(super) async fn remove(
    backend: &SwarmBackend,
    network: &NetworkHandle,
) -> Result<(), SandboxError> {
    let relay = backend
        .relays
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&network.id);
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    match &relay {
        Some(relay) => remove_container(docker, endpoint, &relay.container).await?,
        None => remove_container(docker, endpoint, &format!("{}-relay", network.name)).await?,
    }
    remove_overlay(backend, &network.id).await?;
    if let Some(relay) = relay {
        backend.docker.remove_network(&relay.link).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relay_takes_the_last_host_of_the_overlay() {
        assert_eq!(
            last_host("10.214.0.64/26"),
            Some(Ipv4Addr::new(10, 214, 0, 126))
        );
        assert_eq!(
            last_host("10.214.0.0/28"),
            Some(Ipv4Addr::new(10, 214, 0, 14))
        );
        assert_eq!(last_host("10.214.0.0/31"), None);
        assert_eq!(last_host("nonsense"), None);
        assert_eq!(
            next_address(IpAddr::V4(Ipv4Addr::new(10, 213, 0, 17))),
            Some(IpAddr::V4(Ipv4Addr::new(10, 213, 0, 18)))
        );
    }
}
