//! Shared helpers for the sandbox's integration tests (real Docker Engine).
#![allow(dead_code)]

use std::collections::BTreeMap;

use sandbox::images;
use sandbox::{DockerBackend, Limits, NetworkPolicy, Owner, Role, SandboxSpec};

pub async fn backend() -> DockerBackend {
    DockerBackend::connect()
        .await
        .expect("these tests need the Docker Engine")
}

/// The `python` platform image, built if missing (CI builds it through this call).
pub async fn python_image(backend: &DockerBackend) -> String {
    let recipe = images::recipe("python").expect("python recipe");
    images::ensure(backend, &recipe, |p| eprintln!("image: {p:?}"))
        .await
        .expect("building the python image")
}

/// A run id unique to this test process.
pub fn run_id(test: &str) -> String {
    format!("test-sandbox-{test}-{}", std::process::id())
}

pub fn spec(image: &str, run: &str) -> SandboxSpec {
    SandboxSpec {
        image: image.to_string(),
        owner: Owner {
            run_id: run.to_string(),
            trial_id: Some("t1".to_string()),
            role: Role::Utility,
        },
        env: BTreeMap::new(),
        workdir: "/workspace".to_string(),
        user: None,
        limits: Limits::default(),
        mounts: Vec::new(),
        network: NetworkPolicy::None,
        command: None,
    }
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Two listeners on every host address, each greeting with `hello from host`: the port a
/// trial network allows, and one it must not reach. Returns (allowed, forbidden).
pub async fn host_listeners() -> (u16, u16) {
    let mut ports = Vec::new();
    for _ in 0..2 {
        let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
            .await
            .expect("bind");
        ports.push(listener.local_addr().expect("addr").port());
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                use tokio::io::AsyncWriteExt;
                let _ = conn.write_all(b"hello from host\n").await;
            }
        });
    }
    (ports[0], ports[1])
}

/// A sandbox's main command: serve `hello from sandbox` on port 8700.
pub fn serve_8700() -> Vec<String> {
    vec![
        "python3".into(),
        "-c".into(),
        "import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('0.0.0.0', 8700)); s.listen()\nwhile True:\n    c, _ = s.accept(); c.sendall(b'hello from sandbox\\n'); c.close()\n".into(),
    ]
}

/// A Python script, run inside a sandbox, that prints `ok IP PORT GREETING` or
/// `blocked IP PORT` for each target, then `resolved` or `no-resolve` for a public name.
pub fn reach_probe(targets: &[(&str, u16)]) -> String {
    let mut script = String::from(
        "import socket\n\
         def probe(ip, port):\n\
         \x20   try:\n\
         \x20       c = socket.create_connection((ip, port), timeout=2)\n\
         \x20       print('ok', ip, port, c.recv(100).decode().strip())\n\
         \x20   except OSError:\n\
         \x20       print('blocked', ip, port)\n",
    );
    for (ip, port) in targets {
        script.push_str(&format!("probe('{ip}', {port})\n"));
    }
    script.push_str(
        "try:\n\
         \x20   socket.getaddrinfo('deb.debian.org', 80); print('resolved')\n\
         except OSError:\n\
         \x20   print('no-resolve')\n",
    );
    script
}

/// What `addr` (a sandbox's port 8700 as the host reaches it) says once it answers (empty when
/// it does not within `wait`).
pub async fn banner_at(addr: std::net::SocketAddr, wait: std::time::Duration) -> String {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let mut reply = String::new();
        if let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await {
            use tokio::io::AsyncReadExt;
            let _ = conn.read_to_string(&mut reply).await;
        }
        if !reply.is_empty() || std::time::Instant::now() > deadline {
            return reply;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Exec semantics every exec path keeps (Docker's exec API, the docker backend's exec channel):
/// each check runs its execs as `user` in `sb` and removes nothing.
pub mod exec_checks {
    use std::time::{Duration, Instant};

    use sandbox::{ExecRequest, Sandbox};

    use super::text;

    fn exec(argv: &[&str], user: Option<&str>) -> ExecRequest {
        let mut r = ExecRequest::new(argv.iter().copied());
        r.timeout = Duration::from_secs(60);
        r.user = user.map(str::to_owned);
        r
    }

    /// The deadline kills the whole tree within a second, with what it printed kept.
    pub async fn deadline_kills_the_tree(sb: &dyn Sandbox, user: Option<&str>) {
        let mut req = exec(
            &[
                "sh",
                "-c",
                "sleep 301 & sleep 302 & echo started; sleep 303",
            ],
            user,
        );
        req.timeout = Duration::from_secs(2);
        let began = Instant::now();
        let out = sb.exec(req).await.expect("exec");
        let took = began.elapsed();
        assert!(out.timed_out, "{out:?}");
        assert_eq!(out.exit_code, None);
        assert!(!out.success());
        assert_eq!(text(&out.stdout), "started\n");
        assert!(took >= Duration::from_secs(2), "returned early: {took:?}");
        assert!(
            took < Duration::from_secs(3),
            "not killed within 1 s of the deadline: {took:?}"
        );
        let ps = sb
            .exec(exec(&["ps", "-eo", "args"], None))
            .await
            .expect("ps");
        let ps = text(&ps.stdout);
        assert!(!ps.contains("sleep 30"), "survivors:\n{ps}");
    }

    /// Output over the cap is cut and flagged; an absurd timeout is no deadline.
    pub async fn output_caps_truncate(sb: &dyn Sandbox, user: Option<&str>) {
        let mut req = exec(
            &[
                "sh",
                "-c",
                "head -c 100000 /dev/zero | tr '\\0' a; echo err >&2; exit 3",
            ],
            user,
        );
        req.output_cap = 1000;
        let out = sb.exec(req).await.expect("exec");
        assert_eq!(out.stdout.len(), 1000);
        assert_eq!(text(&out.stderr), "err\n");
        assert!(out.truncated);
        assert_eq!(out.exit_code, Some(3));
        let mut req = exec(&["true"], user);
        req.timeout = Duration::MAX;
        assert!(sb.exec(req).await.expect("exec").success());
    }

    /// A command that exhausts the container's memory (its limit well under 300 MiB) is an
    /// OOM outcome, and the sandbox takes execs after it.
    pub async fn oom_is_reported(sb: &dyn Sandbox, user: Option<&str>) {
        let out = sb
            .exec(exec(
                &[
                    "python3",
                    "-c",
                    "x = bytearray(600 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096]); print('survived')",
                ],
                user,
            ))
            .await
            .expect("exec");
        assert!(out.oom_killed, "{out:?}");
        assert!(!out.success());
        assert_eq!(out.exit_code, None);
        assert!(!text(&out.stdout).contains("survived"));
        let ok = sb
            .exec(exec(&["true"], None))
            .await
            .expect("exec after oom");
        assert!(ok.success() && !ok.oom_killed, "{ok:?}");
    }
}
