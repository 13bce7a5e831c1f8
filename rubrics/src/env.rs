//! The execution environment every grader shares: where the graders run ([`GradingContext`]),
//! one grading run's state ([`Env`]), how a step can fail short of a verdict ([`Fault`]), how a
//! file read from the sandbox ends ([`FileRead`]) and a grader's verdict ([`Outcome`]).
//!
//! Used by [`crate::grade`] (the entry point) and by every [`crate::checks`] kind; it imports
//! neither.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandbox::{ExecOutcome, ExecRequest, Sandbox, SandboxError};

use crate::judge::Judge;
use crate::report::{TestResult, cap_text};
use crate::status::Status;

/// Where and with what the graders run.
#[derive(Debug)]
pub struct GradingContext<'a> {
    pub sandbox: &'a dyn Sandbox,
    /// `/workspace`.
    pub workspace: String,
    /// `/grader/hidden`.
    pub hidden: String,
    /// `/grader/work`.
    pub scratch: String,
    /// `None`: judge-based graders report `judge_unavailable`.
    pub judge: Option<&'a Judge>,
    /// Wall-clock budget for all graders together.
    pub timeout: Duration,
    /// Per-run dimension weights (win over the task's and PRBench's defaults).
    pub weights_override: Option<BTreeMap<String, f64>>,
    /// Deadline of one SciCode test snippet (default 60 s).
    pub case_timeout: Duration,
    /// The caller already copied [`crate::grade::Harness`] in (root-owned, read-only to
    /// others, at `<scratch>/rb`) with the rest of the grading container's files; `false`:
    /// [`crate::grade`] stages it itself (one upload and one exec more).
    pub harness_staged: bool,
    /// The caller copied the snapshot in with the workspace ([`crate::grade::StagedSnapshot`],
    /// from the same host folders); `false`: [`crate::grade`] takes it (one exec more).
    pub snapshot_staged: bool,
    /// A root-owned copy of the task's pristine workspace (its inputs), when the caller staged
    /// one: `reproduce` puts these back for its re-run (as the task gave them), the forbidden-API
    /// scan skips the files the agent left unchanged. `None`: every file in the workspace
    /// counts as the agent's.
    pub task_inputs: Option<String>,
    /// Answers of trusted probes; a fresh cache by default, the caller's to share them
    /// between gradings in containers of the same pristine image ([`ImageProbes`]).
    pub probes: ProbeCache,
    /// The caller's [`crate::grade::prewarm_probes`] in this very sandbox made the spec's
    /// forbidden modules unavailable ([`crate::grade::Prewarmed`]); `false`: [`crate::grade`]
    /// does it itself, before any agent code runs.
    pub forbidden_unavailable: bool,
}

impl<'a> GradingContext<'a> {
    /// The standard container layout, no judge, no override.
    pub fn new(sandbox: &'a dyn Sandbox, timeout: Duration) -> Self {
        Self {
            sandbox,
            workspace: "/workspace".into(),
            hidden: "/grader/hidden".into(),
            scratch: "/grader/work".into(),
            judge: None,
            timeout,
            weights_override: None,
            case_timeout: Duration::from_secs(60),
            harness_staged: false,
            snapshot_staged: false,
            task_inputs: None,
            probes: ProbeCache::default(),
            forbidden_unavailable: false,
        }
    }
}

/// Bytes kept of a command's stdout/stderr for the report.
pub(crate) const LOG_CAP: usize = 256 * 1024;
/// Largest test report (JUnit XML, JSON) read back.
pub(crate) const REPORT_CAP: usize = 16 * 1024 * 1024;

/// Why an exec could not produce an outcome.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The sandbox failed (infrastructure).
    Sandbox(SandboxError),
    /// A helper command failed in a way only a broken environment explains.
    Broken(String),
    /// The grading budget ran out before this step.
    Budget,
}

/// What failed, for user text.
impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Sandbox(e) => write!(f, "grading sandbox failed: {e}"),
            Fault::Broken(why) => f.write_str(why),
            Fault::Budget => f.write_str("the grading budget was used up"),
        }
    }
}

/// What reading a file out of the sandbox gave.
#[derive(Debug)]
pub(crate) enum FileRead {
    Missing,
    TooLarge,
    Bytes(Vec<u8>),
}

/// `does not exist`, `is too large to read`, `was read (N bytes)`: follows a file's name in
/// user text.
impl std::fmt::Display for FileRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileRead::Missing => f.write_str("does not exist"),
            FileRead::TooLarge => f.write_str("is too large to read"),
            FileRead::Bytes(b) => write!(f, "was read ({} bytes)", b.len()),
        }
    }
}

/// Shared state of one grading run.
#[derive(Debug)]
pub(crate) struct Env<'c, 'a> {
    pub ctx: &'c GradingContext<'a>,
    pub deadline: Instant,
    /// Environment for Python processes that run agent code (import hook).
    pub py_env: BTreeMap<String, String>,
    pub rb_dir: String,
    pub forbidden_log: String,
    /// Root-only copy of `/workspace` taken before any agent code ran (see
    /// [`crate::snapshot`]): every comparison reads the agent's outputs here.
    pub snap: String,
    /// Answers of trusted probes (from [`GradingContext::probes`]).
    pub probed: ProbeCache,
    /// The live workspace is exactly what the staged snapshot was built from and no code but
    /// ours has run in the sandbox since: the first rebuild from the snapshot only sets the
    /// owner and modes (see [`crate::snapshot::reset_then`]). Cleared by that rebuild and by
    /// any exec as another user than root.
    pub pristine: std::sync::atomic::AtomicBool,
    /// The results of the graders that ran so far, in the order they ran: what a check that
    /// [`crate::checks::Run::reads_evidence`] is shown (every other grader runs before it).
    pub evidence: std::sync::Mutex<Vec<crate::report::GraderResult>>,
}

/// The trusted probes that succeeded (argv). A probe runs as root, cwd `/`, with an empty
/// environment and nothing of the agent's on any path, so its success is a property of the
/// grading image: one cache may serve every grading container of one image (clones share it).
/// A failure is never kept (it may be one container's: killed, out of memory).
#[derive(Debug, Default, Clone)]
pub struct ProbeCache(Arc<std::sync::Mutex<Answers>>);

/// A probe's argv → its answer, once it has one.
type Answers = BTreeMap<Vec<String>, Arc<tokio::sync::OnceCell<bool>>>;

/// One [`ProbeCache`] per grading image (clones share them).
#[derive(Debug, Default, Clone)]
pub struct ImageProbes(Arc<std::sync::Mutex<BTreeMap<String, ProbeCache>>>);

impl ImageProbes {
    /// The cache of the pristine image `image` (an immutable reference: a tag by recipe
    /// hash or an id).
    pub fn for_image(&self, image: &str) -> ProbeCache {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(image.to_owned())
            .or_default()
            .clone()
    }
}

/// A probe run that gave no answer to keep.
enum ProbeMiss {
    /// A failure, or cut short by its deadline (with what it said).
    NotKept(bool),
    Fault(Fault),
}

/// The agent's uid in our images.
pub(crate) const AGENT_USER: &str = "1000:1000";
/// The uid task-author scripts (Harbor verifiers, `command`) run as: neither root nor the
/// agent's.
pub(crate) const AUTHOR_USER: &str = "2000:2000";

impl Env<'_, '_> {
    pub fn ws(&self, rel: &str) -> String {
        join(&self.ctx.workspace, rel)
    }

    pub fn hidden(&self, rel: &str) -> String {
        join(&self.ctx.hidden, rel)
    }

    /// The snapshot copy of an agent file (`rel` relative to `/workspace`).
    pub fn out(&self, rel: &str) -> String {
        join(&self.snap, rel)
    }

    /// The `/workspace` path of a snapshot path (for reports).
    pub fn ws_path_of(&self, path: &str) -> String {
        match path.strip_prefix(&self.snap) {
            Some(rest) if rest.is_empty() || rest.starts_with('/') => self.ws(rest),
            _ => path.to_owned(),
        }
    }

    pub fn scratch(&self, name: &str) -> String {
        join(&self.ctx.scratch, name)
    }

    pub fn remaining(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }

    /// Runs `argv` as root with the remaining budget (or `limit`, if shorter).
    pub async fn exec(
        &self,
        argv: Vec<String>,
        python_env: bool,
        workdir: Option<&str>,
        limit: Option<Duration>,
        output_cap: usize,
    ) -> Result<ExecOutcome, Fault> {
        let env = if python_env {
            self.py_env.clone()
        } else {
            BTreeMap::new()
        };
        self.exec_as("root", argv, env, workdir, limit, output_cap)
            .await
    }

    /// [`Env::exec`] as `user` (e.g. `1000:1000`, the agent's uid) with exactly `env`.
    pub async fn exec_as(
        &self,
        user: &str,
        argv: Vec<String>,
        env: BTreeMap<String, String>,
        workdir: Option<&str>,
        limit: Option<Duration>,
        output_cap: usize,
    ) -> Result<ExecOutcome, Fault> {
        if user != "root" {
            self.pristine
                .store(false, std::sync::atomic::Ordering::SeqCst);
        }
        let left = self.remaining();
        if left < Duration::from_millis(200) {
            return Err(Fault::Budget);
        }
        let mut req = ExecRequest::new(argv);
        req.timeout = limit.map_or(left, |l| l.min(left));
        req.output_cap = output_cap;
        req.workdir = Some(workdir.unwrap_or(&self.ctx.workspace).to_owned());
        req.user = Some(user.to_owned());
        req.env = env;
        self.ctx.sandbox.exec(req).await.map_err(Fault::Sandbox)
    }

    /// Reads at most `cap` bytes of a file as root; larger files are reported, never loaded.
    /// Only for files no agent code could have touched (the snapshot, held-out files, our
    /// reports written as root).
    pub async fn read_file(&self, path: &str, cap: usize) -> Result<FileRead, Fault> {
        self.read_file_as("root", path, cap).await
    }

    /// [`Env::read_file`] of several files in one exec (as root; the same rule: files no agent
    /// code could have touched), each at most `cap` bytes, in order.
    pub async fn read_files(&self, paths: &[String], cap: usize) -> Result<Vec<FileRead>, Fault> {
        let mut argv = sv(&["sh", "-c", READ_ALL, "sh", &cap.to_string()]);
        argv.extend(paths.iter().cloned());
        let out = self
            .exec(
                argv,
                false,
                Some("/"),
                Some(Duration::from_secs(120)),
                paths.len() * (cap + 32) + 64,
            )
            .await?;
        let broken = |why: &str| {
            Fault::Broken(format!(
                "reading {} failed ({why}): {}",
                paths.join(", "),
                cap_text(&String::from_utf8_lossy(&out.stderr), 500)
            ))
        };
        if !out.success() || out.truncated {
            return Err(broken("the reader failed"));
        }
        let mut rest = out.stdout.as_slice();
        let mut reads = Vec::with_capacity(paths.len());
        for _ in paths {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .ok_or_else(|| broken("output cut"))?;
            let head = std::str::from_utf8(&rest[..end]).map_err(|_| broken("bad header"))?;
            rest = &rest[end + 1..];
            reads.push(match head.split_once(' ') {
                None if head == "M" => FileRead::Missing,
                None if head == "L" => FileRead::TooLarge,
                Some(("B", n)) => {
                    let n: usize = n.trim().parse().map_err(|_| broken("bad size"))?;
                    if n > rest.len() {
                        return Err(broken("output cut"));
                    }
                    let (bytes, after) = rest.split_at(n);
                    rest = after;
                    FileRead::Bytes(bytes.to_vec())
                }
                _ => return Err(broken("bad header")),
            });
        }
        Ok(reads)
    }

    /// Whether a trusted probe (root, cwd `/`, empty environment, nothing of the agent's on any
    /// path) succeeds: the evidence that decides between an infrastructure status and the
    /// agent's failure when a tool seems to be missing.
    pub async fn probe(&self, argv: &[&str]) -> Result<bool, Fault> {
        let argv = sv(argv);
        // One run per probe: a caller arriving while it runs (the prewarm and a grader) waits
        // for its answer instead of running it again.
        let cell = self.probed_lock().entry(argv.clone()).or_default().clone();
        let answer = cell
            .get_or_try_init(|| async {
                let out = self
                    .exec_as(
                        "root",
                        argv,
                        BTreeMap::new(),
                        Some("/"),
                        Some(Duration::from_secs(120)),
                        16 * 1024,
                    )
                    .await
                    .map_err(ProbeMiss::Fault)?;
                // Only a success is kept: it is the image's. A probe cut short by the deadline
                // answered nothing, and a failure may be this container's (killed, out of
                // memory): asked again, either runs again.
                if out.success() && !out.timed_out {
                    Ok(true)
                } else {
                    Err(ProbeMiss::NotKept(out.success()))
                }
            })
            .await;
        match answer {
            Ok(&ok) => Ok(ok),
            Err(ProbeMiss::NotKept(ok)) => Ok(ok),
            Err(ProbeMiss::Fault(f)) => Err(f),
        }
    }

    /// Runs the given probes concurrently and keeps their answers (failures to run them are
    /// left for the probe's own call to report).
    pub async fn prewarm(&self, probes: &[Vec<String>]) {
        let runs = probes.iter().map(|argv| async move {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let _ = self.probe(&argv).await;
        });
        futures::future::join_all(runs).await;
    }

    fn probed_lock(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.probed
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Kills every process of `user` (e.g. what agent code left running in the background),
    /// so nothing of the agent's runs while the trusted side reads or prepares.
    pub async fn reap(&self, user: &str) {
        let r = self
            .exec_as(
                user,
                sv(&["sh", "-c", "kill -9 -1 2>/dev/null; exit 0"]),
                BTreeMap::new(),
                Some("/"),
                Some(Duration::from_secs(30)),
                1024,
            )
            .await;
        if let Err(e) = r {
            tracing::warn!(error = ?e, user, "cannot reap leftover processes");
        }
    }

    /// [`Env::read_file`] as `user`: a file written by agent code is read with the agent's
    /// rights, so a link it planted to a held-out file reads nothing.
    pub async fn read_file_as(
        &self,
        user: &str,
        path: &str,
        cap: usize,
    ) -> Result<FileRead, Fault> {
        self.read_file_script(user, READ, path, cap).await
    }

    /// [`Env::reap`] of `user` (not root) and [`Env::read_file_as`] that user in one exec: every
    /// process of the user is killed before the file is read.
    pub async fn reap_then_read_as(
        &self,
        user: &str,
        path: &str,
        cap: usize,
    ) -> Result<FileRead, Fault> {
        debug_assert_ne!(user, "root", "kill -9 -1 as root would end the sandbox");
        self.read_file_script(user, REAP_THEN_READ, path, cap).await
    }

    async fn read_file_script(
        &self,
        user: &str,
        script: &str,
        path: &str,
        cap: usize,
    ) -> Result<FileRead, Fault> {
        let out = self
            .exec_as(
                user,
                sv(&["sh", "-c", script, "sh", path, &(cap + 1).to_string()]),
                BTreeMap::new(),
                Some("/"),
                Some(Duration::from_secs(120)),
                cap + 1,
            )
            .await?;
        if out.exit_code == Some(3) || (user != "root" && out.exit_code == Some(4)) {
            // Not there, or (read with the agent's rights) not readable: the agent's doing.
            return Ok(FileRead::Missing);
        }
        if !out.success() {
            return Err(Fault::Broken(format!(
                "reading {path} failed: {}",
                cap_text(&String::from_utf8_lossy(&out.stderr), 500)
            )));
        }
        if out.stdout.len() > cap || out.truncated {
            return Ok(FileRead::TooLarge);
        }
        Ok(FileRead::Bytes(out.stdout))
    }
}

/// Reads `$1` (at most `$2` bytes): exit 3 when it is no regular file, 4 when unreadable.
const READ: &str = "test -f \"$1\" || exit 3; head -c \"$2\" \"$1\" || exit 4";
/// [`Env::read_files`]: `$1` the cap, then the paths; per path a line `M` (no regular file), `L`
/// (over the cap) or `B SIZE`, then that many bytes.
const READ_ALL: &str = r#"cap="$1"; shift
for f; do
  if [ ! -f "$f" ]; then echo M; continue; fi
  n="$(wc -c < "$f")" || exit 4
  if [ "$n" -gt "$cap" ]; then echo L; continue; fi
  echo "B $n"; cat "$f" || exit 4
done
"#;
/// [`READ`] after killing every other process of the exec's user.
const REAP_THEN_READ: &str =
    "kill -9 -1 2>/dev/null; test -f \"$1\" || exit 3; head -c \"$2\" \"$1\" || exit 4";

/// `base/rel`, tolerating a leading `./` or `/` in `rel`.
pub(crate) fn join(base: &str, rel: &str) -> String {
    let rel = rel.trim_start_matches("./").trim_start_matches('/');
    if rel.is_empty() {
        base.to_owned()
    } else {
        format!("{}/{rel}", base.trim_end_matches('/'))
    }
}

pub(crate) fn sv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The last `n` bytes of a stream, as text.
pub(crate) fn tail(bytes: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let start = s.len().saturating_sub(n);
    let mut i = start;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    s[i..].to_owned()
}

/// How a command ended (`exit 2`, `timed out`, ...) and its stderr tail, for details.
pub(crate) fn exit_note(out: &ExecOutcome) -> String {
    let err = tail(&out.stderr, 2000);
    if err.trim().is_empty() {
        format!("{}; no stderr", out.ended())
    } else {
        format!("{}; stderr tail:\n{err}", out.ended())
    }
}

/// A name unique within this process (per-grader folders).
pub(crate) fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A runner's verdict before it is labelled with the grader's name and weight.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub status: Status,
    pub score: f64,
    pub tests: Vec<TestResult>,
    pub details: Vec<String>,
    pub data: Option<serde_json::Value>,
}

impl Outcome {
    pub fn new(status: Status, score: f64) -> Self {
        Self {
            status,
            score,
            tests: Vec::new(),
            details: Vec::new(),
            data: None,
        }
    }

    pub fn detail(mut self, d: impl Into<String>) -> Self {
        self.details.push(cap_text(&d.into(), 8000));
        self
    }

    /// Score = fraction of passing tests; status pass when all pass.
    pub fn from_tests(tests: Vec<TestResult>) -> Self {
        let total = tests.len();
        let passed = tests.iter().filter(|t| t.status == Status::Pass).count();
        let score = if total == 0 {
            0.0
        } else {
            passed as f64 / total as f64
        };
        let status = if total > 0 && passed == total {
            Status::Pass
        } else {
            Status::Fail
        };
        let mut o = Self::new(status, score);
        o.tests = tests;
        o
    }

    pub fn from_fault(f: Fault) -> Self {
        match f {
            Fault::Sandbox(e) => {
                Self::new(Status::EnvBroken, 0.0).detail(format!("grading sandbox failed: {e}"))
            }
            Fault::Broken(e) => Self::new(Status::EnvBroken, 0.0).detail(e),
            Fault::Budget => Self::new(Status::Timeout, 0.0)
                .detail("the grading budget was used up before this grader could run"),
        }
    }
}

/// `Ok(v)` → `v`; `Err(fault)` → return [`Outcome::from_fault`] from the enclosing grader.
macro_rules! tryf {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(f) => return $crate::env::Outcome::from_fault(f),
        }
    };
}
pub(crate) use tryf;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_paths() {
        assert_eq!(join("/workspace", "a/b.py"), "/workspace/a/b.py");
        assert_eq!(join("/workspace/", "./a"), "/workspace/a");
        assert_eq!(join("/grader/hidden", ""), "/grader/hidden");
    }

    #[test]
    fn outcome_from_tests() {
        let o = Outcome::from_tests(vec![
            TestResult::new("a", Status::Pass),
            TestResult::new("b", Status::Fail),
        ]);
        assert_eq!((o.status, o.score), (Status::Fail, 0.5));
        let o = Outcome::from_tests(vec![]);
        assert_eq!((o.status, o.score), (Status::Fail, 0.0));
    }
}
