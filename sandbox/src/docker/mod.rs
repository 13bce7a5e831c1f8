//! The `docker` backend: containers through bollard against the local Docker Engine.
//!
//! Every object carries the [`crate::labels`]; containers run `init: true` (docker-init reaps
//! zombies) as uid 1000 by default, with CPU, memory (swap = memory) and pids limits in the host
//! config, and no network unless attached to an internal network from
//! [`Backend::create_network`]; a [`crate::NetworkPolicy::Loopback`] container has no network
//! either (Docker's `none`: `lo` only), and the host reaches its loopback ports through a
//! forwarder into its network namespace ([`loopback`]). An idle root container (grading) takes its execs through the
//! sandbox runner as its main process ([`channel`]), not through Docker's exec API.

mod adopt;
pub(crate) mod archive;
mod channel;
mod exec;
mod loopback;
pub(crate) mod network;
pub(crate) mod reap;
pub(crate) mod subnets;
pub use subnets::SubnetPool;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bollard::Docker;
use bollard::errors::Error as BollardError;
use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig};
use bollard::query_parameters::{
    CreateContainerOptions, KillContainerOptions, LogsOptions, RemoveContainerOptions,
    StopContainerOptions,
};
use futures::StreamExt;

use crate::DEFAULT_USER;
use crate::objects::{object_labels, object_name};
use crate::spec_check::{check_sandbox_path, validate_env_names, validate_spec};
use crate::{
    Backend, CopiedOut, CopyIn, EscapingLinks, ExecOutcome, ExecRequest, NetworkHandle,
    NetworkPolicy, Owner, Sandbox, SandboxError, SandboxSpec,
};

/// The daemon's socket when `DOCKER_HOST` is unset.
pub const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// How long connecting to the daemon may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The Docker backend. Cheap to clone (the client is shared).
#[derive(Debug, Clone)]
pub struct DockerBackend {
    pub(crate) docker: Docker,
    /// Where the daemon is, for error messages.
    pub(crate) endpoint: String,
    /// Subnets for internal networks, shared by every clone.
    pub(crate) subnets: std::sync::Arc<subnets::SubnetAllocator>,
    /// The engine's unix socket, when it is one (the loopback check asks who is behind it).
    socket: Option<PathBuf>,
    /// Whether [`crate::NetworkPolicy::Loopback`] works here, once asked.
    loopback: Arc<tokio::sync::OnceCell<bool>>,
}

impl DockerBackend {
    /// Connects to the daemon named by `DOCKER_HOST` (or the local socket) and negotiates the
    /// API version. An unreachable daemon is [`SandboxError::DaemonUnreachable`] within 10 s.
    pub async fn connect() -> Result<Self, SandboxError> {
        match std::env::var("DOCKER_HOST") {
            Ok(host) if !host.is_empty() => {
                Self::connect_labelled(&host, format!("DOCKER_HOST=`{host}`")).await
            }
            _ => Self::connect_to(DEFAULT_HOST).await,
        }
    }

    /// Connects to the daemon at `host` (`unix:///path`, `tcp://host:port`, ...).
    pub async fn connect_to(host: &str) -> Result<Self, SandboxError> {
        Self::connect_labelled(host, format!("Docker host `{host}`")).await
    }

    async fn connect_labelled(host: &str, endpoint: String) -> Result<Self, SandboxError> {
        let unreachable =
            |source: Box<dyn std::error::Error + Send + Sync>| SandboxError::DaemonUnreachable {
                hint: endpoint.clone(),
                source,
            };
        let docker = Docker::connect_with_host(host).map_err(|e| unreachable(Box::new(e)))?;
        let docker = tokio::time::timeout(CONNECT_TIMEOUT, docker.negotiate_version())
            .await
            .map_err(|_| unreachable("no answer within 10 s".into()))?
            .map_err(|e| unreachable(Box::new(e)))?;
        tokio::time::timeout(CONNECT_TIMEOUT, docker.ping())
            .await
            .map_err(|_| unreachable("no answer to ping within 10 s".into()))?
            .map_err(|e| unreachable(Box::new(e)))?;
        Ok(Self {
            docker,
            endpoint,
            subnets: std::sync::Arc::new(subnets::SubnetAllocator::new(SubnetPool::default())),
            socket: host.strip_prefix("unix://").map(PathBuf::from),
            loopback: Arc::default(),
        })
    }

    /// Takes internal networks' subnets from `pool` instead of the default `10.213.0.0/16`
    /// (cut into `/28`s). Call before creating networks; clones made afterwards share it.
    pub fn with_subnet_pool(mut self, pool: SubnetPool) -> Self {
        self.subnets = std::sync::Arc::new(subnets::SubnetAllocator::new(pool));
        self
    }

    /// The pool internal networks take their subnets from.
    pub fn subnet_pool(&self) -> SubnetPool {
        self.subnets.pool()
    }

    /// Removes this backend's objects whose owner process is dead, only within `run_id` when
    /// given ([`Backend::reap`] with `None` is `reap_dead(None)`). The agent objects of a run
    /// whose owner died a short while ago are parked for its resume and kept
    /// ([`crate::OwnerLock::parked`]).
    pub async fn reap_dead(&self, run_id: Option<&str>) -> Result<usize, SandboxError> {
        reap::reap(self, run_id, reap::Reap::Dead).await
    }

    /// Like [`DockerBackend::reap_dead`], parked agent objects included (`green-agent reap`).
    pub async fn reap_dead_and_parked(&self) -> Result<usize, SandboxError> {
        reap::reap(self, None, reap::Reap::DeadAndParked).await
    }

    /// The underlying client (for [`crate::images`]).
    pub fn client(&self) -> &Docker {
        &self.docker
    }
}

/// Maps a bollard error: transport failures mean the daemon is unreachable.
pub(crate) fn api_error(endpoint: &str, operation: &'static str, e: BollardError) -> SandboxError {
    match e {
        BollardError::HyperLegacyError { .. }
        | BollardError::IOError { .. }
        | BollardError::SocketNotFoundError(_)
        | BollardError::RequestTimeoutError => SandboxError::DaemonUnreachable {
            hint: format!("{endpoint}, during `{operation}`"),
            source: Box::new(e),
        },
        e => SandboxError::Docker {
            operation,
            source: Box::new(e),
        },
    }
}

pub(crate) fn status_of(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

#[async_trait]
impl Backend for DockerBackend {
    fn name(&self) -> &'static str {
        "docker"
    }

    /// The local engine: `NCPU` and `MemTotal`; memory is a limit, not reserved.
    async fn capacity(&self) -> Result<crate::Capacity, SandboxError> {
        let info = self
            .docker
            .info()
            .await
            .map_err(|e| api_error(&self.endpoint, "info", e))?;
        let node = crate::NodeCapacity::new(
            "local",
            info.name.unwrap_or_else(|| "local engine".into()),
            info.ncpu.unwrap_or(0) as f64,
            u64::try_from(info.mem_total.unwrap_or(0)).unwrap_or(0),
        );
        Ok(crate::Capacity {
            nodes: vec![node],
            reserves_memory: false,
        })
    }

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        self.create_with(spec, &[]).await
    }

    async fn create_with(
        &self,
        spec: SandboxSpec,
        files: &[CopyIn],
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        validate_spec(&spec)?;
        for f in files {
            check_sandbox_path(&f.sandbox_path)?;
        }
        if !self.image_exists(&spec.image).await? {
            return Err(SandboxError::ImageMissing(spec.image.clone()));
        }
        let user = spec
            .user
            .clone()
            .unwrap_or_else(|| DEFAULT_USER.to_string());
        // An idle root container gets the exec channel (the runner as its main process).
        let with_channel = spec.command.is_none() && is_root(&user);
        let (entrypoint, cmd) = match &spec.command {
            None if with_channel => (
                channel::entrypoint(spec.env.contains_key("HOME"), spec.env.contains_key("PWD")),
                vec![],
            ),
            None => (vec!["sleep".to_string(), "infinity".to_string()], vec![]),
            Some(command) => (vec![command[0].clone()], command[1..].to_vec()),
        };
        let network_mode = match &spec.network {
            NetworkPolicy::None | NetworkPolicy::Loopback => "none".to_string(),
            NetworkPolicy::Internal(handle) => handle.name.clone(),
        };
        let memory = i64::try_from(spec.limits.memory_bytes)
            .map_err(|_| SandboxError::InvalidLimits("memory_bytes is too large".into()))?;
        let host_config = HostConfig {
            nano_cpus: Some((spec.limits.cpus * 1e9).round() as i64),
            memory: Some(memory),
            memory_swap: Some(memory),
            pids_limit: Some(spec.limits.pids),
            init: Some(true),
            network_mode: Some(network_mode),
            binds: Some(
                spec.mounts
                    .iter()
                    .map(|m| format!("{}:{}:ro", m.host_path.display(), m.sandbox_path))
                    .collect(),
            ),
            security_opt: Some(vec!["no-new-privileges".to_string()]),
            // The channel's traffic is nobody's log.
            log_config: with_channel.then(|| HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            ..Default::default()
        };
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            env: Some(spec.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
            working_dir: Some(spec.workdir.clone()),
            user: Some(user.clone()),
            entrypoint: Some(entrypoint),
            cmd: Some(cmd),
            labels: Some(object_labels(&spec.owner)),
            host_config: Some(host_config),
            open_stdin: Some(with_channel),
            stdin_once: Some(false),
            attach_stdin: Some(with_channel),
            attach_stdout: Some(with_channel),
            attach_stderr: Some(with_channel),
            ..Default::default()
        };
        let name = object_name(&spec.owner);
        let created = self
            .docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(name.clone()),
                    ..Default::default()
                }),
                body,
            )
            .await
            .map_err(|e| match status_of(&e) {
                Some(404) => SandboxError::ImageMissing(spec.image.clone()),
                Some(400) => SandboxError::InvalidSpec(format!("Docker refused the spec: {e}")),
                _ => api_error(&self.endpoint, "create_container", e),
            })?;
        let reach = match &spec.network {
            NetworkPolicy::None => Reach::Nothing,
            NetworkPolicy::Loopback => Reach::Loopback,
            NetworkPolicy::Internal(handle) => Reach::Network(handle.name.clone()),
        };
        let mut sandbox = DockerSandbox {
            docker: self.docker.clone(),
            endpoint: self.endpoint.clone(),
            id: created.id,
            name,
            user: user.clone(),
            ids: (1000, 1000),
            workdir: spec.workdir.clone(),
            reach,
            forwarders: Mutex::default(),
            channel: None,
        };
        tracing::info!(
            sandbox = %sandbox.name,
            image = %spec.image,
            run = %spec.owner.run_id,
            role = %spec.owner.role,
            "created container"
        );
        let prepared = async {
            if with_channel {
                // Before the start, so nothing the runner says is missed.
                sandbox.channel = Some(Box::new(
                    channel::Channel::attach(&sandbox.docker, &sandbox.endpoint, &sandbox.id)
                        .await?,
                ));
            }
            sandbox.ids = archive::resolve_user(&sandbox, &user).await?;
            if files.is_empty() {
                // Docker creates a missing working directory at the start, owned by root: only
                // another user needs it made (an upload: the root filesystem mounted once more).
                if sandbox.ids != (0, 0) {
                    archive::ensure_dir(&sandbox, &spec.workdir).await?;
                }
            } else {
                // The working directory and every file in one upload, before the start.
                archive::copy_in_with_workdir(&sandbox, &spec.workdir, files).await?;
            }
            sandbox
                .docker
                .start_container(&sandbox.id, None)
                .await
                .map_err(|e| api_error(&sandbox.endpoint, "start_container", e))
        }
        .await;
        if let Err(e) = prepared {
            if let Err(cleanup) = sandbox.remove().await {
                tracing::warn!(sandbox = %sandbox.name, error = %cleanup, "removing a half-created container failed");
            }
            return Err(e);
        }
        Ok(Box::new(sandbox))
    }

    async fn create_network(
        &self,
        owner: &Owner,
        allowed_host_port: Option<u16>,
    ) -> Result<NetworkHandle, SandboxError> {
        network::create(self, owner, allowed_host_port).await
    }

    async fn remove_network(&self, network: &NetworkHandle) -> Result<(), SandboxError> {
        network::remove(self, &network.id).await
    }

    async fn reaches_loopback(&self) -> bool {
        *self
            .loopback
            .get_or_init(|| async {
                let shared = match &self.socket {
                    Some(path) => loopback::engine_shares_pid_namespace(path).await,
                    None => false,
                };
                let able = shared
                    && tokio::task::spawn_blocking(loopback::can_enter_namespaces)
                        .await
                        .unwrap_or(false);
                tracing::debug!(
                    loopback = able,
                    engine_shares_pid_namespace = shared,
                    "whether sandboxes can be reached on their loopback"
                );
                able
            })
            .await
    }

    async fn reap(&self, run_id: Option<&str>) -> Result<usize, SandboxError> {
        // With a run: all of it; without: every dead owner's objects (parked ones kept).
        let mode = if run_id.is_some() {
            reap::Reap::All
        } else {
            reap::Reap::Dead
        };
        reap::reap(self, run_id, mode).await
    }

    async fn adopt(&self, run_id: &str) -> Result<crate::Adoption, SandboxError> {
        adopt::adopt(self, run_id).await
    }

    async fn image_exists(&self, image: &str) -> Result<bool, SandboxError> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if matches!(status_of(&e), Some(404) | Some(400)) => Ok(false),
            Err(e) => Err(api_error(&self.endpoint, "inspect_image", e)),
        }
    }
}

/// Whether a Docker user spec is root (`root`, `0`, `0:…`, `root:…`).
fn is_root(user: &str) -> bool {
    let name = user.split(':').next().unwrap_or(user);
    name == "root" || name == "0"
}

/// How the host reaches a container's ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Not at all ([`NetworkPolicy::None`]).
    Nothing,
    /// At its address on this internal network.
    Network(String),
    /// Through a forwarder into its network namespace ([`NetworkPolicy::Loopback`]).
    Loopback,
}

/// A container created by [`DockerBackend`].
#[derive(Debug)]
pub struct DockerSandbox {
    docker: Docker,
    endpoint: String,
    id: String,
    name: String,
    /// The user as given to Docker.
    user: String,
    /// Numeric uid/gid owning copied-in files.
    ids: (u32, u32),
    workdir: String,
    /// How the host reaches its ports.
    reach: Reach,
    /// The loopback forwarders started so far, by port (stopped on removal and on drop).
    forwarders: Mutex<HashMap<u16, loopback::Forwarder>>,
    /// The exec channel of an idle root container (see [`channel`]).
    channel: Option<Box<channel::Channel>>,
}

/// The container's CPU time so far in µs (cgroup v1 `cpuacct.usage`, v2 `cpu.stat`), if
/// readable here.
fn cpu_usage_us(id: &str) -> Option<u64> {
    if let Ok(ns) =
        std::fs::read_to_string(format!("/sys/fs/cgroup/cpuacct/docker/{id}/cpuacct.usage"))
    {
        return ns.trim().parse::<u64>().ok().map(|n| n / 1000);
    }
    [
        format!("/sys/fs/cgroup/system.slice/docker-{id}.scope/cpu.stat"),
        format!("/sys/fs/cgroup/docker/{id}/cpu.stat"),
    ]
    .iter()
    .find_map(|p| {
        let text = std::fs::read_to_string(p).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok())
    })
}

/// An exec's argv for a log line: each item's first 120 characters, at most 600 in all.
fn exec_summary(argv: &[String]) -> String {
    let mut s = String::new();
    for a in argv {
        if s.len() > 600 {
            s.push_str(" …");
            break;
        }
        if !s.is_empty() {
            s.push(' ');
        }
        s.extend(a.chars().take(120).map(|c| if c == '\n' { ' ' } else { c }));
    }
    s
}

impl DockerSandbox {
    async fn exec_inner(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        if let Some(channel) = &self.channel {
            let user = request.user.as_deref().unwrap_or(&self.user);
            let workdir = request.workdir.as_deref().unwrap_or(&self.workdir);
            if let Some(outcome) = channel.exec(&request, user, workdir).await {
                return outcome;
            }
        }
        exec::run(self, request).await
    }

    fn err(&self, operation: &'static str) -> impl Fn(BollardError) -> SandboxError + '_ {
        move |e| api_error(&self.endpoint, operation, e)
    }

    /// The container's name (`rb-<run>-<role>-...`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Wraps a running container of this engine that [`DockerBackend::create`] did not make (a
    /// Swarm task's container on this node), so copies and execs go through the local archive
    /// and exec APIs: resolves `user` to numeric ids and creates `workdir` owned by them.
    pub(crate) async fn adopt(
        backend: &DockerBackend,
        id: String,
        name: String,
        user: String,
        workdir: String,
    ) -> Result<Self, SandboxError> {
        let mut sandbox = DockerSandbox {
            docker: backend.docker.clone(),
            endpoint: backend.endpoint.clone(),
            id,
            name,
            user: user.clone(),
            ids: (1000, 1000),
            workdir: workdir.clone(),
            reach: Reach::Nothing,
            forwarders: Mutex::default(),
            channel: None,
        };
        sandbox.ids = archive::resolve_user(&sandbox, &user).await?;
        archive::ensure_dir(&sandbox, &workdir).await?;
        Ok(sandbox)
    }

    fn lock_forwarders(&self) -> std::sync::MutexGuard<'_, HashMap<u16, loopback::Forwarder>> {
        self.forwarders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The host address of the forwarder to `port` on the container's loopback, started now
    /// when there is none (or it ended).
    async fn loopback_endpoint(&self, port: u16) -> Result<SocketAddr, SandboxError> {
        if let Some(f) = self.lock_forwarders().get(&port).filter(|f| f.is_running()) {
            return Ok(f.addr());
        }
        let failed = |detail: String| SandboxError::Loopback {
            sandbox: self.name.clone(),
            detail,
        };
        let state = self.state().await?;
        if state.running != Some(true) {
            return Err(failed("the container is not running".into()));
        }
        let pid = state.pid.unwrap_or(0);
        let id = self.id.clone();
        let ns = tokio::task::spawn_blocking(move || loopback::open_netns(pid, &id))
            .await
            .map_err(|e| failed(e.to_string()))?
            .map_err(failed)?;
        let forwarder = loopback::start(ns, port)
            .await
            .map_err(|e| failed(format!("cannot listen on 127.0.0.1: {e}")))?;
        let addr = forwarder.addr();
        let mut forwarders = self.lock_forwarders();
        // Another caller may have started one meanwhile: keep the first.
        if let Some(f) = forwarders.get(&port).filter(|f| f.is_running()) {
            return Ok(f.addr());
        }
        forwarders.insert(port, forwarder);
        tracing::debug!(sandbox = %self.name, port, %addr, "loopback forwarder started");
        Ok(addr)
    }

    /// The container's state as the engine reports it.
    async fn state(&self) -> Result<bollard::models::ContainerState, SandboxError> {
        let info = self
            .docker
            .inspect_container(&self.id, None)
            .await
            .map_err(self.err("inspect_container"))?;
        Ok(info.state.unwrap_or_default())
    }

    /// Whether the engine runs the container with `no-new-privileges`.
    pub(crate) async fn has_no_new_privileges(&self) -> Result<bool, SandboxError> {
        let info = self
            .docker
            .inspect_container(&self.id, None)
            .await
            .map_err(self.err("inspect_container"))?;
        Ok(info
            .host_config
            .and_then(|h| h.security_opt)
            .unwrap_or_default()
            .iter()
            .any(|o| o == "no-new-privileges" || o == "no-new-privileges:true"))
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn is_isolated(&self) -> bool {
        true
    }

    async fn copy_in(&self, host_dir: &Path, sandbox_dir: &str) -> Result<(), SandboxError> {
        archive::copy_in(self, host_dir, sandbox_dir).await
    }

    async fn copy_in_many(&self, items: &[CopyIn]) -> Result<(), SandboxError> {
        archive::copy_in_many(self, items).await
    }

    async fn exec(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        if request.argv.is_empty() {
            return Err(SandboxError::InvalidSpec("exec argv is empty".into()));
        }
        validate_env_names(request.env.keys())?;
        // One line per exec (`--log sandbox::exec=debug`): what grading costs in execs is
        // counted from these (scripts/bench's exec counts).
        let started = std::time::Instant::now();
        let argv = exec_summary(&request.argv);
        let user = request.user.clone().unwrap_or_else(|| self.user.clone());
        let cpu_before = cpu_usage_us(&self.id);
        let outcome = self.exec_inner(request).await;
        tracing::debug!(
            target: "sandbox::exec",
            sandbox = %self.name,
            %user,
            ms = started.elapsed().as_millis() as u64,
            // The container's CPU time meanwhile (its other work included), when the cgroup
            // tells it: steadier than wall time on a busy machine.
            cpu_ms = ?cpu_usage_us(&self.id).zip(cpu_before).map(|(a, b)| a.saturating_sub(b) / 1000),
            exit = ?outcome.as_ref().ok().and_then(|o| o.exit_code),
            %argv,
            "exec"
        );
        outcome
    }

    async fn copy_out_with(
        &self,
        sandbox_path: &str,
        host_dest: &Path,
        max_bytes: u64,
        links: EscapingLinks,
    ) -> Result<CopiedOut, SandboxError> {
        archive::copy_out(self, sandbox_path, host_dest, max_bytes, links).await
    }

    async fn logs(&self, max_bytes: usize) -> Result<String, SandboxError> {
        let mut stream = self.docker.logs(
            &self.id,
            Some(LogsOptions {
                stdout: true,
                stderr: true,
                tail: "all".to_string(),
                ..Default::default()
            }),
        );
        // Keep the most recent `max_bytes`.
        let mut tail: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
        while let Some(item) = stream.next().await {
            let item = item.map_err(self.err("logs"))?;
            tail.extend(item.as_ref());
            let excess = tail.len().saturating_sub(max_bytes);
            tail.drain(..excess);
        }
        let bytes: Vec<u8> = tail.into_iter().collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    async fn host_endpoint(&self, port: u16) -> Result<SocketAddr, SandboxError> {
        let network = match &self.reach {
            Reach::Nothing => {
                return Err(SandboxError::InvalidSpec(format!(
                    "sandbox {} has no network (NetworkPolicy::None); attach it to an internal network, or give it NetworkPolicy::Loopback, to reach its ports",
                    self.name
                )));
            }
            Reach::Loopback => return self.loopback_endpoint(port).await,
            Reach::Network(network) => network,
        };
        let info = self
            .docker
            .inspect_container(&self.id, None)
            .await
            .map_err(self.err("inspect_container"))?;
        let ip = info
            .network_settings
            .and_then(|s| s.networks)
            .and_then(|mut n| n.remove(network))
            .and_then(|e| e.ip_address)
            .filter(|ip| !ip.is_empty());
        let Some(ip) = ip else {
            return Err(SandboxError::InvalidSpec(format!(
                "sandbox {} has no address on network {network} (is it running?)",
                self.name
            )));
        };
        let ip: std::net::IpAddr = ip.parse().map_err(|_| {
            SandboxError::InvalidSpec(format!("Docker reported an unparsable address `{ip}`"))
        })?;
        Ok(SocketAddr::new(ip, port))
    }

    async fn wait_exit(&self) -> Result<i64, SandboxError> {
        use bollard::query_parameters::WaitContainerOptions;
        // The wait call blocks until the exit: no request timeout (the caller bounds it).
        let client = self
            .docker
            .clone()
            .with_timeout(Duration::from_secs(365 * 24 * 3600));
        loop {
            let mut stream = client.wait_container(
                &self.id,
                Some(WaitContainerOptions {
                    condition: "not-running".to_string(),
                }),
            );
            match stream.next().await {
                Some(Ok(r)) => return Ok(r.status_code),
                // bollard reports a non-zero exit as an error carrying the code
                Some(Err(BollardError::DockerContainerWaitError { code, .. })) => return Ok(code),
                Some(Err(e)) if status_of(&e) == Some(404) => {
                    return Err(api_error(&self.endpoint, "wait_container", e));
                }
                // The connection ended without an answer (daemon restart, proxy timeout):
                // ask once directly, then wait again.
                Some(Err(_)) | None => {
                    if let Some(code) = self.main_exit().await? {
                        return Ok(code);
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }

    async fn main_exit(&self) -> Result<Option<i64>, SandboxError> {
        let state = self.state().await?;
        if state.running == Some(true) {
            Ok(None)
        } else {
            Ok(Some(state.exit_code.unwrap_or(-1)))
        }
    }

    async fn freeze(&self, grace: Duration) -> Result<(), SandboxError> {
        match self.docker.pause_container(&self.id).await {
            Ok(()) => {
                tracing::debug!(sandbox = %self.name, "paused container");
                Ok(())
            }
            // Not running (it ended: nothing runs) or already paused (a resumed collection).
            Err(e) if status_of(&e) == Some(409) => Ok(()),
            Err(e) => {
                tracing::warn!(sandbox = %self.name, error = %e, "pausing failed; stopping instead");
                self.stop(grace).await
            }
        }
    }

    async fn may_run(&self) -> Result<bool, SandboxError> {
        let state = self.state().await?;
        Ok(state.running == Some(true) && state.paused != Some(true))
    }

    async fn stop(&self, grace: Duration) -> Result<(), SandboxError> {
        let grace = grace.min(Duration::from_secs(24 * 3600));
        let secs = i32::try_from(grace.as_secs() + u64::from(grace.subsec_nanos() > 0))
            .unwrap_or(i32::MAX);
        // The call returns only once the container stopped: allow for the grace period.
        let client = self
            .docker
            .clone()
            .with_timeout(grace.saturating_add(Duration::from_secs(60)));
        match client
            .stop_container(
                &self.id,
                Some(StopContainerOptions {
                    t: Some(secs),
                    signal: None,
                }),
            )
            .await
        {
            Ok(()) => Ok(()),
            // 304: already stopped.
            Err(e) if status_of(&e) == Some(304) => Ok(()),
            Err(e) => Err(api_error(&self.endpoint, "stop_container", e)),
        }
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        // The forwarders go first: nothing reaches into a sandbox being removed.
        self.lock_forwarders().clear();
        remove_container(&self.docker, &self.endpoint, &self.id).await?;
        tracing::debug!(sandbox = %self.name, "removed container");
        Ok(())
    }
}

/// Force-removes a container with its anonymous volumes; a missing container is fine.
pub(crate) async fn remove_container(
    docker: &Docker,
    endpoint: &str,
    id: &str,
) -> Result<(), SandboxError> {
    for attempt in 0..20 {
        match docker
            .remove_container(
                id,
                Some(RemoveContainerOptions {
                    force: true,
                    v: true,
                    link: false,
                }),
            )
            .await
        {
            Ok(()) => return Ok(()),
            Err(e) if status_of(&e) == Some(404) => return Ok(()),
            // 409: removal already in progress (another remover, or the reaper).
            Err(e) if status_of(&e) == Some(409) && attempt < 19 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(api_error(endpoint, "remove_container", e)),
        }
    }
    Ok(())
}

/// Sends SIGKILL to a container (fallback when an exec's processes are not visible here).
pub(crate) async fn kill_container(docker: &Docker, id: &str) {
    let _ = docker
        .kill_container(
            id,
            Some(KillContainerOptions {
                signal: "SIGKILL".to_string(),
            }),
        )
        .await;
}
