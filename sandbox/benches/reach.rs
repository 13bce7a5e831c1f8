//! What an agent sandbox the host must reach costs, with a network and without: per round,
//! (a) an internal network (no allowed port) + a container on it serving port 8700 + the host's
//! first reply from it through [`sandbox::Sandbox::host_endpoint`] + removal of both, against
//! (b) the same container under `NetworkPolicy::Loopback` (no network; the host reaches it
//! through the loopback forwarder) + its removal. Rounds alternate which goes first; prints the
//! medians of each part and the ratio (b) ÷ (a).
//!
//! `cargo bench -p sandbox --bench reach` (`BENCH_RUNS=N` to change the 10 rounds).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sandbox::images;
use sandbox::{Backend, DockerBackend, Limits, NetworkPolicy, Owner, Role, SandboxSpec};
use tokio::io::AsyncReadExt;

const SERVE: &str = "import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('0.0.0.0', 8700)); s.listen()\nwhile True:\n    c, _ = s.accept(); c.sendall(b'hi\\n'); c.close()\n";

/// Milliseconds of each part of one round.
#[derive(Default)]
struct Parts {
    network: f64,
    create: f64,
    reached: f64,
    removed: f64,
}

impl Parts {
    fn total(&self) -> f64 {
        self.network + self.create + self.reached + self.removed
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Polls `addr` until it answers `hi` (the server starts within the container's start).
async fn first_reply(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut reply = String::new();
        if let Ok(mut conn) = tokio::net::TcpStream::connect(addr).await {
            let _ = conn.read_to_string(&mut reply).await;
        }
        if reply == "hi\n" {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("no reply from {addr}").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn round(
    backend: &DockerBackend,
    image: &str,
    run_id: &str,
    loopback: bool,
) -> Result<Parts, Box<dyn std::error::Error>> {
    let owner = Owner {
        run_id: run_id.to_owned(),
        trial_id: Some("t".into()),
        role: Role::Agent,
    };
    let mut parts = Parts::default();
    let t = Instant::now();
    let network = if loopback {
        None
    } else {
        Some(backend.create_network(&owner, None).await?)
    };
    parts.network = ms(t);
    let t = Instant::now();
    let sb = backend
        .create(SandboxSpec {
            image: image.to_owned(),
            owner,
            env: Default::default(),
            workdir: "/workspace".into(),
            user: None,
            limits: Limits::default(),
            mounts: Vec::new(),
            network: network
                .clone()
                .map_or(NetworkPolicy::Loopback, NetworkPolicy::Internal),
            command: Some(vec!["python3".into(), "-c".into(), SERVE.into()]),
        })
        .await?;
    parts.create = ms(t);
    let t = Instant::now();
    first_reply(sb.host_endpoint(8700).await?).await?;
    parts.reached = ms(t);
    let t = Instant::now();
    sb.remove().await?;
    if let Some(n) = &network {
        backend.remove_network(n).await?;
    }
    parts.removed = ms(t);
    Ok(parts)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10)
        .max(1);
    let backend = DockerBackend::connect().await?;
    if !backend.reaches_loopback().await {
        return Err(
            "this process cannot reach sandbox loopbacks (run as root beside the engine)".into(),
        );
    }
    let recipe = images::recipe("python").ok_or("no python recipe")?;
    let image = images::ensure(&backend, &recipe, |p| eprintln!("image: {p:?}")).await?;
    let run_id = format!("bench-reach-{}", std::process::id());
    println!("image {image}, {runs} interleaved rounds");
    let (mut net, mut lo) = (Vec::new(), Vec::new());
    for r in 0..runs {
        for loopback in if r % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        } {
            let parts = round(&backend, &image, &run_id, loopback).await?;
            if loopback { &mut lo } else { &mut net }.push(parts);
        }
    }
    backend.reap(Some(&run_id)).await?;
    for (label, rows) in [("internal network", &net), ("loopback (no network)", &lo)] {
        println!(
            "{label:<22} total {:7.1} ms   network {:6.1}   create+start {:6.1}   first reply {:6.1}   removal {:6.1}   (medians)",
            median(rows.iter().map(Parts::total).collect()),
            median(rows.iter().map(|p| p.network).collect()),
            median(rows.iter().map(|p| p.create).collect()),
            median(rows.iter().map(|p| p.reached).collect()),
            median(rows.iter().map(|p| p.removed).collect()),
        );
    }
    let ratios = net
        .iter()
        .zip(&lo)
        .map(|(a, b)| b.total() / a.total())
        .collect();
    println!(
        "loopback ÷ internal network (median of per-round ratios): {:.2}x",
        median(ratios)
    );
    Ok(())
}
