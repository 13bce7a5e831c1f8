//! The checks every backend makes of a [`SandboxSpec`] and of paths inside a sandbox before
//! any request: a bad spec is [`SandboxError::InvalidSpec`] naming the field, never an engine
//! error.

use std::path::Path;

use crate::child::validate_limits;
use crate::{SandboxError, SandboxSpec};

/// Checks a path inside the sandbox: absolute, and no `.`/`..` components.
pub(crate) fn check_sandbox_path(path: &str) -> Result<(), SandboxError> {
    use std::path::Component;
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(SandboxError::InvalidSpec(format!(
            "sandbox path `{path}` must be absolute"
        )));
    }
    if p.components()
        .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
    {
        return Err(SandboxError::PathOutsideSandbox {
            path: path.to_string(),
        });
    }
    Ok(())
}

pub(crate) fn validate_spec(spec: &SandboxSpec) -> Result<(), SandboxError> {
    validate_limits(&spec.limits)?;
    if spec.image.trim().is_empty() {
        return Err(SandboxError::InvalidSpec("the image name is empty".into()));
    }
    check_sandbox_path(&spec.workdir)?;
    if spec.owner.run_id.is_empty() {
        return Err(SandboxError::InvalidSpec(
            "the owner's run id is empty".into(),
        ));
    }
    if let Some(command) = &spec.command
        && command.is_empty()
    {
        return Err(SandboxError::InvalidSpec(
            "`command` is an empty list; use None for an idle sandbox".into(),
        ));
    }
    for m in &spec.mounts {
        check_sandbox_path(&m.sandbox_path)?;
        if !m.host_path.is_absolute() || !m.host_path.exists() {
            return Err(SandboxError::InvalidSpec(format!(
                "mount source `{}` must be an existing absolute host path",
                m.host_path.display()
            )));
        }
        if m.host_path.to_string_lossy().contains(':') || m.sandbox_path.contains(':') {
            return Err(SandboxError::InvalidSpec(format!(
                "mount paths may not contain `:` (`{}`)",
                m.host_path.display()
            )));
        }
    }
    validate_env_names(spec.env.keys())
}

/// Docker passes the environment as `KEY=value` strings: a name must be non-empty and free of `=`.
pub(crate) fn validate_env_names<'a>(
    mut names: impl Iterator<Item = &'a String>,
) -> Result<(), SandboxError> {
    match names.find(|key| key.is_empty() || key.contains('=')) {
        Some(key) => Err(SandboxError::InvalidSpec(format!(
            "environment variable name `{key}` is invalid"
        ))),
        None => Ok(()),
    }
}
