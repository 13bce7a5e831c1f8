//! One run of agent code by a test grader, as the agent's uid, in a per-grader folder holding
//! copies of just the held-out files that grader names.
//!
//! Before the run the live workspace is rebuilt from the snapshot and leftover agent processes
//! are killed; after it, they are killed again, so nothing of the agent's runs while the
//! trusted side reads the run's report. Held-out Python tests run through the bridge
//! ([`AgentRun::exec_bridged`]): the tests in a trusted process, the agent's code in a worker.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::checks::canary::{Planted, StaticTests};
use crate::env::{
    AGENT_USER, Env, Fault, FileRead, LOG_CAP, Outcome, REPORT_CAP, exit_note, sv, tail, unique,
};
use crate::snapshot;
use crate::status::Status;

/// Prepares a test run of the agent's code: a fresh per-grader folder under the scratch dir
/// holding copies of just the held-out files this grader names (under `h/`), owned by the
/// agent's uid so the run can write its report there; `/grader/hidden` becomes root-only (0700
/// and below); our staged scripts stay readable; a per-run forbidden-API log (appended to the
/// main log afterwards, as root). Earlier graders' folders under `<scratch>/runs` become
/// root-only first, so one grader's held-out tests are out of reach of agent code run by the
/// next.
///
/// With a framework (`$7`), the same exec then lists the held-out tests at `$8` (a run's copy)
/// with our lister (`python3 -I`, as root), which also writes the canary text `$11` (or its
/// numpy-free variant `$12`, when given and the tests cannot involve numpy): beside the tests
/// (`$9` = `beside`, file name `$10`: into `$8` when it is a folder, else into its folder) or at
/// the absolute path `$10` (`$9` = `at`); it prints the kind (`D` folder, `F` file, `A` at), the
/// canary's path and the listing, one per line. Exit 71: the listing failed; 72: the canary
/// could not be written.
const ISOLATE: &str = r#"set -u
w="$1"; hidden="$2"; scratch="$3"; rb="$4"; runlog="$5"; owner="$6"
fw="$7"; lheld="$8"; where="$9"; lname="${10}"; ltext="${11}"; llite="${12}"; shift 12
runs="$(dirname "$w")"
chown 0:0 "$scratch" && chmod 755 "$scratch" || exit 95
mkdir -p "$runs" && chown 0:0 "$runs" && chmod 755 "$runs" || exit 95
for o in "$runs"/*; do
  if [ -d "$o" ]; then chown -R 0:0 "$o" && chmod 700 "$o" || exit 99; fi
done
rm -rf "$w" && mkdir -p "$w/h" || exit 90
if [ -e "$rb" ]; then chown -R 0:0 "$rb" && chmod -R a+rX,go-w "$rb" || exit 96; fi
for rel in "$@"; do
  if [ -z "$rel" ]; then
    if [ -e "$hidden" ]; then cp -a "$hidden/." "$w/h/" || exit 91; fi
    continue
  fi
  src="$hidden/$rel"; dst="$w/h/$rel"
  if [ ! -e "$src" ]; then echo "held-out file missing: $rel" >&2; exit 97; fi
  mkdir -p "$(dirname "$dst")" && cp -a "$src" "$dst" || exit 91
done
chown -R "$owner" "$w" && chmod 700 "$w" || exit 93
if [ -e "$hidden" ]; then chown -R 0:0 "$hidden" && chmod -R go-rwx "$hidden" || exit 94; fi
if [ -n "$runlog" ]; then : > "$runlog" && chmod 666 "$runlog" || exit 98; fi
if [ -n "$fw" ]; then
  if [ "$where" = at ]; then kind=A; dest="$lname"
  elif [ -d "$lheld" ]; then kind=D; dest="$lheld/$lname"
  else kind=F; dest="$(dirname "$lheld")/$lname"; fi
  list="$(cd / && python3 -I -S -B "$rb/list_tests.py" "$fw" "$lheld" "$dest" "$ltext" "$llite")"
  code=$?
  if [ "$code" = 72 ]; then exit 72; fi
  if [ "$code" != 0 ]; then exit 71; fi
  printf '%s\n%s\n%s' "$kind" "$dest" "$list"
fi
"#;

/// Held-out tests listed, and a canary planted, by [`AgentRun::prepare_listed`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Listing<'a> {
    /// The lister's framework (`pytest`, `unittest`, `testthat`).
    pub framework: &'a str,
    /// Whether the tests run through the bridge ([`AgentRun::exec_bridged`]): the run's
    /// folder is then never the agent uid's.
    pub bridged: bool,
    /// The held-out tests, relative to the held-out folder (as the run's copy is named).
    pub tests: &'a str,
    pub canary: CanaryAt<'a>,
    /// The canary file's text.
    pub text: &'a str,
    /// The same canaries without numpy (an import that costs time), planted instead when the
    /// held-out tests cannot involve numpy (decided by the lister); `None`: always `text`.
    pub lite: Option<&'a str>,
}

/// Where [`Listing`]'s canary goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CanaryAt<'a> {
    /// This file name, beside the copied tests (inside them when they are a folder).
    Beside(&'a str),
    /// This file name in the run's folder.
    InRunDir(&'a str),
}

/// The agent's uid as a number, for the bridge's launcher.
const AGENT_UID: u32 = 1000;

/// How long before the grading budget ends the bridge stops the agent's code, so that the
/// trusted side still writes its report.
const BRIDGE_MARGIN: Duration = Duration::from_secs(3);

/// Appends a run's forbidden-API hits to the main log.
const APPEND_LOG: &str = r#"if [ -f "$1" ]; then head -c 1048576 "$1" >> "$2"; rm -f "$1"; fi"#;

/// One run of untrusted code by a grader (see [`ISOLATE`]): the agent's code as the agent's
/// uid, or a task-author script as [`crate::env::AUTHOR_USER`].
pub(crate) struct AgentRun {
    /// The per-grader folder (readable and writable by the run's uid).
    pub dir: String,
    runlog: String,
    env: BTreeMap<String, String>,
    user: &'static str,
}

impl AgentRun {
    /// A run of the agent's code as the agent's uid.
    pub async fn prepare(env: &Env<'_, '_>, kind: &str, held: &[&str]) -> Result<Self, Outcome> {
        Self::prepare_as(env, kind, held, AGENT_USER).await
    }

    /// A run as `user` (the agent's uid or [`crate::env::AUTHOR_USER`]).
    pub async fn prepare_as(
        env: &Env<'_, '_>,
        kind: &str,
        held: &[&str],
        user: &'static str,
    ) -> Result<Self, Outcome> {
        Self::prepare_inner(env, kind, held, user, user, None)
            .await
            .map(|(run, _)| run)
    }

    /// [`AgentRun::prepare`] for the agent's uid with `listing.tests` copied, which then (in
    /// the same root exec) lists those tests and plants the canary.
    pub async fn prepare_listed(
        env: &Env<'_, '_>,
        kind: &str,
        listing: Listing<'_>,
    ) -> Result<(Self, StaticTests, Planted), Outcome> {
        // The folder stays root's: a bridged run's launcher gives it to the trusted uid, and
        // the agent's uid never reads it.
        let owner = if listing.bridged { "0:0" } else { AGENT_USER };
        let (run, listed) = Self::prepare_inner(
            env,
            kind,
            &[listing.tests],
            AGENT_USER,
            owner,
            Some(listing),
        )
        .await?;
        let (tests, planted) = listed.ok_or_else(|| {
            Outcome::from_fault(Fault::Broken("the held-out tests were not listed".into()))
        })?;
        Ok((run, tests, planted))
    }

    /// [`AgentRun::prepare_listed`] while the trusted probe `probe` answers (the run's folder
    /// is prepared, as root, meanwhile). Evidence for an infrastructure status comes from the
    /// probe, never from what agent code prints: a failing probe is `env_broken`, `missing`
    /// saying what the image lacks.
    pub async fn prepare_listed_after_probe(
        env: &Env<'_, '_>,
        probe: &[&str],
        missing: &str,
        kind: &str,
        listing: Listing<'_>,
    ) -> Result<(Self, StaticTests, Planted), Outcome> {
        let (probed, prepared) =
            futures::future::join(env.probe(probe), Self::prepare_listed(env, kind, listing)).await;
        match probed {
            Err(fault) => Err(Outcome::from_fault(fault)),
            Ok(false) => Err(Outcome::new(Status::EnvBroken, 0.0).detail(missing)),
            Ok(true) => prepared,
        }
    }

    async fn prepare_inner(
        env: &Env<'_, '_>,
        kind: &str,
        held: &[&str],
        user: &'static str,
        owner: &str,
        listing: Option<Listing<'_>>,
    ) -> Result<(Self, Option<(StaticTests, Planted)>), Outcome> {
        let dir = env.scratch(&format!("runs/{kind}-{}", unique()));
        let mut run_env = env.py_env.clone();
        // The held-out folder is out of the run's reach; point at the copies instead.
        run_env.insert("RB_HIDDEN".into(), format!("{dir}/h"));
        run_env.insert("RB_TRUSTED_ROOTS".into(), format!("{dir}/h"));
        let runlog = if run_env.contains_key("RB_FORBIDDEN") {
            let l = format!("{dir}.forbidden.log");
            run_env.insert("RB_FORBIDDEN_LOG".into(), l.clone());
            l
        } else {
            String::new()
        };
        let mut args = sv(&[
            &dir,
            &env.ctx.hidden,
            &env.ctx.scratch,
            &env.rb_dir,
            &runlog,
            owner,
        ]);
        match &listing {
            None => args.extend(["", "", "", "", "", ""].map(String::from)),
            Some(l) => {
                let (place, name) = match l.canary {
                    CanaryAt::Beside(name) => ("beside", name.to_owned()),
                    CanaryAt::InRunDir(name) => ("at", format!("{dir}/{name}")),
                };
                args.extend([
                    l.framework.to_owned(),
                    held_path(&dir, l.tests),
                    place.to_owned(),
                    name,
                    l.text.to_owned(),
                    l.lite.unwrap_or("").to_owned(),
                ]);
            }
        }
        args.extend(held.iter().map(|s| (*s).to_owned()));
        // One exec: leftovers killed, the live workspace rebuilt from the snapshot, the run's
        // folder isolated, then (with a listing) the tests listed and the canary planted.
        let cap = if listing.is_some() {
            4 * 1024 * 1024 + 64 * 1024
        } else {
            64 * 1024
        };
        let out = snapshot::reset_then(env, ISOLATE, &args, Duration::from_secs(600), cap)
            .await
            .and_then(snapshot::reset_outcome)
            .map_err(Outcome::from_fault)?;
        if out.timed_out {
            return Err(Outcome::from_fault(Fault::Budget));
        }
        if out.exit_code == Some(97) {
            return Err(Outcome::new(Status::GraderError, 0.0).detail(format!(
                "a held-out file this grader names is missing (check the task): {}",
                tail(&out.stderr, 500)
            )));
        }
        let broken = |what: String| Outcome::from_fault(Fault::Broken(what));
        match (out.exit_code, &listing) {
            (Some(71), Some(_)) => {
                return Err(broken(format!(
                    "listing the held-out tests failed: {}",
                    exit_note(&out)
                )));
            }
            (Some(72), Some(_)) => {
                return Err(broken(format!(
                    "cannot write the canary for the held-out tests: {}",
                    exit_note(&out)
                )));
            }
            _ if !out.success() => {
                return Err(Outcome::new(Status::EnvBroken, 0.0).detail(format!(
                    "cannot prepare the run as {user}: {}",
                    exit_note(&out)
                )));
            }
            _ => {}
        }
        let listed = match listing {
            None => None,
            Some(_) => Some(StaticTests::parse_listing(&out.stdout).map_err(Outcome::from_fault)?),
        };
        Ok((
            Self {
                dir,
                runlog,
                env: run_env,
                user,
            },
            listed,
        ))
    }

    /// The run's environment variables (`RB_WORKSPACE`, `RB_HIDDEN` pointing at the copies, the
    /// forbidden-API settings).
    pub fn vars(&self) -> BTreeMap<String, String> {
        self.env.clone()
    }

    /// Path of the copy of a held-out file.
    pub fn held(&self, rel: &str) -> String {
        held_path(&self.dir, rel)
    }

    /// Runs held-out Python tests through the bridge (`python/bridge_pair.py`, as root): the
    /// tests run in a trusted process of a uid of its own that never loads the agent's code,
    /// and the agent's modules load in a worker as the agent's uid; only plain data crosses
    /// (`python/bridge_trusted.py`). `mode` is `pytest` or `unittest`. The launcher stops the
    /// agent's code a few seconds before the grading budget ends, so the tests still write
    /// their report: that outcome is `timed_out`. The report (`report`, in the run's folder,
    /// which only the trusted uid and root can reach) comes back in the same exec: the
    /// launcher prints it once the trusted process ended and every agent process is killed,
    /// and appends the run's forbidden-API log to the grading's.
    pub async fn exec_bridged(
        &self,
        env: &Env<'_, '_>,
        mode: &str,
        args: Vec<String>,
        report: &str,
    ) -> Result<(sandbox::ExecOutcome, FileRead), Fault> {
        env.pristine
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let deadline = env
            .remaining()
            .saturating_sub(BRIDGE_MARGIN)
            .max(Duration::from_secs(1));
        let (runlog, log) = if self.runlog.is_empty() {
            (String::new(), String::new())
        } else {
            (self.runlog.clone(), env.forbidden_log.clone())
        };
        let mut argv = vec![
            "python3".to_owned(),
            "-I".into(),
            // The launcher needs only the standard library: no `site` start-up (~50 ms).
            "-S".into(),
            "-B".into(),
            format!("{}/bridge_pair.py", env.rb_dir),
            env.ctx.workspace.clone(),
            self.dir.clone(),
            AGENT_UID.to_string(),
            format!("{:.1}", deadline.as_secs_f64()),
            report.to_owned(),
            REPORT_CAP.to_string(),
            runlog,
            log,
            mode.to_owned(),
        ];
        argv.extend(args);
        // The report on stdout: `R` and at most REPORT_CAP + 1 bytes.
        let mut out = env
            .exec_as(
                "root",
                argv,
                self.env.clone(),
                Some("/"),
                None,
                REPORT_CAP + 2,
            )
            .await?;
        match out.exit_code {
            Some(124) => out.timed_out = true,
            Some(125) => {
                return Err(Fault::Broken(format!(
                    "cannot start the bridged test run: {}",
                    tail(&out.stderr, 500)
                )));
            }
            _ => {}
        }
        let stdout = std::mem::take(&mut out.stdout);
        let read = match stdout.split_first() {
            Some((b'R', rest)) if rest.len() > REPORT_CAP => FileRead::TooLarge,
            Some((b'R', rest)) => FileRead::Bytes(rest.to_vec()),
            _ => FileRead::Missing,
        };
        Ok((out, read))
    }

    /// Runs our own trusted program as root with this run's environment (which the agent-side
    /// processes it starts inherit, e.g. the import hook); it must drop to [`AGENT_USER`] before
    /// running agent code (the SciCode runner does).
    pub async fn exec_trusted(
        &self,
        env: &Env<'_, '_>,
        argv: Vec<String>,
        limit: Option<Duration>,
    ) -> Result<sandbox::ExecOutcome, Fault> {
        // The program runs agent code (as the agent's uid): the next run rebuilds the workspace.
        env.pristine
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let out = env
            .exec_as("root", argv, self.env.clone(), None, limit, LOG_CAP)
            .await;
        env.reap(self.user).await;
        self.collect_log(env).await;
        out
    }

    /// Runs argv with exactly `vars` as the run's uid, in `workdir` (default the workspace).
    pub async fn exec_plain(
        &self,
        env: &Env<'_, '_>,
        argv: Vec<String>,
        vars: BTreeMap<String, String>,
        workdir: Option<&str>,
        limit: Option<Duration>,
    ) -> Result<sandbox::ExecOutcome, Fault> {
        let out = env
            .exec_as(self.user, argv, vars, workdir, limit, LOG_CAP)
            .await;
        env.reap(self.user).await;
        out
    }

    async fn collect_log(&self, env: &Env<'_, '_>) {
        if self.runlog.is_empty() {
            return;
        }
        let argv = sv(&[
            "sh",
            "-c",
            APPEND_LOG,
            "sh",
            &self.runlog,
            &env.forbidden_log,
        ]);
        if let Err(e) = env
            .exec(argv, false, Some("/"), Some(Duration::from_secs(30)), 4096)
            .await
        {
            tracing::warn!(error = ?e, "cannot append the run's forbidden-API log");
        }
    }

    /// Writes `text` to `path` as root (e.g. a canary test into the run's folder), readable by
    /// all.
    pub async fn write_root(env: &Env<'_, '_>, path: &str, text: &str) -> Result<(), Fault> {
        let out = env
            .exec(
                sv(&[
                    "sh",
                    "-c",
                    "printf '%s' \"$2\" > \"$1\" && chmod 644 \"$1\"",
                    "sh",
                    path,
                    text,
                ]),
                false,
                Some("/"),
                Some(Duration::from_secs(30)),
                4096,
            )
            .await?;
        if out.success() {
            Ok(())
        } else {
            Err(Fault::Broken(format!(
                "cannot write {path}: {}",
                exit_note(&out)
            )))
        }
    }
}

/// Path of the copy of the held-out file `rel` in the run folder `dir`.
fn held_path(dir: &str, rel: &str) -> String {
    if rel.is_empty() {
        format!("{dir}/h")
    } else {
        format!("{dir}/h/{}", rel.trim_start_matches('/'))
    }
}

/// The environment of a task-author script: no `PYTHONPATH`, no user site, no plugin autoload,
/// no current-directory entry on a Python's path (`PYTHONSAFEPATH`: `python3 -m pytest` run
/// from the workspace does not import an agent's `pytest.py`), `{hidden}` pointing at the run's
/// copies.
pub(crate) fn author_env(env: &Env<'_, '_>, run: &AgentRun) -> BTreeMap<String, String> {
    [
        ("HOME", run.dir.clone()),
        ("PYTHONNOUSERSITE", "1".into()),
        ("PYTHONSAFEPATH", "1".into()),
        ("PYTHONDONTWRITEBYTECODE", "1".into()),
        ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1".into()),
        ("MPLBACKEND", "Agg".into()),
        ("RB_WORKSPACE", env.ctx.workspace.clone()),
        ("RB_HIDDEN", run.held("")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}
