//! `green-agent reap`: removes leftover containers, networks (and Swarm services) of dead runs.

use anyhow::Context as _;

use super::Context;
use crate::config::Layer;

pub async fn command(ctx: &Context) -> anyhow::Result<i32> {
    let settings = ctx.settings(&Layer::default())?;
    let backend = sandbox::docker::DockerBackend::connect()
        .await
        .context("connecting to Docker")?;
    // Parked agents (kept for a resume of their crashed run) go too.
    let n = match settings.backend {
        crate::config::BackendKind::Docker => backend.reap_dead_and_parked().await?,
        // Services and overlays too (then the docker backend's objects).
        crate::config::BackendKind::Swarm => {
            let relay = sandbox::images::resolve("python").await;
            let swarm = sandbox::SwarmBackend::new(backend, relay).await?;
            sandbox::Backend::reap(&swarm, None).await?
        }
    };
    println!("removed {n} leftover object(s) of dead runs");
    Ok(0)
}
