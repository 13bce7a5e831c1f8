//! The results table of a run: compact by default (agent, kind, trials, mean with its interval
//! where it means something, pass@k, cost) with a one-line legend, or every column (`--wide`,
//! and the Markdown report) with the legend of every column.

use std::fmt::Write as _;

use super::summary::SummaryRow;
use super::values;

/// How the summary's means and pass@k count trials (under the HTML report's summary, whose
/// leaderboard explains the callback rate).
pub const SUMMARY_LEGEND: &str = "mean: over graded trials only; strict mean: over every \
planned trial, a trial without a score (infrastructure or judge status, unfinished) counted as \
0; ± 95% CI: shown from 5 samples on; not graded: trials the mean leaves out; pass@k: every \
planned trial is a sample, one without a score counts as not passed.";

/// How the wide table's means, pass@k and callback rate count trials (printed under it).
pub const WIDE_LEGEND: &str = "mean: over graded trials only; strict mean: over every \
planned trial, a trial without a score (infrastructure or judge status, unfinished) counted as \
0; ± 95% CI: shown from 5 samples on; not graded: trials the mean leaves out; pass@k: every \
planned trial is a sample, one without a score counts as not passed; callback rate: share of \
graded trials passing every dimension of their task.";

/// The compact table's legend (one line).
pub const COMPACT_LEGEND: &str = "mean: graded trials, ± 95% CI from 5 on; pass@k: over tasks, unscored = failed; --wide: all columns";

/// Longest agent name shown whole in the compact table.
const AGENT_WIDTH: usize = 32;

/// The results table: compact, or every column when `wide`.
pub fn results_table(summary: &[SummaryRow], wide: bool) -> String {
    if wide {
        wide_table(summary)
    } else {
        compact_table(summary)
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

/// Aligned columns, one row per agent and kind.
fn compact_table(summary: &[SummaryRow]) -> String {
    let head = ["agent", "kind", "trials", "mean", "pass@k", "cost (USD)"];
    let rows: Vec<[String; 6]> = summary
        .iter()
        .map(|r| {
            [
                clip(&r.agent, AGENT_WIDTH),
                r.task_kind.clone(),
                if r.finished == r.trials {
                    r.trials.to_string()
                } else {
                    format!("{}/{}", r.finished, r.trials)
                },
                values::mean_ci(r.mean, r.ci95, r.scored, 3),
                format!("{} (k={})", values::fixed(r.pass_at_k, 3), r.k),
                format!("{:.4}", r.cost_usd),
            ]
        })
        .collect();
    let mut width = head.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut s = String::new();
    let line = |s: &mut String, cells: &[&str]| {
        let text: Vec<String> = cells
            .iter()
            .zip(width)
            .enumerate()
            .map(|(i, (c, w))| {
                let pad = w - c.chars().count();
                // text columns left, numbers right
                if i < 2 {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(s, "{}", text.join("  ").trim_end());
    };
    line(&mut s, &head);
    for row in &rows {
        line(&mut s, &row.each_ref().map(String::as_str));
    }
    s.push('\n');
    s.push_str(COMPACT_LEGEND);
    s.push('\n');
    s
}

fn dims(r: &SummaryRow) -> String {
    if r.dimensions.is_empty() {
        return values::MISSING.into();
    }
    r.dimensions
        .iter()
        .map(|(d, v)| format!("{d} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn failures(r: &SummaryRow) -> String {
    if r.failures.is_empty() {
        return "none".into();
    }
    r.failures
        .iter()
        .map(|(c, n)| format!("{c}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every column, as a Markdown table (the Markdown report's summary).
pub fn wide_table(summary: &[SummaryRow]) -> String {
    let mut s = String::new();
    s.push_str("| agent | task kind | trials | mean ± 95% CI | strict mean ± 95% CI | not graded | pass@k | callback rate | dimensions | tokens in/out | cost (USD) | failures |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in summary {
        let _ = writeln!(
            s,
            "| {} | {} | {}/{} | {} | {} | {} | pass@{} {} | {} | {} | {}/{} | {:.4} | {} |",
            r.agent.replace('|', "\\|"),
            r.task_kind,
            r.finished,
            r.trials,
            values::mean_ci(r.mean, r.ci95, r.scored, 3),
            values::mean_ci(r.strict_mean, r.strict_ci95, r.trials, 3),
            r.excluded,
            r.k,
            values::fixed(r.pass_at_k, 3),
            values::fixed(r.callback_rate, 3),
            dims(r),
            r.input_tokens,
            r.output_tokens,
            r.cost_usd,
            failures(r),
        );
    }
    s.push('\n');
    s.push_str(WIDE_LEGEND);
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn row(agent: &str, kind: &str, n: usize, mean: f64, ci: f64) -> SummaryRow {
        SummaryRow {
            agent: agent.into(),
            task_kind: kind.into(),
            trials: n,
            finished: n,
            scored: n,
            mean: Some(mean),
            ci95: Some(ci),
            strict_mean: Some(mean),
            strict_ci95: Some(ci),
            excluded: 0,
            k: 1,
            pass_at_k: Some(mean),
            callback_rate: Some(mean),
            dimensions: BTreeMap::from([("code_correctness".to_owned(), mean)]),
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            failures: BTreeMap::new(),
        }
    }

    #[test]
    fn the_compact_table_fits_a_terminal_and_drops_intervals_over_a_handful() {
        let t = results_table(
            &[
                row("oracle", "mmsicode", 3, 1.0, 0.0),
                row(
                    "claude-code:model=claude-sonnet-4-5-20250929",
                    "scicode",
                    20,
                    0.55,
                    0.2,
                ),
            ],
            false,
        );
        let widest = t.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 100, "{widest} columns:\n{t}");
        assert!(!t.contains("± 0.000"), "{t}");
        assert!(t.contains("0.550 ± 0.200"), "{t}");
        assert!(t.contains("claude-code:model=claude-sonnet…  "), "{t}");
        assert_eq!(t.matches("callback").count(), 0, "not shown, not explained");
        assert!(t.trim_end().ends_with(COMPACT_LEGEND));
    }

    #[test]
    fn the_wide_table_has_every_column_and_explains_the_callback_rate_once() {
        let t = results_table(&[row("nop", "generic", 1, 0.0, 0.0)], true);
        assert_eq!(t.lines().next().map(|l| l.matches(" | ").count()), Some(11));
        assert_eq!(t.matches("callback rate:").count(), 1);
        assert!(t.contains("| 1/1 | 0.000 | 0.000 |"), "{t}");
    }
}
