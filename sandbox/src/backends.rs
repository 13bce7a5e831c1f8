//! Which backend sandboxes run on: one tagged configuration ([`BackendConfig`]) and one
//! [`BackendConfig::connect`], the only place a backend is chosen; the removal of what dead
//! runs left goes through the chosen backend too ([`BackendConfig::reap_dead`]). A new backend
//! is one module implementing [`Backend`] plus one variant here.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::swarm::Transport;
use crate::{Backend, DockerBackend, SandboxError, SubnetPool, SwarmBackend};

/// A backend's name, as settings give it (`--backend docker|swarm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// Containers on the local Docker Engine ([`DockerBackend`]).
    #[default]
    Docker,
    /// Docker Swarm services ([`SwarmBackend`]).
    Swarm,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Docker => "docker",
            Self::Swarm => "swarm",
        }
    }
}

impl FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "docker" => Ok(Self::Docker),
            "swarm" => Ok(Self::Swarm),
            other => Err(format!(
                "`{other}` is not a backend; use `docker` or `swarm`"
            )),
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for BackendKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BackendKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The swarm backend's settings.
#[derive(Debug, Clone)]
pub struct SwarmConfig {
    /// The relays' image: it must have `python3` (the platform's `python` image).
    pub relay_image: String,
    /// How files and execs reach the sandboxes.
    pub transport: Transport,
    /// Where the per-trial overlays take their subnets.
    pub overlay_pool: SubnetPool,
    /// Extra placement constraints of every service.
    pub constraints: Vec<String>,
    /// Ports of a sandbox the relay forwards (the adapter's A2A port).
    pub forwarded_ports: Vec<u16>,
}

/// The backend a run's sandboxes use, with that backend's settings.
#[derive(Debug, Clone)]
pub enum BackendConfig {
    Docker,
    Swarm(SwarmConfig),
}

impl BackendConfig {
    pub fn kind(&self) -> BackendKind {
        match self {
            Self::Docker => BackendKind::Docker,
            Self::Swarm(_) => BackendKind::Swarm,
        }
    }

    /// The backend over `docker` (the engine every backend here drives; a swarm one must be a
    /// Swarm manager: [`SandboxError::SwarmUnavailable`] otherwise).
    pub async fn connect(self, docker: DockerBackend) -> Result<Arc<dyn Backend>, SandboxError> {
        Ok(match self {
            Self::Docker => Arc::new(docker),
            Self::Swarm(c) => Arc::new(swarm(docker, c).await?),
        })
    }

    /// Removes what dead runs left on this backend, the agents parked for a resume of a
    /// crashed run included (what `green-agent reap` does); the number removed. Swarm: the
    /// services and overlays, then the engine's containers and networks.
    pub async fn reap_dead(self, docker: DockerBackend) -> Result<usize, SandboxError> {
        match self {
            Self::Docker => docker.reap_dead_and_parked().await,
            Self::Swarm(c) => swarm(docker, c).await?.reap(None).await,
        }
    }
}

async fn swarm(docker: DockerBackend, c: SwarmConfig) -> Result<SwarmBackend, SandboxError> {
    Ok(SwarmBackend::new(docker, c.relay_image)
        .await?
        .with_transport(c.transport)
        .with_overlay_pool(c.overlay_pool)
        .with_constraints(c.constraints)
        .with_forwarded_ports(c.forwarded_ports))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backend_kind_reads_and_prints_its_name_and_names_the_choices_otherwise() {
        for kind in [BackendKind::Docker, BackendKind::Swarm] {
            assert_eq!(kind.as_str().parse::<BackendKind>(), Ok(kind));
            let json = serde_json::to_string(&kind).expect("json");
            assert_eq!(serde_json::from_str::<BackendKind>(&json).ok(), Some(kind));
        }
        let e = "kubernetes"
            .parse::<BackendKind>()
            .expect_err("not a backend");
        assert!(e.contains("use `docker` or `swarm`"), "{e}");
        assert_eq!(BackendConfig::Docker.kind(), BackendKind::Docker);
    }
}
