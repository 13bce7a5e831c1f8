//! Importing the vendored SciCode problems in a real Docker sandbox: targets are derived from
//! the gold code, the gold code passes every step, and a seeded wrong answer fails.

use std::path::PathBuf;

use sandbox::docker::DockerBackend;
use sandbox::{Backend, Owner, Role};
use tasks::import::scicode::{self, Protocol, ScicodeOptions};
use tasks::{TaskKind, load_task};

fn problems() -> PathBuf {
    bench_data::path("scicode/problems_dev.jsonl")
}

/// The platform's python image (built from its recipe if missing; a no-op when present).
async fn python_image(backend: &DockerBackend) -> String {
    sandbox::images::ensure_named(backend, "python", |_| {})
        .await
        .expect("build the python image")
}

fn owner() -> Owner {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    Owner {
        run_id: format!("tasks-test-{}-{nanos}", std::process::id()),
        trial_id: None,
        role: Role::Utility,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_data_imported_scicode_gold_passes_every_step_and_a_wrong_answer_fails() {
    let backend = DockerBackend::connect().await.expect("docker daemon");
    let image = python_image(&backend).await;
    let owner = owner();
    let run_id = owner.run_id.clone();
    let dest = tempfile::tempdir().expect("tempdir");

    let mut options = ScicodeOptions::new(image, owner);
    options.verify_gold = true; // the import itself fails unless gold passes every case
    let result = scicode::import(&problems(), dest.path(), &options, &backend).await;
    let dirs = match result {
        Ok(dirs) => dirs,
        Err(err) => {
            let _ = backend.reap(Some(&run_id)).await;
            panic!("import failed: {err}");
        }
    };
    assert_eq!(dirs.len(), 10);
    let mut steps = 0;
    for dir in &dirs {
        let task = load_task(dir).expect("imported task validates");
        assert_eq!(task.kind(), TaskKind::Scicode);
        steps += task.stages().len();
        let cases: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join("hidden").join(scicode::CASES_FILE)).expect("cases"),
        )
        .expect("cases parse");
        let case_steps = cases["steps"].as_array().expect("steps");
        assert_eq!(case_steps.len(), task.stages().len());
        assert!(
            case_steps
                .iter()
                .all(|s| !s["test_cases"].as_array().expect("cases").is_empty())
        );
    }
    assert_eq!(steps, 27);

    // The gold solution passes through the standalone check too.
    let task38 = dest.path().join("scicode-38");
    let cases38 = task38.join("hidden").join(scicode::CASES_FILE);
    let gold = task38.join("solution").join("solution.py");
    let report = scicode::check_in_sandbox(&backend, &options, &cases38, &gold)
        .await
        .expect("check gold");
    assert!(report.passed, "{report:?}");
    assert_eq!(report.steps.len(), 3);

    // A seeded wrong answer: `cross` with the wrong sign.
    let wrong = dest.path().join("wrong.py");
    let mut text = std::fs::read_to_string(&gold).expect("gold text");
    text.push_str("\n\ndef cross(a, b):\n    return -np.cross(a, b)\n");
    std::fs::write(&wrong, text).expect("write wrong");
    let report = scicode::check_in_sandbox(&backend, &options, &cases38, &wrong)
        .await
        .expect("check wrong");
    assert!(!report.passed, "{report:?}");
    assert_eq!(report.steps[0].step_id, "38.1");
    assert_eq!(report.steps[0].passed, 0, "{report:?}");

    // Step by step (upstream's main setting): one task per problem, a turn per step, each
    // prompt showing the agent's own code (filled in by the green agent), each step graded on
    // its turn's copy of `solution.py`.
    let step_dest = tempfile::tempdir().expect("tempdir");
    let mut step_options = options.clone();
    step_options.protocol = Protocol::StepByStep;
    step_options.with_background = true;
    step_options.only = vec!["29".into()];
    let dirs = scicode::import(&problems(), step_dest.path(), &step_options, &backend)
        .await
        .expect("step-by-step import");
    assert_eq!(dirs.len(), 1);
    assert!(dirs[0].ends_with("scicode-29"));
    let task = load_task(&dirs[0]).expect("validates");
    assert_eq!(
        task.turns().map(|t| t.kept_file.as_str()),
        Some("solution.py")
    );
    let stages: Vec<&str> = task.stages().iter().map(|s| s.id.as_str()).collect();
    assert_eq!(stages, ["29.1", "29.2", "29.3"]);
    let last = &task.stages()[2].prompt;
    assert!(last.contains("Background"), "background included");
    assert!(
        last.contains(tasks::turns::KEPT_TOKEN) && !last.contains("def normalize"),
        "the prompt shows the agent's own code, never the gold code:\n{last}"
    );
    assert_eq!(task.metadata()["protocol"].as_str(), Some("step-by-step"));
    assert_eq!(task.grading().graders.len(), 3);
    let first = std::fs::read_to_string(dirs[0].join("workspace/solution.py")).expect("first");
    assert!(
        !first.contains("def "),
        "step 1 starts from the dependencies alone:\n{first}"
    );
    let report = scicode::check_in_sandbox(
        &backend,
        &options,
        &dirs[0].join("hidden/scicode_cases_29.3.json"),
        &dirs[0].join("solution/turn-3.py"),
    )
    .await
    .expect("check the oracle's last turn");
    assert!(report.passed, "{report:?}");
    assert_eq!(report.steps.len(), 1);

    let leftover = backend.reap(Some(&run_id)).await.expect("reap");
    assert_eq!(leftover, 0, "the importer removes its sandboxes");
}

/// `--perturbed-inputs`: each case gets a marked perturbed copy with a target from the gold
/// code; gold passes them all; a real fault that SciCode's own inputs cannot see (19.2's
/// `sigma_y` with `+1j`, invisible on real sparse states) passes the own cases and fails the
/// perturbed copies. Off by default.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_data_perturbed_inputs_reach_a_fault_the_benchmark_inputs_cannot_see() {
    let backend = DockerBackend::connect().await.expect("docker daemon");
    let image = python_image(&backend).await;
    let owner = owner();
    let run_id = owner.run_id.clone();
    let dest = tempfile::tempdir().expect("tempdir");
    let mut options = ScicodeOptions::new(image, owner);
    assert!(!options.perturbed_inputs, "off by default");
    options.perturbed_inputs = true;
    options.only = vec!["19".into()];
    let result = scicode::import(&problems(), dest.path(), &options, &backend).await;
    let dirs = match result {
        Ok(dirs) => dirs,
        Err(err) => {
            let _ = backend.reap(Some(&run_id)).await;
            panic!("import failed: {err}");
        }
    };
    let task = &dirs[0];
    load_task(task).expect("validates");
    let cases_path = task.join("hidden").join(scicode::CASES_FILE);
    let cases: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cases_path).expect("cases")).expect("parse");
    let step = cases["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["step_id"] == "19.2")
        .expect("step 19.2");
    let all = step["test_cases"].as_array().expect("cases");
    let copies: Vec<&serde_json::Value> = all
        .iter()
        .filter(|c| c.get("perturbed").is_some())
        .collect();
    assert_eq!(all.len(), 8, "four own cases, four perturbed copies");
    assert_eq!(copies.len(), 4);
    for (i, c) in copies.iter().enumerate() {
        assert_eq!(c["perturbed"]["of"], i + 1, "{c}");
        assert!(
            !c["perturbed"]["inputs"]
                .as_array()
                .expect("inputs")
                .is_empty()
        );
        assert!(c["target"].is_number(), "a derived target: {c}");
    }
    assert_eq!(
        cases["perturbed_cases"].as_u64(),
        Some(
            cases["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .flat_map(|s| s["test_cases"].as_array().expect("cases"))
                .filter(|c| c.get("perturbed").is_some())
                .count() as u64
        )
    );

    // The same cases without the copies: what a default import grades.
    let mut own = cases.clone();
    for s in own["steps"].as_array_mut().expect("steps") {
        s["test_cases"]
            .as_array_mut()
            .expect("cases")
            .retain(|c| c.get("perturbed").is_none());
    }
    let own_path = dest.path().join("own_cases.json");
    std::fs::write(&own_path, serde_json::to_vec(&own).expect("json")).expect("write");

    let gold = task.join("solution").join("solution.py");
    let report = scicode::check_in_sandbox(&backend, &options, &cases_path, &gold)
        .await
        .expect("check gold");
    assert!(
        report.passed,
        "gold passes its perturbed copies: {report:?}"
    );
    let gold_text = std::fs::read_to_string(&gold).expect("gold text");
    let faulty = gold_text.replace("np.array([[0,-1j],[1j,0]])", "np.array([[0,1j],[1j,0]])");
    assert_ne!(faulty, gold_text, "the fault is seeded");
    let wrong = dest.path().join("wrong.py");
    std::fs::write(&wrong, faulty).expect("write");
    let report = scicode::check_in_sandbox(&backend, &options, &own_path, &wrong)
        .await
        .expect("check on own inputs");
    assert!(
        report.passed,
        "SciCode's own inputs cannot see it: {report:?}"
    );
    let report = scicode::check_in_sandbox(&backend, &options, &cases_path, &wrong)
        .await
        .expect("check on perturbed inputs");
    assert!(!report.passed, "{report:?}");
    let s2 = report
        .steps
        .iter()
        .find(|s| s.step_id == "19.2")
        .expect("19.2");
    assert!(s2.total == 8 && s2.passed < s2.total, "{s2:?}");

    let leftover = backend.reap(Some(&run_id)).await.expect("reap");
    assert_eq!(leftover, 0, "the importer removes its sandboxes");
}

/// Targets of every shape survive derive → JSON → check: NaN, infinities, complex numbers,
/// tuples, non-string dict keys, complex and boolean arrays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encoded_targets_round_trip_through_the_cases_file() {
    let backend = DockerBackend::connect().await.expect("docker daemon");
    let image = python_image(&backend).await;
    let owner = owner();
    let run_id = owner.run_id.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let gold = "def f(kind):\n    return {\n        'nan': float('nan'),\n        'inf': (float('inf'), -float('inf')),\n        'complex': 1 + 2j,\n        'dict': {1: 'a', (2, 3): [None, True]},\n        'array': np.array([[1 + 1j, np.nan], [2, -np.inf]]),\n        'bools': np.array([True, False]),\n        'nested': {'x': (np.float64(0.5), np.int64(3))},\n    }[kind]\n";
    let tests = [
        "assert np.allclose(f('nan'), target, equal_nan=True)\nassert np.isnan(target)",
        "assert f('inf') == target",
        "assert f('complex') == target",
        "assert f('dict') == target",
        "assert np.allclose(f('array'), target, equal_nan=True)\nassert target.dtype == np.complex128 and target.shape == (2, 2)",
        "assert np.array_equal(f('bools'), target)\nassert target.dtype == bool",
        "assert f('nested') == target\nassert isinstance(target['x'], tuple)",
    ];
    let record = serde_json::json!({
        "problem_id": "enc",
        "problem_name": "encoding",
        "problem_description_main": "Return values of many shapes.",
        "required_dependencies": "import numpy as np",
        "sub_steps": [{
            "step_number": "enc.1",
            "step_description_prompt": "Write f.",
            "ground_truth_code": gold,
            "function_header": "def f(kind):",
            "test_cases": tests,
            "return_line": "",
        }],
    });
    let src = dir.path().join("enc.jsonl");
    std::fs::write(&src, format!("{record}\n")).expect("write");
    let mut options = ScicodeOptions::new(image, owner);
    options.timeout = std::time::Duration::from_secs(300);
    let result = scicode::import(&src, &dir.path().join("out"), &options, &backend).await;
    let _ = backend.reap(Some(&run_id)).await;
    let dirs = result.expect("import with gold verification");
    let text =
        std::fs::read_to_string(dirs[0].join("hidden").join(scicode::CASES_FILE)).expect("cases");
    for tag in [
        "$float",
        "$complex",
        "$tuple",
        "$dict",
        "$ndarray",
        "complex128",
    ] {
        assert!(text.contains(tag), "no {tag} in {text}");
    }
}

/// Upstream's harness semantics: a step's cases run in order in one namespace (case 2 uses the
/// `x` case 1 defined), `a, b = target` unpacking, and a helper the case defines that its
/// assertion calls on `target` (pure test code: it runs on the trusted side, on recorded data).
/// Gold passes; a wrong answer fails exactly the cases it should; a helper that calls the code
/// under test on `target` is refused at import.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_namespace_unpacking_and_case_helpers() {
    let backend = DockerBackend::connect().await.expect("docker daemon");
    let image = python_image(&backend).await;
    let owner = owner();
    let run_id = owner.run_id.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let record = |tests: &[&str]| {
        serde_json::json!({
            "problem_id": "ns",
            "problem_description_main": "Double and split.",
            "required_dependencies": "import numpy as np",
            "sub_steps": [{
                "step_number": "ns.1",
                "step_description_prompt": "Write f and g.",
                "ground_truth_code": "def f(v):\n    return 2 * v\n\n\ndef g(v):\n    return v.min(), v.max()\n",
                "function_header": "def f(v):",
                "test_cases": tests,
                "return_line": null,
            }],
        })
        .to_string()
            + "\n"
    };
    let tests = [
        "x = np.array([1.0, 2.0, 4.0])\nassert np.allclose(f(x), target)",
        "assert np.allclose(f(x + 1), target)",
        "lo, hi = target\nassert np.isclose(g(x)[0], lo) and np.isclose(g(x)[1], hi)",
        "def close(a, b):\n    return np.allclose(np.sort(a), np.sort(b))\nassert close(f(x[::-1]), target)",
    ];
    let src = dir.path().join("ns.jsonl");
    std::fs::write(&src, record(&tests)).expect("write");
    let mut options = ScicodeOptions::new(image, owner);
    options.timeout = std::time::Duration::from_secs(300);
    let done = scicode::import_all(&src, &dir.path().join("out"), &options, &backend)
        .await
        .expect("import");
    assert!(done.failed.is_empty(), "{:?}", done.failed);
    let task = &done.written[0];
    let cases: serde_json::Value = serde_json::from_slice(
        &std::fs::read(task.join("hidden").join(scicode::CASES_FILE)).expect("cases"),
    )
    .expect("parse");
    let targets: Vec<String> = cases["steps"][0]["test_cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| c["target"].to_string())
        .collect();
    assert!(targets[1].contains("[4.0,6.0,10.0]"), "{targets:?}");
    assert_eq!(targets[2], r#"{"$tuple":[1.0,4.0]}"#);

    let cases_path = task.join("hidden").join(scicode::CASES_FILE);
    let gold = task.join("solution").join("solution.py");
    let report = scicode::check_in_sandbox(&backend, &options, &cases_path, &gold)
        .await
        .expect("check gold");
    assert!(report.passed, "{report:?}");
    assert_eq!(report.steps[0].passed, 4);
    // `g` with min and max swapped: only the unpacking case fails.
    let wrong = dir.path().join("wrong.py");
    std::fs::write(
        &wrong,
        "import numpy as np\n\ndef f(v):\n    return 2 * v\n\n\ndef g(v):\n    return v.max(), v.min()\n",
    )
    .expect("write");
    let report = scicode::check_in_sandbox(&backend, &options, &cases_path, &wrong)
        .await
        .expect("check wrong");
    assert!(!report.passed);
    assert_eq!(report.steps[0].passed, 3, "{report:?}");
    assert!(
        report.steps[0].errors[0].starts_with("case 3"),
        "{report:?}"
    );

    // A helper that runs the code under test on `target` is not pure test code: refused.
    let impure = dir.path().join("impure.jsonl");
    std::fs::write(
        &impure,
        record(&[
            "def close(a, b):\n    return np.allclose(f(a), b)\nassert close(np.ones(2), target)",
        ]),
    )
    .expect("write");
    let done = scicode::import_all(&impure, &dir.path().join("impure"), &options, &backend)
        .await
        .expect("import");
    let _ = backend.reap(Some(&run_id)).await;
    assert!(done.written.is_empty());
    assert!(
        done.failed[0].cause.contains("a function the test defines"),
        "{}",
        done.failed[0]
    );
}
