//! The Kubernetes objects of a sandbox, built from a [`SandboxSpec`] without any I/O: the
//! platform's labels (label-safe values, full values in annotations), the Pod, and the
//! NetworkPolicies (a trial network, a sandbox without network).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, Pod, PodSecurityContext, PodSpec, ResourceRequirements,
    SeccompProfile, SecurityContext,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use sha2::{Digest, Sha256};

use super::{KubeError, MAIN_CONTAINER, NETWORK_LABEL, OWNER_HOST};
use crate::{Owner, SandboxError, SandboxSpec, labels};

/// Longest Kubernetes label value and DNS label (object names used as label values).
pub(crate) const MAX_LABEL: usize = 63;

/// Whether `v` is a valid label value: at most 63 characters of `[A-Za-z0-9_.-]`, beginning
/// and ending with an alphanumeric (or empty).
pub(crate) fn valid_label_value(v: &str) -> bool {
    v.is_empty()
        || (v.len() <= MAX_LABEL
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && v.as_bytes()[0].is_ascii_alphanumeric()
            && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric())
}

/// `v` as a label value: itself when valid, else `sha-` and 32 hex digits of its sha256 (a
/// trial id is 64 hex digits, one too many). The full value goes into an annotation.
pub(crate) fn label_value(v: &str) -> String {
    if valid_label_value(v) {
        v.to_string()
    } else {
        let digest = hex::encode(Sha256::digest(v.as_bytes()));
        format!("sha-{}", &digest[..32])
    }
}

/// The metadata of an object owned by `owner` and this process: the docker backend's labels
/// ([`crate::docker::object_labels`]) with label-safe values, the run and trial ids in full
/// and the owner lock's path (never a valid label value) as annotations, plus this host's
/// name (pids mean nothing on another machine; see `reap`).
pub(crate) fn object_meta(name: &str, owner: &Owner) -> ObjectMeta {
    let mut labels_out = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    for (key, value) in crate::docker::object_labels(owner) {
        match key.as_str() {
            labels::OWNER_LOCK => {
                annotations.insert(key, value);
            }
            labels::RUN | labels::TRIAL => {
                labels_out.insert(key.clone(), label_value(&value));
                annotations.insert(key, value);
            }
            _ => {
                labels_out.insert(key, label_value(&value));
            }
        }
    }
    annotations.insert(OWNER_HOST.to_string(), super::host_name());
    ObjectMeta {
        name: Some(name.to_string()),
        labels: Some(labels_out),
        annotations: Some(annotations),
        ..Default::default()
    }
}

/// An object's labels with the annotations' full values over them: what the docker reaper's
/// `doomed` reads.
pub(crate) fn owner_view(meta: &ObjectMeta) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = meta
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    out.extend(meta.annotations.clone().unwrap_or_default());
    out
}

/// A DNS label from a platform object name (`rb-<run>-<role>-<unique>`): lowercase, `-` for
/// anything else, at most 63 characters with the unique tail kept.
pub(crate) fn dns_name(name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let cut = if clean.len() <= MAX_LABEL {
        clean
    } else {
        let tail = &clean[clean.len() - 32..];
        format!("{}{tail}", &clean[..MAX_LABEL - 32])
    };
    cut.trim_matches('-').to_string()
}

/// `uid[:gid]` of the sandbox user (Kubernetes takes numbers only).
pub(crate) fn parse_user(user: &str) -> Result<(i64, i64), SandboxError> {
    let bad = || {
        SandboxError::InvalidSpec(format!(
            "user `{user}`: the kube backend needs a numeric `uid` or `uid:gid` (a pod's securityContext cannot name a user)"
        ))
    };
    let (uid, gid) = match user.split_once(':') {
        Some((u, g)) => (u, g),
        None => (user, user),
    };
    Ok((
        uid.parse().map_err(|_| bad())?,
        gid.parse().map_err(|_| bad())?,
    ))
}

/// The settings of the backend that shape a Pod.
#[derive(Debug, Clone)]
pub(crate) struct PodSettings {
    /// `activeDeadlineSeconds`: the backstop that ends a forgotten pod.
    pub active_deadline_secs: i64,
}

/// The Pod of a sandbox: one container `main`, `restartPolicy: Never`, CPU and memory limits
/// (memory requested, CPU not),
/// uid/gid from the spec (default 1000), no privilege escalation, every capability dropped,
/// the runtime's seccomp profile, no service account token, no service links.
pub(crate) fn pod(
    spec: &SandboxSpec,
    name: &str,
    network: &str,
    settings: &PodSettings,
) -> Result<Pod, SandboxError> {
    if !spec.mounts.is_empty() {
        return Err(KubeError::NotBuilt {
            operation: "read-only host mounts",
            detail: "a pod would need a hostPath volume, which the design refuses (the adapter and staged CLIs must come from an image); no mount is made",
        }
        .into());
    }
    let user = spec.user.as_deref().unwrap_or(crate::docker::DEFAULT_USER);
    let (uid, gid) = parse_user(user)?;
    let command = spec
        .command
        .clone()
        .unwrap_or_else(|| vec!["sleep".to_string(), "infinity".to_string()]);
    let millicpus = (spec.limits.cpus * 1000.0).round() as i64;
    if millicpus <= 0 || spec.limits.memory_bytes == 0 {
        return Err(SandboxError::InvalidLimits(format!(
            "cpus {} and memory {} bytes must be positive",
            spec.limits.cpus, spec.limits.memory_bytes
        )));
    }
    let memory = Quantity(spec.limits.memory_bytes.to_string());
    let limits = BTreeMap::from([
        ("cpu".to_string(), Quantity(format!("{millicpus}m"))),
        ("memory".to_string(), memory.clone()),
    ]);
    // As on the swarm backend: memory reserved, CPUs only limited (a trial's grading pod
    // waits idle beside its agent; reserved CPUs of idle graders would keep agents from being
    // scheduled). An explicit zero, since a request left out defaults to the limit.
    let requests = BTreeMap::from([
        ("cpu".to_string(), Quantity("0".to_string())),
        ("memory".to_string(), memory),
    ]);
    let mut meta = object_meta(name, &spec.owner);
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(NETWORK_LABEL.to_string(), network.to_string());
    Ok(Pod {
        metadata: meta,
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_string()),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            // The pause process is PID 1 and reaps zombies: what `init: true` does for the
            // docker backend.
            share_process_namespace: Some(true),
            active_deadline_seconds: Some(settings.active_deadline_secs),
            security_context: Some(PodSecurityContext {
                run_as_user: Some(uid),
                run_as_group: Some(gid),
                run_as_non_root: Some(uid != 0),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_string(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            containers: vec![Container {
                name: MAIN_CONTAINER.to_string(),
                image: Some(spec.image.clone()),
                image_pull_policy: Some("IfNotPresent".to_string()),
                command: Some(command),
                working_dir: Some(spec.workdir.clone()),
                env: Some(
                    spec.env
                        .iter()
                        .map(|(k, v)| EnvVar {
                            name: k.clone(),
                            value: Some(v.clone()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                resources: Some(ResourceRequirements {
                    limits: Some(limits),
                    requests: Some(requests),
                    ..Default::default()
                }),
                security_context: Some(SecurityContext {
                    allow_privilege_escalation: Some(false),
                    privileged: Some(false),
                    run_as_user: Some(uid),
                    run_as_group: Some(gid),
                    run_as_non_root: Some(uid != 0),
                    capabilities: Some(Capabilities {
                        drop: Some(vec!["ALL".to_string()]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    })
}

/// Who may talk to a trial's pods and whom they may reach.
#[derive(Debug, Clone)]
pub(crate) struct Peers {
    /// Labels of the green agent's pods (the only ingress), on `ingress_ports`.
    pub green_agent: BTreeMap<String, String>,
    pub ingress_ports: Vec<u16>,
    /// Labels of the model proxy's pods and the port they listen on (the only egress).
    pub model_proxy: BTreeMap<String, String>,
    pub model_proxy_port: u16,
}

fn tcp(port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(i32::from(port))),
        protocol: Some("TCP".to_string()),
        ..Default::default()
    }
}

fn pods_labelled(labels: &BTreeMap<String, String>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(labels.clone()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A trial network: selects the pods labelled [`NETWORK_LABEL`]`=name`; ingress only from
/// the green agent's pods on the forwarded ports; egress only to the model proxy's pods on
/// its port, or nowhere when `egress_to_proxy` is false.
pub(crate) fn trial_network(
    name: &str,
    owner: &Owner,
    peers: &Peers,
    egress_to_proxy: bool,
) -> NetworkPolicy {
    let egress = if egress_to_proxy {
        vec![NetworkPolicyEgressRule {
            to: Some(vec![pods_labelled(&peers.model_proxy)]),
            ports: Some(vec![tcp(peers.model_proxy_port)]),
        }]
    } else {
        Vec::new()
    };
    NetworkPolicy {
        metadata: object_meta(name, owner),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    NETWORK_LABEL.to_string(),
                    name.to_string(),
                )])),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".to_string(), "Egress".to_string()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![pods_labelled(&peers.green_agent)]),
                ports: Some(peers.ingress_ports.iter().copied().map(tcp).collect()),
            }]),
            egress: Some(egress),
        }),
    }
}

/// The policy of a sandbox without a network: selects its pod alone, allows nothing in or
/// out (what `NetworkPolicy::None` is on the docker backend).
pub(crate) fn isolation(name: &str, pod_name: &str, owner: &Owner) -> NetworkPolicy {
    NetworkPolicy {
        metadata: object_meta(name, owner),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    NETWORK_LABEL.to_string(),
                    pod_name.to_string(),
                )])),
                ..Default::default()
            }),
            policy_types: Some(vec!["Ingress".to_string(), "Egress".to_string()]),
            ingress: Some(Vec::new()),
            egress: Some(Vec::new()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_kept_when_valid_and_hashed_otherwise() {
        assert_eq!(
            label_value("20261124-132654-a1b2c3"),
            "20261124-132654-a1b2c3"
        );
        let trial = "a".repeat(64);
        let hashed = label_value(&trial);
        assert!(hashed.starts_with("sha-") && hashed.len() == 36, "{hashed}");
        assert!(valid_label_value(&hashed));
        assert_eq!(hashed, label_value(&trial), "stable");
        assert!(!valid_label_value("/tmp/run/owner.lock"));
        assert!(!valid_label_value("-x"));
        assert!(valid_label_value(""));
    }

    #[test]
    fn dns_names_fit_a_label_and_keep_their_tail() {
        assert_eq!(dns_name("rb-Run_1-agent-1a"), "rb-run-1-agent-1a");
        let long = format!("rb-{}-grader-7d85c1bc31b7deadbeef", "r".repeat(40));
        let cut = dns_name(&long);
        assert_eq!(cut.len(), MAX_LABEL);
        assert!(cut.ends_with("-grader-7d85c1bc31b7deadbeef"), "{cut}");
    }

    #[test]
    fn users_must_be_numeric() {
        assert_eq!(parse_user("1000:1000").expect("uid:gid"), (1000, 1000));
        assert_eq!(parse_user("0").expect("uid"), (0, 0));
        let e = parse_user("agent").expect_err("a name");
        assert!(e.to_string().contains("numeric"), "{e}");
    }
}
