//! The embedded minijinja templates (autoescaped) and the filters that render values in them:
//! the viewer's pages and the static HTML report are rendered from the same templates.

use std::sync::OnceLock;

use minijinja::{Environment, Value, context};

use super::values;

/// Most trajectory steps shown (the rest stay in the raw artifact).
const MAX_STEPS: usize = 2000;

pub const TEMPLATES: [(&str, &str); 15] = [
    ("compare.html", include_str!("templates/compare.html")),
    (
        "compare_body.html",
        include_str!("templates/compare_body.html"),
    ),
    (
        "leaderboard_body.html",
        include_str!("templates/leaderboard_body.html"),
    ),
    (
        "run_overview.html",
        include_str!("templates/run_overview.html"),
    ),
    ("trial_body.html", include_str!("templates/trial_body.html")),
    ("report.html", include_str!("templates/report.html")),
    (
        "report_section.html",
        include_str!("templates/report_section.html"),
    ),
    ("report_end.html", include_str!("templates/report_end.html")),
    ("base.html", include_str!("templates/base.html")),
    ("plots.html", include_str!("templates/plots.html")),
    ("runs.html", include_str!("templates/runs.html")),
    ("run.html", include_str!("templates/run.html")),
    (
        "leaderboard.html",
        include_str!("templates/leaderboard.html"),
    ),
    ("trial.html", include_str!("templates/trial.html")),
    ("error.html", include_str!("templates/error.html")),
];

pub const STYLE: &str = include_str!("assets/style.css");
pub const SCRIPT: &str = include_str!("assets/live.js");

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            if let Err(e) = env.add_template(name, source) {
                // the templates are compiled into the binary; a unit test renders each one
                tracing::error!(template = name, error = %e, "bad embedded template");
            }
        }
        env.add_filter("score", |v: Option<f64>| match v {
            Some(v) => format!("{v:.2}"),
            None => values::MISSING_HTML.to_owned(),
        });
        env.add_filter("pct", values::pct);
        env.add_filter("usd", values::usd);
        env.add_filter("ms", values::duration_ms);
        env.add_filter("bytes", values::bytes);
        // the interval worth showing beside a mean over `n` graded trials (none below a handful)
        env.add_filter("shown_ci", |ci: Option<f64>, n: usize| {
            values::shown_ci(ci, n)
        });
        env.add_filter("p4", |v: f64| format!("{v:.4}"));
        env.add_filter("short", |v: String| v.chars().take(10).collect::<String>());
        env.add_filter("clip", |v: String, n: Option<usize>| {
            let n = n.unwrap_or(40);
            if v.chars().count() <= n {
                v
            } else {
                format!("{}…", v.chars().take(n).collect::<String>())
            }
        });
        env.add_filter("num", |v: Value| match v.as_i64() {
            Some(i) => i.to_string(),
            None => match f64::try_from(v.clone()) {
                Ok(f) => values::number(f),
                Err(_) => v.to_string(),
            },
        });
        env.add_filter("status_class", |s: Option<String>| {
            status_class(s.as_deref()).to_owned()
        });
        env.add_filter("f64", |v: Value| f64::try_from(v).ok());
        env
    })
}

/// CSS class of a status or outcome: pass (green), fail (red) or other (amber).
pub fn status_class(s: Option<&str>) -> &'static str {
    match s {
        Some("pass" | "ok" | "passed" | "completed" | "done" | "finished" | "compile_ok") => {
            "st-pass"
        }
        Some(
            "fail" | "failed" | "error" | "crashed" | "timeout" | "inactive" | "forbidden_api"
            | "fabricated_data" | "extract_failed" | "not_passed",
        ) => "st-fail",
        Some("running" | "pending") => "st-run",
        _ => "st-other",
    }
}

/// A part of the static report, in the order written: the head (`report.html`: overview,
/// summary, leaderboard, comparison, the trials table), one section per detailed trial
/// (`report_section.html`), the end (`report_end.html`). Concatenated they are one
/// self-contained file (stylesheet and script inlined).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportPart {
    Head,
    Section,
    End,
}

/// Renders one part of the static report into `out` as the template produces it (a trial
/// table of any length is written row by row, never held whole).
pub fn render_report(
    part: ReportPart,
    ctx: Value,
    out: &mut dyn std::io::Write,
) -> Result<(), minijinja::Error> {
    let name = match part {
        ReportPart::Head => "report.html",
        ReportPart::Section => "report_section.html",
        ReportPart::End => "report_end.html",
    };
    let ctx = context! { style => STYLE, script => SCRIPT, static => true, ..ctx };
    env().get_template(name)?.render_captured_to(ctx, out)?;
    Ok(())
}

/// The instruction (the first user step's message), the steps shown (at most [`MAX_STEPS`])
/// and whether some were left out, of an ATIF trajectory.
pub fn trajectory_parts(t: &serde_json::Value) -> (Option<String>, Vec<serde_json::Value>, bool) {
    let all = t["steps"].as_array().cloned().unwrap_or_default();
    let instruction = all
        .iter()
        .find(|s| s["source"] == "user")
        .and_then(|s| s["message"].as_str())
        .map(str::to_owned);
    let cut = all.len() > MAX_STEPS;
    (instruction, all.into_iter().take(MAX_STEPS).collect(), cut)
}

/// Renders the page template `name` (what the viewer serves).
pub fn render(name: &str, ctx: Value) -> Result<String, minijinja::Error> {
    env().get_template(name)?.render(ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_template_compiles() {
        let env = env();
        for (name, _) in TEMPLATES {
            env.get_template(name)
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
    }

    #[test]
    fn statuses_have_colours() {
        assert_eq!(status_class(Some("pass")), "st-pass");
        assert_eq!(status_class(Some("forbidden_api")), "st-fail");
        assert_eq!(status_class(Some("judge_invalid")), "st-other");
        assert_eq!(status_class(None), "st-other");
    }
}
