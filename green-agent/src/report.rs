//! A run's report files: `report.{md,json,csv,html}` (one per entry of
//! [`crate::presentation::formats::FORMATS`]) and each PRBench trial's `eval_report.json`.
//! The formats are the presentation's writers; this module reads the run from its store and
//! hands them the rows, streamed ([`write_report`]) or held in memory ([`ReportData`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::presentation::formats::html::HTML_TRIAL_SECTIONS;
use crate::presentation::formats::{self, Head, Pass};
pub use crate::presentation::formats::{Format, TrialFiles};
use crate::presentation::prbench;
use crate::presentation::summary::{SummaryRow, summarize};
use crate::presentation::trial_view::Body;
use crate::store::{RunRow, Store, StoreError, TrialRow, write_atomic};

/// Everything a report shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportData {
    pub run: RunRow,
    pub summary: Vec<SummaryRow>,
    pub trials: Vec<TrialRow>,
    /// The stored files of the trials the HTML report details, by trial id.
    #[serde(skip)]
    pub details: BTreeMap<String, TrialFiles>,
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
            if let Some(d) = read_files(store, t) {
                data.details.insert(t.planned.id.clone(), d);
            }
        }
        Ok(data)
    }

    /// The report in `format` (the writer [`write_report`] streams, over these rows).
    pub fn render(&self, format: Format) -> String {
        let mut out = Vec::new();
        if let Err(e) = self.write(format, &mut out) {
            tracing::error!(format = format.extension(), error = %e, "rendering a report failed");
            out.extend_from_slice(format!("\nrendering this report failed: {e}\n").as_bytes());
        }
        String::from_utf8(out)
            .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }

    /// Writes the report in `format` to `out`.
    pub fn write(
        &self,
        format: Format,
        out: &mut dyn std::io::Write,
    ) -> Result<(), formats::FormatError> {
        formats::write_in_memory(
            format,
            &self.run,
            &self.summary,
            &self.trials,
            &self.details,
            out,
        )
    }
}

/// The artifacts of a finished trial the HTML report shows, read whole (`None`: unfinished):
/// the answer, the agent's log and the trajectory. Its files are listed, not embedded.
fn read_files(store: &Store, t: &TrialRow) -> Option<TrialFiles> {
    let res = t.result.as_ref()?;
    let mut d = TrialFiles::new();
    for a in &res.artifacts {
        if matches!(a.name.as_str(), "answer" | "trajectory" | "agent_log")
            && let Ok(bytes) = store.get_blob(&a.sha256)
        {
            d.insert(a.name.clone(), Body { bytes, cut: false });
        }
    }
    Some(d)
}

/// Writes every format's `report.<ext>` and each PRBench trial's `eval_report.json`.
pub fn write_reports(store: &Store, data: &ReportData) -> std::io::Result<()> {
    let dir = store.dir();
    for f in Format::all() {
        let mut bytes = Vec::new();
        data.write(f, &mut bytes).map_err(std::io::Error::other)?;
        write_atomic(&dir.join(f.file_name()), &bytes)?;
    }
    for t in &data.trials {
        if let Some(v) = prbench::eval_report(t) {
            let d = dir.join("trials").join(&t.planned.id);
            std::fs::create_dir_all(&d)?;
            write_atomic(
                &d.join(prbench::FILE),
                serde_json::to_string_pretty(&v)
                    .map_err(std::io::Error::other)?
                    .as_bytes(),
            )?;
        }
    }
    Ok(())
}

/// Writes the report of `run_id` in `format` to `out` with memory bounded by the run's trial
/// rows, never by its grade reports or stored files: one query without grade reports or
/// artifacts gives the summary and the head (and every piece of a [`Pass::Light`] format);
/// a [`Pass::Full`] format then gets the trials with their grade reports and artifacts by
/// pages, a [`Pass::Detailed`] one its first trials with their stored files, each written as
/// it arrives. The output is byte for byte what [`ReportData::render`] gives.
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
    let failed = |e: formats::FormatError| StoreError::Io {
        path: store.dir().to_path_buf(),
        source: std::io::Error::other(e),
    };
    let spec = format.spec();
    let mut w = (spec.writer)();
    w.head(
        Head {
            run: &run,
            summary: &summary,
            trials: &light,
        },
        out,
    )
    .map_err(failed)?;
    let mut index = 0;
    match spec.pass {
        Pass::Light => {
            for t in &light {
                index += 1;
                w.trial(index, t, None, out).map_err(failed)?;
            }
        }
        Pass::Full => {
            drop(light);
            store
                .for_each_trial(run_id, true, |t| {
                    index += 1;
                    w.trial(index, &t, None, out).map_err(failed)
                })
                .await?;
        }
        Pass::Detailed(n) => {
            let ids: Vec<String> = light.iter().take(n).map(|t| t.planned.id.clone()).collect();
            drop(light);
            store
                .for_each_trial_of(run_id, &ids, |t| {
                    index += 1;
                    let files = read_files(store, &t);
                    w.trial(index, &t, files.as_ref(), out).map_err(failed)
                })
                .await?;
        }
    }
    w.end(out).map_err(failed)?;
    out.flush().map_err(|source| StoreError::Io {
        path: store.dir().to_path_buf(),
        source,
    })
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
        let rendered = data.render(Format::named("html").expect("a format"));
        let mut streamed = Vec::new();
        write_report(
            &store,
            "big",
            Format::named("html").expect("a format"),
            &mut streamed,
        )
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
