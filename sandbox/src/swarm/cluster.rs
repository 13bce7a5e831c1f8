//! The engine's Swarm membership: checking it is a manager, and a machine-wide lease on a
//! single-node Swarm for tests and CI (initialised by the first user if the engine is not in a
//! Swarm, left by the last user only if a lease initialised it).

use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use bollard::models::{LocalNodeState, SwarmInitRequest};
use bollard::query_parameters::LeaveSwarmOptions;

use crate::SandboxError;
use crate::docker::{DockerBackend, api_error, status_of};
use crate::objects::owner_identity;

/// The local node's Swarm state, as text for messages.
fn state_text(state: Option<LocalNodeState>) -> String {
    match state {
        Some(s) => format!("{s:?}").to_ascii_lowercase(),
        None => "unknown".into(),
    }
}

/// The node id of the engine, which must be an active Swarm manager.
pub(super) async fn manager_node_id(docker: &DockerBackend) -> Result<String, SandboxError> {
    let info = docker
        .client()
        .info()
        .await
        .map_err(|e| api_error(&docker.endpoint, "info", e))?;
    let swarm = info.swarm.unwrap_or_default();
    if swarm.local_node_state != Some(LocalNodeState::ACTIVE) {
        return Err(SandboxError::SwarmUnavailable {
            detail: format!(
                "its Swarm state is `{}`",
                state_text(swarm.local_node_state)
            ),
        });
    }
    if swarm.control_available != Some(true) {
        return Err(SandboxError::SwarmUnavailable {
            detail: "it is a worker node, not a manager".into(),
        });
    }
    swarm
        .node_id
        .filter(|id| !id.is_empty())
        .ok_or_else(|| SandboxError::SwarmUnavailable {
            detail: "it reports no node id".into(),
        })
}

/// How a [`SwarmMembership`] lease found the engine.
#[derive(Debug)]
pub struct SwarmMembership {
    state_file: PathBuf,
    /// Whether the engine was in a Swarm before any lease (then no lease ever leaves it).
    pub was_active: bool,
}

/// The shared state of the leases on this machine (a JSON file, locked while read and written).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct LeaseState {
    /// Processes holding a lease: `(pid, start time)`; dead ones are dropped at every change.
    holders: Vec<(u32, u64)>,
    /// A lease ran `swarm init` (so the last lease leaves).
    initialised: bool,
}

impl LeaseState {
    /// Drops holders that are no longer alive (a killed test process, say).
    fn prune(&mut self) {
        self.holders.retain(|&(pid, start)| {
            crate::child::process_alive(pid)
                && crate::child::proc_stat_field(pid, 22) == Some(start)
        });
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> SandboxError + '_ {
    move |source| SandboxError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Runs `f` on the lease state under an exclusive `flock` of `state_file`, and writes it back.
async fn with_state<T>(
    state_file: &Path,
    f: impl AsyncFnOnce(&mut LeaseState) -> Result<T, SandboxError>,
) -> Result<T, SandboxError> {
    use nix::fcntl::{Flock, FlockArg};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(state_file)
        .map_err(io_err(state_file))?;
    let mut lock = tokio::task::spawn_blocking(move || Flock::lock(file, FlockArg::LockExclusive))
        .await
        .map_err(|e| SandboxError::InvalidSpec(format!("lease lock task failed: {e}")))?
        .map_err(|(_, errno)| io_err(state_file)(std::io::Error::from(errno)))?;
    let mut text = String::new();
    lock.read_to_string(&mut text).map_err(io_err(state_file))?;
    let mut state: LeaseState = serde_json::from_str(&text).unwrap_or_default();
    let out = f(&mut state).await;
    let body = serde_json::to_vec(&state).unwrap_or_default();
    lock.set_len(0).map_err(io_err(state_file))?;
    lock.rewind().map_err(io_err(state_file))?;
    lock.write_all(&body).map_err(io_err(state_file))?;
    out
}

/// Makes sure the engine is in a Swarm (for tests and CI on one machine): if it is not, runs
/// `swarm init` advertising 127.0.0.1 (listening on 127.0.0.1:2377 only) with
/// `default_addr_pool` (e.g. `10.217.0.0/16`: Swarm's own default, `10.0.0.0/8`, may collide
/// with other networks) for the ingress network, and records that a lease did. Lease holders
/// (pid and start time) are kept across processes in `state_file` (under `flock`); release each
/// with [`leave_swarm_if_ours`]. A holder that dies without releasing is dropped at the next
/// change, so the last live holder still leaves.
pub async fn ensure_single_node_swarm(
    docker: &DockerBackend,
    default_addr_pool: &str,
    state_file: &Path,
) -> Result<SwarmMembership, SandboxError> {
    let was_active = with_state(state_file, async |state: &mut LeaseState| {
        let active = manager_node_id(docker).await.is_ok();
        let mut was_active = active && !state.initialised;
        if !active {
            let request = SwarmInitRequest {
                listen_addr: Some("127.0.0.1:2377".into()),
                advertise_addr: Some("127.0.0.1".into()),
                default_addr_pool: Some(vec![default_addr_pool.to_string()]),
                subnet_size: Some(24),
                ..Default::default()
            };
            match docker.client().init_swarm(request).await {
                Ok(_) => {
                    tracing::info!(pool = %default_addr_pool, "initialised a single-node Swarm");
                    state.initialised = true;
                }
                // Another process (not holding a lease) initialised it meanwhile.
                Err(e) if status_of(&e) == Some(503) => was_active = true,
                Err(e) => return Err(api_error(&docker.endpoint, "swarm init", e)),
            }
            manager_node_id(docker).await?;
        }
        state.prune();
        state.holders.push(owner_identity());
        Ok(was_active)
    })
    .await?;
    Ok(SwarmMembership {
        state_file: state_file.to_path_buf(),
        was_active,
    })
}

/// Releases a lease from [`ensure_single_node_swarm`]; the last one leaves the Swarm (`leave
/// --force`, then removes the `docker_gwbridge` network Swarm made) if a lease initialised it.
/// Returns whether this call left.
pub async fn leave_swarm_if_ours(
    docker: &DockerBackend,
    lease: SwarmMembership,
) -> Result<bool, SandboxError> {
    with_state(&lease.state_file, async |state: &mut LeaseState| {
        let me = owner_identity();
        state.holders.retain(|h| *h != me);
        state.prune();
        if !state.holders.is_empty() || !state.initialised {
            return Ok(false);
        }
        match docker
            .client()
            .leave_swarm(Some(LeaveSwarmOptions { force: true }))
            .await
        {
            Ok(()) => {}
            // 503: not in a Swarm any more (someone left it already).
            Err(e) if status_of(&e) == Some(503) => {}
            Err(e) => return Err(api_error(&docker.endpoint, "swarm leave", e)),
        }
        // `swarm init` created it and `leave` keeps it: leave the engine as the lease found it.
        remove_gwbridge(docker).await;
        state.initialised = false;
        tracing::info!("left the single-node Swarm a lease had initialised");
        Ok(true)
    })
    .await
}

/// The endpoint Swarm's ingress sandbox keeps on `docker_gwbridge`, which outlives the leave.
const INGRESS_ENDPOINT: &str = "gateway_ingress-sbox";

/// Removes the `docker_gwbridge` network a lease's `swarm init` made: the ingress sandbox's
/// endpoint left on it after the leave is disconnected first (it stays otherwise); a few
/// tries while the leave settles.
async fn remove_gwbridge(docker: &DockerBackend) {
    let client = docker.client();
    for attempt in 0..20 {
        match client.remove_network("docker_gwbridge").await {
            Ok(()) => return,
            Err(e) if status_of(&e) == Some(404) => return,
            Err(e) if attempt == 19 => {
                tracing::warn!(error = %e, "docker_gwbridge stays");
                return;
            }
            Err(_) => {}
        }
        let disconnect = bollard::models::NetworkDisconnectRequest {
            container: INGRESS_ENDPOINT.into(),
            force: Some(true),
        };
        if let Err(e) = client
            .disconnect_network("docker_gwbridge", disconnect)
            .await
        {
            tracing::debug!(error = %e, "disconnecting the ingress endpoint from docker_gwbridge");
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
