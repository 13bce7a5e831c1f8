//! Claude Code (`claude`, from the `claude-agent-sdk` wheel): `claude -p --output-format
//! stream-json --verbose --dangerously-skip-permissions [--model M] [--max-turns N] -- PROMPT`,
//! against the proxy's Anthropic Messages endpoint (`ANTHROPIC_BASE_URL`).

use super::{Driver, DriverError, DriverOptions, LaunchPlan, Plan, Staging, binary, cli_env, env_value};
use crate::parse::Dialect;

#[derive(Debug)]
pub struct ClaudeCode;

impl Driver for ClaudeCode {
    fn staging(&self) -> Staging {
        Staging::Wheel {
            wheel: "claude-agent-sdk",
            binary: "claude",
            main: "claude_agent_sdk/_bundled/claude",
            extras: &[],
        }
    }

    fn required_key(&self, _model: &str) -> Option<&'static str> {
        Some("ANTHROPIC_API_KEY")
    }

    fn plan(
        &self,
        options: &DriverOptions,
        instruction: &str,
        check_binaries: bool,
    ) -> Result<Plan, DriverError> {
        if env_value(options, "ANTHROPIC_AUTH_TOKEN").is_none()
            && env_value(options, "ANTHROPIC_API_KEY").is_none()
        {
            return Err(DriverError::Missing {
                driver: "claude-code",
                what: "ANTHROPIC_AUTH_TOKEN or ANTHROPIC_API_KEY in the environment".to_owned(),
                fix: "set it to the per-trial model-proxy token (with ANTHROPIC_BASE_URL = the proxy URL)".to_owned(),
            });
        }
        let mut args: Vec<String> = [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        .map(str::to_owned)
        .to_vec();
        if let Some(model) = &options.model {
            args.extend(["--model".to_owned(), model.clone()]);
        }
        if let Some(turns) = options.max_turns {
            args.extend(["--max-turns".to_owned(), turns.to_string()]);
        }
        args.extend(["--".to_owned(), instruction.to_owned()]);
        let mut env = cli_env(options);
        for (key, value) in [
            ("IS_SANDBOX", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ] {
            env.insert(key.to_owned(), value.to_owned());
        }
        Ok(Plan::Run(LaunchPlan {
            program: binary(options, check_binaries)?,
            args,
            env,
            cwd: options.workspace.clone(),
            dialect: Dialect::CLAUDE_CODE,
            files: Vec::new(),
            dirs: vec![options.state_dir.join("home")],
            transcript: None,
        }))
    }
}
