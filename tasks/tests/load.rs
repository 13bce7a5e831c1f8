//! The strict loader: a valid task loads; each kind of bad task fails with a precise message
//! naming the file, the line and the field.

use std::path::Path;

use tasks::{TaskError, load_suite, load_task, load_task_collecting};

const GOOD_TOML: &str = r#"id = "tiny"
kind = "generic"
instruction = "instruction.md"
attachments = ["paper.md"]
expected_outputs = ["out.txt"]

[environment]
image = "python"
memory_mb = 512

[[stages]]
id = "b"
prompt = "second"
depends_on = ["a"]

[[stages]]
id = "a"
prompt_file = "stage_a.md"

[grading]
[grading.dimensions]
code_correctness = 0.5
task_completeness = 0.5

[[grading.graders]]
name = "tests"
dimension = "code_correctness"
check = { kind = "pytest", hidden_tests = "tests" }

[[grading.graders]]
name = "files"
dimension = "task_completeness"
check = { kind = "files_exist", outputs = ["out.txt"] }
"#;

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn good_task(root: &Path) {
    write(root, "task.toml", GOOD_TOML);
    write(root, "instruction.md", "# Tiny\nWrite out.txt.\n");
    write(root, "stage_a.md", "first\n");
    write(root, "workspace/paper.md", "the paper\n");
    write(
        root,
        "hidden/tests/test_out.py",
        "def test_x():\n    assert open('out.txt').read()\n",
    );
    write(root, "solution/solve.sh", "#!/bin/sh\necho hi > out.txt\n");
}

#[test]
fn a_good_task_loads_with_stages_in_dependency_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    good_task(dir.path());
    let task = load_task(dir.path()).expect("loads");
    assert_eq!(task.id(), "tiny");
    let ids: Vec<&str> = task.stages().iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(task.stages()[0].prompt, "first\n");
    let view = task.agent_view();
    assert!(
        view.instruction.contains("### Step 1 (`a`)"),
        "{}",
        view.instruction
    );
    assert!(view.instruction.find("first") < view.instruction.find("second"));
    assert_eq!(view.attachments, ["paper.md"]);
    assert!(task.oracle_solution().is_some());
    assert_eq!(task.grading().graders.len(), 2);
    assert_eq!(task.content_hash().len(), 64);
}

#[test]
fn content_hash_changes_with_any_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    good_task(dir.path());
    let before = load_task(dir.path()).expect("loads").content_hash();
    assert_eq!(before, load_task(dir.path()).expect("loads").content_hash());
    write(
        dir.path(),
        "hidden/tests/test_out.py",
        "def test_x():\n    pass\n",
    );
    let after = load_task(dir.path()).expect("loads").content_hash();
    assert_ne!(before, after);
}

enum Edit {
    /// Replace `from` with `to` in task.toml.
    Toml(&'static str, &'static str),
    Remove(&'static str),
    Write(&'static str, &'static str),
    Symlink {
        target: &'static str,
        link: &'static str,
    },
}

struct Case {
    name: &'static str,
    edits: Vec<Edit>,
    /// Expected (line, field) when the error is about a place in task.toml.
    line: Option<usize>,
    field: &'static str,
    message: &'static str,
}

fn apply(root: &Path, edit: &Edit) {
    match edit {
        Edit::Toml(from, to) => {
            let text = std::fs::read_to_string(root.join("task.toml")).expect("read");
            assert!(text.contains(from), "case edit `{from}` matches nothing");
            std::fs::write(root.join("task.toml"), text.replacen(from, to, 1)).expect("write");
        }
        Edit::Remove(rel) => {
            let path = root.join(rel);
            if path.is_dir() {
                std::fs::remove_dir_all(path).expect("rm dir");
            } else {
                std::fs::remove_file(path).expect("rm");
            }
        }
        Edit::Write(rel, text) => write(root, rel, text),
        Edit::Symlink { target, link } => {
            let link = root.join(link);
            std::fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
            std::os::unix::fs::symlink(target, link).expect("symlink");
        }
    }
}

#[test]
fn bad_tasks_fail_with_precise_messages() {
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "s").expect("write");
    let outside_file: &'static str = Box::leak(
        outside
            .path()
            .join("secret.txt")
            .to_string_lossy()
            .into_owned()
            .into_boxed_str(),
    );
    let cases = vec![
        Case {
            name: "unknown top-level key",
            edits: vec![Edit::Toml(
                "kind = \"generic\"",
                "kind = \"generic\"\ncolour = \"red\"",
            )],
            line: Some(3),
            field: "",
            message: "unknown field `colour`",
        },
        Case {
            name: "unknown key in a grader check",
            edits: vec![Edit::Toml(
                "hidden_tests = \"tests\" }",
                "hidden_tests = \"tests\", bogus = 1 }",
            )],
            line: Some(28),
            field: "",
            message: "bogus",
        },
        Case {
            name: "reproduce without a command",
            edits: vec![Edit::Toml(
                "check = { kind = \"files_exist\", outputs = [\"out.txt\"] }",
                "check = { kind = \"reproduce\", argv = [], outputs = [\"out.txt\"] }",
            )],
            line: Some(30),
            field: "grading.graders[1].check.argv",
            message: "no command: name the agent's entry command",
        },
        Case {
            name: "reproduce without outputs",
            edits: vec![Edit::Toml(
                "check = { kind = \"files_exist\", outputs = [\"out.txt\"] }",
                "check = { kind = \"reproduce\", argv = [\"sh\", \"run.sh\"], outputs = [] }",
            )],
            line: Some(30),
            field: "grading.graders[1].check.outputs",
            message: "no files listed",
        },
        Case {
            name: "reproduce output escaping the workspace",
            edits: vec![Edit::Toml(
                "check = { kind = \"files_exist\", outputs = [\"out.txt\"] }",
                "check = { kind = \"reproduce\", argv = [\"sh\", \"run.sh\"], outputs = [\"../out.txt\"] }",
            )],
            line: Some(33),
            field: "grading.graders[1].check.outputs",
            message: "escapes",
        },
        Case {
            name: "reproduce with a negative tolerance",
            edits: vec![Edit::Toml(
                "check = { kind = \"files_exist\", outputs = [\"out.txt\"] }",
                "check = { kind = \"reproduce\", argv = [\"sh\", \"run.sh\"], outputs = [\"out.txt\"], rtol = -1.0 }",
            )],
            line: Some(33),
            field: "grading.graders[1].check.rtol",
            message: "-1 is out of range: allowed 0..=1000000000 (a tolerance)",
        },
        Case {
            name: "unknown kind",
            edits: vec![Edit::Toml("kind = \"generic\"", "kind = \"quiz\"")],
            line: Some(2),
            field: "",
            message: "quiz",
        },
        Case {
            name: "missing instruction file",
            edits: vec![Edit::Remove("instruction.md")],
            line: Some(3),
            field: "instruction",
            message: "`instruction.md` does not exist",
        },
        Case {
            name: "missing attachment",
            edits: vec![Edit::Remove("workspace/paper.md")],
            line: Some(4),
            field: "attachments[0]",
            message: "`paper.md` does not exist",
        },
        Case {
            name: "missing workspace",
            edits: vec![
                Edit::Remove("workspace"),
                Edit::Toml("attachments = [\"paper.md\"]\n", ""),
            ],
            line: None,
            field: "workspace",
            message: "has no `workspace/` folder",
        },
        Case {
            name: "weights that do not sum to 1",
            edits: vec![Edit::Toml(
                "task_completeness = 0.5",
                "task_completeness = 0.4",
            )],
            line: Some(21),
            field: "grading.dimensions",
            message: "sum to 0.9",
        },
        Case {
            name: "unknown grader dimension",
            edits: vec![Edit::Toml(
                "dimension = \"task_completeness\"",
                "dimension = \"style\"",
            )],
            line: Some(32),
            field: "grading.graders[1].dimension",
            message: "unknown dimension `style`",
        },
        Case {
            name: "grading path missing from hidden/",
            edits: vec![Edit::Toml(
                "hidden_tests = \"tests\"",
                "hidden_tests = \"tests_v2\"",
            )],
            line: Some(28),
            field: "grading.graders[0].check.hidden_tests",
            message: "`tests_v2` does not exist",
        },
        Case {
            name: "grading path escaping hidden/",
            edits: vec![Edit::Toml(
                "hidden_tests = \"tests\"",
                "hidden_tests = \"../solution\"",
            )],
            line: Some(28),
            field: "grading.graders[0].check.hidden_tests",
            message: "escapes the hidden folder",
        },
        Case {
            name: "cyclic stages",
            edits: vec![Edit::Toml(
                "prompt_file = \"stage_a.md\"",
                "prompt_file = \"stage_a.md\"\ndepends_on = [\"b\"]",
            )],
            line: Some(12),
            field: "stages[0].depends_on",
            message: "cyclic stages: b -> a -> b",
        },
        Case {
            name: "duplicate stages",
            edits: vec![Edit::Toml("id = \"a\"", "id = \"b\"")],
            line: Some(17),
            field: "stages[1].id",
            message: "duplicate stage id `b`",
        },
        Case {
            name: "stage depending on an unknown stage",
            edits: vec![Edit::Toml("depends_on = [\"a\"]", "depends_on = [\"z\"]")],
            line: Some(14),
            field: "stages[0].depends_on[0]",
            message: "unknown stage `z`",
        },
        Case {
            name: "instruction escaping the task folder",
            edits: vec![Edit::Toml(
                "instruction = \"instruction.md\"",
                "instruction = \"../instruction.md\"",
            )],
            line: Some(3),
            field: "instruction",
            message: "escapes the task folder",
        },
        Case {
            name: "absolute path",
            edits: vec![Edit::Toml(
                "instruction = \"instruction.md\"",
                "instruction = \"/etc/hostname\"",
            )],
            line: Some(3),
            field: "instruction",
            message: "is absolute",
        },
        Case {
            name: "instruction in the held-out folder",
            edits: vec![
                Edit::Toml(
                    "instruction = \"instruction.md\"",
                    "instruction = \"hidden/notes.md\"",
                ),
                Edit::Write("hidden/notes.md", "secret"),
            ],
            line: Some(3),
            field: "instruction",
            message: "lies in a held-out folder",
        },
        Case {
            name: "symlink pointing out of the task folder",
            edits: vec![Edit::Symlink {
                target: outside_file,
                link: "workspace/data.txt",
            }],
            line: None,
            field: "file workspace/data.txt",
            message: "points out of the task folder",
        },
        Case {
            name: "workspace symlink to a held-out file",
            edits: vec![Edit::Symlink {
                target: "../hidden/tests/test_out.py",
                link: "workspace/peek.py",
            }],
            line: None,
            field: "file workspace/peek.py",
            message: "in the workspace points outside it",
        },
        Case {
            name: "instruction through a symlink out of the folder",
            edits: vec![
                Edit::Remove("instruction.md"),
                Edit::Symlink {
                    target: outside_file,
                    link: "instruction.md",
                },
            ],
            line: Some(3),
            field: "instruction",
            message: "outside the task folder",
        },
        Case {
            name: "workspace overlapping hidden",
            edits: vec![Edit::Toml(
                "id = \"tiny\"",
                "id = \"tiny\"\nworkspace = \"hidden/tests\"",
            )],
            line: None,
            field: "workspace",
            message: "overlap",
        },
        Case {
            name: "solution without solve.sh",
            edits: vec![
                Edit::Remove("solution/solve.sh"),
                Edit::Write("solution/other.sh", ""),
            ],
            line: None,
            field: "solution",
            message: "has no `solve.sh`",
        },
        Case {
            name: "bad task id",
            edits: vec![Edit::Toml("id = \"tiny\"", "id = \"tiny task/1\"")],
            line: Some(1),
            field: "id",
            message: "not a valid task id",
        },
        Case {
            name: "duplicate grader names",
            edits: vec![Edit::Toml("name = \"files\"", "name = \"tests\"")],
            line: Some(31),
            field: "grading.graders[1].name",
            message: "duplicate grader name `tests`",
        },
        Case {
            name: "dimension no grader feeds",
            edits: vec![Edit::Toml(
                "task_completeness = 0.5",
                "task_completeness = 0.25\nmethodology = 0.25",
            )],
            line: None,
            field: "grading.dimensions.methodology",
            message: "no grader feeds dimension `methodology`",
        },
        Case {
            name: "missing grading section",
            edits: vec![
                Edit::Toml(
                    "[grading]\n[grading.dimensions]\ncode_correctness = 0.5\ntask_completeness = 0.5\n",
                    "[grading.dimensions]\ncode_correctness = 1.0\n",
                ),
                Edit::Toml("[[grading.graders]]", "[[grading.graderz]]"),
            ],
            line: None,
            field: "",
            message: "graderz",
        },
    ];
    assert_cases(&cases);
}

/// Loads the good task edited by each case: every case must fail with its message, line and
/// field.
fn assert_cases(cases: &[Case]) {
    let mut failures = Vec::new();
    for case in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        good_task(dir.path());
        for edit in &case.edits {
            apply(dir.path(), edit);
        }
        let errors = match load_task_collecting(dir.path()) {
            Ok(_) => {
                failures.push(format!("{}: loaded, expected an error", case.name));
                continue;
            }
            Err(errors) => errors,
        };
        let matches = |err: &TaskError| {
            let location = err.location();
            err.to_string().contains(case.message)
                && (matches!(err, TaskError::Io { .. })
                    || location.is_some_and(|l| l.file.ends_with("task.toml")))
                && (case.field.is_empty() || location.is_some_and(|l| l.field == case.field))
                && case
                    .line
                    .is_none_or(|line| location.is_some_and(|l| l.line == line))
        };
        if !errors.iter().any(matches) {
            let got: Vec<String> = errors
                .iter()
                .map(|e| {
                    format!(
                        "`{e}` (line {:?}, field {:?})",
                        e.location().map(|l| l.line),
                        e.location().map(|l| l.field.clone())
                    )
                })
                .collect();
            failures.push(format!(
                "{}: got {}; want message `{}`, line {:?}, field `{}`",
                case.name,
                got.join(" | "),
                case.message,
                case.line,
                case.field
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every number a task file gives has a range, and a value outside it is refused with the
/// allowed range in the message, at the number's line.
#[test]
fn numbers_out_of_range_name_the_allowed_range() {
    let toml = |from: &'static str, to: &'static str| vec![Edit::Toml(from, to)];
    let cases = vec![
        Case {
            name: "too little memory",
            edits: toml("memory_mb = 512", "memory_mb = 32"),
            line: Some(9),
            field: "environment.memory_mb",
            message: "32 is out of range: allowed 64..=1048576 (MiB",
        },
        Case {
            name: "absurd memory",
            edits: toml("memory_mb = 512", "memory_mb = 99999999999"),
            line: Some(9),
            field: "environment.memory_mb",
            message: "allowed 64..=1048576",
        },
        Case {
            name: "zero CPUs",
            edits: toml("memory_mb = 512", "memory_mb = 512\ncpus = 0.0"),
            line: Some(10),
            field: "environment.cpus",
            message: "allowed 0.01..=1024 (CPUs)",
        },
        Case {
            name: "NaN CPUs",
            edits: toml("memory_mb = 512", "memory_mb = 512\ncpus = nan"),
            line: Some(10),
            field: "environment.cpus",
            message: "NaN is out of range",
        },
        Case {
            name: "zero agent timeout",
            edits: toml("memory_mb = 512", "memory_mb = 512\nagent_timeout_secs = 0"),
            line: Some(10),
            field: "environment.agent_timeout_secs",
            message: "allowed 1..=604800 (seconds, up to 7 days)",
        },
        Case {
            name: "grading timeout of years",
            edits: toml(
                "memory_mb = 512",
                "memory_mb = 512\ngrading_timeout_secs = 1000000000000",
            ),
            line: Some(10),
            field: "environment.grading_timeout_secs",
            message: "1000000000000 is out of range: allowed 1..=604800",
        },
        Case {
            name: "grading budget of zero",
            edits: toml("[grading]\n", "[grading]\ntimeout_secs = 0\n"),
            line: Some(21),
            field: "grading.timeout_secs",
            message: "allowed 1..=604800",
        },
        Case {
            name: "pass threshold above 1",
            edits: toml("[grading]\n", "[grading]\npass_threshold = 1.5\n"),
            line: Some(21),
            field: "grading.pass_threshold",
            message: "1.5 is out of range: allowed 0..=1 (a score)",
        },
        Case {
            name: "negative dimension weight",
            edits: vec![
                Edit::Toml("code_correctness = 0.5", "code_correctness = 1.5"),
                Edit::Toml("task_completeness = 0.5", "task_completeness = -0.5"),
            ],
            line: Some(22),
            field: "grading.dimensions.code_correctness",
            message: "weight 1.5 is out of range: allowed 0..=1",
        },
        Case {
            name: "huge grader weight",
            edits: toml("name = \"files\"", "name = \"files\"\nweight = 1e300"),
            line: Some(32),
            field: "grading.graders[1].weight",
            message: "allowed 0..=1000000",
        },
        Case {
            name: "infinite tolerance",
            edits: toml(
                "check = { kind = \"files_exist\", outputs = [\"out.txt\"] }",
                "check = { kind = \"reproduce\", argv = [\"sh\", \"run.sh\"], outputs = [\"out.txt\"], atol = inf }",
            ),
            line: Some(33),
            field: "grading.graders[1].check.atol",
            message: "inf is out of range: allowed 0..=1000000000 (a tolerance)",
        },
        Case {
            name: "a column tolerance below zero",
            edits: vec![Edit::Toml(
                "check = { kind = \"files_exist\", outputs = [\"out.txt\"] }",
                "check = { kind = \"csv\", output = \"out.csv\", hidden_expected = \"tests/test_out.py\", column_tolerances = { y = [0.1, -1.0] } }",
            )],
            line: Some(33),
            field: "grading.graders[1].check.column_tolerances",
            message: "column `y`: atol -1 is out of range: allowed 0..=1000000000",
        },
        Case {
            name: "a SciCode case deadline of zero",
            edits: vec![Edit::Toml(
                "check = { kind = \"files_exist\", outputs = [\"out.txt\"] }",
                "check = { kind = \"scicode_steps\", hidden_cases = \"tests/test_out.py\", output = \"out.py\", case_timeout_secs = 0 }",
            )],
            line: Some(33),
            field: "grading.graders[1].check.case_timeout_secs",
            message: "0 is out of range: allowed 1..=604800",
        },
    ];
    assert_cases(&cases);
}

/// `environment.pip_install`: parsed as a list of PyPI requirements; refused on an image that
/// is not a platform image (the wheels are chosen for its Python) and for entries that are
/// not plain requirements, each named.
#[test]
fn pip_install_is_parsed_and_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    good_task(dir.path());
    let with = |env: &str| GOOD_TOML.replace("image = \"python\"\n", env);
    write(
        dir.path(),
        "task.toml",
        &with("image = \"sci\"\npip_install = [\"tabulate==0.9.0\", \"more-itertools\"]\n"),
    );
    let task = load_task(dir.path()).expect("loads");
    assert_eq!(task.environment().image, "sci");
    assert_eq!(
        task.environment().pip_install,
        ["tabulate==0.9.0", "more-itertools"]
    );

    write(
        dir.path(),
        "task.toml",
        &with("image = \"debian:bookworm\"\npip_install = [\"tabulate\"]\n"),
    );
    let err = load_task(dir.path())
        .expect_err("not a platform image")
        .to_string();
    assert!(
        err.contains("environment.pip_install") && err.contains("`debian:bookworm` is not one"),
        "{err}"
    );

    write(
        dir.path(),
        "task.toml",
        &with("image = \"python\"\npip_install = [\"git+https://example.org/x.git\", \"-e .\"]\n"),
    );
    let errs = load_task_collecting(dir.path()).expect_err("not requirements");
    let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|e| e.contains("`git+https://example.org/x.git`")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|e| e.contains("`-e .` is a pip option")),
        "{text:?}"
    );
}

#[test]
fn a_suite_reports_every_bad_task_and_duplicate_ids() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["one", "two", "three"] {
        good_task(&dir.path().join("group").join(name));
    }
    // `two` is broken twice, `three` duplicates `one`'s id.
    let two = dir.path().join("group/two");
    std::fs::remove_file(two.join("instruction.md")).expect("rm");
    let toml = std::fs::read_to_string(two.join("task.toml"))
        .expect("read")
        .replace("id = \"tiny\"", "id = \"two\"")
        .replace("task_completeness = 0.5", "task_completeness = 0.9");
    std::fs::write(two.join("task.toml"), toml).expect("write");
    let err = load_suite(&[dir.path().to_path_buf()]).expect_err("bad suite");
    let text = err.to_string();
    assert!(text.contains("`instruction.md` does not exist"), "{text}");
    assert!(text.contains("sum to 1.4"), "{text}");
    assert!(text.contains("duplicate task id `tiny`"), "{text}");
    assert!(text.starts_with("3 invalid task(s)"), "{text}");

    let empty = tempfile::tempdir().expect("tempdir");
    let err = load_suite(&[empty.path().to_path_buf()]).expect_err("empty");
    assert!(err.to_string().contains("no task found"), "{err}");
}

/// `[turns]`: loaded with the stages in order; refused without stages, with a stage id that
/// cannot name a folder, or with a kept file outside the workspace.
#[test]
fn turns_need_stages_usable_ids_and_a_workspace_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    good_task(dir.path());
    let with_turns = GOOD_TOML.replace(
        "[grading]\n",
        "[turns]\nkept_file = \"out.txt\"\ntimeout_secs = 60\n\n[grading]\n",
    );
    write(dir.path(), "task.toml", &with_turns);
    let task = load_task(dir.path()).expect("loads");
    let turns = task.turns().expect("turns");
    assert_eq!(turns.kept_file, "out.txt");
    assert_eq!(turns.timeout_secs, Some(60));
    assert_eq!(task.agent_view().turns.as_ref(), Some(turns));

    let bad = [
        (
            with_turns.replace("[[stages]]\nid = \"b\"\nprompt = \"second\"\ndepends_on = [\"a\"]\n\n[[stages]]\nid = \"a\"\nprompt_file = \"stage_a.md\"\n", ""),
            "no `[[stages]]`",
        ),
        (with_turns.replace("id = \"b\"", "id = \"b/c\"").replace("[\"a\"]", "[]"), "names a folder"),
        (with_turns.replace("kept_file = \"out.txt\"", "kept_file = \"../x\""), "turns.kept_file"),
        (with_turns.replace("timeout_secs = 60", "timeout_secs = 0"), "turns.timeout_secs"),
    ];
    for (toml, expected) in bad {
        write(dir.path(), "task.toml", &toml);
        let errors = load_task_collecting(dir.path()).expect_err(expected);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            text.iter().any(|e| e.contains(expected)),
            "{expected}: {text:?}"
        );
    }
}
