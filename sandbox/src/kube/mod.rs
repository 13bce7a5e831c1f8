//! The `kube` backend: **a skeleton, never run against a real cluster.** Sandboxes as bare
//! Pods in one namespace, trial networks as NetworkPolicies, through kube-rs (`kube` with the
//! `client` feature only: no TLS stack, no `runtime`, no `ws`). Tested only against a mock API
//! server (`tower_test::mock`, `sandbox/tests/kube_mock.rs`); docs/kubernetes.md maps each
//! step to the calls below.
//!
//! - **create** (`pod::create`): a Pod (`restartPolicy: Never`, limits = requests, uid/gid
//!   1000 by default, `allowPrivilegeEscalation: false`, every capability dropped,
//!   `RuntimeDefault` seccomp, no service-account token, no service links, an
//!   `activeDeadlineSeconds` backstop) carrying the platform's [`crate::labels`] (label-safe
//!   values, full run/trial ids and the owner lock in annotations); a sandbox without a
//!   network also gets a deny-all NetworkPolicy of its own. Then **poll**: GET the pod with a
//!   backoff until it is `Running`, `Succeeded` or `Failed`; an image that cannot be pulled or
//!   a pod that fails before it starts ends the wait at once, a pod the scheduler cannot place
//!   waits up to the schedule timeout; each is a typed [`KubeError`] naming the fix, and the
//!   pod is deleted.
//! - **networks** (`network`): a NetworkPolicy per trial selecting its pods by
//!   [`NETWORK_LABEL`]: ingress only from the green agent's pods on 8700, egress only to the
//!   model proxy's pods on its port; the proxy's Service address is the network's allowed
//!   endpoint.
//! - **reap** (`reap`): lists Jobs, Pods and NetworkPolicies carrying the platform's labels and
//!   deletes those the docker backend's reaper would remove (owner dead, or all of one run's);
//!   objects created on another host are left alone (a pid is only meaningful on its host; the
//!   Lease-based liveness of the design is not built).
//! - **Not built** ([`KubeError::NotBuilt`]): exec and every file copy (they need the
//!   `pods/exec` websocket API, kube's `ws` feature), read-only host mounts (a hostPath,
//!   refused by design), image presence checks, adoption of a dead owner's pods (the run's
//!   objects are removed instead, as the swarm backend does). The backend is not selectable
//!   from the green agent's command line.

mod error;
mod network;
mod objects;
mod pod;
mod reap;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use ::kube::Client;
use async_trait::async_trait;

pub use error::KubeError;

use crate::{
    Backend, CopiedOut, CopyIn, EscapingLinks, ExecOutcome, ExecRequest, NetworkHandle, Owner,
    Sandbox, SandboxError, SandboxSpec,
};

/// The label that ties a pod to the NetworkPolicy selecting it (the trial network's name, or
/// the pod's own name for a sandbox without network).
pub const NETWORK_LABEL: &str = "org.research-bench.network";

/// Annotation: the host name of the process that created the object (its pid label means
/// nothing elsewhere).
pub const OWNER_HOST: &str = "org.research-bench.owner-host";

/// The name of a sandbox pod's one container.
pub const MAIN_CONTAINER: &str = "main";

/// Default namespace of the platform's objects.
pub const DEFAULT_NAMESPACE: &str = "research-bench";

/// Ports of a trial's pods the green agent's pods may connect to (the adapter's A2A port).
pub const DEFAULT_INGRESS_PORTS: &[u16] = &[8700];

/// How long a pod may take to be scheduled and started.
pub const DEFAULT_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(600);

/// The `activeDeadlineSeconds` of every pod: a forgotten pod ends after a day.
pub const DEFAULT_ACTIVE_DEADLINE: Duration = Duration::from_secs(24 * 3600);

/// Where the model proxy runs in the cluster (a Deployment + Service created once per
/// installation, outside this backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelProxy {
    /// The Service agents dial (its ClusterIP becomes the network's allowed endpoint).
    pub service: String,
    /// The labels of the proxy's pods (the NetworkPolicy's egress peer).
    pub pod_labels: BTreeMap<String, String>,
    /// The port the proxy's pods listen on (what the NetworkPolicy admits).
    pub pod_port: u16,
}

impl Default for ModelProxy {
    fn default() -> Self {
        Self {
            service: "rb-model-proxy".to_string(),
            pod_labels: BTreeMap::from([("app".to_string(), "rb-model-proxy".to_string())]),
            pod_port: 8080,
        }
    }
}

/// The kube backend. Cheap to clone (the client is shared).
#[derive(Clone)]
pub struct KubeBackend {
    client: Client,
    namespace: String,
    model_proxy: ModelProxy,
    green_agent_labels: BTreeMap<String, String>,
    forwarded_ports: Vec<u16>,
    schedule_timeout: Duration,
    poll_cap: Duration,
    active_deadline: Duration,
}

impl std::fmt::Debug for KubeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeBackend")
            .field("namespace", &self.namespace)
            .field("model_proxy", &self.model_proxy)
            .field("schedule_timeout", &self.schedule_timeout)
            .finish_non_exhaustive()
    }
}

impl KubeBackend {
    /// A backend over `client` (any tower service: a real API server, or a mock in tests),
    /// keeping its objects in `namespace`.
    pub fn new(client: Client, namespace: impl Into<String>) -> Self {
        Self {
            client,
            namespace: namespace.into(),
            model_proxy: ModelProxy::default(),
            green_agent_labels: BTreeMap::from([("app".to_string(), "rb-green-agent".to_string())]),
            forwarded_ports: DEFAULT_INGRESS_PORTS.to_vec(),
            schedule_timeout: DEFAULT_SCHEDULE_TIMEOUT,
            poll_cap: Duration::from_secs(1),
            active_deadline: DEFAULT_ACTIVE_DEADLINE,
        }
    }

    /// A client from `KUBECONFIG` / `~/.kube/config` or the in-cluster ServiceAccount
    /// (`kube::Client::try_default`). Never tried against a real cluster; this build has no
    /// TLS stack, so only a plain-HTTP API server (e.g. `kubectl proxy`) would answer.
    pub async fn connect(namespace: impl Into<String>) -> Result<Self, SandboxError> {
        let client = Client::try_default().await.map_err(|e| KubeError::Config {
            detail: e.to_string(),
        })?;
        Ok(Self::new(client, namespace))
    }

    /// Where the model proxy runs (default: Service `rb-model-proxy`, pods `app=rb-model-proxy`
    /// on 8080).
    pub fn with_model_proxy(mut self, proxy: ModelProxy) -> Self {
        self.model_proxy = proxy;
        self
    }

    /// The labels of the green agent's pods, the only ones admitted to a trial's pods
    /// (default `app=rb-green-agent`).
    pub fn with_green_agent_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.green_agent_labels = labels;
        self
    }

    /// How long a pod may stay unscheduled or starting before `create` fails.
    pub fn with_schedule_timeout(mut self, timeout: Duration) -> Self {
        self.schedule_timeout = timeout;
        self
    }

    /// The longest pause between two polls of a starting pod (default 1 s; the first is 50 ms).
    pub fn with_poll_cap(mut self, cap: Duration) -> Self {
        self.poll_cap = cap;
        self
    }

    /// The namespace of every object.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn peers(&self) -> objects::Peers {
        objects::Peers {
            green_agent: self.green_agent_labels.clone(),
            ingress_ports: self.forwarded_ports.clone(),
            model_proxy: self.model_proxy.pod_labels.clone(),
            model_proxy_port: self.model_proxy.pod_port,
        }
    }

    fn pod_settings(&self) -> objects::PodSettings {
        objects::PodSettings {
            active_deadline_secs: i64::try_from(self.active_deadline.as_secs()).unwrap_or(i64::MAX),
        }
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`), read once.
pub(crate) fn host_name() -> String {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
    .clone()
}

fn not_built(operation: &'static str) -> SandboxError {
    KubeError::NotBuilt {
        operation,
        detail: "it needs the pods/exec websocket API (kube-rs's `ws` feature, `Api::<Pod>::exec`), which this skeleton does not compile in; use `--backend docker` or `--backend swarm`",
    }
    .into()
}

#[async_trait]
impl Backend for KubeBackend {
    fn name(&self) -> &'static str {
        "kube"
    }

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        pod::create(self, spec)
            .await
            .map(|s| Box::new(s) as Box<dyn Sandbox>)
    }

    /// Files can only reach a pod through `pods/exec` (not built): refused before anything is
    /// created.
    async fn create_with(
        &self,
        spec: SandboxSpec,
        files: &[CopyIn],
    ) -> Result<Box<dyn Sandbox>, SandboxError> {
        if !files.is_empty() {
            return Err(not_built("copying files into a new pod"));
        }
        self.create(spec).await
    }

    /// `allowed_host_port`: `Some` admits the model proxy (its pods and port from
    /// [`ModelProxy`]; the host port number itself means nothing in a cluster), `None` no
    /// egress at all.
    async fn create_network(
        &self,
        owner: &Owner,
        allowed_host_port: Option<u16>,
    ) -> Result<NetworkHandle, SandboxError> {
        network::create(self, owner, allowed_host_port.is_some()).await
    }

    async fn remove_network(&self, network: &NetworkHandle) -> Result<(), SandboxError> {
        network::remove(self, &network.name).await
    }

    async fn reap(&self, run_id: Option<&str>) -> Result<usize, SandboxError> {
        let mode = if run_id.is_none() {
            crate::docker::reap::Reap::Dead
        } else {
            crate::docker::reap::Reap::All
        };
        reap::reap(self, run_id, mode).await
    }

    /// An image lives in a registry the nodes pull from, which the API server cannot be asked
    /// about: a missing image shows as [`KubeError::ImagePull`] at create.
    async fn image_exists(&self, _image: &str) -> Result<bool, SandboxError> {
        Err(KubeError::NotBuilt {
            operation: "image_exists",
            detail: "the API server cannot tell whether a registry has an image; a missing image fails `create` with ImagePull",
        }
        .into())
    }

    /// Pods are not adopted yet: every object of the run is removed and its running trials
    /// start over (as on the swarm backend).
    async fn adopt(&self, run_id: &str) -> Result<crate::Adoption, SandboxError> {
        let removed = reap::reap(self, Some(run_id), crate::docker::reap::Reap::All).await?;
        Ok(crate::Adoption {
            agents: Vec::new(),
            removed,
        })
    }
}

/// A sandbox pod.
#[derive(Debug)]
pub struct KubeSandbox {
    backend: KubeBackend,
    name: String,
    /// Whether it sits on a trial network (else it has its own deny-all policy).
    networked: bool,
    /// The deny-all NetworkPolicy of a sandbox without network, removed with it.
    isolation_policy: Option<String>,
}

impl KubeSandbox {
    /// The pod's name.
    pub fn pod_name(&self) -> &str {
        &self.name
    }
}

#[async_trait]
impl Sandbox for KubeSandbox {
    /// The pod's name.
    fn id(&self) -> &str {
        &self.name
    }

    /// True by design (a pod behind NetworkPolicies); whether the cluster's CNI enforces
    /// NetworkPolicy is not probed yet (see docs/kubernetes.md).
    fn is_isolated(&self) -> bool {
        true
    }

    async fn copy_in(&self, _host_dir: &Path, _sandbox_dir: &str) -> Result<(), SandboxError> {
        Err(not_built("copy_in"))
    }

    async fn copy_in_many(&self, _items: &[CopyIn]) -> Result<(), SandboxError> {
        Err(not_built("copy_in_many"))
    }

    async fn exec(&self, _request: ExecRequest) -> Result<ExecOutcome, SandboxError> {
        Err(not_built("exec"))
    }

    async fn copy_out_with(
        &self,
        _sandbox_path: &str,
        _host_dest: &Path,
        _max_bytes: u64,
        _links: EscapingLinks,
    ) -> Result<CopiedOut, SandboxError> {
        Err(not_built("copy_out"))
    }

    async fn logs(&self, max_bytes: usize) -> Result<String, SandboxError> {
        pod::logs(&self.backend, &self.name, max_bytes).await
    }

    async fn host_address(&self) -> Result<IpAddr, SandboxError> {
        if !self.networked {
            return Err(SandboxError::InvalidSpec(format!(
                "sandbox {} has no network (NetworkPolicy::None); attach it to an internal network to reach its ports",
                self.name
            )));
        }
        pod::address(&self.backend, &self.name).await
    }

    async fn main_exit(&self) -> Result<Option<i64>, SandboxError> {
        pod::main_exit(&self.backend, &self.name).await
    }

    /// A pod cannot be stopped and kept: this deletes it with `grace` (its outputs must have
    /// been collected before, which needs the HTTP path of issue 19).
    async fn stop(&self, grace: Duration) -> Result<(), SandboxError> {
        pod::delete(&self.backend, &self.name, Some(grace)).await
    }

    async fn remove(&self) -> Result<(), SandboxError> {
        pod::delete(&self.backend, &self.name, Some(Duration::ZERO)).await?;
        if let Some(policy) = &self.isolation_policy {
            network::remove(&self.backend, policy).await?;
        }
        tracing::debug!(pod = %self.name, "removed pod");
        Ok(())
    }
}
