//! The sandbox runner (stdlib Python run as root in a container, `python3 -I`) and the exec
//! messages both of its transports carry: the swarm backend's HTTP (`swarm::runner`) and the
//! docker backend's exec channel (`docker::channel`).
//!
//! The program is one file per job in this folder (`header.py`: what it is and its imports;
//! `process.py`: state, the sandbox user, spawning and killing process trees; `exec.py`;
//! `archive.py`: tar streams in and out; `transport_http.py`; `transport_stdio.py`;
//! `main.py`), shipped as ONE program from [`program`], which puts the constants the host and
//! the runner share (declared once, below) between the header and the jobs.

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{ExecOutcome, ExecRequest};

/// Bytes of one JSON request the runner reads (a longer stdio line is refused, a longer HTTP
/// body answered 413); the host sends a longer exec another way.
pub(crate) const MAX_REQUEST: usize = 8 * 1024 * 1024;
/// How long an exec's output may keep draining after its deadline's kill (runner and host).
pub(crate) const DRAIN_AFTER_KILL: Duration = Duration::from_millis(500);
/// The longest one `GET /main?wait=` waits; the host asks in shorter slices.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(25);
/// Largest error or small answer the host reads from the runner.
pub(crate) const SMALL_ANSWER: usize = 64 * 1024;
/// The HTTP server's socket timeout.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections the HTTP server serves at once.
const MAX_CONNECTIONS: usize = 32;
/// Bytes of the main command's output the HTTP runner keeps for `GET /logs`.
const LOG_KEEP: usize = 4 * 1024 * 1024;
/// Bytes moved per read or write of a stream.
const CHUNK: usize = 64 * 1024;

/// The runner's files, in the order the program holds them (after the header and constants).
const JOBS: [(&str, &str); 6] = [
    ("process.py", include_str!("process.py")),
    ("exec.py", include_str!("exec.py")),
    ("archive.py", include_str!("archive.py")),
    ("transport_http.py", include_str!("transport_http.py")),
    ("transport_stdio.py", include_str!("transport_stdio.py")),
    ("main.py", include_str!("main.py")),
];

/// The constants shared with the host, as Python.
fn constants() -> String {
    format!(
        "\n# Shared with the host: generated from sandbox/src/runner/mod.rs.\n\
         SOCKET_TIMEOUT = {}\nMAX_JSON = {}\nMAX_CONNECTIONS = {}\nLOG_KEEP = {}\n\
         DRAIN_AFTER_KILL = {}\nMAX_WAIT = {}\nCHUNK = {}\nDEFAULT_USER = \"{}\"\n",
        SOCKET_TIMEOUT.as_secs(),
        MAX_REQUEST,
        MAX_CONNECTIONS,
        LOG_KEEP,
        DRAIN_AFTER_KILL.as_secs_f64(),
        MAX_WAIT.as_secs(),
        CHUNK,
        crate::DEFAULT_USER,
    )
}

/// The runner program, assembled once: header, shared constants, then each job's file.
pub(crate) fn program() -> &'static str {
    static PROGRAM: LazyLock<String> = LazyLock::new(|| {
        let mut p = String::from(include_str!("header.py"));
        p.push_str(&constants());
        for (name, text) in JOBS {
            p.push_str(&format!("\n\n# ---- {name}\n"));
            p.push_str(text);
        }
        p
    });
    &PROGRAM
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_declares_each_shared_constant_once_and_compiles() {
        let p = program();
        for name in [
            "SOCKET_TIMEOUT",
            "MAX_JSON",
            "MAX_CONNECTIONS",
            "LOG_KEEP",
            "DRAIN_AFTER_KILL",
            "MAX_WAIT",
            "CHUNK",
            "DEFAULT_USER",
        ] {
            let declared = p
                .lines()
                .filter(|l| l.starts_with(&format!("{name} = ")))
                .count();
            assert_eq!(declared, 1, "{name} is declared once (in mod.rs)");
        }
        assert!(p.contains("MAX_JSON = 8388608\n") && p.contains("DRAIN_AFTER_KILL = 0.5\n"));
        // python3 compiles it (every job file present, in an order where names resolve).
        let out = std::process::Command::new("python3")
            .args([
                "-I",
                "-c",
                "import sys; compile(sys.stdin.read(), 'runner', 'exec')",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().expect("stdin").write_all(p.as_bytes())?;
                child.wait_with_output()
            })
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
