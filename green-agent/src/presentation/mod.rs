//! Presentation: what a run's results look like to a reader, computed once for every place that
//! shows them (the terminal table, the report files, the viewer's pages and API, the assessor's
//! A2A result).
//!
//! - [`summary`]: the per agent × kind table (means, CIs, pass@k, failures by cause);
//!   [`totals`]: a run's totals; [`leaderboard`]: leaderboards; [`compare`]: paired comparison
//!   of agents; [`plots`]: SVG chart geometry; [`trials`]: a trial as listed and detailed;
//!   [`trial_view`]: a trial as its page shows it (the viewer's trial page, the HTML report's
//!   sections).
//! - [`values`]: the one rule for rendering values in user text (no debug formatting).
//! - [`table`]: the terminal's results table (compact by default, every column with `--wide`).
//! - [`templates`]: the embedded HTML templates and their filters (viewer pages, HTML report).
//! - [`formats`]: the report formats, each one streaming writer, registered in one list.
//! - [`prbench`]: the PRBench-compatible `eval_report.json` of a trial.
//! - [`regrade`]: what `resume --regrade` prints (old → new per changed trial, a summary).
//!
//! Nothing here reads a store or serves a request: callers pass rows in.

pub mod compare;
pub mod formats;
pub mod leaderboard;
pub mod plots;
pub mod prbench;
pub mod regrade;
pub mod summary;
pub mod table;
pub mod templates;
pub mod totals;
pub mod trial_view;
pub mod trials;
pub mod values;
