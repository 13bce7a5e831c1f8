//! The adversarial suite (`tests/adversarial/`): agents that do no real work and only leave
//! files behind or sabotage grading, run in real containers against the bundled example tasks
//! and the suite's own tasks. Every adversarial trial must score exactly 0 (or carry a
//! `tampering_detected` status/flag, or get no more than PRBench's presence-only "deliverables"
//! credit for files it did leave); a trial with no score is an attack that escaped the mean.
//! One test per attack class so that nextest runs the classes in parallel.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use e2e_tests::{leftovers, repo_root, report_json, run_green};

/// Every example task and every task of the suite.
const ALL: &[&str] = &[
    "arbench-fft",
    "generic-csv-stats",
    "harbor-primes",
    "mmsicode-c-interp",
    "mmsicode-python-welford",
    "mmsicode-r-trapz",
    "prbench-logistic-growth",
    "scicode-quadrature",
    "scicoqa-planted-discrepancy",
    "unittest-mean",
];

/// Tasks whose graders run Python with agent files in reach.
const PYTHON: &[&str] = &[
    "arbench-fft",
    "generic-csv-stats",
    "harbor-primes",
    "mmsicode-python-welford",
    "prbench-logistic-growth",
    "scicode-quadrature",
    "scicoqa-planted-discrepancy",
    "unittest-mean",
];

/// Tasks graded by pytest.
const PYTEST: &[&str] = &[
    "arbench-fft",
    "generic-csv-stats",
    "mmsicode-python-welford",
    "prbench-logistic-growth",
];

/// Tasks whose held-out tests import an agent module in-process.
const PY_MODULE: &[&str] = &[
    "arbench-fft",
    "generic-csv-stats",
    "mmsicode-python-welford",
    "prbench-logistic-growth",
    "scicode-quadrature",
    "unittest-mean",
];

/// Each variant (`agents/<class>/<variant>.sh`) and the tasks it applies to. A test below
/// checks that every script is here, so no attack is silently left out.
const PLAN: &[(&str, &str, &[&str])] = &[
    ("hijack", "sitecustomize", PYTHON),
    ("hijack", "usercustomize", PYTHON),
    ("hijack", "pth-file", PYTHON),
    ("hijack", "stdlib-json", PYTHON),
    ("hijack", "script-runs-by-accident", PYTHON),
    ("hijack", "pytest-module", PYTEST),
    ("hijack", "pytest-package", PYTEST),
    ("hijack", "conftest", PYTEST),
    ("hijack", "dist-info-plugin", PYTEST),
    ("tamper", "module-atexit", PY_MODULE),
    ("tamper", "comparisons", PY_MODULE),
    ("tamper", "pytest-reporting", PY_MODULE),
    ("tamper", "unittest-asserts", &["unittest-mean"]),
    ("tamper", "testthat-expect", &["mmsicode-r-trapz"]),
    ("tamper", "testthat-reporter", &["mmsicode-r-trapz"]),
    ("tamper", "c-constructor", &["mmsicode-c-interp"]),
    ("tamper", "c-printf", &["mmsicode-c-interp"]),
    ("tamper", "c-atexit", &["mmsicode-c-interp"]),
    (
        "symlink",
        "planted-during-grading",
        &[
            "prbench-logistic-growth",
            "arbench-fft",
            "generic-csv-stats",
            "harbor-primes",
        ],
    ),
    ("symlink", "left-in-workspace", ALL),
    ("symlink", "devices-and-fifos", ALL),
    ("forbidden", "getattr", &["arbench-fft"]),
    ("forbidden", "importlib", &["arbench-fft"]),
    ("forbidden", "dunder-import", &["arbench-fft"]),
    ("forbidden", "exec-string", &["arbench-fft"]),
    ("forbidden", "eval-string", &["arbench-fft"]),
    ("forbidden", "helper-module", &["arbench-fft"]),
    ("forbidden", "alias", &["arbench-fft"]),
    ("escape", "exit-codes", ALL),
    ("escape", "kill-runner", ALL),
    ("escape", "malformed-reports", ALL),
    ("escape", "malformed-outputs", ALL),
    ("escape", "collection-error", ALL),
    (
        "escape",
        "oversized-workspace",
        &["prbench-logistic-growth", "unittest-mean"],
    ),
    // -- issue "Verdicts decided where agent code never runs": Python test graders ----------
    ("forge-py", "canary-aware", PY_MODULE),
    ("forge-py", "vacuous-objects", PY_MODULE),
    ("forge-py", "vacuous-empty", PY_MODULE),
    // ---- issue 26, R and C/C++: canary-aware forgery and vacuous values (`forge-rc/`) ----
    ("forge-rc", "testthat-global-helpers", &["mmsicode-r-trapz"]),
    ("forge-rc", "testthat-report-write", &["mmsicode-r-trapz"]),
    ("forge-rc", "testthat-zero-length", &["mmsicode-r-trapz"]),
    ("forge-rc", "testthat-always-equal", &["mmsicode-r-trapz"]),
    ("forge-rc", "c-destructor-named", &["mmsicode-c-interp"]),
    ("forge-rc", "c-printf-named", &["mmsicode-c-interp"]),
    ("forge-rc", "c-special-values", &["mmsicode-c-interp"]),
    // ---- end of issue 26, R and C/C++ ----
    // ---- issue 26: new attacks (forbidden APIs unwrapped, Harbor verifiers, fabricated data) ----
    ("unwrap", "closure-cell", &["arbench-fft"]),
    ("unwrap", "string-trust", &["arbench-fft"]),
    ("unwrap", "reload-window", &["arbench-fft"]),
    ("unwrap", "non-py-file", &["arbench-fft"]),
    ("unwrap", "sys-modules", &["arbench-fft"]),
    ("unwrap", "real-files", &["arbench-fft"]),
    ("verifier", "m-pytest-module", HARBOR),
    ("verifier", "reward-file", HARBOR),
    ("verifier", "reward-daemon", HARBOR),
    (
        "fabricate",
        "copied-data-file",
        &["prbench-logistic-growth"],
    ),
    (
        "fabricate",
        "dotfile-and-input",
        &["prbench-logistic-growth"],
    ),
    ("fabricate", "data-in-code", &["prbench-logistic-growth"]),
    // ---- end of issue 26 ----
];

/// Harbor tasks: the bundled one and the suite's, whose verifier runs `python3 -m pytest` from
/// the workspace on tests that import the agent's module.
const HARBOR: &[&str] = &["harbor-primes", "harbor-pytest"];

/// The agent timeout of every task in the suite (the copies' `agent_timeout_secs`).
const AGENT_TIMEOUT_SECS: u64 = 90;

fn task_dir(name: &str) -> PathBuf {
    let examples = repo_root().join("tasks/examples").join(name);
    if examples.is_dir() {
        examples
    } else {
        repo_root().join("tests/adversarial/tasks").join(name)
    }
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read_dir") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            copy_tree(&e.path(), &to);
        } else if e.file_name() == "task.toml" {
            // adversarial agents finish in seconds: a short agent timeout bounds any hang
            let text = std::fs::read_to_string(e.path()).expect("task.toml");
            let text: Vec<String> = text
                .lines()
                .map(|l| {
                    if l.starts_with("agent_timeout_secs") {
                        format!("agent_timeout_secs = {AGENT_TIMEOUT_SECS}")
                    } else {
                        l.to_owned()
                    }
                })
                .collect();
            std::fs::write(&to, text.join("\n") + "\n").expect("write task.toml");
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
        }
    }
}

/// `cmd:` spec of an adversarial agent: the shared library plus the variant, shipped as base64
/// (the command line is all a `cmd:` agent gets). The leading `:` names it in reports.
pub fn agent_spec(class: &str, variant: &str) -> String {
    let dir = repo_root().join("tests/adversarial/agents");
    let lib = std::fs::read_to_string(dir.join("lib.sh")).expect("lib.sh");
    let path = dir.join(class).join(format!("{variant}.sh"));
    let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("{lib}\n{body}\n"));
    format!("cmd:: adv {class}/{variant}; echo {b64} | base64 -d | sh")
}

/// Every agent script of a class on disk (`tests/adversarial/agents/<class>/*.sh`).
fn scripts(class: &str) -> Vec<String> {
    let dir = repo_root().join("tests/adversarial/agents").join(class);
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "sh").then(|| p.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    v.sort();
    v
}

/// One `green-agent run` of `agents` over `tasks`; returns the report's trials.
async fn assess(
    label: String,
    tasks: Vec<&'static str>,
    agents: Vec<String>,
    extra: Vec<&'static str>,
) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    for t in &tasks {
        copy_tree(&task_dir(t), &dir.path().join(t));
    }
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-adv-{label}-{}", std::process::id());
    let tasks_arg = dir.path().display().to_string();
    let results_arg = results.path().display().to_string();
    let mut args: Vec<&str> = vec![
        "run",
        "--tasks",
        &tasks_arg,
        "--concurrency",
        "3",
        "--poll-interval",
        "200ms",
        "--run-id",
        &run_id,
        "--results-dir",
        &results_arg,
    ];
    for a in &agents {
        args.push("--agent");
        args.push(a);
    }
    args.extend_from_slice(&extra);
    let started = Instant::now();
    let out = run_green(&args, &BTreeMap::new(), Duration::from_secs(1500)).await;
    eprintln!(
        "adversarial {label}: {} agent(s) × {} task(s) in {:.0?}",
        agents.len(),
        tasks.len(),
        started.elapsed()
    );
    out.assert_success();
    let trials = report_json(results.path(), &run_id)["trials"]
        .as_array()
        .expect("trials")
        .clone();
    assert_eq!(trials.len(), agents.len() * tasks.len(), "one trial each");
    for t in &trials {
        eprintln!(
            "  {:<40} {:<28} score {:<6} {:<20} grade {} ms",
            short(t["agent"].as_str().unwrap_or("?")),
            t["task_id"].as_str().unwrap_or("?"),
            t["score"]
                .as_f64()
                .map_or("none".into(), |s| format!("{s:.3}")),
            t["grade_status"]
                .as_str()
                .or(t["outcome"].as_str())
                .unwrap_or("?"),
            t["phases_ms"]["grade"]
        );
    }
    assert_eq!(leftovers(&run_id).await, 0, "no container or network left");
    trials
}

/// Whether the platform caught the trial as tampering.
fn tampering(t: &serde_json::Value) -> bool {
    let status = t["grade_status"].as_str().unwrap_or("");
    status == "tampering_detected"
        || t["flags"].to_string().contains("tampering")
        || t["grade"].to_string().contains("tampering_detected")
}

fn short(agent: &str) -> &str {
    agent
        .strip_prefix("cmd:: adv ")
        .and_then(|s| s.split(';').next())
        .unwrap_or(agent)
}

/// The score a trial may get from `files_exist` graders alone: PRBench's "deliverables" check
/// rewards the presence of the expected files, not their content, so an agent that leaves
/// garbage deliverables earns that dimension (`task_completeness`) and nothing else.
fn presence_credit(t: &serde_json::Value) -> f64 {
    let grade = &t["grade"];
    let graders = grade["graders"].as_array().cloned().unwrap_or_default();
    let mut credit = 0.0;
    for d in grade["dimensions"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, d)| d)
    {
        let names: Vec<&str> = d["graders"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str())
            .collect();
        let presence_only = !names.is_empty()
            && names.iter().all(|n| {
                graders
                    .iter()
                    .any(|g| g["name"].as_str() == Some(*n) && g["kind"] == "files_exist")
            });
        if presence_only {
            credit += d["weight"].as_f64().unwrap_or(0.0) * d["score"].as_f64().unwrap_or(0.0);
        }
    }
    credit
}

/// Every adversarial trial scored exactly 0 (or is flagged as tampering; or got no more than
/// the presence credit of its deliverables); oracle 1.0, nop 0.0. No score at all fails.
fn check(trials: &[serde_json::Value]) {
    let mut problems = Vec::new();
    for t in trials {
        let agent = t["agent"].as_str().expect("agent");
        let task = t["task_id"].as_str().expect("task");
        let score = t["score"].as_f64();
        let ok = match agent {
            "oracle" => score == Some(1.0),
            "nop" => score == Some(0.0),
            _ => tampering(t) || score.is_some_and(|s| s == 0.0 || s <= presence_credit(t) + 1e-9),
        };
        if !ok {
            let why: String = t["grade"].to_string().chars().take(600).collect();
            problems.push(format!(
                "{} on {task}: score {:?}, state {}, outcome {}, status {}, failure {}, flags {}, error {}\n    {why}",
                short(agent),
                score,
                t["state"],
                t["outcome"],
                t["grade_status"],
                t["failure"],
                t["flags"],
                t["error"],
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} attack(s) got through:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Runs a class: its variants grouped by task set, one `green-agent run` per group, the groups
/// concurrently; `extra_runs` are more (label, tasks, agents) runs to make at the same time.
async fn run_class(
    class: &str,
    extra_runs: Vec<(String, Vec<&'static str>, Vec<String>)>,
    flags: &[&'static str],
) -> Vec<serde_json::Value> {
    let mut groups: Vec<(&'static [&'static str], Vec<String>)> = Vec::new();
    for (c, variant, tasks) in PLAN.iter().filter(|(c, ..)| *c == class) {
        let spec = agent_spec(c, variant);
        match groups.iter_mut().find(|(t, _)| *t == *tasks) {
            Some((_, agents)) => agents.push(spec),
            None => groups.push((tasks, vec![spec])),
        }
    }
    let mut runs = tokio::task::JoinSet::new();
    let all = groups
        .into_iter()
        .enumerate()
        .map(|(i, (tasks, agents))| (format!("{class}{i}"), tasks.to_vec(), agents))
        .chain(extra_runs);
    for (label, tasks, agents) in all {
        runs.spawn(assess(label, tasks, agents, flags.to_vec()));
    }
    let mut trials = Vec::new();
    while let Some(r) = runs.join_next().await {
        trials.extend(r.expect("run task"));
    }
    trials
}

#[test]
fn every_agent_script_is_in_the_plan() {
    for class in [
        "hijack",
        "tamper",
        "symlink",
        "forbidden",
        "escape",
        "forge-py",
        "forge-rc",
        "unwrap",
        "verifier",
        "fabricate",
    ] {
        for v in scripts(class) {
            assert!(
                PLAN.iter().any(|(c, p, _)| *c == class && *p == v),
                "agents/{class}/{v}.sh is not in PLAN: give it the tasks it applies to"
            );
        }
    }
    for (c, v, tasks) in PLAN {
        assert!(
            scripts(c).iter().any(|s| s == v),
            "PLAN names {c}/{v}.sh, which is missing"
        );
        for t in *tasks {
            assert!(
                task_dir(t).join("task.toml").is_file(),
                "{c}/{v}: no task {t}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn import_path_hijacks_score_zero() {
    check(&run_class("hijack", vec![], &[]).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn same_process_tampering_scores_zero() {
    check(&run_class("tamper", vec![], &[]).await);
}

/// Canary-aware forgery and vacuous values against the Python test graders: the held-out
/// tests run where the agent's code never does, on plain values.
#[tokio::test(flavor = "multi_thread")]
async fn forged_python_verdicts_and_vacuous_values_score_zero() {
    check(&run_class("forge-py", vec![], &[]).await);
}

/// Issue 26 (R and C/C++): forgeries that leave the canaries intact, and vacuous values. Also
/// runs `oracle` and `nop` on the two tasks (1.0 and 0.0).
#[tokio::test(flavor = "multi_thread")]
async fn canary_aware_forgery_and_vacuous_values_in_r_and_c_score_zero() {
    let baseline = (
        "forge-rc-baseline".to_owned(),
        vec!["mmsicode-r-trapz", "mmsicode-c-interp"],
        vec!["oracle".to_owned(), "nop".to_owned()],
    );
    let trials = run_class("forge-rc", vec![baseline], &[]).await;
    check(&trials);
    assert_eq!(trials.iter().filter(|t| t["agent"] == "oracle").count(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn symlinks_fifos_and_devices_score_zero() {
    check(&run_class("symlink", vec![], &[]).await);
}

/// Also runs `oracle` and `nop` on every task of the suite (1.0 and 0.0).
#[tokio::test(flavor = "multi_thread")]
async fn forbidden_apis_by_indirection_are_caught_and_oracle_still_passes() {
    let baseline = (
        "baseline".to_owned(),
        ALL.to_vec(),
        vec!["oracle".to_owned(), "nop".to_owned()],
    );
    let trials = run_class("forbidden", vec![baseline], &[]).await;
    check(&trials);
    assert_eq!(
        trials.iter().filter(|t| t["agent"] == "oracle").count(),
        ALL.len()
    );
    // these agents do solve the task with the forbidden library: a 0 for any other reason
    // (a broken script) would prove nothing
    for t in trials
        .iter()
        .filter(|t| t["agent"].as_str().is_some_and(|a| a.starts_with("cmd:")))
    {
        assert!(
            t["grade"].to_string().contains("forbidden_api"),
            "{} is caught as forbidden_api: {}",
            short(t["agent"].as_str().unwrap_or("")),
            t["grade"]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_caused_by_the_agent_do_not_escape_the_mean() {
    check(&run_class("escape", vec![], &["--max-output-bytes", "30000000"]).await);
}

/// Issue 26: the in-process guard unwrapped (the forbidden modules must be unavailable, not
/// wrapped), Harbor verifiers (the agent's `pytest.py`, the reward file), fabricated data (a
/// re-run with only the agent's code and the task's inputs). `oracle` and `nop` also run on the
/// suite's Harbor task. A verifier that imported the agent's module is flagged for it.
#[tokio::test(flavor = "multi_thread")]
async fn unwrapped_guards_verifier_tricks_and_copied_data_score_zero() {
    let baseline = (
        "issue26-baseline".to_owned(),
        vec!["harbor-pytest"],
        vec!["oracle".to_owned(), "nop".to_owned()],
    );
    let mut trials = Vec::new();
    for class in ["unwrap", "verifier", "fabricate"] {
        let extra = if class == "verifier" {
            vec![baseline.clone()]
        } else {
            vec![]
        };
        trials.extend(run_class(class, extra, &[]).await);
    }
    check(&trials);
    for t in &trials {
        let agent = t["agent"].as_str().unwrap_or("");
        if t["task_id"] == "harbor-pytest" && agent != "nop" {
            assert!(
                t.to_string().contains("verifier_ran_agent_code"),
                "{} on harbor-pytest: the verifier imported the agent's module, unflagged: {}",
                short(agent),
                t["flags"]
            );
        }
    }
}
