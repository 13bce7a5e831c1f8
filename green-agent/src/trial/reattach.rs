//! Reattach: the variant of launch for a trial that a dead green agent left behind, so a
//! resumed run never starts an agent twice.
//!
//! Every attempt is recorded in the store's `attempts` (where its agent is: container, URL,
//! proxy token and port; the A2A task id as soon as the agent accepted the task; what
//! collection produced, before grading). A resumed run ([`Leftovers::gather`], holding the
//! run's ownership) adopts the run's live agent containers by their labels and reads the open
//! attempts; then each unfinished trial's first attempt ([`reattach`]):
//!
//! | left | does |
//! |---|---|
//! | collected outputs | restage them from the blobs; grade and record (no agent) |
//! | an open `regrade` attempt (`resume --regrade`) | the same, in that attempt |
//! | a live hosted agent | re-register its proxy token (same port), wait for its card, find its task (stored id, else `ListTasks` by the trial's context id), follow it by id ([`Start::task_id`]); no task yet: send it now (it never got it) |
//! | an external agent with a task id | connect, `GetTask` it, follow it |
//! | anything else | [`InfraError::AgentGone`]: the trial starts over, flagged |
//!
//! After that the usual phases run: drive (following, never sending again), collect, grade,
//! record.
//!
//! The same takeover serves a retry in this process ([`Left::after_failure`]): an attempt that
//! failed on an infrastructure error once its agent was started leaves that agent (container
//! kept, attempt open) to the retry, never a second agent while the first can still finish or be
//! collected (one that is gone, e.g. with its node, starts over as after a restart). A trial
//! whose last attempt collected outputs without a recorded result (its process died between the
//! two) is graded from them.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use a2a_protocol::{A2aClient, ClientConfig, GetTaskRequest, ListTasksRequest};
use sandbox::{Backend, NetworkHandle, Sandbox};
use serde::{Deserialize, Serialize};
use tracing::{info, warn};
use white_agent_adapter::contract::DEFAULT_PORT;

use super::collect::Collected;
use super::drive::{AgentRun, Start};
use super::env::{InfraError, RunEnv, TrialInput, io};
use super::launch::{Created, agent_headers, client_config, wait_ready};
use super::phases::PhaseLog;
use super::prepare::{Prepared, prepare};
use super::record::Parts;
use super::resources::Resources;
use super::side::{AgentSide, External, Hosted};
use crate::agents::AgentSpec;
use crate::model::{ArtifactRef, Outcome, Usage};
use crate::store::{AgentPlace, AttemptKind, AttemptRow, Store};

/// What a dead process, or a failed attempt of this one, left of one trial.
#[derive(Debug)]
pub struct Left {
    attempt: AttemptRow,
    /// The adopted (or kept) container of a hosted agent (`None`: gone, or an external agent).
    sandbox: Option<Arc<dyn Sandbox>>,
    network: Option<NetworkHandle>,
    /// Why this process's own attempt failed (`None`: its process died).
    failure: Option<String>,
}

impl Left {
    /// Whether this is what `resume --regrade` left: stored outputs to grade again.
    pub(crate) fn is_regrade(&self) -> bool {
        self.attempt.kind == AttemptKind::Regrade.as_str()
    }

    /// The outputs the trial's last attempt collected before it failed, if it got that far
    /// (a retry grades them instead of running the agent again).
    pub(crate) async fn collected_by_last_attempt(
        env: &RunEnv,
        input: &TrialInput,
    ) -> Option<Self> {
        let attempts = env
            .store
            .attempts(&env.run_id, &input.planned.id)
            .await
            .ok()?;
        let last = attempts.into_iter().last()?;
        last.collected.is_some().then_some(Left {
            attempt: last,
            sandbox: None,
            network: None,
            failure: None,
        })
    }

    /// What attempt `number` of this process, failed on an infrastructure error, leaves to the
    /// retry: once its agent was started (an attempt is recorded only then), the retry takes
    /// that agent over as a resumed run would (its task followed by id, found by `ListTasks`,
    /// or sent if it never arrived; its outputs collected from it), so an agent never runs
    /// twice for one trial; outputs already collected are graded again. The agent's sandbox
    /// and network are taken out of `res` (not removed). `None`: nothing was started.
    pub(crate) async fn after_failure(
        env: &RunEnv,
        input: &TrialInput,
        number: Option<u32>,
        res: &mut Resources,
        failure: &InfraError,
    ) -> Option<Self> {
        let number = number?;
        let row = match env.store.attempts(&env.run_id, &input.planned.id).await {
            Ok(rows) => rows.into_iter().find(|a| a.attempt == number)?,
            Err(e) => {
                warn!(error = %e, "cannot read the failed attempt back; its agent is not taken over");
                return None;
            }
        };
        let (sandbox, network) = if row.collected.is_some() {
            (None, None)
        } else {
            res.take_agent()
                .map_or((None, None), |(sb, net)| (Some(sb), net))
        };
        Some(Left {
            attempt: row,
            sandbox,
            network,
            failure: Some(failure.to_string()),
        })
    }

    /// Whether a retry must keep the attempt open (its agent taken over: a crash meanwhile
    /// leaves it for a resumed run to adopt).
    pub(crate) fn keeps_attempt_open(&self) -> bool {
        self.failure.is_some() && self.attempt.collected.is_none()
    }

    /// Removes the kept agent and closes its attempt (no retry is left to take it over).
    pub(crate) async fn discard(self, env: &RunEnv, why: &str) {
        if let Some(sb) = &self.sandbox {
            remove(env.backend.as_ref(), sb.as_ref(), self.network.as_ref()).await;
        }
        if let Err(e) = env
            .store
            .end_attempt(
                &env.run_id,
                &self.attempt.trial_id,
                self.attempt.attempt,
                "infra_error",
                Some(why),
            )
            .await
        {
            warn!(error = %e, "could not close the attempt in the store");
        }
    }
}

/// The leftovers of a resumed run; each unfinished trial's first attempt takes its own.
#[derive(Debug, Default)]
pub struct Leftovers {
    by_trial: Mutex<HashMap<String, Left>>,
}

/// What [`Leftovers::gather`] found, for the run's event log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Gathered {
    /// Open attempts of unfinished trials.
    pub open_attempts: usize,
    /// Live agent containers adopted.
    pub adopted: usize,
    /// Objects of the run removed (graders, stopped agents, containers of no open attempt).
    pub removed: usize,
}

impl Leftovers {
    /// Adopts the run's live agent containers and pairs them with the open attempts of its
    /// unfinished trials; every other object of the run is removed. Call it holding the
    /// run's ownership (so no other reaper takes the containers meanwhile).
    pub async fn gather(
        backend: &dyn Backend,
        store: &Store,
        run_id: &str,
    ) -> Result<(Self, Gathered), InfraError> {
        let adoption = backend.adopt(run_id).await?;
        let mut latest: BTreeMap<String, AttemptRow> = BTreeMap::new();
        for row in store.open_attempts(run_id).await? {
            if let Some(older) = latest.insert(row.trial_id.clone(), row) {
                store
                    .end_attempt(
                        run_id,
                        &older.trial_id,
                        older.attempt,
                        "abandoned",
                        Some("a later attempt started"),
                    )
                    .await?;
            }
        }
        let mut found = Gathered {
            open_attempts: latest.len(),
            removed: adoption.removed,
            ..Gathered::default()
        };
        let mut agents: HashMap<String, sandbox::Adopted> = HashMap::new();
        for a in adoption.agents {
            let wanted = latest.get(&a.trial_id).is_some_and(|row| {
                row.collected.is_none() && row.place.container.as_deref() == Some(a.sandbox.id())
            });
            if wanted {
                agents.insert(a.trial_id.clone(), a);
                continue;
            }
            remove(backend, a.sandbox.as_ref(), a.network.as_ref()).await;
            found.removed += 1;
        }
        found.adopted = agents.len();
        let by_trial = latest
            .into_iter()
            .map(|(trial, attempt)| {
                let adopted = agents.remove(&trial);
                let left = Left {
                    attempt,
                    network: adopted.as_ref().and_then(|a| a.network.clone()),
                    sandbox: adopted.map(|a| Arc::from(a.sandbox)),
                    failure: None,
                };
                (trial, left)
            })
            .collect();
        Ok((
            Self {
                by_trial: Mutex::new(by_trial),
            },
            found,
        ))
    }

    /// What the open attempts' agents were told of the model proxy: its port (one port; `None`
    /// when none or several), for a resumed run to listen on again, and their tokens (those
    /// agents may still be calling).
    pub async fn proxy_of_open_attempts(
        store: &Store,
        run_id: &str,
    ) -> Result<(Option<u16>, Vec<String>), crate::store::StoreError> {
        let open = store.open_attempts(run_id).await?;
        let ports: std::collections::BTreeSet<u16> =
            open.iter().filter_map(|a| a.place.proxy_port).collect();
        let port = (ports.len() == 1)
            .then(|| ports.into_iter().next())
            .flatten();
        let tokens = open
            .into_iter()
            .filter_map(|a| a.place.proxy_token)
            .collect();
        Ok((port, tokens))
    }

    /// Whether a dead owner left something of `trial_id` (an open attempt).
    pub(crate) fn has(&self, trial_id: &str) -> bool {
        self.by_trial
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains_key(trial_id)
    }

    /// The leftovers of one trial (once).
    pub(crate) fn take(&self, trial_id: &str) -> Option<Left> {
        self.by_trial
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(trial_id)
    }

    /// Removes the adopted containers no trial took (trials that did not start).
    pub async fn release_rest(&self, backend: &dyn Backend) {
        let rest: Vec<Left> = self
            .by_trial
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain()
            .map(|(_, l)| l)
            .collect();
        for l in rest {
            if let Some(sb) = &l.sandbox {
                remove(backend, sb.as_ref(), l.network.as_ref()).await;
            }
        }
    }
}

async fn remove(backend: &dyn Backend, sb: &dyn Sandbox, network: Option<&NetworkHandle>) {
    if let Err(e) = sb.remove().await {
        warn!(error = %e, sandbox = sb.id(), "could not remove a left container (the reaper will)");
    }
    if let Some(n) = network
        && let Err(e) = backend.remove_network(n).await
    {
        warn!(error = %e, network = %n.name, "could not remove a left network (the reaper will)");
    }
}

/// How a trial goes on from what was left.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one short-lived value per reattachment
pub(crate) enum Resumed {
    /// Its agent is back under our control: drive from `start` (following its task).
    Agent {
        prep: Prepared,
        side: AgentSide,
        start: Start,
        /// For the trial's flags.
        note: String,
    },
    /// Its agent ended before the restart: collect (from `side`) what `run` says, then grade.
    Driven {
        prep: Prepared,
        side: AgentSide,
        run: AgentRun,
        note: String,
    },
    /// Its outputs were collected before the restart: grade them.
    Collected {
        prep: Prepared,
        parts: Box<Parts>,
        note: String,
    },
}

/// Takes over what the dead process left of this trial (see the module docs). An agent that
/// cannot be taken over is [`InfraError::AgentGone`] (the left attempt is closed as
/// `agent_gone`); `attempt` receives the number of the new attempt once it is recorded.
pub(crate) async fn reattach(
    env: &RunEnv,
    input: &TrialInput,
    left: Left,
    res: &mut Resources,
    log: &mut PhaseLog<'_>,
    attempt: &mut Option<u32>,
) -> Result<Resumed, InfraError> {
    let before = left.attempt.clone();
    let failure = left.failure.clone();
    let out = log
        .run("reattach", take_over(env, input, left, res, attempt))
        .await;
    match &out {
        Err(InfraError::AgentGone(why)) => {
            warn!(why, "cannot reattach; the trial starts over");
            // This process's own failed attempt stays an infrastructure failure (its cause
            // first); one a dead process left is `agent_gone`.
            let (ended, detail) = match &failure {
                Some(cause) => (
                    "infra_error",
                    format!("{cause}; its agent could not be taken over ({why})"),
                ),
                None => ("agent_gone", why.clone()),
            };
            env.store
                .end_attempt(
                    &env.run_id,
                    &input.planned.id,
                    before.attempt,
                    ended,
                    Some(&detail),
                )
                .await?;
        }
        // a regrade's own attempt grades: it stays open until it ends
        _ if *attempt == Some(before.attempt) => {}
        _ => {
            let taker = attempt.unwrap_or(0);
            let (ended, detail) = match &failure {
                Some(why) => (
                    "infra_error",
                    format!("{why}; taken over by attempt {taker}"),
                ),
                None => (
                    "abandoned",
                    format!("its process died; taken over by attempt {taker}"),
                ),
            };
            env.store
                .end_attempt(
                    &env.run_id,
                    &input.planned.id,
                    before.attempt,
                    ended,
                    Some(&detail),
                )
                .await?;
        }
    }
    out
}

async fn take_over(
    env: &RunEnv,
    input: &TrialInput,
    left: Left,
    res: &mut Resources,
    attempt: &mut Option<u32>,
) -> Result<Resumed, InfraError> {
    let Left {
        attempt: row,
        sandbox,
        network,
        failure,
    } = left;
    // Whatever path the trial takes from here, the adopted container and its network are this
    // attempt's to remove (a trial graded from collected outputs never uses them again).
    let sandbox = sandbox.map(|sb| res.keep_agent(sb));
    if let Some(n) = network {
        res.keep_network(n);
    }
    if let Some(value) = &row.collected {
        let checkpoint: Checkpoint = serde_json::from_value(value.clone()).map_err(|e| {
            InfraError::AgentGone(format!("its collected outputs are unreadable: {e}"))
        })?;
        let prep = prepare(env, input, None)?;
        restage(env, &checkpoint, &prep.outputs_dir)?;
        let regrade = row.kind == AttemptKind::Regrade.as_str();
        let n = if regrade && row.ended.is_none() {
            // `resume --regrade` recorded this attempt with the outputs: it grades them.
            row.attempt
        } else {
            let kind = if regrade {
                AttemptKind::Regrade
            } else {
                AttemptKind::Reattached
            };
            let n = begin(env, input, kind, &row.place).await?;
            env.store
                .attempt_collected(&env.run_id, &input.planned.id, n, value)
                .await?;
            n
        };
        *attempt = Some(n);
        let note = if regrade {
            "graded again by `resume --regrade` from the outputs collected before (the agent was not run again)".to_owned()
        } else {
            format!(
                "graded from the outputs attempt {} collected (the agent was not run again)",
                row.attempt
            )
        };
        return Ok(Resumed::Collected {
            prep,
            parts: Box::new(checkpoint.into_parts()),
            note,
        });
    }
    let used = used_so_far(&env.store, &env.run_id, &row).await?;
    let left_by = LeftBy {
        env,
        input,
        row: &row,
        failure: failure.as_deref(),
    };
    let driven: Option<AgentRun> =
        match &row.driven {
            Some(v) => Some(serde_json::from_value(v.clone()).map_err(|e| {
                InfraError::AgentGone(format!("its recorded end is unreadable: {e}"))
            })?),
            None => None,
        };
    let (prep, side, task_id) = match &input.agent {
        AgentSpec::External { url } => {
            let task_id = row.a2a_task_id.clone();
            let prep = prepare(env, input, None)?;
            let config = ClientConfig {
                headers: agent_headers(env.settings.agent_header.as_deref())?,
                card_hosts: super::launch::card_hosts(env.settings.allow_card_host.as_deref()),
                ..client_config()
            };
            let client = A2aClient::connect(url, config)
                .await
                .map_err(|e| InfraError::AgentGone(format!("cannot reach {url} again: {e}")))?;
            if let Some(run) = driven {
                let side = AgentSide::External(External {
                    url: url.clone(),
                    client,
                    file_server: None,
                });
                return collect_only(&left_by, prep, side, run, attempt).await;
            }
            let task_id = match task_id {
                Some(id) => id,
                None => find_task(&client, &input.planned.id)
                    .await?
                    .ok_or_else(|| {
                        InfraError::AgentGone(
                            "the agent holds no task of this trial (it never received it)".into(),
                        )
                    })?,
            };
            let side = AgentSide::External(External {
                url: url.clone(),
                client,
                file_server: None,
            });
            (prep, side, Some(task_id))
        }
        _ => {
            let Some(sb) = sandbox else {
                return Err(InfraError::AgentGone(format!(
                    "its container ({}) no longer runs",
                    row.place.container.as_deref().unwrap_or("never recorded")
                )));
            };
            let token = row.place.proxy_token.as_deref();
            if let Some(run) = driven {
                // The agent ended before the restart: collect from its container (running
                // or stopped). Collection never calls the adapter: the client is a stand-in.
                let prep = prepare(env, input, token)?;
                let client =
                    A2aClient::new("http://agent-already-ended.invalid/", client_config())?;
                let side = AgentSide::Hosted(Hosted {
                    sandbox: sb,
                    client,
                });
                return collect_only(&left_by, prep, side, run, attempt).await;
            }
            if !matches!(sb.main_exit().await, Ok(None)) {
                return Err(InfraError::AgentGone(
                    "its container stopped before the agent's end was recorded".into(),
                ));
            }
            if let (Some(proxy), Some(_)) = (&env.proxy, token)
                && row.place.proxy_port != Some(proxy.port())
            {
                return Err(InfraError::AgentGone(format!(
                    "the model proxy now listens on port {} and the agent calls port {} (pass --proxy-port {} to resume)",
                    proxy.port(),
                    row.place
                        .proxy_port
                        .map_or_else(|| "?".into(), |p| p.to_string()),
                    row.place
                        .proxy_port
                        .map_or_else(|| "?".into(), |p| p.to_string()),
                )));
            }
            let prep = prepare(env, input, token)?;
            // Where it is reached now: its address on its network, or a new forwarder into its
            // namespace (the dead process's forwarder died with it).
            let base = format!("http://{}", sb.host_endpoint(DEFAULT_PORT).await?);
            let client = wait_ready(env, sb.as_ref(), &base)
                .await
                .map_err(|e| InfraError::AgentGone(format!("its adapter does not answer: {e}")))?;
            let task_id = match row.a2a_task_id.clone() {
                Some(id) => Some(id),
                // Accepted but not recorded yet when the process died, or never received.
                None => find_task(&client, &input.planned.id).await?,
            };
            (
                prep,
                AgentSide::Hosted(Hosted {
                    sandbox: sb,
                    client,
                }),
                task_id,
            )
        }
    };
    if let Some(id) = &task_id {
        side.client()
            .get_task(&GetTaskRequest {
                history_length: Some(0),
                ..GetTaskRequest::new(id.clone())
            })
            .await
            .map_err(|e| {
                InfraError::AgentGone(format!("the agent no longer knows task {id}: {e}"))
            })?;
    }
    let n = begin(env, input, AttemptKind::Reattached, &row.place).await?;
    *attempt = Some(n);
    let after = match &failure {
        Some(why) => format!("taken over after an infrastructure failure ({why})"),
        None => "reattached after a restart of the green agent".to_owned(),
    };
    let note = match &task_id {
        Some(id) => format!(
            "{after}: attempt {n} followed task {id} of attempt {} (the agent was not run again)",
            row.attempt
        ),
        None => format!(
            "{after}: the agent of attempt {} had not received the task; sent once by attempt {n}",
            row.attempt
        ),
    };
    info!(%note, "reattached");
    let note = if prep.proxy_token.is_some() && failure.is_none() {
        format!(
            "{note}; model usage before the restart is not counted (the proxy's meter died with the green agent), and the model proxy was down from that death until this restart: model calls the agent made meanwhile were refused (agents that retry refused connections, as the Claude Code and Codex CLIs do, carry on)"
        )
    } else {
        note
    };
    Ok(Resumed::Agent {
        prep,
        side,
        start: Start {
            task_id,
            attempt: Some(n),
            used,
        },
        note,
    })
}

/// The attempt a takeover starts from, and why it was left.
#[derive(Clone, Copy)]
struct LeftBy<'a> {
    env: &'a RunEnv,
    input: &'a TrialInput,
    row: &'a AttemptRow,
    /// This process's failure (`None`: a dead process).
    failure: Option<&'a str>,
}

/// A trial whose agent ended before the restart (or this process's failure): collected
/// without driving it again, in a new attempt (numbered in
/// `attempt`) that carries the agent's task id and end: a crash before its outputs are stored
/// leaves them for the next resume as `row` left them.
async fn collect_only(
    left_by: &LeftBy<'_>,
    prep: Prepared,
    side: AgentSide,
    run: AgentRun,
    attempt: &mut Option<u32>,
) -> Result<Resumed, InfraError> {
    let LeftBy {
        env,
        input,
        row,
        failure,
    } = *left_by;
    let n = begin(env, input, AttemptKind::Reattached, &row.place).await?;
    *attempt = Some(n);
    if let Some(id) = &row.a2a_task_id {
        env.store
            .attempt_task(&env.run_id, &input.planned.id, n, id)
            .await?;
    }
    if let Some(value) = &row.driven {
        env.store
            .attempt_driven(&env.run_id, &input.planned.id, n, value)
            .await?;
    }
    let after = match failure {
        Some(why) => format!("collected after an infrastructure failure ({why})"),
        None => "collected after a restart of the green agent".to_owned(),
    };
    let mut note = format!(
        "{after}: the agent of attempt {} had ended (it was not run again)",
        row.attempt
    );
    if prep.proxy_token.is_some() {
        note.push_str(if failure.is_some() {
            "; its model usage is not counted (its meter ended with the failed attempt)"
        } else {
            "; its model usage is not counted (the proxy's meter died with the green agent)"
        });
    }
    Ok(Resumed::Driven {
        prep,
        side,
        run,
        note,
    })
}

/// Stores how the attempt's agent ended (before collection), so a resumed run collects from
/// its container without driving it again. Best effort.
pub(crate) async fn driven(env: &RunEnv, input: &TrialInput, attempt: Option<u32>, run: &AgentRun) {
    let Some(attempt) = attempt else { return };
    let saved = match serde_json::to_value(run) {
        Ok(v) => env
            .store
            .attempt_driven(&env.run_id, &input.planned.id, attempt, &v)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = saved {
        warn!(error = %e, "could not store how the agent ended (a resume would have to start it over)");
    }
}

/// The task of this trial the agent holds (its context id is the trial id), by `ListTasks`.
async fn find_task(client: &A2aClient, trial_id: &str) -> Result<Option<String>, InfraError> {
    let listed = client
        .list_tasks(&ListTasksRequest {
            context_id: Some(trial_id.to_owned()),
            page_size: Some(10),
            history_length: Some(0),
            ..ListTasksRequest::default()
        })
        .await
        .map_err(|e| {
            InfraError::AgentGone(format!(
                "no task id was recorded and the agent cannot list its tasks: {e}"
            ))
        })?;
    Ok(listed
        .tasks
        .into_iter()
        .find(|t| t.context_id == trial_id)
        .map(|t| t.id))
}

/// Wall-clock time the trial's agent has had: since its last fresh start.
async fn used_so_far(
    store: &Store,
    run_id: &str,
    row: &AttemptRow,
) -> Result<Duration, InfraError> {
    let history = store.attempts(run_id, &row.trial_id).await?;
    let first = history
        .iter()
        .rev()
        .filter(|a| a.attempt <= row.attempt)
        .find(|a| a.kind == AttemptKind::Fresh.as_str())
        .unwrap_or(row);
    let started = chrono::DateTime::parse_from_rfc3339(&first.started_at)
        .map(|t| t.with_timezone(&chrono::Utc))
        .unwrap_or_else(|_| chrono::Utc::now());
    Ok((chrono::Utc::now() - started).to_std().unwrap_or_default())
}

/// Records a new attempt and returns its number.
pub(crate) async fn begin(
    env: &RunEnv,
    input: &TrialInput,
    kind: AttemptKind,
    place: &AgentPlace,
) -> Result<u32, InfraError> {
    Ok(env
        .store
        .begin_attempt(&env.run_id, &input.planned.id, kind, place)
        .await?)
}

/// Where a freshly created agent is, as a resumed run needs it.
pub(crate) fn place_of(env: &RunEnv, prep: &Prepared, created: &Created) -> AgentPlace {
    AgentPlace {
        container: created.container().map(str::to_owned),
        agent_url: created.url().map(str::to_owned),
        proxy_token: prep.proxy_token.clone(),
        proxy_port: prep
            .proxy_token
            .as_ref()
            .and(env.proxy.as_ref())
            .map(crate::proxy::Proxy::port),
    }
}

/// What collection produced, stored before grading so a resumed run grades it without the
/// agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    outcome: Option<Outcome>,
    exit_code: Option<i64>,
    run_flags: Vec<String>,
    error: Option<String>,
    collected_flags: Vec<String>,
    artifacts: Vec<ArtifactRef>,
    usage: Usage,
    self_reported_usage: bool,
    isolated: bool,
    phases: BTreeMap<String, u64>,
    /// The files staged for grading: relative path → blob digest.
    staged: BTreeMap<String, String>,
    /// Why collection was abandoned over its budget (then nothing is staged; a resumed run
    /// scores the trial 0 again, without the agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    collection_timeout: Option<String>,
}

impl Checkpoint {
    fn into_parts(self) -> Parts {
        Parts {
            run: AgentRun {
                outcome: self.outcome,
                exit_code: self.exit_code,
                flags: self.run_flags,
                final_task: None,
                error: self.error,
                // The turns' copies are among the staged files already.
                turns: Vec::new(),
            },
            collected: Collected {
                artifacts: self.artifacts,
                usage: Default::default(),
                flags: self.collected_flags,
                timed_out: self.collection_timeout,
            },
            usage: self.usage,
            self_reported_usage: self.self_reported_usage,
            isolated: self.isolated,
            phases: self.phases,
        }
    }
}

/// Stores what collection produced (the staged files as blobs) in the attempt, before
/// grading. Best effort: without it a resumed run restarts the trial.
pub(crate) async fn checkpoint(
    env: &RunEnv,
    input: &TrialInput,
    attempt: Option<u32>,
    parts: &Parts,
    outputs_dir: &Path,
) {
    let Some(attempt) = attempt else { return };
    let saved = async {
        let mut staged = BTreeMap::new();
        // Outputs abandoned over the collection budget are not kept (nothing is staged).
        let kept = parts.collected.timed_out.is_none().then_some(outputs_dir);
        for entry in kept
            .into_iter()
            .flat_map(|d| walkdir::WalkDir::new(d).sort_by_file_name())
        {
            let entry = entry.map_err(|e| InfraError::Io {
                what: "walking the staged outputs".into(),
                source: e.into(),
            })?;
            if !entry.file_type().is_file() {
                continue;
            }
            let rel = entry
                .path()
                .strip_prefix(outputs_dir)
                .unwrap_or(entry.path());
            let bytes = std::fs::read(entry.path())
                .map_err(io(format!("reading {}", entry.path().display())))?;
            staged.insert(
                rel.to_string_lossy().replace('\\', "/"),
                env.store.put_blob(&bytes)?,
            );
        }
        let c = Checkpoint {
            outcome: parts.run.outcome,
            exit_code: parts.run.exit_code,
            run_flags: parts.run.flags.clone(),
            error: parts.run.error.clone(),
            collected_flags: parts.collected.flags.clone(),
            artifacts: parts.collected.artifacts.clone(),
            usage: parts.usage.clone(),
            self_reported_usage: parts.self_reported_usage,
            isolated: parts.isolated,
            phases: parts.phases.clone(),
            staged,
            collection_timeout: parts.collected.timed_out.clone(),
        };
        let value = serde_json::to_value(&c).map_err(|e| InfraError::Io {
            what: "encoding the collected outputs".into(),
            source: std::io::Error::other(e),
        })?;
        env.store
            .attempt_collected(&env.run_id, &input.planned.id, attempt, &value)
            .await?;
        Ok::<_, InfraError>(())
    }
    .await;
    if let Err(e) = saved {
        warn!(error = %e, "could not store the collected outputs (a resume would run the agent again)");
    }
}

/// Why the outputs an attempt `collected` (its stored value) cannot be graded again, if they
/// cannot: unreadable, a path outside the workspace, a file missing from the blobs.
pub fn ungradable(store: &Store, collected: &serde_json::Value) -> Option<String> {
    let c: Checkpoint = match serde_json::from_value(collected.clone()) {
        Ok(c) => c,
        Err(e) => return Some(format!("its stored outputs are unreadable: {e}")),
    };
    for (rel, sha) in &c.staged {
        if !safe_relative(Path::new(rel)) {
            return Some(format!(
                "its stored outputs name a path outside the workspace: {rel}"
            ));
        }
        if !store.blob_path(sha).is_file() {
            return Some(format!(
                "the stored output {rel} is missing from the run's blobs ({sha})"
            ));
        }
    }
    None
}

/// A relative path that stays inside the folder it is joined to.
fn safe_relative(p: &Path) -> bool {
    !p.is_absolute()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Writes the checkpoint's staged files back from the blobs (paths checked to stay inside).
fn restage(env: &RunEnv, c: &Checkpoint, outputs_dir: &Path) -> Result<(), InfraError> {
    for (rel, sha) in &c.staged {
        let p = Path::new(rel);
        if !safe_relative(p) {
            return Err(InfraError::AgentGone(format!(
                "its collected outputs name a path outside the workspace: {rel}"
            )));
        }
        let bytes = env.store.get_blob(sha)?;
        let dest = outputs_dir.join(p);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io("restaging outputs"))?;
        }
        std::fs::write(&dest, bytes).map_err(io("restaging outputs"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_round_trips_to_the_same_parts() {
        let c = Checkpoint {
            outcome: Some(Outcome::Timeout),
            exit_code: Some(3),
            run_flags: vec!["timeout after 5s".into()],
            error: Some("e".into()),
            collected_flags: vec!["dropped_special_files".into()],
            artifacts: vec![ArtifactRef {
                name: "file:a.txt".into(),
                sha256: "ab".into(),
                size: 2,
                media_type: None,
            }],
            usage: Usage {
                input_tokens: 4,
                ..Usage::default()
            },
            self_reported_usage: true,
            isolated: true,
            phases: [("agent".to_string(), 10)].into(),
            staged: [("a.txt".to_string(), "ab".to_string())].into(),
            collection_timeout: None,
        };
        let json = serde_json::to_value(&c).expect("json");
        let back: Checkpoint = serde_json::from_value(json).expect("back");
        assert_eq!(back, c);
        let parts = back.into_parts();
        assert_eq!(parts.run.outcome, Some(Outcome::Timeout));
        assert_eq!(parts.collected.artifacts.len(), 1);
        assert_eq!(parts.usage.input_tokens, 4);
        assert_eq!(parts.collected.timed_out, None);
    }

    /// A trial whose collection ran over its budget is checkpointed as such: a resumed run
    /// scores it 0 again without the agent (nothing staged), and checkpoints written before the
    /// field existed still read.
    #[test]
    fn a_collection_timeout_survives_the_checkpoint() {
        let c = Checkpoint {
            outcome: Some(Outcome::Completed),
            exit_code: None,
            run_flags: vec![],
            error: None,
            collected_flags: vec!["collection_timeout: over".into()],
            artifacts: vec![],
            usage: Usage::default(),
            self_reported_usage: false,
            isolated: true,
            phases: BTreeMap::new(),
            staged: BTreeMap::new(),
            collection_timeout: Some("over the budget of 2s".into()),
        };
        let mut json = serde_json::to_value(&c).expect("json");
        let back: Checkpoint = serde_json::from_value(json.clone()).expect("back");
        assert_eq!(
            back.into_parts().collected.timed_out.as_deref(),
            Some("over the budget of 2s")
        );
        json.as_object_mut()
            .expect("an object")
            .remove("collection_timeout");
        let older: Checkpoint = serde_json::from_value(json).expect("an older checkpoint");
        assert_eq!(older.into_parts().collected.timed_out, None);
    }
}
