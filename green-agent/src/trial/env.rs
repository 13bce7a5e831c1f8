//! What a trial runs with: the run's shared environment, the trial's input, the observer of its
//! phases, and the infrastructure failures that make an attempt be retried.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use sandbox::{Backend, ReadOnlyMount};
use white_agent_adapter::contract::DriverKind;

use crate::agents::AgentSpec;
use crate::config::Settings;
use crate::model::{PlannedTrial, TrialResult};
use crate::proxy::Proxy;
use crate::store::Store;

pub use super::resources::Teardown;

/// What every trial of a run shares.
#[derive(Debug, Clone)]
pub struct RunEnv {
    pub backend: Arc<dyn Backend>,
    pub store: Store,
    pub run_id: String,
    pub settings: Settings,
    pub adapter_bin: PathBuf,
    pub proxy: Option<Proxy>,
    /// The LLM judge for judge-based graders (`None`: they report `judge_unavailable`).
    pub judge: Option<Arc<rubrics::Judge>>,
    /// Staged agent CLIs (driver name → mount).
    pub staged: BTreeMap<DriverKind, ReadOnlyMount>,
    pub observer: Arc<dyn Observer>,
    /// What a dead owner of the run left (a resumed run): agents to reattach to, collected
    /// outputs to grade. Empty for a new run.
    pub leftovers: Arc<super::Leftovers>,
    /// Removals of finished attempts' containers and networks, running in the background; the
    /// run waits for them ([`Teardown::wait`]) before it ends.
    pub teardown: Teardown,
    /// Answers of the graders' trusted probes per grading image (asked once per image).
    pub probes: rubrics::ImageProbes,
}

/// Receives phase changes (the live terminal view).
pub trait Observer: Send + Sync + std::fmt::Debug {
    fn phase(&self, trial: &PlannedTrial, phase: &str);
    fn finished(&self, trial: &PlannedTrial, result: &TrialResult);
    /// A line about the run as a whole (how many trials run at once, and why).
    fn note(&self, _text: &str) {}
}

/// One trial to run.
#[derive(Debug, Clone)]
pub struct TrialInput {
    pub planned: PlannedTrial,
    pub task: Arc<tasks::Task>,
    pub agent: AgentSpec,
    /// The resolved image reference of the task.
    pub image: String,
}

/// An infrastructure failure: the platform could not run the trial (retried).
#[derive(Debug, thiserror::Error)]
pub enum InfraError {
    #[error("sandbox: {0}")]
    Sandbox(#[from] sandbox::SandboxError),
    #[error("store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("A2A: {0}")]
    A2a(#[from] a2a_protocol::ClientError),
    #[error("the agent did not serve its card within {secs}s{detail}")]
    NotReady { secs: u64, detail: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("grading: {0}")]
    Grading(String),
    #[error("model proxy: {0}")]
    Proxy(String),
    /// A setting that cannot work (not retried: the trial is recorded as
    /// `agent_incompatible`).
    #[error("configuration: {0}")]
    Config(String),
    /// The agent a dead green agent left cannot be reattached to (its container is gone, it
    /// no longer knows the task, ...): the trial starts over, flagged (not an infra retry).
    #[error("the agent left by the previous run process is gone: {0}")]
    AgentGone(String),
    /// The green agent's own code panicked in this trial: the trial ends (not retried, the
    /// same input would panic again), the process and the other trials go on.
    #[error("the green agent panicked in this trial (a platform bug): {0}")]
    Panicked(String),
}

impl InfraError {
    /// A fixed refusal no retry changes: the agent cannot be served by this client (no
    /// compatible interface, no card, an unsupported operation or version, refused
    /// credentials), or a setting for it cannot work.
    pub fn is_incompatible(&self) -> bool {
        match self {
            InfraError::A2a(e) => matches!(
                e.kind(),
                a2a_protocol::ErrorKind::Incompatible | a2a_protocol::ErrorKind::Unauthorized
            ),
            InfraError::Config(_) => true,
            _ => false,
        }
    }
}

/// Maps an I/O error to [`InfraError::Io`] naming what was being done.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> InfraError {
    let what = what.into();
    move |source| InfraError::Io { what, source }
}
