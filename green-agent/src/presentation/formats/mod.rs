//! Report formats. Each format is one file holding one streaming writer ([`ReportWriter`]): it
//! writes a head from the run, its summary and its trials' light rows, then one piece per trial
//! as the caller hands it over (light rows, full rows, or full rows with stored files: the
//! format's [`Pass`]), then an end. A caller streaming from a store and a caller holding a run
//! in memory drive the same writer, so a report is rendered one way only.
//!
//! A new format is one file here plus its line in [`FORMATS`].

pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;

use std::io::Write;

use super::summary::SummaryRow;
use crate::store::{RunRow, TrialRow};

/// Every report format, in the order `green-agent report --format` lists them.
pub static FORMATS: &[FormatSpec] = &[markdown::FORMAT, json::FORMAT, csv::FORMAT, html::FORMAT];

/// What each trial piece of a format is written from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    /// Every trial's light row (no grade report, no artifacts), in the head's order.
    Light,
    /// Every trial's full row (grade report and artifacts).
    Full,
    /// The first `n` trials' full rows and their stored files.
    Detailed(usize),
}

/// One report format: its name (`--format`, the file extension), media type, what its trial
/// pieces need and its writer.
#[derive(Debug)]
pub struct FormatSpec {
    pub name: &'static str,
    pub media_type: &'static str,
    pub pass: Pass,
    pub writer: fn() -> Box<dyn ReportWriter>,
}

/// The stored files a detailed trial piece shows (read from the blob store by the caller), by
/// artifact name: what [`super::trial_view`] shows of them.
pub type TrialFiles = super::trial_view::Bodies;

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("writing the report")]
    Io(#[source] std::io::Error),
    #[error("rendering the HTML report: {0}")]
    Template(String),
    #[error("writing the CSV report")]
    Csv(#[source] ::csv::Error),
}

impl From<std::io::Error> for FormatError {
    fn from(e: std::io::Error) -> Self {
        FormatError::Io(e)
    }
}

/// The head a writer starts from.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    pub run: &'a RunRow,
    pub summary: &'a [SummaryRow],
    /// Every trial, light rows (no grade report or artifacts).
    pub trials: &'a [TrialRow],
}

/// A streaming writer of one report format.
pub trait ReportWriter: Send {
    fn head(&mut self, head: Head<'_>, out: &mut dyn Write) -> Result<(), FormatError>;
    /// The piece of the `index`-th trial (1-based) of the format's [`Pass`]; `files` only for
    /// [`Pass::Detailed`].
    fn trial(
        &mut self,
        index: usize,
        trial: &TrialRow,
        files: Option<&TrialFiles>,
        out: &mut dyn Write,
    ) -> Result<(), FormatError>;
    fn end(&mut self, out: &mut dyn Write) -> Result<(), FormatError>;
}

/// A report format (`green-agent report --format NAME`): one entry of [`FORMATS`].
#[derive(Debug, Clone, Copy)]
pub struct Format(&'static FormatSpec);

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Format {}

impl Format {
    /// Every format.
    pub fn all() -> impl Iterator<Item = Format> {
        FORMATS.iter().map(Format)
    }

    /// The format named `name` (`md`, `json`, ...).
    pub fn named(name: &str) -> Option<Format> {
        Format::all().find(|f| f.0.name == name)
    }

    pub fn spec(self) -> &'static FormatSpec {
        self.0
    }

    /// The file extension (the format's name).
    pub fn extension(self) -> &'static str {
        self.0.name
    }

    pub fn media_type(self) -> &'static str {
        self.0.media_type
    }

    /// The report file's name in a run folder: `report.<extension>`.
    pub fn file_name(self) -> String {
        format!("report.{}", self.0.name)
    }
}

impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        static ALL: std::sync::LazyLock<Vec<Format>> =
            std::sync::LazyLock::new(|| Format::all().collect());
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.0.name))
    }
}

/// Writes a whole report of a run held in memory: `trials` full rows, `files` the stored files
/// of the detailed trials by trial id. What a store-streaming caller writes for the same run,
/// byte for byte.
pub fn write_in_memory(
    format: Format,
    run: &RunRow,
    summary: &[SummaryRow],
    trials: &[TrialRow],
    files: &std::collections::BTreeMap<String, TrialFiles>,
    out: &mut dyn Write,
) -> Result<(), FormatError> {
    let spec = format.spec();
    let mut w = (spec.writer)();
    // the head sees light rows, as a streaming caller's does
    let light: Vec<TrialRow> = trials.iter().map(light_row).collect();
    w.head(
        Head {
            run,
            summary,
            trials: &light,
        },
        out,
    )?;
    match spec.pass {
        Pass::Light => {
            for (i, t) in light.iter().enumerate() {
                w.trial(i + 1, t, None, out)?;
            }
        }
        Pass::Full => {
            for (i, t) in trials.iter().enumerate() {
                w.trial(i + 1, t, None, out)?;
            }
        }
        Pass::Detailed(n) => {
            for (i, t) in trials.iter().take(n).enumerate() {
                w.trial(i + 1, t, files.get(&t.planned.id), out)?;
            }
        }
    }
    w.end(out)
}

/// A trial row without its grade report and artifacts (what a store's light read gives).
pub fn light_row(t: &TrialRow) -> TrialRow {
    let mut t = t.clone();
    if let Some(r) = t.result.as_mut() {
        r.grade_report = None;
        r.artifacts.clear();
    }
    t
}
