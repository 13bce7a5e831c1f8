//! A run: plan (tasks × agents × repeats), preflight checks (before any container starts),
//! executing pending trials concurrently, resuming, and reaping on signals.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tracing::{Instrument, info, info_span, warn};

use crate::agents::{AgentSpec, AgentSpecError};
use crate::config::Settings;
use crate::identity::trial_id;
use crate::proxy::Proxy;
use crate::store::{PlannedTrial, Store, StoreError, TrialRow};
use crate::trial::{Leftovers, Observer, RunEnv, TrialInput, record, run_prepared_trial};
use crate::verdicts::RunVerdicts;

/// Status of a run stopped by its cost cap (`--max-cost-per-run`) with trials not started.
pub const BUDGET_EXCEEDED: &str = "budget_exceeded";

/// What a run is: stored with it so `resume` can rebuild it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Task folders or suites (absolute).
    pub tasks: Vec<PathBuf>,
    /// Substrings a task id must contain (any of them); empty = all.
    pub filters: Vec<String>,
    /// Task kinds to keep (`prbench`, `scicode`, ...); empty = all.
    pub kinds: Vec<String>,
    /// Canonical agent specs.
    pub agents: Vec<String>,
    pub settings: Settings,
}

/// Why a run could not start (all checked before any container starts) or failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Agent(#[from] AgentSpecError),
    #[error("{0}")]
    Tasks(String),
    #[error("no task of the {total} loaded matches {wanted}{hint}")]
    NoTasks {
        /// `--filter a,b and --kind c` in words.
        wanted: String,
        /// ` (did you mean …?)` or nothing.
        hint: String,
        total: usize,
    },
    #[error("`--kind {kind}` is not a task kind{hint}; the kinds are {known}")]
    UnknownKind {
        kind: String,
        hint: String,
        known: String,
    },
    #[error("no agents given: use --agents oracle,nop (or any agent spec)")]
    NoAgents,
    #[error(
        "the adapter binary {0} does not exist: build it with `cargo build -p white-agent-adapter` or pass --adapter-bin"
    )]
    AdapterMissing(PathBuf),
    #[error(
        "port {port} is already in use (--proxy-port / RB_PROXY_PORT): {source}; pick a free port or 0"
    )]
    PortInUse {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("judge: {0}")]
    Judge(String),
    #[error(
        "cannot stage the agent CLIs from {venv}: {reason} (run scripts/bootstrap-tests to create the venv with the CLI wheels and the agent packages)"
    )]
    Staging { venv: PathBuf, reason: String },
    #[error("cannot start the model proxy: {0}")]
    Proxy(String),
    /// The cause says what failed (and, for an unreachable daemon, what to do); it is not
    /// repeated in this message, which the error chain prints before it.
    #[error("cannot use Docker (is the Docker Engine running, and may this user use it?)")]
    Docker(#[source] sandbox::SandboxError),
    #[error("image `{image}` for task {task}: {reason}")]
    Image {
        image: String,
        task: String,
        reason: String,
    },
    /// A sandbox of a task cannot run on any node of the backend, whatever else runs.
    #[error(
        "task {task}: its {role} sandbox needs {needs}, more than any node of the {backend} backend can hold: {why}; lower the task's environment.cpus / memory_mb (for the agent also --cpus / --memory-mb) or add a larger node"
    )]
    TooLarge {
        task: String,
        role: &'static str,
        needs: String,
        backend: &'static str,
        why: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "run {run}: task {task} changed since the run started (trial {trial} is unfinished and no longer planned); start a new run"
    )]
    TaskChanged {
        run: String,
        task: String,
        trial: String,
    },
    #[error("run {0}: its stored plan is unreadable: {1}")]
    BadPlan(String, String),
    #[error("run {run}: cannot take over what its previous process left: {reason}")]
    Reattach { run: String, reason: String },
    #[error(
        "interrupted by {}: removed {removed} container(s)/network(s); continue with `green-agent resume {run}`",
        signal.name()
    )]
    Interrupted {
        run: String,
        signal: sandbox::Signal,
        removed: usize,
    },
    #[error(
        "canceled: removed {removed} container(s)/network(s); finished trials are kept, continue with `green-agent resume {run}`"
    )]
    Canceled { run: String, removed: usize },
}

/// A validated run, ready to execute.
#[derive(Debug)]
pub struct Prepared {
    pub plan: Plan,
    pub trials: Vec<TrialInput>,
    pub backend: Arc<dyn sandbox::Backend>,
    pub proxy: Option<Proxy>,
    pub adapter_bin: PathBuf,
    /// The judge, given the run's store as its verdict cache when the run executes.
    pub judge: Option<rubrics::Judge>,
    pub staged: BTreeMap<white_agent_adapter::contract::DriverKind, sandbox::ReadOnlyMount>,
    /// A trial pool shared with other runs of this process (the A2A service's limit across
    /// assessments), taken after the run's own `concurrency` slot; `None`: only the latter.
    pub trial_slots: Option<Arc<tokio::sync::Semaphore>>,
    /// What the backend's nodes held at planning (every task's sandboxes fit on some node);
    /// trials are admitted against it, read again as they start ([`crate::admission`]).
    pub capacity: sandbox::Capacity,
    /// The platform images still building (started by [`prepare`]).
    pub image_builds: crate::images::ImageBuilds,
}

/// Default location of the adapter binary: next to this executable, else the workspace's
/// `target/debug/white-agent-adapter`.
pub fn default_adapter_bin() -> PathBuf {
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.parent()
    {
        let p = dir.join("white-agent-adapter");
        if p.is_file() {
            return p;
        }
    }
    PathBuf::from("target/debug/white-agent-adapter")
}

/// Builds the plan's trial list from loaded tasks.
pub fn plan_trials(
    tasks: &[Arc<tasks::Task>],
    agents: &[AgentSpec],
    repeats: u32,
) -> Vec<(PlannedTrial, Arc<tasks::Task>, AgentSpec)> {
    let mut out = Vec::new();
    for task in tasks {
        let hash = task.content_hash();
        for agent in agents {
            let spec = agent.to_string();
            for r in 0..repeats {
                out.push((
                    PlannedTrial {
                        id: trial_id(&hash, &spec, r),
                        task_id: task.id().to_owned(),
                        task_kind: task.kind().as_str().to_owned(),
                        task_hash: hash.clone(),
                        agent: spec.clone(),
                        repeat_index: r,
                    },
                    task.clone(),
                    agent.clone(),
                ));
            }
        }
    }
    out
}

/// Loads and filters the plan's tasks.
pub fn load_tasks(plan: &Plan) -> Result<Vec<Arc<tasks::Task>>, RunError> {
    let all = tasks::load_suite(&plan.tasks).map_err(|e| RunError::Tasks(e.to_string()))?;
    let total = all.len();
    let kinds: Vec<&str> = tasks::TaskKind::ALL.iter().map(|k| k.as_str()).collect();
    if let Some(kind) = plan.kinds.iter().find(|k| !kinds.contains(&k.as_str())) {
        return Err(RunError::UnknownKind {
            kind: kind.clone(),
            hint: crate::suggest::did_you_mean(kind, kinds.iter().copied()),
            known: kinds.join(", "),
        });
    }
    let ids: Vec<String> = all.iter().map(|t| t.id().to_owned()).collect();
    let kept: Vec<Arc<tasks::Task>> = all
        .into_iter()
        .filter(|t| {
            plan.filters.is_empty() || plan.filters.iter().any(|f| t.id().contains(f.as_str()))
        })
        .filter(|t| plan.kinds.is_empty() || plan.kinds.iter().any(|k| k == t.kind().as_str()))
        .map(Arc::new)
        .collect();
    if kept.is_empty() {
        let mut wanted = Vec::new();
        if !plan.filters.is_empty() {
            wanted.push(format!("--filter {}", plan.filters.join(",")));
        }
        if !plan.kinds.is_empty() {
            wanted.push(format!("--kind {}", plan.kinds.join(",")));
        }
        // A mistyped filter is closest to a run of words of an id (`csv-stats` of
        // `generic-csv-stats`).
        let words: Vec<String> = ids.iter().flat_map(|id| word_runs(id)).collect();
        let hint = plan
            .filters
            .iter()
            .filter(|f| !ids.iter().any(|id| id.contains(f.as_str())))
            .find_map(|f| crate::suggest::closest(f, words.iter().map(String::as_str)))
            .map(|w| format!(" (did you mean --filter {w}?)"))
            .unwrap_or_default();
        return Err(RunError::NoTasks {
            wanted: wanted.join(" and "),
            hint,
            total,
        });
    }
    Ok(kept)
}

/// Every run of consecutive `-`-separated words of a task id, the id included.
fn word_runs(id: &str) -> Vec<String> {
    let words: Vec<&str> = id.split('-').collect();
    let mut out = Vec::new();
    for start in 0..words.len() {
        for end in start + 1..=words.len() {
            out.push(words[start..end].join("-"));
        }
    }
    out
}

/// Every check that needs no container: agents, keys, tasks, adapter, port. Then Docker, the
/// images and the model proxy.
pub async fn prepare(plan: Plan, env: &BTreeMap<String, String>) -> Result<Prepared, RunError> {
    if plan.agents.is_empty() {
        return Err(RunError::NoAgents);
    }
    let agents: Vec<AgentSpec> = plan
        .agents
        .iter()
        .map(|a| AgentSpec::parse(a))
        .collect::<Result<_, _>>()?;
    for a in &agents {
        a.check_keys(env)?;
    }
    let loaded = load_tasks(&plan)?;
    let adapter_bin = plan
        .settings
        .adapter_bin
        .clone()
        .unwrap_or_else(default_adapter_bin);
    if agents.iter().any(AgentSpec::is_hosted) && !adapter_bin.is_file() {
        return Err(RunError::AdapterMissing(adapter_bin));
    }
    let adapter_bin = std::fs::canonicalize(&adapter_bin).unwrap_or(adapter_bin);
    let judge_configs = plan.settings.judge_configs();
    for cfg in &judge_configs {
        if let Some(var) = &cfg.api_key_env
            && env.get(var).is_none_or(|v| v.is_empty())
        {
            return Err(RunError::Judge(format!(
                "the judge model {} needs its API key in the environment variable {var} \
                 (set judge_api_key_env to \"\" for a server without keys)",
                cfg.model
            )));
        }
    }
    let judge = if judge_configs.is_empty() {
        None
    } else {
        Some(rubrics::Judge::panel(judge_configs).map_err(|e| RunError::Judge(e.to_string()))?)
    };
    let staged = crate::launch::stage_agents(
        &agents,
        white_agent_adapter::staging::Sources {
            venv: &plan.settings.venv,
            agent_packages: &plan.settings.agent_packages,
        },
        &staging_cache(&plan.settings.results_dir),
    )
    .map_err(|reason| RunError::Staging {
        venv: plan.settings.venv.clone(),
        reason,
    })?;
    let port = plan.settings.proxy_port;
    if port != 0 {
        // probe, then release: the proxy binds it below
        std::net::TcpListener::bind(("0.0.0.0", port))
            .map_err(|source| RunError::PortInUse { port, source })?;
    }
    let docker = sandbox::docker::DockerBackend::connect()
        .await
        .map_err(RunError::Docker)?;
    // Missing platform images build in the background from here on, all at once; a trial
    // waits for its own image only (see `execute_until`).
    let names: Vec<String> = loaded
        .iter()
        .map(|t| t.environment().image.clone())
        .collect();
    let (platform, image_builds) = crate::images::start_for_run(&docker, &names)
        .await
        .map_err(|(image, reason)| RunError::Image {
            task: loaded
                .iter()
                .find(|t| t.environment().image == image)
                .map(|t| t.id().to_owned())
                .unwrap_or_default(),
            image,
            reason,
        })?;
    // The per-task images of tasks with `pip_install` are built before any trial, on their
    // platform image (built once per recipe, reused by every trial and later run).
    let mut images: BTreeMap<ImageKey, String> = platform
        .iter()
        .map(|(name, reference)| ((name.clone(), Vec::new()), reference.clone()))
        .collect();
    for t in &loaded {
        let key = image_key(t);
        if images.contains_key(&key) {
            continue;
        }
        let image_err = |reason| RunError::Image {
            image: key.0.clone(),
            task: t.id().to_owned(),
            reason,
        };
        let base = images
            .get(&(key.0.clone(), Vec::new()))
            .cloned()
            .unwrap_or_default();
        image_builds.ready(&base).await.map_err(image_err)?;
        let derived = crate::images::derive_for_run(&docker, &base, &key.1)
            .await
            .map_err(image_err)?;
        images.insert(key, derived);
    }
    let backend = create_backend(&plan.settings, docker).await?;
    let capacity = backend.capacity().await.map_err(RunError::Docker)?;
    check_capacity(
        &capacity,
        backend.name(),
        &plan.settings,
        &loaded,
        agents.iter().any(AgentSpec::is_hosted),
    )?;
    let proxy = if agents.iter().any(AgentSpec::uses_model) {
        Some(
            Proxy::start(
                port,
                plan.settings.proxy_config.as_deref(),
                plan.settings.max_cost_per_run,
            )
            .await
            .map_err(RunError::Proxy)?,
        )
    } else {
        None
    };
    let trials = plan_trials(&loaded, &agents, plan.settings.repeats)
        .into_iter()
        .map(|(planned, task, agent)| {
            let image = images.get(&image_key(&task)).cloned().unwrap_or_default();
            TrialInput {
                planned,
                task,
                agent,
                image,
            }
        })
        .collect();
    Ok(Prepared {
        plan,
        trials,
        backend,
        proxy,
        adapter_bin,
        judge,
        staged,
        trial_slots: None,
        capacity,
        image_builds,
    })
}

/// A task's image as a run resolves it: the image name and its `pip_install` packages
/// (sorted; none: the image itself).
type ImageKey = (String, Vec<String>);

fn image_key(task: &tasks::Task) -> ImageKey {
    let env = task.environment();
    (
        env.image.clone(),
        sandbox::images::derived::canonical_packages(&env.pip_install),
    )
}

/// Fails when a sandbox of some task can never run on any node of the backend (its memory
/// reserved over every usable node's, its CPU limit over every node's CPUs): better now than
/// a trial waiting `pending` until its schedule timeout, for every trial of the task.
fn check_capacity(
    capacity: &sandbox::Capacity,
    backend: &'static str,
    settings: &Settings,
    tasks: &[Arc<tasks::Task>],
    hosted: bool,
) -> Result<(), RunError> {
    for task in tasks {
        let mut sandboxes = vec![("grading", crate::trial::grader_limits(task))];
        if hosted {
            sandboxes.insert(0, ("agent", crate::trial::agent_limits(settings, task)));
        }
        for (role, limits) in sandboxes {
            let needs = sandbox::Needs::from(&limits);
            capacity
                .check_fits(&needs)
                .map_err(|why| RunError::TooLarge {
                    task: task.id().to_owned(),
                    role,
                    needs: needs.to_string(),
                    backend,
                    why: why.to_string(),
                })?;
        }
    }
    Ok(())
}

/// The sandboxes a trial holds at once: its agent's (a hosted agent) and its grader's
/// (created while the agent runs).
fn trial_needs(settings: &Settings, input: &TrialInput) -> Vec<sandbox::Needs> {
    let mut needs = Vec::new();
    if input.agent.is_hosted() {
        needs.push(sandbox::Needs::from(&crate::trial::agent_limits(
            settings,
            &input.task,
        )));
    }
    needs.push(sandbox::Needs::from(&crate::trial::grader_limits(
        &input.task,
    )));
    needs
}

/// The run's sandbox backend (`--backend`): the docker backend, or the swarm backend over the
/// same engine (its relays use the `python` platform image).
async fn create_backend(
    settings: &crate::config::Settings,
    docker: sandbox::docker::DockerBackend,
) -> Result<Arc<dyn sandbox::Backend>, RunError> {
    let mut config = settings.backend_config().map_err(RunError::Docker)?;
    if let sandbox::BackendConfig::Swarm(swarm) = &mut config {
        // the relays' image, built here when the engine lacks it
        swarm.relay_image = crate::images::resolve_for_run(&docker, "python")
            .await
            .map_err(|reason| RunError::Image {
                image: "python".into(),
                task: "(the swarm backend's relays)".into(),
                reason,
            })?;
    }
    config.connect(docker).await.map_err(RunError::Docker)
}

/// Where staged agent CLIs are cached (content-addressed, shared by runs):
/// `$XDG_CACHE_HOME/research-bench/agents`, else `~/.cache/...`, else beside the results.
fn staging_cache(results_dir: &Path) -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map_or_else(
            || results_dir.join(".staged-agents"),
            |c| c.join("research-bench").join("agents"),
        )
}

/// A fresh run id: UTC time plus a random suffix.
pub fn new_run_id() -> String {
    let now = chrono::Utc::now().format("%Y%m%d-%H%M%S");
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{now}-{}", &suffix[..6])
}

/// The directory of a run.
pub fn run_dir(results_dir: &Path, run_id: &str) -> PathBuf {
    results_dir.join(run_id)
}

/// Executes every unfinished trial of the run (new or resumed) and returns all trials.
pub async fn execute(
    prepared: Prepared,
    run_id: &str,
    store: &Store,
    observer: Arc<dyn Observer>,
    resume: bool,
) -> Result<Vec<TrialRow>, RunError> {
    execute_until(
        prepared,
        run_id,
        store,
        observer,
        resume,
        std::future::pending(),
    )
    .await
}

/// [`execute`], stopped early when `stop` resolves (a cancel from outside, e.g. the A2A
/// service): the running trials are stopped, the run's containers and networks removed, the
/// run recorded `canceled` and [`RunError::Canceled`] returned; finished trials are kept and
/// the unfinished ones stay resumable.
pub async fn execute_until(
    prepared: Prepared,
    run_id: &str,
    store: &Store,
    observer: Arc<dyn Observer>,
    resume: bool,
    stop: impl std::future::Future<Output = ()> + Send,
) -> Result<Vec<TrialRow>, RunError> {
    let span = info_span!("run", run_id = %run_id);
    async {
        // Orphans of dead runs (owner process gone) are reaped before anything starts.
        let reaped = match prepared.backend.reap(None).await {
            Ok(n) => {
                if n > 0 {
                    info!(removed = n, "reaped leftovers of dead runs");
                }
                n
            }
            Err(e) => {
                warn!(error = %e, "reaping leftovers failed");
                0
            }
        };
        let planned: Vec<PlannedTrial> =
            prepared.trials.iter().map(|t| t.planned.clone()).collect();
        let plan_json = serde_json::to_value(&prepared.plan)
            .map_err(|e| RunError::BadPlan(run_id.into(), e.to_string()))?;
        store.create_run(run_id, &plan_json, &planned).await?;
        store
            .event(
                run_id,
                None,
                "reaped_orphans",
                &serde_json::json!({ "removed": reaped }),
            )
            .await?;
        let mut leftovers = Leftovers::default();
        if resume {
            // Adopt the live agents and collected outputs a dead owner left (the caller holds
            // the run's ownership, so no other reaper takes them meanwhile).
            let (found, gathered) =
                Leftovers::gather(prepared.backend.as_ref(), store, run_id)
                    .await
                    .map_err(|e| RunError::Reattach {
                        run: run_id.into(),
                        reason: e.to_string(),
                    })?;
            leftovers = found;
            store
                .event(run_id, None, "reattach_gathered", &serde_json::json!(gathered))
                .await?;
            let n = store.requeue_interrupted(run_id).await?;
            info!(requeued = n, adopted = gathered.adopted, "resuming");
        }
        let stored = store.trials(run_id).await?;
        let known: BTreeSet<&str> = planned.iter().map(|p| p.id.as_str()).collect();
        if let Some(stale) = stored
            .iter()
            .find(|t| t.state != "done" && !known.contains(t.planned.id.as_str()))
        {
            return Err(RunError::TaskChanged {
                run: run_id.into(),
                task: stale.planned.task_id.clone(),
                trial: stale.planned.id.clone(),
            });
        }
        let done: BTreeSet<String> = stored
            .iter()
            .filter(|t| t.state == "done")
            .map(|t| t.planned.id.clone())
            .collect();
        let mut pending: Vec<TrialInput> = prepared
            .trials
            .into_iter()
            .filter(|t| !done.contains(&t.planned.id))
            .collect();
        // A resumed run takes up what a dead owner left first: its agents may still be running
        // (and calling the model proxy, which knows them only once they are reattached).
        // Then the trials whose image exists, then those of each image still building, in the
        // order the builds should finish.
        let image_builds = Arc::new(prepared.image_builds);
        pending.sort_by_key(|t| (!leftovers.has(&t.planned.id), image_builds.rank(&t.image)));
        info!(
            total = planned.len(),
            done = done.len(),
            pending = pending.len(),
            "run starting"
        );

        let env = RunEnv {
            backend: prepared.backend.clone(),
            store: store.clone(),
            run_id: run_id.to_owned(),
            settings: prepared.plan.settings.clone(),
            adapter_bin: prepared.adapter_bin.clone(),
            proxy: prepared.proxy.clone(),
            // Accepted verdicts live in the run's store: a resume or re-grade never asks again.
            judge: prepared.judge.map(|j| {
                Arc::new(j.with_cache(Arc::new(RunVerdicts::new(store.clone(), run_id))))
            }),
            staged: prepared.staged.clone(),
            observer,
            leftovers: Arc::new(leftovers),
            teardown: Default::default(),
            probes: Default::default(),
        };
        // Installed before any trial starts: a signal stops the trials, then the run's
        // containers and networks are removed and the run is recorded as interrupted.
        let mut reaper = match sandbox::SignalReaper::install(prepared.backend.clone(), run_id) {
            Ok(r) => Some(r),
            Err(e) => {
                warn!(error = %e, "cannot install signal handlers; leftovers are reaped at the next start");
                None
            }
        };
        // Trials run at once: at most `--concurrency`, and (a backend reserving memory) no
        // more than the nodes hold.
        let needs: Vec<Vec<sandbox::Needs>> = pending
            .iter()
            .map(|t| trial_needs(&env.settings, t))
            .collect();
        let observer = env.observer.clone();
        let admission = crate::admission::Admission::new(
            prepared.backend.clone(),
            run_id,
            env.settings.concurrency,
            prepared.capacity.clone(),
            &needs,
            Arc::new(move |line: &str| observer.note(line)),
        );
        let mut set = tokio::task::JoinSet::new();
        // Places ahead and run slots are taken in `pending`'s order: a resume's left trials
        // (their agents may be running already) hold slots before any new trial starts, and
        // count against them. A trial holding a place ahead has its sandboxes prepared (created
        // and started, no attempt recorded: `trial::ahead`) while earlier trials run; its
        // clock starts when it takes its run slot.
        let slots = crate::slots::Slots::new(
            env.settings.concurrency,
            prepared.trial_slots.clone(),
            admission,
        );
        for (n, (input, needs)) in pending.into_iter().zip(needs).enumerate() {
            let env = env.clone();
            let slots = slots.clone();
            let image_builds = image_builds.clone();
            set.spawn(
                async move {
                    let place = slots.ahead(n, needs).await;
                    if let Err(reason) = image_builds.ready(&input.image).await {
                        // the trial stays pending (resume runs it); the run ends in an error
                        return env
                            .store
                            .event(
                                &env.run_id,
                                Some(&input.planned.id),
                                "trial_not_started",
                                &serde_json::json!({ "reason": format!("image {}: {reason}", input.image) }),
                            )
                            .await;
                    }
                    let spent = || env.proxy.as_ref().and_then(|p| p.run_budget_spent());
                    let ahead = match spent() {
                        Some(_) => None,
                        None => crate::trial::ahead::prepare(&env, &input).await,
                    };
                    let _slot = slots.run(n, place).await;
                    if let Some(reason) = spent() {
                        // the run's cost cap is spent: the trial stays pending (resume runs it)
                        if let Some(a) = ahead {
                            a.discard(&env, &input.planned).await;
                        }
                        return env
                            .store
                            .event(
                                &env.run_id,
                                Some(&input.planned.id),
                                "trial_not_started",
                                &serde_json::json!({ "reason": reason }),
                            )
                            .await;
                    }
                    if let Err(e) = env.store.mark_running(&env.run_id, &input.planned.id).await {
                        warn!(error = %e, "could not mark the trial running");
                    }
                    let result = run_prepared_trial(&env, &input, ahead).await;
                    record(&env, &input.planned, &result).await
                }
                .in_current_span(),
            );
        }
        let mut first_error = None;
        let mut stop = std::pin::pin!(stop);
        loop {
            let joined = tokio::select! {
                joined = set.join_next() => joined,
                () = &mut stop => {
                    let removed = stop_and_reap(&mut set, prepared.backend.as_ref(), run_id).await;
                    return Err(canceled(store, run_id, removed).await);
                }
                signal = signalled(reaper.as_mut()) => {
                    let removed = stop_and_reap(&mut set, prepared.backend.as_ref(), run_id).await;
                    return Err(interrupted(store, run_id, signal, removed).await);
                }
            };
            match joined {
                None => break,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => {
                    warn!(error = %e, "could not record a trial");
                    first_error.get_or_insert(RunError::Store(e));
                }
                Some(Err(e)) => warn!(error = %e, "a trial task panicked"),
            }
        }
        if let Some((image, reason)) = image_builds.failed() {
            first_error.get_or_insert(RunError::Image {
                image,
                task: "(every task on it: they stay pending; `resume` runs them)".into(),
                reason,
            });
        }
        // Adopted agents of trials that did not start (a spent cost cap) are not kept.
        env.leftovers.release_rest(env.backend.as_ref()).await;
        // Containers and networks of finished trials are removed in the background: the run
        // ends only once they are gone.
        env.teardown.wait().await;
        // Nothing of the run runs now: whatever still carries its label is garbage. A dead
        // owner's Docker requests still in flight when it was killed can create objects after
        // this resume's adoption scan; they go here.
        match env.backend.reap(Some(run_id)).await {
            Ok(0) => {}
            Ok(n) => warn!(removed = n, "removed objects of the run that no trial held"),
            Err(e) => warn!(error = %e, "removing the run's stray objects failed"),
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        let trials = store.trials(run_id).await?;
        let status = if trials.iter().all(|t| t.state == "done") {
            "finished"
        } else if env.proxy.as_ref().and_then(|p| p.run_budget_spent()).is_some() {
            BUDGET_EXCEEDED
        } else {
            "incomplete"
        };
        store.finish_run(run_id, status).await?;
        Ok(trials)
    }
    .instrument(span)
    .await
}

/// The next SIGINT/SIGTERM (never, without handlers).
async fn signalled(reaper: Option<&mut sandbox::SignalReaper>) -> sandbox::Signal {
    match reaper {
        Some(r) => r.signalled().await,
        None => std::future::pending().await,
    }
}

/// Stops a run's trials (cancel or signal) and removes its objects: every trial future is
/// dropped before reaping, then the run's objects are removed until a pass finds none (at most
/// 5 passes, 1 s apart, each bounded to 30 s): a Docker request sent by a trial just before it
/// was dropped can still create an object after the first pass listed them.
async fn stop_and_reap<T: 'static>(
    set: &mut tokio::task::JoinSet<T>,
    backend: &dyn sandbox::Backend,
    run_id: &str,
) -> usize {
    set.abort_all();
    while set.join_next().await.is_some() {}
    let mut removed = 0;
    for pass in 0..5 {
        if pass > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
        let reap = backend.reap(Some(run_id));
        match tokio::time::timeout(std::time::Duration::from_secs(30), reap).await {
            Ok(Ok(0)) if pass > 0 => break,
            Ok(Ok(n)) => removed += n,
            Ok(Err(e)) => warn!(error = %e, "reaping the stopped run failed"),
            Err(_) => warn!("reaping the stopped run timed out"),
        }
    }
    removed
}

/// Records a canceled run (its trials stopped, its objects removed).
async fn canceled(store: &Store, run_id: &str, removed: usize) -> RunError {
    warn!(removed, "canceled: the run's containers are removed");
    let _ = store
        .event(
            run_id,
            None,
            "run_canceled",
            &serde_json::json!({ "removed": removed }),
        )
        .await;
    let _ = store.finish_run(run_id, "canceled").await;
    RunError::Canceled {
        run: run_id.to_owned(),
        removed,
    }
}

/// Records an interrupted run (its trials stopped, its objects removed).
async fn interrupted(
    store: &Store,
    run_id: &str,
    signal: sandbox::Signal,
    removed: usize,
) -> RunError {
    warn!(
        signal = signal.name(),
        removed, "interrupted: the run's containers are removed"
    );
    let _ = store
        .event(
            run_id,
            None,
            "run_interrupted",
            &serde_json::json!({ "signal": signal.name(), "removed": removed }),
        )
        .await;
    let _ = store.finish_run(run_id, "interrupted").await;
    RunError::Interrupted {
        run: run_id.to_owned(),
        signal,
        removed,
    }
}
