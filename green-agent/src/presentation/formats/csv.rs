//! `report.csv`: one row per trial (scores, status, flags, dimensions, usage, phases).

use std::io::Write;

use super::{FormatError, FormatSpec, Head, Pass, ReportWriter, TrialFiles};
use crate::store::TrialRow;

pub const FORMAT: FormatSpec = FormatSpec {
    name: "csv",
    media_type: "text/csv",
    pass: Pass::Light,
    writer: || Box::new(Csv),
};

const HEADER: [&str; 21] = [
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

struct Csv;

/// One CSV record written to `out` (quoting as the `csv` crate does).
fn record<I, S>(out: &mut dyn Write, fields: I) -> Result<(), FormatError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<[u8]>,
{
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(fields).map_err(FormatError::Csv)?;
    w.flush()?;
    Ok(())
}

impl ReportWriter for Csv {
    fn head(&mut self, _head: Head<'_>, out: &mut dyn Write) -> Result<(), FormatError> {
        record(out, HEADER)
    }

    fn trial(
        &mut self,
        _index: usize,
        t: &TrialRow,
        _files: Option<&TrialFiles>,
        out: &mut dyn Write,
    ) -> Result<(), FormatError> {
        let r = t.result.as_ref();
        let opt = |v: Option<String>| v.unwrap_or_default();
        record(
            out,
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
            ],
        )
    }

    fn end(&mut self, out: &mut dyn Write) -> Result<(), FormatError> {
        out.flush()?;
        Ok(())
    }
}
