//! Runs one task: writes input files, snapshots the workspace, launches the driver through
//! `sandbox::child` (own process group, stdin `/dev/null`), feeds stdout to the stream parser,
//! reacts to cancellation by killing the whole process tree, then collects the workspace changes
//! (off the async threads) and decides the outcome.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandbox::child::{ChildExit, ChildSpec, SupervisedChild};
use serde::Serialize;
use tokio::sync::watch;

use crate::drivers::{self, DriverOptions, Plan};
use crate::instruction::{self, TaskInput};
use crate::parse::{Dialect, RunState, StreamParser, Terminal, Usage};
use crate::workspace::{self, ArtifactLimits, Collection, CollectionReport};

/// Live progress of a running task (read by `GetTask`).
#[derive(Debug, Clone, Default)]
pub struct Progress {
    pub phase: String,
    pub last_tool: Option<String>,
    pub usage: Usage,
}

impl Progress {
    /// The one-line status shown while working.
    pub fn message(&self, elapsed: Duration) -> String {
        let mut text = format!("{} for {}s", self.phase, elapsed.as_secs());
        if let Some(tool) = &self.last_tool {
            text.push_str(&format!("; last tool call: {tool}"));
        }
        text.push_str(&format!(
            "; tokens so far: {} in, {} out; turns: {}",
            self.usage.input_tokens, self.usage.output_tokens, self.usage.turns
        ));
        text
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Completed,
    Failed,
    Canceled,
}

/// Everything a finished run produced.
#[derive(Debug)]
pub struct Outcome {
    pub verdict: Verdict,
    /// Why it failed (or was canceled); `None` when completed.
    pub reason: Option<String>,
    pub state: RunState,
    pub collection: Option<Collection>,
    pub report: RunReport,
}

/// Facts about a run, returned in the task's metadata.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunReport {
    pub driver: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub stderr_tail: String,
    pub duration_ms: u64,
    pub ignored_lines: u64,
    pub tool_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<CollectionReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_error: Option<String>,
}

/// Settings of every run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub driver: DriverOptions,
    pub limits: ArtifactLimits,
    /// Whether to check that CLI binaries exist before launching (on in production).
    pub check_binaries: bool,
}

/// Characters of stderr quoted in a failure reason.
const REASON_STDERR_CHARS: usize = 2000;

fn tail_chars(text: &str, n: usize) -> String {
    let count = text.chars().count();
    if count <= n {
        text.trim().to_owned()
    } else {
        text.chars()
            .skip(count - n)
            .collect::<String>()
            .trim()
            .to_owned()
    }
}

fn set_phase(progress: &Mutex<Progress>, phase: &str) {
    if let Ok(mut progress) = progress.lock() {
        phase.clone_into(&mut progress.phase);
    }
}

/// Downloads `url` parts of the message into the workspace (streamed to disk, at most
/// `max_bytes` each, no redirects, a deadline and a minimum rate: [`crate::fetch`]); the error
/// is the task's failure reason.
async fn download_inputs(
    root: &std::path::Path,
    files: &[(String, String)],
    max_bytes: u64,
) -> Result<(), String> {
    for (name, url) in files {
        let path = workspace::safe_join(root, name).map_err(|err| err.to_string())?;
        let written = crate::fetch::download(
            url,
            &path,
            crate::fetch::FetchLimits::with_max_bytes(max_bytes),
        )
        .await
        .map_err(|err| format!("input file {name:?}: {err}"))?;
        tracing::info!(file = %name, %url, bytes = written, "input file fetched by URL");
    }
    Ok(())
}

/// Runs `input` to its end. `cancel` turning true kills the process tree.
pub async fn run(
    config: Arc<RunConfig>,
    input: TaskInput,
    progress: Arc<Mutex<Progress>>,
    mut cancel: watch::Receiver<bool>,
) -> Outcome {
    let started = Instant::now();
    let options = &config.driver;
    let mut report = RunReport {
        driver: options.kind.name().to_owned(),
        ..RunReport::default()
    };
    let root = options.workspace.clone();

    // 1. Input files, then the "before" snapshot.
    set_phase(&progress, "preparing");
    let prepared = {
        let root = root.clone();
        let input = input.clone();
        tokio::task::spawn_blocking(move || {
            instruction::write_files(&root, &input)?;
            workspace::snapshot(&root)
        })
        .await
    };
    let prepared = match prepared {
        Ok(Ok(_)) if !input.url_files.is_empty() => {
            set_phase(&progress, "downloading input files");
            match download_inputs(&root, &input.url_files, config.limits.max_url_file_bytes).await {
                Ok(()) => {
                    let root = root.clone();
                    tokio::task::spawn_blocking(move || workspace::snapshot(&root)).await
                }
                Err(reason) => return early_failure(report, started, reason),
            }
        }
        other => other,
    };
    let before = match prepared {
        Ok(Ok(snapshot)) => snapshot,
        Ok(Err(err)) => return early_failure(report, started, err.to_string()),
        Err(err) => {
            return early_failure(report, started, format!("workspace scan crashed: {err}"));
        }
    };

    // 2. The launch plan.
    let plan = match drivers::plan(options, &input.instruction, config.check_binaries) {
        Ok(Plan::Run(plan)) => plan,
        Ok(Plan::Nothing) => {
            let mut parser = StreamParser::new(Dialect::PLAIN);
            parser.record_instruction(&input.instruction);
            report.duration_ms = elapsed_ms(started);
            return Outcome {
                verdict: Verdict::Completed,
                reason: None,
                state: parser.finish(),
                collection: Some(Collection::default()),
                report,
            };
        }
        Err(err) => return early_failure(report, started, err.to_string()),
    };
    let mut parser = StreamParser::new(plan.dialect);
    parser.record_instruction(&input.instruction);
    parser.set_model_hint(options.model.as_deref());
    for dir in &plan.dirs {
        if let Err(err) = std::fs::create_dir_all(dir) {
            return early_failure(
                report,
                started,
                format!("cannot create {}: {err}", dir.display()),
            );
        }
    }
    for file in &plan.files {
        let written = file
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&file.path, &file.contents));
        if let Err(err) = written {
            return early_failure(
                report,
                started,
                format!("cannot write {}: {err}", file.path.display()),
            );
        }
    }

    // 3. Launch.
    let spec = ChildSpec {
        program: plan.program.clone(),
        args: plan.args.clone(),
        env: plan.env.clone(),
        clear_env: false,
        cwd: plan.cwd.clone(),
        limits: None,
    };
    let mut child = match SupervisedChild::spawn(spec) {
        Ok(child) => child,
        Err(err) => {
            return early_failure(
                report,
                started,
                format!("cannot start {}: {err}", plan.program),
            );
        }
    };
    tracing::info!(
        driver = options.kind.name(),
        pid = child.pid(),
        "agent started"
    );
    set_phase(&progress, "working");

    // 4. Stream until stdout closes, the child exits, or a cancel arrives.
    let mut canceled = *cancel.borrow();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    if !canceled {
        loop {
            tokio::select! {
                line = child.next_stdout_line() => match line {
                    Some(line) => {
                        parser.feed_line(&line);
                        update(&progress, parser.state());
                    }
                    None => break,
                },
                changed = cancel.changed() => {
                    if changed.is_err() || *cancel.borrow() {
                        canceled = true;
                        break;
                    }
                }
                _ = tick.tick() => {
                    if child.try_exit().is_some() {
                        // Drain what is buffered, for at most 2 s: descendants may hold stdout
                        // open (and keep writing) forever.
                        let drain_until = Instant::now() + Duration::from_secs(2);
                        while Instant::now() < drain_until {
                            match tokio::time::timeout(Duration::from_millis(300), child.next_stdout_line()).await {
                                Ok(Some(line)) => parser.feed_line(&line),
                                _ => break,
                            }
                        }
                        update(&progress, parser.state());
                        break;
                    }
                }
            }
        }
    }
    let exit: ChildExit = if canceled {
        child.kill_tree();
        child.wait().await
    } else {
        tokio::select! {
            exit = child.wait() => exit,
            _ = wait_cancel(&mut cancel) => {
                canceled = true;
                child.kill_tree();
                child.wait().await
            }
        }
    };
    // Nothing the agent started may outlive it.
    child.kill_tree();
    report.exit_code = exit.code;
    report.signal = exit.signal;
    report.stderr_tail = child.stderr_tail();
    drop(child);
    tracing::info!(driver = options.kind.name(), %exit, canceled, "agent ended");

    // 5. Collect the workspace off the async threads.
    set_phase(&progress, "collecting outputs");
    let limits = config.limits;
    let collected = {
        let root: PathBuf = root.clone();
        tokio::task::spawn_blocking(move || workspace::collect(&root, &before, limits)).await
    };
    let collection = match collected {
        Ok(Ok(collection)) => {
            report.workspace = Some(collection.report(limits));
            Some(collection)
        }
        Ok(Err(err)) => {
            report.workspace_error = Some(err.to_string());
            None
        }
        Err(err) => {
            report.workspace_error = Some(format!("workspace scan crashed: {err}"));
            None
        }
    };

    if let Some(path) = &plan.transcript {
        match read_transcript(path) {
            Ok(text) => parser.feed_transcript(&text),
            Err(err) => tracing::warn!(path = %path.display(), %err, "no transcript read"),
        }
    }
    let state = parser.finish();
    report.ignored_lines = state.ignored_lines;
    report.tool_errors = state.tool_errors;
    report.duration_ms = elapsed_ms(started);
    let (verdict, reason) = decide(canceled, exit, &state, plan.dialect, &report.stderr_tail);
    Outcome {
        verdict,
        reason,
        state,
        collection,
        report,
    }
}

/// Largest transcript file read.
const MAX_TRANSCRIPT_BYTES: u64 = 64 * 1024 * 1024;

/// The transcript a CLI wrote: a regular file (no link followed), at most
/// [`MAX_TRANSCRIPT_BYTES`].
fn read_transcript(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > MAX_TRANSCRIPT_BYTES {
        return Err(std::io::Error::other(format!(
            "not a regular file of at most {MAX_TRANSCRIPT_BYTES} bytes"
        )));
    }
    let mut text = String::new();
    file.take(MAX_TRANSCRIPT_BYTES).read_to_string(&mut text)?;
    Ok(text)
}

async fn wait_cancel(cancel: &mut watch::Receiver<bool>) {
    loop {
        if *cancel.borrow() {
            return;
        }
        if cancel.changed().await.is_err() {
            // The sender is gone: nobody can cancel any more.
            std::future::pending::<()>().await;
        }
    }
}

fn update(progress: &Mutex<Progress>, state: &RunState) {
    if let Ok(mut progress) = progress.lock() {
        progress.last_tool.clone_from(&state.last_tool);
        progress.usage = state.usage.clone();
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn early_failure(mut report: RunReport, started: Instant, reason: String) -> Outcome {
    tracing::warn!(%reason, "task failed before the agent ran");
    report.duration_ms = elapsed_ms(started);
    Outcome {
        verdict: Verdict::Failed,
        reason: Some(reason),
        state: RunState::default(),
        collection: None,
        report,
    }
}

/// The verdict: cancel wins; then the CLI's terminal error; then a bad exit; then a missing
/// terminal event (for CLI dialects); else completed.
pub fn decide(
    canceled: bool,
    exit: ChildExit,
    state: &RunState,
    dialect: Dialect,
    stderr_tail: &str,
) -> (Verdict, Option<String>) {
    if canceled {
        return (Verdict::Canceled, Some("canceled by the client".to_owned()));
    }
    let stderr = tail_chars(stderr_tail, REASON_STDERR_CHARS);
    let with_stderr = |reason: String| {
        if stderr.is_empty() {
            reason
        } else {
            format!("{reason}\nstderr (tail):\n{stderr}")
        }
    };
    if let Some(Terminal::Failed { reason }) = &state.terminal {
        return (Verdict::Failed, Some(reason.clone()));
    }
    if !exit.success() {
        let how = match (exit.code, exit.signal) {
            (Some(code), _) => format!("the agent exited with code {code}"),
            (None, Some(signal)) => format!("the agent was killed by signal {signal}"),
            (None, None) => "the agent ended with an unknown status".to_owned(),
        };
        return (Verdict::Failed, Some(with_stderr(how)));
    }
    if dialect.needs_terminal() && state.terminal.is_none() {
        let mut reason = "the agent's event stream ended without a final result event".to_owned();
        if let Some(error) = &state.last_error {
            reason.push_str(&format!(" (last error: {error})"));
        }
        return (Verdict::Failed, Some(with_stderr(reason)));
    }
    (Verdict::Completed, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: Option<i32>, signal: Option<i32>) -> ChildExit {
        ChildExit { code, signal }
    }

    #[test]
    fn verdicts_follow_the_precedence() {
        let mut state = RunState::default();
        assert_eq!(
            decide(true, exit(Some(0), None), &state, Dialect::PLAIN, "").0,
            Verdict::Canceled
        );
        assert_eq!(
            decide(false, exit(Some(0), None), &state, Dialect::PLAIN, ""),
            (Verdict::Completed, None)
        );
        let (verdict, reason) =
            decide(false, exit(Some(3), None), &state, Dialect::PLAIN, "boom\n");
        assert_eq!(verdict, Verdict::Failed);
        assert_eq!(
            reason.as_deref(),
            Some("the agent exited with code 3\nstderr (tail):\nboom")
        );
        let (_, reason) = decide(false, exit(None, Some(9)), &state, Dialect::PLAIN, "");
        assert_eq!(reason.as_deref(), Some("the agent was killed by signal 9"));
        state.last_error = Some("Codex error: Reconnecting...".into());
        let (verdict, reason) = decide(false, exit(Some(0), None), &state, Dialect::CODEX, "");
        assert_eq!(verdict, Verdict::Failed);
        assert!(
            reason.unwrap_or_default().contains(
                "without a final result event (last error: Codex error: Reconnecting...)"
            )
        );
        state.terminal = Some(Terminal::Failed {
            reason: "max turns".into(),
        });
        assert_eq!(
            decide(
                false,
                exit(Some(1), None),
                &state,
                Dialect::CLAUDE_CODE,
                "x"
            )
            .1
            .as_deref(),
            Some("max turns")
        );
        state.terminal = Some(Terminal::Success);
        assert_eq!(
            decide(false, exit(Some(0), None), &state, Dialect::CODEX, "").0,
            Verdict::Completed
        );
    }

    #[test]
    fn progress_message_is_short_and_informative() {
        let progress = Progress {
            phase: "working".into(),
            last_tool: Some("Bash: ls".into()),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 2,
                turns: 1,
                ..Usage::default()
            },
        };
        assert_eq!(
            progress.message(Duration::from_secs(12)),
            "working for 12s; last tool call: Bash: ls; tokens so far: 10 in, 2 out; turns: 1"
        );
    }
}
