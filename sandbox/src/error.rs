use std::path::PathBuf;

/// Infrastructure failures of a sandbox. An agent's failure (non-zero exit, timeout, OOM) is
/// reported in [`crate::ExecOutcome`], never here.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "the Docker daemon is unreachable ({hint}); start it, or point DOCKER_HOST at a running one"
    )]
    DaemonUnreachable {
        hint: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(
        "image `{0}` does not exist locally and cannot be pulled (no registry); build it with `green-agent images build` or name an image the engine has"
    )]
    ImageMissing(String),
    #[error("invalid limits: {0}")]
    InvalidLimits(String),
    /// A sandbox spec, exec request or argument that cannot work (say which and why).
    #[error("invalid sandbox request: {0}")]
    InvalidSpec(String),
    /// An internal network could not be set up or fenced.
    #[error("network setup failed: {0}")]
    Firewall(String),
    /// The host cannot reach a [`crate::NetworkPolicy::Loopback`] sandbox's port (its network
    /// namespace could not be opened, or the forwarder could not listen).
    #[error("cannot reach the loopback of sandbox `{sandbox}` from the host: {detail}")]
    Loopback { sandbox: String, detail: String },
    /// Every subnet of the platform's address pool is taken.
    #[error(
        "no free subnet left for a trial network: the pool {pool} ({size} subnets) has {ours} in use by this process and {foreign} overlapping other networks on the engine; remove stale networks (`green-agent reap`), lower the concurrency, or configure a larger or different subnet pool"
    )]
    NetworkPoolExhausted {
        pool: String,
        size: u32,
        ours: usize,
        foreign: usize,
    },
    /// The engine refused to create a network; `docker` is the engine's own message.
    #[error("Docker refused to create network `{name}` (subnet {subnet}): {docker}")]
    NetworkCreate {
        name: String,
        subnet: String,
        docker: String,
    },
    /// The swarm backend needs the engine to be an active Swarm manager.
    #[error(
        "the Docker engine cannot run Swarm services: {detail}; make it a Swarm manager (`docker swarm init`, one node is enough) or use `--backend docker`"
    )]
    SwarmUnavailable { detail: String },
    /// Swarm could not schedule or start a service's task (no node with the resources or
    /// matching the constraints, a task that failed to start, or one still waiting at the
    /// deadline).
    #[error("Swarm could not run service `{service}`: {detail}")]
    Scheduling { service: String, detail: String },
    /// A Swarm service's task was taken off its node by the orchestrator: the node was
    /// drained, went down or was removed. What ran there is gone (an infrastructure failure).
    #[error(
        "service `{service}` lost its task: node {node} ({node_id}) left: {why}; what ran there is gone"
    )]
    NodeLost {
        service: String,
        /// The node's hostname (its id when unknown).
        node: String,
        node_id: String,
        why: String,
    },
    /// The sandbox runner of a swarm sandbox (its HTTP transport) could not be reached or
    /// answered an error.
    #[error("the sandbox runner of `{service}` failed `{operation}`: {detail}")]
    Runner {
        service: String,
        operation: &'static str,
        detail: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("path `{path}` is outside the sandbox (no `..`, no symlink leaving the copied tree)")]
    PathOutsideSandbox { path: String },
    #[error("`{path}` holds at least {size} bytes, over the copy-out cap of {cap} bytes")]
    OverSizeCap { path: String, size: u64, cap: u64 },
    #[error("`{path}` does not exist in the sandbox")]
    NotFound { path: String },
    #[error("I/O error on {path}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Docker API call `{operation}` failed")]
    Docker {
        operation: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("image build `{image}` failed at step `{step}`: {detail}")]
    ImageBuild {
        image: String,
        step: String,
        detail: String,
    },
    /// The Python packages of a per-task image cannot be had or installed
    /// ([`crate::images::derived`]); `detail` names the package and the fix.
    #[error("pip_install: {detail}")]
    PipPackages { detail: String },
    /// An image could not be copied to another engine ([`crate::distribute`]).
    #[error("copying image `{image}` to {to} failed: {detail}")]
    ImageTransfer {
        image: String,
        to: String,
        detail: String,
    },
    /// Another process holds the owner lock; `holder` is what it wrote into the lock file.
    #[error("{path} is locked by another process ({holder})")]
    LockHeld { path: PathBuf, holder: String },
    #[error("could not spawn `{program}`")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
}
