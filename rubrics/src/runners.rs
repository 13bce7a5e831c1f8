//! One function per [`Check`]: build the commands, run them in the grading sandbox, turn their
//! output into an [`Outcome`].

use std::time::Duration;

use serde_json::json;

use crate::csv_compare::{self, CsvError, CsvRules, MAX_CSV_BYTES};
use crate::grade::{Env, Fault, FileRead, Outcome, sv};
use crate::judge::{self, AgentFile, JudgeRequest};
use crate::junit;
use crate::paperbench::{CategoryFilter, Node, aggregate_with};
use crate::report::{GraderResult, TestResult, cap_text};
use crate::spec::{Check, GradingSpec};
use crate::status::Status;

const LOG_CAP: usize = 256 * 1024;
const REPORT_CAP: usize = 16 * 1024 * 1024;

macro_rules! tryf {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(f) => return Outcome::from_fault(f),
        }
    };
}

fn tail(bytes: &[u8], n: usize) -> String {
    let s = String::from_utf8_lossy(bytes);
    let start = s.len().saturating_sub(n);
    let mut i = start;
    while !s.is_char_boundary(i) {
        i += 1;
    }
    s[i..].to_owned()
}

fn exit_note(out: &sandbox::ExecOutcome) -> String {
    format!(
        "exit {:?}{}{}; stderr tail:\n{}",
        out.exit_code,
        if out.timed_out { ", timed out" } else { "" },
        if out.oom_killed { ", OOM-killed" } else { "" },
        tail(&out.stderr, 2000)
    )
}

fn python_missing(out: &sandbox::ExecOutcome, module: &str) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    out.exit_code == Some(127)
        || err.contains(&format!("No module named {module}"))
        || err.contains("python3: not found")
}

/// Runs one check.
pub(crate) async fn run(env: &Env<'_, '_>, check: &Check) -> Outcome {
    match check {
        Check::Pytest { hidden_tests, args } => pytest(env, hidden_tests, args).await,
        Check::Unittest { hidden_tests } => unittest(env, hidden_tests).await,
        Check::Testthat { hidden_tests } => testthat(env, hidden_tests).await,
        Check::CTest {
            compiler,
            workspace_sources,
            hidden_sources,
            flags,
        } => c_test(env, compiler, workspace_sources, hidden_sources, flags).await,
        Check::Command { argv } => command(env, argv).await,
        Check::HarborVerifier { hidden_script } => harbor(env, hidden_script).await,
        Check::ScicodeSteps {
            hidden_cases,
            output,
        } => scicode(env, hidden_cases, output).await,
        Check::Csv {
            output,
            hidden_expected,
            x_column,
            rtol,
            atol,
            column_tolerances,
            nan_policy,
        } => {
            let mut rules = CsvRules {
                x_column: x_column.clone(),
                column_tolerances: column_tolerances.clone(),
                nan_policy: *nan_policy,
                ..CsvRules::default()
            };
            if let Some(r) = rtol {
                rules.rtol = *r;
            }
            if let Some(a) = atol {
                rules.atol = *a;
            }
            csv(env, output, hidden_expected, &rules).await
        }
        Check::Reproduce {
            argv,
            outputs,
            rtol,
            atol,
        } => {
            let mut rules = CsvRules::default();
            if let Some(r) = rtol {
                rules.rtol = *r;
            }
            if let Some(a) = atol {
                rules.atol = *a;
            }
            reproduce(env, argv, outputs, &rules).await
        }
        Check::FilesExist { outputs } => files_exist(env, outputs).await,
        Check::ForbiddenApi { forbidden, outputs } => {
            forbidden_static(env, forbidden, outputs).await
        }
        Check::PaperbenchTree {
            hidden_rubric,
            categories,
        } => paperbench_tree(env, hidden_rubric, categories).await,
        Check::Discrepancy {
            output,
            hidden_reference,
        } => discrepancy(env, output, hidden_reference).await,
        Check::Judge {
            hidden_criteria,
            outputs,
        } => criteria(env, hidden_criteria, outputs).await,
    }
}

async fn pytest(env: &Env<'_, '_>, tests: &str, args: &[String]) -> Outcome {
    let run = match AgentRun::prepare(env, "pytest", &[tests]).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let xml = format!("{}/junit.xml", run.dir);
    let mut argv = sv(&[
        "python3",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "--junitxml",
        &xml,
        &run.held(tests),
    ]);
    argv.extend(args.iter().cloned());
    let out = tryf!(run.exec(env, argv, None).await);
    junit_outcome(env, &out, &xml, "pytest").await
}

async fn junit_outcome(
    env: &Env<'_, '_>,
    out: &sandbox::ExecOutcome,
    xml: &str,
    module: &str,
) -> Outcome {
    let report = tryf!(env.read_file(xml, REPORT_CAP).await);
    let parsed = match report {
        FileRead::Bytes(b) => junit::parse(&String::from_utf8_lossy(&b)).ok(),
        _ => None,
    };
    match parsed {
        Some(tests) => {
            let mut o = Outcome::from_tests(tests);
            if out.timed_out {
                o.status = Status::Timeout;
                o = o.detail("the test run hit its deadline; results are partial");
            }
            o
        }
        None if out.timed_out => Outcome::new(Status::Timeout, 0.0).detail(exit_note(out)),
        None if python_missing(out, module)
            || (module == "testthat" && out.exit_code == Some(127)) =>
        {
            Outcome::new(Status::EnvBroken, 0.0).detail(format!(
                "{module} is not available in the grading image: {}",
                exit_note(out)
            ))
        }
        None if module == "pytest" && matches!(out.exit_code, Some(4 | 5)) => {
            Outcome::new(Status::GraderError, 0.0).detail(format!(
                "pytest found no runnable held-out tests (check the task): {}",
                exit_note(out)
            ))
        }
        None => Outcome::new(Status::Error, 0.0).detail(format!(
            "the test run produced no report: {}",
            exit_note(out)
        )),
    }
}

async fn unittest(env: &Env<'_, '_>, tests: &str) -> Outcome {
    let run = match AgentRun::prepare(env, "unittest", &[tests]).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let result = format!("{}/unittest.json", run.dir);
    let argv = vec![
        "python3".into(),
        format!("{}/unittest_runner.py", env.rb_dir),
        run.held(tests),
        result.clone(),
    ];
    let out = tryf!(run.exec(env, argv, None).await);
    let read = tryf!(env.read_file(&result, REPORT_CAP).await);
    let FileRead::Bytes(bytes) = read else {
        return if out.timed_out {
            Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out))
        } else if python_missing(&out, "unittest") {
            Outcome::new(Status::EnvBroken, 0.0).detail(exit_note(&out))
        } else {
            Outcome::new(Status::Error, 0.0).detail(format!(
                "the test run produced no report: {}",
                exit_note(&out)
            ))
        };
    };
    let v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return Outcome::new(Status::Error, 0.0)
                .detail(format!("unreadable unittest report: {e}"));
        }
    };
    if let Some(err) = v["load_error"].as_str() {
        return Outcome::new(Status::Error, 0.0)
            .detail(format!("loading the tests failed:\n{err}"));
    }
    let tests: Vec<TestResult> = v["tests"]
        .as_array()
        .map(|a| a.iter().map(row_to_test).collect())
        .unwrap_or_default();
    if tests.is_empty() {
        return Outcome::new(Status::GraderError, 0.0)
            .detail("no held-out unittest test was found (check the task)");
    }
    Outcome::from_tests(tests)
}

fn row_to_test(r: &serde_json::Value) -> TestResult {
    let status = match r["status"].as_str() {
        Some("pass") => Status::Pass,
        Some("fail") => Status::Fail,
        Some("timeout") => Status::Timeout,
        _ => Status::Error,
    };
    let mut t = TestResult::new(r["name"].as_str().unwrap_or("?"), status);
    if let Some(m) = r["message"].as_str() {
        t = t.with_message(m);
    }
    t.duration_secs = r["duration_secs"].as_f64();
    t
}

async fn testthat(env: &Env<'_, '_>, tests: &str) -> Outcome {
    let run = match AgentRun::prepare(env, "testthat", &[tests]).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let tsv = format!("{}/testthat.tsv", run.dir);
    let argv = vec![
        "Rscript".into(),
        format!("{}/testthat_runner.R", env.rb_dir),
        run.held(tests),
        tsv.clone(),
    ];
    let out = tryf!(run.exec(env, argv, None).await);
    let err = String::from_utf8_lossy(&out.stderr);
    if out.exit_code == Some(127)
        || (err.contains("there is no package called") && err.contains("testthat"))
    {
        return Outcome::new(Status::EnvBroken, 0.0).detail(format!(
            "R/testthat is not available in the grading image: {}",
            exit_note(&out)
        ));
    }
    match tryf!(env.read_file(&tsv, REPORT_CAP).await) {
        FileRead::Bytes(b) => match parse_testthat_tsv(&String::from_utf8_lossy(&b)) {
            Some(tests) if !tests.is_empty() => {
                let mut o = Outcome::from_tests(tests);
                if out.timed_out {
                    o.status = Status::Timeout;
                }
                o
            }
            _ => Outcome::new(Status::GraderError, 0.0).detail(format!(
                "testthat ran no held-out test (check the task): {}",
                exit_note(&out)
            )),
        },
        _ if out.timed_out => Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out)),
        _ => Outcome::new(Status::Error, 0.0).detail(format!(
            "the R test run produced no report: {}",
            exit_note(&out)
        )),
    }
}

/// Parses our testthat runner's TSV (`name failed error skipped passed`).
pub(crate) fn parse_testthat_tsv(tsv: &str) -> Option<Vec<TestResult>> {
    let mut lines = tsv.lines();
    let header: Vec<&str> = lines.next()?.split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n);
    let (name, failed, error, skipped) =
        (col("name")?, col("failed")?, col("error")?, col("skipped")?);
    let mut out = Vec::new();
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = l.split('\t').collect();
        let num = |i: usize| {
            f.get(i)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let t = TestResult::new(f.get(name).copied().unwrap_or("?"), Status::Pass);
        out.push(if num(error) > 0.0 {
            TestResult {
                status: Status::Error,
                ..t
            }
            .with_message("the test raised an error")
        } else if num(failed) > 0.0 {
            TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message(format!("{} expectation(s) failed", num(failed)))
        } else if num(skipped) > 0.0 {
            TestResult {
                status: Status::Fail,
                ..t
            }
            .with_message("skipped (or no expectation)")
        } else {
            t
        });
    }
    Some(out)
}

/// Parses the last `Results: x/y passed` line.
pub(crate) fn parse_results_line(stdout: &str) -> Option<(u64, u64)> {
    stdout.lines().rev().find_map(|l| {
        let rest = l.trim().strip_prefix("Results:")?.trim();
        let (frac, _) = rest.split_once(' ').unwrap_or((rest, ""));
        let (x, y) = frac.split_once('/')?;
        let (x, y) = (x.trim().parse().ok()?, y.trim().parse().ok()?);
        (y > 0 && x <= y).then_some((x, y))
    })
}

async fn c_test(
    env: &Env<'_, '_>,
    compiler: &str,
    ws: &[String],
    hidden: &[String],
    flags: &[String],
) -> Outcome {
    if !matches!(compiler, "gcc" | "g++" | "cc" | "c++" | "clang" | "clang++") {
        return Outcome::new(Status::GraderError, 0.0)
            .detail(format!("unsupported compiler {compiler:?}"));
    }
    let held: Vec<&str> = hidden.iter().map(String::as_str).collect();
    let run = match AgentRun::prepare(env, "ctest", &held).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let bin = format!("{}/driver", run.dir);
    let mut argv = vec![compiler.to_owned(), "-O1".into(), "-o".into(), bin.clone()];
    argv.extend(ws.iter().map(|s| env.ws(s)));
    argv.extend(hidden.iter().map(|s| run.held(s)));
    argv.extend(flags.iter().cloned());
    argv.push("-lm".into());
    // The agent's sources are compiled as its uid too: an `#include` of a held-out path fails.
    let out = tryf!(
        run.exec_plain(env, argv, Some(Duration::from_secs(300)))
            .await
    );
    let mut compile = TestResult::new("compile", Status::CompileOk);
    if !out.success() {
        if out.exit_code == Some(127)
            || String::from_utf8_lossy(&out.stderr).contains("not found")
                && out.stdout.is_empty()
                && String::from_utf8_lossy(&out.stderr).contains(compiler)
                && !String::from_utf8_lossy(&out.stderr).contains("error:")
        {
            return Outcome::new(Status::EnvBroken, 0.0).detail(format!(
                "compiler {compiler} is not available: {}",
                exit_note(&out)
            ));
        }
        let status = if out.timed_out {
            Status::Timeout
        } else {
            Status::CompileFail
        };
        compile.status = status;
        let mut o =
            Outcome::new(status, 0.0).detail(format!("compilation failed: {}", exit_note(&out)));
        o.tests.push(compile.with_message(tail(&out.stderr, 3000)));
        return o;
    }
    let run = tryf!(run.exec_plain(env, vec![bin], None).await);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut o = match parse_results_line(&stdout) {
        Some((x, y)) => {
            let mut o = Outcome::new(
                if x == y { Status::Pass } else { Status::Fail },
                x as f64 / y as f64,
            );
            let mut t = TestResult::new("results", o.status);
            t = t.with_message(format!("Results: {x}/{y} passed"));
            o.tests.push(t);
            if run.timed_out {
                o.status = Status::Timeout;
            }
            o
        }
        None if run.timed_out => Outcome::new(Status::Timeout, 0.0).detail(exit_note(&run)),
        None => Outcome::new(Status::Error, 0.0).detail(format!(
            "the test driver printed no `Results: x/y passed` line: {}",
            exit_note(&run)
        )),
    };
    o.tests.insert(0, compile);
    o
}

/// Runs the task's own grader command as root with `/grader/hidden` readable: it is task-author
/// code that inspects the agent's files (e.g. `python3 {hidden}/check.py`), not the agent's
/// code, and it may legitimately read held-out files. A task whose command executes the
/// agent's code gives that code the same access: prefer a test grader for that.
async fn command(env: &Env<'_, '_>, argv: &[String]) -> Outcome {
    if argv.is_empty() {
        return Outcome::new(Status::GraderError, 0.0).detail("empty command");
    }
    let argv: Vec<String> = argv
        .iter()
        .map(|a| {
            a.replace("{hidden}", &env.ctx.hidden)
                .replace("{workspace}", &env.ctx.workspace)
        })
        .collect();
    let out = tryf!(env.exec(argv, true, None, None, LOG_CAP).await);
    if out.success() {
        Outcome::new(Status::Pass, 1.0)
    } else if out.timed_out {
        Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out))
    } else {
        Outcome::new(Status::Fail, 0.0).detail(exit_note(&out))
    }
}

/// Runs a Harbor verifier script as root with `/grader/hidden` readable, as Harbor does: the
/// script is task-author code that may read the whole held-out folder and write
/// `/logs/verifier`. NOT isolated: agent code the script executes runs as root too.
async fn harbor(env: &Env<'_, '_>, script: &str) -> Outcome {
    let prep = tryf!(env.exec(sv(&["sh", "-c", "mkdir -p /logs/verifier && rm -f /logs/verifier/reward.txt /logs/verifier/reward.json"]), false, Some("/"), None, 4096).await);
    if !prep.success() {
        return Outcome::new(Status::EnvBroken, 0.0).detail(format!(
            "cannot prepare /logs/verifier: {}",
            exit_note(&prep)
        ));
    }
    let out = tryf!(
        env.exec(
            vec!["bash".into(), env.hidden(script)],
            true,
            None,
            None,
            LOG_CAP
        )
        .await
    );
    let txt = tryf!(env.read_file("/logs/verifier/reward.txt", 4096).await);
    if let FileRead::Bytes(b) = txt {
        let s = String::from_utf8_lossy(&b);
        return match s.trim().parse::<f64>() {
            Ok(r) if r.is_finite() => reward(r, &out),
            _ => Outcome::new(Status::GraderError, 0.0).detail(format!(
                "reward.txt is not a number: {:?}",
                cap_text(&s, 200)
            )),
        };
    }
    let js = tryf!(env.read_file("/logs/verifier/reward.json", 65536).await);
    if let FileRead::Bytes(b) = js {
        let v: Option<serde_json::Value> = serde_json::from_slice(&b).ok();
        let r = v.as_ref().and_then(|v| {
            v.as_f64()
                .or_else(|| v.get("reward").and_then(serde_json::Value::as_f64))
                .or_else(|| {
                    let nums: Vec<f64> = v
                        .as_object()?
                        .values()
                        .filter_map(serde_json::Value::as_f64)
                        .collect();
                    (!nums.is_empty()).then(|| nums.iter().sum::<f64>() / nums.len() as f64)
                })
        });
        return match r {
            Some(r) if r.is_finite() => {
                let mut o = reward(r, &out);
                o.data = v;
                o
            }
            _ => {
                Outcome::new(Status::GraderError, 0.0).detail("reward.json holds no numeric reward")
            }
        };
    }
    if out.timed_out {
        return Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out));
    }
    Outcome::new(Status::GraderError, 0.0).detail(format!(
        "the verifier wrote no reward.txt or reward.json: {}",
        exit_note(&out)
    ))
}

fn reward(r: f64, out: &sandbox::ExecOutcome) -> Outcome {
    let r = r.clamp(0.0, 1.0);
    let mut o = Outcome::new(if r >= 1.0 { Status::Pass } else { Status::Fail }, r);
    if !out.success() {
        o = o.detail(format!("verifier script: {}", exit_note(out)));
    }
    o
}

async fn scicode(env: &Env<'_, '_>, cases: &str, output: &str) -> Outcome {
    let run = match AgentRun::prepare(env, "scicode", &[cases]).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let result = format!("{}/scicode.json", run.dir);
    let argv = vec![
        "python3".into(),
        format!("{}/scicode_runner.py", env.rb_dir),
        run.held(cases),
        env.ws(output),
        result.clone(),
        env.ctx.case_timeout.as_secs().max(1).to_string(),
    ];
    let out = tryf!(run.exec(env, argv, None).await);
    let read = tryf!(env.read_file(&result, REPORT_CAP).await);
    let FileRead::Bytes(bytes) = read else {
        if out.timed_out {
            return Outcome::new(Status::Timeout, 0.0).detail(exit_note(&out));
        }
        if python_missing(&out, "numpy") {
            return Outcome::new(Status::EnvBroken, 0.0).detail(exit_note(&out));
        }
        return Outcome::new(Status::GraderError, 0.0).detail(format!(
            "the SciCode runner wrote no result: {}",
            exit_note(&out)
        ));
    };
    let v: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return Outcome::new(Status::GraderError, 0.0)
                .detail(format!("unreadable SciCode result: {e}"));
        }
    };
    let steps: Vec<TestResult> = v["steps"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    let mut t = row_to_test(&json!({"name": format!("step {}", s["step_id"].as_str().unwrap_or("?")), "status": s["status"], "message": s["message"]}));
                    let bad = s["cases"].as_array().and_then(|c| c.iter().find(|c| c["status"] != "pass"));
                    if let (None, Some(bad)) = (&t.message, bad) {
                        t = t.with_message(format!("case {}: {}", bad["case"], bad["message"].as_str().unwrap_or("")));
                    }
                    t
                })
                .collect()
        })
        .unwrap_or_default();
    if steps.is_empty() {
        return Outcome::new(Status::GraderError, 0.0)
            .detail("the held-out SciCode cases hold no step");
    }
    let mut o = Outcome::from_tests(steps);
    let solved = o.status == Status::Pass;
    o.data = Some(json!({"main_problem_solved": solved, "steps": v["steps"]}));
    if !solved && o.tests.iter().all(|t| t.status == Status::Timeout) {
        o.status = Status::Timeout;
    }
    o
}

async fn csv(env: &Env<'_, '_>, output: &str, expected: &str, rules: &CsvRules) -> Outcome {
    let exp = match tryf!(env.read_file(&env.hidden(expected), MAX_CSV_BYTES).await) {
        FileRead::Bytes(b) => b,
        other => {
            return Outcome::new(Status::GraderError, 0.0)
                .detail(format!("held-out expected data {expected}: {other:?}"));
        }
    };
    let exp = match csv_compare::parse(&exp) {
        Ok(t) => t,
        Err(e) => {
            return Outcome::new(Status::GraderError, 0.0).detail(format!(
                "held-out expected data {expected} is unusable: {e}"
            ));
        }
    };
    let act = match tryf!(env.read_file(&env.ws(output), MAX_CSV_BYTES).await) {
        FileRead::Bytes(b) => b,
        FileRead::Missing => {
            return Outcome::new(Status::ExtractFailed, 0.0)
                .detail(format!("the agent's output {output} does not exist"));
        }
        FileRead::TooLarge => {
            return Outcome::new(Status::ExtractFailed, 0.0).detail(format!(
                "the agent's output {output} is larger than {MAX_CSV_BYTES} bytes; not read"
            ));
        }
    };
    let act = match csv_compare::parse(&act) {
        Ok(t) => t,
        Err(e) => {
            return Outcome::new(Status::ExtractFailed, 0.0)
                .detail(format!("the agent's output {output}: {e}"));
        }
    };
    match csv_compare::compare(&exp, &act, rules) {
        Ok(rep) => {
            let status = if rep.score >= 1.0 {
                Status::Pass
            } else {
                Status::Fail
            };
            let mut o = Outcome::new(status, rep.score);
            o.tests = rep
                .columns
                .iter()
                .map(|c| {
                    let st = if c.present && c.matched == c.compared {
                        Status::Pass
                    } else {
                        Status::Fail
                    };
                    let msg = if c.present {
                        format!(
                            "{}/{} values match; max abs err {:?}, max rel err {:?}",
                            c.matched, c.compared, c.max_abs_err, c.max_rel_err
                        )
                    } else {
                        "column missing".into()
                    };
                    TestResult::new(format!("column {}", c.name), st).with_message(msg)
                })
                .collect();
            o.details = rep.describe();
            o.data = serde_json::to_value(&rep).ok();
            o
        }
        Err(e @ CsvError::MissingX(..))
            if !exp.headers.iter().any(|h| {
                rules.x_column.as_deref().is_some_and(|x| {
                    csv_compare::normalise_header(h) == csv_compare::normalise_header(x)
                })
            }) =>
        {
            Outcome::new(Status::GraderError, 0.0).detail(format!("held-out data: {e}"))
        }
        Err(e) => Outcome::new(Status::ExtractFailed, 0.0)
            .detail(format!("the agent's output {output}: {e}")),
    }
}

/// The agent's uid in our images.
const AGENT_USER: &str = "1000:1000";

/// Prepares a test run of the agent's code: a fresh per-grader folder under the scratch dir
/// holding copies of just the held-out files this grader names (under `h/`), owned by the
/// agent's uid so the run can write its report there; the workspace belongs to the agent's uid;
/// `/grader/hidden` becomes root-only (0700 and below); our staged scripts stay readable; a
/// per-run forbidden-API log (appended to the main log afterwards, as root). Earlier graders'
/// folders under `<scratch>/runs` become root-only first, so one grader's held-out tests are
/// out of reach of agent code run by the next.
const ISOLATE: &str = r#"set -u
w="$1"; ws="$2"; hidden="$3"; scratch="$4"; rb="$5"; runlog="$6"; shift 6
runs="$(dirname "$w")"
chown 0:0 "$scratch" && chmod 755 "$scratch" || exit 95
mkdir -p "$runs" && chown 0:0 "$runs" && chmod 755 "$runs" || exit 95
for o in "$runs"/*; do
  if [ -d "$o" ]; then chown -R 0:0 "$o" && chmod 700 "$o" || exit 99; fi
done
rm -rf "$w" && mkdir -p "$w/h" || exit 90
if [ -e "$rb" ]; then chmod -R a+rX "$rb" || exit 96; fi
for rel in "$@"; do
  src="$hidden/$rel"; dst="$w/h/$rel"
  if [ ! -e "$src" ]; then echo "held-out file missing: $rel" >&2; exit 97; fi
  mkdir -p "$(dirname "$dst")" && cp -a "$src" "$dst" || exit 91
done
chown -R 1000:1000 "$w" "$ws" || exit 93
if [ -e "$hidden" ]; then chown -R 0:0 "$hidden" && chmod -R go-rwx "$hidden" || exit 94; fi
if [ -n "$runlog" ]; then : > "$runlog" && chmod 666 "$runlog" || exit 98; fi
"#;

/// Appends a run's forbidden-API hits to the main log.
const APPEND_LOG: &str = r#"if [ -f "$1" ]; then cat "$1" >> "$2" && rm -f "$1"; fi"#;

/// One run of agent code by a test grader, as the agent's uid (see [`ISOLATE`]).
struct AgentRun {
    /// The per-grader folder (readable and writable by the agent's uid).
    dir: String,
    runlog: String,
    env: std::collections::BTreeMap<String, String>,
}

impl AgentRun {
    async fn prepare(env: &Env<'_, '_>, kind: &str, held: &[&str]) -> Result<Self, Outcome> {
        let dir = env.scratch(&format!("runs/{kind}-{}", unique()));
        let mut run_env = env.py_env.clone();
        // The held-out folder is out of the run's reach; point at the copies instead.
        run_env.insert("RB_HIDDEN".into(), format!("{dir}/h"));
        let runlog = if run_env.contains_key("RB_FORBIDDEN") {
            let l = format!("{dir}.forbidden.log");
            run_env.insert("RB_FORBIDDEN_LOG".into(), l.clone());
            l
        } else {
            String::new()
        };
        let mut argv = sv(&[
            "sh",
            "-c",
            ISOLATE,
            "sh",
            &dir,
            &env.ctx.workspace,
            &env.ctx.hidden,
            &env.ctx.scratch,
            &env.rb_dir,
            &runlog,
        ]);
        argv.extend(held.iter().map(|s| (*s).to_owned()));
        let out = env
            .exec(
                argv,
                false,
                Some("/"),
                Some(Duration::from_secs(120)),
                64 * 1024,
            )
            .await
            .map_err(Outcome::from_fault)?;
        if out.exit_code == Some(97) {
            return Err(Outcome::new(Status::GraderError, 0.0).detail(format!(
                "a held-out file this grader names is missing (check the task): {}",
                tail(&out.stderr, 500)
            )));
        }
        if !out.success() {
            return Err(Outcome::new(Status::EnvBroken, 0.0).detail(format!(
                "cannot prepare the run as the agent's user: {}",
                exit_note(&out)
            )));
        }
        Ok(Self {
            dir,
            runlog,
            env: run_env,
        })
    }

    /// Path of the copy of a held-out file.
    fn held(&self, rel: &str) -> String {
        if rel.is_empty() {
            format!("{}/h", self.dir)
        } else {
            format!("{}/h/{}", self.dir, rel.trim_start_matches('/'))
        }
    }

    /// Runs Python-facing argv (import hook environment) as the agent's uid.
    async fn exec(
        &self,
        env: &Env<'_, '_>,
        argv: Vec<String>,
        limit: Option<Duration>,
    ) -> Result<sandbox::ExecOutcome, Fault> {
        let out = env
            .exec_as(AGENT_USER, argv, self.env.clone(), None, limit, LOG_CAP)
            .await;
        self.collect_log(env).await;
        out
    }

    /// Runs argv with an empty environment as the agent's uid.
    async fn exec_plain(
        &self,
        env: &Env<'_, '_>,
        argv: Vec<String>,
        limit: Option<Duration>,
    ) -> Result<sandbox::ExecOutcome, Fault> {
        env.exec_as(
            AGENT_USER,
            argv,
            std::collections::BTreeMap::new(),
            None,
            limit,
            LOG_CAP,
        )
        .await
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
}
/// Budget kept back from the agent's command for comparing and restoring.
const REPRODUCE_RESERVE: Duration = Duration::from_secs(20);

/// Moves each submitted output to `$d/<index>` (root-only), printing `present`/`missing` per
/// output. Recreates the agent's view for the re-run: the workspace belongs to the agent's uid;
/// the held-out files and our scratch folder do not (the agent's code can neither read the
/// expected data nor touch our logs); its forbidden-API hits go to a log of its own.
const SET_ASIDE: &str = r#"set -u
d="$1"; runlog="$2"; ws="$3"; hidden="$4"; scratch="$5"; shift 5
rm -rf "$d" && mkdir -p "$d" && chmod 700 "$d" || exit 90
chown -R 1000:1000 "$ws" || exit 93
if [ -e "$hidden" ]; then chown -R 0:0 "$hidden" && chmod -R go-rwx "$hidden" || exit 94; fi
chown 0:0 "$scratch" && chmod 755 "$scratch" || exit 95
if [ -n "$runlog" ]; then : > "$runlog" && chmod 666 "$runlog" || exit 96; fi
i=0
for f in "$@"; do
  if [ -f "$f" ]; then
    cp -p "$f" "$d/$i" && rm -f "$f" || exit 91
    echo present
  else
    echo missing
  fi
  i=$((i+1))
done
"#;

/// Puts the submitted outputs back (and removes what the re-run wrote where nothing was
/// submitted); appends the re-run's forbidden-API hits to the main log.
const RESTORE: &str = r#"set -u
d="$1"; runlog="$2"; mainlog="$3"; shift 3
i=0
for f in "$@"; do
  rm -rf "$f"
  if [ -f "$d/$i" ]; then
    mkdir -p "$(dirname "$f")" && cp -p "$d/$i" "$f" || exit 92
  fi
  i=$((i+1))
done
rm -rf "$d"
if [ -n "$runlog" ] && [ -f "$runlog" ]; then cat "$runlog" >> "$mainlog" && rm -f "$runlog"; fi
"#;

/// Byte comparison of two files in the sandbox: exit 0 equal, 1 different (with sizes and the
/// first difference on stdout).
const BYTE_COMPARE: &str = r#"if cmp -s "$1" "$2"; then exit 0; fi
echo "submitted $(wc -c < "$1") bytes, regenerated $(wc -c < "$2") bytes; $(cmp "$1" "$2" 2>&1 | head -c 300)"
exit 1
"#;

/// How one regenerated output compares with the submitted one.
enum Verdict {
    Same,
    NotProduced(String),
    Differs(String, Option<serde_json::Value>),
}

async fn reproduce(
    env: &Env<'_, '_>,
    argv: &[String],
    outputs: &[String],
    rules: &CsvRules,
) -> Outcome {
    if argv.is_empty() || outputs.is_empty() {
        return Outcome::new(Status::GraderError, 0.0)
            .detail("reproduce needs a command (argv) and the outputs it must regenerate");
    }
    let dir = env.scratch(&format!("reproduce-{}", unique()));
    let paths: Vec<String> = outputs.iter().map(|o| env.ws(o)).collect();
    let mut run_env = env.py_env.clone();
    let runlog = if run_env.contains_key("RB_FORBIDDEN") {
        let l = format!("{dir}.forbidden.log");
        run_env.insert("RB_FORBIDDEN_LOG".into(), l.clone());
        l
    } else {
        String::new()
    };
    let mut aside = sv(&[
        "sh",
        "-c",
        SET_ASIDE,
        "sh",
        &dir,
        &runlog,
        &env.ctx.workspace,
        &env.ctx.hidden,
        &env.ctx.scratch,
    ]);
    aside.extend(paths.iter().cloned());
    let out = tryf!(
        env.exec(
            aside,
            false,
            Some("/"),
            Some(Duration::from_secs(120)),
            64 * 1024
        )
        .await
    );
    let submitted: Vec<bool> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim() == "present")
        .collect();
    if !out.success() || submitted.len() != outputs.len() {
        // Put back whatever was moved before giving up.
        let _ = restore(env, &dir, &runlog, &paths).await;
        return Outcome::new(Status::EnvBroken, 0.0).detail(format!(
            "cannot set the submitted outputs aside: {}",
            exit_note(&out)
        ));
    }

    let left = env.remaining();
    if left < REPRODUCE_RESERVE + Duration::from_secs(1) {
        let _ = restore(env, &dir, &runlog, &paths).await;
        return Outcome::from_fault(Fault::Budget);
    }
    let run = env
        .exec_as(
            AGENT_USER,
            argv.to_vec(),
            run_env,
            None,
            Some(left - REPRODUCE_RESERVE),
            LOG_CAP,
        )
        .await;
    let run = match run {
        Ok(r) => r,
        Err(f) => {
            let _ = restore(env, &dir, &runlog, &paths).await;
            return Outcome::from_fault(f);
        }
    };

    let mut tests = Vec::new();
    let mut details = Vec::new();
    let mut data = serde_json::Map::new();
    let mut fault = None;
    for (i, rel) in outputs.iter().enumerate() {
        let (status, msg) = if !submitted[i] {
            (
                Status::Fail,
                "not submitted: there is nothing to reproduce".to_owned(),
            )
        } else if !run.success() {
            (
                Status::Fail,
                "not checked: the command did not finish successfully".to_owned(),
            )
        } else {
            match compare_regenerated(env, &format!("{dir}/{i}"), &paths[i], rules).await {
                Err(f) => {
                    fault = Some(f);
                    break;
                }
                Ok(Verdict::Same) => (
                    Status::Pass,
                    "regenerated, matches the submitted file".to_owned(),
                ),
                Ok(Verdict::NotProduced(why)) => (Status::Fail, why),
                Ok(Verdict::Differs(why, report)) => {
                    if let Some(r) = report {
                        data.insert(rel.clone(), r);
                    }
                    (Status::FabricatedData, why)
                }
            }
        };
        if status != Status::Pass {
            details.push(format!("{rel}: {msg}"));
        }
        tests.push(TestResult::new(rel.clone(), status).with_message(msg));
    }
    let restored = restore(env, &dir, &runlog, &paths).await;
    if let Some(f) = fault {
        return Outcome::from_fault(f);
    }

    let mut o = if tests.iter().any(|t| t.status == Status::FabricatedData) {
        Outcome::new(Status::FabricatedData, 0.0)
    } else if tests.iter().all(|t| t.status == Status::Pass) {
        Outcome::new(Status::Pass, 1.0)
    } else {
        Outcome::new(Status::Fail, 0.0)
    };
    if !run.success() {
        o = o.detail(format!(
            "`{}` did not regenerate the outputs: {}",
            argv.join(" "),
            exit_note(&run)
        ));
    }
    for d in details {
        o = o.detail(d);
    }
    if let Err(e) = restored {
        o = o.detail(format!(
            "warning: the submitted outputs could not be restored: {e}"
        ));
    }
    o.tests = tests;
    if !data.is_empty() {
        o.data = Some(serde_json::Value::Object(data));
    }
    o
}

async fn restore(
    env: &Env<'_, '_>,
    dir: &str,
    runlog: &str,
    paths: &[String],
) -> Result<(), String> {
    let mut argv = sv(&["sh", "-c", RESTORE, "sh", dir, runlog, &env.forbidden_log]);
    argv.extend(paths.iter().cloned());
    match env
        .exec(
            argv,
            false,
            Some("/"),
            Some(Duration::from_secs(60)),
            16 * 1024,
        )
        .await
    {
        Ok(out) if out.success() => Ok(()),
        Ok(out) => Err(exit_note(&out)),
        Err(Fault::Sandbox(e)) => Err(e.to_string()),
        Err(Fault::Broken(e)) => Err(e),
        Err(Fault::Budget) => Err("the grading budget ran out".into()),
    }
}

/// Compares a regenerated output with the submitted copy (CSV numerically, else by bytes).
async fn compare_regenerated(
    env: &Env<'_, '_>,
    submitted: &str,
    regenerated: &str,
    rules: &CsvRules,
) -> Result<Verdict, Fault> {
    let regen = match env.read_file(regenerated, MAX_CSV_BYTES).await? {
        FileRead::Missing => {
            return Ok(Verdict::NotProduced(
                "the command finished but did not write this file".into(),
            ));
        }
        FileRead::TooLarge => None,
        FileRead::Bytes(b) => Some(b),
    };
    let is_csv = regenerated.to_ascii_lowercase().ends_with(".csv");
    if is_csv && let Some(regen) = regen {
        let sub = match env.read_file(submitted, MAX_CSV_BYTES).await? {
            FileRead::Bytes(b) => Some(b),
            _ => None,
        };
        if let Some(sub) = sub
            && let (Ok(s), Ok(r)) = (csv_compare::parse(&sub), csv_compare::parse(&regen))
        {
            return Ok(match csv_compare::compare(&s, &r, rules) {
                Ok(rep)
                    if rep.score >= 1.0
                        && rep.extra_columns.is_empty()
                        && rep.expected_rows == rep.actual_rows =>
                {
                    Verdict::Same
                }
                Ok(rep) => {
                    let mut why = format!(
                        "the regenerated data differ from the submitted data ({} of {} rows regenerated, {} values off at rtol {:e} / atol {:e})",
                        rep.actual_rows,
                        rep.expected_rows,
                        rep.total_misses,
                        rules.rtol,
                        rules.atol
                    );
                    for c in rep.columns.iter().filter(|c| c.matched < c.compared) {
                        why.push_str(&format!(
                            "; column {}: {}/{} values match, max abs err {:.3e}, max rel err {:.3e}",
                            c.name,
                            c.matched,
                            c.compared,
                            c.max_abs_err.unwrap_or(f64::NAN),
                            c.max_rel_err.unwrap_or(f64::NAN)
                        ));
                    }
                    for line in rep.describe().into_iter().take(10) {
                        why.push_str("; ");
                        why.push_str(&line);
                    }
                    Verdict::Differs(why, serde_json::to_value(&rep).ok())
                }
                Err(e) => Verdict::Differs(
                    format!("the regenerated table does not line up with the submitted one: {e}"),
                    None,
                ),
            });
        }
    }
    // Not CSV (or not parseable as one): byte for byte, inside the sandbox.
    let out = env
        .exec(
            sv(&["sh", "-c", BYTE_COMPARE, "sh", submitted, regenerated]),
            false,
            Some("/"),
            Some(Duration::from_secs(120)),
            4096,
        )
        .await?;
    Ok(match out.exit_code {
        Some(0) => Verdict::Same,
        Some(1) => Verdict::Differs(
            format!(
                "the regenerated file differs from the submitted one: {}",
                String::from_utf8_lossy(&out.stdout).trim()
            ),
            None,
        ),
        _ => {
            return Err(Fault::Broken(format!(
                "comparing {regenerated} failed: {}",
                exit_note(&out)
            )));
        }
    })
}

async fn files_exist(env: &Env<'_, '_>, outputs: &[String]) -> Outcome {
    let mut tests = Vec::new();
    for o in outputs {
        let out = tryf!(
            env.exec(
                vec!["test".into(), "-s".into(), env.ws(o)],
                false,
                Some("/"),
                Some(Duration::from_secs(30)),
                1024
            )
            .await
        );
        let st = if out.success() {
            Status::Pass
        } else {
            Status::Fail
        };
        tests.push(TestResult::new(o.clone(), st));
    }
    if tests.is_empty() {
        return Outcome::new(Status::GraderError, 0.0).detail("files_exist names no file");
    }
    Outcome::from_tests(tests)
}

async fn forbidden_static(env: &Env<'_, '_>, forbidden: &[String], outputs: &[String]) -> Outcome {
    let files: Vec<String> = if outputs.is_empty() {
        let out = tryf!(
            env.exec(
                vec![
                    "find".into(),
                    env.ctx.workspace.clone(),
                    "-name".into(),
                    "*.py".into(),
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
    } else {
        outputs.iter().map(|o| env.ws(o)).collect()
    };
    if files.is_empty() {
        return Outcome::new(Status::Pass, 1.0).detail("no Python file to scan");
    }
    let mut argv = vec![
        "python3".into(),
        format!("{}/forbidden_scan.py", env.rb_dir),
        serde_json::to_string(forbidden).unwrap_or_else(|_| "[]".into()),
    ];
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
        _ if python_missing(&out, "json") => {
            return Outcome::new(Status::EnvBroken, 0.0).detail(exit_note(&out));
        }
        _ => {
            return Outcome::new(Status::GraderError, 0.0).detail(format!(
                "the forbidden-API scan failed: {}",
                exit_note(&out)
            ));
        }
    };
    let hits = v["hits"].as_array().cloned().unwrap_or_default();
    let mut o = if hits.is_empty() {
        Outcome::new(Status::Pass, 1.0)
    } else {
        let mut o = Outcome::new(Status::ForbiddenApi, 0.0);
        for h in hits.iter().take(50) {
            o = o.detail(format!(
                "{}:{}: {} ({}) uses forbidden {}",
                h["file"].as_str().unwrap_or("?"),
                h["line"],
                h["name"].as_str().unwrap_or("?"),
                h["how"].as_str().unwrap_or("?"),
                h["forbidden"].as_str().unwrap_or("?")
            ));
        }
        o
    };
    for u in v["unparsed"].as_array().into_iter().flatten().take(20) {
        o = o.detail(format!(
            "not parsed (not scanned statically): {} ({})",
            u["file"].as_str().unwrap_or("?"),
            u["error"].as_str().unwrap_or("")
        ));
    }
    o.data = Some(json!({"static_hits": hits}));
    o
}

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
    let hits: Vec<serde_json::Value> = String::from_utf8_lossy(&log)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .take(50)
        .collect();
    if hits.is_empty() {
        return;
    }
    for (g, r) in spec.graders.iter().zip(results.iter_mut()) {
        if let Check::ForbiddenApi { forbidden, .. } = &g.check {
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
                r.details.push(format!(
                    "runtime: {} {} from {}",
                    h["how"].as_str().unwrap_or("use of"),
                    h["name"].as_str().unwrap_or("?"),
                    h["file"].as_str().unwrap_or("?")
                ));
            }
            let data = r.data.get_or_insert_with(|| json!({}));
            data["runtime_hits"] = json!(mine);
        }
    }
}

/// Reads agent files for the judge (capped); missing files are listed as such.
async fn agent_files(env: &Env<'_, '_>, paths: &[String]) -> Result<Vec<AgentFile>, Fault> {
    let cap = env
        .ctx
        .judge
        .map_or(32 * 1024, judge::Judge::max_file_bytes);
    let mut out = Vec::new();
    for p in paths.iter().take(64) {
        let content = match env.read_file(&env.ws(p), cap).await? {
            FileRead::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
            FileRead::TooLarge => {
                // Show the head of a large file.
                let head = env
                    .exec(
                        vec!["head".into(), "-c".into(), cap.to_string(), env.ws(p)],
                        false,
                        Some("/"),
                        Some(Duration::from_secs(60)),
                        cap,
                    )
                    .await?;
                format!(
                    "{}\n[file truncated at {cap} bytes]",
                    String::from_utf8_lossy(&head.stdout)
                )
            }
            FileRead::Missing => "[this file does not exist]".into(),
        };
        out.push(AgentFile {
            name: p.clone(),
            content,
        });
    }
    Ok(out)
}

/// Every regular file of the workspace (for PaperBench leaves), capped in number.
async fn workspace_listing(env: &Env<'_, '_>) -> Result<Vec<String>, Fault> {
    let out = env
        .exec(
            sv(&[
                "sh",
                "-c",
                "cd \"$1\" && find . -type f -size -1000k -not -path './.git/*' | sort | head -n 40",
                "sh",
                &env.ctx.workspace,
            ]),
            false,
            Some("/"),
            Some(Duration::from_secs(60)),
            1024 * 1024,
        )
        .await?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").to_owned())
        .filter(|l| !l.is_empty())
        .collect())
}

async fn hidden_text(env: &Env<'_, '_>, rel: &str) -> Result<String, Outcome> {
    match env.read_file(&env.hidden(rel), 4 * 1024 * 1024).await {
        Ok(FileRead::Bytes(b)) => Ok(String::from_utf8_lossy(&b).into_owned()),
        Ok(other) => Err(Outcome::new(Status::GraderError, 0.0)
            .detail(format!("held-out file {rel}: {other:?}"))),
        Err(f) => Err(Outcome::from_fault(f)),
    }
}

fn no_judge() -> Outcome {
    Outcome::new(Status::JudgeUnavailable, 0.0)
        .detail("no judge is configured for this run; this grader needs one")
}

async fn ask(env: &Env<'_, '_>, req: &JudgeRequest) -> Result<judge::Verdict, judge::JudgeFailure> {
    match env.ctx.judge {
        Some(j) => j.ask(req).await,
        None => Err(judge::JudgeFailure {
            status: Status::JudgeUnavailable,
            reason: "no judge configured".into(),
            raw: None,
            attempts: 0,
            model: String::new(),
            votes: Vec::new(),
        }),
    }
}

async fn paperbench_tree(env: &Env<'_, '_>, rubric: &str, categories: &[String]) -> Outcome {
    if env.ctx.judge.is_none() {
        return no_judge();
    }
    let text = match hidden_text(env, rubric).await {
        Ok(t) => t,
        Err(o) => return o,
    };
    let tree = match Node::from_json(&text) {
        Ok(t) => t,
        Err(e) => return Outcome::new(Status::GraderError, 0.0).detail(e.to_string()),
    };
    let filter = CategoryFilter {
        categories: categories.to_vec(),
    };
    let listing = tryf!(workspace_listing(env).await);
    let files = tryf!(agent_files(env, &listing).await);
    let mut scores = std::collections::BTreeMap::new();
    let mut tests = Vec::new();
    let mut failure: Option<judge::JudgeFailure> = None;
    let mut verdicts = Vec::new();
    for leaf in tree.leaves(&filter) {
        let req = judge::prompts::paperbench_leaf(
            &leaf.requirements,
            leaf.task_category.as_deref(),
            files.clone(),
        );
        match ask(env, &req).await {
            Ok(v) => {
                scores.insert(leaf.id.clone(), v.score);
                let st = if v.score >= 1.0 {
                    Status::Pass
                } else {
                    Status::Fail
                };
                tests.push(
                    TestResult::new(cap_text(&leaf.requirements, 200), st)
                        .with_message(v.justification.clone()),
                );
                verdicts.push(
                    json!({"id": leaf.id, "score": v.score, "justification": v.justification}),
                );
            }
            Err(f) => {
                tests.push(
                    TestResult::new(cap_text(&leaf.requirements, 200), f.status)
                        .with_message(f.reason.clone()),
                );
                failure.get_or_insert(f);
            }
        }
    }
    let agg = aggregate_with(&tree, &filter, &|n| scores.get(&n.id).copied());
    let mut o = match (agg, failure) {
        (Ok(Some(s)), None) => Outcome::new(if s >= 1.0 { Status::Pass } else { Status::Fail }, s),
        (Ok(None), None) => Outcome::new(Status::GraderError, 0.0)
            .detail("no rubric leaf matches the category filter"),
        (_, Some(f)) => Outcome::new(f.status, 0.0).detail(format!(
            "the judge failed on at least one leaf: {}",
            f.reason
        )),
        (Err(id), None) => {
            Outcome::new(Status::JudgeInvalid, 0.0).detail(format!("leaf {id} has no verdict"))
        }
    };
    o.tests = tests;
    o.data = Some(json!({"leaves": verdicts}));
    o
}

async fn discrepancy(env: &Env<'_, '_>, output: &str, reference: &str) -> Outcome {
    if env.ctx.judge.is_none() {
        return no_judge();
    }
    let reference = match hidden_text(env, reference).await {
        Ok(t) => t,
        Err(o) => return o,
    };
    let mut files = tryf!(agent_files(env, &[output.to_owned()]).await);
    let report = files.remove(0);
    if report.content == "[this file does not exist]" {
        return Outcome::new(Status::ExtractFailed, 0.0)
            .detail(format!("the agent's report {output} does not exist"));
    }
    verdict_outcome(ask(env, &judge::prompts::discrepancy(&reference, report)).await)
}

async fn criteria(env: &Env<'_, '_>, criteria: &str, outputs: &[String]) -> Outcome {
    if env.ctx.judge.is_none() {
        return no_judge();
    }
    let text = match hidden_text(env, criteria).await {
        Ok(t) => t,
        Err(o) => return o,
    };
    let files = tryf!(agent_files(env, outputs).await);
    verdict_outcome(ask(env, &judge::prompts::criteria(&text, files)).await)
}

fn verdict_outcome(r: Result<judge::Verdict, judge::JudgeFailure>) -> Outcome {
    match r {
        Ok(v) => {
            let mut o = Outcome::new(
                if v.score >= 1.0 {
                    Status::Pass
                } else {
                    Status::Fail
                },
                v.score,
            )
            .detail(format!("judge: {}", v.justification));
            o.data = serde_json::to_value(&v).ok();
            o
        }
        Err(f) => {
            let mut o = Outcome::new(f.status, 0.0).detail(format!("judge: {}", f.reason));
            o.data = serde_json::to_value(&f).ok();
            o
        }
    }
}

fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testthat_tsv() {
        let t = parse_testthat_tsv("name\tfailed\terror\tskipped\tpassed\ntest-a.R::ok\t0\t0\t0\t2\ntest-a.R::bad\t1\t0\t0\t1\ntest-a.R::boom\t0\t1\t0\t0\ntest-a.R::skip\t0\t0\t1\t0\n").expect("parses");
        let st: Vec<Status> = t.iter().map(|t| t.status).collect();
        assert_eq!(
            st,
            vec![Status::Pass, Status::Fail, Status::Error, Status::Fail]
        );
        assert_eq!(t[0].name, "test-a.R::ok");
        assert!(parse_testthat_tsv("").is_none());
        assert!(parse_testthat_tsv("a\tb\n").is_none());
    }

    #[test]
    fn results_line_table() {
        let cases: &[(&str, Option<(u64, u64)>)] = &[
            ("Results: 3/4 passed\n", Some((3, 4))),
            (
                "noise\nResults: 1/4 passed\nmore\nResults: 4/4 passed",
                Some((4, 4)),
            ),
            ("  Results:  2 / 5 passed", None),
            ("Results: 2/5", Some((2, 5))),
            ("Results: 6/5 passed", None),
            ("Results: 0/0 passed", None),
            ("all good", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_results_line(s), *want, "{s:?}");
        }
    }
}
