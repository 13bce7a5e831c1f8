//! White-agent specs as given on the command line (`oracle`, `nop`, `claude-code:model=…`,
//! `codex:model=…`, `opencode:model=…`, `aider:model=…`, `mini-swe-agent:model=…`, `cmd:…`,
//! `a2a:URL`) and what each one needs. Every hosted form comes from the adapter's drivers
//! registry (`white_agent_adapter::drivers`): a new agent CLI needs no change here.

use std::collections::BTreeMap;
use std::fmt;

use white_agent_adapter::contract::DriverKind;
use white_agent_adapter::drivers::SpecForm;

/// One white agent under test.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AgentSpec {
    /// Copies the task's reference solution into the workspace (the only agent that sees it).
    Oracle,
    /// Does nothing (the floor).
    Nop,
    /// An agent CLI run by its driver against the model proxy.
    Cli { driver: DriverKind, model: String },
    /// Runs a shell command in `/workspace` (`sh -c`).
    Command { command: String },
    /// An external agent already serving A2A at this URL (receives the workspace as parts:
    /// inline up to `inline_file_max_bytes`, larger files as `url` parts served by the green
    /// agent for the trial; its `url` artifacts are downloaded from the same host only).
    External { url: String },
}

/// The spec forms, for messages: `oracle, nop, claude-code:model=NAME, …, cmd:SHELL COMMAND`.
fn forms() -> String {
    DriverKind::ALL
        .iter()
        .map(|d| match d.driver().spec_form() {
            SpecForm::Bare => d.name().to_owned(),
            SpecForm::Model => format!("{}:model=NAME", d.name()),
            SpecForm::Command { prefix } => format!("{prefix}:SHELL COMMAND"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names a request may use for hosted agents (`serve --allow-hosted`): one per driver.
pub fn hosted_kinds() -> Vec<&'static str> {
    DriverKind::ALL
        .iter()
        .map(|d| match d.driver().spec_form() {
            SpecForm::Command { prefix } => prefix,
            _ => d.name(),
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentSpecError {
    #[error("unknown agent `{spec}`{hint}: use {forms} or a2a:URL", forms = forms())]
    Unknown {
        spec: String,
        /// ` (did you mean `…`?)` or nothing.
        hint: String,
    },
    #[error("agent `{spec}`: {reason}")]
    Invalid { spec: String, reason: String },
    #[error(
        "agent `{agent}` needs the environment variable {var} (its API key; keys are read from the \
         environment only and stay in the model proxy): export {var}=... or drop the agent"
    )]
    MissingKey { agent: String, var: String },
}

fn options(spec: &str, rest: &str) -> Result<BTreeMap<String, String>, AgentSpecError> {
    let mut out = BTreeMap::new();
    for part in rest.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| AgentSpecError::Invalid {
                spec: spec.to_owned(),
                reason: format!("option `{part}` is not KEY=VALUE"),
            })?;
        if k != "model" {
            return Err(AgentSpecError::Invalid {
                spec: spec.to_owned(),
                reason: format!("unknown option `{k}` (only `model` is supported)"),
            });
        }
        if v.is_empty() {
            return Err(AgentSpecError::Invalid {
                spec: spec.to_owned(),
                reason: "empty model name".into(),
            });
        }
        out.insert(k.to_owned(), v.to_owned());
    }
    Ok(out)
}

fn model(spec: &str, rest: Option<&str>) -> Result<String, AgentSpecError> {
    let opts = options(spec, rest.unwrap_or(""))?;
    opts.get("model")
        .cloned()
        .ok_or_else(|| AgentSpecError::Invalid {
            spec: spec.to_owned(),
            reason: "a model is required, e.g. `:model=NAME`".into(),
        })
}

/// The agent kinds a spec starts with: one per driver, and `a2a`.
fn kinds() -> Vec<&'static str> {
    let mut kinds = hosted_kinds();
    kinds.push("a2a");
    kinds
}

/// Whether `kind` names a driver that takes no options (`oracle`, `nop`).
fn is_bare(kind: &str) -> bool {
    DriverKind::ALL
        .iter()
        .any(|d| d.name() == kind && matches!(d.driver().spec_form(), SpecForm::Bare))
}

/// An unknown spec, with the spec it was probably meant to be.
fn unknown(spec: &str, head: &str, rest: Option<&str>) -> AgentSpecError {
    let hint = match crate::suggest::closest(head, kinds()) {
        Some(kind) => match rest {
            Some(rest) if !is_bare(kind) => {
                format!(" (did you mean `{kind}:{rest}`?)")
            }
            _ => format!(" (did you mean `{kind}`?)"),
        },
        None if is_bare(head) => format!(" (`{head}` takes no options)"),
        None => String::new(),
    };
    AgentSpecError::Unknown {
        spec: spec.to_owned(),
        hint,
    }
}

impl AgentSpec {
    /// Parses one spec.
    pub fn parse(spec: &str) -> Result<Self, AgentSpecError> {
        let spec = spec.trim();
        let (head, rest) = match spec.split_once(':') {
            Some((h, r)) => (h, Some(r)),
            None => (spec, None),
        };
        if head == "a2a" {
            let url = rest.unwrap_or("").trim();
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(AgentSpecError::Invalid {
                    spec: spec.to_owned(),
                    reason: "expected a2a:http://HOST:PORT/...".into(),
                });
            }
            return Ok(AgentSpec::External {
                url: url.to_owned(),
            });
        }
        let found = DriverKind::ALL
            .iter()
            .copied()
            .find_map(|d| match d.driver().spec_form() {
                SpecForm::Command { prefix } if prefix == head => {
                    Some((d, SpecForm::Command { prefix }))
                }
                form if !matches!(form, SpecForm::Command { .. }) && d.name() == head => {
                    Some((d, form))
                }
                _ => None,
            });
        let Some((driver, form)) = found else {
            return Err(unknown(spec, head, rest));
        };
        Ok(match form {
            SpecForm::Bare if rest.is_none() => match driver {
                DriverKind::Oracle => AgentSpec::Oracle,
                _ => AgentSpec::Nop,
            },
            SpecForm::Bare => return Err(unknown(spec, head, rest)),
            SpecForm::Model => {
                let model = model(spec, rest)?;
                driver
                    .driver()
                    .check_model(&model)
                    .map_err(|reason| AgentSpecError::Invalid {
                        spec: spec.to_owned(),
                        reason,
                    })?;
                AgentSpec::Cli { driver, model }
            }
            SpecForm::Command { .. } => {
                let command = rest.unwrap_or("").trim();
                if command.is_empty() {
                    return Err(AgentSpecError::Invalid {
                        spec: spec.to_owned(),
                        reason: "empty command: use cmd:SHELL COMMAND".into(),
                    });
                }
                AgentSpec::Command {
                    command: command.to_owned(),
                }
            }
        })
    }

    /// Parses a comma-separated list (`--agents oracle,nop`). A `cmd:` command containing commas
    /// must be given with its own `--agent` flag instead.
    pub fn parse_list(list: &str) -> Result<Vec<Self>, AgentSpecError> {
        list.split(',')
            .filter(|s| !s.trim().is_empty())
            .map(Self::parse)
            .collect()
    }

    /// The adapter driver that runs this agent (`None` for an external `a2a:URL` agent).
    pub fn driver(&self) -> Option<DriverKind> {
        Some(match self {
            AgentSpec::Oracle => DriverKind::Oracle,
            AgentSpec::Nop => DriverKind::Nop,
            AgentSpec::Cli { driver, .. } => *driver,
            AgentSpec::Command { .. } => DriverKind::Command,
            AgentSpec::External { .. } => return None,
        })
    }

    /// The provider API key this agent's model traffic needs (held by the model proxy, never
    /// handed to the agent).
    pub fn required_key(&self) -> Option<&'static str> {
        match self {
            AgentSpec::Cli { driver, model } if !is_proxy_model(model) => {
                driver.driver().required_key(model)
            }
            _ => None,
        }
    }

    /// Whether this agent's traffic goes through the model proxy.
    pub fn uses_model(&self) -> bool {
        self.driver().is_some_and(|d| d.driver().uses_model())
    }

    /// Whether this agent runs in a platform container (everything but `a2a:URL`).
    pub fn is_hosted(&self) -> bool {
        !matches!(self, AgentSpec::External { .. })
    }

    /// Checks that every key the agent needs is present in `env` (a non-empty value).
    pub fn check_keys(&self, env: &BTreeMap<String, String>) -> Result<(), AgentSpecError> {
        if let Some(var) = self.required_key()
            && env.get(var).is_none_or(|v| v.trim().is_empty())
        {
            return Err(AgentSpecError::MissingKey {
                agent: self.to_string(),
                var: var.to_owned(),
            });
        }
        Ok(())
    }
}

/// Models the proxy serves itself (`mock`, `scripted:<name>`): no provider key needed.
pub fn is_proxy_model(model: &str) -> bool {
    let name = model.rsplit('/').next().unwrap_or(model);
    name == "mock" || name.starts_with("scripted:") || model.starts_with("scripted:")
}

impl fmt::Display for AgentSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentSpec::Oracle => f.write_str("oracle"),
            AgentSpec::Nop => f.write_str("nop"),
            AgentSpec::Cli { driver, model } => write!(f, "{driver}:model={model}"),
            AgentSpec::Command { command } => write!(f, "cmd:{command}"),
            AgentSpec::External { url } => write!(f, "a2a:{url}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_form_parses_and_round_trips() {
        for s in [
            "oracle",
            "nop",
            "claude-code:model=claude-sonnet-4-5",
            "codex:model=gpt-5-codex",
            "opencode:model=anthropic/claude-sonnet-4-5",
            "aider:model=gpt-5",
            "mini-swe-agent:model=scripted:fix",
            "cmd:python solve.py && echo done",
            "a2a:http://127.0.0.1:9999/",
        ] {
            let spec = AgentSpec::parse(s).expect(s);
            assert_eq!(spec.to_string(), s);
        }
        assert_eq!(
            AgentSpec::parse_list("oracle, nop").expect("list"),
            vec![AgentSpec::Oracle, AgentSpec::Nop]
        );
    }

    #[test]
    fn bad_specs_name_the_cause() {
        let e = AgentSpec::parse("gpt4").expect_err("unknown");
        assert!(e.to_string().contains("unknown agent `gpt4`"), "{e}");
        assert!(e.to_string().contains("aider:model=NAME"), "{e}");
        assert!(AgentSpec::parse("cmd").is_err());
        assert!(AgentSpec::parse("command:ls").is_err());
        let e = AgentSpec::parse("claude-code").expect_err("no model");
        assert!(e.to_string().contains("a model is required"), "{e}");
        let e = AgentSpec::parse("codex:temperature=1").expect_err("bad option");
        assert!(
            e.to_string().contains("unknown option `temperature`"),
            "{e}"
        );
        let e = AgentSpec::parse("opencode:model=sonnet").expect_err("no provider");
        assert!(e.to_string().contains("PROVIDER/NAME"), "{e}");
        assert!(AgentSpec::parse("cmd:").is_err());
        assert!(AgentSpec::parse("a2a:ftp://x").is_err());
        assert!(AgentSpec::parse("oracle:x").is_err());
    }

    #[test]
    fn keys_are_required_per_provider() {
        let env = BTreeMap::from([("OPENAI_API_KEY".to_string(), "sk-x".to_string())]);
        assert!(
            AgentSpec::parse("codex:model=m")
                .expect("p")
                .check_keys(&env)
                .is_ok()
        );
        let e = AgentSpec::parse("claude-code:model=m")
            .expect("p")
            .check_keys(&env)
            .expect_err("missing");
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"), "{e}");
        assert!(
            AgentSpec::parse("opencode:model=openai/gpt-5")
                .expect("p")
                .check_keys(&env)
                .is_ok()
        );
        assert!(AgentSpec::Oracle.check_keys(&BTreeMap::new()).is_ok());
        assert!(
            AgentSpec::parse("aider:model=gpt-5")
                .expect("p")
                .check_keys(&env)
                .is_ok()
        );
        // the proxy's own models need no provider key
        assert!(
            AgentSpec::parse("claude-code:model=mock")
                .expect("p")
                .check_keys(&BTreeMap::new())
                .is_ok()
        );
        assert!(
            AgentSpec::parse("codex:model=scripted:fix")
                .expect("p")
                .check_keys(&BTreeMap::new())
                .is_ok()
        );
    }
}

#[cfg(test)]
mod registry {
    use super::*;

    #[test]
    fn every_driver_has_one_spec_form_and_hosted_kind() {
        assert_eq!(
            hosted_kinds(),
            [
                "claude-code",
                "codex",
                "opencode",
                "aider",
                "mini-swe-agent",
                "cmd",
                "oracle",
                "nop"
            ]
        );
        assert!(!AgentSpec::Oracle.uses_model());
        assert!(AgentSpec::parse("cmd:true").expect("p").uses_model());
        assert!(
            AgentSpec::parse("mini-swe-agent:model=m")
                .expect("p")
                .uses_model()
        );
    }
}
