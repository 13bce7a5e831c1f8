//! How an agent container is launched: the adapter's command line ([`LaunchArgs`] of the
//! shared contract) and environment, and the staged CLI mounts.

use std::collections::BTreeMap;
use std::path::Path;

use sandbox::ReadOnlyMount;
use white_agent_adapter::contract::{DriverKind, LaunchArgs};
use white_agent_adapter::drivers::Staging;
use white_agent_adapter::staging::Sources;

use crate::agents::AgentSpec;

/// The adapter's command line for a hosted agent (`None` for an external one).
pub fn adapter_args(agent: &AgentSpec) -> Option<LaunchArgs> {
    let mut args = LaunchArgs::new(agent.driver()?);
    match agent {
        AgentSpec::Cli { model, .. } => args.model = Some(model.clone()),
        AgentSpec::Command { command } => {
            args.command = vec!["sh".to_owned(), "-c".to_owned(), command.clone()];
        }
        _ => {}
    }
    Some(args)
}

/// The adapter's environment: for model agents the proxy's URL and the trial's dummy token
/// under the names the CLIs read (never a real key).
pub fn adapter_env(
    agent: &AgentSpec,
    proxy_url: Option<&str>,
    token: Option<&str>,
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    if let (Some(url), Some(token)) = (proxy_url, token)
        && agent.uses_model()
    {
        let url = url.trim_end_matches('/');
        env.insert("ANTHROPIC_BASE_URL".into(), url.into());
        env.insert("ANTHROPIC_API_KEY".into(), token.into());
        env.insert("OPENAI_BASE_URL".into(), format!("{url}/v1"));
        env.insert("OPENAI_API_KEY".into(), token.into());
        env.insert("RB_PROXY_TOKEN".into(), token.into());
    }
    env
}

/// Stages the CLI of every agent of the run whose driver stages one (from the Python venv's
/// wheels, or the Python agents' package trees) and returns the read-only mounts, by driver.
pub fn stage_agents(
    agents: &[AgentSpec],
    sources: Sources<'_>,
    cache_dir: &Path,
) -> Result<BTreeMap<DriverKind, ReadOnlyMount>, String> {
    let mut out = BTreeMap::new();
    for a in agents {
        let Some(kind) = a.driver().filter(|d| {
            matches!(
                d.driver().staging(),
                Staging::Wheel { .. } | Staging::Packages
            )
        }) else {
            continue;
        };
        if out.contains_key(&kind) {
            continue;
        }
        let staged = white_agent_adapter::staging::stage(kind, sources, cache_dir)
            .map_err(|e| e.to_string())?;
        out.insert(
            kind,
            ReadOnlyMount {
                host_path: staged.host_dir,
                sandbox_path: staged.mount_path,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hosted_agent_launches_with_arguments_the_adapter_parses() {
        for spec in [
            "oracle",
            "nop",
            "claude-code:model=claude-sonnet-4-5",
            "codex:model=gpt-5",
            "opencode:model=anthropic/claude-sonnet-4-5",
            "aider:model=gpt-5",
            "mini-swe-agent:model=gpt-5",
            "cmd:echo 'a b' > out.txt && exit 3",
        ] {
            let agent = AgentSpec::parse(spec).expect("spec");
            let args = adapter_args(&agent).expect("hosted");
            let parsed = LaunchArgs::from_command(args.command()).expect("adapter parses");
            assert_eq!(parsed, args, "{spec}");
            assert_eq!(Some(parsed.driver), agent.driver());
        }
        let external = AgentSpec::parse("a2a:http://127.0.0.1:9/").expect("spec");
        assert!(adapter_args(&external).is_none());
    }
}
