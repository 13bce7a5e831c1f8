//! One accepted assessment, start to end: wait for a slot (queue), plan → prepare → execute
//! through [`crate::run`] (an ordinary run in the results directory), one status message and one
//! artifact per finished trial, the result artifacts at the end. A cancel stops the run
//! ([`crate::run::execute_until`]); a signal to the service leaves it `WORKING`, and the next
//! start of the service resumes it from the store.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use a2a_protocol::TaskState;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::registry::Registry;
use super::request::{Assessment, Catalog, Policy};
use super::results;
use crate::config::{Settings, Span};
use crate::model::{PlannedTrial, TrialResult};
use crate::report::{ReportData, write_reports};
use crate::run::{Plan, RunError, execute_until, new_run_id, prepare, run_dir};
use crate::store::Store;
use crate::trial::Observer;

/// What every assessment of the service shares.
#[derive(Debug)]
pub struct Service {
    pub registry: Arc<Registry>,
    pub catalog: Catalog,
    pub policy: Policy,
    /// The operator's settings (a request may lower concurrency, set repeats and timeouts).
    pub settings: Settings,
    pub env: BTreeMap<String, String>,
    /// Origin report-file URLs are built on (`--public-url`, else the latest request's Host).
    pub origin: Mutex<String>,
    pub origin_fixed: bool,
    pub inline_report_bytes: u64,
    /// Cancelled when the service stops: queued assessments stay queued for the next start.
    pub shutdown: CancellationToken,
    pub tracker: tokio_util::task::TaskTracker,
    /// Trials running at once across every assessment.
    pub trial_slots: Arc<tokio::sync::Semaphore>,
}

impl Service {
    pub fn results_dir(&self) -> PathBuf {
        self.settings.results_dir.clone()
    }

    /// Starts (or resumes) the assessment `id` in the background.
    pub fn spawn(self: &Arc<Self>, id: String) {
        let svc = Arc::clone(self);
        self.tracker.spawn(async move { drive(&svc, &id).await });
    }
}

/// Forwards finished trials to the assessment's task: an artifact and a status message each.
#[derive(Debug)]
struct Progress {
    registry: Arc<Registry>,
    id: String,
    roles: BTreeMap<String, String>,
    total: usize,
    /// (finished, sum of the participants' scores, participant trials scored)
    counts: Mutex<(usize, f64, usize)>,
}

impl Progress {
    fn message(&self) -> String {
        let (done, sum, scored) = *self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let mean = if scored == 0 {
            "–".to_owned()
        } else {
            format!("{:.2}", sum / scored as f64)
        };
        format!("{done}/{} trials done, mean {mean}", self.total)
    }
}

impl Observer for Progress {
    fn phase(&self, _trial: &PlannedTrial, _phase: &str) {}

    fn finished(&self, trial: &PlannedTrial, result: &TrialResult) {
        {
            let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            c.0 += 1;
            // the mean so far is the participants': calibration agents never count in it
            if let Some(s) = result.score
                && !results::is_calibration(&trial.agent)
            {
                c.1 += s;
                c.2 += 1;
            }
        }
        self.registry.add_artifact(
            &self.id,
            results::trial_artifact(trial, result, &self.roles),
        );
        self.registry
            .set_status(&self.id, TaskState::Working, self.message());
    }
}

/// The run's plan for a validated request, over the operator's settings.
pub fn plan(assessment: &Assessment, settings: &Settings) -> Plan {
    let mut settings = settings.clone();
    settings.repeats = assessment.repeats;
    if let Some(c) = assessment.concurrency {
        settings.concurrency = c.min(settings.concurrency);
    }
    if let Some(secs) = assessment.timeout_secs {
        settings.agent_timeout = Some(Span::secs(secs));
    }
    Plan {
        tasks: assessment.tasks.clone(),
        filters: Vec::new(),
        kinds: Vec::new(),
        agents: assessment.participants.values().cloned().collect(),
        settings,
    }
}

/// How often a run owned by another process is checked for its release.
const OWNER_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Takes the run's ownership, waiting (the assessment's status names the owner) while another
/// live process has it; `None` when the assessment is canceled or the service stops meanwhile,
/// or the lock cannot be taken at all.
async fn own_run(
    svc: &Service,
    id: &str,
    run_id: &str,
    cancel: &CancellationToken,
) -> Option<crate::ownership::RunOwnership> {
    let reg = &svc.registry;
    let dir = run_dir(&svc.results_dir(), run_id);
    let mut told = false;
    loop {
        match crate::ownership::claim(&dir, run_id, "serve") {
            Ok(owner) => return Some(owner),
            Err(crate::ownership::OwnershipError::Held { holder, .. }) => {
                if !told {
                    warn!(assessment = id, run = run_id, %holder, "the run is owned by another process; waiting");
                    reg.set_status(
                        id,
                        TaskState::Working,
                        format!(
                            "run {run_id} is owned by another process ({holder}); this service takes it up when that one ends"
                        ),
                    );
                    told = true;
                }
            }
            Err(e) => {
                reg.set_status(id, TaskState::Failed, format!("cannot own the run: {e}"));
                return None;
            }
        }
        tokio::select! {
            () = tokio::time::sleep(OWNER_POLL) => {}
            () = cancel.cancelled() => {
                reg.set_status(
                    id,
                    TaskState::Canceled,
                    format!("canceled; run {run_id} stays with the process that owns it"),
                );
                return None;
            }
            () = svc.shutdown.cancelled() => return None,
        }
    }
}

async fn drive(svc: &Arc<Service>, id: &str) {
    let reg = &svc.registry;
    let (Some(record), Some(cancel)) = (reg.record(id), reg.cancel_token(id)) else {
        return;
    };
    let Some(assessment) = record.assessment.clone() else {
        return;
    };
    reg.enqueue(id);
    let permit = tokio::select! {
        p = Arc::clone(&reg.slots).acquire_owned() => p,
        () = cancel.cancelled() => {
            reg.dequeue(id);
            reg.set_status(id, TaskState::Canceled, "canceled before it started; nothing ran");
            return;
        }
        () = svc.shutdown.cancelled() => {
            reg.dequeue(id);
            return;
        }
    };
    reg.dequeue(id);
    let Ok(_permit) = permit else {
        return;
    };
    reg.set_status(
        id,
        TaskState::Working,
        format!(
            "preparing {} trial(s): tasks, images, agents",
            assessment.trials()
        ),
    );
    // A run id recorded before a restart: resume that run when its store has it.
    let results_dir = svc.results_dir();
    let run_id = match &record.run_id {
        Some(run_id) => run_id.clone(),
        None => {
            let run_id = new_run_id();
            reg.set_run(id, &run_id);
            run_id
        }
    };
    // One owner per run, as for `run`/`resume`: held until this assessment ends. A run another
    // live process owns (a CLI `resume`) is waited for, never run beside it.
    let Some(_owner) = own_run(svc, id, &run_id, &cancel).await else {
        return;
    };
    let mut resume = false;
    let mut plan = plan(&assessment, &svc.settings);
    if record.run_id.is_some()
        && let Ok(store) = Store::open_existing_with(
            &run_dir(&results_dir, &run_id),
            &run_id,
            svc.settings.database_url.as_ref(),
        )
        .await
    {
        if let Ok(row) = store.run(&run_id).await
            && let Ok(mut stored) = serde_json::from_value::<Plan>(row.plan)
        {
            stored.settings.results_dir = results_dir.clone();
            plan = stored;
            resume = true;
        }
        store.close().await;
    }
    let roles = assessment.roles();
    let prepared = match prepare(plan, &svc.env).await {
        Ok(mut p) => {
            p.trial_slots = Some(Arc::clone(&svc.trial_slots));
            p
        }
        Err(e) => {
            reg.set_status(id, TaskState::Failed, format!("cannot start the run: {e}"));
            return;
        }
    };
    if cancel.is_cancelled() {
        reg.set_status(id, TaskState::Canceled, "canceled before any trial started");
        return;
    }
    if svc.shutdown.is_cancelled() {
        return;
    }
    let dir = run_dir(&results_dir, &run_id);
    let store = match Store::open_with(&dir, svc.settings.database_url.as_ref()).await {
        Ok(s) => s,
        Err(e) => {
            reg.set_status(
                id,
                TaskState::Failed,
                format!("cannot open the run's store: {e}"),
            );
            return;
        }
    };
    let total = prepared.trials.len();
    let mut counts = (0, 0.0, 0);
    if resume && let Ok(trials) = store.trials(&run_id).await {
        for t in trials.iter().filter(|t| t.state == "done") {
            counts.0 += 1;
            if let Some(s) = t.result.as_ref().and_then(|r| r.score) {
                counts.1 += s;
                counts.2 += 1;
            }
        }
        reg.set_artifacts(id, results::trial_artifacts(&trials, &roles));
    }
    let progress = Arc::new(Progress {
        registry: Arc::clone(reg),
        id: id.to_owned(),
        roles: roles.clone(),
        total,
        counts: Mutex::new(counts),
    });
    reg.set_status(
        id,
        TaskState::Working,
        format!("run {run_id}: {}", progress.message()),
    );
    info!(assessment = id, run = %run_id, resume, "assessment starting");
    let outcome = execute_until(
        prepared,
        &run_id,
        &store,
        progress,
        resume,
        cancel.cancelled(),
    )
    .await;
    let (state, text) = match &outcome {
        Ok(trials) => {
            let unfinished = trials.iter().filter(|t| t.state != "done").count();
            if unfinished == 0 {
                (TaskState::Completed, None)
            } else {
                (
                    TaskState::Failed,
                    Some(format!(
                        "{unfinished} trial(s) did not finish (run status: see report); the finished ones are in the result"
                    )),
                )
            }
        }
        Err(RunError::Interrupted { signal, .. }) => {
            reg.set_status(
                id,
                TaskState::Working,
                format!(
                    "interrupted by {}: run {run_id} resumes when the service starts again",
                    signal.name()
                ),
            );
            store.close().await;
            return;
        }
        Err(e @ RunError::Canceled { .. }) => (TaskState::Canceled, Some(e.to_string())),
        Err(e) => {
            // The whole chain: a variant's own message leaves its cause to its source.
            let mut text = format!("the run failed: {e}");
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            (TaskState::Failed, Some(text))
        }
    };
    // The result artifacts (also for a canceled run: what finished is kept).
    let summary = match ReportData::load(&store, &run_id).await {
        Ok(data) => {
            if let Err(e) = write_reports(&store, &data) {
                warn!(error = %e, "could not write the reports");
            }
            let origin = svc.origin.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let token = record.files_token.clone();
            for artifact in results::final_artifacts(
                &data,
                &roles,
                &dir,
                &origin,
                &token,
                svc.inline_report_bytes,
            ) {
                reg.add_artifact(id, artifact);
            }
            results::headline_text(&results::result_data(&data, &roles))
        }
        Err(e) => format!("run {run_id}: the results could not be read: {e}"),
    };
    store.close().await;
    let text = match text {
        Some(t) => format!("{t}; {summary}"),
        None => summary,
    };
    reg.set_status(id, state, text);
}
