//! Codex (`codex`, from the `openai-codex-cli-bin` wheel): `codex exec --json
//! --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check -C WS [-m M] -- PROMPT`, with
//! a generated `$CODEX_HOME/config.toml` naming the proxy as its provider (Responses API).

use super::{
    ConfigFile, Driver, DriverError, DriverOptions, LaunchPlan, PROVIDER_ID, Plan, Staging, binary,
    cli_env, required_env,
};
use crate::parse::Dialect;

#[derive(Debug)]
pub struct Codex;

impl Driver for Codex {
    fn staging(&self) -> Staging {
        Staging::Wheel {
            wheel: "openai-codex-cli-bin",
            binary: "codex",
            main: "codex_cli_bin/bin/codex",
            extras: &["codex_cli_bin/bin/codex-code-mode-host"],
        }
    }

    fn required_key(&self, _model: &str) -> Option<&'static str> {
        Some("OPENAI_API_KEY")
    }

    fn plan(
        &self,
        options: &DriverOptions,
        instruction: &str,
        check_binaries: bool,
    ) -> Result<Plan, DriverError> {
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
        let home = options.state_dir.join("home");
        let codex_home = options.state_dir.join("codex-home");
        let mut args: Vec<String> = [
            "exec",
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
            "--color",
            "never",
            "-C",
        ]
        .map(str::to_owned)
        .to_vec();
        args.push(options.workspace.to_string_lossy().into_owned());
        if let Some(model) = &options.model {
            args.extend(["-m".to_owned(), model.clone()]);
        }
        args.extend(["--".to_owned(), instruction.to_owned()]);
        let mut env = cli_env(options);
        env.insert(
            "CODEX_HOME".to_owned(),
            codex_home.to_string_lossy().into_owned(),
        );
        Ok(Plan::Run(LaunchPlan {
            program: binary(options, check_binaries)?,
            args,
            env,
            cwd: options.workspace.clone(),
            dialect: Dialect::CODEX,
            files: vec![ConfigFile {
                path: codex_home.join("config.toml"),
                contents: codex_config(options.model.as_deref(), base_url),
            }],
            dirs: vec![home, codex_home],
            transcript: None,
        }))
    }
}

/// `$CODEX_HOME/config.toml`: one custom provider on the Responses wire API pointing at the
/// proxy, never asking for approval, no update checks.
pub fn codex_config(model: Option<&str>, base_url: &str) -> String {
    let mut root = toml::Table::new();
    if let Some(model) = model {
        root.insert("model".into(), model.into());
    }
    root.insert("model_provider".into(), PROVIDER_ID.into());
    root.insert("approval_policy".into(), "never".into());
    root.insert("sandbox_mode".into(), "danger-full-access".into());
    root.insert("check_for_update_on_startup".into(), false.into());
    let mut provider = toml::Table::new();
    provider.insert("name".into(), "research-bench model proxy".into());
    provider.insert("base_url".into(), base_url.into());
    provider.insert("env_key".into(), "OPENAI_API_KEY".into());
    provider.insert("wire_api".into(), "responses".into());
    provider.insert("request_max_retries".into(), 2.into());
    provider.insert("stream_max_retries".into(), 2.into());
    let mut providers = toml::Table::new();
    providers.insert(PROVIDER_ID.into(), provider.into());
    root.insert("model_providers".into(), providers.into());
    toml::to_string(&root).unwrap_or_default()
}

