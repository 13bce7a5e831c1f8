//! Phase 1, prepare: the attempt's scratch folders and, for a model agent, its registration
//! with the run's model proxy (a per-trial dummy token).

use std::path::PathBuf;

use super::env::{InfraError, RunEnv, TrialInput, io};

/// What every later phase of an attempt uses.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Removed when the attempt ends.
    pub(crate) work: tempfile::TempDir,
    /// The agent's new or changed files, staged for grading.
    pub(crate) outputs_dir: PathBuf,
    /// The trial's dummy proxy token (model agents with a proxy only).
    pub(crate) proxy_token: Option<String>,
}

/// `reuse_token`: the proxy token a reattached agent already holds (registered again as is).
pub(crate) fn prepare(
    env: &RunEnv,
    input: &TrialInput,
    reuse_token: Option<&str>,
) -> Result<Prepared, InfraError> {
    let work = tempfile::tempdir().map_err(io("creating a scratch folder"))?;
    let outputs_dir = work.path().join("outputs");
    std::fs::create_dir_all(&outputs_dir).map_err(io("creating the outputs folder"))?;
    let proxy_token = match (&env.proxy, input.agent.uses_model()) {
        (Some(p), true) => Some(
            p.register(&input.planned.id, env.settings.trial_budget(), reuse_token)
                .map_err(InfraError::Proxy)?,
        ),
        _ => None,
    };
    Ok(Prepared {
        work,
        outputs_dir,
        proxy_token,
    })
}
