//! `exec` in a container: deadline (the whole process tree killed), output caps, OOM detection.

use std::time::{Duration, Instant};

use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use futures::StreamExt;

use super::{DockerSandbox, api_error};
use crate::runner::DRAIN_AFTER_KILL;
use crate::{ExecOutcome, ExecRequest, SandboxError};

/// Keeps the first `cap` bytes of a stream.
#[derive(Debug)]
pub(crate) struct Capped {
    pub(crate) bytes: Vec<u8>,
    cap: usize,
    pub(crate) truncated: bool,
}

impl Capped {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            bytes: Vec::new(),
            cap,
            truncated: false,
        }
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        let room = self.cap.saturating_sub(self.bytes.len());
        if data.len() > room {
            self.truncated = true;
        }
        self.bytes.extend_from_slice(&data[..data.len().min(room)]);
    }
}

/// Runs `request` through Docker's exec API (argv and environment names already checked by
/// the caller).
pub(super) async fn run(
    sandbox: &DockerSandbox,
    request: ExecRequest,
) -> Result<ExecOutcome, SandboxError> {
    let docker = &sandbox.docker;
    let oom_before = oom_kills(&sandbox.id);
    let workdir = request
        .workdir
        .clone()
        .unwrap_or_else(|| sandbox.workdir.clone());
    let user = request.user.clone().unwrap_or_else(|| sandbox.user.clone());
    let created = docker
        .create_exec(
            &sandbox.id,
            CreateExecOptions {
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                env: Some(
                    request
                        .env
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect(),
                ),
                cmd: Some(request.argv.clone()),
                user: Some(user),
                working_dir: Some(workdir),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| api_error(&sandbox.endpoint, "create_exec", e))?;
    let started = Instant::now();
    let timeout = request.capped_timeout();
    let deadline = tokio::time::Instant::from_std(started + timeout);
    let results = docker
        .start_exec(
            &created.id,
            Some(StartExecOptions {
                detach: false,
                tty: false,
                output_capacity: None,
            }),
        )
        .await
        .map_err(|e| api_error(&sandbox.endpoint, "start_exec", e))?;
    let StartExecResults::Attached { mut output, .. } = results else {
        return Err(SandboxError::InvalidSpec(
            "Docker started the exec detached".into(),
        ));
    };
    let mut stdout = Capped::new(request.output_cap);
    let mut stderr = Capped::new(request.output_cap);
    let mut absorb = |item: LogOutput| match item {
        LogOutput::StdOut { message } | LogOutput::Console { message } => stdout.push(&message),
        LogOutput::StdErr { message } => stderr.push(&message),
        LogOutput::StdIn { .. } => {}
    };
    let mut timed_out = false;
    loop {
        tokio::select! {
            item = output.next() => match item {
                Some(Ok(item)) => absorb(item),
                Some(Err(e)) => {
                    tracing::warn!(sandbox = %sandbox.name, error = %e, "exec output stream failed");
                    break;
                }
                None => break,
            },
            () = tokio::time::sleep_until(deadline) => {
                timed_out = true;
                break;
            }
        }
    }
    if timed_out {
        kill_exec_tree(sandbox, &created.id).await;
        let drain = async {
            while let Some(Ok(item)) = output.next().await {
                absorb(item);
            }
        };
        let _ = tokio::time::timeout(DRAIN_AFTER_KILL, drain).await;
    }
    drop(output);
    let exit_code = exec_exit_code(sandbox, &created.id).await?;
    let duration = started.elapsed();
    let oom_killed = match (oom_before, oom_kills(&sandbox.id)) {
        (Some(before), Some(after)) => after > before,
        // Without the cgroup counter, fall back to the container's own flag.
        _ => exit_code == Some(137) && container_oom_flag(sandbox).await,
    };
    let truncated = stdout.truncated || stderr.truncated;
    if timed_out {
        tracing::info!(sandbox = %sandbox.name, ?duration, "exec killed at its deadline");
    }
    Ok(ExecOutcome {
        exit_code: if timed_out || oom_killed {
            None
        } else {
            exit_code
        },
        stdout: stdout.bytes,
        stderr: stderr.bytes,
        timed_out,
        oom_killed,
        truncated,
        duration,
    })
}

/// The exec's exit code once Docker reports it finished (briefly polled).
async fn exec_exit_code(
    sandbox: &DockerSandbox,
    exec_id: &str,
) -> Result<Option<i64>, SandboxError> {
    for _ in 0..50 {
        let info = sandbox
            .docker
            .inspect_exec(exec_id)
            .await
            .map_err(|e| api_error(&sandbox.endpoint, "inspect_exec", e))?;
        if info.running != Some(true) {
            return Ok(info.exit_code);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(None)
}

/// Kills the exec's whole process tree. Its host pid is visible here when the daemon is local
/// (checked through `/proc/PID/cgroup` naming the container); otherwise the container is killed.
async fn kill_exec_tree(sandbox: &DockerSandbox, exec_id: &str) {
    let pid = match sandbox.docker.inspect_exec(exec_id).await {
        Ok(info) => info.pid.and_then(|p| u32::try_from(p).ok()).unwrap_or(0),
        Err(e) => {
            tracing::warn!(sandbox = %sandbox.name, error = %e, "inspecting a timed-out exec failed");
            0
        }
    };
    if pid > 1 && pid_in_container(pid, &sandbox.id) {
        crate::child::kill_tree(pid);
        return;
    }
    if pid == 0 {
        // Already gone.
        return;
    }
    tracing::warn!(
        sandbox = %sandbox.name,
        "the timed-out exec's processes are not visible from this host; killing the container"
    );
    super::kill_container(&sandbox.docker, &sandbox.id).await;
}

fn pid_in_container(pid: u32, container_id: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .map(|c| c.contains(container_id))
        .unwrap_or(false)
}

/// How many OOM kills the container's memory cgroup has seen (cgroup v1 or v2), if readable.
pub(crate) fn oom_kills(container_id: &str) -> Option<u64> {
    let candidates = [
        format!("/sys/fs/cgroup/memory/docker/{container_id}/memory.oom_control"),
        format!("/sys/fs/cgroup/system.slice/docker-{container_id}.scope/memory.events"),
        format!("/sys/fs/cgroup/docker/{container_id}/memory.events"),
    ];
    candidates.iter().find_map(|path| {
        let text = std::fs::read_to_string(path).ok()?;
        text.lines().find_map(|line| {
            line.strip_prefix("oom_kill ")
                .and_then(|n| n.trim().parse().ok())
        })
    })
}

async fn container_oom_flag(sandbox: &DockerSandbox) -> bool {
    sandbox
        .docker
        .inspect_container(&sandbox.id, None)
        .await
        .ok()
        .and_then(|i| i.state)
        .and_then(|s| s.oom_killed)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::Capped;

    #[test]
    fn capped_keeps_the_first_bytes() {
        let mut c = Capped::new(5);
        c.push(b"abc");
        assert!(!c.truncated);
        c.push(b"defg");
        assert_eq!(c.bytes, b"abcde");
        assert!(c.truncated);
        c.push(b"h");
        assert_eq!(c.bytes, b"abcde");
    }
}
