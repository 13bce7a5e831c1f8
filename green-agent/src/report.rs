//! Reports of a stored run: Markdown, JSON, CSV and one self-contained HTML file (the viewer's
//! views rendered from its templates: overview, leaderboard, comparison, a section per trial). PRBench-kind trials also get a PRBench-compatible
//! `eval_report.json`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::store::{RunRow, Store, StoreError, TrialRow, write_atomic};
use crate::summary::{SummaryRow, failure_cause, summarize};

/// Report formats of `green-agent report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Md,
    Json,
    Csv,
    Html,
}

impl Format {
    pub fn extension(self) -> &'static str {
        match self {
            Format::Md => "md",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Html => "html",
        }
    }
}

/// Extra per-trial material for the HTML report (read from the blob store).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialDetail {
    pub answer: Option<String>,
    pub trajectory: Option<serde_json::Value>,
    pub agent_log: Option<String>,
    pub files: Vec<String>,
}

/// Everything a report shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportData {
    pub run: RunRow,
    pub summary: Vec<SummaryRow>,
    pub trials: Vec<TrialRow>,
    #[serde(skip)]
    pub details: BTreeMap<String, TrialDetail>,
}

impl ReportData {
    pub fn new(run: RunRow, trials: Vec<TrialRow>) -> Self {
        Self {
            summary: summarize(&trials),
            run,
            trials,
            details: BTreeMap::new(),
        }
    }

    /// Loads a run from its store, including the stored files the HTML report shows (those
    /// of the first [`HTML_TRIAL_SECTIONS`] trials, the ones it gives a section).
    pub async fn load(store: &Store, run_id: &str) -> Result<Self, StoreError> {
        let run = store.run(run_id).await?;
        let trials = store.trials(run_id).await?;
        let mut data = Self::new(run, trials);
        for t in data.trials.iter().take(HTML_TRIAL_SECTIONS) {
            if let Some(d) = TrialDetail::read(store, t) {
                data.details.insert(t.planned.id.clone(), d);
            }
        }
        Ok(data)
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Md => markdown(self),
            Format::Json => json(self),
            Format::Csv => csv_table(self),
            Format::Html => html(self),
        }
    }
}

impl TrialDetail {
    /// What the HTML report shows of a finished trial's stored files (`None`: unfinished).
    fn read(store: &Store, t: &TrialRow) -> Option<Self> {
        {
            let res = t.result.as_ref()?;
            let mut d = TrialDetail::default();
            for a in &res.artifacts {
                let text = || {
                    store
                        .get_blob(&a.sha256)
                        .ok()
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                };
                match a.name.as_str() {
                    "answer" => d.answer = text(),
                    "trajectory" => {
                        d.trajectory = text().and_then(|s| serde_json::from_str(&s).ok())
                    }
                    "agent_log" => d.agent_log = text(),
                    n => {
                        if let Some(f) = n.strip_prefix("file:") {
                            d.files.push(f.to_owned());
                        }
                    }
                }
            }
            Some(d)
        }
    }
}

fn num(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_owned(), |v| format!("{v:.3}"))
}

fn mean_ci(r: &SummaryRow) -> String {
    with_ci(r.mean, r.ci95)
}

fn strict_ci(r: &SummaryRow) -> String {
    with_ci(r.strict_mean, r.strict_ci95)
}

fn with_ci(mean: Option<f64>, ci: Option<f64>) -> String {
    match (mean, ci) {
        (Some(m), Some(c)) => format!("{m:.3} ± {c:.3}"),
        (Some(m), None) => format!("{m:.3}"),
        _ => "–".into(),
    }
}

/// How the summary's means and pass@k count trials without a score (printed under the table).
pub const SUMMARY_LEGEND: &str = "mean: over graded trials only; strict mean: over every \
planned trial, a trial without a score (infrastructure or judge status, unfinished) counted as \
0; not graded: trials the mean leaves out; pass@k: every planned trial is a sample, one without \
a score counts as not passed.";

fn dims(r: &SummaryRow) -> String {
    if r.dimensions.is_empty() {
        return "–".into();
    }
    r.dimensions
        .iter()
        .map(|(d, v)| format!("{d} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn failures(m: &BTreeMap<String, usize>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(c, n)| format!("{c}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The end-of-run table (also printed to the terminal).
pub fn summary_table(summary: &[SummaryRow]) -> String {
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
            mean_ci(r),
            strict_ci(r),
            r.excluded,
            r.k,
            num(r.pass_at_k),
            num(r.callback_rate),
            dims(r),
            r.input_tokens,
            r.output_tokens,
            r.cost_usd,
            failures(&r.failures),
        );
    }
    s.push('\n');
    s.push_str(SUMMARY_LEGEND);
    s.push('\n');
    s
}

fn markdown(d: &ReportData) -> String {
    let mut s = markdown_head(&d.run, &d.summary);
    for t in &d.trials {
        markdown_row(&mut s, t);
    }
    s
}

fn markdown_head(run: &RunRow, summary: &[SummaryRow]) -> String {
    let mut s = format!(
        "# Run `{}`\n\nstatus: {}\n\n## Summary\n\n",
        run.id, run.status
    );
    s.push_str(&summary_table(summary));
    s.push_str("\n## Trials\n\n| task | agent | repeat | outcome | exit | score | passed | flags | phases (ms) |\n|---|---|---|---|---|---|---|---|---|\n");
    s
}

fn markdown_row(s: &mut String, t: &TrialRow) {
    {
        let p = &t.planned;
        match &t.result {
            Some(r) => {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    p.task_id,
                    p.agent.replace('|', "\\|"),
                    p.repeat_index,
                    r.outcome.as_str(),
                    r.exit_code.map_or("–".into(), |c| c.to_string()),
                    num(r.score),
                    if r.passed { "yes" } else { "no" },
                    if r.flags.is_empty() {
                        "–".into()
                    } else {
                        r.flags.join(", ")
                    },
                    r.phases
                        .iter()
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | – | – | – | – | – |",
                    p.task_id,
                    p.agent.replace('|', "\\|"),
                    p.repeat_index,
                    t.state
                );
            }
        }
    }
}

fn json(d: &ReportData) -> String {
    let trials: Vec<serde_json::Value> = d.trials.iter().map(json_trial).collect();
    let v = serde_json::json!({
        "run": json_run(&d.run),
        "summary": d.summary,
        "trials": trials,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

fn json_run(run: &RunRow) -> serde_json::Value {
    serde_json::json!({ "id": run.id, "status": run.status, "created_at": run.created_at, "finished_at": run.finished_at, "plan": run.plan })
}

fn json_trial(t: &TrialRow) -> serde_json::Value {
    {
        {
            let r = t.result.as_ref();
            serde_json::json!({
                "id": t.planned.id,
                "task_id": t.planned.task_id,
                "task_kind": t.planned.task_kind,
                "task_hash": t.planned.task_hash,
                "agent": t.planned.agent,
                "repeat_index": t.planned.repeat_index,
                "state": t.state,
                "outcome": r.map(|r| r.outcome.as_str()),
                "exit_code": r.and_then(|r| r.exit_code),
                "score": r.and_then(|r| r.score),
                "passed": r.map(|r| r.passed),
                "grade_status": r.and_then(|r| r.grade_status.clone()),
                "failure": r.and_then(failure_cause),
                "dimensions": r.map(|r| &r.dimensions),
                "flags": r.map(|r| &r.flags),
                "phases_ms": r.map(|r| &r.phases),
                "attempts": r.map(|r| r.attempts),
                "isolated": r.map(|r| r.isolated),
                "error": r.and_then(|r| r.error.clone()),
                "usage": r.map(|r| &r.usage),
                "artifacts": r.map(|r| &r.artifacts),
                "grade": r.and_then(|r| r.grade_report.clone()),
            })
        }
    }
}

fn csv_table(d: &ReportData) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(CSV_HEADER);
    for t in &d.trials {
        let _ = w.write_record(csv_record(t));
    }
    String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
}

const CSV_HEADER: [&str; 21] = [
    "trial_id",
    "task_id",
    "task_kind",
    "agent",
    "repeat",
    "state",
    "outcome",
    "exit_code",
    "score",
    "strict_score",
    "passed",
    "grade_status",
    "flags",
    "dimensions",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "requests",
    "cost_usd",
    "phases_ms",
];

fn csv_record(t: &TrialRow) -> [String; 21] {
    {
        let r = t.result.as_ref();
        let opt = |v: Option<String>| v.unwrap_or_default();
        [
            t.planned.id.clone(),
            t.planned.task_id.clone(),
            t.planned.task_kind.clone(),
            t.planned.agent.clone(),
            t.planned.repeat_index.to_string(),
            t.state.clone(),
            opt(r.map(|r| r.outcome.as_str().to_owned())),
            opt(r.and_then(|r| r.exit_code).map(|c| c.to_string())),
            opt(r.and_then(|r| r.score).map(|s| format!("{s}"))),
            // the score the strict mean counts: a trial without one counts as 0
            format!("{}", r.and_then(|r| r.score).unwrap_or(0.0)),
            opt(r.map(|r| r.passed.to_string())),
            opt(r.and_then(|r| r.grade_status.clone())),
            opt(r.map(|r| r.flags.join(";"))),
            opt(r.map(|r| {
                r.dimensions
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(";")
            })),
            opt(r.map(|r| r.usage.input_tokens.to_string())),
            opt(r.map(|r| r.usage.output_tokens.to_string())),
            opt(r.map(|r| r.usage.cache_read_tokens.to_string())),
            opt(r.map(|r| r.usage.cache_write_tokens.to_string())),
            opt(r.map(|r| r.usage.requests.to_string())),
            opt(r.map(|r| r.usage.cost_usd.to_string())),
            opt(r.map(|r| {
                r.phases
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(";")
            })),
        ]
    }
}

/// Most trials given a full section (the trial page's views) in the HTML report; the trials
/// table lists every one. Beyond this a report would grow past what a browser opens well.
pub const HTML_TRIAL_SECTIONS: usize = 500;

/// A stored text as the file blocks of the templates show it (no link: the report is one file).
fn shown(label: &str, text: Option<&str>, size: u64) -> serde_json::Value {
    serde_json::json!({
        "name": label, "label": label, "size": size, "text": text, "cut": false,
        "url": null, "status": "unknown", "diff": [],
    })
}

/// One trial's section: the context the trial page's template takes.
fn trial_section(t: &TrialRow, extra: Option<&TrialDetail>) -> serde_json::Value {
    use crate::view::{data, pages, plots};
    let detail = data::detail_of_row(t);
    let trajectory = extra.and_then(|x| x.trajectory.as_ref());
    let (instruction, steps, steps_cut) =
        trajectory
            .map(pages::trajectory_parts)
            .unwrap_or((None, Vec::new(), false));
    let files: Vec<serde_json::Value> = detail
        .artifacts
        .iter()
        .filter_map(|a| {
            a.name
                .strip_prefix("file:")
                .map(|path| shown(path, None, a.size))
        })
        .collect();
    let logs: Vec<serde_json::Value> = extra
        .and_then(|x| x.agent_log.as_deref())
        .map(|l| vec![shown("agent_log", Some(l), l.len() as u64)])
        .unwrap_or_default();
    let answer = extra
        .and_then(|x| x.answer.as_deref())
        .map(|a| shown("answer", Some(a), a.len() as u64));
    serde_json::json!({
        "grade": t.result.as_ref().and_then(|r| r.grade_report.as_ref()),
        "instruction": instruction,
        "steps": steps,
        "steps_cut": steps_cut,
        "final_metrics": trajectory.map(|t| &t["final_metrics"]),
        "agent_info": trajectory.map(|t| &t["agent"]),
        "trajectory_note": null,
        "files": files,
        "logs": logs,
        "answer": answer,
        "timeline": plots::timeline(&detail.summary.phases),
        "t": detail,
    })
}

/// The trials table of the HTML report: each row converted for the template only when the
/// template reaches it (a run's table is never one big template value).
#[derive(Debug)]
struct TrialTable(Vec<crate::view::data::TrialSummary>);

impl minijinja::value::Object for TrialTable {
    fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Seq
    }

    fn get_value(self: &std::sync::Arc<Self>, key: &minijinja::Value) -> Option<minijinja::Value> {
        self.0
            .get(key.as_usize()?)
            .map(minijinja::Value::from_serialize)
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Seq(self.0.len())
    }
}

/// The head of the HTML report (`report.html`): the dashboard's views over the run's trials
/// (`rows`, grade reports and artifacts not needed) and the trials table.
fn html_head(
    run: &RunRow,
    rows: &[TrialRow],
    summary: &[SummaryRow],
    out: &mut dyn std::io::Write,
) -> Result<(), minijinja::Error> {
    use crate::view::{api, compare, data, pages, plots};
    let info = data::RunInfo::of_rows(run, rows);
    let board = api::leaderboard_of(&run.id, rows);
    let dims = board.dimensions();
    let (_, pairs) = api::compare_rows(rows, &info.agents, None).unwrap_or_default();
    let charts: Vec<_> = pairs.iter().map(plots::paired_diffs).collect();
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    for cause in rows
        .iter()
        .filter_map(|t| t.result.as_ref().and_then(failure_cause))
    {
        *failures.entry(cause).or_default() += 1;
    }
    let mut failures: Vec<serde_json::Value> = failures
        .into_iter()
        .map(|(cause, count)| serde_json::json!({ "cause": cause, "count": count }))
        .collect();
    failures.sort_by(|a, b| {
        b["count"]
            .as_u64()
            .cmp(&a["count"].as_u64())
            .then_with(|| a["cause"].as_str().cmp(&b["cause"].as_str()))
    });
    let trials = TrialTable(rows.iter().map(data::summary_of_ref).collect());
    let ctx = minijinja::context! {
        run => info,
        failures,
        score_plot => plots::score_distribution(rows),
        phase_plot => plots::phase_times(rows),
        summary => summary,
        legend => SUMMARY_LEGEND,
        board,
        dims,
        ci_plot => board.ci_plot(),
        pairs,
        charts,
        resamples => compare::RESAMPLES,
        detailed => HTML_TRIAL_SECTIONS.min(rows.len()),
        trials => minijinja::Value::from_object(trials),
    };
    pages::render_report(pages::ReportPart::Head, ctx, out)
}

/// The section of the `index`-th trial (1-based) of the HTML report.
fn html_section(
    index: usize,
    t: &TrialRow,
    extra: Option<&TrialDetail>,
    out: &mut dyn std::io::Write,
) -> Result<(), minijinja::Error> {
    let ctx = minijinja::context! { index, d => trial_section(t, extra) };
    crate::view::pages::render_report(crate::view::pages::ReportPart::Section, ctx, out)
}

/// The HTML report: the dashboard's views (run overview with plots, leaderboard, paired
/// comparison, the trials, a trial page per trial) rendered from the viewer's templates into one
/// self-contained file (stylesheet, script and SVG plots inline; no external resource).
fn html(d: &ReportData) -> String {
    let mut out = Vec::new();
    let rendered = html_head(&d.run, &d.trials, &d.summary, &mut out)
        .and_then(|()| {
            d.trials
                .iter()
                .take(HTML_TRIAL_SECTIONS)
                .enumerate()
                .try_for_each(|(i, t)| {
                    html_section(i + 1, t, d.details.get(&t.planned.id), &mut out)
                })
        })
        .and_then(|()| {
            crate::view::pages::render_report(
                crate::view::pages::ReportPart::End,
                minijinja::context! {},
                &mut out,
            )
        });
    match rendered {
        Ok(()) => String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        Err(e) => {
            // the templates are compiled in and rendered by the tests; say what broke, in the file
            tracing::error!(error = %format!("{e:#}"), "rendering the HTML report failed");
            format!(
                "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>report</title></head>\
                 <body><p>Rendering this report failed: {}</p></body></html>\n",
                error_chain(&e)
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            )
        }
    }
}

/// An error with its causes, `: `-joined.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// A PRBench trial's `eval_report.json`, in PRBench's shape (`task_id`, `paper`, `grading`
/// with `scores.<dimension>.{score, justification}`, `overall_score` and `summary`,
/// `time_used_seconds`, `workspace_files`) and ours beside it: `measured` (the deterministic
/// evidence: dimensions of weight 0 and each evidence grader), the end-to-end callback, the
/// statuses. The overall score is ours (the weighted sum we computed), never the judge's.
pub fn prbench_eval_report(t: &TrialRow) -> Option<serde_json::Value> {
    use serde_json::{Map, Value, json};
    let r = t.result.as_ref()?;
    let report = r.grade_report.as_ref();
    let graders: Vec<&Value> = report
        .and_then(|g| g["graders"].as_array())
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let dims = report.and_then(|g| g["dimensions"].as_object());
    let justification = |dim: &str| -> String {
        let mine: Vec<&&Value> = graders.iter().filter(|g| g["dimension"] == dim).collect();
        let judged = mine.iter().find_map(|g| {
            let text = g["data"]["justification"].as_str()?;
            let notes: Vec<&str> = g["details"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_str)
                        .filter(|d| !d.starts_with("judge: "))
                        .collect()
                })
                .unwrap_or_default();
            Some(if notes.is_empty() {
                text.to_owned()
            } else {
                format!("{text} ({})", notes.join("; "))
            })
        });
        judged.unwrap_or_else(|| {
            mine.iter()
                .filter_map(|g| {
                    let details: Vec<&str> = g["details"]
                        .as_array()
                        .map(|d| d.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    Some(format!(
                        "{}: {} {}",
                        g["name"].as_str()?,
                        g["status"].as_str().unwrap_or(""),
                        details.join(" ")
                    ))
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
    };
    let mut scores = Map::new();
    let mut measured = Map::new();
    match dims {
        Some(dims) => {
            for (name, d) in dims {
                let entry = json!({
                    "score": d["score"],
                    "weight": d["weight"],
                    "status": d["status"],
                    "justification": justification(name),
                });
                if d["weight"].as_f64().is_some_and(|w| w > 0.0) {
                    scores.insert(name.clone(), entry);
                } else {
                    measured.insert(name.clone(), entry);
                }
            }
        }
        None => {
            for (name, score) in &r.dimensions {
                scores.insert(name.clone(), json!({"score": score, "justification": ""}));
            }
        }
    }
    let evidence: Vec<Value> = graders
        .iter()
        .filter(|g| g["kind"] != "prbench_dimension")
        .map(|g| json!({"name": g["name"], "kind": g["kind"], "dimension": g["dimension"], "status": g["status"], "score": g["score"]}))
        .collect();
    let paper = graders
        .iter()
        .find_map(|g| g["data"]["paper"].as_str().map(str::to_owned));
    let overall = r.score;
    let summary = {
        let mut s = match overall {
            Some(x) => format!(
                "overall {x:.3}: the weighted sum of {} judged dimension(s)",
                scores.len()
            ),
            None => format!(
                "no overall score: {}",
                r.grade_status.as_deref().unwrap_or(r.outcome.as_str())
            ),
        };
        if let Some(m) = measured
            .get("measured_data_accuracy")
            .and_then(|m| m["score"].as_f64())
        {
            s.push_str(&format!("; measured data accuracy {m:.3}"));
        }
        if let Some(b) = measured.get("banned_libraries")
            && b["status"] == "forbidden_api"
        {
            s.push_str("; a banned library is used (code_correctness capped at 0.2)");
        }
        s.push_str(if r.passed {
            "; every dimension passes"
        } else {
            "; not every dimension passes"
        });
        s
    };
    let grading = json!({
        "scores": scores,
        "overall_score": overall,
        "summary": summary,
    });
    Some(json!({
        "task_id": t.planned.task_id,
        "paper": paper,
        "grading": grading,
        "time_used_seconds": r.phases.values().sum::<u64>() as f64 / 1000.0,
        "workspace_files": r.artifacts.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
        "agent": t.planned.agent,
        "trial_id": t.planned.id,
        "scores": grading["scores"],
        "overall_score": overall,
        "measured": {"dimensions": measured, "graders": evidence},
        "end_to_end_callback": r.passed,
        "status": r.grade_status,
        "outcome": r.outcome.as_str(),
    }))
}

/// Writes `report.{md,json,csv,html}` and each PRBench trial's `eval_report.json`.
pub fn write_reports(store: &Store, data: &ReportData) -> std::io::Result<()> {
    let dir = store.dir();
    for f in [Format::Md, Format::Json, Format::Csv, Format::Html] {
        let path = dir.join(format!("report.{}", f.extension()));
        write_atomic(&path, data.render(f).as_bytes())?;
    }
    for t in &data.trials {
        if t.planned.task_kind == "prbench"
            && let Some(v) = prbench_eval_report(t)
        {
            let d = dir.join("trials").join(&t.planned.id);
            std::fs::create_dir_all(&d)?;
            write_atomic(
                &d.join("eval_report.json"),
                serde_json::to_string_pretty(&v)
                    .map_err(std::io::Error::other)?
                    .as_bytes(),
            )?;
        }
    }
    Ok(())
}

/// Writes the report of `run_id` in `format` to `out` with memory bounded by the run's trial
/// rows, never by its grade reports or stored files: one joined query without grade reports or
/// artifacts gives the summary (and every Markdown / CSV row); JSON then streams the trials
/// with their grade reports and artifacts by pages, each serialized and written as it arrives.
/// HTML: the head (the dashboard's views and the trials table) from those rows, then each of
/// the first [`HTML_TRIAL_SECTIONS`] trials' section rendered as its page of rows and its
/// stored files are read, then the end. The output is byte for byte what
/// [`ReportData::render`] gives.
pub async fn write_report(
    store: &Store,
    run_id: &str,
    format: Format,
    out: &mut (dyn std::io::Write + Send),
) -> Result<(), StoreError> {
    let run = store.run(run_id).await?;
    let mut light = Vec::new();
    store
        .for_each_trial(run_id, false, |t| {
            light.push(t);
            Ok(())
        })
        .await?;
    let summary = summarize(&light);
    let io = |source| StoreError::Io {
        path: store.dir().to_path_buf(),
        source,
    };
    match format {
        Format::Md => {
            let mut s = markdown_head(&run, &summary);
            for t in &light {
                markdown_row(&mut s, t);
                if s.len() > 64 * 1024 {
                    out.write_all(s.as_bytes()).map_err(io)?;
                    s.clear();
                }
            }
            out.write_all(s.as_bytes()).map_err(io)?;
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(&mut *out);
            let csv_err = |e: csv::Error| io(std::io::Error::other(e));
            w.write_record(CSV_HEADER).map_err(csv_err)?;
            for t in &light {
                w.write_record(csv_record(t)).map_err(csv_err)?;
            }
            w.flush().map_err(io)?;
        }
        Format::Json => {
            drop(light);
            // The layout of `serde_json::to_string_pretty` over the whole report.
            let pretty = |v: &serde_json::Value, indent: &str| {
                serde_json::to_string_pretty(v)
                    .unwrap_or_default()
                    .replace('\n', &format!("\n{indent}"))
            };
            let head = format!(
                "{{\n  \"run\": {},\n  \"summary\": {},\n  \"trials\": [",
                pretty(&json_run(&run), "  "),
                pretty(&serde_json::to_value(&summary).unwrap_or_default(), "  "),
            );
            out.write_all(head.as_bytes()).map_err(io)?;
            let mut first = true;
            store
                .for_each_trial(run_id, true, |t| {
                    let sep = if first { "\n    " } else { ",\n    " };
                    first = false;
                    let text = pretty(&json_trial(&t), "    ");
                    out.write_all(sep.as_bytes())
                        .and_then(|()| out.write_all(text.as_bytes()))
                        .map_err(io)
                })
                .await?;
            let tail = if first { "]\n}\n" } else { "\n  ]\n}\n" };
            out.write_all(tail.as_bytes()).map_err(io)?;
        }
        Format::Html => {
            // The head from the light rows, then each detailed trial's section as its page
            // of rows (grade reports, artifacts) and its stored files are read, then the end.
            let render = |e: minijinja::Error| {
                io(std::io::Error::other(format!(
                    "rendering the HTML report: {}",
                    error_chain(&e)
                )))
            };
            html_head(&run, &light, &summary, out).map_err(render)?;
            let ids: Vec<String> = light
                .iter()
                .take(HTML_TRIAL_SECTIONS)
                .map(|t| t.planned.id.clone())
                .collect();
            drop(light);
            let mut index = 0;
            store
                .for_each_trial_of(run_id, &ids, |t| {
                    index += 1;
                    let extra = TrialDetail::read(store, &t);
                    html_section(index, &t, extra.as_ref(), out).map_err(render)
                })
                .await?;
            crate::view::pages::render_report(
                crate::view::pages::ReportPart::End,
                minijinja::context! {},
                out,
            )
            .map_err(render)?;
        }
    }
    out.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ArtifactRef, Outcome, PlannedTrial, TrialResult, Usage};

    /// A run of more trials than the HTML details (sections cut at 500, the store's pages of
    /// 200 ids crossed), half finished with a grade report and stored files: the streamed HTML
    /// is the in-memory render, with one section per detailed trial in the trials' order.
    #[tokio::test]
    async fn streamed_html_of_a_big_run_equals_the_render() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("store");
        let planned: Vec<PlannedTrial> = (0..HTML_TRIAL_SECTIONS + 7)
            .map(|i| PlannedTrial {
                id: format!("trial-{i:04}"),
                task_id: format!("task-{}", i / 2),
                task_kind: "generic".into(),
                task_hash: "h".into(),
                agent: ["oracle", "nop"][i % 2].into(),
                repeat_index: 0,
            })
            .collect();
        store
            .create_run(
                "big",
                &serde_json::json!({"agents": ["oracle", "nop"]}),
                &planned,
            )
            .await
            .expect("run");
        let log = store.put_blob(b"agent says <hi>").expect("blob");
        let answer = store.put_blob(b"42").expect("blob");
        for (i, p) in planned.iter().enumerate().filter(|(i, _)| i % 3 != 2) {
            let score = (i % 2 == 0).then_some(1.0);
            let result = TrialResult {
                outcome: Outcome::Completed,
                exit_code: Some(0),
                score,
                passed: score.is_some(),
                grade_status: Some(
                    if score.is_some() {
                        "ok"
                    } else {
                        "judge_invalid"
                    }
                    .into(),
                ),
                dimensions: [("code_correctness".to_string(), score.unwrap_or(0.0))].into(),
                flags: vec![],
                phases: [("agent".to_string(), 10 + i as u64)].into(),
                attempts: 1,
                error: None,
                isolated: true,
                grade_report: Some(serde_json::json!({"score": score, "graders": [
                    {"name": "unit tests", "score": score, "details": [format!("trial {i}")]}]})),
                usage: Usage::default(),
                artifacts: vec![
                    ArtifactRef {
                        name: "agent_log".into(),
                        sha256: log.clone(),
                        size: 15,
                        media_type: None,
                    },
                    ArtifactRef {
                        name: "answer".into(),
                        sha256: answer.clone(),
                        size: 2,
                        media_type: None,
                    },
                    ArtifactRef {
                        name: "file:out.csv".into(),
                        sha256: answer.clone(),
                        size: 2,
                        media_type: None,
                    },
                ],
            };
            store
                .finish_trial("big", &p.id, &result)
                .await
                .expect("finish");
        }
        let data = ReportData::load(&store, "big").await.expect("load");
        let detailed_finished = data
            .trials
            .iter()
            .take(HTML_TRIAL_SECTIONS)
            .filter(|t| t.result.is_some())
            .count();
        let finished = data.trials.iter().filter(|t| t.result.is_some()).count();
        assert!(detailed_finished < finished);
        assert_eq!(
            data.details.len(),
            detailed_finished,
            "stored files read for detailed trials only"
        );
        let rendered = data.render(Format::Html);
        let mut streamed = Vec::new();
        write_report(&store, "big", Format::Html, &mut streamed)
            .await
            .expect("write");
        let streamed = String::from_utf8(streamed).expect("utf-8");
        assert!(
            streamed == rendered,
            "streamed HTML differs from the render"
        );
        assert_eq!(
            streamed.matches("<section class=\"trial-section\"").count(),
            HTML_TRIAL_SECTIONS
        );
        assert_eq!(
            streamed.matches("class=\"trial-row ").count(),
            HTML_TRIAL_SECTIONS + 7
        );
        assert!(streamed.contains("The first 500 trials have a section below"));
        assert!(
            streamed.contains("agent says &lt;hi&gt;"),
            "stored log shown, escaped"
        );
        // sections follow the trials' order, their element ids numbered from 1
        let first = &data.trials[0].planned.id;
        let last = &data.trials[HTML_TRIAL_SECTIONS - 1].planned.id;
        let after = &data.trials[HTML_TRIAL_SECTIONS].planned.id;
        assert!(streamed.contains(&format!("id=\"trial-{first}\"")));
        assert!(streamed.contains(&format!("id=\"trial-{last}\"")));
        assert!(!streamed.contains(&format!("id=\"trial-{after}\"")));
        assert!(streamed.trim_end().ends_with("</html>"));
        store.close().await;
    }
}
