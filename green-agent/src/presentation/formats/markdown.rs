//! `report.md`: the run's status, the wide results table with its legend, then one row per trial.

use std::io::Write;

use super::{FormatError, FormatSpec, Head, Pass, ReportWriter, TrialFiles};
use crate::presentation::{table, values};
use crate::store::TrialRow;

pub const FORMAT: FormatSpec = FormatSpec {
    name: "md",
    media_type: "text/markdown",
    pass: Pass::Light,
    writer: || Box::new(Markdown),
};

struct Markdown;

impl ReportWriter for Markdown {
    fn head(&mut self, head: Head<'_>, out: &mut dyn Write) -> Result<(), FormatError> {
        write!(
            out,
            "# Run `{}`\n\nstatus: {}\n\n## Summary\n\n{}\n## Trials\n\n\
             | task | agent | repeat | outcome | exit | score | passed | flags | phases (ms) |\n\
             |---|---|---|---|---|---|---|---|---|\n",
            head.run.id,
            head.run.status,
            table::wide_table(head.summary)
        )?;
        Ok(())
    }

    fn trial(
        &mut self,
        _index: usize,
        t: &TrialRow,
        _files: Option<&TrialFiles>,
        out: &mut dyn Write,
    ) -> Result<(), FormatError> {
        let p = &t.planned;
        let agent = p.agent.replace('|', "\\|");
        match &t.result {
            Some(r) => writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                p.task_id,
                agent,
                p.repeat_index,
                r.outcome.as_str(),
                values::or_missing(r.exit_code),
                values::fixed(r.score, 3),
                if r.passed { "yes" } else { "no" },
                if r.flags.is_empty() {
                    values::MISSING.into()
                } else {
                    r.flags.join(", ")
                },
                r.phases
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            )?,
            None => writeln!(
                out,
                "| {} | {} | {} | {} | – | – | – | – | – |",
                p.task_id, agent, p.repeat_index, t.state
            )?,
        }
        Ok(())
    }

    fn end(&mut self, _out: &mut dyn Write) -> Result<(), FormatError> {
        Ok(())
    }
}
