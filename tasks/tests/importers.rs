//! Importers other than SciCode (which needs Docker: see `scicode_import.rs`): each imports its
//! fixture or the vendored data into tasks that validate and keep the wall.

use std::path::{Path, PathBuf};

use rubrics::Check;
use tasks::import::{ImportError, harbor, mmsicode, paperbench, prbench, scicoqa};
use tasks::{TaskKind, load_task};

mod common;
use common::assert_wall_holds;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The benchmark samples (`RB_BENCHMARKS`, default `../shared/benchmarks`).
fn shared() -> PathBuf {
    bench_data::dir()
}

/// `docker.pip_install`: what the platform image has (numpy) is not installed again; the rest
/// becomes the task's `environment.pip_install` (a per-task image), written to task.toml and
/// read back by the loader.
#[test]
fn prbench_pip_install_becomes_the_tasks_extra_packages() {
    let dest = tempfile::tempdir().expect("tempdir");
    let dirs =
        prbench::import(&fixtures().join("prbench_pip/table-format"), dest.path()).expect("import");
    let task = load_task(&dirs[0]).expect("validates");
    assert_eq!(task.environment().image, "python");
    assert_eq!(task.environment().pip_install, ["tabulate"]);
    let toml = std::fs::read_to_string(dirs[0].join("task.toml")).expect("task.toml");
    assert!(toml.contains("pip_install = [\"tabulate\"]"), "{toml}");
    // Tasks without extra packages keep no key.
    let plain = prbench::import(
        &fixtures().join("prbench/decay-chain"),
        &dest.path().join("p"),
    )
    .expect("import");
    let toml = std::fs::read_to_string(plain[0].join("task.toml")).expect("task.toml");
    let environment = toml
        .split("[environment]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("an [environment] table");
    assert!(!environment.contains("pip_install"), "{toml}");
    assert!(
        load_task(&plain[0])
            .expect("loads")
            .environment()
            .pip_install
            .is_empty()
    );
}

/// Our fixtures in PRBench's published format: several CSVs with reference code (an oracle
/// that runs it in its own layout) and a code-only variant with its own suffix, outputs and
/// weights; the ground truth held out; CRLF read as text.
#[test]
fn prbench_published_format_imports_with_its_code_only_variant() {
    let dest = tempfile::tempdir().expect("tempdir");
    let dirs =
        prbench::import(&fixtures().join("prbench/decay-chain"), dest.path()).expect("import");
    assert_eq!(dirs.len(), 2);
    let full = load_task(&dirs[0]).expect("full validates");
    assert_eq!(full.id(), "task_decay_chain");
    assert_eq!(full.kind(), TaskKind::Prbench);
    assert_eq!(full.environment().image, "python");
    assert_eq!(full.environment().memory_mb, 2048);
    assert_eq!(full.environment().agent_timeout_secs, 1800);
    let dims = full.grading().dimensions.clone().expect("weights");
    let judged: Vec<(&str, f64)> = dims
        .iter()
        .filter(|(_, w)| **w > 0.0)
        .map(|(k, w)| (k.as_str(), *w))
        .collect();
    assert_eq!(
        judged,
        [
            ("code_correctness", 0.15),
            ("completeness", 0.15),
            ("data_accuracy", 0.50),
            ("methodology_understanding", 0.20)
        ],
        "the task's dimensions, names and weights as written"
    );
    assert_eq!(dims["measured_data_accuracy"], 0.0);
    assert_eq!(dims["measured_completeness"], 0.0);
    let csvs: Vec<(&str, &str, Option<f64>)> = full
        .grading()
        .graders
        .iter()
        .filter_map(|g| match &g.check {
            Check::Csv(c) => Some((c.output.as_str(), c.hidden_expected.as_str(), c.rtol)),
            _ => None,
        })
        .collect();
    assert_eq!(
        csvs,
        [
            (
                "data/fig2_populations.csv",
                "ground_truth/data/fig2_populations.csv",
                Some(0.02)
            ),
            (
                "data/table1_halflives.csv",
                "ground_truth/data/table1_halflives.csv",
                Some(0.02)
            ),
        ],
        "one comparison per figure, the tolerance the task states (~2%)"
    );
    let judge = full
        .grading()
        .graders
        .iter()
        .find_map(|g| match &g.check {
            Check::PrbenchDimension(d) if d.name == "code_correctness" => Some(d),
            _ => None,
        })
        .expect("code_correctness judged");
    assert_eq!(judge.banned_cap, Some(0.2));
    assert!(
        judge
            .hidden_references
            .contains(&"ground_truth/metadata.md".to_owned())
    );
    assert!(
        judge
            .hidden_references
            .contains(&"ground_truth/reproduce/decay.py".to_owned())
    );
    assert!(
        judge
            .hidden_references
            .contains(&"ground_truth/data/fig2_populations.csv".to_owned())
    );
    let view = full.agent_view();
    assert_eq!(view.attachments, ["paper.md"]);
    assert!(
        view.instruction.contains("/workspace/paper.md"),
        "the paper is named"
    );
    assert!(view.instruction.contains("Reproduce Figure 2 and Table 1"));
    assert!(!view.instruction.contains('\r'), "CRLF read as text");
    assert!(view.instruction.contains("- `data/table1_halflives.csv`"));
    assert!(
        dirs[0]
            .join("hidden/ground_truth/reproduce/fig2_compute.py")
            .is_file()
    );
    assert!(
        !dirs[0].join("workspace/data").exists(),
        "ground truth is held out"
    );
    let solve = std::fs::read_to_string(dirs[0].join("solution/solve.sh")).expect("oracle");
    assert!(
        solve.contains("python3 fig2_compute.py") && solve.contains("python3 table1_compute.py")
    );
    assert_wall_holds(&full);

    let code_only = load_task(&dirs[1]).expect("code-only validates");
    assert_eq!(code_only.id(), "task_decay_chain-code-only");
    let dims = code_only.grading().dimensions.clone().expect("weights");
    assert_eq!(dims["code_correctness"], 0.60);
    assert_eq!(dims["code_quality"], 0.10);
    assert!(
        !dims.contains_key("measured_data_accuracy"),
        "no data in code-only mode"
    );
    assert_eq!(
        code_only.expected_outputs(),
        ["reproduction/ANALYSIS.md", "reproduction/decay.py"]
    );
    let view = code_only.agent_view();
    assert!(
        view.instruction.contains("## Code-only mode"),
        "its own suffix"
    );
    assert!(
        !dirs[1].join("solution").exists(),
        "no oracle: no data to regenerate"
    );
    assert!(!dirs[1].join("hidden/ground_truth/data").exists());
    let methodology = code_only
        .grading()
        .graders
        .iter()
        .find_map(|g| match &g.check {
            Check::PrbenchDimension(d) if d.name == "methodology_understanding" => Some(d),
            _ => None,
        })
        .expect("methodology judged");
    assert!(methodology.code_only);
    assert!(
        methodology.description.contains("Bateman"),
        "a code-only dimension without a description takes the full mode's"
    );
    assert_wall_holds(&code_only);
}

/// The re-run evidence (issue 30): an imported task re-runs the agent's entry script, found
/// among the conventional names, on the CSV files it expects (weight 0, at the data tolerance);
/// `code_correctness` and the data dimensions go to 0 on fabrication; the instruction asks for
/// the entry script and the oracle delivers one. Code-only mode re-runs nothing.
#[test]
fn prbench_imports_rerun_the_agents_entry_script_as_evidence() {
    let dest = tempfile::tempdir().expect("tempdir");
    let dirs =
        prbench::import(&fixtures().join("prbench/decay-chain"), dest.path()).expect("import");
    let full = load_task(&dirs[0]).expect("full validates");
    let dims = full.grading().dimensions.clone().expect("weights");
    assert_eq!(dims["measured_reproduction"], 0.0, "evidence, not scored");
    let reruns: Vec<&rubrics::checks::reproduce::Reproduce> = full
        .grading()
        .graders
        .iter()
        .filter_map(|g| match &g.check {
            Check::Reproduce(r) => {
                assert_eq!(g.dimension, "measured_reproduction");
                Some(r)
            }
            _ => None,
        })
        .collect();
    assert_eq!(reruns.len(), 1, "one re-run for all the data files");
    let r = reruns[0];
    assert!(r.argv.is_empty(), "no command named: it is discovered");
    assert_eq!(
        r.entry_candidates,
        [
            "reproduce.sh",
            "reproduce.py",
            "run.sh",
            "run.py",
            "main.py"
        ]
    );
    assert_eq!(
        r.outputs,
        ["data/fig2_populations.csv", "data/table1_halflives.csv"]
    );
    assert_eq!(r.rtol, Some(0.02), "the task's data tolerance");
    let zeroed: Vec<(&str, bool)> = full
        .grading()
        .graders
        .iter()
        .filter_map(|g| match &g.check {
            Check::PrbenchDimension(d) => Some((d.name.as_str(), d.zero_if_fabricated)),
            _ => None,
        })
        .collect();
    assert_eq!(
        zeroed,
        [
            ("methodology_understanding", false),
            ("code_correctness", true),
            ("data_accuracy", true),
            ("completeness", false)
        ]
    );
    let view = full.agent_view();
    assert!(
        view.instruction.contains("`reproduce.sh`") && view.instruction.contains("`reproduce.py`"),
        "the agent is told which entry script is re-run: {}",
        view.instruction
    );
    let solve = std::fs::read_to_string(dirs[0].join("solution/solve.sh")).expect("oracle");
    assert!(
        solve.contains("$here/reproduce.sh"),
        "the oracle delivers the entry script: {solve}"
    );

    let code_only = load_task(&dirs[1]).expect("code-only validates");
    assert!(
        !code_only
            .grading()
            .graders
            .iter()
            .any(|g| matches!(g.check, Check::Reproduce(_))),
        "code-only agents run nothing"
    );
    assert!(
        !code_only
            .agent_view()
            .instruction
            .contains("`reproduce.sh`")
    );
}

/// A trivial task (no reference code: no oracle) and a task with banned libraries (its
/// metadata's table becomes a `forbidden_api` scan); a folder of tasks imports each.
#[test]
fn prbench_folder_of_tasks_reports_each() {
    let dest = tempfile::tempdir().expect("tempdir");
    let results = prbench::import_all(&fixtures().join("prbench"), dest.path());
    let names: Vec<String> = results
        .iter()
        .map(|r| {
            r.source
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(names, ["banned-fit", "decay-chain", "hello-ones"]);
    assert!(results.iter().all(|r| r.result.is_ok()), "{results:?}");
    let hello = load_task(&dest.path().join("test_hello_ones")).expect("validates");
    assert!(
        hello.oracle_solution().is_none(),
        "no reference code: no oracle"
    );
    let dims = hello.grading().dimensions.clone().expect("weights");
    assert_eq!(dims["correctness"], 1.0, "free-form dimension names");
    assert_eq!(hello.environment().agent_timeout_secs, 300);
    let banned = load_task(&dest.path().join("task_banned_fit")).expect("validates");
    assert_eq!(
        banned.agent_view().constraints.forbidden_modules,
        ["sklearn", "statsmodels", "lmfit"]
    );
    assert!(banned.grading().graders.iter().any(|g| matches!(&g.check,
        Check::ForbiddenApi(f) if f.forbidden == ["sklearn", "statsmodels", "lmfit"])));

    // One bad task among good ones: each task's result, the bad one named.
    let dir = tempfile::tempdir().expect("tempdir");
    copy(
        &fixtures().join("prbench/hello-ones"),
        &dir.path().join("a-good"),
    );
    copy(
        &fixtures().join("prbench/hello-ones"),
        &dir.path().join("b-bad"),
    );
    let yaml = dir.path().join("b-bad/task.yaml");
    let text = std::fs::read_to_string(&yaml)
        .expect("read")
        .replace("task_id: test_hello_ones", "task_id: other\nvenue: nowhere")
        .replace("  timeout: 300", "  timeout: 300\n  gpus: 1")
        .replace("weight: 1.0", "weight: 1.0\n      rubric: x");
    std::fs::write(&yaml, text).expect("write");
    let results = prbench::import_all(dir.path(), &dir.path().join("out"));
    assert_eq!(results.len(), 2);
    assert!(results[0].result.is_ok());
    let err = results[1]
        .result
        .as_ref()
        .expect_err("unknown fields")
        .to_string();
    assert!(
        err.contains("b-bad/task.yaml")
            && err.contains("venue, docker.gpus, grading.dimensions[].rubric"),
        "every unsupported field named at once: {err}"
    );
}

#[test]
fn harbor_fixture_imports() {
    let dest = tempfile::tempdir().expect("tempdir");
    let dir = harbor::import(
        &fixtures().join("harbor/word-count"),
        dest.path(),
        &harbor::HarborOptions::default(),
    )
    .expect("import");
    let task = load_task(&dir).expect("validates");
    assert_eq!(task.id(), "word-count");
    assert_eq!(task.kind(), TaskKind::Harbor);
    assert_eq!(task.environment().image, "python");
    assert_eq!(task.environment().agent_timeout_secs, 300);
    assert_eq!(task.environment().grading_timeout_secs, 60);
    assert!(
        matches!(&task.grading().graders[0].check, Check::HarborVerifier(rubrics::checks::harbor_verifier::HarborVerifier { hidden_script }) if hidden_script == "rb_verifier.sh")
    );
    let files: Vec<String> = task
        .agent_view()
        .workspace
        .files()
        .expect("files")
        .into_iter()
        .map(|f| f.relative)
        .collect();
    assert_eq!(files, ["input.txt"]);
    assert!(dir.join("hidden/environment/Dockerfile").is_file());
    assert_wall_holds(&task);
}

/// Harbor's own paths: tests in `/tests`, the agent's files in the image's `WORKDIR` (`/app`),
/// the reward in `/logs/verifier/reward.json`; the wrapper links them, the instruction says so.
#[test]
fn harbor_tasks_written_for_app_and_tests_paths_import() {
    let dest = tempfile::tempdir().expect("tempdir");
    let dir = harbor::import(
        &fixtures().join("harbor/app-paths"),
        dest.path(),
        &harbor::HarborOptions::default(),
    )
    .expect("import");
    let task = load_task(&dir).expect("validates");
    assert!(
        task.agent_view()
            .instruction
            .contains("working directory is `/app`. Here it is `/workspace`")
    );
    let wrapper = std::fs::read_to_string(dir.join("hidden/rb_verifier.sh")).expect("wrapper");
    assert!(wrapper.contains("workdir=\"${1:-/app}\""), "{wrapper}");
    assert!(wrapper.contains("swap /tests \"$t\""), "{wrapper}");
    assert!(dir.join("hidden/tests/check.py").is_file());
    assert_eq!(task.metadata()["harbor_workdir"].as_str(), Some("/app"));
    assert_wall_holds(&task);
}

#[test]
fn multi_container_harbor_tasks_are_refused_naming_the_feature() {
    let dest = tempfile::tempdir().expect("tempdir");
    let err = harbor::import(
        &fixtures().join("harbor/compose"),
        dest.path(),
        &harbor::HarborOptions::default(),
    )
    .expect_err("compose is not supported");
    let text = err.to_string();
    assert!(text.contains("docker-compose.yaml"), "{text}");
    assert!(text.contains("multi-container Harbor tasks"), "{text}");
    assert!(
        std::fs::read_dir(dest.path())
            .expect("dest")
            .next()
            .is_none(),
        "nothing written"
    );
}

#[test]
fn mmsicode_fixtures_import_in_every_language() {
    let dest = tempfile::tempdir().expect("tempdir");
    for (sample, image, check) in [
        ("python-clamp", "python", "pytest"),
        ("c-gcd", "sci", "gcc"),
        ("cpp-dot", "sci", "g++"),
        ("r-center", "sci", "testthat"),
    ] {
        let dir =
            mmsicode::import(&fixtures().join("mmsicode").join(sample), dest.path()).expect(sample);
        let task = load_task(&dir).expect("validates");
        assert_eq!(task.id(), format!("mmsicode-{sample}"));
        assert_eq!(task.environment().image, image);
        let got = match &task.grading().graders[0].check {
            Check::Pytest(rubrics::checks::pytest::Pytest { .. }) => "pytest".to_owned(),
            Check::Testthat(rubrics::checks::testthat::Testthat { .. }) => "testthat".to_owned(),
            Check::CTest(rubrics::checks::c_test::CTest {
                compiler,
                hidden_sources,
                ..
            }) => {
                assert_eq!(hidden_sources.len(), 1);
                compiler.clone()
            }
            other => panic!("unexpected check {other:?}"),
        };
        assert_eq!(got, check, "{sample}");
        assert_wall_holds(&task);
    }
}

#[test]
fn shared_data_paperbench_rubrics_import() {
    let dest = tempfile::tempdir().expect("tempdir");
    let fixtures = shared().join("paperbench/fixtures");
    for name in ["hex_flag", "hex_flags", "nested_hex_flags"] {
        let options = paperbench::PaperbenchOptions {
            gold_submission: Some(fixtures.join("submissions").join(name).join("gold")),
            ..Default::default()
        };
        let dir = paperbench::import(
            &fixtures.join(format!("{name}.json")),
            dest.path(),
            &options,
        )
        .expect(name);
        let task = load_task(&dir).expect("validates");
        assert!(task.oracle_solution().is_some());
        assert_wall_holds(&task);
    }
    for name in ["trivial", "impossible", "empty", "hex_flag_context"] {
        let dir = paperbench::import(
            &fixtures.join(format!("{name}.json")),
            dest.path(),
            &Default::default(),
        )
        .expect(name);
        load_task(&dir).expect("validates");
    }
    for name in ["semantic-self-consistency", "stochastic-interpolants"] {
        let rubric = shared()
            .join("paperbench/rubrics")
            .join(format!("{name}.json"));
        let dir = paperbench::import(&rubric, dest.path(), &Default::default()).expect(name);
        let task = load_task(&dir).expect("validates");
        assert_eq!(task.kind(), TaskKind::Paperbench);
        let code_only = paperbench::PaperbenchOptions {
            code_only: true,
            ..Default::default()
        };
        let dir = paperbench::import(&rubric, dest.path(), &code_only).expect("code only");
        let task = load_task(&dir).expect("validates");
        assert!(matches!(&task.grading().graders[0].check,
            Check::PaperbenchTree(rubrics::checks::paperbench_tree::PaperbenchTree { categories, .. }) if categories == &["Code Development".to_owned()]));
        assert!(
            task.metadata()["graded_leaves"].as_integer() < task.metadata()["leaves"].as_integer()
        );
    }
}

#[test]
fn shared_data_scicoqa_records_import_one_task_per_paper() {
    let dest = tempfile::tempdir().expect("tempdir");
    let src = shared().join("scicoqa/scicoqa-real.jsonl");
    let dirs = scicoqa::import(&src, dest.path(), &Default::default()).expect("import");
    assert_eq!(dirs.len(), 52, "52 distinct papers");
    let mut references = 0;
    for dir in &dirs {
        let task = load_task(dir).expect("validates");
        assert_eq!(task.kind(), TaskKind::Scicoqa);
        references += task.grading().graders.len();
        assert!(task.grading().graders.iter().all(|g| matches!(
            g.check,
            Check::Discrepancy(rubrics::checks::discrepancy::Discrepancy { .. })
        )));
        assert_wall_holds(&task);
    }
    assert_eq!(references, 57, "every reference discrepancy is graded");
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

#[test]
fn bad_sources_fail_with_clear_messages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dest = dir.path().join("out");

    // Harbor folder without its verifier.
    let src = dir.path().join("harbor-bad");
    write(&src, "task.toml", "version = \"1.0\"\n");
    write(&src, "instruction.md", "x");
    write(&src, "solution/solve.sh", "true");
    let err = harbor::import(&src, &dest, &Default::default()).expect_err("no tests");
    assert!(err.to_string().contains("needs `tests/test.sh`"), "{err}");

    // MMSiCode sample with nothing masked.
    let src = dir.path().join("mm-bad");
    write(
        &src,
        "sample.toml",
        "language = \"python\"\ntarget_file = \"f.py\"\ntarget_function = \"f\"\n",
    );
    write(&src, "project/f.py", "def f():\n    return 1\n");
    write(&src, "reference/f.py", "def f():\n    return 1\n");
    write(&src, "tests/test_f.py", "");
    let err = mmsicode::import(&src, &dest).expect_err("not masked");
    assert!(err.to_string().contains("nothing is masked"), "{err}");
    write(
        &src,
        "sample.toml",
        "language = \"fortran\"\ntarget_file = \"f.py\"\ntarget_function = \"f\"\n",
    );
    let err = mmsicode::import(&src, &dest).expect_err("bad language");
    assert!(err.to_string().contains("sample.toml:1"), "{err}");

    // PaperBench leaf with an unknown category.
    let rubric = dir.path().join("rubric.json");
    std::fs::write(&rubric, r#"{"id": "r", "requirements": "x", "weight": 1, "sub_tasks": [{"id": "a", "requirements": "y", "weight": 1, "sub_tasks": [], "task_category": "Vibes"}]}"#).expect("write");
    let err = paperbench::import(&rubric, &dest, &Default::default()).expect_err("category");
    assert!(
        err.to_string().contains("root.sub_tasks[0]") && err.to_string().contains("Vibes"),
        "{err}"
    );

    // SciCoQA line that is not a record.
    let jsonl = dir.path().join("d.jsonl");
    std::fs::write(&jsonl, "{\"discrepancy_id\": \"a\"}\n").expect("write");
    let err = scicoqa::import(&jsonl, &dest, &Default::default()).expect_err("bad record");
    assert!(err.to_string().contains("d.jsonl:1:"), "{err}");

    // PRBench yaml naming a missing paper file (found after the task folder was started).
    let src = dir.path().join("pr-bad");
    copy(&fixtures().join("prbench/hello-ones"), &src);
    std::fs::remove_file(src.join("paper.md")).expect("rm");
    let err = prbench::import(&src, &dest).expect_err("paper");
    assert!(
        err.to_string()
            .contains("paper.paper_file `paper.md` does not exist"),
        "{err}"
    );
    // A pip_install entry that is not a PyPI requirement (an option, a URL) is named.
    copy(&fixtures().join("prbench/hello-ones"), &src);
    let yaml = src.join("task.yaml");
    let text = std::fs::read_to_string(&yaml).expect("read").replace(
        "pip_install: []",
        "pip_install: [numpy, \"--index-url=http://x\"]",
    );
    std::fs::write(&yaml, text).expect("write");
    let err = prbench::import(&src, &dest).expect_err("package");
    assert!(
        err.to_string()
            .contains("docker.pip_install: `--index-url=http://x` is a pip option"),
        "{err}"
    );
    std::fs::create_dir_all(&dest).expect("dest");
    assert!(dest.is_dir(), "the import had started");

    // Failed imports leave nothing behind (they are staged, then moved into place).
    let leftovers: Vec<_> = std::fs::read_dir(&dest)
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(leftovers.is_empty(), "partial imports left: {leftovers:?}");

    // Importing twice into the same place.
    mmsicode::import(&fixtures().join("mmsicode/python-clamp"), &dest).expect("first");
    let err =
        mmsicode::import(&fixtures().join("mmsicode/python-clamp"), &dest).expect_err("second");
    assert!(
        matches!(err, ImportError::DestinationExists { .. }),
        "{err}"
    );
}

#[test]
fn import_kinds_parse_and_dispatch() {
    use tasks::import::{ImportKind, import_local};
    for kind in ImportKind::ALL {
        assert_eq!(kind.as_str().parse::<ImportKind>(), Ok(kind));
    }
    let err = "quiz".parse::<ImportKind>().expect_err("unknown");
    assert!(err.contains("scicode, prbench"), "{err}");
    let dest = tempfile::tempdir().expect("tempdir");
    let dirs = import_local(
        ImportKind::Harbor,
        &fixtures().join("harbor/word-count"),
        dest.path(),
    )
    .expect("harbor");
    assert_eq!(dirs.len(), 1);
    let err =
        import_local(ImportKind::Scicode, &fixtures(), dest.path()).expect_err("needs a sandbox");
    assert!(err.to_string().contains("sandbox"), "{err}");
}

#[test]
fn scicoqa_sources_fill_the_workspace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jsonl = dir.path().join("d.jsonl");
    std::fs::write(
        &jsonl,
        "{\"discrepancy_id\": \"ab12\", \"paper_url\": \"https://example.org/p.pdf\", \"discrepancy_description\": \"The code uses the mean, the paper the median.\"}\n",
    )
    .expect("write");
    write(dir.path(), "sources/scicoqa-ab12/paper.md", "the paper");
    write(dir.path(), "sources/scicoqa-ab12/code/main.py", "print(1)");
    let options = scicoqa::ScicoqaOptions {
        sources: Some(dir.path().join("sources")),
        keep_invalid: false,
    };
    let dirs = scicoqa::import(&jsonl, &dir.path().join("out"), &options).expect("import");
    let task = load_task(&dirs[0]).expect("validates");
    let files: Vec<String> = task
        .agent_view()
        .workspace
        .files()
        .expect("files")
        .into_iter()
        .map(|f| f.relative)
        .collect();
    assert_eq!(files, ["code/main.py", "paper.md"]);
    assert_eq!(
        task.metadata()["sources_in_workspace"].as_bool(),
        Some(true)
    );
    assert_wall_holds(&task);
}

/// `task_category` as PaperBench files spell it (any case, stray spaces): the code-only filter
/// keeps matching leaves; a filter that keeps none is refused naming the categories.
#[test]
fn paperbench_category_filters_match_like_the_grader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let leaf = |id: &str, cat: &str| serde_json::json!({"id": id, "requirements": id, "weight": 1, "task_category": cat, "sub_tasks": []});
    let tree = serde_json::json!({
        "id": "root", "requirements": "Reproduce the paper.", "weight": 1,
        "sub_tasks": [leaf("a", "code development "), leaf("b", "Result Analysis"), leaf("c", "CODE EXECUTION")]
    });
    let rubric = dir.path().join("mixed.json");
    std::fs::write(&rubric, tree.to_string()).expect("write");
    let code_only = paperbench::PaperbenchOptions {
        code_only: true,
        ..Default::default()
    };
    let task_dir =
        paperbench::import(&rubric, &dir.path().join("out"), &code_only).expect("code-only import");
    let task = load_task(&task_dir).expect("validates");
    assert!(task.id().ends_with("-code-only"));

    let none = serde_json::json!({
        "id": "root", "requirements": "r", "weight": 1,
        "sub_tasks": [leaf("b", "Result Analysis")]
    });
    let rubric = dir.path().join("no-code.json");
    std::fs::write(&rubric, none.to_string()).expect("write");
    let err = paperbench::import(&rubric, &dir.path().join("out2"), &code_only)
        .expect_err("nothing to grade");
    let text = err.to_string();
    assert!(
        text.contains("none of the 1 leaves has task_category in [\"Code Development\"]"),
        "{text}"
    );
}

fn copy(from: &Path, to: &Path) {
    for entry in walkdir::WalkDir::new(from) {
        let entry = entry.expect("walk");
        let target = to.join(entry.path().strip_prefix(from).expect("prefix"));
        if entry.file_type().is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}
