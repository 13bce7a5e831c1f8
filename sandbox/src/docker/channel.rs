//! The exec channel of an idle root container: the sandbox runner (`runner.py --stdio`) is the
//! container's main process and takes exec requests as JSON lines on its stdin, answering on
//! its stdout, both reached through the container's attach. An exec over it costs a spawn in
//! the container (~2 ms) instead of Docker's exec machinery (~45 ms here).
//!
//! Only the attach reaches the runner's pipes: it runs as root, so no other uid in the
//! container can open its `/proc` descriptors, signal or trace it. The main process is
//! `sh -c '…'` around the runner: without `python3` in the image, or once the runner has
//! ended, the shell says so on stdout and sleeps, so the container lives on and execs go
//! through Docker's exec API as before ([`Channel::exec`] answers `None`).
//!
//! Every answer read here is bounded in size (by the largest output cap asked) and time (the
//! request's deadline plus a margin).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::query_parameters::AttachContainerOptionsBuilder;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::{oneshot, watch};

use super::{api_error, exec::oom_kills};
use crate::runner::{ExecAnswer, ExecBody, MAX_REQUEST, SMALL_ANSWER};
use crate::{ExecOutcome, ExecRequest, SandboxError};

/// What the shell prints when the runner is not (or no longer) there.
const GONE: &str = "{\"gone\":true}";

/// Time given to an exec past its own deadline (spawn, the kill, the answer).
const MARGIN: Duration = Duration::from_secs(60);

/// How long the first exec waits for the runner to say it is ready (or gone).
const READY: Duration = Duration::from_secs(30);

/// Bytes of the runner's stderr kept for a warning.
const STDERR_KEEP: usize = 4096;

/// The main process of an idle root container with the channel: `sh -c` running the runner,
/// then, whatever became of it, a line saying it is gone and `sleep infinity`. `home_set`: the
/// container's environment sets `HOME` (the runner leaves it alone, as Docker's exec does).
/// `keep_pwd`: it sets `PWD` (otherwise the shell's own `PWD` is not passed on).
pub(super) fn entrypoint(home_set: bool, keep_pwd: bool) -> Vec<String> {
    let flags = if home_set { " --home-set" } else { "" };
    let unset = if keep_pwd { "" } else { "unset PWD; " };
    let script = format!(
        "{unset}if command -v python3 >/dev/null 2>&1; then python3 -I -B -c \"$0\" --stdio{flags}; fi; echo '{GONE}'; command -v sleep >/dev/null 2>&1 && exec sleep infinity; exec /bin/sleep infinity"
    );
    vec![
        "/bin/sh".into(),
        "-c".into(),
        script,
        crate::runner::program().into(),
    ]
}

/// Whether the channel is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Starting,
    Ready,
    Gone,
}

/// What came back for one request.
enum Reply {
    Outcome(ExecAnswer),
    Error(String),
    /// The runner ended before answering.
    Gone,
}

/// An exec with the id its answer will carry.
#[derive(Serialize)]
struct Request<'a> {
    id: u64,
    #[serde(flatten)]
    body: ExecBody<'a>,
}

/// One line from the runner (or the shell around it).
#[derive(Deserialize)]
struct Line {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    outcome: Option<ExecAnswer>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    gone: bool,
}

type Pending = std::sync::Mutex<HashMap<u64, oneshot::Sender<Reply>>>;

/// The host's end of one container's exec channel.
pub(super) struct Channel {
    input: tokio::sync::Mutex<Pin<Box<dyn AsyncWrite + Send>>>,
    pending: Arc<Pending>,
    state: watch::Receiver<State>,
    next: AtomicU64,
    /// The largest output cap asked so far: bounds the answer lines read.
    largest_cap: Arc<AtomicUsize>,
    reader: tokio::task::JoinHandle<()>,
    container: String,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("container", &self.container)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Channel {
    /// Attaches to the created (not yet started) container `id`, so nothing it says is missed.
    pub(super) async fn attach(
        docker: &Docker,
        endpoint: &str,
        id: &str,
    ) -> Result<Self, SandboxError> {
        let attached = docker
            .attach_container(
                id,
                Some(
                    AttachContainerOptionsBuilder::new()
                        .stdin(true)
                        .stdout(true)
                        .stderr(true)
                        .stream(true)
                        .logs(false)
                        .build(),
                ),
            )
            .await
            .map_err(|e| api_error(endpoint, "attach_container", e))?;
        let pending: Arc<Pending> = Arc::default();
        let largest_cap = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = watch::channel(State::Starting);
        let reader = tokio::spawn(read_answers(
            attached.output,
            Arc::clone(&pending),
            Arc::clone(&largest_cap),
            tx,
            id.to_owned(),
        ));
        Ok(Self {
            input: tokio::sync::Mutex::new(attached.input),
            pending,
            state: rx,
            next: AtomicU64::new(1),
            largest_cap,
            reader,
            container: id.to_owned(),
        })
    }

    /// Runs `request` as `user` in `workdir` through the runner; `None` when the runner is not
    /// there (no `python3`, or it ended before this request was sent): use Docker's exec.
    pub(super) async fn exec(
        &self,
        request: &ExecRequest,
        user: &str,
        workdir: &str,
    ) -> Option<Result<ExecOutcome, SandboxError>> {
        let mut state = self.state.clone();
        let ready = tokio::time::timeout(READY, state.wait_for(|s| *s != State::Starting))
            .await
            .ok()
            .and_then(|r| r.ok().map(|s| *s));
        if ready != Some(State::Ready) {
            return None;
        }
        self.send(request, user, workdir).await
    }

    async fn send(
        &self,
        request: &ExecRequest,
        user: &str,
        workdir: &str,
    ) -> Option<Result<ExecOutcome, SandboxError>> {
        let timeout = request.capped_timeout();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let line = serde_json::to_vec(&Request {
            id,
            body: ExecBody::new(request, user, workdir),
        })
        .map_err(|e| self.error(format!("encoding the request failed: {e}")));
        let mut line = match line {
            Ok(line) => line,
            Err(e) => return Some(Err(e)),
        };
        line.push(b'\n');
        if line.len() > MAX_REQUEST {
            // The runner would refuse it unread (it could not say which request it was).
            return None;
        }
        self.largest_cap
            .fetch_max(request.output_cap, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        if *self.state.borrow() == State::Gone {
            // Gone since the check, before the request was sent: Docker's exec runs it.
            lock(&self.pending).remove(&id);
            return None;
        }
        let oom_before = oom_kills(&self.container);
        let started = Instant::now();
        let written = async {
            let mut input = self.input.lock().await;
            input.write_all(&line).await?;
            input.flush().await
        }
        .await;
        if let Err(e) = written {
            lock(&self.pending).remove(&id);
            return Some(Err(self.error(format!("writing the request failed: {e}"))));
        }
        let reply = match tokio::time::timeout(timeout.saturating_add(MARGIN), rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => Reply::Gone,
            Err(_) => {
                lock(&self.pending).remove(&id);
                return Some(Err(self.error(format!(
                    "no answer {} s past the exec's deadline",
                    MARGIN.as_secs()
                ))));
            }
        };
        let oom_since = match (oom_before, oom_kills(&self.container)) {
            (Some(before), Some(after)) => after > before,
            _ => false,
        };
        Some(match reply {
            Reply::Outcome(answer) => answer
                .into_outcome(oom_since)
                .map_err(|e| self.error(format!("unreadable output: {e}"))),
            // The container's memory ran out while the command ran and the kernel took the
            // runner: the command's outcome, as when it takes the command itself.
            Reply::Gone if oom_since => Ok(ExecOutcome {
                exit_code: None,
                stdout: Vec::new(),
                stderr: Vec::new(),
                timed_out: false,
                oom_killed: true,
                truncated: false,
                duration: started.elapsed(),
            }),
            Reply::Gone => Err(self.error("the runner ended before answering".into())),
            Reply::Error(e) => Err(self.error(format!("the runner refused the exec: {e}"))),
        })
    }

    fn error(&self, detail: String) -> SandboxError {
        SandboxError::Runner {
            service: self.container.chars().take(12).collect(),
            operation: "exec",
            detail,
            source: None,
        }
    }
}

fn lock(pending: &Pending) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Reply>>> {
    pending
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

type Output =
    Pin<Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// Reads the runner's lines until the attach ends: answers go to their requests; `ready` and
/// `gone` set the state. When the stream ends, or breaks its bounds, every waiting request
/// learns the runner is gone.
async fn read_answers(
    mut output: Output,
    pending: Arc<Pending>,
    largest_cap: Arc<AtomicUsize>,
    state: watch::Sender<State>,
    container: String,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut stderr: Vec<u8> = Vec::new();
    'read: while let Some(item) = output.next().await {
        let chunk = match item {
            Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => message,
            Ok(LogOutput::StdErr { message }) => {
                let room = STDERR_KEEP.saturating_sub(stderr.len());
                stderr.extend_from_slice(&message[..message.len().min(room)]);
                continue;
            }
            Ok(LogOutput::StdIn { .. }) => continue,
            Err(e) => {
                tracing::warn!(container = %short(&container), error = %e, "the exec channel's stream failed");
                break;
            }
        };
        // Only the new bytes are searched for the end of a line (answers run to megabytes).
        let mut from = buf.len();
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf[from..]
            .iter()
            .position(|b| *b == b'\n')
            .map(|i| from + i)
        {
            let line: Vec<u8> = buf.drain(..=end).collect();
            from = 0;
            match serde_json::from_slice::<Line>(&line) {
                Ok(l) if l.ready => {
                    state.send_replace(State::Ready);
                }
                Ok(l) if l.gone => {
                    state.send_replace(State::Gone);
                    break 'read;
                }
                Ok(Line {
                    id: Some(id),
                    outcome,
                    error,
                    ..
                }) => {
                    let reply = match (outcome, error) {
                        (Some(o), _) => Reply::Outcome(o),
                        (None, e) => Reply::Error(e.unwrap_or_else(|| "no outcome".into())),
                    };
                    if let Some(tx) = lock(&pending).remove(&id) {
                        let _ = tx.send(reply);
                    }
                }
                Ok(Line { error, .. }) => {
                    tracing::warn!(container = %short(&container), error = ?error, "the runner refused a request it could not read");
                }
                Err(e) => {
                    tracing::warn!(container = %short(&container), error = %e, "an unreadable line from the runner; the channel is closed");
                    break 'read;
                }
            }
        }
        let bound = largest_cap
            .load(Ordering::Relaxed)
            .saturating_mul(4)
            .saturating_add(SMALL_ANSWER);
        if buf.len() > bound {
            tracing::warn!(container = %short(&container), bytes = buf.len(), "a line from the runner over its bound; the channel is closed");
            break;
        }
    }
    if !stderr.is_empty() {
        tracing::warn!(container = %short(&container), stderr = %String::from_utf8_lossy(&stderr), "the runner wrote to stderr");
    }
    state.send_replace(State::Gone);
    // Every request still waiting learns the runner is gone (its sender dropped).
    lock(&pending).clear();
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}
