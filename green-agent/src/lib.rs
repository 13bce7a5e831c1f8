//! The green agent (assessor): runs assessments (tasks × white agents × repeats) end to end,
//! stores every result atomically, resumes after a crash and writes reports.
//!
//! - [`commands`]: the command line, one file per subcommand. [`config`]: settings layers. [`agents`]: agent specs.
//! - [`run`]: planning, preflight checks, concurrent execution, resume, signals;
//!   [`admission`]: trials admitted to what the backend's nodes hold; [`slots`]: a trial's
//!   place ahead (its sandboxes prepared before its slot) and its run slot;
//!   [`ownership`]: one owner process per run (an OS file lock in the run directory);
//!   [`regrade`]: `resume --regrade`, a run's stored outputs graded again (no agent runs).
//! - [`trial`]: one trial as named phases (prepare, launch, drive, collect, grade, record);
//!   [`launch`]: the adapter's command line and environment; [`proxy`]: the run's model proxy.
//! - [`model`]: the domain types (planned trial, outcome, usage, result).
//! - [`store`]: rows + content-addressed blobs (over [`model`]); [`database`]: where the rows
//!   live (a SQLite file per run, or one PostgreSQL database). [`identity`]: trial ids.
//!   [`verdicts`]: the store as the judge's cache of accepted verdicts.
//! - [`presentation`]: summaries, leaderboards, comparisons, plots, templates and the report
//!   formats, computed once; [`report`]: writes a run's report files; [`progress`]: the live view.
//! - [`url_files`]: big files to and from external agents as A2A `url` parts.
//! - [`serve`]: `green-agent serve`, the green agent as an A2A service (assessment requests).
//! - [`view`]: `green-agent view`, the read-only web viewer (dashboard + JSON API) over runs.

pub mod admission;
pub mod agents;
pub mod commands;
pub mod config;
pub mod database;
pub mod gate;
pub mod identity;
pub mod images;
pub mod importers;
pub mod launch;
pub mod model;
pub mod ownership;
pub mod presentation;
pub mod progress;
pub mod proxy;
pub mod regrade;
pub mod report;
pub mod run;
pub mod serve;
pub mod slots;
pub mod store;
pub mod suggest;
pub mod trial;
pub mod url_files;
pub mod verdicts;
pub mod view;
