//! Phase 2, launch: a hosted agent gets its sandbox (adapter mounted, workspace copied in) and
//! is waited for until it serves its agent card (`create`, `ready`): on an internal network of
//! its own when it uses a model (it reaches the model proxy's port alone), else with no network
//! at all, its adapter reached through the backend's loopback forwarder (or, on a backend
//! without one, on an internal network that reaches nothing);
//! an external agent is connected to, with a file server for its big workspace files (`ready`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use a2a_protocol::{A2aClient, ClientConfig};
use sandbox::{CopyIn, NetworkPolicy, Owner, ReadOnlyMount, Role, Sandbox, SandboxSpec};

use super::env::{InfraError, RunEnv, TrialInput, io};
use super::phases::PhaseLog;
use super::prepare::Prepared;
use super::resources::Resources;
use super::side::{AgentSide, External, Hosted};
use crate::agents::AgentSpec;
use crate::launch;
use crate::url_files::FileServer;
use white_agent_adapter::contract::{DEFAULT_PORT, paths};

/// What [`create`] made: a hosted agent's sandbox, started but not yet answering, or an
/// external agent already connected to.
pub(crate) enum Created {
    Hosted(Arc<dyn Sandbox>),
    External(Box<AgentSide>),
}

impl Created {
    /// The hosted agent's container id.
    pub(crate) fn container(&self) -> Option<&str> {
        match self {
            Created::Hosted(sb) => Some(sb.id()),
            Created::External(_) => None,
        }
    }

    /// The external agent's URL.
    pub(crate) fn url(&self) -> Option<&str> {
        match self {
            Created::Hosted(_) => None,
            Created::External(side) => match side.as_ref() {
                AgentSide::External(e) => Some(&e.url),
                AgentSide::Hosted(_) => None,
            },
        }
    }
}

/// Starts (hosted: `create`) or connects to (external: `ready`) the trial's agent. A hosted
/// agent is then waited for by [`ready`]; the attempt is recorded between the two, so a crash
/// while its adapter starts leaves a container a resumed run takes over.
pub(crate) async fn create(
    env: &RunEnv,
    input: &TrialInput,
    prep: &Prepared,
    res: &mut Resources,
    log: &mut PhaseLog<'_>,
) -> Result<Created, InfraError> {
    if let AgentSpec::External { url } = &input.agent {
        return log
            .run("ready", async {
                let config = ClientConfig {
                    headers: agent_headers(env.settings.agent_header.as_deref())?,
                    card_hosts: card_hosts(env.settings.allow_card_host.as_deref()),
                    ..client_config()
                };
                let client = A2aClient::connect(url, config).await?;
                // Workspace files over the inline threshold go as `url` parts served for this
                // trial only, from the agent view (never a held-out file).
                let file_server = big_file_server(env, &input.task.agent_view()).await?;
                Ok(Created::External(Box::new(AgentSide::External(External {
                    url: url.clone(),
                    client,
                    file_server,
                }))))
            })
            .await;
    }
    let sandbox = log
        .run("create", create_sandbox(env, input, prep, res))
        .await?;
    Ok(Created::Hosted(sandbox))
}

/// Waits for a hosted agent's card (`ready`); an external agent is ready once connected.
pub(crate) async fn ready(
    env: &RunEnv,
    created: Created,
    log: &mut PhaseLog<'_>,
) -> Result<AgentSide, InfraError> {
    let sandbox = match created {
        Created::External(side) => return Ok(*side),
        Created::Hosted(sandbox) => sandbox,
    };
    let client = log
        .run("ready", async {
            let base = format!("http://{}", sandbox.host_endpoint(DEFAULT_PORT).await?);
            wait_ready(env, sandbox.as_ref(), &base).await
        })
        .await?;
    Ok(AgentSide::Hosted(Hosted { sandbox, client }))
}

/// The agent sandbox's limits for `task` under `settings` (also what admission to a cluster
/// counts).
pub fn agent_limits(settings: &crate::config::Settings, task: &tasks::Task) -> sandbox::Limits {
    let view = task.agent_view();
    sandbox::Limits {
        cpus: settings.cpus.min(view.environment.cpus.max(0.1)),
        memory_bytes: view.environment.memory_mb.min(settings.memory_mb) * 1024 * 1024,
        pids: 512,
    }
}

/// The agent's network and sandbox: an internal network reaching the model proxy's port alone
/// for an agent that uses a model; none for the others where the backend reaches a sandbox's
/// loopback (Docker; Swarm: an internal network reaching nothing).
async fn create_sandbox(
    env: &RunEnv,
    input: &TrialInput,
    prep: &Prepared,
    res: &mut Resources,
) -> Result<Arc<dyn Sandbox>, InfraError> {
    let view = input.task.agent_view();
    let owner = Owner {
        run_id: env.run_id.clone(),
        trial_id: Some(input.planned.id.clone()),
        role: Role::Agent,
    };
    let allowed = match (&env.proxy, input.agent.uses_model()) {
        (Some(p), true) => Some(p.port()),
        _ => None,
    };
    let network = if allowed.is_none() && env.backend.reaches_loopback().await {
        None
    } else {
        let network = env.backend.create_network(&owner, allowed).await?;
        res.keep_network(network.clone());
        Some(network)
    };
    let mut mounts = vec![ReadOnlyMount {
        host_path: env.adapter_bin.clone(),
        sandbox_path: paths::ADAPTER_BIN.into(),
    }];
    if input.agent == AgentSpec::Oracle
        && let Some(sol) = input.task.oracle_solution()
    {
        mounts.push(ReadOnlyMount {
            host_path: sol.dir.clone(),
            sandbox_path: paths::ORACLE_DIR.into(),
        });
    }
    if let Some(m) = input.agent.driver().and_then(|d| env.staged.get(&d)) {
        mounts.push(m.clone());
    }
    let proxy_url = match (
        &env.proxy,
        network.as_ref().and_then(|n| n.allowed_endpoint),
    ) {
        (Some(_), Some(addr)) => Some(format!("http://{addr}")),
        _ => None,
    };
    let spec = SandboxSpec {
        image: input.image.clone(),
        owner,
        env: launch::adapter_env(
            &input.agent,
            proxy_url.as_deref(),
            prep.proxy_token.as_deref(),
        ),
        workdir: paths::WORKSPACE.into(),
        user: None,
        limits: agent_limits(&env.settings, &input.task),
        mounts,
        network: network.map_or(NetworkPolicy::Loopback, NetworkPolicy::Internal),
        command: launch::adapter_args(&input.agent).map(|a| a.command()),
    };
    // The workspace travels with the creation: one upload before the adapter starts.
    let workspace = [CopyIn::new(view.workspace.dir(), paths::WORKSPACE)];
    let sandbox = env.backend.create_with(spec, &workspace).await?;
    Ok(res.keep_agent(Arc::from(sandbox)))
}

/// The headers for an external agent, their values read from the environment now.
pub(super) fn agent_headers(spec: Option<&str>) -> Result<a2a_protocol::AgentHeaders, InfraError> {
    let mut headers = a2a_protocol::AgentHeaders::new();
    let specs =
        crate::config::parse_agent_headers(spec.unwrap_or("")).map_err(InfraError::Config)?;
    for (name, var) in specs {
        let value = std::env::var(&var).map_err(|_| {
            InfraError::Config(format!(
                "--agent-header {name}=env:{var}: the environment variable {var} is not set"
            ))
        })?;
        headers.push(name, value);
    }
    Ok(headers)
}

/// The hosts of `--allow-card-host` (comma-separated), lower case.
pub(super) fn card_hosts(spec: Option<&str>) -> Vec<String> {
    spec.unwrap_or_default()
        .split(',')
        .map(|h| h.trim().to_ascii_lowercase())
        .filter(|h| !h.is_empty())
        .collect()
}

/// The A2A client settings for an agent once it is up.
pub(super) fn client_config() -> ClientConfig {
    ClientConfig {
        timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(3),
        retries: 2,
        ..ClientConfig::default()
    }
}

/// Polls for the agent card until the ready timeout; fails early when the adapter exits. The
/// first polls are close together (an adapter serves within tens of milliseconds of its
/// start), then every 100 ms.
pub(super) async fn wait_ready(
    env: &RunEnv,
    sb: &dyn Sandbox,
    base: &str,
) -> Result<A2aClient, InfraError> {
    let deadline = Instant::now() + env.settings.ready_timeout.get();
    let quick = ClientConfig {
        timeout: Duration::from_secs(3),
        connect_timeout: Duration::from_secs(1),
        retries: 0,
        ..ClientConfig::default()
    };
    let mut pause = Duration::from_millis(5);
    loop {
        match a2a_protocol::fetch_agent_card(base, &quick).await {
            Ok(card) => {
                // The card names the URL the adapter believes it has; we reach the container at
                // `base`, so keep only the interface's path.
                let path = card
                    .jsonrpc_interface()
                    .map(|i| rpc_path(&i.url))
                    .unwrap_or_else(|| "/".to_owned());
                // The card travels with the client: it streams when the card says so.
                return Ok(A2aClient::new(
                    format!("{}{path}", base.trim_end_matches('/')),
                    client_config(),
                )?
                .with_card(card));
            }
            Err(e) => {
                let exit = sb.main_exit().await;
                // Its node left (Swarm): say so, not "not ready".
                if let Err(lost @ sandbox::SandboxError::NodeLost { .. }) = exit {
                    return Err(lost.into());
                }
                if let Ok(Some(code)) = exit {
                    let log = sb.logs(4096).await.unwrap_or_default();
                    return Err(InfraError::NotReady {
                        secs: env.settings.ready_timeout.get().as_secs(),
                        detail: format!(": the adapter exited with {code}: {}", log.trim()),
                    });
                }
                if Instant::now() >= deadline {
                    return Err(InfraError::NotReady {
                        secs: env.settings.ready_timeout.get().as_secs(),
                        detail: format!(" ({e})"),
                    });
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// The path (and query) of an absolute or relative URL.
fn rpc_path(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = if url.contains("://") {
        rest.find('/').map_or("/", |i| &rest[i..])
    } else {
        rest
    };
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{path}")
    }
}

/// The file server for an external agent's workspace files over the inline threshold (`None`
/// when there are none). Built from the agent view only.
async fn big_file_server(
    env: &RunEnv,
    view: &tasks::AgentView,
) -> Result<Option<FileServer>, InfraError> {
    let files = view
        .workspace
        .files()
        .map_err(|e| InfraError::Grading(e.to_string()))?;
    let mut big = BTreeMap::new();
    for f in files {
        let size = std::fs::metadata(&f.host_path)
            .map_err(io(format!("reading {}", f.host_path.display())))?
            .len();
        if size > env.settings.inline_file_max_bytes {
            big.insert(f.relative.clone(), f.host_path.clone());
        }
    }
    if big.is_empty() {
        return Ok(None);
    }
    let server = FileServer::start(&env.settings.file_server_host, big)
        .await
        .map_err(|e| InfraError::Io {
            what: "starting the file server for the external agent".into(),
            source: std::io::Error::other(e.to_string()),
        })?;
    Ok(Some(server))
}

#[cfg(test)]
mod tests {
    use super::rpc_path;

    #[test]
    fn rpc_paths() {
        assert_eq!(rpc_path("http://127.0.0.1:8700/"), "/");
        assert_eq!(rpc_path("http://x:1/a2a/rpc"), "/a2a/rpc");
        assert_eq!(rpc_path("http://x:1"), "/");
        assert_eq!(rpc_path("/rpc"), "/rpc");
    }
}
