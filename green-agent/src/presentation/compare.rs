//! Paired comparison of agents on the same tasks (pure statistics, no I/O).
//!
//! For each pair of agents: per-task paired differences of mean score (over repeats) with a
//! percentile bootstrap 95% CI of their mean (seeded, reproducible), an exact sign test on those
//! differences, and an exact McNemar test on pass/fail paired by (task, repeat). With more than
//! two agents every pair is compared and the McNemar p-values are Holm-corrected.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::TrialRow;

/// Bootstrap resamples.
pub const RESAMPLES: usize = 10_000;
/// Fixed seed: the same data gives the same interval.
const SEED: u64 = 0x5eed_cafe_f00d_0001;

/// One task's paired scores.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TaskDiff {
    pub task_id: String,
    /// Mean score of agent A over its scored repeats.
    pub a: f64,
    pub b: f64,
    /// `a - b`.
    pub diff: f64,
}

/// An exact two-sided binomial test of `x` successes against `y` (p = 1/2).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct SignTest {
    /// Tasks (or trial pairs) where A did better.
    pub a_better: u64,
    pub b_better: u64,
    pub ties: u64,
    pub p: f64,
}

/// Agent A against agent B.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PairComparison {
    pub a: String,
    pub b: String,
    /// Tasks where both agents have a score.
    pub tasks: usize,
    pub mean_a: Option<f64>,
    pub mean_b: Option<f64>,
    /// Mean of the per-task differences `a - b`.
    pub mean_diff: Option<f64>,
    /// Percentile bootstrap 95% CI of `mean_diff` (over tasks).
    pub ci95: Option<(f64, f64)>,
    /// Sign test on the per-task score differences.
    pub sign: SignTest,
    /// McNemar's exact test on pass/fail, paired by (task, repeat): `a_better` = A passed and B
    /// did not, `b_better` the reverse, `ties` = both or neither.
    pub mcnemar: SignTest,
    /// McNemar p-value after Holm's correction over all pairs compared (= `mcnemar.p` for one
    /// pair).
    pub p_holm: f64,
    pub per_task: Vec<TaskDiff>,
}

/// Compares every pair of `agents` (in the order given) over `trials`.
pub fn compare(trials: &[TrialRow], agents: &[String]) -> Vec<PairComparison> {
    let mut pairs = Vec::new();
    for (i, a) in agents.iter().enumerate() {
        for b in &agents[i + 1..] {
            pairs.push(pair(trials, a, b));
        }
    }
    let adjusted = holm(&pairs.iter().map(|p| p.mcnemar.p).collect::<Vec<_>>());
    for (p, adj) in pairs.iter_mut().zip(adjusted) {
        p.p_holm = adj;
    }
    pairs
}

fn pair(trials: &[TrialRow], a: &str, b: &str) -> PairComparison {
    // task → (sum, n) of scores; (task, repeat) → passed
    let mut scores: BTreeMap<(&str, &str), (f64, u32)> = BTreeMap::new();
    // several runs may hold the same (task, repeat): their outcomes pair in order
    let mut passes: BTreeMap<(&str, &str, u32), Vec<bool>> = BTreeMap::new();
    for t in trials {
        let agent = t.planned.agent.as_str();
        if agent != a && agent != b {
            continue;
        }
        let Some(r) = &t.result else { continue };
        let Some(s) = r.score else { continue };
        let e = scores
            .entry((agent, t.planned.task_id.as_str()))
            .or_default();
        e.0 += s;
        e.1 += 1;
        passes
            .entry((agent, t.planned.task_id.as_str(), t.planned.repeat_index))
            .or_default()
            .push(r.passed);
    }
    let per_task: Vec<TaskDiff> = scores
        .iter()
        .filter(|((agent, _), _)| *agent == a)
        .filter_map(|((_, task), (sa, na))| {
            let (sb, nb) = scores.get(&(b, task))?;
            let (ma, mb) = (sa / f64::from(*na), sb / f64::from(*nb));
            Some(TaskDiff {
                task_id: (*task).to_owned(),
                a: ma,
                b: mb,
                diff: ma - mb,
            })
        })
        .collect();
    let diffs: Vec<f64> = per_task.iter().map(|d| d.diff).collect();
    let mean = |v: &mut dyn Iterator<Item = f64>| {
        let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
        (n > 0).then(|| s / n as f64)
    };
    let sign = {
        let a_better = diffs.iter().filter(|d| **d > 0.0).count() as u64;
        let b_better = diffs.iter().filter(|d| **d < 0.0).count() as u64;
        SignTest {
            a_better,
            b_better,
            ties: diffs.len() as u64 - a_better - b_better,
            p: binomial_two_sided(a_better, b_better),
        }
    };
    let mcnemar = {
        let (mut a_only, mut b_only, mut same) = (0u64, 0u64, 0u64);
        for ((agent, task, rep), pa) in &passes {
            if *agent != a {
                continue;
            }
            let Some(pb) = passes.get(&(b, task, *rep)) else {
                continue;
            };
            for (pa, pb) in pa.iter().zip(pb) {
                match (pa, pb) {
                    (true, false) => a_only += 1,
                    (false, true) => b_only += 1,
                    _ => same += 1,
                }
            }
        }
        SignTest {
            a_better: a_only,
            b_better: b_only,
            ties: same,
            p: binomial_two_sided(a_only, b_only),
        }
    };
    PairComparison {
        a: a.to_owned(),
        b: b.to_owned(),
        tasks: per_task.len(),
        mean_a: mean(&mut per_task.iter().map(|d| d.a)),
        mean_b: mean(&mut per_task.iter().map(|d| d.b)),
        mean_diff: mean(&mut diffs.iter().copied()),
        ci95: bootstrap_ci95(&diffs, RESAMPLES),
        sign,
        p_holm: mcnemar.p,
        mcnemar,
        per_task,
    }
}

/// Picks agents from a comma-separated list, matching against the run's agents (an agent spec
/// may itself contain commas, e.g. a `cmd:` command). Empty means every agent.
pub fn pick_agents(list: &str, known: &[String]) -> Result<Vec<String>, String> {
    if list.trim().is_empty() {
        return Ok(known.to_vec());
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    for piece in list.split(',') {
        if !cur.is_empty() {
            cur.push(',');
        }
        cur.push_str(piece);
        let name = cur.trim();
        if known.iter().any(|k| k == name) {
            out.push(name.to_owned());
            cur.clear();
        }
    }
    if !cur.trim().is_empty() {
        return Err(format!(
            "unknown agent `{}` (the run's agents: {})",
            cur.trim(),
            known.join(", ")
        ));
    }
    if out.len() < 2 {
        return Err("a comparison needs at least two agents".into());
    }
    Ok(out)
}

/// The comparison as Markdown (for `green-agent report RUN --compare A,B`).
pub fn markdown(run: &str, pairs: &[PairComparison]) -> String {
    use std::fmt::Write;
    let f = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.3}"));
    let mut out = format!("# Paired comparison: run {run}\n\n");
    let _ = write!(
        out,
        "Per-task differences of mean score (A − B) with a percentile bootstrap 95% CI \
         ({RESAMPLES} resamples); sign test on the per-task differences; McNemar's exact test on \
         pass/fail paired by (task, repeat), Holm-corrected over all pairs.\n\n"
    );
    out.push_str("| A | B | tasks | mean A | mean B | A − B | 95% CI | sign test (A>B / B>A / =, p) | McNemar (A only / B only, p) | p (Holm) |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for p in pairs {
        let ci = p
            .ci95
            .map_or("—".to_owned(), |(lo, hi)| format!("[{lo:.3}, {hi:.3}]"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} / {}, p = {:.4} | {} / {}, p = {:.4} | {:.4} |",
            p.a.replace('|', "\\|"),
            p.b.replace('|', "\\|"),
            p.tasks,
            f(p.mean_a),
            f(p.mean_b),
            f(p.mean_diff),
            ci,
            p.sign.a_better,
            p.sign.b_better,
            p.sign.ties,
            p.sign.p,
            p.mcnemar.a_better,
            p.mcnemar.b_better,
            p.mcnemar.p,
            p.p_holm
        );
    }
    for p in pairs {
        let _ = write!(
            out,
            "\n## {} vs {}\n\n| task | A | B | A − B |\n|---|---|---|---|\n",
            p.a, p.b
        );
        for d in &p.per_task {
            let _ = writeln!(
                out,
                "| {} | {:.3} | {:.3} | {:+.3} |",
                d.task_id, d.a, d.b, d.diff
            );
        }
    }
    out
}

/// SplitMix64: a small, good-enough generator for resampling indices.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        // n is small (tasks); the modulo bias is below 2^-40
        (self.next() % n as u64) as usize
    }
}

/// Percentile bootstrap 95% CI of the mean of `samples` (`None` for no samples; a point for one).
pub fn bootstrap_ci95(samples: &[f64], resamples: usize) -> Option<(f64, f64)> {
    let n = samples.len();
    if n == 0 {
        return None;
    }
    let mut rng = SplitMix(SEED);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| (0..n).map(|_| samples[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * (means.len() - 1) as f64).round() as usize).min(means.len() - 1)];
    Some((at(0.025), at(0.975)))
}

/// Exact two-sided binomial test (p = 1/2) of `x` against `y` successes: the sign test, and
/// McNemar's exact test on the discordant pairs. 1.0 when there is nothing to test.
pub fn binomial_two_sided(x: u64, y: u64) -> f64 {
    let n = x + y;
    if n == 0 {
        return 1.0;
    }
    let k = x.min(y);
    // ln C(n, i) - n ln 2, summed for i = 0..=k
    let ln2n = n as f64 * std::f64::consts::LN_2;
    let mut ln_c = 0.0f64;
    let mut tail = 0.0f64;
    for i in 0..=k {
        if i > 0 {
            ln_c += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_c - ln2n).exp();
    }
    (2.0 * tail).min(1.0)
}

/// Holm's step-down adjustment of `p` (same order as given).
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut out = vec![0.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * p[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}

/// Picks agents (known: `order` first, then any other with trials) and compares them; an
/// unknown agent is an error naming the known ones.
pub fn compare_rows(
    rows: &[crate::store::TrialRow],
    order: &[String],
    agents: Option<&str>,
) -> Result<(Vec<String>, Vec<PairComparison>), String> {
    let mut known: Vec<String> = order
        .iter()
        .filter(|a| rows.iter().any(|r| &r.planned.agent == *a))
        .cloned()
        .collect();
    for r in rows {
        if !known.contains(&r.planned.agent) {
            known.push(r.planned.agent.clone());
        }
    }
    let picked = pick_agents(agents.unwrap_or(""), &known)?;
    let pairs = compare(rows, &picked);
    Ok((known, pairs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Outcome, PlannedTrial, TrialResult, Usage};

    fn trial(agent: &str, task: &str, rep: u32, score: f64, passed: bool) -> TrialRow {
        TrialRow {
            planned: PlannedTrial {
                id: format!("{agent}-{task}-{rep}"),
                task_id: task.into(),
                task_kind: "k".into(),
                task_hash: "h".into(),
                agent: agent.into(),
                repeat_index: rep,
            },
            state: "done".into(),
            result: Some(TrialResult {
                outcome: Outcome::Completed,
                exit_code: Some(0),
                score: Some(score),
                passed,
                grade_status: Some("ok".into()),
                dimensions: BTreeMap::new(),
                flags: vec![],
                phases: BTreeMap::new(),
                attempts: 1,
                error: None,
                isolated: true,
                grade_report: None,
                usage: Usage::default(),
                artifacts: vec![],
            }),
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn binomial_matches_hand_computed_values() {
        // 0 of 5: 2 * (1/32)
        assert!((binomial_two_sided(0, 5) - 0.0625).abs() < 1e-12);
        // 1 of 9: 2 * (1 + 9) / 512
        assert!((binomial_two_sided(1, 8) - 20.0 / 512.0).abs() < 1e-12);
        assert_eq!(binomial_two_sided(3, 3), 1.0);
        assert_eq!(binomial_two_sided(0, 0), 1.0);
        // large n stays finite and tiny
        let p = binomial_two_sided(0, 2000);
        assert!((0.0..1e-300).contains(&p));
        assert!((binomial_two_sided(1000, 1000) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn holm_adjusts_step_down_and_keeps_order() {
        let adj = holm(&[0.01, 0.04, 0.03]);
        // sorted: 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> max-accumulated 0.06
        assert!((adj[0] - 0.03).abs() < 1e-12);
        assert!((adj[2] - 0.06).abs() < 1e-12);
        assert!((adj[1] - 0.06).abs() < 1e-12);
        assert_eq!(holm(&[0.5]), vec![0.5]);
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
    }

    #[test]
    fn bootstrap_brackets_the_mean_and_is_reproducible() {
        let d = [0.1, 0.3, 0.2, 0.5, -0.1, 0.4, 0.2, 0.0];
        let (lo, hi) = bootstrap_ci95(&d, RESAMPLES).expect("ci");
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        assert!(lo < mean && mean < hi, "{lo} < {mean} < {hi}");
        assert!(lo > -0.1 && hi < 0.5);
        assert_eq!(bootstrap_ci95(&d, RESAMPLES), Some((lo, hi)));
        assert_eq!(bootstrap_ci95(&[0.25], 100), Some((0.25, 0.25)));
        assert_eq!(bootstrap_ci95(&[], 100), None);
    }

    #[test]
    fn a_pair_is_compared_on_shared_tasks_only() {
        let mut trials = Vec::new();
        for (i, task) in ["t1", "t2", "t3", "t4", "t5", "t6"].iter().enumerate() {
            trials.push(trial("oracle", task, 0, 1.0, true));
            trials.push(trial("oracle", task, 1, 1.0, true));
            trials.push(trial("nop", task, 0, 0.0, false));
            // nop's second repeat passes one task
            trials.push(trial(
                "nop",
                task,
                1,
                if i == 0 { 1.0 } else { 0.0 },
                i == 0,
            ));
        }
        trials.push(trial("oracle", "only-oracle", 0, 1.0, true));
        let out = compare(&trials, &["oracle".into(), "nop".into()]);
        assert_eq!(out.len(), 1);
        let c = &out[0];
        assert_eq!(c.tasks, 6, "the task only one agent ran is left out");
        assert_eq!(c.per_task[0].diff, 0.5);
        assert!((c.mean_diff.expect("diff") - (0.5 + 5.0) / 6.0).abs() < 1e-12);
        assert_eq!((c.sign.a_better, c.sign.b_better, c.sign.ties), (6, 0, 0));
        assert!((c.sign.p - 2.0 / 64.0).abs() < 1e-12);
        assert_eq!(
            (c.mcnemar.a_better, c.mcnemar.b_better, c.mcnemar.ties),
            (11, 0, 1)
        );
        assert!((c.mcnemar.p - 2.0 / 2048.0).abs() < 1e-12);
        assert_eq!(c.p_holm, c.mcnemar.p, "one pair: no correction");
        let (lo, hi) = c.ci95.expect("ci");
        assert!(lo <= hi && hi <= 1.0 && lo > 0.5);
    }

    #[test]
    fn agents_are_picked_even_with_commas_in_their_specs() {
        let known = vec!["oracle".to_owned(), "cmd:a,b".to_owned(), "nop".to_owned()];
        assert_eq!(pick_agents("", &known).expect("all"), known);
        assert_eq!(
            pick_agents("cmd:a,b,nop", &known).expect("two"),
            ["cmd:a,b", "nop"]
        );
        assert!(
            pick_agents("oracle,ghost", &known)
                .unwrap_err()
                .contains("ghost")
        );
        assert!(
            pick_agents("oracle", &known).is_err(),
            "one agent is no comparison"
        );
    }

    #[test]
    fn markdown_lists_every_pair_and_task() {
        let trials = vec![
            trial("x", "t", 0, 1.0, true),
            trial("y", "t", 0, 0.0, false),
        ];
        let md = markdown("r", &compare(&trials, &["x".into(), "y".into()]));
        assert!(md.contains("| x | y | 1 | 1.000 | 0.000 | 1.000 |"), "{md}");
        assert!(md.contains("| t | 1.000 | 0.000 | +1.000 |"), "{md}");
    }

    #[test]
    fn the_same_task_and_repeat_in_two_runs_pairs_twice() {
        let trials = vec![
            trial("x", "t", 0, 1.0, true),
            trial("y", "t", 0, 0.0, false),
            trial("x", "t", 0, 1.0, true),
            trial("y", "t", 0, 1.0, true),
        ];
        let c = &compare(&trials, &["x".into(), "y".into()])[0];
        assert_eq!(
            (c.mcnemar.a_better, c.mcnemar.b_better, c.mcnemar.ties),
            (1, 0, 1)
        );
        assert_eq!(c.per_task[0].b, 0.5, "the task's mean over both runs");
    }

    #[test]
    fn three_agents_give_three_holm_corrected_pairs() {
        let mut trials = Vec::new();
        for task in ["a", "b", "c", "d"] {
            trials.push(trial("x", task, 0, 1.0, true));
            trials.push(trial("y", task, 0, 0.0, false));
            trials.push(trial("z", task, 0, 1.0, true));
        }
        let out = compare(&trials, &["x".into(), "y".into(), "z".into()]);
        let names: Vec<(&str, &str)> = out.iter().map(|p| (p.a.as_str(), p.b.as_str())).collect();
        assert_eq!(names, [("x", "y"), ("x", "z"), ("y", "z")]);
        for p in &out {
            assert!(p.p_holm >= p.mcnemar.p);
        }
        // x vs z: identical, p = 1
        assert_eq!(out[1].mcnemar.p, 1.0);
        assert_eq!(out[1].p_holm, 1.0);
        // x vs y: 4 discordant pairs, p = 2/16; Holm with m = 3 (smallest of two equal p's)
        assert!((out[0].mcnemar.p - 0.125).abs() < 1e-12);
        assert!((out[0].p_holm - 0.375).abs() < 1e-12);
    }
}
