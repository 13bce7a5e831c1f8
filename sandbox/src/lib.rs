//! Isolated execution for the platform: the **only** crate that talks to Docker or spawns processes.
//!
//! [`DockerBackend`] (containers, through bollard) and [`SwarmBackend`] (Docker Swarm services
//! on per-trial overlays; files and execs through a sandbox runner over HTTP, or this node's
//! engine) implement
//! [`Backend`] (a Kubernetes design, not built: `docs/kubernetes.md`). Higher crates create a
//! [`Sandbox`] from a [`SandboxSpec`], copy files in, [`Sandbox::exec`] commands with deadlines
//! and output caps, copy outputs out, and remove it.
//!
//! The public contract below is shared by every other crate: change it only with care.
//!
//! Internal networks take explicit subnets from the platform's own pool ([`SubnetPool`],
//! [`DockerBackend::with_subnet_pool`]); [`Sandbox::copy_in_many`] copies several host paths in
//! one upload.
//!
//! Modules: [`BackendConfig`] (which backend, and its one `connect`), [`child`] (a supervised
//! host process: own process group, streamed stdout, tree kill), [`docker`] (the backend), [`swarm`] (the Swarm backend), [`images`] (offline image
//! builds and name resolution), [`SignalReaper`] (SIGINT/SIGTERM → remove a run's objects; the
//! caller exits), [`OwnerLock`] (the `flock` whose holder owns a run's objects),
//! [`Backend::adopt`] (a resumed run takes over its live agent containers), [`Capacity`]
//! ([`Backend::capacity`]: what the backend's nodes hold, and the arithmetic of fitting a
//! trial's sandboxes into it).

// `sandbox` is the one crate that spawns processes and talks to Docker (clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

mod backends;
mod capacity;
pub mod child;
pub mod distribute;
pub mod docker;
mod error;
pub mod images;
mod objects;
mod owner_lock;
mod reap_policy;
mod runner;
mod signals;
mod spec_check;
pub mod swarm;
mod tarball;
pub use backends::{BackendConfig, BackendKind, SwarmConfig};
pub use capacity::{Bytes, Capacity, Needs, NeverFits, NodeCapacity, Room};
pub use docker::{DockerBackend, SubnetPool};
pub use error::SandboxError;
pub use owner_lock::OwnerLock;
pub use signals::{Signal, SignalReaper};
pub use swarm::SwarmBackend;
pub use tarball::MAX_TREE_DEPTH;

/// Label keys every platform-owned Docker object carries (containers, networks, volumes).
pub mod labels {
    /// Marks an object as ours; the reaper only ever touches objects with this label.
    pub const MANAGED: &str = "org.research-bench.managed";
    /// The run an object belongs to.
    pub const RUN: &str = "org.research-bench.run";
    /// The trial an object belongs to.
    pub const TRIAL: &str = "org.research-bench.trial";
    /// What the object is for: see [`super::Role`].
    pub const ROLE: &str = "org.research-bench.role";
    /// PID of the process that owns the object (the reaper removes objects whose owner is dead).
    pub const OWNER_PID: &str = "org.research-bench.owner-pid";
    /// Start time of the owner process (clock ticks since boot, `/proc/PID/stat` field 22), so
    /// a reused pid is not mistaken for a live owner.
    pub const OWNER_START: &str = "org.research-bench.owner-start";
    /// The owner lock file the creating process held ([`super::OwnerLock`]): the object stays
    /// alive while anyone holds that lock, even after its creator died (a resumed run adopts
    /// its containers).
    pub const OWNER_LOCK: &str = "org.research-bench.owner-lock";
}

/// What a sandbox is used for; recorded as a label and in logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Runs a white agent under test.
    Agent,
    /// Grades an agent's outputs in a fresh container.
    Grader,
    /// Anything else the platform needs (importers deriving targets, image checks, tests).
    Utility,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Agent => "agent",
            Role::Grader => "grader",
            Role::Utility => "utility",
        })
    }
}

/// Ids that tie a sandbox to a run and trial (labels, reaping, log spans).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub run_id: String,
    pub trial_id: Option<String>,
    pub role: Role,
}

/// Resource limits, enforced by the backend (Docker host config).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Number of CPUs (fractional allowed).
    pub cpus: f64,
    pub memory_bytes: u64,
    pub pids: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpus: 1.0,
            memory_bytes: 2 * 1024 * 1024 * 1024,
            pids: 512,
        }
    }
}

/// A host path visible inside the sandbox (always read-only: agents never write to the host).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadOnlyMount {
    pub host_path: PathBuf,
    pub sandbox_path: String,
}

/// Network policy of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NetworkPolicy {
    /// No network at all (the default): cannot resolve or connect to anything.
    #[default]
    None,
    /// Its own loopback only, like [`NetworkPolicy::None`] from the inside (it reaches nothing),
    /// while the host reaches a port on that loopback at [`Sandbox::host_endpoint`]. For
    /// backends whose [`Backend::reaches_loopback`] says so (the docker backend, through a
    /// forwarder into the container's network namespace); others refuse it.
    Loopback,
    /// Attached to an internal network created by [`Backend::create_network`]: the host can
    /// reach the sandbox's ports, and the sandbox can reach the network's one allowed endpoint
    /// and nothing else.
    Internal(NetworkHandle),
}

/// An internal network owned by the platform (see [`Backend::create_network`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkHandle {
    pub id: String,
    pub name: String,
    /// The address inside the network at which sandboxes reach the allowed endpoint.
    pub allowed_endpoint: Option<std::net::SocketAddr>,
}

/// The platform's default sandbox user: uid/gid 1000 (`agent` in the platform images).
pub const DEFAULT_USER: &str = "1000:1000";

/// Everything needed to create a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// Image reference.
    pub image: String,
    pub owner: Owner,
    /// Environment of the main process and every exec. Values may be secrets: never logged.
    pub env: BTreeMap<String, String>,
    /// Working directory inside the sandbox (created if missing).
    pub workdir: String,
    /// User to run as; `None` means the platform's non-root default ([`DEFAULT_USER`]).
    pub user: Option<String>,
    pub limits: Limits,
    pub mounts: Vec<ReadOnlyMount>,
    pub network: NetworkPolicy,
    /// Main process; `None` keeps the sandbox idle (`sleep infinity`) for execs.
    pub command: Option<Vec<String>>,
}

/// A command to run inside a sandbox.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub workdir: Option<String>,
    pub user: Option<String>,
    /// Killed (whole process tree) at this deadline and reported as timed out.
    pub timeout: Duration,
    /// Bytes kept of stdout and of stderr each; the rest is dropped and `truncated` set.
    pub output_cap: usize,
}

impl ExecRequest {
    /// A request with the platform defaults (10 minutes, 1 MiB of output per stream).
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            env: BTreeMap::new(),
            workdir: None,
            user: None,
            timeout: Duration::from_secs(600),
            output_cap: 1024 * 1024,
        }
    }

    /// The deadline, a century at most: a timeout too large to represent means "no deadline"
    /// in practice.
    pub(crate) fn capped_timeout(&self) -> Duration {
        self.timeout.min(Duration::from_secs(100 * 365 * 24 * 3600))
    }
}

/// How an exec ended. A non-zero exit, a timeout or an OOM kill is an outcome, not an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutcome {
    /// `None` when killed by a signal or by the deadline.
    pub exit_code: Option<i64>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub timed_out: bool,
    pub oom_killed: bool,
    /// True when stdout or stderr exceeded the output cap.
    pub truncated: bool,
    pub duration: Duration,
}

impl ExecOutcome {
    /// Exit code 0, not timed out, not OOM-killed.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.oom_killed
    }

    /// How it ended, for user text: `exit 2`, `timed out`, `OOM-killed`, `exit 0, output
    /// truncated`, `killed (no exit code)`; never a Rust debug form.
    pub fn ended(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.timed_out {
            parts.push("timed out".into());
        }
        if self.oom_killed {
            parts.push("OOM-killed".into());
        }
        match self.exit_code {
            Some(code) => parts.push(format!("exit {code}")),
            None if parts.is_empty() => parts.push("killed (no exit code)".into()),
            None => {}
        }
        if self.truncated {
            parts.push("output truncated".into());
        }
        parts.join(", ")
    }
}

/// One host path for [`Sandbox::copy_in_many`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyIn {
    /// A host directory (its contents are copied) or a regular file.
    pub host_path: PathBuf,
    /// Absolute destination: the directory that receives a directory's contents, or the
    /// file's own path.
    pub sandbox_path: String,
    /// `(uid, gid)` owning everything copied (the destination directory included); `None` =
    /// the sandbox user.
    pub owner: Option<(u32, u32)>,
    /// Mode of the destination directory or file; `None` = `0o755` for a directory, the host
    /// file's mode for a file. Files inside a directory keep their host modes.
    pub mode: Option<u32>,
    /// Group and other write bits cleared on everything copied (see [`CopyIn::read_only`]).
    pub read_only: bool,
}

impl CopyIn {
    /// Copies `host_path` to `sandbox_path`, owned by the sandbox user.
    pub fn new(host_path: impl Into<PathBuf>, sandbox_path: impl Into<String>) -> Self {
        Self {
            host_path: host_path.into(),
            sandbox_path: sandbox_path.into(),
            owner: None,
            mode: None,
            read_only: false,
        }
    }

    /// Writable by its owner alone (group and other write bits cleared on every entry): with
    /// [`CopyIn::owned_by`] root, what a read-only bind mount gives the sandbox user.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Owned by `uid:gid` instead of the sandbox user.
    pub fn owned_by(mut self, uid: u32, gid: u32) -> Self {
        self.owner = Some((uid, gid));
        self
    }

    /// With this mode on the destination directory or file.
    pub fn with_mode(mut self, mode: u32) -> Self {
        self.mode = Some(mode);
        self
    }
}

/// What copy-out does with a symlink *inside* the copied tree whose target leaves the tree
/// (an absolute link, or `..` climbing out). The copied path itself may never be such a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EscapingLinks {
    /// Fail with [`SandboxError::PathOutsideSandbox`] naming the link (what `copy_out` does).
    #[default]
    Refuse,
    /// Leave the link out (logged) and copy the rest, e.g. a workspace holding a virtualenv
    /// whose `bin/python` points at `/usr/bin/python3`.
    Skip,
    /// Copy only directories and regular files (hard links to regular files in the tree as
    /// copies): every symlink (inside or leaving the tree), FIFO, socket and device is left out
    /// and listed in [`CopiedOut::dropped`]; the copied path itself being a link copies nothing.
    /// What collection of an untrusted agent's workspace uses: never a reason to refuse.
    RegularFilesOnly,
}

/// What a copy-out wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopiedOut {
    /// Bytes of file content written.
    pub bytes: u64,
    /// Entries left out (by [`EscapingLinks::Skip`] or [`EscapingLinks::RegularFilesOnly`]),
    /// as `path (kind)`, relative to the copied path; at most [`CopiedOut::MAX_LISTED`].
    pub dropped: Vec<String>,
    /// How many entries were left out (the full count).
    pub dropped_count: usize,
}

impl CopiedOut {
    /// Most dropped entries listed by name.
    pub const MAX_LISTED: usize = 100;
}

/// A live sandbox. Dropping it does not remove it: call [`Sandbox::remove`] (the reaper is the
/// backstop for crashes).
#[async_trait]
pub trait Sandbox: Send + Sync + fmt::Debug {
    /// Backend-specific id (the container id).
    fn id(&self) -> &str;
    /// Whether the sandbox isolates what runs in it (false: outputs must say the run was not
    /// isolated).
    fn is_isolated(&self) -> bool;
    /// Copies a host directory's contents into `sandbox_dir` (created if missing), owned by the
    /// sandbox user.
    async fn copy_in(&self, host_dir: &Path, sandbox_dir: &str) -> Result<(), SandboxError>;
    /// Copies several host paths to several destinations at once, as ONE upload (one tar
    /// stream, whatever the number of items), with the owners and modes asked for; missing
    /// ancestors of a destination are created owned by root, mode 0755.
    async fn copy_in_many(&self, items: &[CopyIn]) -> Result<(), SandboxError>;
    /// Runs a command to completion, its deadline or its output cap.
    async fn exec(&self, request: ExecRequest) -> Result<ExecOutcome, SandboxError>;
    /// Copies `sandbox_path` (file or directory) out to `host_dest`; refuses paths outside the
    /// sandbox's filesystem root and totals over `max_bytes`.
    /// Escaping symlinks inside the tree are refused ([`EscapingLinks::Refuse`]).
    async fn copy_out(
        &self,
        sandbox_path: &str,
        host_dest: &Path,
        max_bytes: u64,
    ) -> Result<u64, SandboxError> {
        self.copy_out_with(sandbox_path, host_dest, max_bytes, EscapingLinks::Refuse)
            .await
            .map(|c| c.bytes)
    }
    /// [`Sandbox::copy_out`] with a choice of what happens to escaping symlinks inside the
    /// tree.
    async fn copy_out_with(
        &self,
        sandbox_path: &str,
        host_dest: &Path,
        max_bytes: u64,
        links: EscapingLinks,
    ) -> Result<CopiedOut, SandboxError>;
    /// The main process's output so far (capped).
    async fn logs(&self, max_bytes: usize) -> Result<String, SandboxError>;
    /// The address at which the host reaches the sandbox's `port`: its address on its internal
    /// network, or under [`NetworkPolicy::Loopback`] a host-local forwarder to that port on the
    /// sandbox's own loopback (started by the first call for the port, stopped with the
    /// sandbox). A sandbox the host cannot reach ([`NetworkPolicy::None`]) is
    /// [`SandboxError::InvalidSpec`].
    async fn host_endpoint(&self, port: u16) -> Result<SocketAddr, SandboxError>;
    /// Whether the main process is still running; its exit code once it is not.
    async fn main_exit(&self) -> Result<Option<i64>, SandboxError>;
    /// Waits until the main process has exited and returns its exit code. Backends that can
    /// be told of the exit (Docker's wait API) answer without polling; this default polls
    /// [`Sandbox::main_exit`] with a backoff capped at one second.
    async fn wait_exit(&self) -> Result<i64, SandboxError> {
        let mut delay = Duration::from_millis(50);
        loop {
            if let Some(code) = self.main_exit().await? {
                return Ok(code);
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_secs(1));
        }
    }
    /// Stops the main process: SIGTERM, then SIGKILL after `grace`.
    async fn stop(&self, grace: Duration) -> Result<(), SandboxError>;
    /// Ends all activity in the sandbox so its files can be copied out as they stand: after it
    /// returns, none of its processes runs again (a sandbox that already ended stays as it is;
    /// [`Sandbox::remove`] ends a frozen one). The default stops it (SIGTERM, then SIGKILL
    /// after `grace`); Docker freezes the processes where they are (its cgroup freezer), which
    /// leaves them no grace to write anything more and skips the stop's network teardown.
    async fn freeze(&self, grace: Duration) -> Result<(), SandboxError> {
        self.stop(grace).await
    }
    /// Whether a process of the sandbox may still run: `false` once its main process ended or
    /// it was frozen ([`Sandbox::freeze`]). The default asks [`Sandbox::main_exit`].
    async fn may_run(&self) -> Result<bool, SandboxError> {
        Ok(self.main_exit().await?.is_none())
    }
    /// Stops (if needed) and deletes the sandbox and everything it holds. Idempotent.
    async fn remove(&self) -> Result<(), SandboxError>;
}

/// A way of creating sandboxes.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug {
    /// The backend's name (`"docker"`, `"swarm"`).
    fn name(&self) -> &'static str;
    /// Creates and starts a sandbox.
    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError>;
    /// Creates a sandbox holding `files` (as [`Sandbox::copy_in_many`] copies them) before its
    /// main process starts, then starts it. The Docker backend sends the working directory and
    /// every file in one upload to the created container; this default creates, then copies
    /// (the sandbox is removed again when the copy fails).
    async fn create_with(
        &self,
        spec: SandboxSpec,
        files: &[CopyIn],
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        let sb = self.create(spec).await?;
        if let Err(e) = sb.copy_in_many(files).await {
            if let Err(cleanup) = sb.remove().await {
                tracing::warn!(sandbox = sb.id(), error = %cleanup, "removing a half-created sandbox failed");
            }
            return Err(e);
        }
        Ok(sb)
    }
    /// Creates an internal network for one trial or run, from which sandboxes reach
    /// `allowed_endpoint` (a host port, e.g. the model proxy) and nothing else.
    async fn create_network(
        &self,
        owner: &Owner,
        allowed_host_port: Option<u16>,
    ) -> Result<NetworkHandle, SandboxError>;
    async fn remove_network(&self, network: &NetworkHandle) -> Result<(), SandboxError>;
    /// Whether sandboxes can be created with [`NetworkPolicy::Loopback`] (reached by the host
    /// without any network). The docker backend: when this process may enter other network
    /// namespaces (root) and shares the engine's pid namespace; asked once, then remembered.
    /// Other backends: no (an internal network without an allowed port serves instead).
    async fn reaches_loopback(&self) -> bool {
        false
    }
    /// Removes every object labelled with a run whose owner is dead (its process gone and its
    /// [`OwnerLock`] free), except the agent objects parked for a resume
    /// ([`OwnerLock::parked`]); or all of `run_id`'s when given. Returns how many objects
    /// were removed.
    async fn reap(&self, run_id: Option<&str>) -> Result<usize, SandboxError>;
    /// Whether the image exists locally (no pulls: there is no registry).
    async fn image_exists(&self, image: &str) -> Result<bool, SandboxError>;
    /// Takes over what a dead owner of `run_id` left (call it holding the run's
    /// [`OwnerLock`], so no other reaper takes them meanwhile): every container of the run with
    /// the [`Role::Agent`] role and a trial label (running, or stopped: its workspace can
    /// still be copied out; [`Sandbox::main_exit`] tells) comes back with its network;
    /// every other object of the run (graders, networks no adopted container is attached to)
    /// is removed. The caller removes what it adopts once done with it.
    async fn adopt(&self, run_id: &str) -> Result<Adoption, SandboxError>;
    /// What the backend's nodes can hold now: each node's CPUs and memory, the memory its
    /// tasks reserve (by run), and which nodes take sandboxes. The docker backend reports the
    /// local engine (`NCPU`, `MemTotal`; nothing reserved); Swarm every node. This default
    /// knows nothing ([`Capacity::unknown`]: bounds nothing).
    async fn capacity(&self) -> Result<Capacity, SandboxError> {
        Ok(Capacity::unknown())
    }
}

/// A live agent sandbox taken over from a dead owner ([`Backend::adopt`]).
#[derive(Debug)]
pub struct Adopted {
    /// The trial its labels name.
    pub trial_id: String,
    pub sandbox: Box<dyn Sandbox>,
    /// Its internal network (its `allowed_endpoint` is unknown: `None`).
    pub network: Option<NetworkHandle>,
}

/// What [`Backend::adopt`] found.
#[derive(Debug, Default)]
pub struct Adoption {
    pub agents: Vec<Adopted>,
    /// Objects of the run removed (not adoptable).
    pub removed: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(code: Option<i64>, timed_out: bool, oom: bool, truncated: bool) -> String {
        ExecOutcome {
            exit_code: code,
            stdout: Vec::new(),
            stderr: Vec::new(),
            timed_out,
            oom_killed: oom,
            truncated,
            duration: Duration::ZERO,
        }
        .ended()
    }

    #[test]
    fn how_an_exec_ended_reads_as_words() {
        assert_eq!(ended(Some(2), false, false, false), "exit 2");
        assert_eq!(ended(None, true, false, false), "timed out");
        assert_eq!(ended(None, false, true, false), "OOM-killed");
        assert_eq!(ended(None, false, false, false), "killed (no exit code)");
        assert_eq!(
            ended(Some(0), false, false, true),
            "exit 0, output truncated"
        );
        let exit = child::ChildExit {
            code: None,
            signal: Some(9),
        };
        assert_eq!(exit.to_string(), "killed by signal 9");
        let exit = child::ChildExit {
            code: Some(0),
            signal: None,
        };
        assert_eq!(exit.to_string(), "exit 0");
    }
}
