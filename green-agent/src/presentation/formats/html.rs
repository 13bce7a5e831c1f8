//! `report.html`: one self-contained file (stylesheet, script and SVG plots inline; no
//! external resource) rendered from the viewer's templates: run overview with plots, summary,
//! leaderboard, paired comparison, the trials table, then a section per trial (the trial
//! page's views) for the first [`HTML_TRIAL_SECTIONS`] trials.

use std::io::Write;

use super::{FormatError, FormatSpec, Head, Pass, ReportWriter, TrialFiles};
use crate::presentation::compare;
use crate::presentation::leaderboard::leaderboard_of;
use crate::presentation::plots;
use crate::presentation::summary::failures_by_cause;
use crate::presentation::table::SUMMARY_LEGEND;
use crate::presentation::templates::{self, ReportPart};
use crate::presentation::totals::RunInfo;
use crate::presentation::trial_view::{Bodies, Inputs, Links, TrialView, trial_view};
use crate::presentation::trials;
use crate::store::TrialRow;

pub const FORMAT: FormatSpec = FormatSpec {
    name: "html",
    media_type: "text/html",
    pass: Pass::Detailed(HTML_TRIAL_SECTIONS),
    writer: || Box::new(Html),
};

struct Html;

impl ReportWriter for Html {
    fn head(&mut self, head: Head<'_>, out: &mut dyn Write) -> Result<(), FormatError> {
        html_head(head, out).map_err(template_error)
    }

    fn trial(
        &mut self,
        index: usize,
        t: &TrialRow,
        files: Option<&TrialFiles>,
        out: &mut dyn Write,
    ) -> Result<(), FormatError> {
        html_section(index, t, files, out).map_err(template_error)
    }

    fn end(&mut self, out: &mut dyn Write) -> Result<(), FormatError> {
        templates::render_report(ReportPart::End, minijinja::context! {}, out)
            .map_err(template_error)
    }
}

/// A template failure with its causes (`: `-joined).
fn template_error(e: minijinja::Error) -> FormatError {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    // the templates are compiled in and rendered by the tests; say what broke
    tracing::error!(error = %text, "rendering the HTML report failed");
    FormatError::Template(text)
}

/// Most trials given a full section (the trial page's views) in the HTML report; the trials
/// table lists every one. Beyond this a report would grow past what a browser opens well.
pub const HTML_TRIAL_SECTIONS: usize = 500;

/// One trial's section: the trial page's view of it, with the stored files the caller read
/// shown inline (no link: the report is one file; no comparison with the task's workspace).
fn trial_section(t: &TrialRow, files: Option<&TrialFiles>) -> TrialView {
    let none = Bodies::new();
    let inputs = Inputs {
        bodies: files.unwrap_or(&none),
        links: Links::None,
        workspace: None,
    };
    trial_view(
        trials::detail_of_row(t),
        t.result.as_ref().and_then(|r| r.grade_report.clone()),
        &inputs,
    )
}

/// The trials table of the HTML report: each row converted for the template only when the
/// template reaches it (a run's table is never one big template value).
#[derive(Debug)]
struct TrialTable(Vec<trials::TrialSummary>);

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
/// (light rows) and the trials table.
fn html_head(head: Head<'_>, out: &mut dyn Write) -> Result<(), minijinja::Error> {
    let rows = head.trials;
    let info = RunInfo::of_rows(head.run, rows);
    let board = leaderboard_of(&head.run.id, rows);
    let dims = board.dimensions();
    let (_, pairs) = compare::compare_rows(rows, &info.agents, None).unwrap_or_default();
    let charts: Vec<_> = pairs.iter().map(plots::paired_diffs).collect();
    let trials = TrialTable(rows.iter().map(trials::summary_of_ref).collect());
    let ctx = minijinja::context! {
        run => info,
        failures => failures_by_cause(rows),
        score_plot => plots::score_distribution(rows),
        phase_plot => plots::phase_times(rows),
        summary => head.summary,
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
    templates::render_report(ReportPart::Head, ctx, out)
}

/// The section of the `index`-th trial (1-based) of the HTML report.
fn html_section(
    index: usize,
    t: &TrialRow,
    extra: Option<&TrialFiles>,
    out: &mut dyn Write,
) -> Result<(), minijinja::Error> {
    let ctx = minijinja::context! { index, d => trial_section(t, extra) };
    templates::render_report(ReportPart::Section, ctx, out)
}
