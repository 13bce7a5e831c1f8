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
    let n = settings.backend_config()?.reap_dead(backend).await?;
    println!("removed {n} leftover object(s) of dead runs");
    Ok(0)
}
