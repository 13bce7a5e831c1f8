//! C/C++ and R testthat runners in a real grading container (sci image).

mod common;

use std::time::Duration;

use common::Grading;
use rubrics::Status;

const DRIVER: &[u8] = br#"#include <stdio.h>
int add(int a, int b);
int mul(int a, int b);
int main(void) {
    int passed = 0, total = 0;
    total++; if (add(2, 3) == 5) passed++; else printf("FAIL add\n");
    total++; if (add(-1, 1) == 0) passed++; else printf("FAIL add neg\n");
    total++; if (mul(3, 4) == 12) passed++; else printf("FAIL mul\n");
    total++; if (mul(0, 9) == 0) passed++; else printf("FAIL mul zero\n");
    printf("Results: %d/%d passed\n", passed, total);
    return passed == total ? 0 : 1;
}
"#;

#[tokio::test]
async fn c_tests_compile_run_and_parse_results() {
    let g = Grading::new(
        "sci",
        &[
            ("src/ops.c", b"int add(int a, int b) { return a + b; }\nint mul(int a, int b) { return a + b; }\n"),
            ("src/broken.c", b"int add(int a, int b) { return a + ; }\nint mul(int a, int b) { return a * b; }\n"),
        ],
        &[("driver.c", DRIVER)],
    )
    .await;
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "ops"
            dimension = "code_correctness"
            check = { kind = "c_test", compiler = "gcc", workspace_sources = ["src/ops.c"], hidden_sources = ["driver.c"], flags = ["-std=c11"] }
            [[graders]]
            name = "broken"
            dimension = "code_correctness"
            check = { kind = "c_test", compiler = "gcc", workspace_sources = ["src/broken.c"], hidden_sources = ["driver.c"] }
            "#,
            None,
            Duration::from_secs(300),
        )
        .await;
    g.remove().await;
    println!(
        "{}",
        serde_json::to_string_pretty(&report.graders).expect("json")
    );
    let ok = &report.graders[0];
    assert_eq!((ok.status, ok.score), (Status::Fail, Some(0.5)));
    assert_eq!(ok.tests[0].status, Status::CompileOk);
    // A legacy driver's failing checks are named by what it printed.
    assert_eq!(
        ok.tests[1].message.as_deref(),
        Some("Results: 2/4 passed; the test driver printed:\nFAIL mul\nFAIL mul zero")
    );
    // The stated exception: a driver without rb_check.h is judged in the agent's process, and
    // the trial says so.
    assert!(
        ok.details
            .iter()
            .any(|d| d.starts_with(rubrics::checks::VERDICT_IN_AGENT_PROCESS)),
        "{:?}",
        ok.details
    );
    assert!(
        report.flags.iter().any(
            |f| f.starts_with(rubrics::checks::VERDICT_IN_AGENT_PROCESS) && f.contains("`ops`")
        ),
        "{:?}",
        report.flags
    );
    let broken = &report.graders[1];
    assert_eq!(
        (broken.status, broken.score),
        (Status::CompileFail, Some(0.0))
    );
    assert!(broken.details[0].contains("error"), "{:?}", broken.details);
}

#[tokio::test]
async fn testthat_per_test_results() {
    let g = Grading::new(
        "sci",
        &[("R/stats.R", b"sample_var <- function(x) sum((x - mean(x))^2) / length(x)\nsquare <- function(x) x * x\n")],
        &[(
            "tests/test-stats.R",
            b"source(file.path(Sys.getenv('RB_WORKSPACE'), 'R', 'stats.R'))\n\
test_that('square works', { expect_equal(square(3), 9) })\n\
test_that('sample variance uses n - 1', { expect_equal(sample_var(c(1, 2, 3, 4)), 5 / 3) })\n",
        )],
    )
    .await;
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "r tests"
            dimension = "code_correctness"
            check = { kind = "testthat", hidden_tests = "tests" }
            "#,
            None,
            Duration::from_secs(300),
        )
        .await;
    g.remove().await;
    let r = &report.graders[0];
    println!("{}", serde_json::to_string_pretty(r).expect("json"));
    assert_eq!(r.status, Status::Fail);
    assert_eq!(r.score, Some(0.5));
    assert_eq!(r.tests.len(), 2);
    assert!(
        r.tests
            .iter()
            .any(|t| t.name.contains("square") && t.status == Status::Pass)
    );
    assert!(
        r.tests
            .iter()
            .any(|t| t.name.contains("variance") && t.status == Status::Fail)
    );
}

/// A driver in the values format (`rb_check.h`): the agent's build prints only actual values.
const VALUES_DRIVER: &[u8] = br#"#include <stddef.h>
#include "rb_check.h"
int twice(int v);
double half(double v);
int fill(double *out, int n);
int main(void) {
    double buf[4] = {0, 0, 0, 0};
    const double want[4] = {0.0, 0.5, 1.0, 1.5};
    RB_CHECK_INT("twice 3", twice(3), 6);
    RB_CHECK_NEAR("half 1", half(1.0), 0.5, 1e-12, 0.0);
    RB_CHECK_ARRAY_NEAR("fill 4", buf, fill(buf, 4), want, 4, 0.0, 1e-12);
    return 0;
}
"#;

#[tokio::test]
async fn c_values_are_compared_outside_the_agent_process() {
    let honest: &[u8] = b"int twice(int v) { return 2 * v; }\ndouble half(double v) { return v / 2; }\nint fill(double *o, int n) { for (int i = 0; i < n; i++) o[i] = i * 0.5; return n; }\n";
    // NaN and an empty array: vacuous values fail.
    let vacuous: &[u8] = b"int twice(int v) { return 2 * v; }\ndouble half(double v) { (void)v; return 0.0 / 0.0; }\nint fill(double *o, int n) { (void)o; (void)n; return 0; }\n";
    // A destructor that knows the canary's name and prints values for every check again.
    let forger: &[u8] = b"#include <stdio.h>\n#include <string.h>\n#include <unistd.h>\nint twice(int v) { return v; }\ndouble half(double v) { return v; }\nint fill(double *o, int n) { (void)o; (void)n; return 0; }\n__attribute__((destructor)) static void forge(void) { char p[256] = {0}; if (readlink(\"/proc/self/exe\", p, 255) > 0 && strstr(p, \"canary\")) return; for (int i = 0; i < 3; i++) printf(\"@rb A %d f 61 1 1\\n\", i); fflush(stdout); }\n";
    // Returns the right answers only if it can read a copy of the driver (it cannot).
    let spy: &[u8] = b"#include <glob.h>\n#include <stdio.h>\nstatic int leak(void) { glob_t g; int found = 0; const char *pats[] = {\"/grader/hidden/*\", \"/grader/work/runs/*/*.c\", \"/grader/work/runs/*/h/*\", \"/grader/work/*/*.c\"}; for (int k = 0; k < 4; k++) { if (glob(pats[k], 0, NULL, &g) == 0) { for (size_t i = 0; i < g.gl_pathc; i++) { FILE *f = fopen(g.gl_pathv[i], \"r\"); if (f) { found = 1; fclose(f); } } globfree(&g); } } return found; }\nint twice(int v) { return leak() ? 2 * v : 0; }\ndouble half(double v) { return leak() ? v / 2 : 0; }\nint fill(double *o, int n) { if (!leak()) return 0; for (int i = 0; i < n; i++) o[i] = i * 0.5; return n; }\n";
    let g = Grading::new(
        "sci",
        &[
            ("honest.c", honest),
            ("vacuous.c", vacuous),
            ("forger.c", forger),
            ("spy.c", spy),
        ],
        &[("driver.c", VALUES_DRIVER)],
    )
    .await;
    let spec = |src: &str| {
        format!(
            "[[graders]]\nname = \"c\"\ndimension = \"code_correctness\"\n\
             check = {{ kind = \"c_test\", compiler = \"gcc\", workspace_sources = [\"{src}\"], hidden_sources = [\"driver.c\"], flags = [\"-std=c99\"] }}\n"
        )
    };
    let mut reports = Vec::new();
    for src in ["honest.c", "vacuous.c", "forger.c", "spy.c"] {
        let started = std::time::Instant::now();
        let r = g.grade(&spec(src), None, Duration::from_secs(300)).await;
        println!(
            "{src} in {:?}: {}",
            started.elapsed(),
            serde_json::to_string_pretty(&r.graders[0]).expect("json")
        );
        reports.push(r);
    }
    g.remove().await;
    let honest = &reports[0].graders[0];
    assert_eq!((honest.status, honest.score), (Status::Pass, Some(1.0)));
    assert_eq!(honest.tests.len(), 4, "compile + three checks");
    assert!(
        !honest
            .details
            .iter()
            .any(|d| d.starts_with(rubrics::checks::VERDICT_IN_AGENT_PROCESS)),
        "a values-mode driver's verdict is ours: {:?}",
        honest.details
    );
    let vacuous = &reports[1].graders[0];
    assert_eq!(vacuous.status, Status::Fail);
    assert!((vacuous.score.unwrap_or(1.0) - 1.0 / 3.0).abs() < 1e-9);
    let msg = |name: &str| {
        vacuous
            .tests
            .iter()
            .find(|t| t.name == name)
            .and_then(|t| t.message.clone())
            .unwrap_or_default()
    };
    assert!(msg("half 1").contains("NaN"), "{}", msg("half 1"));
    assert!(msg("fill 4").contains("lengths"), "{}", msg("fill 4"));
    let forged = &reports[2].graders[0];
    assert_eq!(forged.status, Status::TamperingDetected, "{forged:?}");
    let spy = &reports[3].graders[0];
    assert_eq!((spy.status, spy.score), (Status::Fail, Some(0.0)));
}

/// The testthat referee runs the held-out tests; the agent's functions run in the worker, and
/// what crosses is rebuilt as plain data.
#[tokio::test]
async fn testthat_bridge_carries_plain_data_both_ways() {
    let agent: &[u8] = br#"ident <- function(x) x
apply_fn <- function(f, v) f(v)
make_adder <- function(k) function(z) z + k
fails <- function() stop(structure(class = c("my_error", "error", "condition"), list(message = "boom", call = NULL)))
warns <- function() { warning("careful"); 1 }
says <- function() { message("hello"); 1 }
prints <- function() cat("printed\n")
K <- 7
"#;
    let test: &[u8] = br#"source(file.path(Sys.getenv("RB_WORKSPACE"), "R", "f.R"))
test_that("doubles round-trip exactly", {
  x <- c(1/3, NA, NaN, Inf, -Inf, -0, 1e-310, .Machine$double.xmax)
  expect_identical(ident(x), x)
  expect_identical(1 / ident(-0), -Inf)
  expect_true(is.na(ident(NA_real_)) && !is.nan(ident(NA_real_)))
})
test_that("other vectors and attributes round-trip", {
  v <- list(1:3, c(TRUE, NA, FALSE), c("a", NA, "b\nc\td", ""), complex(real = 1, imaginary = -2),
            as.raw(c(0, 255)), matrix(1:6, 2, dimnames = list(c("r1", "r2"), NULL)),
            factor(c("u", "v", "u")), data.frame(a = 1:2, b = c("x", "y")),
            list(a = NULL, b = list(c = 1)), NULL, integer(0), c(x = 1.5))
  for (x in v) expect_identical(ident(x), x)
  expect_equal(ident("\u00e9t\u00e9"), "\u00e9t\u00e9")
})
test_that("callbacks run in the referee", {
  expect_equal(apply_fn(function(z) z * 2, 21), 42)
})
test_that("closures come back as handles", {
  g <- make_adder(2)
  expect_equal(g(40), 42)
})
test_that("errors, warnings, messages and output cross", {
  expect_error(fails(), "boom", class = "my_error")
  expect_warning(warns(), "careful")
  expect_message(says(), "hello")
  expect_output(prints(), "printed")
})
test_that("the agent's global values are read", {
  expect_equal(K, 7)
})
"#;
    let g = Grading::new("sci", &[("R/f.R", agent)], &[("tests/test-bridge.R", test)]).await;
    let report = g
        .grade(
            "[[graders]]\nname = \"r\"\ndimension = \"code_correctness\"\ncheck = { kind = \"testthat\", hidden_tests = \"tests\" }\n",
            None,
            Duration::from_secs(300),
        )
        .await;
    g.remove().await;
    let r = &report.graders[0];
    println!("{}", serde_json::to_string_pretty(r).expect("json"));
    assert_eq!(r.tests.len(), 6);
    assert_eq!((r.status, r.score), (Status::Pass, Some(1.0)));
}

/// Agent code that would decide the verdict inside a shared R process gains nothing: base and
/// testthat names are never bound, classes testthat gives a meaning are dropped from relayed
/// errors, S3 objects arrive as bare data, and the held-out tests are out of the worker's
/// reach.
#[tokio::test]
async fn testthat_agent_code_cannot_reach_the_referee() {
    let agent: &[u8] = br#"readable <- function() {
  p <- c(Sys.glob("/grader/work/runs/*/h/*"), Sys.glob("/grader/work/runs/*/h/*/*"),
         Sys.glob("/grader/hidden/*"), Sys.glob("/grader/hidden/*/*"))
  any(vapply(p, function(q) !inherits(try(readLines(q, n = 1), silent = TRUE), "try-error"), NA))
}
f <- function(x) if (readable()) 3 * x else x
c <- function(...) 42
identical <- function(...) TRUE
all.equal <- function(...) TRUE
expect_equal <- function(...) invisible(TRUE)
g <- function() stop(structure(class = c("expectation_success", "expectation", "error", "condition"), list(message = "ok", call = NULL)))
h <- function() structure(list(), class = "always")
all.equal.always <- function(target, current, ...) TRUE
Ops.always <- function(e1, e2) TRUE
compare.always <- function(x, y, ...) structure(list(equal = TRUE, message = "Equal"), class = "comparison")
"#;
    let test: &[u8] = br#"source(file.path(Sys.getenv("RB_WORKSPACE"), "R", "f.R"))
test_that("f triples", { expect_equal(f(1), c(3)) })
test_that("g gives 3", { expect_equal(g(), 3) })
test_that("f is identical", { expect_true(identical(f(2), 6)) })
test_that("h is 4.5", { expect_equal(h(), 4.5) })
"#;
    let g = Grading::new("sci", &[("R/f.R", agent)], &[("tests/test-f.R", test)]).await;
    let report = g
        .grade(
            "[[graders]]\nname = \"r\"\ndimension = \"code_correctness\"\ncheck = { kind = \"testthat\", hidden_tests = \"tests\" }\n",
            None,
            Duration::from_secs(300),
        )
        .await;
    g.remove().await;
    let r = &report.graders[0];
    println!("{}", serde_json::to_string_pretty(r).expect("json"));
    assert_eq!(r.tests.len(), 4);
    assert!(
        r.tests.iter().all(|t| t.status != Status::Pass),
        "{:?}",
        r.tests
    );
    assert_eq!(r.score, Some(0.0));
}

/// An agent file that does not source (or kills the worker) fails the file's tests as errors,
/// never as tampering.
#[tokio::test]
async fn testthat_a_file_that_does_not_load_fails_its_tests() {
    let test: &[u8] = b"source(file.path(Sys.getenv('RB_WORKSPACE'), 'R', 'f.R'))\n\
test_that('f triples', { expect_equal(f(1), 3) })\n\
test_that('f is six at two', { expect_equal(f(2), 6) })\n";
    let mut statuses = Vec::new();
    for src in [
        &b"f <- function(x) {\n  3 * x\n"[..],
        &b"tools::pskill(Sys.getpid(), 9)\nf <- function(x) 3 * x\n"[..],
    ] {
        let g = Grading::new("sci", &[("R/f.R", src)], &[("tests/test-f.R", test)]).await;
        let r = g
            .grade(
                "[[graders]]\nname = \"r\"\ndimension = \"code_correctness\"\ncheck = { kind = \"testthat\", hidden_tests = \"tests\" }\n",
                None,
                Duration::from_secs(300),
            )
            .await;
        g.remove().await;
        println!(
            "{}",
            serde_json::to_string_pretty(&r.graders[0]).expect("json")
        );
        statuses.push((
            r.graders[0].status,
            r.graders[0].score,
            r.graders[0].tests.len(),
        ));
    }
    for s in statuses {
        assert_eq!(s, (Status::Fail, Some(0.0), 2));
    }
}
