//! A trial as a sequence of named phases: prepare → launch → drive → collect → grade → record,
//! or, for what a dead green agent left, reattach → drive → collect → grade → record (reattach
//! → collect → … for an agent that had ended; reattach → grade → record for outputs it had
//! collected). How the agent ended is stored before collection, what was collected before the
//! agent's container is removed and grading starts, so a restart repeats no agent work. An attempt's sandboxes and
//! networks are removed on every path out; infrastructure failures are retried (bounded, with
//! backoff), anything else is an outcome. Every attempt is recorded in the store's `attempts`.

use std::time::Duration;

use futures::FutureExt;

use tracing::{Instrument, info, info_span, warn};

use super::ahead::Ahead;
use super::drive::Start;
use super::env::{InfraError, RunEnv, TrialInput};
use super::phases::PhaseLog;
use super::prepare::Prepared;
use super::reattach::{self, Left, Resumed};
use super::record::Parts;
use super::resources::Resources;
use super::{collect, drive, grade, launch, prepare, record};
use crate::agents::AgentSpec;
use crate::model::TrialResult;
use crate::store::AttemptKind;

/// What follows once the agent is under control.
enum Next {
    /// Drive it from here.
    Drive(Start),
    /// It had ended (before a restart): collect.
    Collect(Box<super::drive::AgentRun>),
}

/// How an attempt begins.
enum How {
    /// A new agent: its sandboxes made now, or taken from those prepared ahead of the slot.
    Fresh(Option<Box<Ahead>>),
    Reattach(Box<Left>),
}

/// Runs a trial to its outcome, retrying infrastructure failures; never fails. Its `attempts`
/// counts the attempts the store holds for the trial, those of a process that died before this
/// one (abandoned, reattached) included, and this process's attempts that failed before any
/// agent container existed (a refused create: no row, since nothing of it can be reattached):
/// the larger of the two counts.
pub async fn run_trial(env: &RunEnv, input: &TrialInput) -> TrialResult {
    run_prepared_trial(env, input, None).await
}

/// [`run_trial`] on the sandboxes `ahead` prepared before the trial's slot (its first attempt
/// starts on them; discarded when the trial has leftovers of a dead process to take up).
pub async fn run_prepared_trial(
    env: &RunEnv,
    input: &TrialInput,
    ahead: Option<Ahead>,
) -> TrialResult {
    let mut r = attempts(env, input, ahead).await;
    match env.store.attempts(&env.run_id, &input.planned.id).await {
        Ok(rows) => {
            r.attempts = r
                .attempts
                .max(u32::try_from(rows.len()).unwrap_or(u32::MAX));
        }
        Err(e) => warn!(error = %e, "could not count the trial's attempts in the store"),
    }
    r
}

/// The attempts of a trial, up to its outcome (retries of infrastructure failures included).
async fn attempts(env: &RunEnv, input: &TrialInput, mut ahead: Option<Ahead>) -> TrialResult {
    let span = info_span!("trial", trial_id = %crate::identity::short(&input.planned.id), task = %input.planned.task_id, agent = %input.planned.agent);
    async {
        if input.agent == AgentSpec::Oracle && input.task.oracle_solution().is_none() {
            if let Some(a) = ahead.take() {
                a.discard(env, &input.planned).await;
            }
            return record::no_reference(env.backend.name() == "docker");
        }
        // What a dead process left: an open attempt (gathered by the resume), else outputs
        // its last attempt collected although the trial's result was never recorded (it died
        // between the attempt's end and the record, or during a retry's wait): graded from
        // them, the agent is not run again.
        let mut left = match env.leftovers.take(&input.planned.id) {
            Some(l) => Some(l),
            None => Left::collected_by_last_attempt(env, input).await,
        };
        // Sandboxes prepared ahead serve a fresh start only.
        if left.is_some()
            && let Some(a) = ahead.take()
        {
            a.discard(env, &input.planned).await;
        }
        // A regrade grades stored outputs: whatever fails, its agent never starts over.
        let regrading = left.as_ref().is_some_and(Left::is_regrade);
        // What the trial's flags must say about its history (reattached, started over).
        let mut notes: Vec<String> = Vec::new();
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let how = match left.take() {
                Some(l) => How::Reattach(Box::new(l)),
                None => How::Fresh(ahead.take().map(Box::new)),
            };
            let mut retry_from = None;
            match attempt_once(env, input, how, &mut notes, &mut retry_from).await {
                Ok(mut r) => {
                    r.attempts = attempt;
                    notes.append(&mut r.flags);
                    r.flags = notes;
                    return r;
                }
                Err(InfraError::AgentGone(why)) if regrading => {
                    warn!(why, "the stored outputs cannot be graded again");
                    let isolated = env.backend.name() == "docker";
                    let mut r = record::infra_failure(
                        format!("cannot grade the stored outputs again: {why}"),
                        attempt,
                        isolated,
                    );
                    notes.append(&mut r.flags);
                    r.flags = notes;
                    return r;
                }
                Err(InfraError::AgentGone(why)) => {
                    // Not an infrastructure failure: the trial starts over at once, flagged.
                    attempt -= 1;
                    let _ = env
                        .store
                        .event(
                            &env.run_id,
                            Some(&input.planned.id),
                            "agent_gone",
                            &serde_json::json!({ "error": why }),
                        )
                        .await;
                    notes.push(format!(
                        "started over after a restart of the green agent: the agent it left is gone ({why})"
                    ));
                }
                Err(e) if e.is_incompatible() => {
                    warn!(attempt, error = %e, "the agent is incompatible; not retried");
                    let _ = env
                        .store
                        .event(
                            &env.run_id,
                            Some(&input.planned.id),
                            "agent_incompatible",
                            &serde_json::json!({ "attempt": attempt, "error": e.to_string() }),
                        )
                        .await;
                    let isolated = env.backend.name() == "docker";
                    let mut r = record::incompatible(e.to_string(), attempt, isolated);
                    notes.append(&mut r.flags);
                    r.flags = notes;
                    return r;
                }
                Err(e @ InfraError::Panicked(_)) => {
                    tracing::error!(attempt, error = %e, "the trial panicked; not retried");
                    let _ = env
                        .store
                        .event(
                            &env.run_id,
                            Some(&input.planned.id),
                            "trial_panicked",
                            &serde_json::json!({ "attempt": attempt, "error": e.to_string() }),
                        )
                        .await;
                    let isolated = env.backend.name() == "docker";
                    let mut r = record::infra_failure(e.to_string(), attempt, isolated);
                    notes.append(&mut r.flags);
                    r.flags = notes;
                    return r;
                }
                Err(e) => {
                    warn!(attempt, error = %e, "infrastructure failure");
                    let _ = env
                        .store
                        .event(
                            &env.run_id,
                            Some(&input.planned.id),
                            "infra_error",
                            &serde_json::json!({ "attempt": attempt, "error": e.to_string() }),
                        )
                        .await;
                    if attempt > env.settings.infra_retries {
                        if let Some(l) = retry_from {
                            l.discard(env, &e.to_string()).await;
                        }
                        let isolated = env.backend.name() == "docker";
                        let mut r = record::infra_failure(e.to_string(), attempt, isolated);
                        notes.append(&mut r.flags);
                        r.flags = notes;
                        return r;
                    }
                    // The agent the attempt started is taken over (or the outputs it
                    // collected graded again): it is not run again.
                    left = match retry_from {
                        Some(l) => Some(l),
                        None => Left::collected_by_last_attempt(env, input).await,
                    };
                    tokio::time::sleep(Duration::from_millis(500 * 2u64.pow(attempt.min(6)))).await;
                }
            }
        }
    }
    .instrument(span)
    .await
}

/// Runs `work`; a panic in it becomes [`InfraError::Panicked`] (its message kept).
async fn contained<T>(
    work: impl std::future::Future<Output = Result<T, InfraError>>,
) -> Result<T, InfraError> {
    std::panic::AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(InfraError::Panicked(panic_message(panic.as_ref()))))
}

/// The text a panic carried.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// One attempt; its row in the store's `attempts` is closed. What it created is removed:
/// before it returns when it failed (so that a retry starts clean), in the background
/// ([`RunEnv::teardown`]) when it produced a result.
async fn attempt_once(
    env: &RunEnv,
    input: &TrialInput,
    how: How,
    notes: &mut Vec<String>,
    retry_from: &mut Option<Left>,
) -> Result<TrialResult, InfraError> {
    let mut res = Resources::default();
    let mut number = None;
    // A panic in the trial's own code ends this trial, not the process: the attempt is
    // closed and its objects removed like any failed attempt's.
    let out = contained(phases(env, input, how, &mut res, &mut number, notes)).await;
    match &out {
        Ok(_) => res.release_later(env.backend.clone(), &env.teardown),
        Err(e) => {
            // A retried failure after the agent started: the retry takes that agent over.
            if is_retried(e) {
                *retry_from = Left::after_failure(env, input, number, &mut res, e).await;
            }
            res.release(env.backend.as_ref()).await;
        }
    }
    // Left open for the retry that takes its agent over (a crash before it does leaves the
    // attempt, and the agent's container, to a resumed run).
    let number = number.filter(|_| !retry_from.as_ref().is_some_and(Left::keeps_attempt_open));
    if let Some(p) = &env.proxy {
        // the attempt's token dies with it; a retry registers afresh
        p.unregister(&input.planned.id);
    }
    if let Some(n) = number {
        let (ended, detail) = match &out {
            Ok(_) => ("finished", None),
            Err(InfraError::AgentGone(why)) => ("agent_gone", Some(why.clone())),
            Err(e) if e.is_incompatible() => ("incompatible", Some(e.to_string())),
            Err(e) => ("infra_error", Some(e.to_string())),
        };
        if let Err(e) = env
            .store
            .end_attempt(&env.run_id, &input.planned.id, n, ended, detail.as_deref())
            .await
        {
            warn!(error = %e, "could not close the attempt in the store");
        }
    }
    out
}

/// Whether the trial is attempted again after `e` (see [`attempts`]).
fn is_retried(e: &InfraError) -> bool {
    !matches!(e, InfraError::AgentGone(_) | InfraError::Panicked(_)) && !e.is_incompatible()
}

async fn phases(
    env: &RunEnv,
    input: &TrialInput,
    how: How,
    res: &mut Resources,
    number: &mut Option<u32>,
    notes: &mut Vec<String>,
) -> Result<TrialResult, InfraError> {
    let mut log = PhaseLog::new(env, &input.planned);
    // Prepared ahead: the grading sandbox is staged and probed already (the agent's sandbox
    // started: `agent_phases` takes it).
    let mut how = how;
    let grader_ahead = match &mut how {
        How::Fresh(Some(ahead)) => ahead.grader.take(),
        _ => None,
    };
    // The grading sandbox is created (no network) while the agent is launched and runs
    // (created after the agent's start instead, it was measured slower: it is then not ready
    // when collection ends), and gets the task's own files then (workspace, held-out files,
    // harness: nothing of the agent's, and the agent's sandbox cannot reach it). The graders'
    // trusted probes run in it meanwhile (they also warm its filesystem for the graders);
    // grading uploads the agent's outputs once both are done, and runs no grader (no agent
    // code) before.
    let (handed, grader) = tokio::sync::oneshot::channel();
    let (probed, prewarmed) =
        tokio::sync::oneshot::channel::<Result<rubrics::grade::Prewarmed, InfraError>>();
    let grader_side = async {
        if let Some((sb, ready)) = grader_ahead {
            let _ = handed.send(Ok(sb));
            let _ = probed.send(Ok(ready));
            return;
        }
        match grade::create(env, input).await {
            Ok(sb) => {
                let sb: std::sync::Arc<dyn sandbox::Sandbox> = sb.into();
                let _ = handed.send(Ok(sb.clone()));
                // Both at once: the probes touch nothing the upload writes.
                let (files, prewarmed) = tokio::join!(
                    grade::stage_task_files(input, sb.as_ref()),
                    grade::prewarm(env, input, sb.as_ref())
                );
                let _ = probed.send(files.map(|()| prewarmed));
            }
            Err(e) => {
                let _ = handed.send(Err(e));
            }
        }
    };
    let agent_side = async {
        let agent = agent_phases(env, input, how, res, &mut log, number, notes).await;
        let grader = match grader.await {
            Ok(created) => created.map(|sb| res.keep_shared(sb)),
            Err(_) => Err(InfraError::Grading(
                "the grading sandbox's creation was abandoned".into(),
            )),
        };
        let (prep, parts) = agent?;
        let grader = grader?;
        // A staging that never answered (its side ended) staged nothing grading may count on.
        let prewarmed = async {
            prewarmed.await.unwrap_or_else(|_| {
                Err(InfraError::Grading(
                    "the grading sandbox's staging of the task's files was abandoned".into(),
                ))
            })
        };
        grade_and_record(env, input, &prep, parts, grader.as_ref(), prewarmed, log).await
    };
    let ((), out) = tokio::join!(grader_side, agent_side);
    out
}

/// Everything up to the agent's outputs, staged and stored: launch (or reattach) → drive →
/// collect → checkpoint, then the agent container is confirmed frozen or stopped (or removed at
/// once).
async fn agent_phases(
    env: &RunEnv,
    input: &TrialInput,
    how: How,
    res: &mut Resources,
    log: &mut PhaseLog<'_>,
    number: &mut Option<u32>,
    notes: &mut Vec<String>,
) -> Result<(Prepared, Parts), InfraError> {
    let (prep, side, next) = match how {
        How::Fresh(ahead) => {
            let (prep, created) = match ahead {
                Some(ahead) => {
                    let ahead = *ahead;
                    log.extend(ahead.phases());
                    res.absorb(ahead.res);
                    (ahead.prep, ahead.created)
                }
                None => {
                    let prep = prepare::prepare(env, input, None)?;
                    let created = launch::create(env, input, &prep, res, log).await?;
                    (prep, created)
                }
            };
            // Recorded before the adapter answers: a crash meanwhile leaves the container to a
            // resumed run (which waits for its card and sends the task once), not a second one.
            let place = reattach::place_of(env, &prep, &created);
            let n = reattach::begin(env, input, AttemptKind::Fresh, &place).await?;
            *number = Some(n);
            let side = launch::ready(env, created, log).await?;
            let start = Start {
                task_id: None,
                attempt: Some(n),
                used: Duration::ZERO,
            };
            (prep, side, Next::Drive(start))
        }
        How::Reattach(left) => match reattach::reattach(env, input, *left, res, log, number).await?
        {
            Resumed::Agent {
                prep,
                side,
                start,
                note,
            } => {
                notes.push(note);
                (prep, side, Next::Drive(start))
            }
            Resumed::Driven {
                prep,
                side,
                run,
                note,
            } => {
                notes.push(note);
                (prep, side, Next::Collect(Box::new(run)))
            }
            Resumed::Collected { prep, parts, note } => {
                notes.push(note);
                return Ok((prep, *parts));
            }
        },
    };
    let isolated = side.is_isolated(env.backend.as_ref());
    let mut run = match next {
        Next::Collect(run) => *run,
        Next::Drive(start) => {
            let run = log
                .run("agent", drive::drive(env, input, &side, start))
                .await?;
            reattach::driven(env, input, *number, &run).await;
            run
        }
    };
    let collected = log
        .run(
            "collect",
            collect::collect(env, input, side, &mut run, &prep),
        )
        .await?;
    let (usage, self_reported_usage) =
        record::usage(env, &input.planned, &prep, collected.usage.usage.clone());
    let parts = Parts {
        run,
        collected,
        usage,
        self_reported_usage,
        isolated,
        phases: log.times(),
    };
    reattach::checkpoint(env, input, *number, &parts, &prep.outputs_dir).await;
    // Invariant: no process of the agent runs once grading touches its outputs or a held-out
    // file (those sit in the grading sandbox, which the agent's cannot reach): its container
    // is frozen or stopped (collection did it) or else removed now. A frozen or
    // stopped one is removed in the background from here (its network after it), while the
    // trial grades: the command's end then waits for the grading container alone.
    res.release_running_sandboxes().await;
    res.release_later(env.backend.clone(), &env.teardown);
    Ok((prep, parts))
}

/// Grades the staged outputs in the (fresh) grading sandbox, its graders once `prewarmed`,
/// and assembles the result (phase times: those of `parts`, then this attempt's).
async fn grade_and_record(
    env: &RunEnv,
    input: &TrialInput,
    prep: &Prepared,
    mut parts: Parts,
    grader: &dyn sandbox::Sandbox,
    prewarmed: impl std::future::Future<Output = Result<rubrics::grade::Prewarmed, InfraError>>,
    mut log: PhaseLog<'_>,
) -> Result<TrialResult, InfraError> {
    // Outputs not collected within their budget: nothing to grade, score 0 (no grade phase).
    let report = match parts.collected.timed_out.as_deref() {
        Some(why) => grade::not_collected(input, grader, why),
        None => {
            log.run(
                "grade",
                grade::grade(env, input, grader, &prep.outputs_dir, prewarmed),
            )
            .await?
        }
    };
    let outcome = parts
        .run
        .outcome
        .unwrap_or(crate::model::Outcome::Completed);
    info!(
        outcome = outcome.as_str(),
        score = %report.score.map_or_else(|| "none".to_owned(), |s| s.to_string()),
        "trial finished"
    );
    parts.phases.extend(log.into_times());
    Ok(record::assemble(parts, &report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_a_trial_becomes_its_failure() {
        let out: Result<(), InfraError> = contained(async {
            tokio::task::yield_now().await;
            panic!("walked too deep");
        })
        .await;
        match out {
            Err(InfraError::Panicked(m)) => assert_eq!(m, "walked too deep"),
            other => panic!("unexpected {other:?}"),
        }
        let formatted: Result<(), InfraError> = contained(async { panic!("{} levels", 450) }).await;
        assert!(
            matches!(&formatted, Err(InfraError::Panicked(m)) if m == "450 levels"),
            "{formatted:?}"
        );
        let fine = contained(async { Ok::<_, InfraError>(7) }).await;
        assert_eq!(fine.expect("no panic"), 7);
    }
}
