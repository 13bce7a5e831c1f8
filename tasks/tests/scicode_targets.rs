//! SciCode targets files in upstream's layout (`test_data.h5`): written from our own cases,
//! read back by the importer, checked against derivation; the 65-problem test set (no gold
//! code) imported from one. Needs Docker and a Python with h5py (`.venv`, or
//! `RB_SCICODE_PYTHON`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::child::{ChildSpec, SupervisedChild};
use sandbox::docker::DockerBackend;
use sandbox::{Backend, Owner, Role};
use tasks::import::scicode::{self, ScicodeOptions};
use tasks::import::scicode_h5;
use tasks::{TaskKind, load_task};

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
        run_id: format!("tasks-targets-{}-{nanos}", std::process::id()),
        trial_id: None,
        role: Role::Utility,
    }
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a Python script with the interpreter that reads targets files.
async fn python(args: &[String]) {
    let mut child = SupervisedChild::spawn(ChildSpec {
        program: scicode_h5::default_python().display().to_string(),
        args: args.to_vec(),
        cwd: std::env::temp_dir(),
        ..ChildSpec::default()
    })
    .expect("start python (scripts/bootstrap puts h5py into .venv)");
    let exit = tokio::time::timeout(Duration::from_secs(600), child.wait())
        .await
        .expect("python finished");
    assert!(exit.success(), "{args:?}: {}", child.stderr_tail());
}

fn cases_files(dirs: &[PathBuf]) -> Vec<PathBuf> {
    dirs.iter()
        .map(|d| d.join("hidden").join(scicode::CASES_FILE))
        .collect()
}

fn cases(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(
        &std::fs::read(dir.join("hidden").join(scicode::CASES_FILE)).expect("cases"),
    )
    .expect("cases parse")
}

/// One record per value kind of upstream's layout: arrays, numbers, complex numbers, text,
/// lists (also nested), dicts with text and float keys, sparse matrices (also in a dict), and
/// tuples of them.
fn kinds_record() -> String {
    let gold = "def f(kind):\n    if kind == 'sparse':\n        return sparse.csr_matrix(np.array([[0.0, 2.0], [3.5, 0.0]]))\n    if kind == 'sparse_dict':\n        return {'H': sparse.coo_matrix(np.eye(3))}\n    return {\n        'array': np.array([[1.0, 2.5], [3.0, -4.0]]),\n        'complex': np.array([1 + 2j, -0.5j]),\n        'number': 2.75,\n        'int': 7,\n        'bool': True,\n        'text': 'ground state',\n        'list': [1.5, np.array([1.0, 2.0]), 'x'],\n        'nested': [0.5, [1.0, 2.0]],\n        'dict': {'a': 1.0, 'b': np.array([2.0, 3.0])},\n        'float_keys': {0.5: 1.0, 2.0: 3.0},\n        'tuple': (np.array([1.0, 2.0]), 'label', 3.0),\n    }[kind]\n";
    let tests = [
        "assert np.allclose(f('array'), target)",
        "assert np.allclose(f('complex'), target)",
        "assert np.isclose(f('number'), target)",
        "assert f('int') == target",
        "assert f('bool') == target",
        "assert f('text') == target",
        "from scicode.compare.cmp import cmp_tuple_or_list\nassert cmp_tuple_or_list(f('nested'), target)",
        "from scicode.compare.cmp import are_dicts_close\nassert are_dicts_close(f('dict'), target)",
        "from scicode.compare.cmp import are_dicts_close\nassert are_dicts_close(f('float_keys'), target)",
        "a, b, c = target\nx, y, z = f('tuple')\nassert np.allclose(x, a) and y == b and np.isclose(z, c)",
        "from scicode.compare.cmp import are_csc_matrix_close\nassert are_csc_matrix_close(f('sparse'), target)",
        "assert np.allclose(f('sparse_dict')['H'].toarray(), target['H'].toarray())",
    ];
    let record = serde_json::json!({
        "problem_id": "kinds",
        "problem_name": "value kinds",
        "problem_description_main": "Return values of every kind a targets file holds.",
        "required_dependencies": "import numpy as np\nfrom scipy import sparse",
        "sub_steps": [{
            "step_number": "kinds.1",
            "step_description_prompt": "Write f.",
            "ground_truth_code": gold,
            "function_header": "def f(kind):",
            "test_cases": tests,
            "return_line": "",
        }],
    });
    format!("{record}\n")
}

/// Dev problems (a subset, for time) and a record of every value kind: targets derived from
/// gold code, written in upstream's layout, read back by a second import: no disagreement, no
/// failure, and the gold code passes the file's targets (the import verifies it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_data_targets_written_in_upstreams_layout_read_back_as_derived() {
    let backend = DockerBackend::connect().await.expect("docker daemon");
    let image = python_image(&backend).await;
    let owner = owner();
    let run_id = owner.run_id.clone();
    let work = tempfile::tempdir().expect("tempdir");
    let kinds = work.path().join("kinds.jsonl");
    std::fs::write(&kinds, kinds_record()).expect("write");
    let dev = bench_data::path("scicode/problems_dev.jsonl");

    let mut options = ScicodeOptions::new(image, owner);
    options.timeout = Duration::from_secs(900);
    let mut derived = Vec::new();
    for (src, only, out) in [
        (&kinds, vec![], "derived-kinds"),
        (&dev, vec!["38".to_owned(), "70".to_owned()], "derived-dev"),
    ] {
        options.only = only;
        let done = scicode::import_all(src, &work.path().join(out), &options, &backend).await;
        let done = done.unwrap_or_else(|e| panic!("import {}: {e}", src.display()));
        assert!(done.failed.is_empty(), "{:?}", done.failed);
        derived.extend(done.written);
    }
    assert_eq!(derived.len(), 3);

    let h5 = work.path().join("test_data.h5");
    let report = scicode_h5::write(
        &scicode_h5::default_python(),
        &cases_files(&derived),
        &h5,
        Duration::from_secs(300),
    )
    .await
    .expect("write the targets file");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.written, 1 + 3 + 8);

    options.targets = Some(h5.clone());
    let mut published = Vec::new();
    for (src, only, out) in [
        (&kinds, vec![], "published-kinds"),
        (
            &dev,
            vec!["38".to_owned(), "70".to_owned()],
            "published-dev",
        ),
    ] {
        options.only = only;
        let done = scicode::import_all(src, &work.path().join(out), &options, &backend).await;
        let done = done.unwrap_or_else(|e| panic!("import {} with targets: {e}", src.display()));
        assert!(done.failed.is_empty(), "{:?}", done.failed);
        assert!(done.disagreements.is_empty(), "{:?}", done.disagreements);
        published.extend(done.written);
    }
    let _ = backend.reap(Some(&run_id)).await;
    assert_eq!(published.len(), 3);

    // The file's targets are what the tasks hold, in each value kind.
    let kinds_cases = cases(&published[0]).to_string();
    for tag in [
        "$ndarray",
        "$complex",
        "$tuple",
        "$sparse",
        "$dict",
        "ground state",
    ] {
        assert!(kinds_cases.contains(tag), "no {tag} in {kinds_cases}");
    }
    for dir in &published {
        let task = load_task(dir).expect("validates");
        assert!(task.oracle_solution().is_some(), "gold code: an oracle");
        let toml = std::fs::read_to_string(dir.join("task.toml")).expect("task.toml");
        assert!(toml.contains("targets = \"published\""), "{toml}");
    }

    // A file that disagrees with the gold code: reported per test, the file's target kept.
    let mut wrong = cases(&derived[0]);
    wrong["steps"][0]["test_cases"][2]["target"] = serde_json::json!(3.0);
    let wrong_cases = work.path().join("wrong.json");
    std::fs::write(&wrong_cases, wrong.to_string()).expect("write");
    let wrong_h5 = work.path().join("wrong.h5");
    scicode_h5::write(
        &scicode_h5::default_python(),
        &[wrong_cases],
        &wrong_h5,
        Duration::from_secs(300),
    )
    .await
    .expect("write");
    options.targets = Some(wrong_h5);
    options.only = Vec::new();
    options.verify_gold = false;
    let done = scicode::import_all(&kinds, &work.path().join("wrong"), &options, &backend)
        .await
        .expect("import");
    let _ = backend.reap(Some(&run_id)).await;
    assert_eq!(done.disagreements.len(), 1, "{:?}", done.disagreements);
    let d = &done.disagreements[0];
    assert_eq!((d.step_id.as_str(), d.test), ("kinds.1", 3));
    assert!(d.to_string().contains("disagree"), "{d}");
    assert_eq!(
        cases(&done.written[0])["steps"][0]["test_cases"][2]["target"],
        3.0
    );
}

/// The 65 test-set problems (291 steps, 3 of them untested upstream; no gold code) import from a
/// targets file of the right shape (placeholder values): every task validates, has no oracle,
/// and holds one case per upstream test; the untested steps' code is given in the workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_data_the_test_set_imports_from_a_targets_file() {
    let backend = DockerBackend::connect().await.expect("docker daemon");
    let image = python_image(&backend).await;
    let owner = owner();
    let run_id = owner.run_id.clone();
    let work = tempfile::tempdir().expect("tempdir");
    let src = bench_data::path("scicode/problems_test.jsonl");
    let placeholders = work.path().join("placeholders");
    python(&[
        manifest()
            .join("tests/fixtures/scicode/placeholder_targets.py")
            .display()
            .to_string(),
        manifest().join("../rubrics/python").display().to_string(),
        src.display().to_string(),
        placeholders.display().to_string(),
    ])
    .await;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&placeholders)
        .expect("placeholders")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 65);
    let h5 = work.path().join("test_data.h5");
    let report = scicode_h5::write(
        &scicode_h5::default_python(),
        &files,
        &h5,
        Duration::from_secs(300),
    )
    .await
    .expect("write the targets file");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_eq!(report.written, 288);

    // Without the file, a record without gold code fails with the fix.
    let mut options = ScicodeOptions::new(image, owner);
    options.only = vec!["2".into()];
    let done = scicode::import_all(&src, &work.path().join("none"), &options, &backend)
        .await
        .expect("import");
    assert!(done.written.is_empty());
    assert!(
        done.failed[0].cause.contains("--targets test_data.h5"),
        "{}",
        done.failed[0]
    );

    options.only = Vec::new();
    options.targets = Some(h5);
    let dest = work.path().join("tasks");
    let done = scicode::import_all(&src, &dest, &options, &backend).await;
    let _ = backend.reap(Some(&run_id)).await;
    let done = done.expect("import");
    assert!(
        done.failed.is_empty(),
        "{}",
        done.failed
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(done.written.len(), 65);
    let (mut stages, mut graded) = (0, 0);
    for dir in &done.written {
        let task = load_task(dir).expect("imported task validates");
        assert_eq!(task.kind(), TaskKind::Scicode);
        assert!(task.oracle_solution().is_none(), "no gold code: no oracle");
        stages += task.stages().len();
        let c = cases(dir);
        for step in c["steps"].as_array().expect("steps") {
            assert!(!step["test_cases"].as_array().expect("cases").is_empty());
            graded += 1;
        }
    }
    assert_eq!(stages, 291);
    assert_eq!(graded, 288);
    // 31.2 unpacks a pair from `target`: its placeholder is a pair.
    let c31 = cases(&dest.join("scicode-31"));
    let step = c31["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["step_id"] == "31.2")
        .expect("31.2");
    assert_eq!(
        step["test_cases"][0]["target"]["$tuple"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    // 62.1 is not tested upstream: its code is given in the workspace, not graded.
    let given =
        std::fs::read_to_string(dest.join("scicode-62/workspace/solution.py")).expect("given");
    assert!(given.contains("class EnlargedBlock"), "{given}");
    let c62 = cases(&dest.join("scicode-62")).to_string();
    assert!(!c62.contains("\"62.1\""));
}
