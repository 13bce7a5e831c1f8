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

/// What `addr:8700` says once it answers (empty when it does not within `wait`).
pub async fn banner_at(addr: std::net::IpAddr, wait: std::time::Duration) -> String {
    let deadline = std::time::Instant::now() + wait;
    loop {
        let mut reply = String::new();
        if let Ok(mut conn) = tokio::net::TcpStream::connect((addr, 8700)).await {
            use tokio::io::AsyncReadExt;
            let _ = conn.read_to_string(&mut reply).await;
        }
        if !reply.is_empty() || std::time::Instant::now() > deadline {
            return reply;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
