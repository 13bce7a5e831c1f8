//! `report.json`: the run, its summary rows and every trial in full (grade report, usage,
//! artifacts), laid out as `serde_json`'s pretty printer lays out the whole document, written a
//! trial at a time.

use std::io::Write;

use serde_json::Value;

use super::{FormatError, FormatSpec, Head, Pass, ReportWriter, TrialFiles};
use crate::presentation::summary::failure_cause;
use crate::store::{RunRow, TrialRow};

pub const FORMAT: FormatSpec = FormatSpec {
    name: "json",
    media_type: "application/json",
    pass: Pass::Full,
    writer: || Box::new(Json { first: true }),
};

struct Json {
    first: bool,
}

/// `v` pretty-printed as it sits at `indent` inside the whole document.
fn pretty(v: &Value, indent: &str) -> String {
    serde_json::to_string_pretty(v)
        .unwrap_or_default()
        .replace('\n', &format!("\n{indent}"))
}

fn run(run: &RunRow) -> Value {
    serde_json::json!({ "id": run.id, "status": run.status, "created_at": run.created_at, "finished_at": run.finished_at, "plan": run.plan })
}

fn trial(t: &TrialRow) -> Value {
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

impl ReportWriter for Json {
    fn head(&mut self, head: Head<'_>, out: &mut dyn Write) -> Result<(), FormatError> {
        let summary = serde_json::to_value(head.summary).unwrap_or_default();
        write!(
            out,
            "{{\n  \"run\": {},\n  \"summary\": {},\n  \"trials\": [",
            pretty(&run(head.run), "  "),
            pretty(&summary, "  "),
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
        let sep = if self.first { "\n    " } else { ",\n    " };
        self.first = false;
        out.write_all(sep.as_bytes())?;
        out.write_all(pretty(&trial(t), "    ").as_bytes())?;
        Ok(())
    }

    fn end(&mut self, out: &mut dyn Write) -> Result<(), FormatError> {
        let tail = if self.first { "]\n}\n" } else { "\n  ]\n}\n" };
        out.write_all(tail.as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streamed layout is `serde_json`'s pretty layout of the whole document.
    #[test]
    fn the_streamed_document_is_the_pretty_printed_one() {
        let run_row = RunRow {
            id: "r".into(),
            created_at: "now".into(),
            finished_at: None,
            plan: serde_json::json!({"agents": ["oracle"], "nested": {"a": [1, 2]}}),
            status: "finished".into(),
        };
        let t = crate::presentation::summary::tests_support::trial("oracle", "a", Some(1.0));
        for trials in [vec![], vec![t.clone(), t]] {
            let summary = crate::presentation::summary::summarize(&trials);
            let mut out = Vec::new();
            super::super::write_in_memory(
                super::super::Format::named("json").expect("json"),
                &run_row,
                &summary,
                &trials,
                &Default::default(),
                &mut out,
            )
            .expect("write");
            let whole = serde_json::json!({
                "run": run(&run_row),
                "summary": summary,
                "trials": trials.iter().map(trial).collect::<Vec<_>>(),
            });
            let expected = serde_json::to_string_pretty(&whole).expect("json") + "\n";
            assert_eq!(String::from_utf8(out).expect("utf-8"), expected);
        }
    }
}
