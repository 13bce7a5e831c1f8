//! Settings: defaults < TOML file (`--config`, else `research-bench.toml` when present) <
//! environment (`RB_<NAME>`) < command-line flags. Secrets (API keys) are never read from the
//! file: only from the environment.
//!
//! Each setting is declared once, in the [`settings!`] list below: its doc comment is its help
//! text, its type and default are there too, and the macro derives the resolved [`Settings`]
//! (serde), the partial [`Layer`] (serde for the file, `RB_*` for the environment, clap for
//! the flags) and how a layer applies. Durations are humantime strings (`90s`, `30m`, `500ms`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Serialize};

/// Default settings file looked up in the working directory.
pub const DEFAULT_CONFIG_FILE: &str = "research-bench.toml";

/// Most trials a run runs at once.
pub const MAX_CONCURRENCY: usize = 1024;
/// Most repeats of each (task, agent) pair.
pub const MAX_REPEATS: u32 = 10_000;
/// Largest cost cap (USD).
pub const MAX_COST_USD: f64 = 1_000_000.0;
/// The range of `collect_timeout`: at least a second, at most a day.
pub const COLLECT_TIMEOUT_RANGE: (Span, Span) = (Span::secs(1), Span::secs(24 * 3600));

/// A duration written the humantime way (`90s`, `30m`, `1h 30m`, `500ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span(pub Duration);

impl Span {
    /// The longest duration a setting takes: 365 days.
    pub const MAX: Span = Span::secs(365 * 24 * 3600);

    pub const fn secs(s: u64) -> Self {
        Self(Duration::from_secs(s))
    }
    pub const fn millis(ms: u64) -> Self {
        Self(Duration::from_millis(ms))
    }
    pub fn get(self) -> Duration {
        self.0
    }
}

impl FromStr for Span {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let d = humantime::parse_duration(s.trim()).map_err(|e| {
            format!("`{s}` is not a duration ({e}); write e.g. 500ms, 90s, 30m or 1h")
        })?;
        if d > Span::MAX.0 {
            return Err(format!(
                "`{s}` is longer than a duration may be here (0s to 365 days)"
            ));
        }
        Ok(Span(d))
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Span {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The type of a setting in its resolved group: the value, or an optional one.
macro_rules! setting_type {
    (val $ty:ty) => { $ty };
    (opt $ty:ty) => { Option<$ty> };
    (list $ty:ty) => { $ty };
}

/// A layer's value as the setting's value.
macro_rules! setting_value {
    (val $v:expr) => {
        $v
    };
    (opt $v:expr) => {
        Some($v)
    };
    (list $v:expr) => {
        $v
    };
}

/// A setting's value from the environment: parsed as its type, or (`list`) comma-separated.
macro_rules! setting_env {
    (list $env:expr, $var:expr) => {
        env_list($env, $var)
    };
    ($kind:ident $env:expr, $var:expr) => {
        env_value($env, $var)
    };
}

/// Declares a group of settings once: its resolved struct, its partial layer and where the
/// group sits in the file (`table`: `""` for the top level) and the environment (`env`: the
/// variables' prefix). Each setting: `/// help` `[clap arg attributes] name: val|opt|list Type
/// = default;` (`opt`: unset by default; `list`: comma-separated in the environment), then
/// the settings only a file can hold.
macro_rules! settings {
    (
        $(#[doc = $gdoc:literal])*
        group $settings:ident / $layer:ident, table $table:literal, env $prefix:literal;
        $( $(#[doc = $doc:literal])* [$($arg:tt)*] $name:ident : $kind:ident $ty:ty = $default:expr ; )*
        file_only:
        $( $(#[doc = $fdoc:literal])* $fname:ident : $fty:ty = $fdefault:expr ; )*
    ) => {
        $(#[doc = $gdoc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $settings {
            $( $(#[doc = $doc])* pub $name: setting_type!($kind $ty), )*
            $( $(#[doc = $fdoc])* pub $fname: $fty, )*
        }

        impl Default for $settings {
            fn default() -> Self {
                Self {
                    $( $name: $default, )*
                    $( $fname: $fdefault, )*
                }
            }
        }

        /// A partial layer of these settings: the settings file, the environment or the flags.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, clap::Args)]
        #[serde(deny_unknown_fields)]
        pub struct $layer {
            $( $(#[doc = $doc])* #[arg($($arg)*)] pub $name: Option<$ty>, )*
            $( $(#[doc = $fdoc])* #[arg(skip)] pub $fname: Option<$fty>, )*
        }

        impl Group for $settings {
            type Layer = $layer;
            const TABLE: &'static str = $table;
            const ENV_PREFIX: &'static str = $prefix;
            const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            fn layer_from_env(env: &BTreeMap<String, String>) -> Result<$layer, ConfigError> {
                Ok($layer {
                    $( $name: setting_env!($kind env, &format!("{}{}", $prefix, stringify!($name).to_ascii_uppercase()))?, )*
                    $( $fname: None, )*
                })
            }

            fn apply(mut self, l: &$layer) -> Self {
                $( if let Some(v) = l.$name.clone() { self.$name = setting_value!($kind v); } )*
                $( if let Some(v) = l.$fname.clone() { self.$fname = v; } )*
                self
            }

            fn check(&self) -> Result<(), ConfigError> {
                self.validate()
            }
        }

        impl $layer {
            /// Reads this group's environment variables (its prefix, then the upper-case name).
            pub fn from_env(env: &BTreeMap<String, String>) -> Result<Self, ConfigError> {
                <$settings as Group>::layer_from_env(env)
            }
        }

        impl $settings {
            /// Applies a layer on top of these settings.
            pub fn apply(self, l: &$layer) -> Self {
                <Self as Group>::apply(self, l)
            }
        }
    };
}

/// A group of settings declared by [`settings!`]: resolved as defaults < file < environment <
/// flags.
pub trait Group: Default + Sized {
    /// Its partial form.
    type Layer: serde::de::DeserializeOwned + Default;
    /// Its table in the settings file (`""`: the top level).
    const TABLE: &'static str;
    /// The prefix of its environment variables.
    const ENV_PREFIX: &'static str;
    /// Its settings' names, in declaration order.
    const NAMES: &'static [&'static str];
    fn layer_from_env(env: &BTreeMap<String, String>) -> Result<Self::Layer, ConfigError>;
    fn apply(self, l: &Self::Layer) -> Self;
    fn check(&self) -> Result<(), ConfigError>;
}

/// The settings file's tables of command groups (beside the run settings at its top level).
pub const FILE_TABLES: &[&str] = &[ViewSettings::TABLE, ServeSettings::TABLE];

/// Resolves a group: defaults < file (`--config`, else `research-bench.toml` when present) <
/// environment < flags, then validates.
pub fn resolve<G: Group>(
    config: Option<&Path>,
    env: &BTreeMap<String, String>,
    flags: &G::Layer,
) -> Result<G, ConfigError> {
    let mut s = G::default();
    if let Some(file) = file_layer::<G>(config)? {
        s = s.apply(&file);
    }
    let s = s.apply(&G::layer_from_env(env)?).apply(flags);
    s.check()?;
    Ok(s)
}

/// The settings file that applies: `config`, else `research-bench.toml` when present.
fn settings_file(config: Option<&Path>) -> Option<PathBuf> {
    match config {
        Some(path) => Some(path.to_path_buf()),
        None => {
            let default = Path::new(DEFAULT_CONFIG_FILE);
            default.is_file().then(|| default.to_path_buf())
        }
    }
}

/// A group's layer from the settings file (`None`: no file applies).
fn file_layer<G: Group>(config: Option<&Path>) -> Result<Option<G::Layer>, ConfigError> {
    let Some(path) = settings_file(config) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
        path: path.clone(),
        source,
    })?;
    let parse = |source: toml::de::Error| ConfigError::Parse {
        path: path.clone(),
        source: Box::new(source),
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(parse)?;
    let section = if G::TABLE.is_empty() {
        for t in FILE_TABLES {
            table.remove(*t);
        }
        table
    } else {
        match table.remove(G::TABLE) {
            Some(toml::Value::Table(t)) => t,
            None => return Ok(Some(G::Layer::default())),
            Some(_) => {
                return Err(ConfigError::Invalid {
                    name: G::TABLE,
                    reason: format!("`{}` in {} must be a table", G::TABLE, path.display()),
                });
            }
        }
    };
    let layer = section.try_into().map_err(|e: toml::de::Error| {
        let e = if G::TABLE.is_empty() {
            e
        } else {
            toml::de::Error::custom(format!("[{}]: {e}", G::TABLE))
        };
        parse(e)
    })?;
    Ok(Some(layer))
}

settings! {
    /// Effective settings of a run (the settings file's top level, `RB_<NAME>`, the flags of
    /// `run`, `resume`, `tasks check` and `serve`).
    group Settings / Layer, table "", env "RB_";
    /// Where run directories go (`<results_dir>/<run_id>/`); the global `--results-dir`.
    [skip] results_dir: val PathBuf = PathBuf::from("results");
    /// PostgreSQL database holding every run's rows (`postgres://USER[:PASSWORD]@HOST/DB`;
    /// created when missing), shared by a team; the global `--database-url`. Unset: each run
    /// keeps its own SQLite file. Blobs stay under the results directory either way. A URL with
    /// a password belongs in RB_DATABASE_URL, never in the settings file.
    [skip] database_url: opt crate::database::DatabaseUrl = None;
    /// Trials running at once.
    [long] concurrency: val usize = 2;
    /// Trials per (task, agent) pair.
    [long] repeats: val u32 = 1;
    /// First GetTask poll interval (backs off up to 8x while nothing changes), e.g. 500ms.
    [long] poll_interval: val Span = Span::millis(500);
    /// Wall-clock budget per agent, e.g. 30m (default: the task's own).
    [long] agent_timeout: opt Span = None;
    /// Stop an agent whose task shows no progress (state, messages, artifacts) for this long.
    [long] inactivity_timeout: val Span = Span::secs(600);
    /// How long an agent may take to serve its agent card.
    [long] ready_timeout: val Span = Span::secs(60);
    /// Budget of collecting one trial's outputs (the copy-out of a hosted agent's workspace,
    /// its comparison with the task's, the store, the A2A artifacts), 1s to 24h; over it the
    /// trial scores 0, flagged `collection_timeout` (the agent's failure, never an infra error).
    [long] collect_timeout: val Span = Span::secs(120);
    /// Budget of all graders of a trial (the task's own limit applies too).
    [long] grade_timeout: val Span = Span::secs(900);
    /// Retries of a trial after an infrastructure failure (with exponential backoff).
    [long] infra_retries: val u32 = 2;
    /// The white-agent-adapter binary mounted into agent containers (default: next to this
    /// binary, else target/debug/white-agent-adapter).
    [long] adapter_bin: opt PathBuf = None;
    /// Model proxy port on the host (0 = any free port).
    [long] proxy_port: val u16 = 0;
    /// CPUs per agent container.
    [long] cpus: val f64 = 1.0;
    /// Memory per agent container, in MiB.
    [long] memory_mb: val u64 = 2048;
    /// Python venv holding the agent CLIs' wheels (staged into agent containers).
    [long] venv: val PathBuf = PathBuf::from(".venv");
    /// Where `scripts/bootstrap` installs the Python agents' packages (`<dir>/<driver>/`, from
    /// `scripts/agent-packages/<driver>.txt`; staged into agent containers).
    [long] agent_packages: val PathBuf = PathBuf::from(".agent-packages");
    /// The model proxy's configuration file (TOML: providers, routes, prices, scripts for the
    /// scripted mock model); default: Anthropic and OpenAI with keys from the environment.
    [long] proxy_config: opt PathBuf = None;
    /// Token budget of one trial's model traffic (input + output + cache), enforced by the
    /// model proxy; a trial stopped by it ends `budget_exceeded` and is graded on its output.
    [long] max_tokens_per_trial: opt u64 = None;
    /// Cost budget of one trial's model traffic in USD (prices from the proxy configuration).
    [long] max_cost_per_trial: opt f64 = None;
    /// Hard cost cap of the whole run in USD: once the proxy has counted that much, no new
    /// trial starts and running agents are stopped (`budget_exceeded`).
    [long] max_cost_per_run: opt f64 = None;
    /// Judge model for judge-based graders (a panel of several: `[[judges]]` in the settings
    /// file; none: those graders report judge_unavailable).
    [long] judge_model: opt String = None;
    /// The judge's API: `chat_completions` (OpenAI's Chat Completions, also vLLM and Ollama;
    /// `openai` for short) or `anthropic_messages` (Anthropic's Messages; `anthropic`).
    [long] judge_api: val rubrics::judge::JudgeApi = rubrics::judge::JudgeApi::default();
    /// Judge base URL up to the version (default: the API's public one, e.g.
    /// https://api.openai.com/v1 or https://api.anthropic.com/v1).
    [long] judge_base_url: opt String = None;
    /// Environment variable holding the judge's key (never the key; default OPENAI_API_KEY or
    /// ANTHROPIC_API_KEY by API; "" for a server without keys).
    [long] judge_api_key_env: opt String = None;
    /// Workspace files over this many bytes go to an external (a2a:URL) agent as URLs served by
    /// the green agent, not inline.
    [long] inline_file_max_bytes: val u64 = 1024 * 1024;
    /// Address the file server for external agents binds to and puts in its URLs (one the
    /// external agent can reach).
    [long] file_server_host: val String = "127.0.0.1".into();
    /// Largest total of an agent's output files collected; over it only the files the agent
    /// returned are kept while they fit, and the trial is flagged.
    [long] max_output_bytes: val u64 = 512 * 1024 * 1024;
    /// Headers sent to external (a2a:URL) agents whose cards declare security schemes, as
    /// NAME=env:VAR (several: comma-separated), e.g. `Authorization=env:MY_TOKEN` with
    /// MY_TOKEN="Bearer ...": values are read from the environment when the agent is connected
    /// to, never stored or logged.
    [long = "agent-header"] agent_header: opt String = None;
    /// Hosts an external agent's card may send the task to besides the host of its given URL
    /// (comma-separated, e.g. `rpc.example.org`). Without it, a card whose JSON-RPC URL names
    /// another host is refused (`agent_incompatible`), so a card cannot redirect the task.
    [long = "allow-card-host"] allow_card_host: opt String = None;
    /// The one reply an agent asking for input (INPUT_REQUIRED) gets; asked again, its task is
    /// canceled.
    [long] input_reply: val String = "No further input is available; finish the task with what you have.".into();
    /// Where sandboxes run: `docker` (containers on this engine) or `swarm` (Docker Swarm
    /// services on per-trial overlay networks; the engine must be a Swarm manager).
    [long] backend: val BackendKind = BackendKind::Docker;
    /// `--backend swarm`: subnet pool of the per-trial overlays, `A.B.C.D/N:M` (subnets of /M).
    [long] swarm_subnet_pool: val String = sandbox::swarm::DEFAULT_OVERLAY_POOL.into();
    /// `--backend swarm`: extra placement constraints of every service, comma-separated (e.g.
    /// `node.labels.rb==yes`).
    [long] swarm_constraints: opt String = None;
    /// Print every column of the results table at the end of a run (default: agent, kind,
    /// trials, mean, pass@k, cost); the Markdown report always has every column.
    [long, num_args = 0..=1, default_missing_value = "true"] wide: val bool = false;
    /// `--backend swarm`: how files and execs reach the sandboxes: `http` (each sandbox's runner,
    /// through its network's relay; tasks run on any node matching the constraints) or `engine`
    /// (this engine's archive and exec APIs; tasks pinned to this node).
    [long] swarm_transport: val String = sandbox::swarm::Transport::default().as_str().into();
  file_only:
    /// A panel of judges voting by majority (TOML `[[judges]]` tables), instead of
    /// `judge_model`. Each member's `api_key_env` follows the rule of `judge_api_key_env`.
    judges: Vec<rubrics::JudgeConfig> = Vec::new();
}

/// Where sandboxes run (`--backend`): declared by `sandbox`, which chooses the backend.
pub use sandbox::BackendKind;

settings! {
    /// Settings of `green-agent view` (the settings file's `[view]` table, `RB_VIEW_<NAME>`,
    /// its flags).
    group ViewSettings / ViewLayer, table "view", env "RB_VIEW_";
    /// Address to serve on (loopback by default; port 0 = any free port).
    [long] bind: val std::net::SocketAddr = ([127, 0, 0, 1], 8787).into();
    /// Never open a browser (also implied by CI=true and when no display is available).
    [long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL"]
    no_open: val bool = false;
  file_only:
}

impl ViewSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}

settings! {
    /// Settings of `green-agent serve` (the settings file's `[serve]` table,
    /// `RB_SERVE_<NAME>`, its flags); its runs take the run settings too.
    group ServeSettings / ServeLayer, table "serve", env "RB_SERVE_";
    /// Address to serve on (loopback by default; port 0 = any free port). Any other address
    /// needs an API token in RB_SERVE_TOKEN.
    [long] bind: val std::net::SocketAddr = ([127, 0, 0, 1], 8600).into();
    /// Task suites requests may name: PATH (named after its folder) or NAME=PATH
    /// (comma-separated or repeated); at least one.
    [long, value_delimiter = ','] tasks: list Vec<String> = Vec::new();
    /// Hosted agents a request may name as participants (oracle, nop, cmd or an agent CLI's
    /// driver name: claude-code, codex, opencode, aider, mini-swe-agent; comma-separated);
    /// others must be A2A URLs.
    [long, value_delimiter = ','] allow_hosted: list Vec<String> = vec!["oracle".into(), "nop".into()];
    /// URL prefixes external participants must start with (comma-separated or repeated;
    /// none: any URL).
    [long, value_delimiter = ','] allow_participant: list Vec<String> = Vec::new();
    /// Assessments running at once; later requests wait in a queue.
    [long] max_running: val usize = 2;
    /// Trials running at once across all assessments (default: the `concurrency` setting).
    [long] max_trials_running: opt usize = None;
    /// Largest request body, in bytes.
    [long] max_request_bytes: val usize = 1024 * 1024;
    /// Largest trial count of one request.
    [long] max_trials: val usize = 10_000;
    /// Report files up to this many bytes come inline; larger ones as `url` parts served here.
    [long] inline_report_bytes: val u64 = 256 * 1024;
    /// The URL clients reach this service at (for report-file URLs); default: the Host of the
    /// latest request.
    [long] public_url: opt String = None;
  file_only:
}

impl ServeSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.tasks.is_empty() {
            return Err(ConfigError::Invalid {
                name: "tasks",
                reason: "no task suites to serve: give --tasks PATH (or RB_SERVE_TASKS, or \
                         `tasks` under [serve] in the settings file)"
                    .into(),
            });
        }
        if self.max_running == 0 || self.max_trials_running == Some(0) {
            return Err(ConfigError::Invalid {
                name: "max_running",
                reason: "--max-running and --max-trials-running must be at least 1".into(),
            });
        }
        Ok(())
    }
}

impl Settings {
    /// The backend configuration these settings choose (the swarm relays use the platform's
    /// `python` image).
    pub fn backend_config(&self) -> Result<sandbox::BackendConfig, sandbox::SandboxError> {
        Ok(match self.backend {
            BackendKind::Docker => sandbox::BackendConfig::Docker,
            BackendKind::Swarm => sandbox::BackendConfig::Swarm(sandbox::SwarmConfig {
                relay_image: sandbox::images::recipe("python")
                    .map_or_else(|| "python".into(), |r| sandbox::images::tag(&r)),
                transport: self.swarm_transport.parse()?,
                overlay_pool: self.swarm_subnet_pool.parse()?,
                constraints: self.swarm_constraint_list(),
                forwarded_ports: vec![white_agent_adapter::contract::DEFAULT_PORT],
            }),
        })
    }

    /// The placement constraints of `swarm_constraints`.
    pub fn swarm_constraint_list(&self) -> Vec<String> {
        self.swarm_constraints
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// The headers of [`Settings::agent_header`]: each one's name and the environment variable
/// holding its value.
pub fn parse_agent_headers(spec: &str) -> Result<Vec<(String, String)>, String> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse_agent_header)
        .collect()
}

fn parse_agent_header(spec: &str) -> Result<(String, String), String> {
    let (name, value) = spec
        .split_once('=')
        .ok_or_else(|| format!("{spec:?} is not NAME=env:VAR"))?;
    let var = value.strip_prefix("env:").ok_or_else(|| {
        format!("{spec:?}: the value must come from the environment, as NAME=env:VAR")
    })?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("{spec:?}: {name:?} is not a header name"));
    }
    if var.is_empty() {
        return Err(format!("{spec:?}: no environment variable named"));
    }
    Ok((name.to_owned(), var.to_owned()))
}

/// The value of the environment variable `var`, parsed as the setting's type.
fn env_value<T: FromStr>(
    env: &BTreeMap<String, String>,
    var: &str,
) -> Result<Option<T>, ConfigError>
where
    T::Err: fmt::Display,
{
    match env.get(var) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|e: T::Err| ConfigError::Env {
                var: var.to_owned(),
                // a database URL may hold a password: never echoed
                value: if var == "RB_DATABASE_URL" {
                    "(not shown)".into()
                } else {
                    v.clone()
                },
                reason: e.to_string(),
            }),
    }
}

/// The comma-separated values of the environment variable `var`.
fn env_list(env: &BTreeMap<String, String>, var: &str) -> Result<Option<Vec<String>>, ConfigError> {
    Ok(env.get(var).map(|v| {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }))
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read settings file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("settings file {path} is invalid: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("environment variable {var}={value:?} is invalid: {reason}")]
    Env {
        var: String,
        value: String,
        reason: String,
    },
    #[error("setting `{name}` is invalid: {reason}")]
    Invalid { name: &'static str, reason: String },
}

impl Settings {
    /// Defaults < file < environment < flags. `config` is `--config` (an explicit file must
    /// exist); without it `research-bench.toml` in the working directory is used when present.
    pub fn resolve(
        config: Option<&Path>,
        env: &BTreeMap<String, String>,
        flags: &Layer,
    ) -> Result<Self, ConfigError> {
        if let Some(file) = file_layer::<Settings>(config)?
            && file.database_url.as_ref().is_some_and(|u| u.has_password())
        {
            return Err(ConfigError::Invalid {
                name: "database_url",
                reason: "the settings file holds a database password: move the URL to the \
                         RB_DATABASE_URL environment variable"
                    .into(),
            });
        }
        resolve(config, env, flags)
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return Err(ConfigError::Invalid {
                name: "concurrency",
                reason: format!(
                    "must be between 1 and {MAX_CONCURRENCY} (got {})",
                    self.concurrency
                ),
            });
        }
        if !(1..=MAX_REPEATS).contains(&self.repeats) {
            return Err(ConfigError::Invalid {
                name: "repeats",
                reason: format!("must be between 1 and {MAX_REPEATS} (got {})", self.repeats),
            });
        }
        if let Err(e) = self.swarm_subnet_pool.parse::<sandbox::SubnetPool>() {
            return Err(ConfigError::Invalid {
                name: "swarm_subnet_pool",
                reason: e.to_string(),
            });
        }
        if let Err(e) = self.swarm_transport.parse::<sandbox::swarm::Transport>() {
            return Err(ConfigError::Invalid {
                name: "swarm_transport",
                reason: e.to_string(),
            });
        }
        if let Some(spec) = &self.agent_header {
            parse_agent_headers(spec).map_err(|reason| ConfigError::Invalid {
                name: "agent_header",
                reason,
            })?;
        }
        let (least, most) = COLLECT_TIMEOUT_RANGE;
        if !(least..=most).contains(&self.collect_timeout) {
            return Err(ConfigError::Invalid {
                name: "collect_timeout",
                reason: format!(
                    "must be between {least} and {most} (got {}): set --collect-timeout, \
                     RB_COLLECT_TIMEOUT or `collect_timeout` in the settings file",
                    self.collect_timeout
                ),
            });
        }
        if self.poll_interval.get().is_zero() {
            return Err(ConfigError::Invalid {
                name: "poll_interval",
                reason: "must be longer than 0".into(),
            });
        }
        for (name, v) in [
            ("max_cost_per_trial", self.max_cost_per_trial),
            ("max_cost_per_run", self.max_cost_per_run),
        ] {
            if v.is_some_and(|v| !v.is_finite() || v <= 0.0 || v > MAX_COST_USD) {
                return Err(ConfigError::Invalid {
                    name,
                    reason: format!("must be a positive number of USD, at most {MAX_COST_USD}"),
                });
            }
        }
        if self.judge_model.is_some() && !self.judges.is_empty() {
            return Err(ConfigError::Invalid {
                name: "judges",
                reason:
                    "both `judge_model` (one judge) and `[[judges]]` (a panel) are set; keep one"
                        .into(),
            });
        }
        if self.cpus.is_nan() || self.cpus <= 0.0 {
            return Err(ConfigError::Invalid {
                name: "cpus",
                reason: "must be positive".into(),
            });
        }
        Ok(())
    }

    /// The judge configurations of this run: `judge_model` alone, else the `judges` panel
    /// (empty: no judge). Key variables default to the API's usual one; an empty name means
    /// no key.
    pub fn judge_configs(&self) -> Vec<rubrics::JudgeConfig> {
        fn key_env(explicit: Option<&String>, api: rubrics::judge::JudgeApi) -> Option<String> {
            match explicit {
                None => Some(api.default_key_env().to_owned()),
                Some(v) if v.trim().is_empty() => None,
                Some(v) => Some(v.clone()),
            }
        }
        if let Some(model) = &self.judge_model {
            let mut c = rubrics::JudgeConfig::for_api(
                self.judge_api,
                self.judge_base_url.clone().unwrap_or_default(),
                model.clone(),
            );
            c.api_key_env = key_env(self.judge_api_key_env.as_ref(), self.judge_api);
            return vec![c];
        }
        self.judges
            .iter()
            .map(|j| rubrics::JudgeConfig {
                api_key_env: key_env(j.api_key_env.as_ref(), j.api),
                ..j.clone()
            })
            .collect()
    }

    /// The proxy budget of one trial.
    pub fn trial_budget(&self) -> model_proxy::Budget {
        model_proxy::Budget {
            max_tokens: self.max_tokens_per_trial,
            max_cost_usd: self.max_cost_per_trial,
            max_requests: None,
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn agent_headers_come_from_the_environment_only() {
        assert_eq!(
            super::parse_agent_headers("Authorization=env:MY_TOKEN, X-Key=env:K"),
            Ok(vec![
                ("Authorization".into(), "MY_TOKEN".into()),
                ("X-Key".into(), "K".into())
            ])
        );
        assert!(super::parse_agent_headers("Authorization=Bearer abc").is_err());
        assert!(super::parse_agent_headers("=env:X").is_err());
        assert!(super::parse_agent_headers("X-Key=env:").is_err());
        assert!(super::parse_agent_headers("Bad Name=env:X").is_err());
        let s = Settings {
            agent_header: Some("Authorization=literal".into()),
            ..Settings::default()
        };
        assert!(s.validate().is_err());
    }

    use super::*;

    #[test]
    fn layers_apply_in_order_file_env_flags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("rb.toml");
        std::fs::write(
            &file,
            "concurrency = 3\nrepeats = 4\npoll_interval = \"100ms\"\n",
        )
        .expect("write");
        let env = BTreeMap::from([
            ("RB_REPEATS".to_string(), "5".to_string()),
            ("RB_POLL_INTERVAL".to_string(), "50ms".to_string()),
        ]);
        let flags = Layer {
            poll_interval: Some(Span::millis(7)),
            ..Layer::default()
        };
        let s = Settings::resolve(Some(&file), &env, &flags).expect("resolve");
        assert_eq!(s.concurrency, 3);
        assert_eq!(s.repeats, 5);
        assert_eq!(s.poll_interval.get(), Duration::from_millis(7));
        assert_eq!(s.results_dir, PathBuf::from("results"));
    }

    #[test]
    fn a_database_url_comes_from_the_environment_when_it_holds_a_password() {
        let env = BTreeMap::from([(
            "RB_DATABASE_URL".to_string(),
            "postgres://rb:pw@db/results".to_string(),
        )]);
        let s = Settings::resolve(None, &env, &Layer::default()).expect("env");
        let url = s.database_url.expect("set");
        assert_eq!(url.expose(), "postgres://rb:pw@db/results");
        assert!(
            !toml::to_string(&Settings::default())
                .expect("toml")
                .contains("pw")
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("rb.toml");
        std::fs::write(&file, "database_url = \"postgres://rb@db/results\"\n").expect("write");
        let s = Settings::resolve(Some(&file), &BTreeMap::new(), &Layer::default())
            .expect("a URL without a password may sit in the file");
        assert!(s.database_url.is_some());
        std::fs::write(&file, "database_url = \"postgres://rb:pw@db/results\"\n").expect("write");
        let e = Settings::resolve(Some(&file), &BTreeMap::new(), &Layer::default())
            .expect_err("a password in the file");
        assert!(e.to_string().contains("RB_DATABASE_URL"), "{e}");
        assert!(!e.to_string().contains("pw@"), "{e}");
        let e = Settings::resolve(
            None,
            &BTreeMap::from([("RB_DATABASE_URL".to_string(), "sqlite://pw".to_string())]),
            &Layer::default(),
        )
        .expect_err("not postgres");
        assert!(e.to_string().contains("postgres://"), "{e}");
        assert!(!e.to_string().contains("sqlite://pw"), "{e}");
    }

    #[test]
    fn durations_are_humantime_strings() {
        let env = BTreeMap::from([("RB_AGENT_TIMEOUT".to_string(), "30m".to_string())]);
        let s = Settings::resolve(None, &env, &Layer::default()).expect("resolve");
        assert_eq!(s.agent_timeout, Some(Span::secs(1800)));
        let text = toml::to_string(&s).expect("toml");
        assert!(text.contains("poll_interval = \"500ms\""), "{text}");
        let e = Settings::resolve(
            None,
            &BTreeMap::from([("RB_READY_TIMEOUT".to_string(), "60".to_string())]),
            &Layer::default(),
        )
        .expect_err("no unit");
        assert!(e.to_string().contains("RB_READY_TIMEOUT"), "{e}");
    }

    #[test]
    fn numeric_settings_have_ranges_named_in_the_error() {
        let resolve = |env: &[(&str, &str)]| {
            let env: BTreeMap<String, String> = env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            Settings::resolve(None, &env, &Layer::default())
                .expect_err("out of range")
                .to_string()
        };
        let e = resolve(&[("RB_CONCURRENCY", "100000")]);
        assert!(e.contains("between 1 and 1024 (got 100000)"), "{e}");
        let e = resolve(&[("RB_REPEATS", "1000000")]);
        assert!(e.contains("between 1 and 10000"), "{e}");
        let e = resolve(&[("RB_AGENT_TIMEOUT", "1000000000h")]);
        assert!(e.contains("0s to 365 days"), "{e}");
        let e = resolve(&[("RB_MAX_COST_PER_RUN", "inf")]);
        assert!(e.contains("at most 1000000"), "{e}");
        "365days".parse::<Span>().expect("the longest one taken");
    }

    #[test]
    fn the_collection_budget_has_a_range_named_in_the_error() {
        let resolve = |var: &str, v: &str| {
            let env = BTreeMap::from([(var.to_owned(), v.to_owned())]);
            Settings::resolve(None, &env, &Layer::default())
        };
        let s = resolve("RB_REPEATS", "1").expect("defaults");
        assert_eq!(s.collect_timeout, Span::secs(120));
        let s = resolve("RB_COLLECT_TIMEOUT", "2s").expect("2 s is in range");
        assert_eq!(s.collect_timeout.get(), Duration::from_secs(2));
        for bad in ["0s", "500ms", "25h"] {
            let e = resolve("RB_COLLECT_TIMEOUT", bad)
                .expect_err("out of range")
                .to_string();
            assert!(
                e.contains("collect_timeout") && e.contains("between 1s and 1day"),
                "{bad}: {e}"
            );
            assert!(e.contains("--collect-timeout"), "{bad}: {e}");
        }
        let flags = Layer {
            collect_timeout: Some(Span::secs(3 * 24 * 3600)),
            ..Layer::default()
        };
        let e = Settings::resolve(None, &BTreeMap::new(), &flags).expect_err("a flag too");
        assert!(e.to_string().contains("(got 3days)"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let env = BTreeMap::from([("RB_CONCURRENCY".to_string(), "many".to_string())]);
        let e = Settings::resolve(None, &env, &Layer::default()).expect_err("bad env");
        assert!(e.to_string().contains("RB_CONCURRENCY"), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("rb.toml");
        std::fs::write(&file, "anthropic_api_key = \"sk\"\n").expect("write");
        let e = Settings::resolve(Some(&file), &BTreeMap::new(), &Layer::default())
            .expect_err("unknown key");
        assert!(e.to_string().contains("anthropic_api_key"), "{e}");
        let e = Settings::resolve(
            None,
            &BTreeMap::new(),
            &Layer {
                concurrency: Some(0),
                ..Layer::default()
            },
        )
        .expect_err("zero");
        assert!(e.to_string().contains("concurrency"), "{e}");
    }

    #[test]
    fn the_backend_is_docker_or_swarm_from_file_env_or_flag() {
        let s = Settings::resolve(None, &BTreeMap::new(), &Layer::default()).expect("resolve");
        assert_eq!(s.backend, BackendKind::Docker);
        assert_eq!(s.swarm_subnet_pool, sandbox::swarm::DEFAULT_OVERLAY_POOL);
        assert!(s.swarm_constraint_list().is_empty());
        assert_eq!(s.swarm_transport, "http");
        let engine = BTreeMap::from([("RB_SWARM_TRANSPORT".to_string(), "engine".to_string())]);
        let s = Settings::resolve(None, &engine, &Layer::default()).expect("resolve");
        assert_eq!(s.swarm_transport, "engine");
        let bad = BTreeMap::from([("RB_SWARM_TRANSPORT".to_string(), "ssh".to_string())]);
        let e = Settings::resolve(None, &bad, &Layer::default()).expect_err("bad transport");
        assert!(e.to_string().contains("use `engine` or `http`"), "{e}");
        let env = BTreeMap::from([
            ("RB_BACKEND".to_string(), "swarm".to_string()),
            (
                "RB_SWARM_CONSTRAINTS".to_string(),
                "node.labels.rb==yes, node.role==worker".to_string(),
            ),
        ]);
        let s = Settings::resolve(None, &env, &Layer::default()).expect("resolve");
        assert_eq!(s.backend, BackendKind::Swarm);
        assert_eq!(
            s.swarm_constraint_list(),
            ["node.labels.rb==yes", "node.role==worker"]
        );
        let flags = Layer {
            backend: Some(BackendKind::Docker),
            ..Layer::default()
        };
        assert_eq!(
            Settings::resolve(None, &env, &flags)
                .expect("resolve")
                .backend,
            BackendKind::Docker
        );
        let bad = BTreeMap::from([("RB_BACKEND".to_string(), "kubernetes".to_string())]);
        let e = Settings::resolve(None, &bad, &Layer::default()).expect_err("bad backend");
        assert!(e.to_string().contains("use `docker` or `swarm`"), "{e}");
        let bad = BTreeMap::from([(
            "RB_SWARM_SUBNET_POOL".to_string(),
            "10.0.0.0/33".to_string(),
        )]);
        let e = Settings::resolve(None, &bad, &Layer::default()).expect_err("bad pool");
        assert!(e.to_string().contains("swarm_subnet_pool"), "{e}");
    }

    #[test]
    fn judge_settings_one_model_or_a_panel() {
        use rubrics::judge::JudgeApi;
        // Defaults: no judge.
        let s = Settings::resolve(None, &BTreeMap::new(), &Layer::default()).expect("defaults");
        assert!(s.judge_configs().is_empty());
        // One Anthropic judge from the environment: the API's URL and key variable.
        let env = BTreeMap::from([
            ("RB_JUDGE_MODEL".to_string(), "claude-judge".to_string()),
            ("RB_JUDGE_API".to_string(), "anthropic".to_string()),
        ]);
        let s = Settings::resolve(None, &env, &Layer::default()).expect("env");
        let c = s.judge_configs();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].api, JudgeApi::AnthropicMessages);
        assert_eq!(c[0].effective_base_url(), "https://api.anthropic.com/v1");
        assert_eq!(c[0].api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        // A local server without keys.
        let flags = Layer {
            judge_api: Some(JudgeApi::ChatCompletions),
            judge_base_url: Some("http://127.0.0.1:11434/v1".into()),
            judge_api_key_env: Some(String::new()),
            ..Layer::default()
        };
        let c = Settings::resolve(None, &env, &flags)
            .expect("flags")
            .judge_configs();
        assert_eq!(
            (
                c[0].api,
                c[0].base_url.as_str(),
                c[0].api_key_env.as_deref()
            ),
            (JudgeApi::ChatCompletions, "http://127.0.0.1:11434/v1", None)
        );
        assert!(
            Settings::resolve(
                None,
                &BTreeMap::from([("RB_JUDGE_API".to_string(), "gemini".to_string())]),
                &Layer::default()
            )
            .expect_err("unknown API")
            .to_string()
            .contains("RB_JUDGE_API")
        );

        // A panel from the settings file.
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("rb.toml");
        std::fs::write(
            &file,
            "[[judges]]\nmodel = \"gpt-j\"\n\n[[judges]]\napi = \"anthropic_messages\"\nmodel = \"claude-j\"\n\n[[judges]]\nbase_url = \"http://127.0.0.1:8000/v1\"\nmodel = \"local-j\"\napi_key_env = \"\"\n",
        )
        .expect("write");
        let s = Settings::resolve(Some(&file), &BTreeMap::new(), &Layer::default()).expect("panel");
        let c = s.judge_configs();
        let got: Vec<(&str, Option<&str>)> = c
            .iter()
            .map(|j| (j.model.as_str(), j.api_key_env.as_deref()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("gpt-j", Some("OPENAI_API_KEY")),
                ("claude-j", Some("ANTHROPIC_API_KEY")),
                ("local-j", None)
            ]
        );
        // Both a single judge and a panel: refused, naming both.
        let e = Settings::resolve(Some(&file), &env, &Layer::default()).expect_err("both");
        assert!(
            e.to_string().contains("judge_model") && e.to_string().contains("[[judges]]"),
            "{e}"
        );
    }
}
