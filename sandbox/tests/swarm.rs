//! The `swarm` backend against the real Docker Engine, made a single-node Swarm for the test
//! when it is not one (a machine-wide lease: the last test process out leaves the Swarm only if
//! a lease initialised it).

// Tests of the crate that owns process spawning and Docker (clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use bollard::models::{EndpointSpecModeEnum, TaskSpecRestartPolicyConditionEnum};
use bollard::query_parameters::{ListContainersOptions, ListNetworksOptions, ListServicesOptions};
use common::{
    banner_at, host_listeners, python_image, reach_probe, run_id, serve_8700, spec, text,
};
use sandbox::swarm::{Availability, Transport, ensure_single_node_swarm, leave_swarm_if_ours};
use sandbox::{
    Backend, CopyIn, DockerBackend, EscapingLinks, ExecRequest, NetworkPolicy, SandboxError,
    SwarmBackend, labels,
};

/// The ingress pool of a Swarm these tests initialise (apart from the platform's
/// 10.213.0.0/16 and the overlays' 10.214.0.0/16).
const TEST_ADDR_POOL: &str = "10.217.0.0/16";

fn lease_file() -> std::path::PathBuf {
    std::env::temp_dir().join("research-bench-swarm-lease.json")
}

/// Runs `body` with a swarm backend (its default transport) on a single-node Swarm lease,
/// releasing the lease even when `body` panics.
async fn with_swarm<F, Fut>(body: F)
where
    F: FnOnce(SwarmBackend, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    with_swarm_over(Transport::default(), body).await;
}

/// [`with_swarm`] over `transport`.
async fn with_swarm_over<F, Fut>(transport: Transport, body: F)
where
    F: FnOnce(SwarmBackend, String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let docker = DockerBackend::connect()
        .await
        .expect("these tests need the Docker Engine");
    let image = python_image(&docker).await;
    let lease = ensure_single_node_swarm(&docker, TEST_ADDR_POOL, &lease_file())
        .await
        .expect("a single-node Swarm");
    let outcome = match SwarmBackend::new(docker.clone(), image.clone()).await {
        Ok(backend) => {
            let backend = backend.with_transport(transport);
            // A test that drains the node leaves it active again, even when it panics.
            let node = backend.node_id().to_owned();
            let was_active = node_usable(&backend).await;
            let outcome = tokio::spawn(body(backend.clone(), image)).await;
            if was_active {
                backend
                    .set_node_availability(&node, Availability::Active)
                    .await
                    .expect("the node is active again");
            }
            outcome
        }
        Err(e) => {
            leave_swarm_if_ours(&docker, lease).await.expect("leave");
            panic!("swarm backend: {e}");
        }
    };
    leave_swarm_if_ours(&docker, lease)
        .await
        .expect("release the Swarm lease");
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Whether this engine's node takes services.
async fn node_usable(backend: &SwarmBackend) -> bool {
    backend
        .capacity()
        .await
        .expect("capacity")
        .nodes
        .iter()
        .any(|n| n.id == backend.node_id() && n.unusable.is_none())
}

fn exec(argv: &[&str]) -> ExecRequest {
    let mut r = ExecRequest::new(argv.iter().copied());
    r.timeout = Duration::from_secs(60);
    r
}

fn run_filter(run: &str) -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        vec![
            format!("{}=true", labels::MANAGED),
            format!("{}={run}", labels::RUN),
        ],
    )])
}

/// Services, containers and networks of `run` on the engine.
async fn objects_of_run(backend: &SwarmBackend, run: &str) -> (usize, usize, usize) {
    let docker = backend.docker().client();
    let services = docker
        .list_services(Some(ListServicesOptions {
            filters: Some(run_filter(run)),
            status: None,
        }))
        .await
        .expect("services")
        .len();
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(run_filter(run)),
            ..Default::default()
        }))
        .await
        .expect("containers")
        .len();
    let networks = docker
        .list_networks(Some(ListNetworksOptions {
            filters: Some(run_filter(run)),
        }))
        .await
        .expect("networks")
        .len();
    (services, containers, networks)
}

/// Configs and secrets of `run` on the engine.
async fn configs_and_secrets(backend: &SwarmBackend, run: &str) -> (usize, usize) {
    let docker = backend.docker().client();
    let configs = docker
        .list_configs(Some(bollard::query_parameters::ListConfigsOptions {
            filters: Some(run_filter(run)),
        }))
        .await
        .expect("configs")
        .len();
    let secrets = docker
        .list_secrets(Some(bollard::query_parameters::ListSecretsOptions {
            filters: Some(run_filter(run)),
        }))
        .await
        .expect("secrets")
        .len();
    (configs, secrets)
}

/// Waits (a few seconds at most) for Swarm to finish tearing down what was removed.
async fn settle(backend: &SwarmBackend, run: &str) -> (usize, usize, usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = objects_of_run(backend, run).await;
        if left == (0, 0, 0) || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_is_a_one_replica_service_without_network_and_without_setuid() {
    with_swarm_over(Transport::Engine, one_replica_service).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_a_sandbox_is_a_one_replica_service_without_network_and_without_setuid() {
    with_swarm_over(Transport::Http, one_replica_service).await;
}

async fn one_replica_service(backend: SwarmBackend, image: String) {
    {
        let transport = backend.transport();
        let run = run_id(&format!("swarm-service-{transport}"));
        let mut s = spec(&image, &run);
        s.env.insert("GREETING".into(), "hi there".into());
        let sb = backend.create(s).await.expect("create");
        assert!(sb.is_isolated());

        // The service: one replica, no restart, labels, limits, memory reserved (CPUs are
        // limited, never reserved: an idle grading service must not keep agents off the node).
        let docker = backend.docker().client();
        let services = docker
            .list_services(Some(ListServicesOptions {
                filters: Some(run_filter(&run)),
                status: None,
            }))
            .await
            .expect("services");
        assert_eq!(services.len(), 1);
        let svc = services[0].spec.clone().expect("spec");
        let l = svc.labels.clone().expect("labels");
        assert_eq!(l.get(labels::RUN), Some(&run));
        assert_eq!(l.get(labels::ROLE).map(String::as_str), Some("utility"));
        assert_eq!(
            l.get(labels::OWNER_PID),
            Some(&std::process::id().to_string())
        );
        assert_eq!(
            svc.mode.and_then(|m| m.replicated).and_then(|r| r.replicas),
            Some(1)
        );
        assert_eq!(
            svc.endpoint_spec.and_then(|e| e.mode),
            Some(EndpointSpecModeEnum::DNSRR)
        );
        let task = svc.task_template.expect("task template");
        assert_eq!(
            task.restart_policy.and_then(|r| r.condition),
            Some(TaskSpecRestartPolicyConditionEnum::NONE)
        );
        let resources = task.resources.expect("resources");
        let limits = resources.limits.expect("limits");
        let reservations = resources.reservations.expect("reservations");
        assert_eq!(limits.nano_cpus, Some(1_000_000_000));
        assert_eq!(limits.pids, Some(512));
        assert_eq!(reservations.nano_cpus, None);
        assert_eq!(reservations.memory_bytes, limits.memory_bytes);
        let constraints = task
            .placement
            .and_then(|p| p.constraints)
            .unwrap_or_default();
        // Pinned to this node only when files and execs go through this engine.
        assert_eq!(
            constraints.contains(&format!("node.id=={}", backend.node_id())),
            transport == Transport::Engine,
            "{constraints:?}"
        );
        // The task's container carries the labels too (the docker reaper sees it).
        let info = docker
            .inspect_container(sb.id(), None)
            .await
            .expect("inspect");
        let cl = info.config.and_then(|c| c.labels).expect("labels");
        assert_eq!(cl.get(labels::RUN), Some(&run));
        let hc = info.host_config.expect("host config");
        assert_eq!(hc.memory, Some(2 * 1024 * 1024 * 1024));
        assert_eq!(hc.pids_limit, Some(512));

        // User, workdir, environment, copy in and out through the local engine.
        let out = sb
            .exec(exec(&[
                "sh",
                "-c",
                "id -u; pwd; echo \"$GREETING\"; stat -c %u /workspace",
            ]))
            .await
            .expect("exec");
        assert_eq!(
            text(&out.stdout),
            "1000\n/workspace\nhi there\n1000\n",
            "{out:?}"
        );
        let host = tempfile::tempdir().expect("tempdir");
        std::fs::write(host.path().join("x.txt"), "payload").expect("write");
        sb.copy_in(host.path(), "/workspace/in")
            .await
            .expect("copy in");
        let back = tempfile::tempdir().expect("tempdir");
        sb.copy_out("/workspace/in", &back.path().join("out"), 1 << 20)
            .await
            .expect("copy out");
        assert_eq!(
            std::fs::read_to_string(back.path().join("out/x.txt")).expect("read"),
            "payload"
        );

        // No way to raise privileges: no-new-privileges, or no setuid/setgid file left.
        let out = sb
            .exec(exec(&[
                "sh",
                "-c",
                "grep NoNewPrivs /proc/self/status; find / -xdev -type f -perm /6000 | wc -l",
            ]))
            .await
            .expect("exec");
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("NoNewPrivs:\t1") || stdout.ends_with("\n0\n"),
            "{stdout}"
        );

        // No network beyond a private internal overlay: no route, no name, no connection.
        let script = "import socket\n\
             print('routes', [l.split()[1] for l in open('/proc/net/route').read().splitlines()[1:]])\n\
             try:\n\
             \x20   socket.getaddrinfo('deb.debian.org', 80); print('resolved')\n\
             except OSError:\n\
             \x20   print('no-resolve')\n\
             for ip in ['172.17.0.1', '10.213.0.1', '1.1.1.1']:\n\
             \x20   try:\n\
             \x20       socket.create_connection((ip, 80), timeout=2); print('connected', ip)\n\
             \x20   except OSError as e:\n\
             \x20       print('no-connect', ip)\n";
        let out = sb
            .exec(exec(&["python3", "-c", script]))
            .await
            .expect("exec");
        let stdout = text(&out.stdout);
        assert!(!stdout.contains("00000000"), "no default route: {stdout}");
        assert!(stdout.contains("no-resolve"), "{stdout}");
        assert_eq!(stdout.matches("no-connect").count(), 3, "{stdout}");
        let err = sb
            .host_endpoint(8700)
            .await
            .expect_err("no address without a network");
        assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err}");

        // A stopped task stays stopped (restart condition none).
        sb.stop(Duration::from_secs(1)).await.expect("stop");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(sb.main_exit().await.expect("exit").is_some());

        sb.remove().await.expect("remove");
        sb.remove().await.expect("remove is idempotent");
        assert_eq!(
            settle(&backend, &run).await,
            (0, 0, 0),
            "service, container and overlay gone"
        );
        assert_eq!(configs_and_secrets(&backend, &run).await, (0, 0));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_trial_overlay_reaches_the_allowed_host_port_and_the_host_reaches_the_sandbox() {
    with_swarm(|backend, image| async move {
        let run = run_id("swarm-net");
        let owner = spec(&image, &run).owner;
        // No loopback forwarding here: the green agent gives a no-model agent an internal
        // network instead, and the policy itself is refused before anything is created.
        assert!(!backend.reaches_loopback().await);
        let mut lo = spec(&image, &run);
        lo.network = NetworkPolicy::Loopback;
        let err = backend.create(lo).await.expect_err("loopback refused");
        assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err}");
        let (allowed_port, forbidden_port) = host_listeners().await;
        let net = backend
            .create_network(&owner, Some(allowed_port))
            .await
            .expect("create network");
        let endpoint = net.allowed_endpoint.expect("allowed endpoint");
        assert_eq!(endpoint.port(), allowed_port);
        let relay = endpoint.ip().to_string();
        assert!(
            relay.starts_with("10.214."),
            "{relay} from the overlay pool"
        );

        let mut s = spec(&image, &run);
        s.network = NetworkPolicy::Internal(net.clone());
        s.command = Some(serve_8700());
        let sb = backend.create(s).await.expect("create");

        let probe = reach_probe(&[
            (&relay, allowed_port),
            (&relay, forbidden_port),
            ("172.17.0.1", forbidden_port),
            ("1.1.1.1", 53),
        ]);
        let out = sb
            .exec(exec(&["python3", "-c", &probe]))
            .await
            .expect("probe");
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains(&format!("ok {relay} {allowed_port} hello from host")),
            "{stdout}{}",
            text(&out.stderr)
        );
        assert!(
            stdout.contains(&format!("blocked {relay} {forbidden_port}")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("blocked 172.17.0.1 {forbidden_port}")),
            "{stdout}"
        );
        assert!(stdout.contains("blocked 1.1.1.1 53"), "{stdout}");
        assert!(stdout.contains("no-resolve"), "{stdout}");

        // The host reaches the sandbox's port 8700 through the relay.
        let addr = sb.host_endpoint(8700).await.expect("host endpoint");
        let reply = banner_at(addr, Duration::from_secs(20)).await;
        assert_eq!(reply, "hello from sandbox\n");

        sb.remove().await.expect("remove");
        backend.remove_network(&net).await.expect("remove network");
        backend
            .remove_network(&net)
            .await
            .expect("removing twice is fine");
        assert_eq!(
            settle(&backend, &run).await,
            (0, 0, 0),
            "service, relay and networks gone"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reaper_removes_a_runs_services_relays_and_networks() {
    with_swarm(|backend, image| async move {
        let run = run_id("swarm-reap");
        let owner = spec(&image, &run).owner;
        let net = backend.create_network(&owner, None).await.expect("network");
        let mut s = spec(&image, &run);
        s.network = NetworkPolicy::Internal(net);
        let _agent = backend.create(s).await.expect("create");
        let _grader = backend.create(spec(&image, &run)).await.expect("create");
        let (services, containers, networks) = objects_of_run(&backend, &run).await;
        // Over http the grader's private overlay has a relay (to its runner) and a bridge too.
        let http = usize::from(backend.transport() == Transport::Http);
        assert_eq!(
            (services, containers),
            (2, 3 + http),
            "two tasks and the relays"
        );
        assert_eq!(
            networks,
            3 + http,
            "trial overlay, its bridge, the grader's overlay (and bridge)"
        );
        assert_eq!(
            configs_and_secrets(&backend, &run).await,
            (2 * http, 2 * http),
            "a runner config and a token secret per sandbox over http"
        );
        // A live owner's objects stay when only the dead are reaped.
        assert_eq!(backend.reap_dead(Some(&run)).await.expect("reap"), 0);
        let removed = backend.reap(Some(&run)).await.expect("reap");
        assert!(removed >= 3, "services and the relay at least: {removed}");
        assert_eq!(settle(&backend, &run).await, (0, 0, 0));
        assert_eq!(configs_and_secrets(&backend, &run).await, (0, 0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn capacity_counts_reservations_by_run_and_a_drained_node_loses_its_tasks() {
    with_swarm(|backend, image| async move {
        const MIB: u64 = 1024 * 1024;
        let run = run_id("swarm-capacity");
        let node_id = backend.node_id().to_owned();
        let this = |c: &sandbox::Capacity| {
            c.nodes
                .iter()
                .find(|n| n.id == node_id)
                .expect("this node")
                .clone()
        };
        let before = backend.capacity().await.expect("capacity");
        assert!(before.reserves_memory);
        let node = this(&before);
        assert_eq!(node.unusable, None, "{node:?}");
        // The node's resources are the engine's (the docker backend's capacity).
        let engine = Backend::capacity(backend.docker()).await.expect("engine");
        assert!(!engine.reserves_memory);
        assert_eq!(node.cpus, engine.nodes[0].cpus);
        assert_eq!(node.memory_bytes, engine.nodes[0].memory_bytes);
        assert_eq!(node.reserved_by_run.get(&run), None);

        // A service reserves its memory, counted for its run.
        let mut s = spec(&image, &run);
        s.limits.memory_bytes = 256 * MIB;
        let sb: std::sync::Arc<dyn sandbox::Sandbox> =
            std::sync::Arc::from(backend.create(s).await.expect("create"));
        let during = this(&backend.capacity().await.expect("capacity"));
        assert_eq!(during.reserved_by_run.get(&run), Some(&(256 * MIB)));
        assert_eq!(
            during.free_for(&run),
            node.free_for(&run),
            "a run's own reservations are not subtracted from its room"
        );
        assert_eq!(
            during.free_for("another-run"),
            node.free_for("another-run") - 256 * MIB
        );

        // Drained: the task is shut down; waiting on it, its exit and an exec say the node
        // left, naming it.
        let waiting = tokio::spawn({
            let sb = sb.clone();
            async move { sb.wait_exit().await }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!waiting.is_finished(), "the sandbox runs");
        let drained = Instant::now();
        let was = backend
            .set_node_availability(&node_id, Availability::Drain)
            .await
            .expect("drain");
        assert_eq!(was, Availability::Active);
        let err = tokio::time::timeout(Duration::from_secs(60), waiting)
            .await
            .expect("wait_exit returns")
            .expect("task")
            .expect_err("the node left");
        let took = drained.elapsed();
        match &err {
            SandboxError::NodeLost {
                node: name,
                node_id: id,
                why,
                ..
            } => {
                assert_eq!(name, &node.name);
                assert_eq!(id, &node_id);
                assert!(why.contains("availability drain"), "{why}");
            }
            other => panic!("not a node loss: {other}"),
        }
        assert!(err.to_string().contains("left"), "{err}");
        let exit = sb.main_exit().await.expect_err("main_exit: the node left");
        assert!(matches!(exit, SandboxError::NodeLost { .. }), "{exit}");
        let exec_err = sb
            .exec(exec(&["true"]))
            .await
            .expect_err("exec: the node left");
        assert!(
            matches!(exec_err, SandboxError::NodeLost { .. }),
            "{exec_err}"
        );
        let drained_cap = this(&backend.capacity().await.expect("capacity"));
        assert_eq!(drained_cap.unusable.as_deref(), Some("availability drain"));

        backend
            .set_node_availability(&node_id, Availability::Active)
            .await
            .expect("active");
        assert!(node_usable(&backend).await);
        sb.remove().await.expect("remove");
        assert_eq!(settle(&backend, &run).await, (0, 0, 0));
        eprintln!(
            "node loss seen by wait_exit {:.1} s after the drain",
            took.as_secs_f64()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_mounts_travel_as_read_only_copies_and_files_arrive_before_the_command() {
    // What lets a sandbox run on another node: no host path is bound, and the command (the
    // adapter, reading its workspace at once) starts only when everything is in.
    with_swarm_over(Transport::Http, |backend, image| async move {
        let run = run_id("swarm-http-mounts");
        let host = tempfile::tempdir().expect("tempdir");
        let tools = host.path().join("tools");
        std::fs::create_dir_all(tools.join("lib")).expect("mkdir");
        std::fs::write(tools.join("tool"), "#!/bin/sh\necho tool-ran\n").expect("write");
        std::fs::write(tools.join("lib/open.txt"), "everyone may write me").expect("write");
        let adapter = host.path().join("adapter");
        std::fs::write(&adapter, "#!/bin/sh\necho adapter-ran\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        for (path, mode) in [
            (tools.join("tool"), 0o777),
            (tools.join("lib/open.txt"), 0o666),
            (adapter.clone(), 0o775),
        ] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let seed = host.path().join("seed");
        std::fs::create_dir_all(&seed).expect("mkdir");
        std::fs::write(seed.join("input.txt"), "seed-bytes").expect("write");

        let mut s = spec(&image, &run);
        s.mounts.push(sandbox::ReadOnlyMount {
            host_path: tools.clone(),
            sandbox_path: "/opt/platform/tools".into(),
        });
        s.mounts.push(sandbox::ReadOnlyMount {
            host_path: adapter.clone(),
            sandbox_path: "/opt/platform/adapter".into(),
        });
        // Records what it saw the moment it started.
        s.command = Some(vec![
            "sh".into(),
            "-c".into(),
            "{ cat /workspace/input.txt; echo; /opt/platform/adapter; /opt/platform/tools/tool; } \
             > /tmp/at-start 2>&1; sleep 600"
                .into(),
        ]);
        let sb = backend
            .create_with(s, &[CopyIn::new(&seed, "/workspace")])
            .await
            .expect("create with files");
        let mut seen = String::new();
        for _ in 0..100 {
            let out = sb.exec(exec(&["cat", "/tmp/at-start"])).await.expect("cat");
            seen = text(&out.stdout);
            if seen.contains("tool-ran") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(seen, "seed-bytes\nadapter-ran\ntool-ran\n");

        let mut root = exec(&[
            "stat",
            "-c",
            "%n %u:%g %a",
            "/opt/platform/tools",
            "/opt/platform/tools/tool",
            "/opt/platform/tools/lib",
            "/opt/platform/tools/lib/open.txt",
            "/opt/platform/adapter",
            "/workspace/input.txt",
        ]);
        root.user = Some("0".into());
        let out = sb.exec(root).await.expect("stat");
        assert_eq!(
            text(&out.stdout),
            "/opt/platform/tools 0:0 755\n/opt/platform/tools/tool 0:0 755\n\
             /opt/platform/tools/lib 0:0 755\n/opt/platform/tools/lib/open.txt 0:0 644\n\
             /opt/platform/adapter 0:0 755\n/workspace/input.txt 1000:1000 644\n",
            "{}",
            text(&out.stderr)
        );
        // The sandbox user can change none of it, as with a read-only bind mount.
        let out = sb
            .exec(exec(&[
                "sh",
                "-c",
                "for p in /opt/platform/tools/tool /opt/platform/tools/lib/open.txt \
                 /opt/platform/adapter; do echo x >> $p 2>/dev/null && echo WROTE $p; done; \
                 touch /opt/platform/tools/new 2>/dev/null && echo CREATED; \
                 rm -f /opt/platform/adapter 2>/dev/null; test -e /opt/platform/adapter && echo kept",
            ]))
            .await
            .expect("write attempts");
        assert_eq!(text(&out.stdout), "kept\n", "{}", text(&out.stderr));
        // No host path is bound into the service.
        let services = backend
            .docker()
            .client()
            .list_services(Some(ListServicesOptions {
                filters: Some(run_filter(&run)),
                status: None,
            }))
            .await
            .expect("services");
        assert_eq!(services.len(), 1);
        for service in &services {
            let mounts = service
                .spec
                .as_ref()
                .and_then(|s| s.task_template.as_ref())
                .and_then(|t| t.container_spec.as_ref())
                .and_then(|c| c.mounts.clone())
                .unwrap_or_default();
            assert!(mounts.is_empty(), "{mounts:?}");
        }
        sb.remove().await.expect("remove");
        assert_eq!(settle(&backend, &run).await, (0, 0, 0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_copies_execs_stop_and_copy_out_keep_the_docker_backends_semantics() {
    with_swarm_over(Transport::Http, |backend, image| async move {
        let run = run_id("swarm-http-ops");
        let mut s = spec(&image, &run);
        s.command = Some(vec![
            "sh".into(),
            "-c".into(),
            "echo started; trap 'echo bye; exit 7' TERM; while :; do sleep 0.2; done".into(),
        ]);
        let sb = backend.create_sandbox(s).await.expect("create");
        assert_eq!(sb.transport(), Transport::Http);

        // Copy in: owners and modes as asked, missing ancestors root 0755, one upload.
        let host = tempfile::tempdir().expect("tempdir");
        let dir = host.path().join("d");
        std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
        std::fs::write(dir.join("a.txt"), "alpha").expect("write");
        std::fs::write(dir.join("sub/b.sh"), "#!/bin/sh\necho b\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("sub/b.sh"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let file = host.path().join("f.txt");
        std::fs::write(&file, "secret").expect("write");
        sb.copy_in_many(&[
            CopyIn::new(&dir, "/opt/task/data")
                .owned_by(0, 0)
                .with_mode(0o750),
            CopyIn::new(&file, "/deep/new/f.txt")
                .owned_by(1234, 1234)
                .with_mode(0o600),
            CopyIn::new(&dir, "/workspace/mine"),
        ])
        .await
        .expect("copy in many");
        let mut root = exec(&[
            "stat",
            "-c",
            "%n %u:%g %a",
            "/opt/task/data",
            "/opt/task",
            "/deep",
            "/deep/new",
            "/deep/new/f.txt",
            "/workspace/mine",
            "/workspace/mine/sub/b.sh",
            "/opt/task/data/a.txt",
        ]);
        root.user = Some("0".into());
        let out = sb.exec(root).await.expect("stat");
        assert_eq!(
            text(&out.stdout),
            "/opt/task/data 0:0 750\n/opt/task 0:0 755\n/deep 0:0 755\n/deep/new 0:0 755\n\
             /deep/new/f.txt 1234:1234 600\n/workspace/mine 1000:1000 755\n\
             /workspace/mine/sub/b.sh 1000:1000 755\n/opt/task/data/a.txt 0:0 644\n",
            "{}",
            text(&out.stderr)
        );
        // copy_in: the directory and its missing parents as the sandbox user.
        sb.copy_in(&dir, "/workspace/p/q").await.expect("copy in");
        let out = sb
            .exec(exec(&[
                "stat",
                "-c",
                "%u %a",
                "/workspace/p",
                "/workspace/p/q",
            ]))
            .await
            .expect("stat");
        assert_eq!(text(&out.stdout), "1000 755\n1000 755\n");

        // Exec: env, workdir, user, HOME, exit codes, stderr.
        let mut r = exec(&[
            "sh",
            "-c",
            "echo $X; pwd; id -u; echo $HOME; echo oops >&2; exit 3",
        ]);
        r.env.insert("X".into(), "1".into());
        r.workdir = Some("/tmp".into());
        r.user = Some("0".into());
        let out = sb.exec(r).await.expect("exec");
        assert_eq!(text(&out.stdout), "1\n/tmp\n0\n/root\n");
        assert_eq!(text(&out.stderr), "oops\n");
        assert_eq!(out.exit_code, Some(3));
        assert!(!out.timed_out && !out.truncated);
        let out = sb
            .exec(exec(&["sh", "-c", "id -u; pwd"]))
            .await
            .expect("exec");
        assert_eq!(text(&out.stdout), "1000\n/workspace\n");
        let out = sb.exec(exec(&["no-such-program"])).await.expect("exec");
        assert_eq!(out.exit_code, Some(127), "{out:?}");

        // Output cap: the first bytes kept, flagged.
        let mut r = exec(&["head", "-c", "5000", "/dev/zero"]);
        r.output_cap = 100;
        let out = sb.exec(r).await.expect("exec");
        assert_eq!(out.stdout.len(), 100);
        assert!(out.truncated);
        assert_eq!(out.exit_code, Some(0));

        // Deadline: the whole process tree is killed, reported as timed out.
        let mut r = exec(&[
            "sh",
            "-c",
            "sleep 300 & echo $! > /tmp/bg; echo waiting; sleep 300",
        ]);
        r.timeout = Duration::from_secs(2);
        let began = Instant::now();
        let out = sb.exec(r).await.expect("exec");
        assert!(out.timed_out, "{out:?}");
        assert_eq!(out.exit_code, None);
        assert_eq!(text(&out.stdout), "waiting\n");
        assert!(began.elapsed() < Duration::from_secs(20));
        let out = sb
            .exec(exec(&[
                "sh",
                "-c",
                "kill -0 $(cat /tmp/bg) 2>/dev/null && echo alive || echo gone",
            ]))
            .await
            .expect("exec");
        assert_eq!(text(&out.stdout), "gone\n", "the background child died too");

        // Copy out: escaping links refused (or skipped), over-cap trees refused, missing paths.
        let out = sb
            .exec(exec(&[
                "sh",
                "-c",
                "mkdir -p /workspace/out/in && echo hi > /workspace/out/in/x.txt && \
                 ln -s /etc/passwd /workspace/out/esc && mkdir -p /workspace/big && \
                 head -c 200000 /dev/urandom > /workspace/big/blob",
            ]))
            .await
            .expect("exec");
        assert!(out.success(), "{}", text(&out.stderr));
        let back = tempfile::tempdir().expect("tempdir");
        let err = sb
            .copy_out("/workspace/out", &back.path().join("a"), 1 << 20)
            .await
            .expect_err("an escaping link is refused");
        assert!(
            matches!(err, SandboxError::PathOutsideSandbox { .. }),
            "{err}"
        );
        let copied = sb
            .copy_out_with(
                "/workspace/out",
                &back.path().join("b"),
                1 << 20,
                EscapingLinks::Skip,
            )
            .await
            .expect("skip mode");
        assert_eq!(copied.dropped_count, 1);
        assert_eq!(
            std::fs::read_to_string(back.path().join("b/in/x.txt")).expect("read"),
            "hi\n"
        );
        assert!(!back.path().join("b/esc").exists());
        let err = sb
            .copy_out("/workspace/big", &back.path().join("c"), 1000)
            .await
            .expect_err("over the cap");
        assert!(matches!(err, SandboxError::OverSizeCap { .. }), "{err}");
        let err = sb
            .copy_out("/workspace/nothing", &back.path().join("d"), 1000)
            .await
            .expect_err("missing");
        assert!(matches!(err, SandboxError::NotFound { .. }), "{err}");
        let err = sb
            .copy_out("/workspace/../etc", &back.path().join("e"), 1000)
            .await
            .expect_err("outside");
        assert!(
            matches!(err, SandboxError::PathOutsideSandbox { .. }),
            "{err}"
        );

        // The main command: its output, its stop (SIGTERM, its own exit code), and copies out
        // after it ended.
        use sandbox::Sandbox;
        assert_eq!(sb.main_exit().await.expect("exit"), None);
        assert!(sb.logs(1000).await.expect("logs").contains("started"));
        sb.stop(Duration::from_secs(5)).await.expect("stop");
        assert_eq!(sb.main_exit().await.expect("exit"), Some(7));
        assert_eq!(sb.wait_exit().await.expect("wait"), 7);
        assert!(sb.logs(1000).await.expect("logs").contains("bye"));
        sb.copy_out("/workspace/out/in", &back.path().join("f"), 1 << 20)
            .await
            .expect("copy out after the main command ended");

        sb.remove().await.expect("remove");
        sb.remove().await.expect("remove is idempotent");
        assert_eq!(settle(&backend, &run).await, (0, 0, 0));
        assert_eq!(configs_and_secrets(&backend, &run).await, (0, 0));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn over_http_the_runner_refuses_the_agent_wrong_tokens_and_huge_bodies() {
    with_swarm_over(Transport::Http, |backend, image| async move {
        use sandbox::Sandbox;
        let run = run_id("swarm-http-adversary");
        let owner = spec(&image, &run).owner;
        let net = backend.create_network(&owner, None).await.expect("network");
        let mut s = spec(&image, &run);
        s.network = NetworkPolicy::Internal(net.clone());
        let sb = backend.create_sandbox(s).await.expect("create");

        // As the agent's uid: the token and the runner's environment are unreadable, and the
        // runner answers nothing to a guessed token (it accepts only the relay as a peer).
        let script = format!(
            "import os, socket\n\
             for p in ['/run/secrets/rb-runner-token', '/run/rb-runner.py']:\n\
             \x20   try:\n\
             \x20       open(p).read(); print('read', p)\n\
             \x20   except OSError as e:\n\
             \x20       print('denied', p)\n\
             for pid in [p for p in os.listdir('/proc') if p.isdigit() and p != str(os.getpid())]:\n\
             \x20   try:\n\
             \x20       cmd = open('/proc/%s/cmdline' % pid, 'rb').read()\n\
             \x20   except OSError:\n\
             \x20       continue\n\
             \x20   if b'rb-runner.py' in cmd and b'python3' in cmd:\n\
             \x20       try:\n\
             \x20           open('/proc/%s/environ' % pid, 'rb').read(); print('environ readable')\n\
             \x20       except OSError:\n\
             \x20           print('environ denied')\n\
             for host in ['127.0.0.1', socket.gethostbyname(socket.gethostname())]:\n\
             \x20   try:\n\
             \x20       c = socket.create_connection((host, {port}), timeout=5)\n\
             \x20       c.sendall(b'GET /health HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer ' + b'0' * 64 + b'\\r\\n\\r\\n')\n\
             \x20       print('answer', host, repr(c.recv(100)))\n\
             \x20   except OSError as e:\n\
             \x20       print('refused', host, type(e).__name__)\n",
            port = sandbox::swarm::RUNNER_PORT
        );
        let out = sb
            .exec(exec(&["python3", "-c", &script]))
            .await
            .expect("exec");
        let stdout = text(&out.stdout);
        assert!(stdout.contains("denied /run/secrets/rb-runner-token"), "{stdout}");
        assert!(stdout.contains("denied /run/rb-runner.py"), "{stdout}");
        assert!(stdout.contains("environ denied"), "{stdout}");
        assert!(!stdout.contains("200 OK"), "{stdout}");
        assert!(!stdout.contains("environ readable"), "{stdout}");
        assert_eq!(
            stdout.matches("answer").count() + stdout.matches("refused").count(),
            2,
            "{stdout}{}",
            text(&out.stderr)
        );
        for line in stdout.lines().filter(|l| l.starts_with("answer")) {
            assert!(line.ends_with("b''"), "closed unanswered: {line}");
        }

        // From the host, through the relay: a wrong token is refused, so is a body over the
        // caps, with the right token too (before reading it); the runner keeps serving.
        let status = |s: Option<String>| s.expect("an http sandbox");
        let wrong = status(sb.probe_runner("GET", "/health", false, None).await);
        assert!(wrong.starts_with("HTTP/1.1 403"), "{wrong}");
        let right = status(sb.probe_runner("GET", "/health", true, None).await);
        assert!(right.starts_with("HTTP/1.1 200"), "{right}");
        let huge = status(sb.probe_runner("PUT", "/files", true, Some(1 << 50)).await);
        assert!(huge.starts_with("HTTP/1.1 413"), "{huge}");
        let huge = status(sb.probe_runner("POST", "/exec", true, Some(1 << 30)).await);
        assert!(huge.starts_with("HTTP/1.1 413"), "{huge}");
        let unauth = status(sb.probe_runner("PUT", "/files", false, Some(1 << 50)).await);
        assert!(unauth.starts_with("HTTP/1.1 403"), "{unauth}");
        let out = sb.exec(exec(&["true"])).await.expect("still serving");
        assert!(out.success());

        sb.remove().await.expect("remove");
        backend.remove_network(&net).await.expect("remove network");
        assert_eq!(settle(&backend, &run).await, (0, 0, 0));
        assert_eq!(configs_and_secrets(&backend, &run).await, (0, 0));
    })
    .await;
}
