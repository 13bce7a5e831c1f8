//! Plot geometry for the dashboard, computed here and drawn as SVG by the `plots.html` template
//! macros (no JavaScript library): score distribution per agent, mean time per phase per agent,
//! one trial's phase timeline, mean score ± 95% CI per agent.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::store::TrialRow;

/// Phases in pipeline order (others follow alphabetically).
const PHASE_ORDER: [&str; 7] = [
    "ahead", "create", "ready", "agent", "collect", "grade", "record",
];
/// One colour per phase slot (colour-blind-safe palette).
const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#e15759", "#76b7b2", "#edc948", "#9c755f",
];

const LABEL_W: f64 = 230.0;
const PLOT_W: f64 = 520.0;
const BAND_H: f64 = 34.0;
const TOP: f64 = 10.0;
const AXIS_H: f64 = 28.0;

#[derive(Debug, Clone, Serialize)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
    pub fill: String,
    pub title: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    pub x: f64,
    pub label: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Band {
    pub label: String,
    /// Baseline (bottom) of the band.
    pub y: f64,
    pub rects: Vec<Rect>,
    /// A marker (mean), if any: x and its text.
    pub marker: Option<(f64, String)>,
    /// An interval (CI) drawn as a whisker: x0, x1.
    pub whisker: Option<(f64, f64)>,
    /// A vertical line across the band (a mean), if any.
    pub rule: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LegendItem {
    pub label: String,
    pub fill: String,
}

/// A horizontal band chart: one band per label, an x axis under them.
#[derive(Debug, Clone, Serialize)]
pub struct BandChart {
    pub title: String,
    pub width: f64,
    pub height: f64,
    pub x0: f64,
    pub x1: f64,
    pub axis_y: f64,
    pub bands: Vec<Band>,
    pub ticks: Vec<Tick>,
    pub legend: Vec<LegendItem>,
}

/// Width of one character of a band label (12px text), a little over the average.
const LABEL_CHAR_W: f64 = 7.0;

/// Moves the plot right as far as its longest band label needs (labels sit left of `x0`,
/// right-aligned): no label is cut off at the chart's left edge.
fn fit_labels(mut c: BandChart) -> BandChart {
    let longest = c
        .bands
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(0);
    let need = longest as f64 * LABEL_CHAR_W + 16.0;
    let shift = (need - c.x0).max(0.0);
    if shift == 0.0 {
        return c;
    }
    c.width += shift;
    c.x0 += shift;
    c.x1 += shift;
    for t in &mut c.ticks {
        t.x += shift;
    }
    for b in &mut c.bands {
        for r in &mut b.rects {
            r.x += shift;
        }
        if let Some(m) = &mut b.marker {
            m.0 += shift;
        }
        if let Some(w) = &mut b.whisker {
            w.0 += shift;
            w.1 += shift;
        }
        if let Some(r) = &mut b.rule {
            *r += shift;
        }
    }
    c
}

/// An agent name short enough for a band label.
fn clip(name: &str) -> String {
    const MAX: usize = 24;
    if name.chars().count() <= MAX {
        name.to_owned()
    } else {
        format!("{}…", name.chars().take(MAX - 1).collect::<String>())
    }
}

fn chart(title: &str, n: usize) -> BandChart {
    let axis_y = TOP + BAND_H * n.max(1) as f64;
    BandChart {
        title: title.to_owned(),
        width: LABEL_W + PLOT_W + 80.0,
        height: axis_y + AXIS_H,
        x0: LABEL_W,
        x1: LABEL_W + PLOT_W,
        axis_y,
        bands: Vec::new(),
        ticks: Vec::new(),
        legend: Vec::new(),
    }
}

fn unit_ticks() -> Vec<Tick> {
    (0..=5)
        .map(|i| {
            let v = f64::from(i) / 5.0;
            Tick {
                x: LABEL_W + v * PLOT_W,
                label: format!("{v:.1}"),
            }
        })
        .collect()
}

/// Score histogram per agent (ten bins over [0, 1]; bar height = share of the agent's scored
/// trials), with the mean marked.
pub fn score_distribution(trials: &[TrialRow]) -> Option<BandChart> {
    let mut by_agent: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for t in trials {
        if let Some(s) = t.result.as_ref().and_then(|r| r.score) {
            by_agent
                .entry(t.planned.agent.as_str())
                .or_default()
                .push(s.clamp(0.0, 1.0));
        }
    }
    if by_agent.is_empty() {
        return None;
    }
    let mut c = chart("Score distribution per agent", by_agent.len());
    c.ticks = unit_ticks();
    let bin_w = PLOT_W / 10.0;
    for (i, (agent, scores)) in by_agent.iter().enumerate() {
        let y = TOP + BAND_H * (i as f64 + 1.0);
        let mut bins = [0usize; 10];
        for s in scores {
            bins[((s * 10.0) as usize).min(9)] += 1;
        }
        let n = scores.len() as f64;
        let rects = bins
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(b, &count)| {
                let h = (BAND_H - 6.0) * count as f64 / n;
                let lo = b as f64 / 10.0;
                Rect {
                    x: LABEL_W + b as f64 * bin_w + 1.0,
                    y: y - h,
                    w: bin_w - 2.0,
                    h,
                    fill: score_colour(lo + 0.05).to_owned(),
                    title: format!("{count} trial(s) scored {lo:.1}–{:.1}", lo + 0.1),
                }
            })
            .collect();
        let mean = scores.iter().sum::<f64>() / n;
        c.bands.push(Band {
            label: format!("{} (n={}, mean {mean:.2})", clip(agent), scores.len()),
            y,
            rects,
            marker: None,
            whisker: None,
            rule: Some(LABEL_W + mean * PLOT_W),
        });
    }
    Some(fit_labels(c))
}

fn score_colour(s: f64) -> &'static str {
    if s >= 0.9 {
        "#2e7d32"
    } else if s >= 0.5 {
        "#f9a825"
    } else {
        "#c62828"
    }
}

fn phase_names<'a>(phases: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in phases {
        if !names.contains(p) {
            names.push(p.clone());
        }
    }
    names.sort_by_key(|n| {
        (
            PHASE_ORDER
                .iter()
                .position(|p| p == n)
                .unwrap_or(PHASE_ORDER.len()),
            n.clone(),
        )
    });
    names
}

fn ms_label(ms: f64) -> String {
    if ms >= 60_000.0 {
        format!("{:.1} min", ms / 60_000.0)
    } else if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.0} ms")
    }
}

fn time_ticks(max_ms: f64) -> Vec<Tick> {
    (0..=4)
        .map(|i| {
            let v = max_ms * f64::from(i) / 4.0;
            Tick {
                x: LABEL_W + PLOT_W * f64::from(i) / 4.0,
                label: ms_label(v),
            }
        })
        .collect()
}

fn stacked(
    mut c: BandChart,
    rows: Vec<(String, BTreeMap<String, f64>)>,
    names: &[String],
) -> BandChart {
    let max = rows
        .iter()
        .map(|(_, m)| m.values().sum::<f64>())
        .fold(0.0, f64::max)
        .max(1.0);
    c.ticks = time_ticks(max);
    c.legend = names
        .iter()
        .enumerate()
        .map(|(i, n)| LegendItem {
            label: n.clone(),
            fill: PALETTE[i % PALETTE.len()].to_owned(),
        })
        .collect();
    for (i, (label, phases)) in rows.into_iter().enumerate() {
        let y = TOP + BAND_H * (i as f64 + 1.0);
        let mut x = LABEL_W;
        let mut rects = Vec::new();
        for (j, n) in names.iter().enumerate() {
            let Some(&ms) = phases.get(n) else { continue };
            let w = PLOT_W * ms / max;
            rects.push(Rect {
                x,
                y: y - (BAND_H - 8.0),
                w,
                h: BAND_H - 10.0,
                fill: PALETTE[j % PALETTE.len()].to_owned(),
                title: format!("{n}: {}", ms_label(ms)),
            });
            x += w;
        }
        let total = phases.values().sum::<f64>();
        c.bands.push(Band {
            label,
            y,
            rects,
            marker: Some((x, ms_label(total))),
            whisker: None,
            rule: None,
        });
    }
    c
}

/// Mean time per phase per agent over its finished trials, stacked in pipeline order.
pub fn phase_times(trials: &[TrialRow]) -> Option<BandChart> {
    let mut sums: BTreeMap<&str, (BTreeMap<String, f64>, usize)> = BTreeMap::new();
    for t in trials {
        if let Some(r) = &t.result {
            let e = sums.entry(t.planned.agent.as_str()).or_default();
            e.1 += 1;
            for (p, ms) in &r.phases {
                *e.0.entry(p.clone()).or_default() += *ms as f64;
            }
        }
    }
    if sums.is_empty() {
        return None;
    }
    let names = phase_names(sums.values().flat_map(|(m, _)| m.keys()));
    let rows = sums
        .into_iter()
        .map(|(agent, (m, n))| {
            (
                format!("{} (n={n})", clip(agent)),
                m.into_iter().map(|(k, v)| (k, v / n as f64)).collect(),
            )
        })
        .collect();
    let c = chart("Mean time per phase", names.len().max(1));
    let mut c = stacked(c, rows, &names);
    let bands = c.bands.len();
    c.axis_y = TOP + BAND_H * bands as f64;
    c.height = c.axis_y + AXIS_H;
    Some(fit_labels(c))
}

/// One trial's phases as a timeline (pipeline order).
pub fn timeline(phases: &BTreeMap<String, u64>) -> Option<BandChart> {
    if phases.is_empty() {
        return None;
    }
    let names = phase_names(phases.keys());
    let rows = vec![(
        "this trial".to_owned(),
        phases.iter().map(|(k, v)| (k.clone(), *v as f64)).collect(),
    )];
    Some(fit_labels(stacked(
        chart("Phase timeline", 1),
        rows,
        &names,
    )))
}

/// Mean score ± 95% CI per agent (rows: label, mean, half-width).
pub fn means_with_ci(rows: &[(String, Option<f64>, Option<f64>)]) -> Option<BandChart> {
    let rows: Vec<_> = rows.iter().filter(|r| r.1.is_some()).collect();
    if rows.is_empty() {
        return None;
    }
    let mut c = chart("Mean score ± 95% CI", rows.len());
    c.ticks = unit_ticks();
    for (i, (label, mean, ci)) in rows.into_iter().enumerate() {
        let y = TOP + BAND_H * (i as f64 + 1.0);
        let m = mean.unwrap_or(0.0).clamp(0.0, 1.0);
        let w = PLOT_W * m;
        c.bands.push(Band {
            label: clip(label),
            y,
            rects: vec![Rect {
                x: LABEL_W,
                y: y - (BAND_H - 8.0),
                w,
                h: BAND_H - 10.0,
                fill: score_colour(m).to_owned(),
                title: format!("{label}: {m:.3}"),
            }],
            marker: Some((
                LABEL_W + PLOT_W * (m + ci.unwrap_or(0.0)).min(1.0),
                format!("{m:.2}"),
            )),
            rule: None,
            whisker: ci.map(|h| {
                (
                    LABEL_W + PLOT_W * (m - h).clamp(0.0, 1.0),
                    LABEL_W + PLOT_W * (m + h).clamp(0.0, 1.0),
                )
            }),
        });
    }
    Some(fit_labels(c))
}

/// Paired differences A − B per task on a [-1, 1] axis (bars from zero: green where A is better,
/// red where B is), the mean difference with its bootstrap CI first.
pub fn paired_diffs(c: &super::compare::PairComparison) -> Option<BandChart> {
    if c.per_task.is_empty() {
        return None;
    }
    let x = |d: f64| LABEL_W + PLOT_W * (d.clamp(-1.0, 1.0) + 1.0) / 2.0;
    let zero = x(0.0);
    let mut chart = chart(
        &format!("{} − {} per task", clip(&c.a), clip(&c.b)),
        c.per_task.len() + 1,
    );
    chart.ticks = (0..=4)
        .map(|i| {
            let v = -1.0 + f64::from(i) / 2.0;
            Tick {
                x: x(v),
                label: format!("{v:+.1}"),
            }
        })
        .collect();
    let bar = |y: f64, d: f64, title: String| Rect {
        x: zero.min(x(d)),
        y: y - (BAND_H - 8.0),
        w: (x(d) - zero).abs().max(1.0),
        h: BAND_H - 10.0,
        fill: if d > 0.0 {
            "#2e7d32"
        } else if d < 0.0 {
            "#c62828"
        } else {
            "#9aa5b1"
        }
        .to_owned(),
        title,
    };
    let mean = c.mean_diff.unwrap_or(0.0);
    let y0 = TOP + BAND_H;
    chart.bands.push(Band {
        label: "mean difference".into(),
        y: y0,
        rects: vec![bar(y0, mean, format!("mean {mean:+.3}"))],
        marker: Some((x(mean.max(0.0)), format!("{mean:+.2}"))),
        whisker: c.ci95.map(|(lo, hi)| (x(lo), x(hi))),
        rule: Some(zero),
    });
    for (i, d) in c.per_task.iter().enumerate() {
        let y = TOP + BAND_H * (i as f64 + 2.0);
        chart.bands.push(Band {
            label: clip(&d.task_id),
            y,
            rects: vec![bar(
                y,
                d.diff,
                format!("{}: {:.3} vs {:.3}", d.task_id, d.a, d.b),
            )],
            marker: None,
            whisker: None,
            rule: Some(zero),
        });
    }
    Some(fit_labels(chart))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_band_labels_fit_left_of_the_plot() {
        use crate::presentation::summary::tests_support::trial;
        let long = "claude-code:model=claude-sonnet-4-5-20250929";
        let rows = vec![trial(long, "a", Some(0.5)), trial("nop", "a", Some(0.0))];
        let c = score_distribution(&rows).expect("chart");
        let longest = c
            .bands
            .iter()
            .map(|b| b.label.chars().count())
            .max()
            .unwrap_or(0);
        assert!(longest > 40, "{longest}");
        assert!(c.x0 >= longest as f64 * LABEL_CHAR_W + 8.0, "x0 {}", c.x0);
        assert!(
            c.bands
                .iter()
                .flat_map(|b| &b.rects)
                .all(|r| r.x >= c.x0 - 1e-9)
        );
        assert!(c.width >= c.x1 + 80.0 - 1e-9);
        let short = score_distribution(&rows[1..]).expect("chart");
        assert_eq!(short.x0, LABEL_W, "short labels: unchanged");
    }

    #[test]
    fn phases_follow_the_pipeline_order() {
        let phases: BTreeMap<String, u64> = [
            ("grade".to_owned(), 300),
            ("agent".to_owned(), 1000),
            ("create".to_owned(), 100),
            ("zzz".to_owned(), 5),
        ]
        .into();
        let c = timeline(&phases).expect("a timeline");
        let order: Vec<&str> = c.legend.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(order, ["create", "agent", "grade", "zzz"]);
        let band = &c.bands[0];
        // the bars tile the band from the left edge without overlap
        let mut x = LABEL_W;
        for r in &band.rects {
            assert!((r.x - x).abs() < 1e-9);
            x += r.w;
        }
        assert!(
            (x - (LABEL_W + PLOT_W)).abs() < 1e-6,
            "the longest row fills the plot"
        );
    }

    #[test]
    fn nothing_to_plot_is_no_plot() {
        assert!(timeline(&BTreeMap::new()).is_none());
        assert!(score_distribution(&[]).is_none());
        assert!(means_with_ci(&[("a".into(), None, None)]).is_none());
    }

    #[test]
    fn ci_whiskers_stay_inside_the_axis() {
        let c = means_with_ci(&[("a".into(), Some(0.95), Some(0.2))]).expect("plot");
        let (lo, hi) = c.bands[0].whisker.expect("whisker");
        assert!(lo >= LABEL_W && hi <= LABEL_W + PLOT_W + 1e-9);
    }
}
