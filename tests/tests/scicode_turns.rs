//! SciCode's step-by-step protocol as upstream runs it: the steps of a problem are asked one
//! per turn, each prompt showing the agent's OWN code for the steps before, and step k is
//! graded on that code as it was at the end of turn k. One small dev problem (19: step 19.2's
//! `n_tangle` calls step 19.1's `tensor`) and three `cmd:` agents, each a shell script that
//! counts its turns in the container's `/tmp` and keeps every prompt it got (`seen-<n>.md`):
//! - `wrong`: a wrong `tensor` in turn 1, the gold `n_tangle` in turn 2. Turn 2's prompt shows
//!   the wrong `tensor`; 19.1 fails and so does 19.2, tested with the agent's own 19.1 (as
//!   upstream, which runs step k with the model's steps 1..k).
//! - `fixes`: the same, but turn 2 also redefines `tensor` correctly: 19.2 passes (its turn's
//!   code), 19.1 still fails (graded on turn 1's code, not the file's final state).
//! - `quits`: a correct `tensor`, then exits 3 in turn 1: 19.1 passes, turn 2 is never sent,
//!   19.2 scores 0; the trial is `failed`, not an infrastructure error.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use e2e_tests::{leftovers, report_json, run_green};

const TENSOR_GOLD: &str = "
def tensor(*args):
    M = 1
    for a in args:
        M = np.kron(M, a)
    return M
";

const N_TANGLE_GOLD: &str = "
def n_tangle(psi):
    n = int(np.log2(len(psi)))
    sigma_y = np.array([[0,-1j],[1j,0]])
    product = sigma_y
    for i in range(n-1):
        product = tensor(product,sigma_y)
    psi_star = product @ np.conj(psi)
    return (abs(np.inner(psi,psi_star)))**2
";

const TENSOR_WRONG: &str = "
def tensor(*args):
    return np.ones(4)  # WRONG-TENSOR
";

/// A `cmd:` agent: `turn1`/`turn2` appended to `solution.py` in its turns; `quit` exits 3
/// after turn 1's code.
fn agent(turn1: &str, turn2: &str, quit: bool) -> String {
    let script = format!(
        "n=$(( $(cat /tmp/rb-test-turn 2>/dev/null || echo 0) + 1 )); echo \"$n\" > /tmp/rb-test-turn\n\
         cp \"$AGENT_INSTRUCTION_FILE\" \"seen-$n.md\"\n\
         if [ \"$n\" = 1 ]; then\ncat >> solution.py <<'PY'\n{turn1}PY\n{}\nelse\ncat >> solution.py <<'PY'\n{turn2}PY\nfi\n",
        if quit { "exit 3" } else { ":" }
    );
    let b64 = base64::engine::general_purpose::STANDARD.encode(script);
    format!("cmd:echo {b64} | base64 -d | sh")
}

/// The text of a stored `file:` artifact of a trial.
fn file(results: &std::path::Path, run: &str, trial: &serde_json::Value, name: &str) -> String {
    let sha = trial["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .find(|a| a["name"] == format!("file:{name}"))
        .unwrap_or_else(|| panic!("no {name} among {}", trial["artifacts"]))["sha256"]
        .as_str()
        .expect("sha")
        .to_owned();
    let dir = results.join(run).join("blobs").join(&sha[..2]);
    let blob = std::fs::read_dir(&dir)
        .expect("blob folder")
        .map(|e| e.expect("entry").path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&sha))
        })
        .expect("blob");
    std::fs::read_to_string(blob).expect("text blob")
}

/// Step id → grader status of a trial.
fn steps(trial: &serde_json::Value) -> BTreeMap<String, String> {
    trial["grade"]["graders"]
        .as_array()
        .expect("graders")
        .iter()
        .flat_map(|g| g["data"]["steps"].as_array().cloned().unwrap_or_default())
        .map(|s| {
            (
                s["step_id"].as_str().expect("step").to_owned(),
                s["status"].as_str().expect("status").to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_data_step_by_step_shows_and_grades_the_agents_own_earlier_code() {
    let problems = std::fs::read_to_string(bench_data::path("scicode/problems_dev.jsonl"))
        .expect("SciCode dev problems");
    let line = problems
        .lines()
        .find(|l| l.contains("\"problem_id\": \"19\""))
        .expect("problem 19");
    let src = tempfile::tempdir().expect("tempdir");
    let jsonl = src.path().join("p19.jsonl");
    std::fs::write(&jsonl, format!("{line}\n")).expect("write");
    let dest = tempfile::tempdir().expect("tempdir");
    let out = run_green(
        &[
            "tasks",
            "import",
            "scicode",
            &jsonl.display().to_string(),
            &dest.path().display().to_string(),
            "--protocol",
            "step-by-step",
        ],
        &BTreeMap::new(),
        Duration::from_secs(900),
    )
    .await;
    out.assert_success();

    let wrong = agent(TENSOR_WRONG, N_TANGLE_GOLD, false);
    let fixes = agent(
        TENSOR_WRONG,
        &format!("{TENSOR_GOLD}{N_TANGLE_GOLD}"),
        false,
    );
    let quits = agent(TENSOR_GOLD, N_TANGLE_GOLD, true);
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-scicode-turns-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            &dest.path().display().to_string(),
            "--agents",
            &format!("{wrong},{fixes},{quits}"),
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(900),
    )
    .await;
    out.assert_success();
    let report = report_json(results.path(), &run_id);
    let trials = report["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 3);
    let by_agent = |a: &str| {
        trials
            .iter()
            .find(|t| t["agent"] == a)
            .unwrap_or_else(|| panic!("no trial of {a}"))
    };
    let pairs = |v: &[(&str, &str)]| -> BTreeMap<String, String> {
        v.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    };

    let t = by_agent(&wrong);
    assert_eq!(t["outcome"], "completed", "{t}");
    let seen2 = file(results.path(), &run_id, t, "seen-2.md");
    assert!(
        seen2.contains("WRONG-TENSOR") && !seen2.contains("np.kron"),
        "turn 2's prompt shows the agent's own step 19.1, not the gold code:\n{seen2}"
    );
    let seen1 = file(results.path(), &run_id, t, "seen-1.md");
    assert!(seen1.contains("step 19.1 (turn 1 of 2)") && !seen1.contains("WRONG"));
    assert_eq!(
        steps(t),
        pairs(&[("19.1", "fail"), ("19.2", "fail")]),
        "{t}"
    );
    assert_eq!(t["score"].as_f64(), Some(0.0));

    let t = by_agent(&fixes);
    assert_eq!(
        steps(t),
        pairs(&[("19.1", "fail"), ("19.2", "pass")]),
        "{t}"
    );
    assert_eq!(t["score"].as_f64(), Some(0.5));
    assert!(
        file(results.path(), &run_id, t, ".turns/19.1/solution.py").contains("WRONG-TENSOR"),
        "step 19.1 is graded on turn 1's code"
    );

    let t = by_agent(&quits);
    assert_eq!(t["outcome"], "failed", "{t}");
    let flags = t["flags"].to_string();
    assert!(flags.contains("later turn(s) were not sent"), "{flags}");
    assert_eq!(steps(t)["19.1"], "pass", "{t}");
    assert_ne!(
        steps(t).get("19.2").map(String::as_str),
        Some("pass"),
        "{t}"
    );
    assert_eq!(t["score"].as_f64(), Some(0.5));
    assert!(
        !trials.iter().any(|t| t["outcome"] == "infra_error"),
        "{trials:?}"
    );
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}
