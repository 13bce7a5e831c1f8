//! SciCode gold code passes every step through `grade()`; seeded mutants of it fail.
//!
//! Targets are derived here from the gold code (Python `ast`, in the grading container): each
//! snippet's comparison with `target` is found and its other side evaluated with the gold code
//! loaded. Mutants (sign flips, off-by-one indices, dropped terms, swapped arguments) are seeded
//! with `ast` too, at most a fixed number per step spread evenly over the step's code, skipping
//! statements that only update dead variables (provably no effect). The mutation score leaves
//! out the mutants listed, each with its reason, in `tests/scicode/equivalent.toml` (same
//! function as gold on every valid input); the raw kill rate is printed beside it.
//!
//! Twice: on SciCode's own inputs, and with the importer's `--perturbed-inputs` copies
//! (`scicode_perturb.perturbed_case`: float inputs moved a little, targets from the gold code).
//! Gold must pass every perturbed copy too; the survivors of the first round run again on the
//! perturbed cases; no mutant of the equivalence ledger may be killed by them (a perturbation
//! that left the function's domain would).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::Grading;
use rubrics::Status;

const MUTANTS_PER_STEP: &str = "8";
/// The gold pass's deadlines. Gold code never hangs: a gold case slower than the product's
/// default 300 s per case is the machine's load (CI ran it beside three other SciCode suites on
/// 2 cores, and case 4 of step 51.4 once took over 300 s), not a finding; the mutants keep the
/// deadlines an imported task's grader gives them (kill.py, from the gold durations).
const GOLD_CASE_SECS: u64 = 900;
const GOLD_BUDGET_SECS: u64 = 1500;

fn read(path: PathBuf) -> Vec<u8> {
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[tokio::test]
async fn shared_data_gold_passes_every_step_and_mutants_fail() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let problems = read(bench_data::path("scicode/problems_dev.jsonl"));
    let prepare = read(manifest.join("tests/scicode/prepare.py"));
    let kill = read(manifest.join("tests/scicode/kill.py"));
    // The runner and its modules, as grading ships them, in a folder of their own (kill.py
    // copies that folder where the runner's worker can read it).
    let runner: Vec<(String, &[u8])> = rubrics::grade::SCICODE_FILES
        .iter()
        .map(|(name, text)| (format!("prep/rb/{name}"), text.as_bytes()))
        .collect();
    let mut hidden: Vec<(&str, &[u8])> = vec![
        ("prep/problems_dev.jsonl", &problems),
        ("prep/prepare.py", &prepare),
        ("prep/kill.py", &kill),
    ];
    hidden.extend(runner.iter().map(|(name, text)| (name.as_str(), *text)));
    let g = Grading::with_cpus(2.0, "python", &[], &hidden).await;
    let t0 = Instant::now();
    let out = g
        .sh(&format!(
            "cd /grader/hidden && python3 prep/prepare.py prep/problems_dev.jsonl sc {MUTANTS_PER_STEP} prep/rb 2 \
             && for d in sc/*/; do p=$(basename $d); mkdir -p /workspace/sc/$p && mv $d/gold.py $d/mutants /workspace/sc/$p/; done"
        ))
        .await;
    assert!(
        out.success(),
        "prepare failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    println!(
        "targets derived and mutants seeded in {:?}: {}",
        t0.elapsed(),
        String::from_utf8_lossy(&out.stdout)
    );

    // Gold through the real grader: one ScicodeSteps grader per problem.
    let pids: Vec<String> = String::from_utf8_lossy(&problems)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("jsonl")["problem_id"]
                .as_str()
                .expect("id")
                .to_owned()
        })
        .collect();
    let spec: String = pids
        .iter()
        .map(|p| {
            format!(
                "[[graders]]\nname = \"scicode {p}\"\ndimension = \"code_correctness\"\ncheck = {{ kind = \"scicode_steps\", hidden_cases = \"sc/{p}/cases_perturbed.json\", output = \"sc/{p}/gold.py\", case_timeout_secs = {GOLD_CASE_SECS} }}\n"
            )
        })
        .collect();
    let report = g
        .grade(&spec, None, Duration::from_secs(GOLD_BUDGET_SECS))
        .await;
    let mut steps = 0;
    for r in &report.graders {
        for t in &r.tests {
            assert_eq!(
                t.status,
                Status::Pass,
                "{}: {} {:?}",
                r.name,
                t.name,
                t.message
            );
            steps += 1;
        }
        assert_eq!(r.score, Some(1.0), "{}", r.name);
        assert_eq!(r.data.as_ref().expect("data")["main_problem_solved"], true);
    }
    assert_eq!(report.graders.len(), pids.len());
    println!(
        "gold: {} problems, {steps} steps, all pass (SciCode's cases and their perturbed copies)",
        pids.len()
    );
    assert!(steps >= 27);

    // Gold per-case durations, so that mutants reach their fastest failing case first.
    let mut durations = serde_json::Map::new();
    for (pid, r) in pids.iter().zip(&report.graders) {
        let mut steps = serde_json::Map::new();
        for st in r.data.as_ref().expect("data")["steps"]
            .as_array()
            .expect("steps")
        {
            let d: Vec<f64> = st["cases"]
                .as_array()
                .expect("cases")
                .iter()
                .map(|c| c["duration_secs"].as_f64().unwrap_or(0.0))
                .collect();
            steps.insert(
                st["step_id"].as_str().expect("id").to_owned(),
                serde_json::json!(d),
            );
        }
        durations.insert(pid.clone(), serde_json::Value::Object(steps));
    }
    let tmp = tempfile::tempdir().expect("tmp");
    std::fs::write(
        tmp.path().join("durations.json"),
        serde_json::to_vec(&durations).expect("json"),
    )
    .expect("write");
    g.sandbox
        .copy_in(tmp.path(), "/grader/hidden/timing")
        .await
        .expect("copy durations");

    // Mutants through the same runner (fail-fast: a mutant is killed at its first failing case;
    // from the mutated step on, each snippet with the deadline an imported task's grader gives
    // it: see kill.py).
    let t1 = Instant::now();
    let mut req = sandbox::ExecRequest::new([
        "python3",
        "/grader/hidden/prep/kill.py",
        "/grader/hidden/prep/rb/scicode_runner.py",
        "/grader/hidden/sc",
        "/workspace/sc",
        "/grader/hidden/sc/manifest.json",
        "60",
        "/grader/hidden/prep",
        "/grader/hidden/timing/durations.json",
        "2",
    ]);
    req.user = Some("root".into());
    req.timeout = Duration::from_secs(1800);
    req.output_cap = 8 * 1024 * 1024;
    let out = g.sandbox.exec(req).await.expect("exec");
    g.remove().await;
    assert!(
        out.success(),
        "kill.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("kill.py JSON");
    let results = v["results"].as_array().expect("results");
    let total = results.len();
    let killed = results.iter().filter(|r| r["killed"] == true).count();
    let killed_perturbed = results
        .iter()
        .filter(|r| r["killed_perturbed"] == true)
        .count();
    let mut by_op: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for r in results {
        let e = by_op
            .entry(r["operator"].as_str().expect("op").to_owned())
            .or_default();
        e.1 += 1;
        if r["killed"] == true {
            e.0 += 1;
        }
    }
    let rate = killed as f64 / total as f64;

    // Equivalent mutants (the ledger, each with its reason) leave the denominator; a ledger
    // entry that matches nothing, or a mutant the grader kills, fails the test.
    let ledger: Ledger = toml::from_str(
        &String::from_utf8(read(manifest.join("tests/scicode/equivalent.toml"))).expect("utf-8"),
    )
    .expect("equivalent.toml parses");
    let mut equivalent = 0;
    for e in &ledger.equivalent {
        let matches: Vec<&serde_json::Value> = results
            .iter()
            .filter(|r| {
                r["problem"] == e.problem.as_str()
                    && r["step"] == e.step.as_str()
                    && r["before"] == e.before.as_str()
                    && r["after"] == e.after.as_str()
            })
            .collect();
        assert_eq!(
            matches.len(),
            1,
            "ledger entry {} {:?} must match exactly one seeded mutant",
            e.step,
            e.after
        );
        assert_ne!(
            matches[0]["killed"], true,
            "ledger entry {} {:?} is killed by the grader (step statuses {}, messages {}), so it \
             is not equivalent: remove it ({})",
            e.step, e.after, matches[0]["statuses"], matches[0]["messages"], e.reason
        );
        assert_ne!(
            matches[0]["killed_perturbed"], true,
            "ledger entry {} {:?} is killed by a perturbed input ({}): the perturbation left the \
             function's domain ({})",
            e.step, e.after, matches[0]["messages"], e.reason
        );
        equivalent += 1;
    }
    let score = killed as f64 / (total - equivalent) as f64;
    let identical = results
        .iter()
        .filter(|r| r["identical_on_tests"] == true)
        .count();
    println!(
        "mutants: {killed}/{total} killed (raw {:.1}%); {equivalent} are equivalent to gold on every valid input \
         (tests/scicode/equivalent.toml); mutation score {killed}/{} = {:.1}%; \
         {identical} survivors give exactly gold's values on SciCode's inputs (in {:?})",
        100.0 * rate,
        total - equivalent,
        100.0 * score,
        t1.elapsed()
    );
    let rate_perturbed = killed_perturbed as f64 / total as f64;
    let score_perturbed = killed_perturbed as f64 / (total - equivalent) as f64;
    println!(
        "with perturbed inputs: {killed_perturbed}/{total} killed (raw {:.1}%); mutation score \
         {killed_perturbed}/{} = {:.1}%",
        100.0 * rate_perturbed,
        total - equivalent,
        100.0 * score_perturbed
    );
    for (op, (k, n)) in &by_op {
        println!("  {op}: {k}/{n}");
    }
    for r in results.iter().filter(|r| r["killed"] != true) {
        let listed = ledger.equivalent.iter().any(|e| {
            r["problem"] == e.problem.as_str()
                && r["before"] == e.before.as_str()
                && r["after"] == e.after.as_str()
        });
        let class = match (
            listed,
            r["killed_perturbed"] == true,
            r["identical_on_tests"] == true,
        ) {
            (true, _, _) => "equivalent (ledger)",
            (false, true, _) => "killed by a perturbed input",
            (false, false, true) => "NOT equivalent, identical to gold on SciCode's inputs",
            (false, false, false) => "NOT equivalent, within the comparison's tolerance",
        };
        println!(
            "  survivor: {} step {} ({}): {class}: {}",
            r["file"], r["step"], r["operator"], r["after"]
        );
    }
    assert!(total >= 100, "too few mutants seeded: {total}");
    assert!(score >= 0.95, "mutation score {score}");
    // Guards against a generator that drifts towards equivalent mutants.
    assert!(rate >= 0.85, "raw kill rate {rate}");
    // Perturbed inputs kill more (measured 2026-11-24: 129/140 raw, 129/130 = 99.2%; the one
    // left, 70.8's `1j * u1 - u2`, shows only at oscillation phases where the target is
    // ill-conditioned, so no copy of that case is kept).
    assert!(
        killed_perturbed > killed,
        "perturbed inputs kill more mutants"
    );
    assert!(
        score_perturbed >= 0.99,
        "mutation score with perturbed inputs {score_perturbed}"
    );
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Ledger {
    equivalent: Vec<Equivalent>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Equivalent {
    problem: String,
    step: String,
    before: String,
    after: String,
    reason: String,
}
