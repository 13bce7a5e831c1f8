//! The fabrication check (`reproduce`) in a real grading container: the agent's own entry
//! command is re-run and what it writes is compared with what the agent submitted.

mod common;

use std::time::Duration;

use common::Grading;
use rubrics::{GradeReport, Status};

/// Held-out expected data: y = t^2 / 2.
const EXPECTED: &[u8] = b"t,y\n0,0\n1,0.5\n2,2\n3,4.5\n4,8\n";

/// The reproduce grader is listed first on purpose: it must still run after the CSV grader,
/// which must see the submitted file.
const SPEC: &str = r#"
[dimensions]
data_accuracy = 0.6
task_completeness = 0.4

[[graders]]
name = "re-run"
dimension = "data_accuracy"
check = { kind = "reproduce", argv = ["python3", "run.py"], outputs = ["results/fig.csv", "results/summary.txt"], rtol = 1e-9, atol = 1e-12 }

[[graders]]
name = "fig data"
dimension = "data_accuracy"
check = { kind = "csv", output = "results/fig.csv", hidden_expected = "fig.csv", x_column = "t", rtol = 1e-6 }

[[graders]]
name = "deliverables"
dimension = "task_completeness"
check = { kind = "files_exist", outputs = ["run.py", "results/fig.csv", "results/summary.txt"] }
"#;

/// Computes y = t^2 / divisor and writes both outputs; checks that it runs as the agent's uid
/// and cannot read the held-out data.
fn script(divisor: &str) -> Vec<u8> {
    format!(
        "import os\n\
         assert os.getuid() == 1000, f'runs as uid {{os.getuid()}}'\n\
         assert not os.access('/grader/hidden/fig.csv', os.R_OK), 'held-out data are readable'\n\
         os.makedirs('results', exist_ok=True)\n\
         rows = [(t, t * t / {divisor}) for t in range(5)]\n\
         with open('results/fig.csv', 'w') as f:\n\
         \x20   f.write('t,y\\n')\n\
         \x20   for t, y in rows:\n\
         \x20       f.write(f'{{t}},{{y!r}}\\n')\n\
         with open('results/summary.txt', 'w') as f:\n\
         \x20   f.write(f'max y = {{max(y for _, y in rows)}}\\n')\n"
    )
    .into_bytes()
}

/// What the script with divisor 2 writes, formatted differently (numbers equal).
const HONEST_CSV: &[u8] = b"# computed by run.py\nt,y\n0,0.0\n1,0.50\n2,2.0\n3,4.5\n4,8.0\n";
const SUMMARY: &[u8] = b"max y = 8.0\n";

async fn grade_agent(files: &[(&str, &[u8])]) -> (GradeReport, Vec<u8>, Vec<u8>) {
    let g = Grading::new("python", files, &[("fig.csv", EXPECTED)]).await;
    let report = g.grade(SPEC, None, Duration::from_secs(300)).await;
    let csv_after = g.sh("cat /workspace/results/fig.csv").await;
    let leftovers = g.sh("ls -A /grader/work | grep reproduce || true").await;
    g.remove().await;
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("report serialises")
    );
    (report, csv_after.stdout, leftovers.stdout)
}

#[tokio::test]
async fn honest_fabricated_and_broken_agents() {
    let honest_script = script("2");
    let (honest, csv_after, leftovers) = grade_agent(&[
        ("run.py", &honest_script),
        ("results/fig.csv", HONEST_CSV),
        ("results/summary.txt", SUMMARY),
    ])
    .await;
    let re = &honest.graders[0];
    assert_eq!(re.kind, "reproduce");
    assert_eq!((re.status, re.score), (Status::Pass, Some(1.0)), "{re:?}");
    assert_eq!(re.tests.len(), 2);
    assert!(re.tests.iter().all(|t| t.status == Status::Pass));
    assert_eq!(honest.status, Status::Pass);
    assert_eq!(honest.score, Some(1.0));
    assert_eq!(csv_after, HONEST_CSV, "the submitted bytes are restored");
    assert!(
        leftovers.is_empty(),
        "set-aside copies are removed: {leftovers:?}"
    );

    // Fabricated: the submitted CSV is the right answer typed in by hand; the agent's script
    // computes something else (t^2 / 3). The CSV grader alone would give full marks.
    let buggy_script = script("3");
    let (fab, csv_after, _) = grade_agent(&[
        ("run.py", &buggy_script),
        ("results/fig.csv", HONEST_CSV),
        ("results/summary.txt", SUMMARY),
    ])
    .await;
    let re = &fab.graders[0];
    assert_eq!(
        (re.status, re.score),
        (Status::FabricatedData, Some(0.0)),
        "{re:?}"
    );
    let by_name: Vec<(&str, Status)> = re
        .tests
        .iter()
        .map(|t| (t.name.as_str(), t.status))
        .collect();
    assert_eq!(
        by_name,
        vec![
            ("results/fig.csv", Status::FabricatedData),
            ("results/summary.txt", Status::FabricatedData)
        ]
    );
    let fig = re
        .details
        .iter()
        .find(|d| d.starts_with("results/fig.csv:"))
        .expect("a detail names the CSV");
    assert!(fig.contains("column y: 1/5 values match"), "{fig}");
    assert!(fig.contains("max abs err 2.667e0"), "{fig}");
    assert!(
        re.details
            .iter()
            .any(|d| d.starts_with("results/summary.txt:") && d.contains("differs")),
        "{:?}",
        re.details
    );
    // The CSV grader saw the submitted file and passed; the data dimension is still 0.
    assert_eq!(fab.graders[1].status, Status::Pass);
    let data = &fab.dimensions["data_accuracy"];
    assert_eq!(
        (data.score, data.status),
        (Some(0.0), Status::FabricatedData)
    );
    assert_eq!(fab.status, Status::FabricatedData);
    assert!((fab.score.expect("scored") - 0.4).abs() < 1e-12);
    assert!(!fab.passed);
    assert_eq!(csv_after, HONEST_CSV, "the submitted bytes are restored");

    // Broken: the script crashes before writing anything.
    let broken_script = b"import os\nos.makedirs('results', exist_ok=True)\nprint(1 / 0)\n";
    let (broken, csv_after, _) = grade_agent(&[
        ("run.py", broken_script),
        ("results/fig.csv", HONEST_CSV),
        ("results/summary.txt", SUMMARY),
    ])
    .await;
    let re = &broken.graders[0];
    assert_eq!((re.status, re.score), (Status::Fail, Some(0.0)), "{re:?}");
    assert!(
        re.details
            .iter()
            .any(|d| d.contains("python3 run.py") && d.contains("ZeroDivisionError")),
        "{:?}",
        re.details
    );
    assert_eq!(broken.graders[1].status, Status::Pass);
    let data = &broken.dimensions["data_accuracy"];
    assert_eq!((data.score, data.status), (Some(0.5), Status::Fail));
    assert_eq!(broken.status, Status::Fail);
    assert_eq!(csv_after, HONEST_CSV, "the submitted bytes are restored");
}

#[tokio::test]
async fn missing_output_is_a_failure_not_fabrication() {
    // The script runs but never writes summary.txt; nothing else differs.
    let partial = b"import os\nos.makedirs('results', exist_ok=True)\nopen('results/fig.csv', 'w').write('t,y\\n0,0\\n1,0.5\\n2,2\\n3,4.5\\n4,8\\n')\n";
    let (r, _, _) = grade_agent(&[
        ("run.py", partial),
        ("results/fig.csv", HONEST_CSV),
        ("results/summary.txt", SUMMARY),
    ])
    .await;
    let re = &r.graders[0];
    assert_eq!((re.status, re.score), (Status::Fail, Some(0.0)), "{re:?}");
    assert_eq!(re.tests[0].status, Status::Pass);
    assert_eq!(re.tests[1].status, Status::Fail);
    assert!(
        re.details
            .iter()
            .any(|d| d.starts_with("results/summary.txt:") && d.contains("did not write")),
        "{:?}",
        re.details
    );
}

#[tokio::test]
async fn forbidden_api_use_during_the_re_run_is_caught_and_logs_are_out_of_reach() {
    // The import is built at runtime (the static scan cannot see it); the script also tries to
    // wipe the grader's logs.
    let sneaky = br#"import os
try:
    __import__('numpy' + '.fft')
except ImportError:
    pass
for p in ['/grader/work/forbidden.log', '/grader/work/rb/hook/sitecustomize.py']:
    try:
        open(p, 'w').close()
        print('wrote', p)
    except OSError as e:
        print('refused', p, e)
os.makedirs('results', exist_ok=True)
open('results/fig.csv', 'w').write('t,y\n0,0\n1,0.5\n2,2\n3,4.5\n4,8\n')
"#;
    let g = Grading::new(
        "python",
        &[("run.py", sneaky), ("results/fig.csv", HONEST_CSV)],
        &[("fig.csv", EXPECTED)],
    )
    .await;
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "re-run"
            dimension = "data_accuracy"
            check = { kind = "reproduce", argv = ["python3", "run.py"], outputs = ["results/fig.csv"] }
            [[graders]]
            name = "no fft"
            dimension = "code_correctness"
            check = { kind = "forbidden_api", forbidden = ["numpy.fft"] }
            "#,
            None,
            Duration::from_secs(300),
        )
        .await;
    let hook = g.sh("test -s /grader/work/rb/hook/sitecustomize.py").await;
    g.remove().await;
    println!(
        "{}",
        serde_json::to_string_pretty(&report).expect("report serialises")
    );
    assert_eq!(
        report.graders[0].status,
        Status::Pass,
        "{:?}",
        report.graders[0]
    );
    let fft = &report.graders[1];
    assert_eq!(fft.status, Status::ForbiddenApi, "{fft:?}");
    assert!(
        fft.details
            .iter()
            .any(|d| d.starts_with("runtime:") && d.contains("numpy.fft")),
        "{:?}",
        fft.details
    );
    assert!(hook.success(), "the import hook is intact");
    assert_eq!(report.status, Status::ForbiddenApi);
}

#[tokio::test]
async fn a_hanging_script_times_out_within_the_budget_and_the_outputs_are_restored() {
    let g = Grading::new(
        "python",
        &[
            (
                "run.py",
                b"import os, time\nos.makedirs('results', exist_ok=True)\nopen('results/fig.csv', 'w').write('t,y\\n0,1\\n')\ntime.sleep(600)\n",
            ),
            ("results/fig.csv", HONEST_CSV),
        ],
        &[],
    )
    .await;
    let start = std::time::Instant::now();
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "re-run"
            dimension = "data_accuracy"
            check = { kind = "reproduce", argv = ["python3", "run.py"], outputs = ["results/fig.csv"] }
            "#,
            None,
            Duration::from_secs(30),
        )
        .await;
    let took = start.elapsed();
    let csv_after = g.sh("cat /workspace/results/fig.csv").await;
    g.remove().await;
    let re = &report.graders[0];
    assert_eq!((re.status, re.score), (Status::Fail, Some(0.0)), "{re:?}");
    assert!(
        re.details.iter().any(|d| d.contains("timed out")),
        "{:?}",
        re.details
    );
    assert!(took < Duration::from_secs(40), "took {took:?}");
    assert_eq!(
        csv_after.stdout, HONEST_CSV,
        "the submitted bytes are restored"
    );
}

/// A `reproduce.py` that copies a data file the agent wrote by hand: the re-run has only the
/// agent's code and the task's inputs (as the task gave them), so the copy fails and the grader
/// scores 0; an honest script reading task inputs still reproduces.
#[tokio::test]
async fn a_copied_hand_written_data_file_does_not_reproduce() {
    let forger = b"import os, shutil\nos.makedirs('results', exist_ok=True)\nshutil.copy('notes/numbers.dat', 'results/fig.csv')\nshutil.copy('notes/summary.dat', 'results/summary.txt')\n";
    let honest = b"import os\nassert open('data/divisor.txt').read().strip() == '2'\nassert open('data/tweaked.txt').read() == 'original\\n', 'a changed task input is there as the task gave it'\nos.makedirs('results', exist_ok=True)\nrows = [(t, t * t / 2) for t in range(5)]\nwith open('results/fig.csv', 'w') as f:\n    f.write('t,y\\n')\n    for t, y in rows:\n        f.write(f'{t},{y!r}\\n')\nopen('results/summary.txt', 'w').write(f'max y = {max(y for _, y in rows)}\\n')\n";
    for (name, run, extra) in [
        (
            "forger",
            &forger[..],
            vec![
                ("notes/numbers.dat", HONEST_CSV),
                ("notes/summary.dat", SUMMARY),
            ],
        ),
        (
            "honest",
            &honest[..],
            vec![
                ("data/divisor.txt", &b"2\n"[..]),
                ("data/tweaked.txt", &b"changed\n"[..]),
            ],
        ),
    ] {
        let mut files: Vec<(&str, &[u8])> = vec![
            ("run.py", run),
            ("results/fig.csv", HONEST_CSV),
            ("results/summary.txt", SUMMARY),
        ];
        files.extend(extra);
        let mut g = Grading::new("python", &files, &[("fig.csv", EXPECTED)]).await;
        // The task's own inputs, as the green agent stages them.
        let staged = g
            .sh("mkdir -p /grader/work/inputs/data && echo 2 > /grader/work/inputs/data/divisor.txt && echo original > /grader/work/inputs/data/tweaked.txt")
            .await;
        assert!(staged.success(), "{staged:?}");
        g.task_inputs = Some("/grader/work/inputs".into());
        let report = g.grade(SPEC, None, Duration::from_secs(300)).await;
        let after = g
            .sh("cat /workspace/notes/numbers.dat /workspace/data/tweaked.txt 2>/dev/null")
            .await;
        g.remove().await;
        let rerun = report
            .graders
            .iter()
            .find(|r| r.name == "re-run")
            .expect("re-run");
        println!(
            "{name}: {:?} {:?} {:?}",
            rerun.status, rerun.score, rerun.details
        );
        if name == "forger" {
            assert_eq!(rerun.status, Status::Fail, "{:?}", rerun.details);
            assert_eq!(rerun.score, Some(0.0));
            assert!(
                rerun
                    .details
                    .iter()
                    .any(|d| d.contains("2 other data file(s)")),
                "{:?}",
                rerun.details
            );
            assert_eq!(
                after.stdout, HONEST_CSV,
                "the delivered data file is put back"
            );
        } else {
            assert_eq!(rerun.status, Status::Pass, "{:?}", rerun.details);
            assert_eq!(after.stdout, b"changed\n", "the changed input is put back");
        }
    }
}
