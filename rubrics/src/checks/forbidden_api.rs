//! `forbidden_api`: ARBench's forbidden modules/attributes (static scan plus the runtime hook).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use std::time::Duration;

use serde_json::json;

use crate::checks::{PathField, Problem, non_empty};
use crate::env::{Env, FileRead, Outcome, exit_note, tryf};
use crate::report::{GraderResult, TestResult};
use crate::spec::GradingSpec;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// ARBench: the agent's code must not use these modules/attribute chains (static scan plus
/// a runtime import hook while the other graders run). A violation is `forbidden_api`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForbiddenApi {
    pub forbidden: Vec<String>,
    /// Agent files named by the task (informational: every file of the agent's is scanned).
    #[serde(default)]
    pub outputs: Vec<String>,
}

impl CheckSpec for ForbiddenApi {
    fn kind(&self) -> &'static str {
        "forbidden_api"
    }
    fn output_paths(&self) -> Vec<PathField<'_>> {
        PathField::all("outputs", &self.outputs).collect()
    }
    fn validate(&self) -> Vec<Problem> {
        non_empty("forbidden", &self.forbidden, "no forbidden modules listed")
            .into_iter()
            .collect()
    }
}

/// The trusted probe this kind's tool needs (see [`Run::probes`]).
const PROBE: &[&str] = &["python3", "-I", "-B", "-c", "import ast, json"];

#[async_trait]
impl Run for ForbiddenApi {
    fn probes(&self) -> Vec<Vec<String>> {
        vec![crate::env::sv(PROBE)]
    }
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        forbidden_static(env, &self.forbidden, &self.outputs).await
    }
    fn forbidden(&self) -> &[String] {
        &self.forbidden
    }
}

async fn forbidden_static(env: &Env<'_, '_>, forbidden: &[String], outputs: &[String]) -> Outcome {
    // Every file of the agent's (the snapshot), not only the listed outputs nor only `*.py`: a
    // helper module that re-exports a forbidden API, a text file the code exec's, a notebook or
    // a shell script running `python3 -c` is code the graded files run (binary files are
    // skipped by the scanner).
    let _ = outputs;
    let files: Vec<String> = {
        let out = tryf!(
            env.exec(
                vec![
                    "find".into(),
                    env.snap.clone(),
                    "-type".into(),
                    "f".into()
                ],
                false,
                Some("/"),
                Some(Duration::from_secs(60)),
                4 * 1024 * 1024
            )
            .await
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .take(5000)
            .map(str::to_owned)
            .collect()
    };
    if files.is_empty() {
        return Outcome::new(Status::Pass, 1.0).detail("no file to scan");
    }
    if !tryf!(env.probe(PROBE).await) {
        return Outcome::new(Status::EnvBroken, 0.0)
            .detail("python3 is not available in the grading image");
    }
    // Root, isolated interpreter, cwd `/`: nothing of the agent's is imported by the scanner.
    let mut argv = vec![
        "python3".into(),
        "-I".into(),
        // The scanner needs only the standard library: no `site` start-up (~50 ms).
        "-S".into(),
        "-B".into(),
        format!("{}/forbidden_scan.py", env.rb_dir),
        serde_json::to_string(forbidden).unwrap_or_else(|_| "[]".into()),
    ];
    if let Some(inputs) = &env.ctx.task_inputs {
        argv.extend(["--inputs".to_owned(), inputs.clone(), env.snap.clone()]);
    }
    argv.extend(files);
    let out = tryf!(
        env.exec(
            argv,
            false,
            Some("/"),
            Some(Duration::from_secs(300)),
            4 * 1024 * 1024
        )
        .await
    );
    let v: serde_json::Value = match serde_json::from_slice(&out.stdout) {
        Ok(v) if out.success() => v,
        // The scanner works (probed) and reads only the agent's files: they broke it.
        _ => {
            return Outcome::new(Status::Error, 0.0).detail(format!(
                "the forbidden-API scan failed on the agent's files: {}",
                exit_note(&out)
            ));
        }
    };
    let mut hits = v["hits"].as_array().cloned().unwrap_or_default();
    for h in &mut hits {
        if let Some(f) = h["file"].as_str() {
            h["file"] = json!(env.ws_path_of(f));
        }
    }
    let mut o = if hits.is_empty() {
        Outcome::new(Status::Pass, 1.0)
    } else {
        let mut o = Outcome::new(Status::ForbiddenApi, 0.0);
        for h in hits.iter().take(50) {
            let at = format!("{}:{}", h["file"].as_str().unwrap_or("?"), h["line"]);
            let what = format!(
                "{} ({}) uses forbidden {}",
                h["name"].as_str().unwrap_or("?"),
                h["how"].as_str().unwrap_or("?"),
                h["forbidden"].as_str().unwrap_or("?")
            );
            o = o.detail(format!("{at}: {what}"));
            // Each use is a failed check, named by where it is.
            o.tests
                .push(TestResult::new(at, Status::ForbiddenApi).with_message(what));
        }
        o
    };
    for u in v["unparsed"].as_array().into_iter().flatten().take(20) {
        o = o.detail(format!(
            "not parsed as a whole (scanned line by line): {} ({})",
            env.ws_path_of(u["file"].as_str().unwrap_or("?")),
            u["error"].as_str().unwrap_or("")
        ));
    }
    o.data = Some(json!({"static_hits": hits}));
    o
}

/// Makes the forbidden modules unavailable to the agent's uid for the rest of the grading
/// (`python/forbid_setup.py`, as root): their real files become `root:`[`FORBIDDEN_READERS_GID`]
/// 0750/0640, and `$RB_SHADOW` gets the stand-ins agent processes import instead. Forbidden
/// callables inside an allowed module are left to the in-process guard. The script goes on the
/// command line, so this needs no staged harness (the prewarm runs it in the empty sandbox).
pub(crate) async fn make_unavailable(env: &Env<'_, '_>, forbidden: &[String]) -> Result<(), String> {
    let shadow = env
        .py_env
        .get("RB_SHADOW")
        .cloned()
        .unwrap_or_else(|| env.scratch("shadow"));
    let argv = vec![
        "python3".to_owned(),
        "-I".into(),
        "-B".into(),
        "-c".into(),
        include_str!("../../python/forbid_setup.py").into(),
        serde_json::to_string(forbidden).unwrap_or_else(|_| "[]".into()),
        shadow,
        FORBIDDEN_READERS_GID.to_string(),
    ];
    let out = env
        .exec(argv, false, Some("/"), Some(Duration::from_secs(60)), 64 * 1024)
        .await
        .map_err(|f| f.to_string())?;
    if !out.success() {
        return Err(exit_note(&out));
    }
    tracing::debug!(setup = %String::from_utf8_lossy(&out.stdout), "forbidden modules made unavailable");
    Ok(())
}

/// The group that keeps reading the forbidden modules' real files besides root: the trusted
/// side of grading (the bridge's trusted test process, `python/bridge_pair.py`'s
/// `TRUSTED_GID`, and the testthat referee are in it). Never the agent's (1000) or the
/// task-author scripts' (2000) group.
pub(crate) const FORBIDDEN_READERS_GID: u32 = 2998;

/// After the other graders ran with the import hook: a runtime hit turns every forbidden-API
/// grader into `forbidden_api`.
pub(crate) async fn apply_runtime_forbidden(
    env: &Env<'_, '_>,
    spec: &GradingSpec,
    results: &mut [GraderResult],
) {
    let Ok(FileRead::Bytes(log)) = env.read_file(&env.forbidden_log, 1024 * 1024).await else {
        return;
    };
    // Each use once (a module imported by every test is logged by each).
    let mut hits: Vec<serde_json::Value> = Vec::new();
    for h in String::from_utf8_lossy(&log)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        if !hits.contains(&h) {
            hits.push(h);
        }
        if hits.len() >= 50 {
            break;
        }
    }
    if hits.is_empty() {
        return;
    }
    for (g, r) in spec.graders.iter().zip(results.iter_mut()) {
        let forbidden = g.check.forbidden();
        {
            let mine: Vec<&serde_json::Value> = hits
                .iter()
                .filter(|h| {
                    forbidden
                        .iter()
                        .any(|f| Some(f.as_str()) == h["forbidden"].as_str())
                })
                .collect();
            if mine.is_empty() {
                continue;
            }
            r.status = Status::ForbiddenApi;
            r.score = Some(0.0);
            for h in &mine {
                let file = h["file"].as_str().unwrap_or("?");
                let what = format!(
                    "{} {} (forbidden: {})",
                    h["how"].as_str().unwrap_or("use of"),
                    h["name"].as_str().unwrap_or("?"),
                    h["forbidden"].as_str().unwrap_or("?")
                );
                r.details.push(format!("runtime: {what} from {file}"));
                r.tests.push(
                    TestResult::new(format!("runtime use in {file}"), Status::ForbiddenApi)
                        .with_message(what),
                );
            }
            let data = r.data.get_or_insert_with(|| json!({}));
            data["runtime_hits"] = json!(mine);
        }
    }
}
