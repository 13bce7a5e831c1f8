//! The `http` transport's Swarm objects of a sandbox: its runner program (a **config**, mounted
//! root-only at [`super::runner::RUNNER_PATH`]) and its token (a **secret**, mounted root-only
//! 0400 at `/run/secrets/rb-runner-token`, never in the environment or the command line), both
//! carrying the platform's labels, removed with the sandbox and by the reaper.

use base64::Engine;
use bollard::models::{
    ConfigSpec, SecretSpec, TaskSpecContainerSpecConfigs, TaskSpecContainerSpecFile,
    TaskSpecContainerSpecFile1, TaskSpecContainerSpecSecrets,
};
use bollard::query_parameters::{ListConfigsOptions, ListSecretsOptions};

use super::SwarmBackend;
use super::runner::{RUNNER_PATH, TOKEN_FILE};
use crate::docker::{api_error, status_of};
use crate::objects::object_labels;
use crate::reap_policy::{Reap, doomed, filters};
use crate::{Owner, SandboxError};

/// A sandbox's runner config and token secret.
#[derive(Debug, Clone)]
pub(super) struct RunnerObjects {
    pub(super) config_id: String,
    pub(super) config_name: String,
    pub(super) secret_id: String,
    pub(super) secret_name: String,
}

impl RunnerObjects {
    /// The config's mount in the task's container.
    pub(super) fn config_mount(&self) -> TaskSpecContainerSpecConfigs {
        TaskSpecContainerSpecConfigs {
            file: Some(TaskSpecContainerSpecFile1 {
                name: Some(RUNNER_PATH.to_string()),
                uid: Some("0".into()),
                gid: Some("0".into()),
                mode: Some(0o400),
            }),
            config_id: Some(self.config_id.clone()),
            config_name: Some(self.config_name.clone()),
            ..Default::default()
        }
    }

    /// The secret's mount in the task's container.
    pub(super) fn secret_mount(&self) -> TaskSpecContainerSpecSecrets {
        TaskSpecContainerSpecSecrets {
            file: Some(TaskSpecContainerSpecFile {
                name: Some(TOKEN_FILE.to_string()),
                uid: Some("0".into()),
                gid: Some("0".into()),
                mode: Some(0o400),
            }),
            secret_id: Some(self.secret_id.clone()),
            secret_name: Some(self.secret_name.clone()),
        }
    }
}

/// Creates the runner config and the token secret of the service `name`.
pub(super) async fn create(
    backend: &SwarmBackend,
    owner: &Owner,
    name: &str,
    token: &str,
) -> Result<RunnerObjects, SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    let b64 = base64::engine::general_purpose::STANDARD;
    let config_name = super::names::service_name(format!("{name}-runner"));
    let secret_name = super::names::service_name(format!("{name}-token"));
    let config = docker
        .create_config(ConfigSpec {
            name: Some(config_name.clone()),
            labels: Some(object_labels(owner)),
            data: Some(b64.encode(crate::runner::program())),
            ..Default::default()
        })
        .await
        .map_err(|e| api_error(endpoint, "create_config", e))?;
    let secret = docker
        .create_secret(SecretSpec {
            name: Some(secret_name.clone()),
            labels: Some(object_labels(owner)),
            data: Some(b64.encode(token)),
            ..Default::default()
        })
        .await;
    let secret = match secret {
        Ok(s) => s,
        Err(e) => {
            if let Err(cleanup) = remove_config(backend, &config.id).await {
                tracing::warn!(config = %config_name, error = %cleanup, "removing a half-created config failed");
            }
            return Err(api_error(endpoint, "create_secret", e));
        }
    };
    Ok(RunnerObjects {
        config_id: config.id,
        config_name,
        secret_id: secret.id,
        secret_name,
    })
}

async fn remove_config(backend: &SwarmBackend, id: &str) -> Result<(), SandboxError> {
    match backend.docker.client().delete_config(id).await {
        Ok(()) => Ok(()),
        Err(e) if status_of(&e) == Some(404) => Ok(()),
        Err(e) => Err(api_error(&backend.docker.endpoint, "delete_config", e)),
    }
}

async fn remove_secret(backend: &SwarmBackend, id: &str) -> Result<(), SandboxError> {
    match backend.docker.client().delete_secret(id).await {
        Ok(()) => Ok(()),
        Err(e) if status_of(&e) == Some(404) => Ok(()),
        Err(e) => Err(api_error(&backend.docker.endpoint, "delete_secret", e)),
    }
}

/// Removes a sandbox's objects (after its service: Swarm refuses to remove objects a service
/// still uses). Idempotent.
pub(super) async fn remove(
    backend: &SwarmBackend,
    objects: &RunnerObjects,
) -> Result<(), SandboxError> {
    remove_secret(backend, &objects.secret_id).await?;
    remove_config(backend, &objects.config_id).await
}

/// Removes the configs and secrets of dead runs (or of `run_id`), once their services are
/// gone. Returns how many were removed.
pub(super) async fn reap(
    backend: &SwarmBackend,
    run_id: Option<&str>,
    mode: Reap,
) -> Result<usize, SandboxError> {
    let docker = backend.docker.client();
    let endpoint = &backend.docker.endpoint;
    let mut removed = 0;
    let secrets = docker
        .list_secrets(Some(ListSecretsOptions {
            filters: Some(filters(run_id)),
        }))
        .await
        .map_err(|e| api_error(endpoint, "list_secrets", e))?;
    for s in secrets {
        let labels = s.spec.and_then(|spec| spec.labels).unwrap_or_default();
        let Some(id) = s.id else { continue };
        if doomed(&labels, run_id, mode) {
            match remove_secret(backend, &id).await {
                Ok(()) => removed += 1,
                Err(e) => tracing::warn!(secret = %id, error = %e, "reaping a secret failed"),
            }
        }
    }
    let configs = docker
        .list_configs(Some(ListConfigsOptions {
            filters: Some(filters(run_id)),
        }))
        .await
        .map_err(|e| api_error(endpoint, "list_configs", e))?;
    for c in configs {
        let labels = c.spec.and_then(|spec| spec.labels).unwrap_or_default();
        let Some(id) = c.id else { continue };
        if doomed(&labels, run_id, mode) {
            match remove_config(backend, &id).await {
                Ok(()) => removed += 1,
                Err(e) => tracing::warn!(config = %id, error = %e, "reaping a config failed"),
            }
        }
    }
    Ok(removed)
}
