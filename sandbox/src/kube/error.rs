//! What can go wrong with the kube backend, each with what to do about it.

/// A failure of the kube backend ([`crate::SandboxError::Kube`]).
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// No client could be built from the kubeconfig or the in-cluster environment.
    #[error(
        "no Kubernetes client: {detail}; set KUBECONFIG (or run inside the cluster with a ServiceAccount), and note this build has no TLS stack (see docs/kubernetes.md)"
    )]
    Config { detail: String },
    /// The API server refused a call or could not be reached.
    #[error("Kubernetes API call `{operation}` failed")]
    Api {
        operation: &'static str,
        #[source]
        source: Box<::kube::Error>,
    },
    /// The pod's image cannot be pulled (`ErrImagePull`, `ImagePullBackOff`,
    /// `InvalidImageName`, `ErrImageNeverPull`): the pod was deleted at once.
    #[error(
        "pod `{pod}` cannot pull image `{image}` ({reason}: {message}); push the image to a registry every node can reach (or preload it on each node) and name it by digest: the images `green-agent images build` makes exist only in the local Docker engine"
    )]
    ImagePull {
        pod: String,
        image: String,
        reason: String,
        message: String,
    },
    /// The scheduler found no node for the pod within the schedule timeout.
    #[error(
        "pod `{pod}` could not be scheduled within {waited_secs} s: {message}; lower the trial's CPU or memory limits, lower the concurrency, or add nodes (check taints and node selectors too)"
    )]
    Unschedulable {
        pod: String,
        waited_secs: u64,
        message: String,
    },
    /// The pod failed before its main process ran (a bad user, a missing config, an eviction).
    #[error("pod `{pod}` failed to start: {detail}")]
    StartFailed { pod: String, detail: String },
    /// The pod was neither running nor finished at the schedule timeout, for no reason the
    /// API named.
    #[error(
        "pod `{pod}` was not running after {waited_secs} s (last seen: {last}); raise the schedule timeout or look at `kubectl describe pod {pod}`"
    )]
    StartTimeout {
        pod: String,
        waited_secs: u64,
        last: String,
    },
    /// A part of the sandbox contract this skeleton does not implement.
    #[error("`{operation}` is not built for the kube backend yet: {detail}")]
    NotBuilt {
        operation: &'static str,
        detail: &'static str,
    },
}

impl KubeError {
    pub(crate) fn api(operation: &'static str, source: ::kube::Error) -> crate::SandboxError {
        KubeError::Api {
            operation,
            source: Box::new(source),
        }
        .into()
    }
}

impl From<KubeError> for crate::SandboxError {
    fn from(e: KubeError) -> Self {
        crate::SandboxError::Kube(Box::new(e))
    }
}

/// Whether a kube error is the API server's 404.
pub(crate) fn is_not_found(e: &::kube::Error) -> bool {
    matches!(e, ::kube::Error::Api(status) if status.code == 404)
}
