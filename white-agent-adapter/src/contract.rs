//! The contract between the green agent (which launches the adapter and reads its results) and
//! the adapter (which serves the agent): one definition of each thing both sides must agree on.
//!
//! - [`DEFAULT_PORT`] and the container paths in [`paths`];
//! - the driver names ([`DriverKind`], generated from the drivers' registry in
//!   [`crate::drivers`]: flags, cards, staged CLI folders);
//! - the adapter's launch arguments ([`LaunchArgs`]: parsed by the adapter's `main`, written by
//!   the green agent with [`LaunchArgs::command`]);
//! - the `usage` artifact ([`UsageReport`]: written by the adapter, read by the green agent).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Port the adapter serves A2A on inside an agent container.
pub const DEFAULT_PORT: u16 = 8700;

/// Paths inside the platform's containers (see ARCHITECTURE.md, "Container layout").
pub mod paths {
    /// The task's agent-visible files; the agent works here (agent and grading containers).
    pub const WORKSPACE: &str = "/workspace";
    /// The adapter binary, mounted read-only in agent containers.
    pub const ADAPTER_BIN: &str = "/opt/platform/bin/white-agent-adapter";
    /// Staged agent CLIs (`<AGENTS_DIR>/<driver>/`), mounted read-only in agent containers.
    pub const AGENTS_DIR: &str = "/opt/platform/agents";
    /// The task's reference solution: mounted for the `oracle` agent only.
    pub const ORACLE_DIR: &str = "/oracle/solution";
    /// Held-out files: in grading containers only.
    pub const GRADER_HIDDEN: &str = "/grader/hidden";
    /// Scratch for graders: in grading containers only.
    pub const GRADER_WORK: &str = "/grader/work";
}

pub use crate::drivers::{DriverKind, UnknownDriver};

/// Inline caps on returned files (defaults of [`LaunchArgs`]).
pub mod caps {
    /// Largest file returned inline.
    pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
    /// Largest total of files returned inline.
    pub const MAX_TOTAL_BYTES: u64 = 100 * 1024 * 1024;
    /// Most files returned.
    pub const MAX_FILES: usize = 1000;
}

const DEFAULT_HOST: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);

/// The adapter's command line: parsed by the adapter (`LaunchArgs::parse`), written by the green
/// agent ([`LaunchArgs::command`]). Every flag can also come from the environment variable named
/// in its help.
#[derive(Debug, Clone, PartialEq, clap::Parser)]
#[command(
    name = "white-agent-adapter",
    version,
    about = "Serves one coding agent over A2A 1.0 (JSON-RPC) inside a trial container."
)]
pub struct LaunchArgs {
    /// Port to listen on (all interfaces).
    #[arg(long, env = "A2A_PORT", default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to bind.
    #[arg(long, env = "A2A_HOST", default_value_t = DEFAULT_HOST)]
    pub host: IpAddr,
    /// URL written into the agent card; default: the address each client used (`Host` header).
    #[arg(long, env = "A2A_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Which agent to run.
    #[arg(long, env = "ADAPTER_DRIVER", value_enum)]
    pub driver: DriverKind,
    /// The task's working directory.
    #[arg(long, env = "ADAPTER_WORKSPACE", default_value = paths::WORKSPACE)]
    pub workspace: PathBuf,
    /// The CLI binary (default: <agents-dir>/<driver>/<binary>).
    #[arg(long, env = "ADAPTER_AGENT_BIN")]
    pub agent_bin: Option<PathBuf>,
    /// Where staged CLIs are mounted.
    #[arg(long, env = "ADAPTER_AGENTS_DIR", default_value = paths::AGENTS_DIR)]
    pub agents_dir: PathBuf,
    /// Model name passed to the CLI.
    #[arg(long, env = "ADAPTER_MODEL")]
    pub model: Option<String>,
    /// Turn limit (claude-code only).
    #[arg(long, env = "ADAPTER_MAX_TURNS")]
    pub max_turns: Option<u32>,
    /// The reference solution (oracle driver only).
    #[arg(long, env = "ADAPTER_ORACLE_DIR", default_value = paths::ORACLE_DIR)]
    pub oracle_dir: PathBuf,
    /// Scratch directory outside the workspace (agent HOME, generated configs).
    #[arg(long, env = "ADAPTER_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Largest file returned inline (bytes).
    #[arg(long, env = "ADAPTER_MAX_FILE_BYTES", default_value_t = caps::MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// Largest total of returned files (bytes).
    #[arg(long, env = "ADAPTER_MAX_TOTAL_BYTES", default_value_t = caps::MAX_TOTAL_BYTES)]
    pub max_total_bytes: u64,
    /// Most files returned.
    #[arg(long, env = "ADAPTER_MAX_FILES", default_value_t = caps::MAX_FILES)]
    pub max_files: usize,
    /// The `command` driver's command line (after `--`).
    #[arg(last = true)]
    pub command: Vec<String>,
}

impl LaunchArgs {
    /// The arguments for `driver` with every other setting at its default.
    pub fn new(driver: DriverKind) -> Self {
        Self {
            port: DEFAULT_PORT,
            host: DEFAULT_HOST,
            public_url: None,
            driver,
            workspace: paths::WORKSPACE.into(),
            agent_bin: None,
            agents_dir: paths::AGENTS_DIR.into(),
            model: None,
            max_turns: None,
            oracle_dir: paths::ORACLE_DIR.into(),
            state_dir: None,
            max_file_bytes: caps::MAX_FILE_BYTES,
            max_total_bytes: caps::MAX_TOTAL_BYTES,
            max_files: caps::MAX_FILES,
            command: Vec::new(),
        }
    }

    /// The flags (without the program name): `--driver` always, every other setting only
    /// when it differs from its default, the command last after `--`.
    pub fn to_argv(&self) -> Vec<String> {
        let d = Self::new(self.driver);
        let mut argv = vec!["--driver".to_owned(), self.driver.name().to_owned()];
        let mut flag = |name: &str, value: String| {
            argv.push(format!("--{name}"));
            argv.push(value);
        };
        let path = |p: &PathBuf| p.display().to_string();
        if self.port != d.port {
            flag("port", self.port.to_string());
        }
        if self.host != d.host {
            flag("host", self.host.to_string());
        }
        if let Some(url) = &self.public_url {
            flag("public-url", url.clone());
        }
        if self.workspace != d.workspace {
            flag("workspace", path(&self.workspace));
        }
        if let Some(bin) = &self.agent_bin {
            flag("agent-bin", path(bin));
        }
        if self.agents_dir != d.agents_dir {
            flag("agents-dir", path(&self.agents_dir));
        }
        if let Some(model) = &self.model {
            flag("model", model.clone());
        }
        if let Some(turns) = self.max_turns {
            flag("max-turns", turns.to_string());
        }
        if self.oracle_dir != d.oracle_dir {
            flag("oracle-dir", path(&self.oracle_dir));
        }
        if let Some(dir) = &self.state_dir {
            flag("state-dir", path(dir));
        }
        if self.max_file_bytes != d.max_file_bytes {
            flag("max-file-bytes", self.max_file_bytes.to_string());
        }
        if self.max_total_bytes != d.max_total_bytes {
            flag("max-total-bytes", self.max_total_bytes.to_string());
        }
        if self.max_files != d.max_files {
            flag("max-files", self.max_files.to_string());
        }
        if !self.command.is_empty() {
            argv.push("--".to_owned());
            argv.extend(self.command.iter().cloned());
        }
        argv
    }

    /// The container's main process: the mounted adapter binary and [`LaunchArgs::to_argv`].
    pub fn command(&self) -> Vec<String> {
        let mut argv = vec![paths::ADAPTER_BIN.to_owned()];
        argv.extend(self.to_argv());
        argv
    }

    /// Parses a full command line (program name first), as the adapter does.
    pub fn from_command<I, S>(argv: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString> + Clone,
    {
        <Self as clap::Parser>::try_parse_from(argv)
    }
}

/// Name of the usage artifact.
pub const USAGE_ARTIFACT: &str = "usage";

/// The `usage` artifact's data part: what the agent's CLI reported about its model use.
/// Missing fields read as zero (an external agent may report less).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageReport {
    /// Prompt tokens, not counting cache reads and writes.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Model requests (turns, as the CLI counts them).
    pub requests: u64,
    /// Only when the CLI reports it.
    pub cost_usd: Option<f64>,
    /// Wall-clock time of the agent's run.
    pub duration_ms: u64,
}

impl UsageReport {
    /// The artifact's data part.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Reads a data part (unknown fields are ignored; a wrong type is an error).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, serde_json::Error> {
        Self::deserialize(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_arguments_round_trip() {
        let mut claude = LaunchArgs::new(DriverKind::ClaudeCode);
        claude.model = Some("claude-sonnet-4-5".into());
        claude.max_turns = Some(7);
        let mut command = LaunchArgs::new(DriverKind::Command);
        command.command = vec!["sh".into(), "-c".into(), "echo 'a -- b' > out.txt".into()];
        let mut everything = LaunchArgs::new(DriverKind::Codex);
        everything.port = 9000;
        everything.host = IpAddr::V4(Ipv4Addr::LOCALHOST);
        everything.public_url = Some("http://10.0.0.2:9000/".into());
        everything.workspace = "/tmp/ws".into();
        everything.agent_bin = Some("/usr/bin/codex".into());
        everything.agents_dir = "/agents".into();
        everything.model = Some("gpt-5".into());
        everything.oracle_dir = "/sol".into();
        everything.state_dir = Some("/state".into());
        everything.max_file_bytes = 1;
        everything.max_total_bytes = 2;
        everything.max_files = 3;
        let mut cases = vec![claude, command, everything];
        cases.extend(DriverKind::ALL.iter().copied().map(LaunchArgs::new));
        for args in cases {
            let argv = args.command();
            assert_eq!(argv[0], paths::ADAPTER_BIN);
            let parsed = LaunchArgs::from_command(&argv).expect("parses");
            assert_eq!(parsed, args, "{argv:?}");
        }
    }

    #[test]
    fn defaults_are_left_out_of_the_command_line() {
        assert_eq!(
            LaunchArgs::new(DriverKind::Nop).command(),
            [paths::ADAPTER_BIN, "--driver", "nop"]
        );
    }

    #[test]
    fn driver_names_are_one_list() {
        for &d in DriverKind::ALL {
            assert_eq!(d.name().parse::<DriverKind>(), Ok(d));
            assert_eq!(serde_json::to_value(d).expect("json"), d.name());
            let v = <DriverKind as clap::ValueEnum>::to_possible_value(&d).expect("value");
            assert_eq!(v.get_name(), d.name());
        }
        assert!("a2a".parse::<DriverKind>().is_err());
    }

    #[test]
    fn a_partial_usage_report_reads_as_zeros() {
        let u = UsageReport::from_value(&serde_json::json!({"input_tokens": 5, "turns": 2}))
            .expect("reads");
        assert_eq!(u.input_tokens, 5);
        assert_eq!(u.requests, 0);
        assert_eq!(u.cost_usd, None);
        assert!(UsageReport::from_value(&serde_json::json!({"input_tokens": "x"})).is_err());
    }
}
