//! One trial, as named phases over an [`AgentSide`] (hosted in our sandbox, or external):
//!
//! | phase | module | does |
//! |---|---|---|
//! | ahead | `ahead` | before the trial's slot: the agent's sandbox created and started, the grading sandbox created, staged and probed (no attempt recorded) |
//! | prepare | `prepare` | scratch folders; proxy registration (per-trial token) |
//! | launch | `launch` | hosted: network + sandbox + adapter until its card is served; external: connect |
//! | drive | `drive` | `SendMessage`, poll `GetTask`, timeouts → `CancelTask` |
//! | collect | `collect` (+ `outputs`) | copy the workspace out, A2A artifacts → store, within `collect_timeout` (over it: score 0, `collection_timeout`); agent sandbox removed |
//! | grade | `grade` | fresh grading sandbox with held-out files → `rubrics::grade` |
//! | record | `record` | the [`TrialResult`](crate::model::TrialResult) from its parts; store write |
//! | reattach | `reattach` | (a resumed run) instead of prepare + launch: take over the agent, or the collected outputs, a dead green agent left |
//!
//! `pipeline` runs them in order and retries infrastructure failures; `env` holds what they
//! share, `resources` what an attempt must remove, `phases` the phase clock.

pub mod ahead;
mod collect;
mod drive;
mod env;
mod grade;
mod launch;
mod media;
mod outputs;
mod phases;
mod pipeline;
mod prepare;
mod reattach;
mod record;
mod resources;
mod side;
mod turns;

pub use ahead::Ahead;
pub use env::{InfraError, Observer, RunEnv, Teardown, TrialInput};
pub use grade::grader_limits;
pub use launch::agent_limits;
pub use pipeline::{run_prepared_trial, run_trial};
pub use reattach::{Gathered, Leftovers, ungradable};
pub use record::record;
pub use side::{AgentSide, External, Hosted};
