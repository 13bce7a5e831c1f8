//! The kube backend against a mock API server (`tower_test::mock`): every request the backend
//! sends is recorded (method, path with query, JSON body) and answered with canned JSON, so
//! these tests assert the exact API exchanges of create, poll and reap. No cluster involved:
//! the backend has never run against a real one.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use sandbox::kube::KubeError;
use sandbox::{
    Backend, CopyIn, ExecRequest, KubeBackend, Limits, NetworkPolicy, Owner, ReadOnlyMount, Role,
    SandboxError, SandboxSpec, labels,
};
use serde_json::{Value, json};
use tower_test::mock;

const NS: &str = "rb-test";
const RUN: &str = "20261124-132654-a1b2c3";
/// A trial id is 64 hex digits: one too many for a label value.
const TRIAL: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// One request the backend sent.
#[derive(Debug, Clone)]
struct Exchange {
    method: String,
    /// Path and query, as sent.
    path: String,
    body: Option<Value>,
}

impl Exchange {
    fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

type Log = Arc<Mutex<Vec<Exchange>>>;

/// A mock API server answering each request with `handler(request) -> (status, body)`; a
/// string body is sent as text (pod logs), anything else as JSON. Returns the client and the
/// log of every exchange.
fn api_server<F>(mut handler: F) -> (Client, Log)
where
    F: FnMut(&Exchange) -> (u16, Value) + Send + 'static,
{
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let log: Log = Arc::default();
    let recorded = log.clone();
    tokio::spawn(async move {
        let mut handle = std::pin::pin!(handle);
        while let Some((request, respond)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request.uri().to_string();
            let bytes = request
                .into_body()
                .collect_bytes()
                .await
                .expect("request body");
            let body = (!bytes.is_empty())
                .then(|| serde_json::from_slice(&bytes).expect("a JSON request body"));
            let exchange = Exchange { method, path, body };
            let (status, reply) = handler(&exchange);
            recorded.lock().expect("log").push(exchange);
            let bytes = match reply {
                Value::String(text) => text.into_bytes(),
                other => serde_json::to_vec(&other).expect("reply"),
            };
            respond.send_response(
                Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(bytes))
                    .expect("response"),
            );
        }
    });
    (Client::new(service, "default"), log)
}

fn lines(log: &Log) -> Vec<String> {
    log.lock()
        .expect("log")
        .iter()
        .map(Exchange::line)
        .collect()
}

fn bodies(log: &Log, method: &str, path_part: &str) -> Vec<Value> {
    log.lock()
        .expect("log")
        .iter()
        .filter(|e| e.method == method && e.path.contains(path_part))
        .filter_map(|e| e.body.clone())
        .collect()
}

fn backend(client: Client) -> KubeBackend {
    KubeBackend::new(client, NS)
        .with_schedule_timeout(Duration::from_secs(5))
        .with_poll_cap(Duration::from_millis(20))
}

fn spec(network: NetworkPolicy) -> SandboxSpec {
    SandboxSpec {
        image: "registry.example/research-bench/python@sha256:feed".to_string(),
        owner: Owner {
            run_id: RUN.to_string(),
            trial_id: Some(TRIAL.to_string()),
            role: Role::Agent,
        },
        env: BTreeMap::from([("RB_MODEL_TOKEN".to_string(), "dummy-token".to_string())]),
        workdir: "/workspace".to_string(),
        user: None,
        limits: Limits {
            cpus: 1.5,
            memory_bytes: 2 * 1024 * 1024 * 1024,
            pids: 512,
        },
        mounts: Vec::new(),
        network,
        command: None,
    }
}

/// The name a POST created (the body's `metadata.name`).
fn name_of(body: &Value) -> String {
    body["metadata"]["name"]
        .as_str()
        .expect("metadata.name")
        .to_string()
}

/// Replaces what differs between test processes (pid, start time, host, generated names) so
/// the object can be snapshotted.
fn normalised(mut object: Value, names: &[(&str, &str)]) -> Value {
    for key in ["labels", "annotations"] {
        if let Some(map) = object["metadata"][key].as_object_mut() {
            for (k, placeholder) in [
                (labels::OWNER_PID, "[pid]"),
                (labels::OWNER_START, "[start]"),
                (labels::OWNER_LOCK, "[lock]"),
                (sandbox::kube::OWNER_HOST, "[host]"),
            ] {
                if let Some(v) = map.get_mut(k) {
                    *v = json!(placeholder);
                }
            }
        }
    }
    let mut text = serde_json::to_string(&object).expect("json");
    for (name, placeholder) in names {
        text = text.replace(name, placeholder);
    }
    serde_json::from_str(&text).expect("json")
}

fn pod_status(phase: &str, extra: Value) -> Value {
    let mut status = json!({"phase": phase});
    if let (Some(s), Some(e)) = (status.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    status
}

fn main_waiting(reason: &str, message: &str) -> Value {
    json!({"containerStatuses": [{
        "name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
        "state": {"waiting": {"reason": reason, "message": message}}
    }]})
}

fn main_running() -> Value {
    json!({"podIP": "10.244.1.7", "containerStatuses": [{
        "name": "main", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
        "state": {"running": {"startedAt": "2026-11-24T13:30:00Z"}}
    }]})
}

fn unschedulable() -> Value {
    json!({"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 Insufficient memory."
    }]})
}

/// A pod object named `name` with `status`.
fn pod_reply(name: &str, status: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
           "status": status})
}

/// The created object, echoed back as the API server does.
fn created(e: &Exchange) -> (u16, Value) {
    (201, e.body.clone().expect("a body to create"))
}

fn not_found() -> (u16, Value) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
               "message": "not found", "reason": "NotFound", "code": 404}),
    )
}

/// The pod name out of `.../pods/<name>[/sub]`.
fn pod_in(path: &str) -> String {
    let rest = path.split("/pods/").nth(1).expect("a pod path");
    rest.split(['/', '?']).next().expect("name").to_string()
}

fn kube_error(e: SandboxError) -> KubeError {
    match e {
        SandboxError::Kube(k) => *k,
        other => panic!("expected a kube error, got {other:?}"),
    }
}

const PODS: &str = "/api/v1/namespaces/rb-test/pods";
const POLICIES: &str = "/apis/networking.k8s.io/v1/namespaces/rb-test/networkpolicies";
const JOBS: &str = "/apis/batch/v1/namespaces/rb-test/jobs";

#[tokio::test]
async fn create_sends_the_trial_policy_and_the_pod_then_polls_pending_to_running() {
    let mut gets = 0;
    let (client, log) = api_server(move |e| match (e.method.as_str(), e.path.as_str()) {
        ("GET", "/api/v1/namespaces/rb-test/services/rb-model-proxy") => (
            200,
            json!({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "rb-model-proxy"},
                   "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 8080}]}}),
        ),
        ("POST", _) => created(e),
        ("GET", p) if p.ends_with("/log?&container=main&limitBytes=4096") => {
            (200, json!("adapter listening on :8700\n"))
        }
        ("GET", p) if p.ends_with("/status") => (
            200,
            pod_reply(&pod_in(p), pod_status("Running", main_running())),
        ),
        ("GET", p) if p.starts_with(PODS) => {
            gets += 1;
            let status = match gets {
                1 => pod_status("Pending", json!({})),
                2 => pod_status("Pending", main_waiting("ContainerCreating", "")),
                _ => pod_status("Running", main_running()),
            };
            (200, pod_reply(&pod_in(p), status))
        }
        ("DELETE", _) => (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        _ => not_found(),
    });
    let backend = backend(client);
    let owner = spec(NetworkPolicy::None).owner;
    let network = backend
        .create_network(&owner, Some(41234))
        .await
        .expect("network");
    assert_eq!(
        network.allowed_endpoint,
        Some("10.96.0.10:8080".parse().expect("addr")),
        "the model proxy Service's ClusterIP and port"
    );
    let sandbox = backend
        .create(spec(NetworkPolicy::Internal(network.clone())))
        .await
        .expect("create");
    assert_eq!(
        sandbox.host_address().await.expect("address"),
        "10.244.1.7".parse::<std::net::IpAddr>().expect("ip")
    );
    assert_eq!(sandbox.main_exit().await.expect("main exit"), None);
    assert_eq!(
        sandbox.logs(4096).await.expect("logs"),
        "adapter listening on :8700\n"
    );
    sandbox.remove().await.expect("remove");
    backend
        .remove_network(&network)
        .await
        .expect("remove network");

    let pod = sandbox.id().to_string();
    let net = network.name.clone();
    assert_eq!(
        lines(&log),
        vec![
            "GET /api/v1/namespaces/rb-test/services/rb-model-proxy".to_string(),
            format!("POST {POLICIES}?"),
            format!("POST {PODS}?"),
            format!("GET {PODS}/{pod}"),
            format!("GET {PODS}/{pod}"),
            format!("GET {PODS}/{pod}"),
            format!("GET {PODS}/{pod}/status"),
            format!("GET {PODS}/{pod}/status"),
            format!("GET {PODS}/{pod}/log?&container=main&limitBytes=4096"),
            format!("DELETE {PODS}/{pod}?"),
            format!("DELETE {POLICIES}/{net}?"),
        ],
        "poll: two Pending answers, then Running"
    );
    let names = [(pod.as_str(), "[pod]"), (net.as_str(), "[network]")];
    let sent_pod = bodies(&log, "POST", PODS).remove(0);
    assert_eq!(
        sent_pod["metadata"]["labels"][sandbox::kube::NETWORK_LABEL],
        json!(net)
    );
    insta::assert_json_snapshot!("agent_pod", normalised(sent_pod, &names));
    let sent_policy = bodies(&log, "POST", POLICIES).remove(0);
    insta::assert_json_snapshot!("trial_network_policy", normalised(sent_policy, &names));
    assert_eq!(
        bodies(&log, "DELETE", PODS),
        vec![json!({"gracePeriodSeconds": 0, "propagationPolicy": "Background"})],
        "remove deletes the pod at once"
    );
}

#[tokio::test]
async fn a_sandbox_without_network_is_fenced_by_its_own_deny_all_policy_first() {
    let mut stopped = false;
    let (client, log) = api_server(move |e| match (e.method.as_str(), e.path.as_str()) {
        ("POST", _) => created(e),
        ("GET", p) => (
            200,
            pod_reply(&pod_in(p), pod_status("Running", main_running())),
        ),
        ("DELETE", p) if p.starts_with(PODS) && stopped => not_found(),
        ("DELETE", p) => {
            stopped |= p.starts_with(PODS);
            (
                200,
                json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
            )
        }
        _ => not_found(),
    });
    let backend = backend(client);
    let mut grader = spec(NetworkPolicy::None);
    grader.owner.role = Role::Grader;
    grader.user = Some("0".to_string());
    grader.command = Some(vec!["python3".into(), "-m".into(), "grader".into()]);
    let sandbox = backend.create(grader).await.expect("create");
    let pod = sandbox.id().to_string();
    let before = lines(&log).len();
    let e = sandbox.host_address().await.expect_err("no network");
    assert!(e.to_string().contains("has no network"), "{e}");
    assert_eq!(lines(&log).len(), before, "answered without the API");
    sandbox.stop(Duration::from_secs(5)).await.expect("stop");
    sandbox
        .remove()
        .await
        .expect("remove: idempotent after stop");

    let policy = format!("{pod}-isolated");
    assert_eq!(
        lines(&log),
        vec![
            format!("POST {POLICIES}?"),
            format!("POST {PODS}?"),
            format!("GET {PODS}/{pod}"),
            format!("DELETE {PODS}/{pod}?"),
            format!("DELETE {PODS}/{pod}?"),
            format!("DELETE {POLICIES}/{policy}?"),
        ],
        "the policy exists before the pod does, and goes with it"
    );
    assert_eq!(
        bodies(&log, "DELETE", PODS),
        vec![
            json!({"gracePeriodSeconds": 5, "propagationPolicy": "Background"}),
            json!({"gracePeriodSeconds": 0, "propagationPolicy": "Background"}),
        ],
        "stop deletes with the grace period (a pod cannot be stopped and kept); remove at once, a 404 is fine"
    );
    let sent_policy = bodies(&log, "POST", POLICIES).remove(0);
    assert_eq!(name_of(&sent_policy), policy);
    let names = [(policy.as_str(), "[policy]"), (pod.as_str(), "[pod]")];
    insta::assert_json_snapshot!("isolation_policy", normalised(sent_policy, &names));
    let sent_pod = bodies(&log, "POST", PODS).remove(0);
    insta::assert_json_snapshot!("grader_pod_as_root", normalised(sent_pod, &names));
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_is_a_typed_error_and_the_pod_is_deleted() {
    let mut gets = 0;
    let (client, log) = api_server(move |e| match (e.method.as_str(), e.path.as_str()) {
        ("POST", _) => created(e),
        ("GET", p) => {
            gets += 1;
            let status = if gets == 1 {
                pod_status("Pending", main_waiting("ContainerCreating", ""))
            } else {
                pod_status(
                    "Pending",
                    main_waiting(
                        "ImagePullBackOff",
                        "Back-off pulling image \"registry.example/research-bench/python@sha256:feed\"",
                    ),
                )
            };
            (200, pod_reply(&pod_in(p), status))
        }
        ("DELETE", _) => (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        _ => not_found(),
    });
    let backend = backend(client);
    let e = backend
        .create(spec(NetworkPolicy::None))
        .await
        .expect_err("the image cannot be pulled");
    let text = e.to_string();
    match kube_error(e) {
        KubeError::ImagePull {
            pod, image, reason, ..
        } => {
            assert!(pod.starts_with("rb-20261124-132654-a1b2c3-agent-"), "{pod}");
            assert_eq!(image, "registry.example/research-bench/python@sha256:feed");
            assert_eq!(reason, "ImagePullBackOff");
        }
        other => panic!("expected ImagePull, got {other:?}"),
    }
    assert!(text.contains("push the image to a registry"), "{text}");
    let sent = lines(&log);
    let pod = pod_in(&sent[2]);
    assert_eq!(
        sent,
        vec![
            format!("POST {POLICIES}?"),
            format!("POST {PODS}?"),
            format!("GET {PODS}/{pod}"),
            format!("GET {PODS}/{pod}"),
            format!("DELETE {PODS}/{pod}?"),
            format!("DELETE {POLICIES}/{pod}-isolated?"),
        ],
        "no waiting for a back-off to end: the pod and its policy are deleted at once"
    );
}

#[tokio::test]
async fn an_unschedulable_pod_waits_until_the_schedule_timeout_then_names_the_fix() {
    let (client, log) = api_server(|e| match (e.method.as_str(), e.path.as_str()) {
        ("POST", _) => created(e),
        ("GET", p) => (
            200,
            pod_reply(&pod_in(p), pod_status("Pending", unschedulable())),
        ),
        ("DELETE", _) => (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        _ => not_found(),
    });
    let backend = backend(client).with_schedule_timeout(Duration::from_millis(300));
    let e = backend
        .create(spec(NetworkPolicy::None))
        .await
        .expect_err("never scheduled");
    let text = e.to_string();
    match kube_error(e) {
        KubeError::Unschedulable { message, .. } => {
            assert_eq!(
                message,
                "Unschedulable: 0/3 nodes are available: 3 Insufficient memory."
            );
        }
        other => panic!("expected Unschedulable, got {other:?}"),
    }
    assert!(
        text.contains("lower the trial's CPU or memory limits"),
        "{text}"
    );
    let sent = lines(&log);
    let polls = sent.iter().filter(|l| l.starts_with("GET ")).count();
    assert!(polls >= 3, "it kept polling until the deadline: {sent:#?}");
    assert!(
        sent[sent.len() - 2].starts_with(&format!("DELETE {PODS}/")),
        "{sent:#?}"
    );
    assert!(
        sent[sent.len() - 1].starts_with(&format!("DELETE {POLICIES}/")),
        "{sent:#?}"
    );
}

#[tokio::test]
async fn an_unschedulable_pod_that_finds_room_in_time_starts() {
    let mut gets = 0;
    let (client, log) = api_server(move |e| match (e.method.as_str(), e.path.as_str()) {
        ("POST", _) => created(e),
        ("GET", p) => {
            gets += 1;
            let status = if gets < 3 {
                pod_status("Pending", unschedulable())
            } else {
                pod_status("Running", main_running())
            };
            (200, pod_reply(&pod_in(p), status))
        }
        _ => not_found(),
    });
    let backend = backend(client);
    backend
        .create(spec(NetworkPolicy::None))
        .await
        .expect("scheduled on the third look");
    let gets = lines(&log).iter().filter(|l| l.starts_with("GET ")).count();
    assert_eq!(gets, 3);
    assert!(
        !lines(&log).iter().any(|l| l.starts_with("DELETE")),
        "nothing deleted"
    );
}

/// `(pid, start time)` of this process (`/proc/self/stat` field 22).
fn me() -> (String, String) {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let after_comm = stat.rsplit_once(')').expect("comm").1;
    let start = after_comm
        .split_whitespace()
        .nth(19)
        .expect("field 22")
        .to_string();
    (std::process::id().to_string(), start)
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("hostname")
        .trim()
        .to_string()
}

/// A listed object: `labels` (the platform's, label-safe) and the owner's host.
fn object(kind: &str, name: &str, labels: &[(&str, &str)], host: &str) -> Value {
    let labels: HashMap<&str, &str> = labels.iter().copied().collect();
    let api_version = match kind {
        "Job" => "batch/v1",
        "NetworkPolicy" => "networking.k8s.io/v1",
        _ => "v1",
    };
    json!({"apiVersion": api_version, "kind": kind,
           "metadata": {"name": name, "namespace": NS, "labels": labels,
                        "annotations": {sandbox::kube::OWNER_HOST: host}}})
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": format!("{kind}List"), "metadata": {}, "items": items})
}

/// Four objects of each kind: one of a dead owner of `dead-run` (reaped), one of a live owner
/// (this process), one whose owner is on another host, one without the managed label.
fn listed(kind: &str, prefix: &str) -> Value {
    let (pid, start) = me();
    let here = host();
    let dead = [
        (labels::MANAGED, "true"),
        (labels::RUN, "dead-run"),
        (labels::ROLE, "grader"),
        (labels::OWNER_PID, "4294967294"),
        (labels::OWNER_START, "1"),
    ];
    let live = [
        (labels::MANAGED, "true"),
        (labels::RUN, "live-run"),
        (labels::ROLE, "agent"),
        (labels::OWNER_PID, pid.as_str()),
        (labels::OWNER_START, start.as_str()),
    ];
    let unmanaged = [(labels::RUN, "dead-run"), (labels::OWNER_PID, "4294967294")];
    list(
        kind,
        vec![
            object(kind, &format!("{prefix}-dead"), &dead, &here),
            object(kind, &format!("{prefix}-live"), &live, &here),
            object(kind, &format!("{prefix}-elsewhere"), &dead, "another-host"),
            object(kind, &format!("{prefix}-unmanaged"), &unmanaged, &here),
        ],
    )
}

fn reaping_server() -> (Client, Log) {
    api_server(|e| match (e.method.as_str(), e.path.as_str()) {
        ("GET", p) if p.starts_with(JOBS) => (200, listed("Job", "job")),
        ("GET", p) if p.starts_with(PODS) => (200, listed("Pod", "pod")),
        ("GET", p) if p.starts_with(POLICIES) => (200, listed("NetworkPolicy", "np")),
        ("DELETE", _) => (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        ),
        _ => not_found(),
    })
}

#[tokio::test]
async fn reap_deletes_exactly_the_dead_owners_objects_and_nothing_else() {
    let (client, log) = reaping_server();
    let removed = backend(client).reap(None).await.expect("reap");
    assert_eq!(removed, 3);
    let selector = "labelSelector=org.research-bench.managed%3Dtrue";
    assert_eq!(
        lines(&log),
        vec![
            format!("GET {JOBS}?&{selector}"),
            format!("DELETE {JOBS}/job-dead?"),
            format!("GET {PODS}?&{selector}"),
            format!("DELETE {PODS}/pod-dead?"),
            format!("GET {POLICIES}?&{selector}"),
            format!("DELETE {POLICIES}/np-dead?"),
        ],
        "only the dead owner's job, pod and policy: not a live owner's, not another host's, not an unmanaged object's"
    );
    assert_eq!(
        bodies(&log, "DELETE", ""),
        vec![
            json!({"propagationPolicy": "Background"}),
            json!({"gracePeriodSeconds": 0, "propagationPolicy": "Background"}),
            json!({}),
        ],
        "a job takes its pods with it; a pod goes at once"
    );
}

#[tokio::test]
async fn reaping_one_run_deletes_all_of_its_objects_whoever_owns_them() {
    let (client, log) = reaping_server();
    let removed = backend(client).reap(Some("dead-run")).await.expect("reap");
    assert_eq!(
        removed, 6,
        "the dead owner's and another host's, of each kind"
    );
    let selector =
        "labelSelector=org.research-bench.managed%3Dtrue%2Corg.research-bench.run%3Ddead-run";
    let sent = lines(&log);
    assert_eq!(sent[0], format!("GET {JOBS}?&{selector}"));
    let deleted: Vec<&str> = sent
        .iter()
        .filter(|l| l.starts_with("DELETE"))
        .map(|l| l.rsplit('/').next().expect("name").trim_end_matches('?'))
        .collect();
    assert_eq!(
        deleted,
        vec![
            "job-dead",
            "job-elsewhere",
            "pod-dead",
            "pod-elsewhere",
            "np-dead",
            "np-elsewhere"
        ],
        "never the live run's objects (another run) nor unmanaged ones"
    );

    let (client, log) = reaping_server();
    let adoption = backend(client).adopt("dead-run").await.expect("adopt");
    assert!(adoption.agents.is_empty(), "pods are not adopted yet");
    assert_eq!(adoption.removed, 6, "the run's objects are removed instead");
    assert_eq!(lines(&log)[0], format!("GET {JOBS}?&{selector}"));
}

#[tokio::test]
async fn exec_copies_and_mounts_are_typed_not_built_errors_that_touch_nothing() {
    let (client, log) = api_server(|e| match (e.method.as_str(), e.path.as_str()) {
        ("POST", _) => created(e),
        ("GET", p) => (
            200,
            pod_reply(&pod_in(p), pod_status("Running", main_running())),
        ),
        _ => not_found(),
    });
    let backend = backend(client);
    let dir = tempfile::tempdir().expect("tempdir");

    let e = backend
        .create_with(
            spec(NetworkPolicy::None),
            &[CopyIn::new(dir.path(), "/workspace")],
        )
        .await
        .expect_err("files need pods/exec");
    assert!(matches!(kube_error(e), KubeError::NotBuilt { .. }));
    let mut mounted = spec(NetworkPolicy::None);
    mounted.mounts.push(ReadOnlyMount {
        host_path: dir.path().to_path_buf(),
        sandbox_path: "/opt/platform".to_string(),
    });
    let e = backend.create(mounted).await.expect_err("no hostPath");
    assert!(e.to_string().contains("hostPath"), "{e}");
    let e = backend.image_exists("any").await.expect_err("not knowable");
    assert!(matches!(kube_error(e), KubeError::NotBuilt { .. }));
    assert!(lines(&log).is_empty(), "refused before any API call");

    let sandbox = backend
        .create(spec(NetworkPolicy::None))
        .await
        .expect("create");
    let before = lines(&log).len();
    let e = sandbox
        .exec(ExecRequest::new(["true"]))
        .await
        .expect_err("exec");
    let text = e.to_string();
    match kube_error(e) {
        KubeError::NotBuilt { operation, .. } => assert_eq!(operation, "exec"),
        other => panic!("expected NotBuilt, got {other:?}"),
    }
    assert!(text.contains("pods/exec"), "{text}");
    let e = sandbox
        .copy_in(dir.path(), "/workspace")
        .await
        .expect_err("copy in");
    assert!(matches!(
        kube_error(e),
        KubeError::NotBuilt {
            operation: "copy_in",
            ..
        }
    ));
    let e = sandbox
        .copy_in_many(&[CopyIn::new(dir.path(), "/workspace")])
        .await
        .expect_err("copy in many");
    assert!(matches!(kube_error(e), KubeError::NotBuilt { .. }));
    let e = sandbox
        .copy_out("/workspace", &dir.path().join("out"), 1024)
        .await
        .expect_err("copy out");
    assert!(matches!(
        kube_error(e),
        KubeError::NotBuilt {
            operation: "copy_out",
            ..
        }
    ));
    assert_eq!(
        lines(&log).len(),
        before,
        "no API call for what is not built"
    );
}
