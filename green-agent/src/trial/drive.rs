//! Phase 3, drive: send the task once and follow it (`a2a_protocol::exchange`: streaming when
//! the agent's card says it streams, else `SendMessage` with `returnImmediately` and polling;
//! a dropped stream is resumed by `SubscribeToTask` or polling, never by sending again) until
//! the agent ends, crashes, or hits the wall-clock or inactivity timeout (then `CancelTask`,
//! and the artifacts so far are fetched). An agent asking for input gets one reply
//! (`input_reply`); asked again, its task is canceled. A reply in a `Message` (no task) is
//! collected like artifacts. A reattached agent's task is followed by id (`Start::task_id`),
//! never sent again. The task id is recorded in the store's attempt as soon as the agent
//! accepted the task, so a resumed run can follow it too.

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_protocol::exchange::{self, Observed, RunEnd, RunOptions};
use a2a_protocol::{
    A2aClient, Artifact, CancelTaskRequest, ClientError, ErrorKind, GetTaskRequest, Message, Part,
    PartContent, SendMessageRequest, Task, TaskState,
};
use tracing::warn;

use super::env::{InfraError, RunEnv, TrialInput, io};
use super::media::media_type;
use super::side::AgentSide;
use super::turns::{self, TurnRecord};
use crate::model::Outcome;
use crate::url_files::FileServer;

/// What driving the agent produced (stored in the attempt before collection, so a resumed
/// run collects without driving again).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct AgentRun {
    /// `None` until the agent's end is known.
    pub(crate) outcome: Option<Outcome>,
    pub(crate) exit_code: Option<i64>,
    pub(crate) flags: Vec<String>,
    pub(crate) final_task: Option<a2a_protocol::Task>,
    /// The agent's own words when it failed, rejected the task or asked for what it cannot
    /// get (its status message).
    pub(crate) error: Option<String>,
    /// A task delivered in turns: each turn sent, in order (`super::turns`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) turns: Vec<TurnRecord>,
}

/// Where driving starts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Start {
    /// `None`: send the task; `Some(id)`: follow the task the agent already has (reattached).
    pub(crate) task_id: Option<String>,
    /// The attempt in the store, which gets the A2A task id once the agent accepts the task.
    pub(crate) attempt: Option<u32>,
    /// Wall-clock time the agent already used (before a restart of the green agent).
    pub(crate) used: Duration,
}

/// Consecutive unanswered polls after which an external agent counts as gone.
const MAX_UNANSWERED: u32 = 20;

/// What the watchdog and the observer share while an exchange runs.
#[derive(Debug)]
struct Watch {
    last_task: Option<Task>,
    last_fp: String,
    last_change: Instant,
    unanswered: u32,
    /// The task id last sent to be recorded in the store.
    recorded: Option<String>,
}

/// What an exchange does first.
enum Go {
    Send(Box<SendMessageRequest>),
    Follow(String),
}

/// How one exchange (send or follow) stopped.
#[allow(clippy::large_enum_variant)] // one short-lived value per exchange
enum Step {
    End(RunEnd),
    Failed(ClientError),
    Inactive,
    Budget(String),
    Crashed(i64),
    /// The sandbox's node left (drained, down, removed): an infrastructure failure, retried.
    NodeLost(sandbox::SandboxError),
}

pub(crate) async fn drive(
    env: &RunEnv,
    input: &TrialInput,
    side: &AgentSide,
    start: Start,
) -> Result<AgentRun, InfraError> {
    let mut run = drive_to_end(env, input, side, start).await?;
    // An agent that ended on its own after its model calls were refused was stopped by the
    // budget, whatever state it reported.
    if !matches!(
        run.outcome,
        Some(Outcome::Completed | Outcome::BudgetExceeded)
    ) && let Some(reason) = trial_budget_spent(env, input)
    {
        run.outcome = Some(Outcome::BudgetExceeded);
        run.flags.push(reason);
    }
    Ok(run)
}

/// Why the trial must stop: its own budget, or the run's cost cap, is spent.
fn budget_stop(env: &RunEnv, input: &TrialInput) -> Option<String> {
    trial_budget_spent(env, input).or_else(|| env.proxy.as_ref()?.run_budget_spent())
}

fn trial_budget_spent(env: &RunEnv, input: &TrialInput) -> Option<String> {
    env.proxy.as_ref()?.trial_budget_spent(&input.planned.id)
}

async fn drive_to_end(
    env: &RunEnv,
    input: &TrialInput,
    side: &AgentSide,
    start: Start,
) -> Result<AgentRun, InfraError> {
    let view = input.task.agent_view();
    let wall = env.settings.agent_timeout.map_or(
        Duration::from_secs(view.environment.agent_timeout_secs),
        |t| t.get(),
    );
    let started = Instant::now()
        .checked_sub(start.used)
        .unwrap_or_else(Instant::now);
    let deadline = started + wall;
    let ex = Exchange {
        env,
        input,
        side,
        attempt: start.attempt,
    };
    match (&view.turns, start.task_id) {
        (Some(t), None) => ex.turns(&view, t, deadline, wall).await,
        // A reattached trial follows the task it was in; turns after it are not sent (their
        // steps score 0).
        (_, Some(id)) => ex.once(Go::Follow(id), deadline, wall).await,
        (None, None) => {
            let message = task_message(input, side.file_server(), None)?;
            ex.once(
                Go::Send(Box::new(SendMessageRequest::new(message))),
                deadline,
                wall,
            )
            .await
        }
    }
}

/// One trial's agent, driven through one exchange or a sequence of turns.
struct Exchange<'a> {
    env: &'a RunEnv,
    input: &'a TrialInput,
    side: &'a AgentSide,
    attempt: Option<u32>,
}

impl Exchange<'_> {
    /// A task in turns: each stage's prompt (the kept file as the previous turn left it filled
    /// in) sent as a new message in the same context once the previous turn's task ended, with
    /// the turn's own budget inside the trial's; the first turn that does not complete is the
    /// last (the later stages are not sent).
    async fn turns(
        &self,
        view: &tasks::AgentView,
        t: &tasks::Turns,
        deadline: Instant,
        wall: Duration,
    ) -> Result<AgentRun, InfraError> {
        let mut run = AgentRun::default();
        let mut kept = turns::initial(view.workspace.dir(), &t.kept_file);
        let total = view.stages.len();
        for (k, stage) in view.stages.iter().enumerate() {
            let turn_wall = t.timeout_secs.map_or(wall, Duration::from_secs).min(wall);
            let turn_deadline = deadline.min(Instant::now() + turn_wall);
            let text = tasks::turns::prompt(&stage.prompt, kept.as_deref());
            // The workspace's files travel once, with the first turn.
            let files = if k == 0 {
                self.side.file_server()
            } else {
                None
            };
            let mut message = task_message(self.input, files, Some(text))?;
            if k > 0 {
                message.parts.retain(|p| p.filename.is_none());
            }
            let turn = self
                .once(
                    Go::Send(Box::new(SendMessageRequest::new(message))),
                    turn_deadline,
                    turn_wall,
                )
                .await?;
            kept = turns::read_kept(self.side, turn.final_task.as_ref(), &t.kept_file).await;
            run.turns.push(TurnRecord {
                stage: stage.id.clone(),
                outcome: turn.outcome,
                kept: kept.clone(),
            });
            let label = format!("turn {} of {total} ({})", k + 1, stage.id);
            run.flags
                .extend(turn.flags.iter().map(|f| format!("{label}: {f}")));
            run.outcome = turn.outcome;
            run.exit_code = turn.exit_code;
            run.final_task = turn.final_task;
            run.error = turn.error;
            if run.outcome != Some(Outcome::Completed) {
                if k + 1 < total {
                    let outcome = run.outcome.map_or("no end", |o| o.as_str());
                    run.flags.push(format!(
                        "{label} ended {outcome}: the {} later turn(s) were not sent (their \
                         stages score 0)",
                        total - k - 1
                    ));
                }
                break;
            }
        }
        Ok(run)
    }

    /// One exchange, followed to its end (one reply to an input request), by `deadline`
    /// (`wall` is the budget it stands for, in the timeout flag).
    async fn once(
        &self,
        first: Go,
        deadline: Instant,
        wall: Duration,
    ) -> Result<AgentRun, InfraError> {
        let (env, input, side) = (self.env, self.input, self.side);
        let client = side.client();
        let inactivity = env.settings.inactivity_timeout.get();
        let base_interval = env.settings.poll_interval.get();
        let left = || deadline.saturating_duration_since(Instant::now());
        let opts = |budget: Duration| RunOptions {
            budget,
            streaming: true,
            poll_initial: base_interval,
            // polling is the fallback (the stream, or the adapter's exit, tells the end first):
            // a short cap on its backoff
            poll_max: base_interval * 2,
            history_length: Some(0),
        };
        let watch = Arc::new(Mutex::new(Watch {
            last_task: None,
            last_fp: String::new(),
            last_change: Instant::now(),
            unanswered: 0,
            recorded: None,
        }));
        let mut run = AgentRun::default();
        let dog = Dog {
            env,
            input,
            side,
            watch: &watch,
            inactivity,
            attempt: self.attempt,
        };
        let mut step = dog.watched(first, &opts(left())).await;
        let mut replied = false;
        loop {
            let last = lock(&watch).last_task.clone();
            match step {
                Step::End(RunEnd::Task(task))
                    if task.state() == TaskState::InputRequired && !replied =>
                {
                    let question = status_text(&task);
                    run.flags.push(format!(
                        "agent asked for input: {question}; replied: {}",
                        env.settings.input_reply
                    ));
                    replied = true;
                    let reply = SendMessageRequest::new(
                        Message::user_text(env.settings.input_reply.clone())
                            .with_task_id(task.id.clone())
                            .with_context_id(task.context_id.clone()),
                    );
                    step = dog.watched(Go::Send(Box::new(reply)), &opts(left())).await;
                    continue;
                }
                Step::End(RunEnd::Task(task)) => {
                    finish(client, &mut run, task).await;
                }
                Step::End(RunEnd::Message(m)) => {
                    run.flags.push(
                    "the agent answered with a message and no task; its parts were collected as artifacts".into(),
                );
                    run.outcome = Some(Outcome::Completed);
                    run.final_task = Some(task_of_message(&m));
                }
                Step::End(RunEnd::OutOfTime(task)) => {
                    run.outcome = Some(Outcome::Timeout);
                    run.flags.push(format!("timeout after {}s", wall.as_secs()));
                    run.final_task = stop(client, task.or(last)).await;
                }
                Step::Budget(reason) => {
                    run.outcome = Some(Outcome::BudgetExceeded);
                    run.flags.push(reason);
                    run.final_task = stop(client, last).await;
                }
                Step::Inactive => {
                    run.outcome = Some(Outcome::Inactive);
                    run.flags
                        .push(format!("inactive for {}s", inactivity.as_secs()));
                    run.final_task = stop(client, last).await;
                }
                Step::NodeLost(e) => return Err(e.into()),
                Step::Crashed(code) => {
                    run.outcome = Some(Outcome::Crashed);
                    run.exit_code = Some(code);
                    run.flags.push(format!("adapter exited with {code}"));
                    run.final_task = last;
                    return Ok(run);
                }
                Step::End(RunEnd::Stopped(task)) => {
                    // The observer stopped it: the agent stopped answering.
                    run.outcome = Some(Outcome::Crashed);
                    run.flags.push(format!(
                        "the agent stopped answering ({MAX_UNANSWERED} polls without an answer)"
                    ));
                    run.final_task = Some(task);
                }
                Step::Failed(e) => match e.kind() {
                    // Never received (or refused for good): retried / recorded as incompatible.
                    ErrorKind::Unreachable if last.is_none() => return Err(e.into()),
                    ErrorKind::Incompatible | ErrorKind::Unauthorized => return Err(e.into()),
                    // The message may be with the agent: an outcome, never a second send.
                    ErrorKind::Timeout | ErrorKind::Transport | ErrorKind::Unreachable => {
                        run.outcome = Some(Outcome::Crashed);
                        run.flags
                            .push(format!("lost the agent after sending the task: {e}"));
                        run.error = Some(e.to_string());
                        run.final_task = last;
                    }
                    _ => {
                        run.outcome = Some(Outcome::Failed);
                        run.flags.push(format!("the agent's answer: {e}"));
                        run.error = Some(e.to_string());
                        run.final_task = last;
                    }
                },
            }
            break;
        }
        if run.exit_code.is_none()
            && let Some(t) = &run.final_task
        {
            run.exit_code = reported_exit_code(t);
        }
        Ok(run)
    }
}

fn lock(w: &Mutex<Watch>) -> std::sync::MutexGuard<'_, Watch> {
    w.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What watches an exchange: the trial's budgets, the inactivity clock and, for a hosted
/// agent, its adapter's exit.
struct Dog<'a> {
    env: &'a RunEnv,
    input: &'a TrialInput,
    side: &'a AgentSide,
    watch: &'a Arc<Mutex<Watch>>,
    inactivity: Duration,
    attempt: Option<u32>,
}

impl Dog<'_> {
    /// Sends `req` and follows its task ([`exchange::run`]), or follows a task the agent
    /// has ([`exchange::follow`]), while the watchdog checks the inactivity clock (every task
    /// update that changes its fingerprint resets it), the model budgets and, for a hosted
    /// agent, whether the adapter exited. The task's id goes to the store as soon as seen.
    async fn watched(&self, go: Go, opts: &RunOptions) -> Step {
        let watch = self.watch;
        lock(watch).last_change = Instant::now();
        let hosted = self.side.sandbox().is_some();
        let (ids, mut to_record) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut observer = |seen: Observed<'_>| -> ControlFlow<()> {
            let mut w = lock(watch);
            match seen {
                Observed::Task(t) => {
                    if !t.id.is_empty() && w.recorded.as_deref() != Some(t.id.as_str()) {
                        w.recorded = Some(t.id.clone());
                        let _ = ids.send(t.id.clone());
                    }
                    w.unanswered = 0;
                    let fp = fingerprint(t);
                    if fp != w.last_fp {
                        w.last_fp = fp;
                        w.last_change = Instant::now();
                    }
                    w.last_task = Some(t.clone());
                }
                Observed::NoAnswer(_) => {
                    w.unanswered += 1;
                    if !hosted && w.unanswered > MAX_UNANSWERED {
                        return ControlFlow::Break(());
                    }
                }
                Observed::StreamDropped(_) => {}
            }
            ControlFlow::Continue(())
        };
        let client = self.side.client();
        let running = async {
            match go {
                Go::Send(req) => exchange::run(client, *req, opts, &mut observer).await,
                Go::Follow(id) => exchange::follow(client, &id, opts, &mut observer).await,
            }
        };
        tokio::pin!(running);
        let record = async {
            while let Some(id) = to_record.recv().await {
                self.record_task(&id).await;
            }
            std::future::pending::<Step>().await
        };
        let dog = async {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                if lock(watch).last_change.elapsed() >= self.inactivity {
                    return Step::Inactive;
                }
                if let Some(reason) = budget_stop(self.env, self.input) {
                    return Step::Budget(reason);
                }
            }
        };
        // A hosted adapter's exit is reported by the backend as it happens (Docker's wait
        // API), not found by polling.
        let exited = async {
            let Some(sb) = self.side.sandbox() else {
                return std::future::pending().await;
            };
            loop {
                match sb.wait_exit().await {
                    Ok(code) => return Ok(code),
                    Err(e @ sandbox::SandboxError::NodeLost { .. }) => return Err(e),
                    Err(e) => {
                        warn!(error = %e, "watching the adapter's exit failed; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        };
        let ended = |r: Result<_, ClientError>| match r {
            Ok((end, _stats)) => Step::End(end),
            Err(e) => Step::Failed(e),
        };
        let step = tokio::select! {
            biased;
            r = &mut running => ended(r),
            s = dog => s,
            s = record => s,
            exit = exited => match exit {
                // What the adapter sent just before it exited still counts.
                Ok(code) => match tokio::time::timeout(Duration::from_millis(250), &mut running).await {
                    Ok(Ok((end, _stats))) => Step::End(end),
                    _ => Step::Crashed(code),
                },
                Err(lost) => Step::NodeLost(lost),
            }
        };
        // The recording future may have been dropped in the middle of its store write (the
        // select above cancels it when the exchange ends first), taking its id off the channel
        // unwritten: the last id seen is written again here (the same value: idempotent).
        drop(to_record);
        let last = lock(watch).recorded.clone();
        if let Some(id) = last {
            self.record_task(&id).await;
        }
        step
    }

    /// Records the attempt's A2A task id (the agent accepted the task).
    async fn record_task(&self, id: &str) {
        let Some(attempt) = self.attempt else { return };
        let env = self.env;
        if let Err(e) = env
            .store
            .attempt_task(&env.run_id, &self.input.planned.id, attempt, id)
            .await
        {
            warn!(error = %e, "could not record the agent's task id (a resume finds it by ListTasks)");
        }
    }
}

/// Records how a task that stopped ended: its outcome, and the agent's own words when it did
/// not complete.
async fn finish(client: &A2aClient, run: &mut AgentRun, task: Task) {
    let text = status_text(&task);
    let said = |what: &str| {
        if text.is_empty() {
            what.to_owned()
        } else {
            format!("{what}: {text}")
        }
    };
    match task.state() {
        TaskState::Completed => {
            run.outcome = Some(Outcome::Completed);
            run.exit_code = reported_exit_code(&task);
            if run.exit_code.is_some_and(|c| c != 0) {
                run.outcome = Some(Outcome::Failed);
            }
        }
        TaskState::Failed => {
            run.outcome = Some(Outcome::Failed);
            run.error = Some(said("the agent failed"));
            run.flags.push(said("agent_failed"));
        }
        TaskState::Rejected => {
            run.outcome = Some(Outcome::Failed);
            run.error = Some(said("the agent rejected the task"));
            run.flags.push(said("agent_rejected"));
        }
        TaskState::Canceled => {
            run.outcome = Some(Outcome::Failed);
            run.error = Some(said("the agent canceled the task"));
            run.flags.push(said("agent_canceled"));
        }
        TaskState::AuthRequired => {
            run.outcome = Some(Outcome::Failed);
            run.error = Some(said(
                "the agent requires authentication (pass credentials with --agent-header NAME=env:VAR)",
            ));
            run.flags.push(said("auth_required"));
            let _ = client
                .cancel_task(&CancelTaskRequest::new(task.id.clone()))
                .await;
        }
        TaskState::InputRequired => {
            run.outcome = Some(Outcome::Failed);
            run.error = Some(said("the agent asked for input again after the one reply"));
            run.flags.push(said("input_required_again; task canceled"));
            if let Err(e) = client
                .cancel_task(&CancelTaskRequest::new(task.id.clone()))
                .await
            {
                warn!(error = %e, "CancelTask after a second input request failed");
            }
        }
        other => {
            run.outcome = Some(Outcome::Failed);
            run.flags.push(format!("agent stopped in state {other}"));
        }
    }
    run.final_task = Some(task);
}

/// Cancels a task that ran out of time or went quiet, then fetches it once more for the
/// artifacts produced so far.
async fn stop(client: &A2aClient, task: Option<Task>) -> Option<Task> {
    let mut task = task?;
    if task.id.is_empty() {
        return Some(task);
    }
    match client
        .cancel_task(&CancelTaskRequest::new(task.id.clone()))
        .await
    {
        Ok(t) => task = t,
        Err(e) => warn!(error = %e, "CancelTask failed; the container is killed anyway"),
    }
    if let Ok(t) = client.get_task(&GetTaskRequest::new(task.id.clone())).await {
        task = t;
    }
    Some(task)
}

/// The text of a task's status message.
fn status_text(task: &Task) -> String {
    task.status
        .message
        .as_ref()
        .map(Message::text)
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// A task holding what a `Message` reply carried: its text parts as the `answer`, each other
/// part as an artifact of its own (named after its file name), so they are collected and
/// flagged like a task's artifacts.
fn task_of_message(m: &Message) -> Task {
    let mut t = Task::new(
        "",
        m.context_id.clone().unwrap_or_default(),
        TaskState::Completed,
    );
    let text = m.text();
    if !text.is_empty() {
        t.artifacts.push(Artifact::text("answer", text));
    }
    for (i, p) in m.parts.iter().enumerate() {
        if matches!(p.content, PartContent::Text(_)) && p.filename.is_none() {
            continue;
        }
        let name = p
            .filename
            .clone()
            .unwrap_or_else(|| format!("message-part-{}", i + 1));
        t.artifacts.push(Artifact::new(Some(name), vec![p.clone()]));
    }
    t
}

/// The message sent to the white agent: the instruction and the task's public data; for an
/// external agent also the workspace files as parts (big ones as `url` parts of `file_server`).
fn task_message(
    input: &TrialInput,
    file_server: Option<&FileServer>,
    instruction: Option<String>,
) -> Result<Message, InfraError> {
    let view = input.task.agent_view();
    let mut parts = vec![
        Part::text(instruction.unwrap_or_else(|| view.instruction.clone())),
        Part::data(serde_json::json!({
            "task_id": view.task_id,
            "expected_outputs": view.expected_outputs,
            "constraints": view.constraints,
        })),
    ];
    if !input.agent.is_hosted() {
        let files = view
            .workspace
            .files()
            .map_err(|e| InfraError::Grading(e.to_string()))?;
        for f in files {
            if let Some(server) = file_server
                && let Some(url) = server.url(&f.relative)
            {
                let mut part =
                    Part::url(url, Some(f.relative.clone()), Some(media_type(&f.relative)));
                let mut meta = a2a_protocol::Metadata::new();
                meta.insert("size".into(), serde_json::json!(server.size(&f.relative)));
                part.metadata = Some(meta);
                parts.push(part);
                continue;
            }
            let bytes = std::fs::read(&f.host_path)
                .map_err(io(format!("reading {}", f.host_path.display())))?;
            parts.push(Part::raw(
                bytes,
                Some(f.relative.clone()),
                Some(media_type(&f.relative)),
            ));
        }
    }
    Ok(Message::user(parts).with_context_id(input.planned.id.clone()))
}

/// A cheap fingerprint of a task's progress (changes reset the inactivity clock). Clocks are
/// left out: status timestamps and "… for 12s" elapsed-time texts change without progress.
fn fingerprint(task: &a2a_protocol::Task) -> String {
    let msg = task
        .status
        .message
        .as_ref()
        .map(|m| m.text())
        .unwrap_or_default();
    format!(
        "{}|{}|{}|{}",
        task.status.state,
        task.artifacts.len(),
        task.history.len(),
        without_elapsed(&msg)
    )
}

/// Replaces every "for <digits>s" with "for _s".
fn without_elapsed(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("for ") {
        let (head, tail) = rest.split_at(i + 4);
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with('s') {
            out.push('_');
            rest = &tail[digits..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// Exit code reported by the adapter (status message data or metadata `exit_code`).
fn reported_exit_code(task: &a2a_protocol::Task) -> Option<i64> {
    let from_map = |m: &serde_json::Map<String, serde_json::Value>| {
        m.get("exit_code")
            .or_else(|| m.get("exitCode"))
            .or_else(|| m.get("adapter").and_then(|a| a.get("exit_code")))
            .and_then(serde_json::Value::as_i64)
    };
    if let Some(m) = &task.metadata
        && let Some(c) = from_map(m)
    {
        return Some(c);
    }
    let msg = task.status.message.as_ref()?;
    if let Some(m) = &msg.metadata
        && let Some(c) = from_map(m)
    {
        return Some(c);
    }
    msg.parts
        .iter()
        .filter_map(|p| p.as_data())
        .filter_map(|d| d.as_object())
        .find_map(from_map)
}

#[cfg(test)]
mod tests {
    use super::without_elapsed;

    #[test]
    fn elapsed_time_is_not_progress() {
        assert_eq!(
            without_elapsed("running for 12s; tokens so far: 100 in, 5 out; waited for 3 turns"),
            "running for _s; tokens so far: 100 in, 5 out; waited for 3 turns"
        );
        assert_eq!(without_elapsed("for 7s"), "for _s");
        assert_eq!(without_elapsed("nothing"), "nothing");
    }
}

#[cfg(test)]
mod sent_instruction_tests {
    use std::sync::Arc;

    use super::task_message;
    use crate::agents::AgentSpec;
    use crate::store::PlannedTrial;
    use crate::trial::TrialInput;

    /// What the agent reads is the task's rendered instruction, as is: the adapter finds every
    /// fact of the message's data part already in its text and adds nothing (no second list of
    /// outputs, no raw constraints).
    #[test]
    fn every_bundled_task_instruction_reaches_the_agent_unchanged() {
        let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tasks/examples");
        let suite = tasks::load_suite(&[examples]).expect("the bundled suite");
        assert!(!suite.is_empty());
        for task in suite {
            let expected = task.agent_view().instruction.trim_end().to_owned();
            let input = TrialInput {
                planned: PlannedTrial {
                    id: format!("{}-t", task.id()),
                    task_id: task.id().to_owned(),
                    task_kind: task.kind().as_str().to_owned(),
                    task_hash: String::new(),
                    agent: "oracle".into(),
                    repeat_index: 0,
                },
                task: Arc::new(task),
                agent: AgentSpec::Oracle,
                image: String::new(),
            };
            let message = task_message(&input, None, None).expect("a message");
            let read = white_agent_adapter::instruction::read_message(&message).expect("read");
            assert_eq!(read.instruction, expected, "{}", input.task.id());
        }
    }
}
