//! The entry point: run a task's graders in a grading sandbox and combine their results.
//!
//! The grading sandbox holds `/workspace` (pristine task workspace plus the agent's outputs),
//! `/grader/hidden` (held-out files) and a scratch directory. Our helper scripts are copied to
//! `<scratch>/rb`. Every grader runs through [`sandbox::Sandbox::exec`] with the remaining
//! budget as its deadline and capped output; nothing here returns `Err` for an agent's fault.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::checks::CheckSpec;
use crate::checks::forbidden_api::{apply_runtime_forbidden, make_unavailable};
pub use crate::env::GradingContext;
use crate::env::{Env, Fault, Outcome, join, sv};
use crate::report::{GradeReport, GraderResult};
use crate::rubric::{combine, effective_weights};
use crate::snapshot;
pub use crate::snapshot::StagedSnapshot;
use crate::spec::GradingSpec;
use crate::status::Status;

/// SciCode's step runner: the entry `scicode_runner.py` and the modules it imports, one file
/// per job (`python/scicode_*.py`, and `rb_strict.py`, numpy's strict closeness, which the
/// bridge's trusted side imports too), each under the name it is imported by. Shipped into
/// grading containers as part of the harness, and written beside the SciCode importer's own
/// scripts (`tasks`) to derive and check targets exactly as grading splits snippets: one list,
/// from here.
pub const SCICODE_FILES: &[(&str, &str)] = &[
    (
        "scicode_runner.py",
        include_str!("../python/scicode_runner.py"),
    ),
    (
        "scicode_codec.py",
        include_str!("../python/scicode_codec.py"),
    ),
    (
        "scicode_compare.py",
        include_str!("../python/scicode_compare.py"),
    ),
    ("scicode_plan.py", include_str!("../python/scicode_plan.py")),
    (
        "scicode_judge.py",
        include_str!("../python/scicode_judge.py"),
    ),
    (
        "scicode_worker.py",
        include_str!("../python/scicode_worker.py"),
    ),
    (
        "scicode_derive.py",
        include_str!("../python/scicode_derive.py"),
    ),
    (
        "scicode_perturb.py",
        include_str!("../python/scicode_perturb.py"),
    ),
    ("rb_strict.py", include_str!("../python/rb_strict.py")),
];

/// Helper scripts shipped in the crate, staged (root-owned, read-only to others) at
/// `<scratch>/rb` together with the [`SCICODE_FILES`].
const SCRIPTS: &[(&str, &str)] = &[
    ("launch.py", include_str!("../python/launch.py")),
    ("rb_values.py", include_str!("../python/rb_values.py")),
    ("bridge_pair.py", include_str!("../python/bridge_pair.py")),
    (
        "bridge_trusted.py",
        include_str!("../python/bridge_trusted.py"),
    ),
    (
        "bridge_worker.py",
        include_str!("../python/bridge_worker.py"),
    ),
    ("rb_guard.py", include_str!("../python/rb_guard.py")),
    ("forbid_setup.py", include_str!("../python/forbid_setup.py")),
    ("author_run.py", include_str!("../python/author_run.py")),
    ("author_audit.py", include_str!("../python/author_audit.py")),
    ("list_tests.py", include_str!("../python/list_tests.py")),
    (
        "forbidden_scan.py",
        include_str!("../python/forbidden_scan.py"),
    ),
    (
        "unittest_runner.py",
        include_str!("../python/unittest_runner.py"),
    ),
    ("r_launch.sh", include_str!("../r/r_launch.sh")),
    ("rb_bridge.R", include_str!("../r/rb_bridge.R")),
    ("c/rb_check.h", include_str!("../c/rb_check.h")),
    (
        "hook/sitecustomize.py",
        include_str!("../python/hook/sitecustomize.py"),
    ),
];

/// Every file of our harness, each once: the [`SCRIPTS`] and the [`SCICODE_FILES`].
fn harness_files() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    SCRIPTS.iter().chain(SCICODE_FILES)
}

/// Our harness ([`harness_files`]) written to a host folder, to be copied into a grading sandbox
/// together with its other files ([`Harness::copy_in`]; then set
/// [`GradingContext::harness_staged`]).
#[derive(Debug)]
pub struct Harness {
    dir: tempfile::TempDir,
}

impl Harness {
    /// Writes the harness to a fresh host folder: files 0644, folders 0755.
    pub fn write() -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir()?;
        for (rel, text) in harness_files() {
            let p = dir.path().join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)?;
                std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755))?;
            }
            std::fs::write(&p, text)?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))?;
        }
        Ok(Self { dir })
    }

    /// The copy of the harness to `<scratch>/rb`: root-owned, read-only to others (what
    /// staging it inside the sandbox makes of it).
    pub fn copy_in(&self, scratch: &str) -> sandbox::CopyIn {
        sandbox::CopyIn::new(self.dir.path(), join(scratch, "rb"))
            .owned_by(0, 0)
            .with_mode(0o755)
    }
}

/// The graders' trusted probes, each once.
fn probes_of(spec: &GradingSpec) -> Vec<Vec<String>> {
    let mut probes: Vec<Vec<String>> = spec.graders.iter().flat_map(|g| g.check.probes()).collect();
    probes.sort();
    probes.dedup();
    probes
}

/// The modules the spec's graders forbid.
fn forbidden_of(spec: &GradingSpec) -> Vec<String> {
    spec.graders
        .iter()
        .flat_map(|g| g.check.forbidden().iter().cloned())
        .collect()
}

/// What [`prewarm_probes`] did ahead of [`grade`] in one grading sandbox; the caller passes it
/// on through [`GradingContext::forbidden_unavailable`] when grading that same sandbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prewarmed {
    /// The spec's forbidden modules were made unavailable to the agent's uid
    /// (`checks::forbidden_api::make_unavailable`).
    pub forbidden_unavailable: bool,
}

/// Runs the graders' trusted probes in `ctx`'s sandbox ahead of [`grade`], keeping their
/// successes in `ctx.probes`: for a grading sandbox created from the pristine image while the
/// agent still runs (nothing of the agent's in it; the task's files may be arriving), so no grader waits
/// for a probe later. Failures are not kept: [`grade`] asks again. Beside them, the spec's
/// forbidden modules are made unavailable to the agent's uid (it touches only the image's files
/// and a root-owned folder in the scratch; nothing of the agent's is needed or present), so that
/// grading does not pay for it: the answer says whether that succeeded.
pub async fn prewarm_probes(spec: &GradingSpec, ctx: &GradingContext<'_>) -> Prewarmed {
    let env = Env {
        ctx,
        deadline: Instant::now() + ctx.timeout,
        py_env: BTreeMap::new(),
        rb_dir: String::new(),
        forbidden_log: String::new(),
        snap: String::new(),
        probed: ctx.probes.clone(),
        pristine: std::sync::atomic::AtomicBool::new(false),
        evidence: Default::default(),
    };
    let forbidden = forbidden_of(spec);
    let unavailable =
        async { !forbidden.is_empty() && make_unavailable(&env, &forbidden).await.is_ok() };
    let ((), forbidden_unavailable) =
        futures::future::join(env.prewarm(&probes_of(spec)), unavailable).await;
    Prewarmed {
        forbidden_unavailable,
    }
}

/// Grades an agent's outputs. Never fails: infrastructure problems become statuses.
pub async fn grade(spec: &GradingSpec, ctx: &GradingContext<'_>) -> GradeReport {
    let started = Instant::now();
    let forbidden = forbidden_of(spec);
    let rb_dir = join(&ctx.scratch, "rb");
    let forbidden_log = join(&ctx.scratch, "forbidden.log");
    // The environment of Python processes that run agent code. Our launcher starts them with
    // `python3 -I`, which ignores PYTHON* variables: the import path is set by the launcher.
    let mut py_env = BTreeMap::new();
    if !forbidden.is_empty() {
        py_env.insert(
            "RB_FORBIDDEN".into(),
            serde_json::to_string(&forbidden).unwrap_or_else(|_| "[]".into()),
        );
        py_env.insert("RB_AGENT_ROOTS".into(), ctx.workspace.clone());
        py_env.insert("RB_FORBIDDEN_LOG".into(), forbidden_log.clone());
        // The forbidden modules' stand-ins (made before any agent code runs, below): first on
        // an agent process's path, through our launcher or, for the Python processes agent
        // code starts itself, PYTHONPATH (a `python3 -I` of the agent's gets neither, and so
        // no forbidden module and no numpy: its real files are unreadable).
        let shadow = join(&ctx.scratch, "shadow");
        py_env.insert("PYTHONPATH".into(), shadow.clone());
        py_env.insert("RB_SHADOW".into(), shadow);
    }
    py_env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
    py_env.insert("MPLBACKEND".into(), "Agg".into());
    py_env.insert("RB_WORKSPACE".into(), ctx.workspace.clone());
    py_env.insert("RB_HIDDEN".into(), ctx.hidden.clone());
    let env = Env {
        ctx,
        deadline: started + ctx.timeout,
        py_env,
        rb_dir,
        forbidden_log,
        snap: join(&ctx.scratch, "snapshot/ws"),
        probed: ctx.probes.clone(),
        pristine: std::sync::atomic::AtomicBool::new(ctx.snapshot_staged),
        evidence: Default::default(),
    };
    let probes = probes_of(spec);

    // The graders' trusted probes (root, cwd `/`, empty environment: nothing of the agent's is
    // involved) run from the start, beside the snapshot and the graders' own set-up; a grader
    // waits for a probe's answer only before it runs agent code.
    let graded = async {
        let mut flags = Vec::new();
        let staged = match stage_scripts(&env).await {
            // Snapshot first: before any grader runs agent code.
            Ok(()) if ctx.snapshot_staged => Ok(()),
            Ok(()) => match snapshot::take(&env).await {
                Ok(odd) => {
                    if !odd.is_empty() {
                        flags.push(format!(
                            "dropped from the agent's outputs (links, FIFOs, sockets or devices are never followed): {}",
                            odd.iter().take(50).cloned().collect::<Vec<_>>().join(", ")
                        ));
                    }
                    Ok(())
                }
                Err(f) => Err(f),
            },
            Err(e) => Err(Fault::Broken(format!(
                "cannot stage the grader scripts in the sandbox: {e}"
            ))),
        };
        if !forbidden.is_empty() && staged.is_ok() && !ctx.forbidden_unavailable {
            // Before any agent code runs: the forbidden modules become unavailable to it
            // (unless the caller's prewarm did it in this sandbox, before the agent's files came).
            if let Err(e) = make_unavailable(&env, &forbidden).await {
                flags.push(format!(
                    "the forbidden modules could not be made unavailable to the agent's code (only the in-process guard reports their use): {e}"
                ));
            }
        }
        // Re-running the agent's code (reproduce) may rewrite the workspace: those graders go last,
        // so that every other grader sees exactly what the agent submitted; graders that read the
        // others' results (PRBench's judged dimensions) go after all of them. Results keep spec
        // order.
        let mut order: Vec<usize> = (0..spec.graders.len()).collect();
        order.sort_by_key(|&i| {
            let c = &spec.graders[i].check;
            (c.reads_evidence(), c.runs_last())
        });
        let mut slots: Vec<Option<GraderResult>> = vec![None; spec.graders.len()];
        for i in order {
            let g = &spec.graders[i];
            let t0 = Instant::now();
            let outcome = match &staged {
                Err(Fault::Budget) => Outcome::from_fault(Fault::Budget),
                Err(Fault::Broken(e)) => Outcome::from_fault(Fault::Broken(e.clone())),
                Err(Fault::Sandbox(e)) => Outcome::new(Status::EnvBroken, 0.0)
                    .detail(format!("grading sandbox failed: {e}")),
                Ok(()) => g.check.run(&env).await,
            };
            let mut r = GraderResult::outcome(
                &g.name,
                g.check.kind(),
                &g.dimension,
                g.weight,
                outcome.status,
                outcome.score,
            );
            r.tests = outcome.tests;
            r.details = outcome.details;
            r.data = outcome.data;
            r.duration_secs = t0.elapsed().as_secs_f64();
            tracing::info!(
                grader = %g.name,
                status = %r.status,
                score = %r.score.map_or_else(|| "none".to_owned(), |s| s.to_string()),
                "grader finished"
            );
            env.evidence
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(r.clone());
            slots[i] = Some(r);
        }
        let mut results: Vec<GraderResult> = slots.into_iter().flatten().collect();
        if !forbidden.is_empty() && staged.is_ok() {
            apply_runtime_forbidden(&env, spec, &mut results).await;
        }
        for r in &results {
            for prefix in [
                crate::checks::author_script::RAN_AGENT_CODE,
                crate::checks::VERDICT_IN_AGENT_PROCESS,
            ] {
                if let Some(d) = r.details.iter().find(|d| d.starts_with(prefix)) {
                    flags.push(format!("{d} (grader `{}`)", r.name));
                }
            }
            if r.status == Status::TamperingDetected {
                flags.push(format!(
                    "tampering detected by grader `{}`: {}",
                    r.name,
                    r.details.first().map_or("", String::as_str)
                ));
            }
        }
        (results, flags)
    };
    let ((), (results, flags)) = futures::future::join(env.prewarm(&probes), graded).await;
    let weights = effective_weights(spec, ctx.weights_override.as_ref());
    let mut report = combine(results, &weights, spec.pass_threshold);
    report.flags = flags;
    report
}

/// The report of a grading whose budget ran out before any grader could run (the agent's
/// outputs took it all to reach the grading sandbox): every grader `timeout`, score 0, with
/// `why`. The agent's outcome, never an infrastructure failure.
pub fn over_budget(spec: &GradingSpec, ctx: &GradingContext<'_>, why: &str) -> GradeReport {
    let results = spec
        .graders
        .iter()
        .map(|g| {
            let mut r = GraderResult::outcome(
                &g.name,
                g.check.kind(),
                &g.dimension,
                g.weight,
                Status::Timeout,
                0.0,
            );
            r.details = vec![why.to_owned()];
            r
        })
        .collect();
    let weights = effective_weights(spec, ctx.weights_override.as_ref());
    let mut report = combine(results, &weights, spec.pass_threshold);
    report.flags = vec![why.to_owned()];
    report
}

async fn stage_scripts(env: &Env<'_, '_>) -> Result<(), String> {
    if env.ctx.harness_staged {
        return Ok(());
    }
    let tmp = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
    let write = |rel: &str, text: &str| -> Result<(), String> {
        let p = tmp.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{rel}: {e}"))?;
        }
        std::fs::write(&p, text).map_err(|e| format!("{rel}: {e}"))
    };
    for (rel, text) in harness_files() {
        write(rel, text)?;
    }
    env.ctx
        .sandbox
        .copy_in(tmp.path(), &env.rb_dir)
        .await
        .map_err(|e| e.to_string())?;
    // Ours: root-owned, nobody else may change them.
    let out = env
        .exec(
            sv(&[
                "sh",
                "-c",
                "chown -R 0:0 \"$1\" && chmod -R a+rX,go-w \"$1\"",
                "sh",
                &env.rb_dir,
            ]),
            false,
            Some("/"),
            Some(std::time::Duration::from_secs(60)),
            4096,
        )
        .await
        .map_err(|f| f.to_string())?;
    if out.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::{SCICODE_FILES, harness_files};

    /// The names a Python file imports at the top of a line (`import x`, `from x import y`).
    fn imports(text: &str) -> BTreeSet<String> {
        text.lines()
            .filter_map(|l| {
                let l = l.trim_start();
                let rest = l
                    .strip_prefix("import ")
                    .or_else(|| l.strip_prefix("from "))?;
                let name = rest.split([' ', ',', '.']).next()?;
                Some(name.to_owned())
            })
            .collect()
    }

    #[test]
    fn the_harness_ships_each_file_once() {
        let mut seen = BTreeSet::new();
        for (name, _) in harness_files() {
            assert!(seen.insert(*name), "{name} is shipped twice");
        }
    }

    /// A SciCode module left out of [`SCICODE_FILES`] would be missing beside the runner in
    /// grading and in the importer's sandbox: every `python/scicode_*.py` is listed, and every
    /// module of `python/` that a listed file imports is listed too.
    #[test]
    fn the_scicode_files_are_every_scicode_module_and_what_they_import() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("python");
        let listed: BTreeSet<&str> = SCICODE_FILES.iter().map(|(n, _)| *n).collect();
        let ours: BTreeSet<String> = std::fs::read_dir(&dir)
            .expect("python/")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".py"))
            .collect();
        for name in ours.iter().filter(|n| n.starts_with("scicode_")) {
            assert!(
                listed.contains(name.as_str()),
                "{name} is not in SCICODE_FILES"
            );
        }
        for (name, text) in SCICODE_FILES {
            assert_eq!(
                std::fs::read_to_string(dir.join(name)).expect("listed file"),
                *text,
                "{name}"
            );
            for module in imports(text) {
                let file = format!("{module}.py");
                assert!(
                    !ours.contains(&file) || listed.contains(file.as_str()),
                    "{name} imports {module}, which is not in SCICODE_FILES"
                );
            }
        }
        // What the check reads: the runner's own imports.
        let runner = imports(SCICODE_FILES[0].1);
        assert!(runner.contains("scicode_worker"), "{runner:?}");
    }
}
