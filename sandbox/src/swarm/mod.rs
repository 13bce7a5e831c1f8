//! The `swarm` backend: sandboxes as Docker Swarm services (bollard's service API) on
//! per-trial overlay networks.
//!
//! - **A sandbox is a service**: one replica, restart condition `none`, the platform's
//!   [`crate::labels`] on the service and its container, CPU/memory/pids limits, memory
//!   reserved, CPUs not (a trial's grading service waits idle beside its agent; a task that fits
//!   nowhere waits `pending` up to the schedule timeout), `init`, `no_new_privileges`, the image
//!   by its id (never pulled: there is no registry), bind mounts read-only, endpoint mode
//!   `dnsrr` (no virtual IP).
//! - **Networks**: each trial gets an internal, attachable overlay with an explicit subnet from
//!   the backend's own pool ([`DEFAULT_OVERLAY_POOL`], not the engine's default address pools,
//!   and apart from the docker backend's `10.213.0.0/16`). Services cannot join a local
//!   bridge and the host has no address on an overlay, so a small **relay** container (the
//!   `relay_image`, `python3 -I` with an embedded stdlib script, root without capabilities
//!   but `NET_BIND_SERVICE`, read-only root, `ip_forward=0`) joins both the overlay and a
//!   fenced bridge from the docker backend (its iptables chain admits only the allowed host
//!   port): the sandbox reaches the allowed host port (the model proxy) at the relay's overlay
//!   address, and the host reaches the sandbox's forwarded ports (default: 8700) at the
//!   relay's bridge address ([`Sandbox::host_endpoint`]). One reachable sandbox per network
//!   (the relay forwards to the alias [`SANDBOX_ALIAS`]). A sandbox without a network gets a
//!   private internal overlay of its own (Swarm has no `none` network for services; without
//!   any, a task lands on the default bridge, which reaches the internet).
//! - **Files and execs** take one of two transports ([`Transport`],
//!   [`SwarmBackend::with_transport`]):
//!   - `http` (the default): a **sandbox runner** (`runner.py`, stdlib Python run with
//!     `python3 -I`) in each container serves over HTTP exactly what [`Sandbox`] needs: `PUT
//!     /files` (one tar, extracted with the owners and modes in its headers, missing ancestors
//!     root 0755, size-capped), `POST /exec` (argv, env, user, workdir, deadline, output cap →
//!     exit code, capped stdout/stderr, truncation, timeout, OOM; the whole process group and
//!     every descendant killed at the deadline), `GET /files?path=` (a tar of the path, links
//!     never followed; the host checks it with the docker backend's own copy-out code:
//!     escaping links, `..`, the byte cap), and the main command's exit, output and stop. The
//!     runner reaches the container as a Swarm **config** (root-only 0400 at
//!     `/run/rb-runner.py`), runs as root as the child of the container's init, and starts the
//!     sandbox's own command (the agent adapter, or `sleep infinity` for a grader) as the
//!     sandbox user with `no_new_privs` (set on itself: inherited by everything it starts, so
//!     no setuid scan is needed), in its own process group; it stays up when the command
//!     exits, so its workspace can still be copied out. `main_exit`, `wait_exit`, `logs` and
//!     `stop` (SIGTERM, SIGKILL to the whole tree after the grace) are the command's. Every
//!     request carries a per-sandbox 256-bit token, a Swarm **secret** mounted root-only 0400
//!     (never in the environment or a command line, unreadable by the agent's uid); the runner
//!     accepts connections only from the relay's overlay address (the agent, in the same
//!     network namespace, gets its connections closed unread), bounds header lines and count,
//!     body sizes (`Content-Length` only), socket time and concurrent connections. If the runner
//!     dies, so does the container (it is the init's only child): nothing can take its port.
//!     The host reaches the runner at the relay's bridge address on [`RUNNER_PORT`] (the relay
//!     forwards it beside the sandbox's ports; nothing new is reachable *from* the sandbox); a
//!     sandbox without a network gets a private overlay whose relay forwards the runner's port
//!     only. Configs and secrets carry the platform's labels and go with the sandbox and with
//!     the reaper. Tasks run on any node matching the placement constraints.
//!   - `engine`: the local engine's archive and exec APIs on the task's container; every task
//!     is pinned to this node (`node.id==<this node>`, on top of the configured constraints).
//!
//!   `http` is the default: it is what lets trials leave this node, it passes the same tests
//!   (and the bundled suite grades identically to the docker backend over both), and on this
//!   engine it is no slower (see README "Swarm backend" for the numbers). **Images on other
//!   nodes** are not distributed (no registry; `docker save | docker load` on each node would
//!   do): a service names its image by **id**, so a node lacking that exact image cannot run
//!   the task (Swarm rejects it there and it stays pending or fails). The relays and fenced
//!   bridges stay on this node; overlays span the cluster.
//! - **Hardening fallback** (`engine` transport, or a runner that could not set
//!   `no_new_privs`): older engines ignore `no_new_privileges` in a service spec (Docker
//!   20.10, API 1.41, does); when the task's container does not carry `no-new-privileges`,
//!   setuid/setgid bits are removed from the container's root filesystem (a root `chmod` of the
//!   image's setuid/setgid files, listed once per image from its layer folders on this host, see
//!   `setid`) before the sandbox is handed out, so no program in it can raise its privileges.
//! - **Capacity** ([`Backend::capacity`], `nodes`): every node's CPUs and memory, the memory
//!   reserved by the tasks assigned to it (by run for the platform's), and whether it takes
//!   the backend's services (`ready`, `active`, matching every placement constraint: over
//!   `http` every such node; with the `engine` pin only this one). The green agent admits
//!   trials against it.
//! - **A node that leaves** (drained, down, removed): the orchestrator shuts its tasks down.
//!   A sandbox whose task was taken off its node answers [`SandboxError::NodeLost`] (naming
//!   the node and why) from [`Sandbox::wait_exit`] (its task is watched every second while
//!   waited on), [`Sandbox::main_exit`], and any copy or exec that fails or ends unsuccessfully
//!   meanwhile, so the trial's attempt is an infrastructure failure, never the agent's.
//! - **Reaping**: services of dead runs first (their tasks' containers go with them), their
//!   runners' configs and secrets, then the docker backend's reaper (containers, relays, networks, volumes), then overlays whose
//!   endpoints were still being released.

mod cluster;
mod names;
mod network;
mod nodes;
mod reap;
mod runner;
mod secrets;
mod service;
mod setid;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::docker::subnets::SubnetAllocator;
use crate::docker::{DockerBackend, DockerSandbox, SubnetPool};
use crate::{
    Backend, CopiedOut, CopyIn, EscapingLinks, ExecOutcome, ExecRequest, NetworkHandle, Owner,
    Sandbox, SandboxError, SandboxSpec,
};

pub use cluster::{SwarmMembership, ensure_single_node_swarm, leave_swarm_if_ours};
pub use nodes::Availability;
pub use runner::RUNNER_PORT;

/// How the host moves files and runs execs in a swarm sandbox (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// The local engine's archive and exec APIs on the task's container: every task is pinned
    /// to this node.
    Engine,
    /// The sandbox runner in each container, over HTTP through the network's relay: tasks run
    /// on any node matching the placement constraints.
    #[default]
    Http,
}

impl Transport {
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Engine => "engine",
            Transport::Http => "http",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Transport {
    type Err = SandboxError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "engine" => Ok(Transport::Engine),
            "http" => Ok(Transport::Http),
            other => Err(SandboxError::InvalidSpec(format!(
                "`{other}` is not a swarm transport; use `engine` or `http`"
            ))),
        }
    }
}

/// The network alias of a sandbox on its trial's overlay: the relay forwards the host's
/// connections to it.
pub const SANDBOX_ALIAS: &str = "rb-sandbox";

/// Default pool of the overlays' subnets: `10.214.0.0/16` in `/26`s (1024 networks; an
/// overlay also spends an address per node on its load balancer, so `/28`s are too small).
pub const DEFAULT_OVERLAY_POOL: &str = "10.214.0.0/16:26";

/// How long a task may wait to be scheduled and started (pending for resources, preparing).
pub const DEFAULT_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(600);

/// How often a waited-on sandbox's task is checked for having left its node.
const LOST_POLL: Duration = Duration::from_secs(1);

/// Ports the relay forwards from the host to a sandbox by default (the adapter's A2A port).
pub const DEFAULT_FORWARDED_PORTS: &[u16] = &[8700];

/// The Swarm backend. Cheap to clone (shared client and state).
#[derive(Debug, Clone)]
pub struct SwarmBackend {
    docker: DockerBackend,
    overlays: Arc<SubnetAllocator>,
    relay_image: String,
    forwarded_ports: Vec<u16>,
    constraints: Vec<String>,
    node_id: String,
    schedule_timeout: Duration,
    transport: Transport,
    /// The relay of each overlay this process created, by overlay id.
    relays: Arc<Mutex<HashMap<String, network::Relay>>>,
    /// Each image's setuid/setgid files, listed once (see `setid`).
    setid_files: SetidCache,
}

/// Image id → its setuid/setgid files, filled once per image.
type SetidCache = Arc<Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Vec<String>>>>>>;

impl SwarmBackend {
    /// A backend over `docker`'s engine, which must be an active Swarm manager
    /// ([`SandboxError::SwarmUnavailable`] otherwise). `relay_image` must have `python3` (the
    /// platform's `python` image).
    pub async fn new(
        docker: DockerBackend,
        relay_image: impl Into<String>,
    ) -> Result<Self, SandboxError> {
        let node_id = cluster::manager_node_id(&docker).await?;
        let pool: SubnetPool = DEFAULT_OVERLAY_POOL.parse()?;
        Ok(Self {
            docker,
            overlays: Arc::new(SubnetAllocator::new(pool)),
            relay_image: relay_image.into(),
            forwarded_ports: DEFAULT_FORWARDED_PORTS.to_vec(),
            constraints: Vec::new(),
            node_id,
            schedule_timeout: DEFAULT_SCHEDULE_TIMEOUT,
            transport: Transport::default(),
            relays: Arc::new(Mutex::new(HashMap::new())),
            setid_files: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// Takes the overlays' subnets from `pool` (call before creating networks).
    pub fn with_overlay_pool(mut self, pool: SubnetPool) -> Self {
        self.overlays = Arc::new(SubnetAllocator::new(pool));
        self
    }

    /// The ports the relay forwards from the host to a network's sandbox.
    pub fn with_forwarded_ports(mut self, ports: Vec<u16>) -> Self {
        self.forwarded_ports = ports;
        self
    }

    /// How files and execs reach the sandboxes (call before creating networks: their relays
    /// forward the sandbox runner's port over `http`).
    pub fn with_transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// The transport of files and execs.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Placement constraints added to every service (`node.labels.rb==yes`, ...). With the
    /// `engine` transport, tasks are also pinned to this node (see the module docs).
    pub fn with_constraints(mut self, constraints: Vec<String>) -> Self {
        self.constraints = constraints;
        self
    }

    /// How long a task may stay unscheduled or starting before `create` fails.
    pub fn with_schedule_timeout(mut self, timeout: Duration) -> Self {
        self.schedule_timeout = timeout;
        self
    }

    /// The pool overlays take their subnets from.
    pub fn overlay_pool(&self) -> SubnetPool {
        self.overlays.pool()
    }

    /// This engine's Swarm node id (every task is placed on it with the `engine` transport).
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// The docker backend this one runs beside (relays, fenced bridges, images).
    pub fn docker(&self) -> &DockerBackend {
        &self.docker
    }

    /// Sets a node's availability (`docker node update --availability`); returns what it
    /// was. Draining a node shuts its tasks down: their sandboxes report
    /// [`SandboxError::NodeLost`].
    pub async fn set_node_availability(
        &self,
        node_id: &str,
        availability: Availability,
    ) -> Result<Availability, SandboxError> {
        nodes::set_availability(self, node_id, availability).await
    }

    /// [`Backend::create`], as the concrete sandbox.
    pub async fn create_sandbox(&self, spec: SandboxSpec) -> Result<SwarmSandbox, SandboxError> {
        service::create(self, spec, &[]).await
    }

    /// Removes this backend's objects whose owner process is dead, only within `run_id` when
    /// given.
    pub async fn reap_dead(&self, run_id: Option<&str>) -> Result<usize, SandboxError> {
        reap::reap(self, run_id, crate::reap_policy::Reap::Dead).await
    }
}

#[async_trait]
impl Backend for SwarmBackend {
    fn name(&self) -> &'static str {
        "swarm"
    }

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        self.create_with(spec, &[]).await
    }

    async fn create_with(
        &self,
        spec: SandboxSpec,
        files: &[CopyIn],
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        service::create(self, spec, files)
            .await
            .map(|s| Box::new(s) as Box<dyn Sandbox>)
    }

    async fn create_network(
        &self,
        owner: &Owner,
        allowed_host_port: Option<u16>,
    ) -> Result<NetworkHandle, SandboxError> {
        network::create(self, owner, allowed_host_port, false).await
    }

    async fn remove_network(&self, network: &NetworkHandle) -> Result<(), SandboxError> {
        network::remove(self, network).await
    }

    async fn reap(&self, run_id: Option<&str>) -> Result<usize, SandboxError> {
        let mode = if run_id.is_none() {
            crate::reap_policy::Reap::Dead
        } else {
            crate::reap_policy::Reap::All
        };
        reap::reap(self, run_id, mode).await
    }

    async fn image_exists(&self, image: &str) -> Result<bool, SandboxError> {
        self.docker.image_exists(image).await
    }

    async fn capacity(&self) -> Result<crate::Capacity, SandboxError> {
        nodes::capacity(self).await
    }

    /// Swarm services are not adopted yet: every object of the run is removed and its trials
    /// that were running start over (README "Known limits").
    async fn adopt(&self, run_id: &str) -> Result<crate::Adoption, SandboxError> {
        let removed = reap::reap(self, Some(run_id), crate::reap_policy::Reap::All).await?;
        Ok(crate::Adoption {
            agents: Vec::new(),
            removed,
        })
    }
}

/// How a sandbox's files and execs are reached.
#[derive(Debug)]
enum Access {
    /// The task's container on this engine.
    Engine(DockerSandbox),
    /// The sandbox runner, over HTTP through the relay.
    Http {
        runner: runner::Runner,
        /// The sandbox user and working directory (exec defaults).
        user: String,
        workdir: String,
        /// The sandbox user as file owner.
        ids: (u32, u32),
    },
}

/// A sandbox's own network when it has none (`NetworkPolicy::None`), removed with it.
#[derive(Debug)]
enum PrivateNetwork {
    /// An internal overlay of its own (the `engine` transport).
    Bare(String),
    /// An internal overlay with a relay forwarding the host to the sandbox runner only.
    Relayed(NetworkHandle),
}

/// A service's task, reached through this engine or its sandbox runner.
#[derive(Debug)]
pub struct SwarmSandbox {
    backend: SwarmBackend,
    service_id: String,
    service_name: String,
    container_id: String,
    access: Access,
    /// The relay's address on its fenced bridge (`None`: no network).
    relay_address: Option<IpAddr>,
    /// The private network of a sandbox without a network, removed with it.
    private_network: Option<PrivateNetwork>,
    /// The runner's config and token secret (`http`), removed with it.
    objects: Option<secrets::RunnerObjects>,
}

impl SwarmSandbox {
    /// The service's name (`rb-<run>-<role>-...`).
    pub fn service_name(&self) -> &str {
        &self.service_name
    }

    /// The service's id.
    pub fn service_id(&self) -> &str {
        &self.service_id
    }

    /// The transport this sandbox's files and execs take.
    pub fn transport(&self) -> Transport {
        match self.access {
            Access::Engine(_) => Transport::Engine,
            Access::Http { .. } => Transport::Http,
        }
    }

    /// Sends a bare request head to the sandbox runner (with its token, or a wrong one of the
    /// same length) and returns the answer's status line, or what ended the exchange. Tests
    /// of what the runner refuses use it; `None` over the `engine` transport.
    #[doc(hidden)]
    pub async fn probe_runner(
        &self,
        method: &str,
        path: &str,
        right_token: bool,
        declared_length: Option<u64>,
    ) -> Option<String> {
        match &self.access {
            Access::Http { runner, .. } => Some(
                runner
                    .probe(method, path, right_token, declared_length)
                    .await,
            ),
            Access::Engine(_) => None,
        }
    }

    /// The node loss that took this sandbox's task off its node, if one did (`failed`: an
    /// operation on it failed, see `nodes::task_lost`).
    async fn lost_when(&self, failed: bool) -> Option<SandboxError> {
        match nodes::task_lost(
            &self.backend,
            &self.service_id,
            &self.service_name,
            &self.container_id,
            failed,
        )
        .await
        {
            Ok(lost) => lost,
            Err(e) => {
                tracing::debug!(service = %self.service_name, error = %e, "cannot check the service's task");
                None
            }
        }
    }

    /// The node loss that took this sandbox's task off its node while it ran, if one did.
    async fn lost(&self) -> Option<SandboxError> {
        self.lost_when(false).await
    }

    /// `e`, or the node loss behind it.
    async fn explain(&self, e: SandboxError) -> SandboxError {
        self.lost_when(true).await.unwrap_or(e)
    }

    /// `r`, or the node loss behind its failure.
    async fn checked<T>(&self, r: Result<T, SandboxError>) -> Result<T, SandboxError> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(self.explain(e).await),
        }
    }

    /// Over `http`, the main command's exit when the runner cannot answer because the whole
    /// container ended (its task's exit code).
    async fn ended_task_exit(&self, e: SandboxError) -> Result<Option<i64>, SandboxError> {
        match service::task_exit(&self.backend, &self.service_id, &self.container_id).await {
            Ok(Some(code)) => Ok(Some(code)),
            _ => Err(self.explain(e).await),
        }
    }
}

#[async_trait]
impl Sandbox for SwarmSandbox {
    /// The task's container id (what copies and execs address).
    fn id(&self) -> &str {
        &self.container_id
    }

    fn is_isolated(&self) -> bool {
        true
    }

    async fn copy_in(&self, host_dir: &Path, sandbox_dir: &str) -> Result<(), SandboxError> {
        let r = match &self.access {
            Access::Engine(c) => c.copy_in(host_dir, sandbox_dir).await,
            Access::Http { runner, ids, .. } => {
                copy_in_dir(runner, *ids, host_dir, sandbox_dir).await
            }
        };
        self.checked(r).await
    }

    async fn copy_in_many(&self, items: &[CopyIn]) -> Result<(), SandboxError> {
        let r = match &self.access {
            Access::Engine(c) => c.copy_in_many(items).await,
            Access::Http { runner, ids, .. } => {
                if items.is_empty() {
                    return Ok(());
                }
                runner.copy_in(items.to_vec(), *ids, None).await
            }
        };
        self.checked(r).await
    }

    /// An exec on a task taken off its node, or one that fails or ends unsuccessfully because
    /// it was (a killed test runner would otherwise look like the agent's fault), is the node
    /// loss.
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        if let Some(lost) = self.lost().await {
            return Err(lost);
        }
        let r = match &self.access {
            Access::Engine(c) => c.exec(request).await,
            Access::Http {
                runner,
                user,
                workdir,
                ..
            } => {
                let user = request.user.clone().unwrap_or_else(|| user.clone());
                let workdir = request.workdir.clone().unwrap_or_else(|| workdir.clone());
                runner.exec(&request, &user, &workdir).await
            }
        };
        let outcome = self.checked(r).await?;
        if !outcome.success()
            && let Some(lost) = self.lost_when(true).await
        {
            return Err(lost);
        }
        Ok(outcome)
    }

    async fn copy_out_with(
        &self,
        sandbox_path: &str,
        host_dest: &Path,
        max_bytes: u64,
        links: EscapingLinks,
    ) -> Result<CopiedOut, SandboxError> {
        let r = match &self.access {
            Access::Engine(c) => {
                c.copy_out_with(sandbox_path, host_dest, max_bytes, links)
                    .await
            }
            Access::Http { runner, .. } => {
                runner
                    .copy_out(sandbox_path, host_dest, max_bytes, links)
                    .await
            }
        };
        self.checked(r).await
    }

    async fn logs(&self, max_bytes: usize) -> Result<String, SandboxError> {
        let r = match &self.access {
            Access::Engine(c) => c.logs(max_bytes).await,
            Access::Http { runner, .. } => runner.logs(max_bytes).await,
        };
        self.checked(r).await
    }

    /// The relay's bridge address: it forwards the backend's forwarded ports (default: 8700).
    async fn host_endpoint(&self, port: u16) -> Result<std::net::SocketAddr, SandboxError> {
        self.relay_address
            .map(|ip| std::net::SocketAddr::new(ip, port))
            .ok_or_else(|| {
                SandboxError::InvalidSpec(format!(
                    "sandbox {} has no network (NetworkPolicy::None); attach it to an internal network to reach its ports",
                    self.service_name
                ))
            })
    }

    /// The exit code, or [`SandboxError::NodeLost`] when the task was taken off its node
    /// (the orchestrator stops, or is stopping, the container).
    async fn main_exit(&self) -> Result<Option<i64>, SandboxError> {
        let exit = match &self.access {
            Access::Engine(c) => self.checked(c.main_exit().await).await?,
            Access::Http { runner, .. } => match runner.main_exit(Duration::ZERO).await {
                Ok(exit) => exit,
                Err(e) => self.ended_task_exit(e).await?,
            },
        };
        match self.lost().await {
            Some(lost) => Err(lost),
            None => Ok(exit),
        }
    }

    /// Docker's wait on the task's container (or the runner's, over `http`), while the task
    /// is checked every second for having been taken off its node
    /// ([`SandboxError::NodeLost`]).
    async fn wait_exit(&self) -> Result<i64, SandboxError> {
        let watch = async {
            loop {
                tokio::time::sleep(LOST_POLL).await;
                if let Some(lost) = self.lost().await {
                    return lost;
                }
            }
        };
        let wait = async {
            match &self.access {
                Access::Engine(c) => self.checked(c.wait_exit().await).await,
                Access::Http { runner, .. } => match runner.wait_exit().await {
                    Ok(code) => Ok(code),
                    Err(e) => match self.ended_task_exit(e).await? {
                        Some(code) => Ok(code),
                        None => Err(SandboxError::Scheduling {
                            service: self.service_name.clone(),
                            detail: "the task ended without an exit code".into(),
                        }),
                    },
                },
            }
        };
        tokio::select! {
            code = wait => {
                let code = code?;
                match self.lost().await {
                    Some(lost) => Err(lost),
                    None => Ok(code),
                }
            }
            lost = watch => Err(lost),
        }
    }

    async fn stop(&self, grace: Duration) -> Result<(), SandboxError> {
        match &self.access {
            // Restart condition `none`: Swarm leaves a stopped task stopped.
            Access::Engine(c) => c.stop(grace).await,
            // The runner stops the main command and stays up (copies out still work).
            Access::Http { runner, .. } => match runner.stop(grace).await {
                Ok(()) => Ok(()),
                Err(e) => self.ended_task_exit(e).await.map(drop),
            },
        }
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        let bare = match &self.private_network {
            Some(PrivateNetwork::Bare(id)) => Some(id.as_str()),
            _ => None,
        };
        service::remove(
            &self.backend,
            &self.service_id,
            Some(&self.container_id),
            bare,
        )
        .await?;
        if let Some(PrivateNetwork::Relayed(handle)) = &self.private_network {
            network::remove(&self.backend, handle).await?;
        }
        if let Some(objects) = &self.objects {
            secrets::remove(&self.backend, objects).await?;
        }
        tracing::debug!(service = %self.service_name, "removed service");
        Ok(())
    }
}

/// [`Sandbox::copy_in`] over the runner: the directory itself created or re-owned as the
/// sandbox user (0755), missing parents too (as the docker backend does).
async fn copy_in_dir(
    runner: &runner::Runner,
    ids: (u32, u32),
    host_dir: &Path,
    sandbox_dir: &str,
) -> Result<(), SandboxError> {
    crate::spec_check::check_sandbox_path(sandbox_dir)?;
    if !host_dir.is_dir() {
        return Err(SandboxError::InvalidSpec(format!(
            "copy-in source `{}` is not a directory",
            host_dir.display()
        )));
    }
    let item = CopyIn::new(host_dir, sandbox_dir);
    runner.copy_in(vec![item], ids, Some(ids)).await
}
