//! `c_test`: the agent's C/C++ sources compiled with a held-out driver and run.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use std::time::Duration;

use crate::checks::agent_run::AgentRun;
use crate::checks::{Locate, PathField, Problem};
use std::collections::BTreeMap;

use crate::checks::c_values;
use crate::checks::canary::{CANARY_EXIT, Canary, tampering};
use crate::env::{
    AGENT_USER, Env, Outcome, REPORT_CAP, exit_note, join, sv, tail, tryf, unique,
};
use crate::report::TestResult;
use crate::status::Status;
use crate::checks::{CheckSpec, Run};

/// The agent's C/C++ sources linked with a held-out test driver. A driver using our
/// `rb_check.h` (see `rubrics/c/rb_check.h`) is built twice: alone, as the task author's uid,
/// printing the expected values; and linked with the agent's sources, as the agent's uid,
/// printing only the actual ones; the verdict compares them here, outside both. A driver
/// without it (the older format) prints `Results: x/y passed` from the agent's process,
/// checked by a canary driver only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CTest {
    /// `gcc` or `g++`.
    pub compiler: String,
    /// Agent sources, relative to `/workspace`.
    pub workspace_sources: Vec<String>,
    /// Held-out driver sources.
    pub hidden_sources: Vec<String>,
    #[serde(default)]
    pub flags: Vec<String>,
}

impl CheckSpec for CTest {
    fn kind(&self) -> &'static str {
        "c_test"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        PathField::all("hidden_sources", &self.hidden_sources).collect()
    }
    fn output_paths(&self) -> Vec<PathField<'_>> {
        PathField::all("workspace_sources", &self.workspace_sources).collect()
    }
    fn validate(&self) -> Vec<Problem> {
        if self.compiler != "gcc" && self.compiler != "g++" {
            return vec![Problem::new(
                "compiler",
                Locate::Value(self.compiler.clone()),
                format!("`{}` is not `gcc` or `g++`", self.compiler),
            )];
        }
        Vec::new()
    }
}

#[async_trait]
impl Run for CTest {
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        c_test(
            env,
            &self.compiler,
            &self.workspace_sources,
            &self.hidden_sources,
            &self.flags,
        )
        .await
    }
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

/// The expected side, one root exec (`$1` its folder, `$2` where the driver objects go, `$3` the
/// held-out folder, `$4` [`EXPECTED_INNER`], then its arguments): the held-out folder is copied
/// into a folder only the task author's uid can read, where that uid builds and runs the
/// driver alone and compiles the objects the agent's build links; root then publishes the
/// objects (readable by all: they hold no expected value) in `$2` (`d/` the driver's, the
/// canary's beside it). Exit 81: no `setpriv`; 9x: our own steps failed; otherwise the inner
/// script's code.
const EXPECTED_OUTER: &str = r#"set -u
ref="$1"; objs="$2"; hidden="$3"; inner="$4"; shift 4
command -v setpriv >/dev/null 2>&1 || exit 81
rm -rf "$ref" "$objs" && mkdir -p "$ref" "$objs/d" || exit 90
if [ -e "$hidden" ]; then cp -a "$hidden/." "$ref/" || exit 91; fi
chown -R 2000:2000 "$ref" && chmod 700 "$ref" || exit 93
cd "$ref" && setpriv --reuid=2000 --regid=2000 --clear-groups sh -c "$inner" sh "$@"
code=$?
for o in "$ref"/o/*.o; do
  [ -f "$o" ] || continue
  case "$o" in
    */canary.o) cp "$o" "$objs/canary.o" ;;
    *) cp "$o" "$objs/d/" ;;
  esac
done
chown -R 0:0 "$objs" && chmod -R a+rX,go-w "$objs" || exit 94
exit $code
"#;

/// The author-uid part of [`EXPECTED_OUTER`], cwd its folder: `$1` compiler, `$2` our
/// harness folder (`c/rb_check.h`), `$3` the canary's source, `$4` how many of the remaining
/// arguments are driver paths (the rest are the task's flags, minus any naming the
/// workspace). No driver naming `rb_check.h`: prints `@rb legacy`. Else builds the expected
/// binary (driver alone, `-DRB_EXPECTED`), the driver objects (`-DRB_ACTUAL`, compiled
/// without the agent's files) and the canary's object, then prints `@rb run` and runs the
/// expected binary (its stdout is the exec's). Exit 97: a driver is missing; 80: the expected
/// side does not build; 82: the driver objects do not build; 83: the canary does not build.
const EXPECTED_INNER: &str = r#"set -u
cc="$1"; rb="$2"; canary="$3"; n="$4"; shift 4
uses=0; i=0
for a in "$@"; do
  [ "$i" -lt "$n" ] || break
  i=$((i+1))
  [ -f "$a" ] || { echo "held-out file missing: $a" >&2; exit 97; }
  if grep -q 'rb_check\.h' "$a"; then uses=1; fi
done
if [ "$uses" = 0 ]; then echo "@rb legacy"; exit 0; fi
mkdir -p o c || exit 90
printf '%s' "$canary" > c/canary.c || exit 90
# The three builds run side by side.
"$cc" -DRB_EXPECTED -I"$rb/c" -O1 -o exp "$@" -lm -Wl,--unresolved-symbols=ignore-all 2> exp.err &
e=$!
(cd o && "$cc" -c -DRB_ACTUAL -I"$rb/c" -O1 "$@") 2> o.err &
o=$!
(cd c && "$cc" -c -DRB_ACTUAL -I"$rb/c" -O1 -o canary.o canary.c) 2> c.err
c=$?
wait $e || { cat exp.err >&2; exit 80; }
wait $o || { cat o.err >&2; exit 82; }
[ "$c" = 0 ] || { cat c.err >&2; exit 83; }
mv c/canary.o o/canary.o || exit 90
echo "@rb run"
exec ./exp
"#;

/// The agent's side, one exec as its uid in its run folder: `$1` compiler, `$2` the published
/// objects, then the agent's sources and the task's flags. Links them with the driver objects
/// (`driver`) and with the canary's (`canary`); then runs the canary (its stdout relayed on
/// stderr as `@rbc` lines, then `@rbc-exit CODE`) and finally the test program, whose stdout
/// is the exec's. Stderr says how far it got: no `@rb built` line, the build failed (the
/// compiler's messages follow); `@rb canary-unlinked`, only the canary did not link.
const AGENT_RUN: &str = r#"set -u
cc="$1"; objs="$2"; shift 2
"$cc" -O1 -o canary "$@" "$objs/canary.o" -lm -Wl,--unresolved-symbols=ignore-all > canary.err 2>&1 &
k=$!
if ! "$cc" -O1 -o driver "$@" "$objs"/d/*.o -lm > cc.err 2>&1; then tail -c 3000 cc.err >&2; exit 1; fi
if ! wait $k; then echo "@rb canary-unlinked" >&2; tail -c 3000 canary.err >&2; exit 1; fi
echo "@rb built" >&2
timeout 60 ./canary > canary.out 2>/dev/null
rc=$?
head -c 65536 canary.out | sed 's/^/@rbc /' >&2
echo "@rbc-exit $rc" >&2
exec ./driver
"#;

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
    // Evidence for a missing compiler comes from a trusted probe, not the compiler's output on
    // the agent's sources.
    if !tryf!(
        env.probe(&["sh", "-c", "command -v \"$1\"", "sh", compiler])
            .await
    ) {
        return Outcome::new(Status::EnvBroken, 0.0)
            .detail(format!("compiler {compiler} is not available in the grading image"));
    }
    let canary = Canary::new();
    let (canary_src, canary_checks) = canary.c_values_source();
    let id = unique();
    let objs = env.scratch(&format!("ctest-objs-{id}"));
    let mut argv = sv(&[
        "sh",
        "-c",
        EXPECTED_OUTER,
        "sh",
        &env.scratch(&format!("runs/ctest-expected-{id}")),
        &objs,
        &env.ctx.hidden,
        EXPECTED_INNER,
        compiler,
        &env.rb_dir,
        &canary_src,
    ]);
    argv.push(hidden.len().to_string());
    let refdir = env.scratch(&format!("runs/ctest-expected-{id}"));
    argv.extend(hidden.iter().map(|h| join(&refdir, h)));
    argv.extend(trusted_flags(flags, &env.ctx.workspace));
    let out = tryf!(
        env.exec(argv, false, Some("/"), Some(Duration::from_secs(300)), REPORT_CAP)
            .await
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.lines().next() == Some("@rb legacy") && out.success() {
        return legacy(env, compiler, ws, hidden, flags).await;
    }
    let ran = stdout.lines().any(|l| l == "@rb run");
    if !ran {
        let why = match out.exit_code {
            Some(81) => {
                return Outcome::new(Status::EnvBroken, 0.0)
                    .detail("the grading image lacks setpriv (util-linux), which c_test needs");
            }
            Some(97) => "a held-out driver this grader names is missing",
            Some(80) => {
                "the driver does not build without the agent's sources (-DRB_EXPECTED): it must declare what it calls itself and its expected side may call no agent function"
            }
            Some(82) => {
                "the driver does not compile without the agent's files on its include path (-DRB_ACTUAL -c): declare the agent's functions in the driver"
            }
            _ => {
                return Outcome::new(Status::EnvBroken, 0.0).detail(format!(
                    "cannot build the driver's expected side: {}",
                    exit_note(&out)
                ));
            }
        };
        return Outcome::new(Status::GraderError, 0.0)
            .detail(format!("{why} (check the task): {}", exit_note(&out)));
    }
    if !out.success() || out.truncated {
        return Outcome::new(Status::GraderError, 0.0).detail(format!(
            "the driver's expected side failed (check the task): {}",
            exit_note(&out)
        ));
    }
    let expected = match c_values::parse_expected(&stdout) {
        Ok(e) => e,
        Err(why) => {
            return Outcome::new(Status::GraderError, 0.0)
                .detail(format!("the driver's expected side is unusable (check the task): {why}"));
        }
    };
    values(env, compiler, ws, flags, &objs, &expected, &canary_checks).await
}

/// The flags for builds without the agent's files: any naming the workspace (an include or
/// library folder, a forced include) is left out, with the option word before it.
fn trusted_flags(flags: &[String], workspace: &str) -> Vec<String> {
    const TAKES_VALUE: &[&str] = &[
        "-I",
        "-iquote",
        "-isystem",
        "-idirafter",
        "-include",
        "-imacros",
        "-L",
        "-B",
        "--sysroot",
    ];
    let ws = workspace.trim_end_matches('/');
    let mut out: Vec<String> = Vec::new();
    for f in flags {
        if f.contains(ws) {
            if out.last().is_some_and(|l| TAKES_VALUE.contains(&l.as_str())) {
                out.pop();
            }
            continue;
        }
        out.push(f.clone());
    }
    out
}

/// The agent's side of a driver built with our header: its sources linked with the driver
/// objects (which hold no expected value) and with the canary's, both run as its uid; the
/// values they print are compared here.
async fn values(
    env: &Env<'_, '_>,
    compiler: &str,
    ws: &[String],
    flags: &[String],
    objs: &str,
    expected: &[c_values::Expected],
    canary: &[c_values::Actual],
) -> Outcome {
    // The agent's run sees no held-out file at all.
    let run = match AgentRun::prepare(env, "ctest", &[]).await {
        Ok(r) => r,
        Err(o) => return o,
    };
    let mut argv = sv(&["sh", "-c", AGENT_RUN, "sh", compiler, objs]);
    argv.extend(ws.iter().map(|s| env.ws(s)));
    argv.extend(flags.iter().cloned());
    // Compiled and run as the agent's uid (an `#include` of a held-out path fails), in one
    // exec: the verdict below reads nothing the agent's processes could touch afterwards, so
    // no kill of its leftovers is waited for here (the next run's preparation kills them).
    let ran = tryf!(
        env.exec_as(
            AGENT_USER,
            argv,
            BTreeMap::new(),
            Some(&run.dir),
            None,
            REPORT_CAP
        )
        .await
    );
    let stderr = String::from_utf8_lossy(&ran.stderr);
    let compile = TestResult::new("compile", Status::CompileOk);
    if stderr.lines().any(|l| l == "@rb canary-unlinked") {
        return tampering(&format!(
            "the agent's sources build with the held-out driver but not with the canary driver: {}",
            exit_note(&ran)
        ));
    }
    if !stderr.lines().any(|l| l == "@rb built") {
        return compile_failure(&ran);
    }
    let relayed: String = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("@rbc "))
        .map(|l| format!("{l}\n"))
        .collect();
    let exits: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("@rbc-exit "))
        .collect();
    let said = c_values::parse_actual(&relayed, canary.len());
    if said.as_deref() != Ok(canary) || exits != [CANARY_EXIT.to_string().as_str()] {
        return tampering(&format!(
            "a canary driver linked with the agent's sources printed other values than it computes (exit status {}): the values channel is forged",
            if exits.is_empty() { "none".to_owned() } else { exits.join(", ") }
        ));
    }
    if ran.truncated {
        return Outcome::new(Status::Fail, 0.0).detail(format!(
            "the test program printed more than {REPORT_CAP} bytes: its values are not read"
        ));
    }
    let actual = match c_values::parse_actual(&String::from_utf8_lossy(&ran.stdout), expected.len())
    {
        Ok(a) => a,
        Err(why) => return tampering(&format!("the values the test program printed: {why}")),
    };
    let ended = ran.ended();
    let mut o = Outcome::from_tests(c_values::compare(expected, &actual, &ended));
    if ran.timed_out {
        o.status = Status::Timeout;
    }
    let failed = o.tests.iter().filter(|t| t.status != Status::Pass).count();
    let total = o.tests.len();
    o = o.detail(format!(
        "{} of {total} checks passed (values compared outside the agent's process)",
        total - failed
    ));
    o.tests.insert(0, compile);
    o
}

/// A driver without our header: its verdict is the `Results:` line the agent's process prints,
/// guarded by the canary driver only.
async fn legacy(
    env: &Env<'_, '_>,
    compiler: &str,
    ws: &[String],
    hidden: &[String],
    flags: &[String],
) -> Outcome {
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
        run.exec_plain(
            env,
            argv,
            BTreeMap::new(),
            None,
            Some(Duration::from_secs(300))
        )
        .await
    );
    let compile = TestResult::new("compile", Status::CompileOk);
    if !out.success() {
        return compile_failure(&out);
    }
    // The canary: the agent's sources linked with a driver of ours that prints a known
    // `Results:` line and calls nothing. Agent code that forges the summary (a constructor, an
    // interposed printf or exit, a header of the same name) forges it here too.
    let canary = Canary::new();
    let (canary_src, canary_line) = canary.c_source();
    let canary_c = format!("{}/driver_{}.c", run.dir, canary.nonce);
    let canary_bin = format!("{}/driver_{}", run.dir, canary.nonce);
    tryf!(AgentRun::write_root(env, &canary_c, &canary_src).await);
    let mut argv = vec![
        compiler.to_owned(),
        "-O1".into(),
        "-o".into(),
        canary_bin.clone(),
    ];
    argv.extend(ws.iter().map(|s| env.ws(s)));
    argv.push(canary_c);
    argv.extend(flags.iter().cloned());
    argv.extend(["-lm".into(), "-Wl,--unresolved-symbols=ignore-all".into()]);
    let built = tryf!(
        run.exec_plain(
            env,
            argv,
            BTreeMap::new(),
            None,
            Some(Duration::from_secs(300))
        )
        .await
    );
    let runner = run;
    let run = tryf!(
        runner
            .exec_plain(env, vec![bin], BTreeMap::new(), Some(&runner.dir), None)
            .await
    );
    if !built.success() {
        return tampering(&format!(
            "the agent's sources build with the held-out driver but not with an empty one: {}",
            exit_note(&built)
        ));
    }
    let probe = tryf!(
        runner
            .exec_plain(
                env,
                vec![canary_bin],
                BTreeMap::new(),
                Some(&runner.dir),
                Some(Duration::from_secs(60))
            )
            .await
    );
    let probe_out = String::from_utf8_lossy(&probe.stdout);
    let last = probe_out
        .lines()
        .rev()
        .find(|l| l.trim().starts_with("Results:"))
        .map(str::trim);
    if last != Some(canary_line.as_str()) || probe.exit_code != Some(1) {
        return tampering(&format!(
            "a canary driver that prints `{canary_line}` and exits 1 reported {} ({}): the summary line is forged",
            last.map_or_else(|| "no `Results:` line".to_owned(), |l| format!("`{l}`")),
            probe.ended()
        ));
    }
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut o = match parse_results_line(&stdout) {
        Some((x, y)) => {
            let mut o = Outcome::new(
                if x == y { Status::Pass } else { Status::Fail },
                x as f64 / y as f64,
            );
            let mut t = TestResult::new("results", o.status);
            t = t.with_message(legacy_message(x, y, &stdout));
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
    o.detail(format!(
        "{}: the held-out driver does not use rb_check.h, so its `Results:` line is computed in the agent's process (only the canary driver guards it)",
        crate::checks::VERDICT_IN_AGENT_PROCESS
    ))
}

/// Bytes of a legacy driver's output kept with its `Results:` line.
const DRIVER_OUTPUT_KEPT: usize = 3000;

/// `Results: x/y passed`, and for a failure what the driver printed before it (its checks'
/// names and messages, when it prints them): shown, never scored.
fn legacy_message(x: u64, y: u64, stdout: &str) -> String {
    let head = format!("Results: {x}/{y} passed");
    let printed: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim().starts_with("Results:"))
        .collect();
    if x == y || printed.is_empty() {
        return head;
    }
    format!(
        "{head}; the test driver printed:\n{}",
        tail(printed.join("\n").as_bytes(), DRIVER_OUTPUT_KEPT)
    )
}

/// A build that failed or ran out of time: 0, with the compiler's output as the `compile` test.
fn compile_failure(out: &sandbox::ExecOutcome) -> Outcome {
    let status = if out.timed_out {
        Status::Timeout
    } else {
        Status::CompileFail
    };
    let mut o =
        Outcome::new(status, 0.0).detail(format!("compilation failed: {}", exit_note(out)));
    o.tests
        .push(TestResult::new("compile", status).with_message(tail(&out.stderr, 3000)));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_failure_keeps_what_the_driver_printed() {
        let out = "PASS node\nFAIL clamp left: got 0.5, want 1\nResults: 1/2 passed\n";
        assert_eq!(
            legacy_message(1, 2, out),
            "Results: 1/2 passed; the test driver printed:\nPASS node\nFAIL clamp left: got 0.5, want 1"
        );
        assert_eq!(legacy_message(2, 2, out), "Results: 2/2 passed");
        assert_eq!(legacy_message(0, 2, "Results: 0/2 passed\n"), "Results: 0/2 passed");
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
