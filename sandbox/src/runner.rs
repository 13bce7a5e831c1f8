//! The sandbox runner (`runner.py`, stdlib Python run as root in a container) and the exec
//! messages both of its transports carry: the swarm backend's HTTP (`swarm::runner`) and the
//! docker backend's exec channel (`docker::channel`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{ExecOutcome, ExecRequest};

/// The runner program.
pub(crate) const RUNNER_PY: &str = include_str!("runner.py");

/// An exec as the runner takes it (defaults already applied by the host).
#[derive(Debug, Serialize)]
pub(crate) struct ExecBody<'a> {
    pub(crate) argv: &'a [String],
    pub(crate) env: &'a BTreeMap<String, String>,
    pub(crate) user: &'a str,
    pub(crate) workdir: &'a str,
    pub(crate) timeout_ms: u64,
    pub(crate) output_cap: usize,
}

impl<'a> ExecBody<'a> {
    /// `request` as `user` in `workdir` (its deadline capped: [`ExecRequest::capped_timeout`]).
    pub(crate) fn new(request: &'a ExecRequest, user: &'a str, workdir: &'a str) -> Self {
        Self {
            argv: &request.argv,
            env: &request.env,
            user,
            workdir,
            timeout_ms: u64::try_from(request.capped_timeout().as_millis()).unwrap_or(u64::MAX),
            output_cap: request.output_cap,
        }
    }
}

/// How an exec ended, as the runner says it (the streams hex-encoded).
#[derive(Debug, Deserialize)]
pub(crate) struct ExecAnswer {
    exit_code: Option<i64>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    oom_killed: bool,
    truncated: bool,
    duration_ms: u64,
}

impl ExecAnswer {
    /// The outcome; `oom_seen`: the host saw the container's OOM count rise meanwhile.
    pub(crate) fn into_outcome(self, oom_seen: bool) -> Result<ExecOutcome, hex::FromHexError> {
        let oom_killed = self.oom_killed || oom_seen;
        Ok(ExecOutcome {
            exit_code: if oom_killed || self.timed_out {
                None
            } else {
                self.exit_code
            },
            stdout: hex::decode(&self.stdout)?,
            stderr: hex::decode(&self.stderr)?,
            timed_out: self.timed_out,
            oom_killed,
            truncated: self.truncated,
            duration: Duration::from_millis(self.duration_ms),
        })
    }
}
