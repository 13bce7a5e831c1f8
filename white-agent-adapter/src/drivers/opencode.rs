//! OpenCode (`opencode`, staged by the operator: its binary is only on npm): `opencode run
//! --format json --dangerously-skip-permissions -m platform/M -- PROMPT`, with a generated
//! `opencode.json` naming the proxy as an OpenAI-compatible provider.

use super::{
    ConfigFile, Driver, DriverError, DriverOptions, LaunchPlan, PROVIDER_ID, Plan, Staging, binary,
    cli_env, required_env, required_model,
};
use crate::parse::Dialect;

#[derive(Debug)]
pub struct OpenCode;

impl Driver for OpenCode {
    fn staging(&self) -> Staging {
        Staging::Operator { binary: "opencode" }
    }

    fn required_key(&self, model: &str) -> Option<&'static str> {
        Some(if model.starts_with("openai/") {
            "OPENAI_API_KEY"
        } else {
            "ANTHROPIC_API_KEY"
        })
    }

    fn check_model(&self, model: &str) -> Result<(), String> {
        if model.contains('/') {
            Ok(())
        } else {
            Err("opencode models are PROVIDER/NAME (e.g. anthropic/claude-sonnet-4-5)".into())
        }
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
        let model = required_model(options)?;
        let config_path = options.state_dir.join("opencode").join("opencode.json");
        let mut env = cli_env(options);
        env.insert(
            "OPENCODE_CONFIG".to_owned(),
            config_path.to_string_lossy().into_owned(),
        );
        for key in [
            "OPENCODE_DISABLE_AUTOUPDATE",
            "OPENCODE_DISABLE_MODELS_FETCH",
            "OPENCODE_DISABLE_LSP_DOWNLOAD",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS",
            "OPENCODE_DISABLE_SHARE",
        ] {
            env.insert(key.to_owned(), "1".to_owned());
        }
        let mut args: Vec<String> = [
            "run",
            "--format",
            "json",
            "--dangerously-skip-permissions",
            "-m",
        ]
        .map(str::to_owned)
        .to_vec();
        args.push(format!("{PROVIDER_ID}/{model}"));
        args.extend(["--".to_owned(), instruction.to_owned()]);
        Ok(Plan::Run(LaunchPlan {
            program: binary(options, check_binaries)?,
            args,
            env,
            cwd: options.workspace.clone(),
            dialect: Dialect::OPENCODE,
            files: vec![ConfigFile {
                path: config_path.clone(),
                contents: opencode_config(&model, base_url),
            }],
            dirs: vec![
                options.state_dir.join("home"),
                options.state_dir.join("opencode"),
            ],
            transcript: None,
        }))
    }
}

/// `opencode.json`: one OpenAI-compatible provider pointing at the proxy, every permission
/// allowed, no autoupdate and no sharing. The key is read from `OPENAI_API_KEY` at run time.
pub fn opencode_config(model: &str, base_url: &str) -> String {
    let config = serde_json::json!({
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": false,
        "share": "disabled",
        "permission": {
            "edit": "allow",
            "bash": "allow",
            "webfetch": "allow",
            "external_directory": "allow",
            "doom_loop": "allow"
        },
        "model": format!("{PROVIDER_ID}/{model}"),
        "provider": {
            PROVIDER_ID: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "research-bench model proxy",
                "options": {
                    "baseURL": base_url,
                    "apiKey": "{env:OPENAI_API_KEY}"
                },
                "models": { model: { "name": model } }
            }
        }
    });
    serde_json::to_string_pretty(&config).unwrap_or_default()
}

