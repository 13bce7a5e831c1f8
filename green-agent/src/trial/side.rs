//! The two kinds of white agent a trial can drive: one hosted in a sandbox of ours (its
//! workspace is copied out after it stops), or an external A2A server (its workspace travels
//! as message parts, its outputs as artifacts).

use std::sync::Arc;

use a2a_protocol::A2aClient;
use sandbox::Sandbox;

use crate::url_files::FileServer;

/// The agent of one attempt, once launched.
#[derive(Debug)]
pub enum AgentSide {
    Hosted(Hosted),
    External(External),
}

/// An agent running in a sandbox we created (its adapter serves A2A).
#[derive(Debug)]
pub struct Hosted {
    pub sandbox: Arc<dyn Sandbox>,
    pub client: A2aClient,
}

/// An agent already serving A2A at `url`.
#[derive(Debug)]
pub struct External {
    pub url: String,
    pub client: A2aClient,
    /// Serves workspace files over the inline threshold as `url` parts; stopped when dropped.
    pub file_server: Option<FileServer>,
}

impl AgentSide {
    pub fn client(&self) -> &A2aClient {
        match self {
            AgentSide::Hosted(h) => &h.client,
            AgentSide::External(e) => &e.client,
        }
    }

    /// The sandbox of a hosted agent.
    pub fn sandbox(&self) -> Option<&dyn Sandbox> {
        match self {
            AgentSide::Hosted(h) => Some(h.sandbox.as_ref()),
            AgentSide::External(_) => None,
        }
    }

    pub fn file_server(&self) -> Option<&FileServer> {
        match self {
            AgentSide::Hosted(_) => None,
            AgentSide::External(e) => e.file_server.as_ref(),
        }
    }
}

impl AgentSide {
    /// Whether the agent ran isolated: a hosted agent as its sandbox says; an external one
    /// as the run's backend does.
    pub fn is_isolated(&self, backend: &dyn sandbox::Backend) -> bool {
        match self {
            AgentSide::Hosted(h) => h.sandbox.is_isolated(),
            AgentSide::External(_) => matches!(backend.name(), "docker" | "swarm"),
        }
    }
}
