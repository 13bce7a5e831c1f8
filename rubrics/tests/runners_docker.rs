//! The runners in a real grading container (python image).

mod common;

use std::time::{Duration, Instant};

use common::Grading;
use rubrics::Status;

const SOLUTION: &[u8] = b"import numpy as np\n\ndef mean(xs):\n    return float(np.mean(xs))\n\ndef var(xs):\n    return float(np.var(xs))  # population variance: the tests want the sample one\n";

const TESTS: &[u8] = b"from solution import mean, var\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2.0\n\ndef test_mean_single():\n    assert mean([5]) == 5.0\n\ndef test_sample_var():\n    assert abs(var([1, 2, 3, 4]) - 5 / 3) < 1e-12\n";

#[tokio::test]
async fn pytest_unittest_command_files_per_test_results() {
    let unittest_tests = b"import unittest\nfrom solution import mean\n\nclass T(unittest.TestCase):\n    def test_ok(self):\n        self.assertEqual(mean([2, 4]), 3.0)\n    def test_bad(self):\n        self.assertEqual(mean([2, 4]), 4.0)\n    def test_err(self):\n        mean(None)\n";
    let g = Grading::new(
        "python",
        &[("solution.py", SOLUTION), ("results/notes.md", b"done")],
        &[
            ("tests/test_stats.py", TESTS),
            ("ut/test_u.py", unittest_tests),
            ("check.sh", b"test -f /workspace/results/notes.md\n"),
        ],
    )
    .await;
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "pytest"
            dimension = "code_correctness"
            check = { kind = "pytest", hidden_tests = "tests" }
            [[graders]]
            name = "unittest"
            dimension = "code_correctness"
            check = { kind = "unittest", hidden_tests = "ut" }
            [[graders]]
            name = "notes exist"
            dimension = "task_completeness"
            check = { kind = "command", argv = ["sh", "{hidden}/check.sh"] }
            [[graders]]
            name = "outputs"
            dimension = "task_completeness"
            check = { kind = "files_exist", outputs = ["results/notes.md", "results/missing.csv"] }
            "#,
            None,
            Duration::from_secs(300),
        )
        .await;
    g.remove().await;
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    let py = &report.graders[0];
    assert_eq!(py.status, Status::Fail);
    assert!((py.score.expect("scored") - 2.0 / 3.0).abs() < 1e-12);
    let names: Vec<(&str, Status)> = py
        .tests
        .iter()
        .map(|t| (t.name.as_str(), t.status))
        .collect();
    assert_eq!(
        names,
        vec![
            ("test_stats::test_mean", Status::Pass),
            ("test_stats::test_mean_single", Status::Pass),
            ("test_stats::test_sample_var", Status::Fail)
        ]
    );
    let ut = &report.graders[1];
    assert!(
        (ut.score.expect("scored") - 1.0 / 3.0).abs() < 1e-12,
        "{ut:?}"
    );
    let mut st: Vec<Status> = ut.tests.iter().map(|t| t.status).collect();
    st.sort();
    assert_eq!(st, vec![Status::Pass, Status::Fail, Status::Error]);
    assert_eq!(report.graders[2].status, Status::Pass);
    assert_eq!(report.graders[3].score, Some(0.5));
    // Dimensions use PRBench's defaults restricted to the two used ones.
    let code = report.dimensions["code_correctness"].weight;
    assert!((code - 0.30 / 0.35).abs() < 1e-12);
    let expected = (0.30 * (2.0 / 3.0 + 1.0 / 3.0) / 2.0 + 0.05 * 0.75) / 0.35;
    assert!((report.score.expect("score") - expected).abs() < 1e-12);
    assert!(!report.passed);
}

#[tokio::test]
async fn forbidden_apis_static_and_runtime() {
    // Static: an aliased attribute chain. Runtime: an import the scan cannot see.
    let static_agent = b"import numpy as np\n\ndef spectrum(x):\n    return np.fft.fft(x)\n";
    let dynamic_agent = b"mod = 'numpy' + '.fft'\nfft = __import__(mod, fromlist=['fft'])\n\ndef spectrum(x):\n    return fft.fft(x)\n";
    let tests = b"from agent import spectrum\n\ndef test_spectrum():\n    assert len(spectrum([1.0, 0.0])) == 2\n";
    let spec = r#"
        [[graders]]
        name = "tests"
        dimension = "code_correctness"
        check = { kind = "pytest", hidden_tests = "tests" }
        [[graders]]
        name = "no fft"
        dimension = "code_correctness"
        check = { kind = "forbidden_api", forbidden = ["numpy.fft"] }
        [[graders]]
        name = "exists"
        dimension = "task_completeness"
        check = { kind = "files_exist", outputs = ["agent.py"] }
    "#;
    for (label, agent, how) in [
        ("static", &static_agent[..], "attribute"),
        ("runtime", &dynamic_agent[..], "runtime"),
    ] {
        let g = Grading::new(
            "python",
            &[("agent.py", agent)],
            &[("tests/test_agent.py", tests)],
        )
        .await;
        let report = g.grade(spec, None, Duration::from_secs(300)).await;
        g.remove().await;
        println!(
            "{label}: {}",
            serde_json::to_string_pretty(&report.graders[1]).expect("json")
        );
        let fb = &report.graders[1];
        assert_eq!(fb.status, Status::ForbiddenApi, "{label}");
        assert_eq!(fb.score, Some(0.0));
        assert!(
            fb.details.iter().any(|d| d.contains(how)),
            "{label}: {:?}",
            fb.details
        );
        assert_eq!(
            report.dimensions["code_correctness"].score,
            Some(0.0),
            "{label}"
        );
        assert_eq!(
            report.dimensions["task_completeness"].score,
            Some(1.0),
            "{label}"
        );
        assert_eq!(report.status, Status::ForbiddenApi);
    }

    // A clean agent passes the same spec.
    let clean = b"import numpy as np\n\ndef spectrum(x):\n    n = len(x)\n    k = np.arange(n)\n    return np.exp(-2j * np.pi * np.outer(k, k) / n) @ np.asarray(x)\n";
    let g = Grading::new(
        "python",
        &[("agent.py", clean)],
        &[("tests/test_agent.py", tests)],
    )
    .await;
    let report = g.grade(spec, None, Duration::from_secs(300)).await;
    g.remove().await;
    assert_eq!(
        report.graders[1].status,
        Status::Pass,
        "{:?}",
        report.graders[1]
    );
    assert_eq!(report.score, Some(1.0));
    assert!(report.passed);
}

#[tokio::test]
async fn csv_outputs_including_bad_input() {
    let expected = b"# expected curve\nt,signal\n0,0\n1,10\n2,20\n3,30\n";
    let spec = |out: &str| {
        format!(
            r#"
            [[graders]]
            name = "fig"
            dimension = "data_accuracy"
            check = {{ kind = "csv", output = "{out}", hidden_expected = "fig.csv", x_column = "t", rtol = 0.01 }}
            "#
        )
    };
    let g = Grading::new(
        "python",
        &[
            (
                "good.csv",
                b"# by run.py\nT , Signal\n0,0\n0.5,5\n1.5,15\n2.5,25\n3,30.1\n",
            ),
            ("half.csv", b"t,signal\n0,0\n1,10\n2,25\n3,40\n"),
            ("empty.csv", b""),
            ("binary.csv", b"\x89PNG\r\n\x1a\n\0\0\0IHDR"),
        ],
        &[("fig.csv", expected)],
    )
    .await;
    let out = g
        .sh("truncate -s 2G /workspace/huge.csv && ls -la /workspace/huge.csv")
        .await;
    assert!(out.success(), "{out:?}");
    let mut results = Vec::new();
    for f in [
        "good.csv",
        "half.csv",
        "empty.csv",
        "binary.csv",
        "huge.csv",
        "absent.csv",
    ] {
        let start = Instant::now();
        let r = g.grade(&spec(f), None, Duration::from_secs(120)).await;
        results.push((f, r.graders[0].clone(), start.elapsed()));
    }
    g.remove().await;
    for (f, r, took) in &results {
        println!(
            "{f}: {} {:?} in {took:?}: {:?}",
            r.status, r.score, r.details
        );
        assert!(*took < Duration::from_secs(60), "{f} took {took:?}");
    }
    assert_eq!(
        (results[0].1.status, results[0].1.score),
        (Status::Pass, Some(1.0))
    );
    assert_eq!(
        (results[1].1.status, results[1].1.score),
        (Status::Fail, Some(0.5))
    );
    assert!(
        results[1]
            .1
            .details
            .iter()
            .any(|d| d.contains("signal at x=3: got 40, expected 30"))
    );
    for (i, needle) in [
        (2, "empty"),
        (3, "binary"),
        (4, "larger than"),
        (5, "does not exist"),
    ] {
        let r = &results[i].1;
        assert_eq!(r.status, Status::ExtractFailed, "{}", results[i].0);
        assert_eq!(r.score, Some(0.0));
        assert!(
            r.details.iter().any(|d| d.contains(needle)),
            "{}: {:?}",
            results[i].0,
            r.details
        );
    }
}

#[tokio::test]
async fn harbor_verifier_judge_unavailable_and_budget() {
    let g = Grading::new(
        "python",
        &[("answer.txt", b"42")],
        &[
            ("verify.sh", b"if grep -q 42 /workspace/answer.txt; then echo 0.75 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"),
            ("verify_json.sh", b"echo '{\"reward\": 1.0}' > /logs/verifier/reward.json\n"),
            ("crit.md", b"The answer is justified."),
            ("slow.sh", b"sleep 30\n"),
        ],
    )
    .await;
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "harbor txt"
            dimension = "code_correctness"
            check = { kind = "harbor_verifier", hidden_script = "verify.sh" }
            [[graders]]
            name = "harbor json"
            dimension = "code_correctness"
            check = { kind = "harbor_verifier", hidden_script = "verify_json.sh" }
            [[graders]]
            name = "method"
            dimension = "methodology"
            check = { kind = "judge", hidden_criteria = "crit.md", outputs = ["answer.txt"] }
            "#,
            None,
            Duration::from_secs(120),
        )
        .await;
    assert_eq!(report.graders[0].score, Some(0.75));
    assert_eq!(report.graders[1].score, Some(1.0));
    let j = &report.graders[2];
    assert_eq!((j.status, j.score), (Status::JudgeUnavailable, None));
    assert_eq!(
        report.score, None,
        "an ungraded dimension is never a silent 0"
    );
    assert_eq!(report.status, Status::JudgeUnavailable);

    let start = Instant::now();
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "slow"
            dimension = "code_correctness"
            check = { kind = "command", argv = ["sh", "{hidden}/slow.sh"] }
            [[graders]]
            name = "after"
            dimension = "code_correctness"
            check = { kind = "files_exist", outputs = ["answer.txt"] }
            "#,
            None,
            Duration::from_secs(3),
        )
        .await;
    g.remove().await;
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(report.graders[0].status, Status::Timeout);
    assert_eq!(report.graders[1].status, Status::Timeout);
    assert_eq!(report.score, Some(0.0));
}

/// A trusted probe's answer is a property of the pristine image: gradings that share a
/// `ProbeCache` (the green agent keeps one per image) ask it once. Evidence: once the first
/// grading has its answer, later gradings sharing the cache do not notice pytest vanishing
/// from their container (they never ask again), while a grading with its own cache probes and
/// reports the environment broken.
#[tokio::test]
async fn a_probe_is_asked_once_per_shared_cache() {
    const SPEC: &str = r#"
        [[graders]]
        name = "pytest"
        dimension = "code_correctness"
        check = { kind = "pytest", hidden_tests = "tests" }
        "#;
    const PASSING: &[u8] =
        b"from solution import mean\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2.0\n";
    let shared = rubrics::ProbeCache::default();
    let first = Grading::new(
        "python",
        &[("solution.py", SOLUTION)],
        &[("tests/test_stats.py", PASSING)],
    )
    .await;
    let report = first
        .grade_with_probes(SPEC, None, Duration::from_secs(300), shared.clone())
        .await;
    first.remove().await;
    assert_eq!(report.graders[0].status, Status::Pass, "{report:?}");

    let mut statuses = Vec::new();
    for cache in [rubrics::ProbeCache::default(), shared] {
        let g = Grading::new(
            "python",
            &[("solution.py", SOLUTION)],
            &[("tests/test_stats.py", PASSING)],
        )
        .await;
        let gone = g
            .sh("python3 -I -c 'import os, pytest, shutil; shutil.rmtree(os.path.dirname(pytest.__file__))'")
            .await;
        assert!(gone.success(), "{gone:?}");
        let report = g
            .grade_with_probes(SPEC, None, Duration::from_secs(300), cache)
            .await;
        g.remove().await;
        statuses.push(report.graders[0].status);
    }
    // Its own cache: probed, pytest is missing. The shared cache: not probed again.
    assert_eq!(statuses[0], Status::EnvBroken);
    assert_ne!(statuses[1], Status::EnvBroken);
    assert_ne!(statuses[1], Status::Pass);
}
