//! A supervised child process on the host: its own process group, stdin closed, stdout streamed
//! line by line, a bounded tail of stderr kept, the whole tree killed on demand (and on drop).
//!
//! Used by the white-agent-adapter to run agent CLIs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::{Limits, SandboxError};

/// Longest stdout line handed out; the rest of a longer line is dropped.
pub const MAX_LINE_BYTES: usize = 1024 * 1024;
/// Bytes of stderr kept (the most recent ones).
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;

/// What to run.
#[derive(Clone, Default)]
pub struct ChildSpec {
    pub program: String,
    pub args: Vec<String>,
    /// Added to (or, with `clear_env`, replacing) the inherited environment. Values may be
    /// secrets: never logged.
    pub env: BTreeMap<String, String>,
    pub clear_env: bool,
    pub cwd: PathBuf,
    /// Applied as rlimits in the child: `memory_bytes` → `RLIMIT_AS`, `pids` → `RLIMIT_NPROC`
    /// (per user, so only meaningful for a dedicated non-root user). `cpus` has no rlimit
    /// equivalent and is not enforced.
    pub limits: Option<Limits>,
}

impl std::fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSpec")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_keys", &self.env.keys().collect::<Vec<_>>())
            .field("clear_env", &self.clear_env)
            .field("cwd", &self.cwd)
            .field("limits", &self.limits)
            .finish()
    }
}

/// How a child ended: an exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildExit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ChildExit {
    fn from_status(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        Self {
            code: status.code(),
            signal: status.signal(),
        }
    }

    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// `exit 2`, `killed by signal 9`, or `ended without an exit code` (for user text).
impl std::fmt::Display for ChildExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit {code}"),
            (None, Some(sig)) => write!(f, "killed by signal {sig}"),
            (None, None) => f.write_str("ended without an exit code"),
        }
    }
}

/// A running child in its own process group. Dropping it kills the whole group.
#[derive(Debug)]
pub struct SupervisedChild {
    child: Child,
    pid: u32,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Arc<Mutex<VecDeque<u8>>>,
    stderr_task: Option<JoinHandle<()>>,
    exit: Option<ChildExit>,
}

impl SupervisedChild {
    /// Starts `spec.program` in a new process group with stdin from `/dev/null`. Must be called
    /// inside a Tokio runtime (stdout and stderr are read by tasks).
    pub fn spawn(spec: ChildSpec) -> Result<Self, SandboxError> {
        let mut command = Command::new(&spec.program);
        command
            .args(&spec.args)
            .current_dir(&spec.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if spec.clear_env {
            command.env_clear();
        }
        command.envs(&spec.env);
        if let Some(limits) = &spec.limits {
            validate_limits(limits)?;
            rlimits::apply_on_exec(&mut command, limits);
        }
        let mut child = command.spawn().map_err(|source| SandboxError::Spawn {
            program: spec.program.clone(),
            source,
        })?;
        let pid = child.id().ok_or_else(|| SandboxError::Spawn {
            program: spec.program.clone(),
            source: std::io::Error::other("the child exited before its pid was read"),
        })?;
        tracing::debug!(program = %spec.program, pid, "spawned supervised child");

        let (tx, lines) = mpsc::unbounded_channel();
        if let Some(stdout) = child.stdout.take() {
            tokio::spawn(read_lines(stdout, tx));
        }
        let stderr = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_BYTES)));
        let stderr_task = child
            .stderr
            .take()
            .map(|pipe| tokio::spawn(read_tail(pipe, Arc::clone(&stderr), STDERR_TAIL_BYTES)));
        Ok(Self {
            child,
            pid,
            lines,
            stderr,
            stderr_task,
            exit: None,
        })
    }

    /// The child's pid (also its process group id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The next line of stdout (without its newline; invalid UTF-8 replaced; lines longer than
    /// [`MAX_LINE_BYTES`] cut). `None` once stdout is closed and every line was read.
    pub async fn next_stdout_line(&mut self) -> Option<String> {
        self.lines.recv().await
    }

    /// The last [`STDERR_TAIL_BYTES`] of stderr, lossy UTF-8.
    pub fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        let (a, b) = tail.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Waits for the child to exit (idempotent). Its stderr is drained (briefly) before this
    /// returns so [`Self::stderr_tail`] is complete.
    pub async fn wait(&mut self) -> ChildExit {
        let exit = match self.exit {
            // Known already (e.g. from `try_exit`): stderr may still need draining below.
            Some(exit) => exit,
            None => match self.child.wait().await {
                Ok(status) => ChildExit::from_status(status),
                Err(e) => {
                    tracing::warn!(pid = self.pid, error = %e, "waiting for child failed");
                    ChildExit {
                        code: None,
                        signal: None,
                    }
                }
            },
        };
        if let Some(task) = self.stderr_task.take() {
            // Grandchildren may hold the pipe open: do not wait for them.
            let _ = tokio::time::timeout(Duration::from_millis(500), task).await;
        }
        self.exit = Some(exit);
        exit
    }

    /// The exit status if the child has already exited, without waiting.
    pub fn try_exit(&mut self) -> Option<ChildExit> {
        if self.exit.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.exit = Some(ChildExit::from_status(status));
        }
        self.exit
    }

    /// SIGKILLs the child's whole process group and every descendant still attached to it.
    /// Idempotent; never fails.
    pub fn kill_tree(&self) {
        kill_tree(self.pid);
    }
}

impl Drop for SupervisedChild {
    fn drop(&mut self) {
        self.kill_tree();
        if let Some(task) = self.stderr_task.take() {
            task.abort();
        }
    }
}

/// SIGKILLs process group `pid` and every descendant of `pid` found in `/proc` (which catches
/// descendants that moved to another group but are still attached to the tree).
pub(crate) fn kill_tree(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if raw <= 1 {
        return;
    }
    let descendants = descendants_of(pid);
    let _ = killpg(Pid::from_raw(raw), Signal::SIGKILL);
    for d in descendants {
        if let Ok(d) = i32::try_from(d) {
            let _ = kill(Pid::from_raw(d), Signal::SIGKILL);
        }
    }
}

/// All (transitive) children of `root` according to `/proc/*/stat`.
fn descendants_of(root: u32) -> BTreeSet<u32> {
    let mut parent_of = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(ppid) = proc_stat_field(pid, 4) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut found = BTreeSet::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(child, parent) in &parent_of {
            if parent == p as u64 && found.insert(child) {
                frontier.push(child);
            }
        }
    }
    found
}

/// Field `n` (1-based, as in `man 5 proc`) of `/proc/PID/stat`, for numeric fields after the
/// command name.
pub(crate) fn proc_stat_field(pid: u32, n: usize) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let after = &stat[stat.rfind(')')? + 2..];
    // `after` starts at field 3 (the state).
    after
        .split_whitespace()
        .nth(n.checked_sub(3)?)?
        .parse()
        .ok()
}

/// Whether `pid` is alive (exists and is not a zombie).
pub(crate) fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => match stat.rfind(')') {
            Some(i) => !matches!(stat.as_bytes().get(i + 2), Some(b'Z' | b'X')),
            None => false,
        },
        Err(_) => false,
    }
}

pub(crate) fn validate_limits(limits: &Limits) -> Result<(), SandboxError> {
    if !limits.cpus.is_finite() || limits.cpus <= 0.0 {
        return Err(SandboxError::InvalidLimits(format!(
            "cpus must be a positive number, got {}",
            limits.cpus
        )));
    }
    if limits.memory_bytes < 6 * 1024 * 1024 {
        return Err(SandboxError::InvalidLimits(format!(
            "memory_bytes must be at least 6 MiB, got {}",
            limits.memory_bytes
        )));
    }
    if limits.pids < 1 {
        return Err(SandboxError::InvalidLimits(format!(
            "pids must be at least 1, got {}",
            limits.pids
        )));
    }
    Ok(())
}

#[allow(unsafe_code)]
pub(crate) mod rlimits {
    use nix::sys::resource::{Resource, setrlimit};
    use tokio::process::Command;

    use crate::Limits;

    /// Sets `RLIMIT_AS` and `RLIMIT_NPROC` in the child between fork and exec.
    pub(crate) fn apply_on_exec(command: &mut Command, limits: &Limits) {
        let memory = limits.memory_bytes;
        let pids = u64::try_from(limits.pids).unwrap_or(1);
        // SAFETY: the closure only calls `setrlimit(2)`, which is async-signal-safe, and
        // allocates nothing.
        unsafe {
            command.pre_exec(move || {
                setrlimit(Resource::RLIMIT_AS, memory, memory)?;
                setrlimit(Resource::RLIMIT_NPROC, pids, pids)?;
                Ok(())
            });
        }
    }
}

/// Streams `reader` as lines into `tx`, never holding more than one capped line; keeps reading
/// (and discarding) when the receiver is gone so the child never blocks on a full pipe.
async fn read_lines<R: AsyncRead + Unpin>(mut reader: R, tx: mpsc::UnboundedSender<String>) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut overflow = false;
    let emit = |line: &mut Vec<u8>| {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let text = String::from_utf8_lossy(line).into_owned();
        line.clear();
        let _ = tx.send(text);
    };
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if !overflow {
                        let room = MAX_LINE_BYTES - line.len();
                        line.extend_from_slice(&chunk[..i.min(room)]);
                    }
                    emit(&mut line);
                    overflow = false;
                    chunk = &chunk[i + 1..];
                }
                None => {
                    if !overflow {
                        let room = MAX_LINE_BYTES - line.len();
                        line.extend_from_slice(&chunk[..chunk.len().min(room)]);
                        overflow = chunk.len() > room;
                    }
                    chunk = &[];
                }
            }
        }
    }
    if !line.is_empty() {
        emit(&mut line);
    }
}

/// Keeps the last `cap` bytes of `reader` in `tail`.
pub(crate) async fn read_tail<R: AsyncRead + Unpin>(
    mut reader: R,
    tail: Arc<Mutex<VecDeque<u8>>>,
    cap: usize,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
        let data = &buf[..n];
        let data = &data[data.len().saturating_sub(cap)..];
        let excess = (tail.len() + data.len()).saturating_sub(cap);
        tail.drain(..excess);
        tail.extend(data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> ChildSpec {
        ChildSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            ..ChildSpec::default()
        }
    }

    /// Every pid in process group `pgid`, plus the descendants of `root`.
    fn tree_members(root: u32) -> BTreeSet<u32> {
        let mut members = descendants_of(root);
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                if let Some(pid) = entry
                    .file_name()
                    .to_str()
                    .and_then(|s| s.parse::<u32>().ok())
                    && proc_stat_field(pid, 5) == Some(u64::from(root))
                {
                    members.insert(pid);
                }
            }
        }
        members.insert(root);
        members
    }

    #[tokio::test]
    async fn kill_tree_removes_grandchildren() {
        // A shell with two sleeping children, one grandchild, and one that left the group.
        let mut child = SupervisedChild::spawn(sh(
            "sleep 300 & sleep 301 & (sleep 302 & wait) & setsid sleep 303 & sleep 0.2; echo ready; wait",
        ))
        .expect("spawn");
        assert_eq!(child.next_stdout_line().await.as_deref(), Some("ready"));
        let members = tree_members(child.pid());
        assert!(
            members.len() >= 5,
            "expected the shell and its sleepers, found {members:?}"
        );
        child.kill_tree();
        let exit = child.wait().await;
        assert_eq!(exit.signal, Some(libc::SIGKILL));
        assert_eq!(exit.code, None);
        // Orphans are reaped by init: give it a moment.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let alive: Vec<u32> = members
                .iter()
                .copied()
                .filter(|&p| process_alive(p))
                .collect();
            if alive.is_empty() {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "still alive after kill_tree: {alive:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        child.kill_tree(); // idempotent
    }

    #[tokio::test]
    async fn drop_kills_the_tree() {
        let mut child = SupervisedChild::spawn(sh("sleep 300 & echo ready; wait")).expect("spawn");
        assert_eq!(child.next_stdout_line().await.as_deref(), Some("ready"));
        let members = tree_members(child.pid());
        drop(child);
        tokio::time::sleep(Duration::from_millis(300)).await;
        for p in members {
            assert!(!process_alive(p), "pid {p} survived the drop");
        }
    }

    #[tokio::test]
    async fn stderr_is_complete_after_try_exit_then_wait() {
        // The adapter polls `try_exit` and then calls `wait`: the tail must still be drained.
        let mut child =
            SupervisedChild::spawn(sh("echo 'Traceback: boom' >&2; exit 3")).expect("spawn");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while child.try_exit().is_none() {
            assert!(std::time::Instant::now() < deadline, "child never exited");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let exit = child.wait().await;
        assert_eq!(exit.code, Some(3));
        assert!(
            child.stderr_tail().contains("Traceback: boom"),
            "tail: {:?}",
            child.stderr_tail()
        );
    }

    #[tokio::test]
    async fn exit_code_stdout_lines_and_stderr_tail() {
        let mut child = SupervisedChild::spawn(sh(
            "printf 'one\\ntwo\\r\\nthree'; i=0; while [ $i -lt 2000 ]; do echo \"err line $i\" >&2; i=$((i+1)); done; exit 7",
        ))
        .expect("spawn");
        let mut lines = Vec::new();
        while let Some(line) = child.next_stdout_line().await {
            lines.push(line);
        }
        assert_eq!(lines, ["one", "two", "three"]);
        let exit = child.wait().await;
        assert_eq!(
            exit,
            ChildExit {
                code: Some(7),
                signal: None
            }
        );
        assert!(!exit.success());
        let tail = child.stderr_tail();
        assert!(
            tail.len() <= STDERR_TAIL_BYTES,
            "tail is {} bytes",
            tail.len()
        );
        assert!(tail.len() > STDERR_TAIL_BYTES - 100);
        assert!(
            tail.ends_with("err line 1999\n"),
            "tail ends {:?}",
            &tail[tail.len() - 40..]
        );
        assert!(!tail.contains("err line 0\n"));
        assert_eq!(child.wait().await, exit, "wait is idempotent");
    }

    #[tokio::test]
    async fn long_lines_are_capped_and_invalid_utf8_replaced() {
        let mut child = SupervisedChild::spawn(sh(
            "head -c 3000000 /dev/zero | tr '\\0' a; echo; printf 'ok\\377\\n'",
        ))
        .expect("spawn");
        let first = child.next_stdout_line().await.expect("first line");
        assert_eq!(first.len(), MAX_LINE_BYTES);
        assert_eq!(
            child.next_stdout_line().await.as_deref(),
            Some("ok\u{FFFD}")
        );
        assert_eq!(child.next_stdout_line().await, None);
        assert!(child.wait().await.success());
    }

    #[tokio::test]
    async fn env_cwd_and_clear_env() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = sh("echo \"$FOO|$HOME|$(pwd)\"");
        spec.env.insert("FOO".into(), "bar".into());
        spec.clear_env = true;
        spec.cwd = dir.path().to_path_buf();
        let mut child = SupervisedChild::spawn(spec).expect("spawn");
        let line = child.next_stdout_line().await.expect("line");
        let cwd = dir.path().canonicalize().expect("canonical");
        assert_eq!(line, format!("bar||{}", cwd.display()));
        assert!(child.wait().await.success());
    }

    #[tokio::test]
    async fn memory_rlimit_applies() {
        let mut spec = sh("python3 -c 'x = bytearray(400 * 1024 * 1024)' 2>&1; echo rc=$?");
        spec.limits = Some(Limits {
            cpus: 1.0,
            memory_bytes: 200 * 1024 * 1024,
            pids: 10_000,
        });
        let mut child = SupervisedChild::spawn(spec).expect("spawn");
        let mut out = Vec::new();
        while let Some(line) = child.next_stdout_line().await {
            out.push(line);
        }
        assert!(out.iter().any(|l| l.contains("MemoryError")), "{out:?}");
        assert_eq!(out.last().map(String::as_str), Some("rc=1"));
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let err = SupervisedChild::spawn(ChildSpec {
                program: "/nonexistent/agent-cli".into(),
                cwd: std::env::temp_dir(),
                ..ChildSpec::default()
            })
            .expect_err("must fail");
            assert!(matches!(err, SandboxError::Spawn { .. }), "{err}");
            assert!(err.to_string().contains("/nonexistent/agent-cli"));
        });
    }

    #[test]
    fn invalid_limits_are_rejected() {
        let bad = Limits {
            cpus: 0.0,
            ..Limits::default()
        };
        let err = validate_limits(&bad).expect_err("must fail");
        assert!(err.to_string().contains("cpus"), "{err}");
        let bad = Limits {
            pids: 0,
            ..Limits::default()
        };
        assert!(validate_limits(&bad).is_err());
        assert!(validate_limits(&Limits::default()).is_ok());
    }
}
