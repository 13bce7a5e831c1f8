//! The `docker` backend against the real Docker Engine.

// Tests of the crate that owns process spawning and Docker (clippy.toml).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::query_parameters::ListContainersOptions;
use common::{
    backend, banner_at, exec_checks, host_listeners, python_image, reach_probe, run_id, serve_8700,
    spec, text,
};
use sandbox::{Backend, DockerBackend, ExecRequest, Limits, NetworkPolicy, SandboxError, labels};

fn exec(argv: &[&str]) -> ExecRequest {
    let mut r = ExecRequest::new(argv.iter().copied());
    r.timeout = Duration::from_secs(60);
    r
}

async fn containers_of_run(backend: &DockerBackend, run: &str) -> Vec<String> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![
            format!("{}=true", labels::MANAGED),
            format!("{}={run}", labels::RUN),
        ],
    )]);
    backend
        .client()
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .expect("list containers")
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

#[tokio::test]
async fn ensuring_an_existing_image_is_a_quick_no_op() {
    let backend = backend().await;
    let tag = python_image(&backend).await;
    assert_eq!(tag, sandbox::images::resolve("python").await);
    let recipe = sandbox::images::recipe("python").expect("recipe");
    let seen = std::sync::Mutex::new(Vec::new());
    let began = Instant::now();
    let again = sandbox::images::ensure(&backend, &recipe, |p| {
        seen.lock().expect("lock").push(p);
    })
    .await
    .expect("ensure");
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(again, tag);
    assert_eq!(
        seen.into_inner().expect("lock"),
        [sandbox::images::ImageProgress::UpToDate { tag }]
    );
    // A name that is no recipe must already exist.
    let err = sandbox::images::ensure_named(&backend, "research-bench/nothing:here", |_| {})
        .await
        .expect_err("missing");
    assert!(matches!(err, SandboxError::ImageMissing(_)), "{err}");
}

#[tokio::test]
async fn lifecycle_user_workdir_env_labels_and_copy_in() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("lifecycle");
    let mut s = spec(&image, &run);
    s.env.insert("GREETING".into(), "hi there".into());
    let sb = backend.create(s).await.expect("create");
    assert!(sb.is_isolated());

    let out = sb
        .exec(exec(&[
            "sh",
            "-c",
            "id -u; id -g; pwd; echo \"$GREETING\"; stat -c %u /workspace",
        ]))
        .await
        .expect("exec");
    assert!(out.success(), "{out:?}");
    assert_eq!(
        text(&out.stdout),
        "1000\n1000\n/workspace\nhi there\n1000\n"
    );

    // Copy-in: files owned by the sandbox user, writable by it.
    let host = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(host.path().join("data/sub")).expect("mkdir");
    std::fs::write(host.path().join("data/sub/x.txt"), "payload").expect("write");
    std::fs::write(host.path().join("run.sh"), "echo ran").expect("write");
    sb.copy_in(host.path(), "/workspace/task")
        .await
        .expect("copy in");
    let out = sb
        .exec(exec(&[
            "sh",
            "-c",
            "cat data/sub/x.txt; stat -c '%u:%g' . data data/sub/x.txt; echo new > data/new.txt && echo writable",
        ]).with_workdir("/workspace/task"))
        .await
        .expect("exec");
    assert_eq!(
        text(&out.stdout),
        "payload1000:1000\n1000:1000\n1000:1000\nwritable\n",
        "{}",
        text(&out.stderr)
    );

    // Labels: managed, run, trial, role, owner pid (us) and start time.
    let info = backend
        .client()
        .inspect_container(sb.id(), None)
        .await
        .expect("inspect");
    let l = info.config.and_then(|c| c.labels).expect("labels");
    assert_eq!(l.get(labels::MANAGED).map(String::as_str), Some("true"));
    assert_eq!(l.get(labels::RUN), Some(&run));
    assert_eq!(l.get(labels::TRIAL).map(String::as_str), Some("t1"));
    assert_eq!(l.get(labels::ROLE).map(String::as_str), Some("utility"));
    assert_eq!(
        l.get(labels::OWNER_PID),
        Some(&std::process::id().to_string())
    );
    assert!(l.contains_key(labels::OWNER_START));
    let hc = info.host_config.expect("host config");
    assert_eq!(hc.init, Some(true));
    assert_eq!(hc.memory, hc.memory_swap, "no swap beyond memory");
    assert_eq!(hc.nano_cpus, Some(1_000_000_000));
    assert_eq!(hc.pids_limit, Some(512));

    sb.remove().await.expect("remove");
    sb.remove().await.expect("remove is idempotent");
    assert!(containers_of_run(&backend, &run).await.is_empty());
}

trait WithWorkdir {
    fn with_workdir(self, dir: &str) -> Self;
}
impl WithWorkdir for ExecRequest {
    fn with_workdir(mut self, dir: &str) -> Self {
        self.workdir = Some(dir.to_string());
        self
    }
}

#[tokio::test]
async fn memory_limit_oom_kill_is_reported() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("oom");
    let mut s = spec(&image, &run);
    s.limits = Limits {
        cpus: 1.0,
        memory_bytes: 64 * 1024 * 1024,
        pids: 64,
    };
    let sb = backend.create(s).await.expect("create");
    exec_checks::oom_is_reported(sb.as_ref(), None).await;
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn pids_limit_stops_a_fork_bomb() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("pids");
    let mut s = spec(&image, &run);
    s.limits.pids = 40;
    let sb = backend.create(s).await.expect("create");
    // Forks children that sleep, until fork fails; reports how far it got.
    let script = "import os, time\nn = 0\ntry:\n    while n < 1000:\n        if os.fork() == 0:\n            time.sleep(60)\n            os._exit(0)\n        n += 1\n    print('unbounded', n)\nexcept OSError as e:\n    print('stopped', n, e.errno)\n";
    let mut req = exec(&["python3", "-c", script]);
    req.timeout = Duration::from_secs(20);
    let out = sb.exec(req).await.expect("exec");
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("stopped "),
        "{stdout} {}",
        text(&out.stderr)
    );
    let n: u32 = stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("count");
    assert!(n < 40, "forked {n} children under a limit of 40");
    assert!(out.exit_code == Some(0), "{out:?}");

    // A classic shell fork bomb is contained, cut at its deadline, and the sandbox survives.
    let mut bomb = exec(&["bash", "-c", "b(){ b | b & }; b; sleep 5"]);
    bomb.timeout = Duration::from_secs(3);
    let out = sb.exec(bomb).await.expect("fork bomb exec");
    assert!(out.timed_out || out.exit_code.is_some(), "{out:?}");
    // Once the killed bomb's processes are reaped, the sandbox takes execs again and holds
    // nothing but its idle process.
    let deadline = Instant::now() + Duration::from_secs(15);
    let ps = loop {
        let ps = sb
            .exec(exec(&["ps", "-e", "--no-headers", "-o", "comm"]))
            .await
            .expect("exec after bomb");
        if ps.success() || Instant::now() > deadline {
            break ps;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(ps.success(), "{ps:?}");
    let procs = text(&ps.stdout);
    assert!(!procs.contains("bash"), "bomb processes survived:\n{procs}");
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn deadline_kills_the_whole_exec_tree_within_a_second() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("deadline");
    let sb = backend.create(spec(&image, &run)).await.expect("create");
    exec_checks::deadline_kills_the_tree(sb.as_ref(), None).await;
    sb.remove().await.expect("remove");
    assert!(
        containers_of_run(&backend, &run).await.is_empty(),
        "the container is gone afterwards"
    );
}

#[tokio::test]
async fn output_caps_truncate() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("caps");
    let sb = backend.create(spec(&image, &run)).await.expect("create");
    exec_checks::output_caps_truncate(sb.as_ref(), None).await;
    sb.stop(Duration::MAX)
        .await
        .expect("stop with an absurd grace");
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn default_container_has_no_network_at_all() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("nonet");
    let sb = backend.create(spec(&image, &run)).await.expect("create");
    // A listener on the host, on every address, that the container must not reach.
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let script = format!(
        "import socket, os\n\
         print('ifaces', sorted(os.listdir('/sys/class/net')))\n\
         for host in ['localhost.invalid', 'deb.debian.org', 'example.com']:\n\
         \x20   try:\n\
         \x20       socket.getaddrinfo(host, 80); print('resolved', host)\n\
         \x20   except OSError:\n\
         \x20       print('no-resolve', host)\n\
         for ip in ['172.17.0.1', '10.0.0.1', '1.1.1.1', '8.8.8.8']:\n\
         \x20   try:\n\
         \x20       socket.create_connection((ip, {port}), timeout=2); print('connected', ip)\n\
         \x20   except OSError as e:\n\
         \x20       print('no-connect', ip, e.errno)\n"
    );
    let out = sb
        .exec(exec(&["python3", "-c", &script]))
        .await
        .expect("exec");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("ifaces ['lo']"), "{stdout}");
    assert!(!stdout.contains("resolved"), "{stdout}");
    assert!(!stdout.contains("connected"), "{stdout}");
    assert_eq!(stdout.matches("no-connect").count(), 4, "{stdout}");
    let err = sb
        .host_endpoint(8700)
        .await
        .expect_err("no address without a network");
    assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err}");
    sb.remove().await.expect("remove");
}

/// A host address that is not on the test network (the outside, as seen from the container).
fn other_host_ipv4() -> String {
    let route = std::fs::read_to_string("/proc/net/route").expect("route table");
    // The default route's interface; find its address through `ip`.
    let iface = route
        .lines()
        .skip(1)
        .find(|l| l.split_whitespace().nth(1) == Some("00000000"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or("eth0")
        .to_string();
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", &iface])
        .output()
        .expect("ip addr");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .expect("an IPv4 address on the default interface")
        .to_string()
}

#[tokio::test]
async fn internal_network_reaches_only_the_allowed_host_port() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("internal");
    let owner = spec(&image, &run).owner;
    let (allowed_port, forbidden_port) = host_listeners().await;
    let net = backend
        .create_network(&owner, Some(allowed_port))
        .await
        .expect("create network");
    let endpoint = net.allowed_endpoint.expect("allowed endpoint");
    assert_eq!(endpoint.port(), allowed_port);
    let gateway = endpoint.ip().to_string();
    let outside = other_host_ipv4();

    let mut s = spec(&image, &run);
    s.network = NetworkPolicy::Internal(net.clone());
    // The main process serves a port the host must reach.
    s.command = Some(serve_8700());
    let sb = backend.create(s).await.expect("create");

    let probe = reach_probe(&[
        (&gateway, allowed_port),
        (&gateway, forbidden_port),
        (&outside, allowed_port),
        (&outside, forbidden_port),
        ("1.1.1.1", 53),
    ]);
    let out = sb
        .exec(exec(&["python3", "-c", &probe]))
        .await
        .expect("probe");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("ok {gateway} {allowed_port} hello from host")),
        "{stdout}{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("blocked {gateway} {forbidden_port}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("blocked {outside} {allowed_port}")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("blocked {outside} {forbidden_port}")),
        "{stdout}"
    );
    assert!(stdout.contains("blocked 1.1.1.1 53"), "{stdout}");
    assert!(stdout.contains("no-resolve"), "{stdout}");

    // The host reaches the sandbox's port at its address on the network.
    let addr = sb.host_endpoint(8700).await.expect("host endpoint");
    let reply = banner_at(addr, Duration::from_secs(10)).await;
    assert_eq!(reply, "hello from sandbox\n", "the host reaches {addr}");

    sb.remove().await.expect("remove");
    backend.remove_network(&net).await.expect("remove network");
    backend
        .remove_network(&net)
        .await
        .expect("remove network is idempotent");
    let rules = std::process::Command::new("iptables")
        .args(["-w", "-S"])
        .output()
        .expect("iptables");
    let rules = String::from_utf8_lossy(&rules.stdout);
    assert!(
        !rules.contains(&format!("RB-{}", &net.id[..12])),
        "rules left:\n{rules}"
    );
}

/// The engine's default bridge's address on the host (`docker0`), the gateway a container on
/// the default network would have.
fn docker_bridge_gateway() -> String {
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", "docker0"])
        .output()
        .expect("ip addr");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip_while(|w| *w != "inet")
        .nth(1)
        .and_then(|cidr| cidr.split('/').next())
        .unwrap_or("172.17.0.1")
        .to_string()
}

/// Whether a TCP connection to `addr` is refused within `wait` (a listener that was there
/// is gone).
async fn refused_within(addr: std::net::SocketAddr, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `NetworkPolicy::Loopback`: the sandbox has `lo` alone and reaches nothing (not the host's
/// listeners through the engine's bridge gateway or the host's own address, not the outside,
/// no name resolution), while the host reaches its port 8700 through `host_endpoint`, a
/// forwarder on the host's 127.0.0.1 into the sandbox's namespace; the forwarder ends when the
/// sandbox is removed, and when it is dropped.
#[tokio::test]
async fn a_loopback_sandbox_reaches_nothing_and_the_host_reaches_its_port() {
    let backend = backend().await;
    assert!(
        backend.reaches_loopback().await,
        "these tests run as root beside the engine: the docker backend reaches loopbacks"
    );
    let image = python_image(&backend).await;
    let run = run_id("loopback");
    let (host_port, _) = host_listeners().await;
    let gateway = docker_bridge_gateway();
    let outside = other_host_ipv4();
    let mut s = spec(&image, &run);
    s.network = NetworkPolicy::Loopback;
    s.command = Some(serve_8700());
    let sb = backend.create(s).await.expect("create");

    let mut probe = reach_probe(&[
        (&gateway, host_port),
        (&outside, host_port),
        ("127.0.0.1", host_port),
        ("1.1.1.1", 53),
        ("127.0.0.1", 8700),
    ]);
    probe.push_str("import os\nprint('ifaces', sorted(os.listdir('/sys/class/net')))\n");
    // The server may take a moment to listen: the probe of its own port is asked last.
    let mut stdout = String::new();
    for _ in 0..50 {
        let out = sb
            .exec(exec(&["python3", "-c", &probe]))
            .await
            .expect("probe");
        stdout = text(&out.stdout);
        if stdout.contains("ok 127.0.0.1 8700") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(stdout.contains("ifaces ['lo']"), "{stdout}");
    for (ip, port) in [
        (gateway.as_str(), host_port),
        (outside.as_str(), host_port),
        ("127.0.0.1", host_port),
        ("1.1.1.1", 53),
    ] {
        assert!(stdout.contains(&format!("blocked {ip} {port}")), "{stdout}");
    }
    assert!(stdout.contains("no-resolve"), "{stdout}");
    assert!(
        stdout.contains("ok 127.0.0.1 8700 hello from sandbox"),
        "its own loopback works: {stdout}"
    );

    // The host reaches its port through the forwarder, as often as it likes, at one address.
    let addr = sb.host_endpoint(8700).await.expect("host endpoint");
    assert!(addr.ip().is_loopback(), "{addr}");
    for _ in 0..3 {
        let reply = banner_at(addr, Duration::from_secs(10)).await;
        assert_eq!(reply, "hello from sandbox\n", "the host reaches {addr}");
    }
    assert_eq!(sb.host_endpoint(8700).await.expect("again"), addr);
    // A port nothing listens on: the host's connection is closed, nothing hangs.
    let quiet = sb.host_endpoint(8701).await.expect("another port");
    assert_ne!(quiet, addr);
    assert_eq!(banner_at(quiet, Duration::ZERO).await, "");

    sb.remove().await.expect("remove");
    assert!(
        refused_within(addr, Duration::from_secs(2)).await,
        "the forwarder ends with the sandbox"
    );
    assert!(refused_within(quiet, Duration::from_secs(2)).await);

    // Dropped without removal (a crash path): its forwarder ends all the same.
    let mut s = spec(&image, &run);
    s.network = NetworkPolicy::Loopback;
    s.command = Some(serve_8700());
    let sb = backend.create(s).await.expect("create");
    let addr = sb.host_endpoint(8700).await.expect("host endpoint");
    assert_eq!(
        banner_at(addr, Duration::from_secs(10)).await,
        "hello from sandbox\n"
    );
    drop(sb);
    assert!(
        refused_within(addr, Duration::from_secs(2)).await,
        "the forwarder ends with the dropped sandbox"
    );
    assert_eq!(backend.reap(Some(&run)).await.expect("reap"), 1);
}

#[tokio::test]
async fn copy_out_refuses_outside_paths_and_oversize() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("copyout");
    let sb = backend.create(spec(&image, &run)).await.expect("create");
    let setup = sb
        .exec(exec(&[
            "sh",
            "-c",
            "mkdir -p out/sub && echo result > out/sub/r.txt && ln -s sub/r.txt out/link \
             && head -c 2000000 /dev/zero > big.bin \
             && mkdir evil && ln -s /etc evil/etc",
        ]))
        .await
        .expect("setup");
    assert!(setup.success(), "{setup:?}");
    let host = tempfile::tempdir().expect("tempdir");

    let n = sb
        .copy_out("/workspace/out", &host.path().join("out"), 1_000_000)
        .await
        .expect("copy out");
    assert_eq!(n, 7);
    assert_eq!(
        std::fs::read_to_string(host.path().join("out/sub/r.txt")).expect("read"),
        "result\n"
    );
    assert_eq!(
        std::fs::read_to_string(host.path().join("out/link")).expect("read through inner link"),
        "result\n"
    );

    let err = sb
        .copy_out("/workspace/../etc", &host.path().join("x"), 1_000_000)
        .await
        .expect_err("dotdot");
    assert!(
        matches!(err, SandboxError::PathOutsideSandbox { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("outside the sandbox"), "{err}");

    let err = sb
        .copy_out("/workspace/evil", &host.path().join("evil"), 1_000_000)
        .await
        .expect_err("escaping symlink");
    assert!(
        matches!(err, SandboxError::PathOutsideSandbox { .. }),
        "{err}"
    );

    let err = sb
        .copy_out("/workspace/big.bin", &host.path().join("big"), 1_000_000)
        .await
        .expect_err("over cap");
    assert!(
        matches!(err, SandboxError::OverSizeCap { cap: 1_000_000, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("cap of 1000000 bytes"), "{err}");

    let err = sb
        .copy_out("/workspace/missing", &host.path().join("m"), 1_000_000)
        .await
        .expect_err("missing");
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err}");
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn logs_main_exit_and_stop() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("logs");
    let mut s = spec(&image, &run);
    s.command = Some(vec![
        "sh".into(),
        "-c".into(),
        "echo hello out; echo hello err >&2; trap 'exit 0' TERM; sleep 1000 & wait".into(),
    ]);
    let sb = backend.create(s).await.expect("create");
    let deadline = Instant::now() + Duration::from_secs(10);
    let logs = loop {
        let logs = sb.logs(10_000).await.expect("logs");
        if logs.contains("hello err") || Instant::now() > deadline {
            break logs;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        logs.contains("hello out") && logs.contains("hello err"),
        "{logs}"
    );
    assert_eq!(sb.logs(4).await.expect("logs").len(), 4, "capped");
    assert_eq!(sb.main_exit().await.expect("main exit"), None);
    let began = Instant::now();
    sb.stop(Duration::from_secs(5)).await.expect("stop");
    assert!(began.elapsed() < Duration::from_secs(4), "SIGTERM honoured");
    assert_eq!(sb.main_exit().await.expect("main exit"), Some(0));
    sb.stop(Duration::from_secs(1)).await.expect("stop again");
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn freeze_stops_all_activity_and_keeps_the_files_for_copy_out() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("freeze");
    let mut s = spec(&image, &run);
    // The main process and a background one keep appending to files in the workspace, and
    // a SIGTERM handler would write one more line: a frozen sandbox gives them no grace.
    s.command = Some(vec![
        "sh".into(),
        "-c".into(),
        "trap 'echo term >> /workspace/main.txt; exit 0' TERM; \
         (while :; do echo bg >> /workspace/bg.txt; sleep 0.01; done) & \
         while :; do echo main >> /workspace/main.txt; sleep 0.01; done"
            .into(),
    ]);
    let sb = backend.create(s).await.expect("create");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(sb.may_run().await.expect("may run"));
    sb.freeze(Duration::from_secs(5)).await.expect("freeze");
    assert!(!sb.may_run().await.expect("may run"), "frozen");
    assert_eq!(sb.main_exit().await.expect("main exit"), None);
    let host = tempfile::tempdir().expect("tempdir");
    let first = host.path().join("first");
    sb.copy_out("/workspace", &first, 1_000_000)
        .await
        .expect("copy out a frozen sandbox");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = host.path().join("second");
    sb.copy_out("/workspace", &second, 1_000_000)
        .await
        .expect("copy out again");
    for f in ["main.txt", "bg.txt"] {
        let a = std::fs::read_to_string(first.join(f)).expect("first copy");
        let b = std::fs::read_to_string(second.join(f)).expect("second copy");
        assert!(!a.is_empty(), "{f} was being written");
        assert_eq!(a, b, "{f} changed after the freeze");
        assert!(!a.contains("term"), "{f}: a SIGTERM handler ran");
    }
    // Freezing again, and freezing a sandbox whose main process ended, are no-ops.
    sb.freeze(Duration::from_secs(1))
        .await
        .expect("freeze again");
    sb.remove().await.expect("remove a frozen sandbox");
    assert!(containers_of_run(&backend, &run).await.is_empty());

    let mut s = spec(&image, &run);
    s.command = Some(vec!["true".into()]);
    let sb = backend.create(s).await.expect("create");
    assert_eq!(sb.wait_exit().await.expect("wait"), 0);
    sb.freeze(Duration::from_secs(1))
        .await
        .expect("freeze an ended sandbox");
    assert!(!sb.may_run().await.expect("may run"));
    assert_eq!(sb.main_exit().await.expect("main exit"), Some(0));
    sb.remove().await.expect("remove");
}

/// Env var that turns this test binary into the reaper test's owner process.
const REAP_CHILD_ENV: &str = "SANDBOX_TEST_REAP_CHILD_RUN";

#[tokio::test]
async fn reaper_removes_containers_of_a_killed_owner() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    if let Ok(run) = std::env::var(REAP_CHILD_ENV) {
        // Child mode: create 5 containers, announce them, then wait to be killed.
        for _ in 0..5 {
            let sb = backend.create(spec(&image, &run)).await.expect("create");
            println!("container {}", sb.id());
        }
        println!("ready");
        tokio::time::sleep(Duration::from_secs(600)).await;
        return;
    }
    let run = run_id("reaper");
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "reaper_removes_containers_of_a_killed_owner",
            "--nocapture",
        ])
        .env(REAP_CHILD_ENV, &run)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn owner");
    let mut lines = {
        use tokio::io::AsyncBufReadExt;
        tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines()
    };
    let mut ids = Vec::new();
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(id) = line.strip_prefix("container ") {
                ids.push(id.to_string());
            }
            if line == "ready" {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(ready, "the owner process did not create its containers");
    assert_eq!(ids.len(), 5);
    let owner_pid = child.id().expect("pid");
    assert_eq!(containers_of_run(&backend, &run).await.len(), 5);

    // A reap while the owner lives removes nothing of it.
    backend.reap_dead(Some(&run)).await.expect("reap");
    assert_eq!(containers_of_run(&backend, &run).await.len(), 5);

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(owner_pid).expect("pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill owner");
    let _ = child.wait().await;
    let removed = backend.reap_dead(Some(&run)).await.expect("reap");
    assert_eq!(removed, 5);
    assert!(containers_of_run(&backend, &run).await.is_empty());
}

#[tokio::test]
async fn reap_of_a_run_removes_everything_of_it() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("reaprun");
    let owner = spec(&image, &run).owner;
    let _a = backend.create(spec(&image, &run)).await.expect("create");
    let _b = backend.create(spec(&image, &run)).await.expect("create");
    let net = backend.create_network(&owner, None).await.expect("network");
    let removed = backend.reap(Some(&run)).await.expect("reap");
    assert_eq!(removed, 3);
    assert!(containers_of_run(&backend, &run).await.is_empty());
    let gone = backend.client().inspect_network(&net.id, None).await;
    assert!(gone.is_err(), "network still exists");
}

#[tokio::test]
async fn bad_input_gives_typed_errors() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("bad");

    let err = backend
        .create(spec("research-bench/does-not-exist:nope", &run))
        .await
        .expect_err("missing image");
    assert!(matches!(err, SandboxError::ImageMissing(_)), "{err}");
    assert!(
        err.to_string()
            .contains("research-bench/does-not-exist:nope"),
        "{err}"
    );

    for limits in [
        Limits {
            cpus: 0.0,
            ..Limits::default()
        },
        Limits {
            cpus: f64::NAN,
            ..Limits::default()
        },
        Limits {
            memory_bytes: 1024,
            ..Limits::default()
        },
        Limits {
            pids: 0,
            ..Limits::default()
        },
    ] {
        let mut s = spec(&image, &run);
        s.limits = limits.clone();
        let err = backend.create(s).await.expect_err("invalid limits");
        assert!(
            matches!(err, SandboxError::InvalidLimits(_)),
            "{limits:?}: {err}"
        );
    }

    let mut s = spec(&image, &run);
    s.workdir = "relative/dir".into();
    let err = backend.create(s).await.expect_err("relative workdir");
    assert!(matches!(err, SandboxError::InvalidSpec(_)), "{err}");

    let began = Instant::now();
    let err = DockerBackend::connect_to("tcp://127.0.0.1:1")
        .await
        .expect_err("unreachable daemon");
    assert!(
        matches!(err, SandboxError::DaemonUnreachable { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
    assert!(began.elapsed() < Duration::from_secs(15));
    let err = DockerBackend::connect_to("bogus://nowhere")
        .await
        .expect_err("bogus scheme");
    assert!(
        matches!(err, SandboxError::DaemonUnreachable { .. }),
        "{err}"
    );
    assert!(
        containers_of_run(&backend, &run).await.is_empty(),
        "nothing leaked"
    );
}

/// Env var that turns this test binary into a process with a bogus `DOCKER_HOST`.
const BOGUS_HOST_CHILD_ENV: &str = "SANDBOX_TEST_BOGUS_HOST_CHILD";

#[tokio::test]
async fn bogus_docker_host_env_is_reported() {
    if std::env::var(BOGUS_HOST_CHILD_ENV).is_ok() {
        let err = DockerBackend::connect().await.expect_err("must fail");
        println!("ERROR: {err}");
        println!(
            "UNREACHABLE: {}",
            matches!(err, SandboxError::DaemonUnreachable { .. })
        );
        return;
    }
    let out = tokio::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "bogus_docker_host_env_is_reported",
            "--nocapture",
        ])
        .env(BOGUS_HOST_CHILD_ENV, "1")
        .env("DOCKER_HOST", "tcp://127.0.0.1:9")
        .output()
        .await
        .expect("run child");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("UNREACHABLE: true"), "{stdout}");
    assert!(
        stdout.contains("DOCKER_HOST") || stdout.contains("127.0.0.1:9"),
        "{stdout}"
    );
}

#[tokio::test]
async fn read_only_mounts_are_read_only() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("mounts");
    let host = tempfile::tempdir().expect("tempdir");
    std::fs::write(host.path().join("tool"), "tool-bytes").expect("write");
    let mut s = spec(&image, &run);
    s.mounts.push(sandbox::ReadOnlyMount {
        host_path: host.path().to_path_buf(),
        sandbox_path: "/opt/platform/bin".into(),
    });
    let sb = backend.create(s).await.expect("create");
    let out = sb
        .exec(exec(&["sh", "-c", "cat /opt/platform/bin/tool; touch /opt/platform/bin/x 2>/dev/null && echo WROTE || echo readonly"]))
        .await
        .expect("exec");
    assert_eq!(text(&out.stdout), "tool-bytesreadonly\n");
    sb.remove().await.expect("remove");
}

/// Env var that turns this test binary into a process with a signal reaper installed.
const SIGNAL_CHILD_ENV: &str = "SANDBOX_TEST_SIGNAL_CHILD_RUN";

#[tokio::test]
async fn sigterm_reaps_the_run_and_exits_143() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    if let Ok(run) = std::env::var(SIGNAL_CHILD_ENV) {
        let shared: std::sync::Arc<dyn Backend> = std::sync::Arc::new(backend.clone());
        let reaper = sandbox::SignalReaper::install(shared, run.clone()).expect("install");
        for _ in 0..2 {
            backend.create(spec(&image, &run)).await.expect("create");
        }
        println!("ready");
        let (signal, _removed) = reaper.wait_and_reap().await;
        std::process::exit(signal.exit_code());
    }
    let run = run_id("signal");
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "sigterm_reaps_the_run_and_exits_143",
            "--nocapture",
        ])
        .env(SIGNAL_CHILD_ENV, &run)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = {
        use tokio::io::AsyncBufReadExt;
        tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines()
    };
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line == "ready" {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(ready, "child did not get ready");
    assert_eq!(containers_of_run(&backend, &run).await.len(), 2);
    let pid = i32::try_from(child.id().expect("pid")).expect("pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("sigterm");
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("child exits")
        .expect("wait");
    assert_eq!(status.code(), Some(143));
    assert!(containers_of_run(&backend, &run).await.is_empty());
}

/// The networks of `run` the engine still has.
async fn networks_of_run(backend: &DockerBackend, run: &str) -> Vec<String> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![
            format!("{}=true", labels::MANAGED),
            format!("{}={run}", labels::RUN),
        ],
    )]);
    backend
        .client()
        .list_networks(Some(bollard::query_parameters::ListNetworksOptions {
            filters: Some(filters),
        }))
        .await
        .expect("list networks")
        .into_iter()
        .filter_map(|n| n.id)
        .collect()
}

async fn subnet_of(backend: &DockerBackend, id: &str) -> String {
    backend
        .client()
        .inspect_network(id, None)
        .await
        .expect("inspect")
        .ipam
        .and_then(|i| i.config)
        .and_then(|c| c.into_iter().next())
        .and_then(|c| c.subnet)
        .unwrap_or_default()
}

#[tokio::test]
async fn sixty_four_networks_at_once_come_from_the_pool_and_leave_nothing_behind() {
    let pool: sandbox::SubnetPool = "10.214.0.0/20".parse().expect("pool");
    let backend = backend().await.with_subnet_pool(pool);
    assert_eq!(backend.subnet_pool(), pool);
    let run = run_id("net64");
    let owner = spec("unused", &run).owner;
    let created =
        futures::future::join_all((0..64).map(|_| backend.create_network(&owner, Some(9)))).await;
    let mut nets = Vec::new();
    let mut failures = Vec::new();
    for r in created {
        match r {
            Ok(n) => nets.push(n),
            Err(e) => failures.push(e.to_string()),
        }
    }
    let mut subnets = std::collections::BTreeSet::new();
    for n in &nets {
        let subnet = subnet_of(&backend, &n.id).await;
        assert!(
            subnet.starts_with("10.214.") && subnet.ends_with("/28"),
            "{subnet}"
        );
        let gateway = n.allowed_endpoint.expect("endpoint").ip().to_string();
        assert!(gateway.starts_with("10.214."), "{gateway}");
        subnets.insert(subnet);
    }
    assert_eq!(networks_of_run(&backend, &run).await.len(), nets.len());
    let removed = futures::future::join_all(nets.iter().map(|n| backend.remove_network(n))).await;
    assert!(removed.iter().all(Result::is_ok), "{removed:?}");
    assert!(
        failures.is_empty(),
        "every network was created: {failures:?}"
    );
    assert_eq!(nets.len(), 64);
    assert_eq!(subnets.len(), 64, "no two networks share a subnet");
    assert!(
        networks_of_run(&backend, &run).await.is_empty(),
        "networks left behind"
    );
    let rules = std::process::Command::new("iptables")
        .args(["-w", "-S"])
        .output()
        .expect("iptables");
    let rules = String::from_utf8_lossy(&rules.stdout);
    for n in &nets {
        assert!(
            !rules.contains(&n.id[..12]),
            "firewall chain left for {}",
            n.id
        );
    }
}

#[tokio::test]
async fn a_pool_shared_with_another_process_skips_its_subnets_and_says_when_it_is_full() {
    // Two backends = two allocators that know nothing of each other, as two processes would.
    let pool: sandbox::SubnetPool = "10.214.16.0/27".parse().expect("pool");
    assert_eq!(pool.len(), 2);
    let a = backend().await.with_subnet_pool(pool);
    let b = backend().await.with_subnet_pool(pool);
    let run = run_id("netshare");
    let owner = spec("unused", &run).owner;
    let b1 = b.create_network(&owner, None).await.expect("b1");
    let a1 = a
        .create_network(&owner, None)
        .await
        .expect("a1 skips b1's subnet");
    assert_ne!(subnet_of(&a, &a1.id).await, subnet_of(&b, &b1.id).await);
    // b still believes a1's subnet free: the engine refuses it as overlapping, b moves on,
    // finds the pool full and says so.
    let full = b
        .create_network(&owner, None)
        .await
        .expect_err("the pool is full");
    assert!(
        matches!(full, SandboxError::NetworkPoolExhausted { size: 2, .. }),
        "{full:?}"
    );
    let message = full.to_string();
    assert!(message.contains("10.214.16.0/27:28"), "{message}");
    a.remove_network(&a1).await.expect("remove a1");
    let b2 = b
        .create_network(&owner, None)
        .await
        .expect("a1's subnet is free again");
    b.remove_network(&b1).await.expect("remove b1");
    b.remove_network(&b2).await.expect("remove b2");
    assert!(networks_of_run(&b, &run).await.is_empty());
}

/// How many archive uploads (`extract-to-dir` events) the engine saw for a container between
/// two Unix times.
async fn uploads_to(backend: &DockerBackend, container: &str, since: i64, until: i64) -> usize {
    use futures::StreamExt;
    let filters = HashMap::from([
        ("container".to_string(), vec![container.to_string()]),
        ("event".to_string(), vec!["extract-to-dir".to_string()]),
    ]);
    backend
        .client()
        .events(Some(bollard::query_parameters::EventsOptions {
            since: Some(since.to_string()),
            until: Some(until.to_string()),
            filters: Some(filters),
        }))
        .filter(|e| futures::future::ready(e.is_ok()))
        .count()
        .await
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[tokio::test]
async fn copy_in_many_sends_one_upload_with_owners_and_modes() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("copymany");
    let since = unix_now() - 1;
    let sb = backend.create(spec(&image, &run)).await.expect("create");

    let host = tempfile::tempdir().expect("tmp");
    let work = host.path().join("work");
    std::fs::create_dir_all(work.join("pkg/sub")).expect("mkdir");
    std::fs::write(work.join("main.py"), "print('hi')\n").expect("write");
    std::fs::write(work.join("pkg/sub/deep.txt"), "deep\n").expect("write");
    std::os::unix::fs::symlink("main.py", work.join("link.py")).expect("symlink");
    let hidden = host.path().join("hidden");
    std::fs::create_dir_all(&hidden).expect("mkdir");
    std::fs::write(hidden.join("expected.csv"), "a,b\n1,2\n").expect("write");
    let config = host.path().join("config.json");
    std::fs::write(&config, "{}\n").expect("write");

    // Uploads so far (creating the container prepares its workdir).
    let before = uploads_to(&backend, sb.id(), since, unix_now() + 1).await;
    sb.copy_in_many(&[
        sandbox::CopyIn::new(&work, "/workspace"),
        sandbox::CopyIn::new(&hidden, "/grader/hidden")
            .owned_by(0, 0)
            .with_mode(0o700),
        sandbox::CopyIn::new(&config, "/grader/work/run/config.json")
            .owned_by(0, 0)
            .with_mode(0o600),
    ])
    .await
    .expect("copy in");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let until = unix_now() + 1;

    let mut probe = exec(&[
        "sh",
        "-c",
        "stat -c '%u:%g %a %n' /workspace /workspace/pkg/sub/deep.txt /grader/hidden \
         /grader/hidden/expected.csv /grader/work/run/config.json /grader; \
         readlink /workspace/link.py; cat /workspace/pkg/sub/deep.txt",
    ]);
    probe.user = Some("0:0".into());
    let out = sb.exec(probe).await.expect("exec");
    assert!(out.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in [
        "1000:1000 755 /workspace\n",
        "1000:1000 644 /workspace/pkg/sub/deep.txt\n",
        "0:0 700 /grader/hidden\n",
        "0:0 644 /grader/hidden/expected.csv\n",
        "0:0 600 /grader/work/run/config.json\n",
        "0:0 755 /grader\n",
        "main.py\n",
        "deep\n",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
    // The agent's uid cannot read the hidden directory.
    let out = sb
        .exec(exec(&["cat", "/grader/hidden/expected.csv"]))
        .await
        .expect("exec");
    assert!(!out.success(), "uid 1000 read a 0700 root directory");

    let uploads = uploads_to(&backend, sb.id(), since, until).await - before;
    assert_eq!(uploads, 1, "three items, one upload");

    let bad = sb
        .copy_in_many(&[sandbox::CopyIn::new(&config, "relative/path")])
        .await
        .expect_err("relative destination");
    assert!(matches!(bad, SandboxError::InvalidSpec(_)), "{bad}");
    sb.remove().await.expect("remove");
}

#[tokio::test]
async fn copy_in_is_one_upload_and_keeps_its_ownership_rules() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("copyone");
    let since = unix_now() - 1;
    let sb = backend.create(spec(&image, &run)).await.expect("create");
    let host = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(host.path().join("a/b")).expect("mkdir");
    std::fs::write(host.path().join("a/b/f.txt"), "f\n").expect("write");

    let before = uploads_to(&backend, sb.id(), since, unix_now() + 1).await;
    sb.copy_in(host.path(), "/workspace")
        .await
        .expect("copy in");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let after = uploads_to(&backend, sb.id(), since, unix_now() + 1).await;
    assert_eq!(
        after - before,
        1,
        "an existing destination takes one upload"
    );

    // A missing chain is created owned by the sandbox user, as before.
    sb.copy_in(host.path(), "/tmp/x/y/z")
        .await
        .expect("copy in");
    let mut probe = exec(&[
        "stat",
        "-c",
        "%u:%g %a %n",
        "/tmp/x",
        "/tmp/x/y/z",
        "/tmp/x/y/z/a/b/f.txt",
        "/workspace/a/b/f.txt",
    ]);
    probe.user = Some("0:0".into());
    let out = sb.exec(probe).await.expect("exec");
    assert!(out.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "1000:1000 755 /tmp/x\n1000:1000 755 /tmp/x/y/z\n1000:1000 644 /tmp/x/y/z/a/b/f.txt\n1000:1000 644 /workspace/a/b/f.txt\n"
    );
    sb.remove().await.expect("remove");
}

/// `create_with`: the working directory and the files are in place before the main process
/// starts (it sees them at once), sent as one upload.
#[tokio::test]
async fn create_with_copies_in_before_the_start_in_one_upload() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("createwith");
    let host = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(host.path().join("w/sub")).expect("mkdir");
    std::fs::write(host.path().join("w/sub/data.txt"), "ready\n").expect("write");
    let mut s = spec(&image, &run);
    // The main process reads the file the moment it starts, then idles.
    s.command = Some(vec![
        "sh".into(),
        "-c".into(),
        "cat /workspace/sub/data.txt > /tmp/seen 2>&1; sleep 600".into(),
    ]);
    let since = unix_now() - 1;
    let sb = backend
        .create_with(
            s,
            &[sandbox::CopyIn::new(host.path().join("w"), "/workspace")],
        )
        .await
        .expect("create");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let uploads = uploads_to(&backend, sb.id(), since, unix_now() + 1).await;
    let mut probe = exec(&[
        "sh",
        "-c",
        "cat /tmp/seen; stat -c '%u:%g %a %n' /workspace /workspace/sub/data.txt",
    ]);
    probe.user = Some("0:0".into());
    let out = sb.exec(probe).await.expect("exec");
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("ready\n"), "{stdout}");
    assert!(stdout.contains("1000:1000 755 /workspace\n"), "{stdout}");
    assert!(
        stdout.contains("1000:1000 644 /workspace/sub/data.txt\n"),
        "{stdout}"
    );
    assert_eq!(uploads, 1, "workdir and files in one upload");
    sb.remove().await.expect("remove");
}

/// `wait_exit` answers when the main process exits, with its code (zero or not).
#[tokio::test]
async fn wait_exit_reports_the_exit_code() {
    let backend = backend().await;
    let image = python_image(&backend).await;
    let run = run_id("waitexit");
    for code in [0, 7] {
        let mut s = spec(&image, &run);
        s.command = Some(vec![
            "sh".into(),
            "-c".into(),
            format!("sleep 1; exit {code}"),
        ]);
        let sb = backend.create(s).await.expect("create");
        let got = tokio::time::timeout(Duration::from_secs(60), sb.wait_exit())
            .await
            .expect("exit seen")
            .expect("wait");
        assert_eq!(got, code);
        assert_eq!(sb.main_exit().await.expect("inspect"), Some(code));
        sb.remove().await.expect("remove");
    }
}
