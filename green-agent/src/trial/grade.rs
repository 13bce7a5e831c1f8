//! Phase 5, grade: a fresh container from the pristine image holding the task's workspace plus
//! the agent's output files at `/workspace` and the held-out files at `/grader/hidden`, then
//! `rubrics::grade`.
//!
//! The container is created empty while the agent runs ([`create`]: no network, nothing of the
//! agent's, nothing held-out); everything it needs goes in as ONE upload ([`grade`]: workspace,
//! outputs, held-out files, scratch and our harness) only once no process of the agent's runs
//! (its sandbox stopped, or removed).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sandbox::{CopyIn, NetworkPolicy, Owner, Role, Sandbox, SandboxSpec};

use super::env::{InfraError, RunEnv, TrialInput, io};
use white_agent_adapter::contract::paths::{GRADER_HIDDEN, GRADER_WORK, WORKSPACE};

/// The grading sandbox's limits for `task` (also what admission to a cluster counts).
pub fn grader_limits(task: &tasks::Task) -> sandbox::Limits {
    let view = task.agent_view();
    sandbox::Limits {
        cpus: view.environment.cpus.max(0.5),
        memory_bytes: view.environment.memory_mb.max(512) * 1024 * 1024,
        pids: 1024,
    }
}

/// Creates the trial's grading sandbox, empty and idle (started while the agent runs).
pub(crate) async fn create(
    env: &RunEnv,
    input: &TrialInput,
) -> Result<Box<dyn Sandbox>, InfraError> {
    let spec = SandboxSpec {
        image: input.image.clone(),
        owner: Owner {
            run_id: env.run_id.clone(),
            trial_id: Some(input.planned.id.clone()),
            role: Role::Grader,
        },
        env: BTreeMap::new(),
        workdir: WORKSPACE.into(),
        // rubrics executes graders as root; a container started as another user would leave
        // that root without capabilities (no-new-privileges), unable to write the scratch dir.
        // The container has no network and is removed after grading.
        user: Some("root".into()),
        limits: grader_limits(&input.task),
        mounts: vec![],
        network: NetworkPolicy::None,
        command: None,
    };
    Ok(env.backend.create(spec).await?)
}

/// Runs the graders' trusted probes in `sb` (from [`create`], still empty: the agent runs
/// elsewhere) so that grading finds their answers kept, and makes the task's forbidden modules
/// unavailable there (what [`grade`] is told through the answer).
pub(crate) async fn prewarm(
    env: &RunEnv,
    input: &TrialInput,
    sb: &dyn Sandbox,
) -> rubrics::grade::Prewarmed {
    let mut ctx = rubrics::GradingContext::new(sb, env.settings.grade_timeout.get());
    ctx.probes = env.probes.for_image(&input.image);
    rubrics::grade::prewarm_probes(input.task.grading(), &ctx).await
}

/// The grading budget of `input`'s task: the run's `--grade-timeout`, or the task's own when
/// lower.
fn budget(env: &RunEnv, input: &TrialInput) -> Duration {
    let task_limit = Duration::from_secs(
        input
            .task
            .grading()
            .timeout_secs
            .unwrap_or(input.task.agent_view().environment.grading_timeout_secs)
            .max(1),
    );
    env.settings.grade_timeout.get().min(task_limit)
}

/// The grade of a trial whose outputs were not collected within the collection budget
/// (`why`): every grader `timeout`, score 0, nothing run in `sb`.
pub(crate) fn not_collected(
    input: &TrialInput,
    sb: &dyn Sandbox,
    why: &str,
) -> rubrics::GradeReport {
    let ctx = rubrics::GradingContext::new(sb, Duration::ZERO);
    rubrics::grade::over_budget(input.task.grading(), &ctx, why)
}

/// Grades `outputs_dir` (the agent's new or changed files) for `input`'s task in `sb` (from
/// [`create`]). Called only once the agent's sandbox is stopped or removed. The graders run
/// once `prewarmed` (the end of [`prewarm`] in `sb`): no agent code runs beside a trusted
/// probe, whose failure would read as the image's.
///
/// The grading budget counts from here: staging the outputs, their one upload and the wait
/// for the probes take from it, the graders get what is left. Outputs whose upload does not
/// fit it are scored 0 as `timeout` (the agent's outcome, not an infrastructure failure).
pub(crate) async fn grade(
    env: &RunEnv,
    input: &TrialInput,
    sb: &dyn Sandbox,
    outputs_dir: &Path,
    prewarmed: impl std::future::Future<Output = rubrics::grade::Prewarmed>,
) -> Result<rubrics::GradeReport, InfraError> {
    let began = Instant::now();
    let budget = budget(env, input);
    let view = input.task.agent_view();
    // Scratch for graders (reports, JUnit XML) and our harness in it, root-owned.
    let scratch = tempfile::tempdir().map_err(io("creating a scratch folder"))?;
    let harness = rubrics::grade::Harness::write().map_err(io("writing the grading harness"))?;
    let mut items = vec![
        CopyIn::new(view.workspace.dir(), WORKSPACE),
        CopyIn::new(outputs_dir, WORKSPACE),
    ];
    // Held-out files enter only here: a fresh grading container, never an agent's.
    if let Some(dir) = input.task.held_out().dir() {
        items.push(CopyIn::new(dir, GRADER_HIDDEN));
    }
    items.push(CopyIn::new(scratch.path(), GRADER_WORK));
    items.push(harness.copy_in(GRADER_WORK));
    // The task's own inputs, root-owned: what the agent left unchanged is not its data
    // (`reproduce` re-runs with its code and these only; the forbidden-API scan skips them).
    let inputs = format!("{GRADER_WORK}/inputs");
    items.push(CopyIn::new(view.workspace.dir(), &inputs).owned_by(0, 0));
    let left = |began: Instant| budget.saturating_sub(began.elapsed());
    // Within the budget: the snapshot graders compare against, built here from the same
    // folders (a walk of every output: off the runtime, so that the budget can end it; else
    // the grading takes it in the container), the one upload, the probes.
    let sources = [
        view.workspace.dir().to_path_buf(),
        outputs_dir.to_path_buf(),
    ];
    let ready = tokio::time::timeout(left(began), async {
        let snapshot = tokio::task::spawn_blocking(move || {
            rubrics::grade::StagedSnapshot::of(&[sources[0].as_path(), sources[1].as_path()])
        })
        .await
        .ok()
        .flatten();
        if let Some(s) = &snapshot {
            items.extend(s.copy_ins(GRADER_WORK));
        }
        sb.copy_in_many(&items).await?;
        let prewarmed = prewarmed.await;
        Ok::<_, sandbox::SandboxError>((snapshot, prewarmed))
    })
    .await;
    let staged = match ready {
        Ok(Err(e)) => return Err(e.into()),
        Ok(Ok(ready)) => Some(ready),
        Err(_) => None,
    };
    let remaining = left(began);
    let mut ctx = rubrics::GradingContext::new(sb, remaining);
    let Some((snapshot, prewarmed)) = staged.filter(|_| !remaining.is_zero()) else {
        let why = format!(
            "the grading budget of {} s ran out before any grader ran: staging and uploading the agent's outputs took {:.1} s",
            budget.as_secs(),
            began.elapsed().as_secs_f64()
        );
        return Ok(rubrics::grade::over_budget(
            input.task.grading(),
            &ctx,
            &why,
        ));
    };
    ctx.judge = env.judge.as_deref();
    ctx.harness_staged = true;
    ctx.snapshot_staged = snapshot.is_some();
    ctx.task_inputs = Some(inputs);
    ctx.probes = env.probes.for_image(&input.image);
    ctx.forbidden_unavailable = prewarmed.forbidden_unavailable;
    let report = rubrics::grade(input.task.grading(), &ctx).await;
    // Graders turn a failing sandbox into statuses; a grading sandbox whose node left (Swarm)
    // voids the grade instead: an infrastructure failure, retried on the stored outputs.
    if let Err(e @ sandbox::SandboxError::NodeLost { .. }) = sb.main_exit().await {
        return Err(e.into());
    }
    Ok(report)
}
