//! Phase 5, grade: a fresh container from the pristine image holding the task's workspace plus
//! the agent's output files at `/workspace` and the held-out files at `/grader/hidden`, then
//! `rubrics::grade`.
//!
//! The container is created while the agent runs ([`create`]: no network, nothing of the
//! agent's) and gets the task's own files then ([`stage_task_files`]: workspace, held-out files,
//! scratch, our harness, the task's inputs: one upload off the trial's critical path; the agent's
//! sandbox cannot reach this container). The agent's outputs go in as a second upload ([`grade`])
//! only once no process of the agent's runs (its sandbox stopped, or removed).

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

/// Where the task's own inputs are kept in the grading sandbox (root-owned).
fn inputs_dir() -> String {
    format!("{GRADER_WORK}/inputs")
}

/// Uploads the task's own files into `sb` (from [`create`]) while the agent runs: the task's
/// workspace at `/workspace`, the held-out files, a scratch folder for graders (reports, JUnit
/// XML) with our harness in it, and the task's inputs again, root-owned (what the agent left
/// unchanged is not its data: `reproduce` re-runs with its code and these only; the
/// forbidden-API scan skips them). Nothing of the agent's: its outputs follow in [`grade`].
pub(crate) async fn stage_task_files(
    input: &TrialInput,
    sb: &dyn Sandbox,
) -> Result<(), InfraError> {
    let view = input.task.agent_view();
    let scratch = tempfile::tempdir().map_err(io("creating a scratch folder"))?;
    let harness = rubrics::grade::Harness::write().map_err(io("writing the grading harness"))?;
    let mut items = vec![CopyIn::new(view.workspace.dir(), WORKSPACE)];
    // Held-out files enter only here: a fresh grading container, never an agent's.
    if let Some(dir) = input.task.held_out().dir() {
        items.push(CopyIn::new(dir, GRADER_HIDDEN));
    }
    items.push(CopyIn::new(scratch.path(), GRADER_WORK));
    items.push(harness.copy_in(GRADER_WORK));
    items.push(CopyIn::new(view.workspace.dir(), inputs_dir()).owned_by(0, 0));
    sb.copy_in_many(&items).await?;
    Ok(())
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
/// once `staged` (the end of [`stage_task_files`] then [`prewarm`] in `sb`): no agent code runs
/// beside a trusted probe, whose failure would read as the image's; the outputs go in over the
/// task's workspace only then.
///
/// The grading budget counts from here: staging the outputs, their upload and the wait for the
/// task's files and the probes take from it, the graders get what is left. Outputs whose upload
/// does not fit it are scored 0 as `timeout` (the agent's outcome, not an infrastructure
/// failure).
pub(crate) async fn grade(
    env: &RunEnv,
    input: &TrialInput,
    sb: &dyn Sandbox,
    outputs_dir: &Path,
    staged: impl std::future::Future<Output = Result<rubrics::grade::Prewarmed, InfraError>>,
) -> Result<rubrics::GradeReport, InfraError> {
    let began = Instant::now();
    let budget = budget(env, input);
    let view = input.task.agent_view();
    let inputs = inputs_dir();
    let left = |began: Instant| budget.saturating_sub(began.elapsed());
    // Within the budget: the snapshot graders compare against, built here from the task's
    // workspace and the outputs (a walk of every output: off the runtime, so that the budget can
    // end it; else the grading takes it in the container), then the outputs' upload once the
    // task's files are in.
    let sources = [
        view.workspace.dir().to_path_buf(),
        outputs_dir.to_path_buf(),
    ];
    let ready = tokio::time::timeout(left(began), async {
        let snapshot = tokio::task::spawn_blocking(move || {
            rubrics::grade::StagedSnapshot::of(&[sources[0].as_path(), sources[1].as_path()])
        });
        let prewarmed = staged.await?;
        let snapshot = snapshot.await.ok().flatten();
        let mut items = vec![CopyIn::new(outputs_dir, WORKSPACE)];
        if let Some(s) = &snapshot {
            items.extend(s.copy_ins(GRADER_WORK));
        }
        sb.copy_in_many(&items).await?;
        Ok::<_, InfraError>((snapshot, prewarmed))
    })
    .await;
    let staged = match ready {
        Ok(Err(e)) => return Err(e),
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
