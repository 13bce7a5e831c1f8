//! Drivers: how each kind of white agent is launched. One file per agent CLI implements
//! [`Driver`] (its argv, environment, generated config files, event format, the provider key it
//! needs, how its CLI is staged and how the green agent names it); the [`drivers!`] list at the
//! end of this file registers each one once, and everything else is derived from it: the
//! [`DriverKind`] names (flags, agent specs, cards, staged folders), the green agent's agent
//! specs and hosted kinds, the staging of CLIs.
//!
//! [`plan`] is pure: it turns the options and the instruction into a [`LaunchPlan`] (program,
//! arguments, environment, working directory, event dialect and the configuration files to
//! write first) without touching the system, so every command line and generated config is
//! unit-tested. The runner executes the plan through `sandbox::child`.
//!
//! | driver | command | dialect |
//! |---|---|---|
//! | `claude-code` | `claude -p --output-format stream-json --verbose --dangerously-skip-permissions [--model M] [--max-turns N] -- PROMPT`, env `IS_SANDBOX=1` | Claude stream-json |
//! | `codex` | `codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check -C WS [-m M] -- PROMPT`, `$CODEX_HOME/config.toml` generated | Codex JSONL |
//! | `opencode` | `opencode run --format json --dangerously-skip-permissions -m platform/M -- PROMPT`, `opencode.json` generated | OpenCode JSON |
//! | `aider` | `python3 -m aider --model openai/M --message PROMPT --edit-format whole --no-git ...` (PyPI `aider-chat`, staged as a package tree) | Aider's text output |
//! | `mini-swe-agent` | `python3 -m minisweagent.run.mini -m openai/M -t PROMPT -y --exit-immediately -o TRAJ` (PyPI `mini-swe-agent`) | its trajectory file |
//! | `command` | the given argv, prompt in `$AGENT_INSTRUCTION` and `$AGENT_INSTRUCTION_FILE` | plain |
//! | `oracle` | `bash ORACLE_DIR/solve.sh` | plain |
//! | `nop` | nothing | - |
//!
//! To add an agent CLI: write `drivers/<name>.rs` (a unit struct implementing [`Driver`]; its
//! output format as an [`crate::parse::Events`] in the same file when no existing one fits), add
//! one line to [`drivers!`], and pin its package (a wheel in `scripts/python-requirements.txt`,
//! or `scripts/agent-packages/<name>.txt` for a Python package tree).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::parse::Dialect;

/// The provider id used in generated Codex and OpenCode configs.
pub const PROVIDER_ID: &str = "platform";

/// Everything a driver needs besides the instruction.
#[derive(Clone)]
pub struct DriverOptions {
    pub kind: DriverKind,
    pub workspace: PathBuf,
    /// Scratch space outside the workspace: the agent's `HOME`, `CODEX_HOME`, generated configs.
    pub state_dir: PathBuf,
    /// Explicit path of the CLI binary; default `<agents_dir>/<driver>/<binary>`.
    pub agent_bin: Option<PathBuf>,
    pub agents_dir: PathBuf,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub oracle_dir: PathBuf,
    /// The `command` driver's argv.
    pub command: Vec<String>,
    /// The adapter's environment (source of the proxy URL and the per-trial token). Values may
    /// be secrets: never logged.
    pub env: BTreeMap<String, String>,
}

impl std::fmt::Debug for DriverOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverOptions")
            .field("kind", &self.kind)
            .field("workspace", &self.workspace)
            .field("state_dir", &self.state_dir)
            .field("agent_bin", &self.agent_bin)
            .field("agents_dir", &self.agents_dir)
            .field("model", &self.model)
            .field("max_turns", &self.max_turns)
            .field("oracle_dir", &self.oracle_dir)
            .field("command", &self.command)
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A file the runner writes before launching.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFile {
    pub path: PathBuf,
    pub contents: String,
}

/// How to launch one run.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub struct LaunchPlan {
    pub program: String,
    pub args: Vec<String>,
    /// Added to the adapter's own environment.
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub dialect: Dialect,
    pub files: Vec<ConfigFile>,
    /// Directories to create first.
    pub dirs: Vec<PathBuf>,
    /// A transcript the CLI writes (outside the workspace), parsed after it exits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript: Option<PathBuf>,
}

impl std::fmt::Debug for LaunchPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchPlan")
            .field("program", &self.program)
            .field("args", &self.args.len())
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("dialect", &self.dialect)
            .field(
                "files",
                &self.files.iter().map(|f| &f.path).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// What to do for one task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    Run(LaunchPlan),
    /// The `nop` driver: complete at once.
    Nothing,
}

/// A driver cannot be launched with the given options.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DriverError {
    #[error("the {driver} driver needs {what}; {fix}")]
    Missing {
        driver: &'static str,
        what: String,
        fix: String,
    },
    #[error(
        "the {driver} binary {path} does not exist; pass --agent-bin or mount the staged CLI at {expected}"
    )]
    BinaryNotFound {
        driver: &'static str,
        path: PathBuf,
        expected: PathBuf,
    },
}

pub(crate) fn env_value<'a>(options: &'a DriverOptions, key: &str) -> Option<&'a str> {
    options
        .env
        .get(key)
        .map(String::as_str)
        .filter(|value| !value.is_empty())
}

pub(crate) fn binary(options: &DriverOptions, check_exists: bool) -> Result<String, DriverError> {
    let kind = options.kind;
    let expected = options
        .agents_dir
        .join(kind.name())
        .join(kind.driver().staging().binary().unwrap_or("agent"));
    let path = options
        .agent_bin
        .clone()
        .unwrap_or_else(|| expected.clone());
    if check_exists && !path.is_file() {
        return Err(DriverError::BinaryNotFound {
            driver: kind.name(),
            path,
            expected,
        });
    }
    Ok(path.to_string_lossy().into_owned())
}

/// Variables handed to the CLIs from the adapter's environment (the proxy URL, the per-trial
/// token, the model), so the launch does not depend on what the adapter's parent exported.
pub const PASSED_THROUGH: &[&str] = &[
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_MODEL",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
];

/// Environment shared by the CLI drivers: a private `HOME`, the proxy settings, no update checks
/// or telemetry.
pub(crate) fn cli_env(options: &DriverOptions) -> BTreeMap<String, String> {
    let home = options.state_dir.join("home");
    let mut env = BTreeMap::new();
    for key in PASSED_THROUGH {
        if let Some(value) = env_value(options, key) {
            env.insert((*key).to_owned(), value.to_owned());
        }
    }
    env.insert("HOME".to_owned(), home.to_string_lossy().into_owned());
    env.insert(
        "XDG_CONFIG_HOME".to_owned(),
        home.join(".config").to_string_lossy().into_owned(),
    );
    env.insert(
        "XDG_DATA_HOME".to_owned(),
        home.join(".local/share").to_string_lossy().into_owned(),
    );
    env.insert(
        "XDG_CACHE_HOME".to_owned(),
        home.join(".cache").to_string_lossy().into_owned(),
    );
    env.insert(
        "XDG_STATE_HOME".to_owned(),
        home.join(".local/state").to_string_lossy().into_owned(),
    );
    env.insert("NO_COLOR".to_owned(), "1".to_owned());
    env
}

/// How the green agent names a driver's agents on its command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpecForm {
    /// The name alone (`oracle`, `nop`).
    Bare,
    /// `NAME:model=MODEL` (the agent CLIs; the model is served by the model proxy).
    Model,
    /// `PREFIX:SHELL COMMAND` (`cmd:`): a shell command run with the proxy's variables.
    Command { prefix: &'static str },
}

/// How a driver's CLI reaches the agent container (staged on the host, mounted read-only at
/// `/opt/platform/agents/<name>/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Staging {
    /// Nothing to stage.
    None,
    /// A native binary shipped in a Python wheel of the platform's venv: `main` (relative to
    /// `site-packages`) is copied as `binary`, with `extras` beside it.
    Wheel {
        wheel: &'static str,
        binary: &'static str,
        main: &'static str,
        extras: &'static [&'static str],
    },
    /// A Python package tree installed by `scripts/bootstrap` (`pip install --target`) from
    /// `scripts/agent-packages/<name>.txt` into `<agent-packages>/<name>/`; run by the
    /// container's `python3` with `PYTHONPATH` = the mount.
    Packages,
    /// Staged by the operator (a directory holding `binary`, passed with `--agent-bin`).
    Operator { binary: &'static str },
}

impl Staging {
    /// The executable's file name inside the staged directory, for binary CLIs.
    pub fn binary(self) -> Option<&'static str> {
        match self {
            Staging::Wheel { binary, .. } | Staging::Operator { binary } => Some(binary),
            Staging::None | Staging::Packages => None,
        }
    }
}

/// One kind of white agent: everything the platform needs to know about it. Registered once in
/// [`drivers!`].
pub trait Driver: Sync + 'static {
    /// How the green agent names its agents (default `NAME:model=MODEL`).
    fn spec_form(&self) -> SpecForm {
        SpecForm::Model
    }
    /// How its CLI is staged (default: nothing to stage).
    fn staging(&self) -> Staging {
        Staging::None
    }
    /// The provider key the model proxy needs for `model` (a real model; the proxy's own
    /// models need none).
    fn required_key(&self, _model: &str) -> Option<&'static str> {
        None
    }
    /// Why `model` cannot be used with this CLI, if it cannot.
    fn check_model(&self, _model: &str) -> Result<(), String> {
        Ok(())
    }
    /// Whether its traffic goes through the model proxy (default: CLIs and commands do).
    fn uses_model(&self) -> bool {
        !matches!(self.spec_form(), SpecForm::Bare)
    }
    /// The launch plan: pure, no system access except (when `check_binaries`) checking that the
    /// staged CLI is there.
    fn plan(
        &self,
        options: &DriverOptions,
        instruction: &str,
        check_binaries: bool,
    ) -> Result<Plan, DriverError>;
}

/// Builds the launch plan. `check_binaries` verifies that the CLI exists (off in unit tests).
pub fn plan(
    options: &DriverOptions,
    instruction: &str,
    check_binaries: bool,
) -> Result<Plan, DriverError> {
    options
        .kind
        .driver()
        .plan(options, instruction, check_binaries)
}

/// `DriverError::Missing` for an environment variable the driver needs.
pub(crate) fn required_env<'a>(
    options: &'a DriverOptions,
    key: &str,
    fix: &str,
) -> Result<&'a str, DriverError> {
    env_value(options, key).ok_or_else(|| DriverError::Missing {
        driver: options.kind.name(),
        what: format!("{key} in the environment"),
        fix: fix.to_owned(),
    })
}

/// The model a driver cannot run without.
pub(crate) fn required_model(options: &DriverOptions) -> Result<String, DriverError> {
    options.model.clone().ok_or_else(|| DriverError::Missing {
        driver: options.kind.name(),
        what: "a model".to_owned(),
        fix: "pass --model NAME (the model name the proxy serves)".to_owned(),
    })
}

/// The launch plan of a [`Staging::Packages`] CLI, `python3 -m MODULE` in the workspace: the
/// container's `python3` with the staged tree first on `PYTHONPATH`, no bytecode written (the
/// mount is read-only), no user site, litellm's bundled model list instead of a download, the
/// OpenAI-compatible proxy as litellm's `OPENAI_API_BASE`. The driver adds its own arguments,
/// environment, files, folders and transcript.
pub(crate) fn python_module(
    options: &DriverOptions,
    check_binaries: bool,
    module: &str,
    dialect: Dialect,
) -> Result<LaunchPlan, DriverError> {
    let tree = options.agents_dir.join(options.kind.name());
    if check_binaries && !tree.is_dir() {
        return Err(DriverError::Missing {
            driver: options.kind.name(),
            what: format!("its staged Python packages at {}", tree.display()),
            fix: "stage them (the green agent does, from scripts/agent-packages/ installed by scripts/bootstrap)".to_owned(),
        });
    }
    let base_url = required_env(
        options,
        "OPENAI_BASE_URL",
        "set it to the model proxy's OpenAI base URL (ending in /v1)",
    )?;
    required_env(
        options,
        "OPENAI_API_KEY",
        "set it to the per-trial model-proxy token",
    )?;
    let mut env = cli_env(options);
    env.insert("PYTHONPATH".to_owned(), tree.to_string_lossy().into_owned());
    env.insert("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned());
    env.insert("PYTHONNOUSERSITE".to_owned(), "1".to_owned());
    env.insert("PYTHONUNBUFFERED".to_owned(), "1".to_owned());
    env.insert("LITELLM_LOCAL_MODEL_COST_MAP".to_owned(), "True".to_owned());
    env.insert("OPENAI_API_BASE".to_owned(), base_url.to_owned());
    Ok(LaunchPlan {
        program: "python3".to_owned(),
        args: vec!["-m".to_owned(), module.to_owned()],
        env,
        cwd: options.workspace.clone(),
        dialect,
        files: Vec::new(),
        dirs: Vec::new(),
        transcript: None,
    })
}

/// Declares the registry: one line per driver, `"name" => Variant(module::Struct)`. Generates
/// [`DriverKind`] (the one list of driver names) and its dispatch to the [`Driver`].
macro_rules! drivers {
    ($($name:literal => $variant:ident($module:ident::$ty:ident)),+ $(,)?) => {
        $(pub mod $module;)+

        /// Which agent the adapter runs.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub enum DriverKind {
            $($variant,)+
        }

        impl DriverKind {
            /// Every driver, in the order help texts list them.
            pub const ALL: &'static [DriverKind] = &[$(DriverKind::$variant,)+];

            /// The name used in flags, agent specs, cards and `<AGENTS_DIR>/<name>/`.
            pub fn name(self) -> &'static str {
                match self {
                    $(DriverKind::$variant => $name,)+
                }
            }

            /// What the driver does.
            pub fn driver(self) -> &'static dyn Driver {
                match self {
                    $(DriverKind::$variant => &$module::$ty,)+
                }
            }
        }
    };
}

drivers! {
    "claude-code" => ClaudeCode(claude_code::ClaudeCode),
    "codex" => Codex(codex::Codex),
    "opencode" => Opencode(opencode::OpenCode),
    "aider" => Aider(aider::Aider),
    "mini-swe-agent" => MiniSweAgent(mini_swe_agent::MiniSweAgent),
    "command" => Command(command::Command),
    "oracle" => Oracle(oracle::Oracle),
    "nop" => Nop(nop::Nop),
}

impl DriverKind {
    /// The CLI's executable name inside its staged directory (binary CLIs only).
    pub fn binary_name(self) -> Option<&'static str> {
        self.driver().staging().binary()
    }
}

impl fmt::Display for DriverKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown driver `{0}`: one of {names}", names = DriverKind::ALL.iter().map(|d| d.name()).collect::<Vec<_>>().join(", "))]
pub struct UnknownDriver(pub String);

impl FromStr for DriverKind {
    type Err = UnknownDriver;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DriverKind::ALL
            .iter()
            .copied()
            .find(|d| d.name() == s)
            .ok_or_else(|| UnknownDriver(s.to_owned()))
    }
}

impl TryFrom<String> for DriverKind {
    type Error = UnknownDriver;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<DriverKind> for String {
    fn from(d: DriverKind) -> Self {
        d.name().to_owned()
    }
}

impl clap::ValueEnum for DriverKind {
    fn value_variants<'a>() -> &'a [Self] {
        DriverKind::ALL
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()))
    }
}

/// Default scratch directory: `$HOME/.white-agent-adapter` when `HOME` is set and outside the
/// workspace, else `/tmp/white-agent-adapter`.
pub fn default_state_dir(home: Option<&Path>, workspace: &Path) -> PathBuf {
    match home {
        Some(home)
            if !home.as_os_str().is_empty()
                && !home.starts_with(workspace)
                && home != Path::new("/") =>
        {
            home.join(".white-agent-adapter")
        }
        _ => PathBuf::from("/tmp/white-agent-adapter"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use codex::codex_config;
    use opencode::opencode_config;

    const AGENTS_DIR: &str = "/opt/platform/agents";
    const ORACLE_DIR: &str = "/oracle/solution";

    fn options(kind: DriverKind) -> DriverOptions {
        let mut env = BTreeMap::new();
        env.insert("ANTHROPIC_BASE_URL".into(), "http://10.0.0.1:9000".into());
        env.insert("ANTHROPIC_AUTH_TOKEN".into(), "trial-token".into());
        env.insert("OPENAI_BASE_URL".into(), "http://10.0.0.1:9000/v1".into());
        env.insert("OPENAI_API_KEY".into(), "trial-token".into());
        DriverOptions {
            kind,
            workspace: "/workspace".into(),
            state_dir: "/home/agent/.white-agent-adapter".into(),
            agent_bin: None,
            agents_dir: AGENTS_DIR.into(),
            model: Some("test-model".into()),
            max_turns: Some(30),
            oracle_dir: ORACLE_DIR.into(),
            command: vec!["python3".into(), "agent.py".into()],
            env,
        }
    }

    fn run_plan(kind: DriverKind) -> LaunchPlan {
        match plan(&options(kind), "Solve the task.", false).expect("plan") {
            Plan::Run(plan) => plan,
            Plan::Nothing => panic!("expected a run"),
        }
    }

    #[test]
    fn launch_plans_are_stable() {
        for kind in [
            DriverKind::ClaudeCode,
            DriverKind::Codex,
            DriverKind::Opencode,
            DriverKind::Aider,
            DriverKind::MiniSweAgent,
            DriverKind::Command,
            DriverKind::Oracle,
        ] {
            insta::assert_json_snapshot!(format!("plan_{}", kind.name()), run_plan(kind));
        }
        assert_eq!(
            plan(&options(DriverKind::Nop), "x", true),
            Ok(Plan::Nothing)
        );
    }

    #[test]
    fn generated_codex_config_is_valid_toml_with_the_proxy_provider() {
        let text = codex_config(Some("gpt-x"), "http://proxy:1/v1");
        let parsed: toml::Table = toml::from_str(&text).expect("valid TOML");
        assert_eq!(parsed["model_provider"].as_str(), Some(PROVIDER_ID));
        let provider = &parsed["model_providers"][PROVIDER_ID];
        assert_eq!(provider["wire_api"].as_str(), Some("responses"));
        assert_eq!(provider["base_url"].as_str(), Some("http://proxy:1/v1"));
        assert_eq!(provider["env_key"].as_str(), Some("OPENAI_API_KEY"));
        assert!(
            !text.contains("trial-token"),
            "the token is read from the environment, never written"
        );
    }

    #[test]
    fn generated_opencode_config_names_the_provider_and_no_secret() {
        let text = opencode_config("m1", "http://proxy:1/v1");
        let parsed: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(parsed["autoupdate"], false);
        assert_eq!(parsed["model"], "platform/m1");
        assert_eq!(
            parsed["provider"]["platform"]["options"]["baseURL"],
            "http://proxy:1/v1"
        );
        assert_eq!(parsed["permission"]["bash"], "allow");
    }

    #[test]
    fn missing_inputs_are_clear_errors() {
        let mut claude = options(DriverKind::ClaudeCode);
        claude.env.remove("ANTHROPIC_AUTH_TOKEN");
        let err = plan(&claude, "x", false).expect_err("no token");
        assert!(err.to_string().contains("ANTHROPIC_AUTH_TOKEN"), "{err}");

        let mut codex = options(DriverKind::Codex);
        codex.env.remove("OPENAI_BASE_URL");
        assert!(
            plan(&codex, "x", false)
                .expect_err("no url")
                .to_string()
                .contains("OPENAI_BASE_URL")
        );

        let mut opencode = options(DriverKind::Opencode);
        opencode.model = None;
        assert!(
            plan(&opencode, "x", false)
                .expect_err("no model")
                .to_string()
                .contains("--model")
        );

        let mut command = options(DriverKind::Command);
        command.command.clear();
        assert!(
            plan(&command, "x", false)
                .expect_err("no argv")
                .to_string()
                .contains("--")
        );

        let mut bin = options(DriverKind::Codex);
        bin.agents_dir = "/nonexistent".into();
        let err = plan(&bin, "x", true).expect_err("no binary");
        assert!(
            err.to_string().contains("/nonexistent/codex/codex"),
            "{err}"
        );

        let mut oracle = options(DriverKind::Oracle);
        oracle.oracle_dir = "/nonexistent".into();
        assert!(plan(&oracle, "x", true).is_err());

        for kind in [DriverKind::Aider, DriverKind::MiniSweAgent] {
            let mut python = options(kind);
            python.agents_dir = "/nonexistent".into();
            let err = plan(&python, "x", true).expect_err("not staged");
            assert!(err.to_string().contains("scripts/agent-packages"), "{err}");
            let mut python = options(kind);
            python.env.remove("OPENAI_BASE_URL");
            let err = plan(&python, "x", false).expect_err("no url");
            assert!(err.to_string().contains("OPENAI_BASE_URL"), "{err}");
        }
    }

    #[test]
    fn the_registry_is_one_list() {
        for &kind in DriverKind::ALL {
            assert_eq!(kind.name().parse::<DriverKind>(), Ok(kind));
            let driver = kind.driver();
            // a staged binary or package tree is found under the driver's own name
            if let Staging::Wheel { binary, .. } = driver.staging() {
                assert_eq!(kind.binary_name(), Some(binary));
            }
            assert_eq!(driver.uses_model(), driver.spec_form() != SpecForm::Bare);
        }
        let err = "gpt".parse::<DriverKind>().expect_err("unknown");
        assert!(err.to_string().contains("aider, mini-swe-agent"), "{err}");
    }

    #[test]
    fn state_dir_stays_out_of_the_workspace() {
        let ws = Path::new("/workspace");
        assert_eq!(
            default_state_dir(Some(Path::new("/home/agent")), ws),
            Path::new("/home/agent/.white-agent-adapter")
        );
        assert_eq!(
            default_state_dir(Some(Path::new("/workspace")), ws),
            Path::new("/tmp/white-agent-adapter")
        );
        assert_eq!(
            default_state_dir(None, ws),
            Path::new("/tmp/white-agent-adapter")
        );
    }

    #[test]
    fn debug_output_hides_environment_values() {
        let text = format!(
            "{:?} {:?}",
            options(DriverKind::Codex),
            run_plan(DriverKind::Codex)
        );
        assert!(!text.contains("trial-token"));
    }
}
