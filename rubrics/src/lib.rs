//! Graders: held-out test runners, numeric and CSV comparators, forbidden-API checks, the rubric
//! engine (weighted dimensions, PaperBench trees), the LLM judge and statistics.

pub mod bounds;
pub mod checks;
pub mod csv_compare;
mod env;
pub mod grade;
pub mod judge;
pub mod junit;
pub mod paperbench;
pub mod report;
pub mod rubric;
pub mod scicode_score;
mod snapshot;
pub mod spec;
pub mod stats;
pub mod status;

pub use checks::{Check, CheckSpec};
pub use env::{GradingContext, ImageProbes, ProbeCache};
pub use grade::grade;
pub use judge::{Judge, JudgeConfig};
pub use report::{DimensionScore, GradeReport, GraderResult, TestResult};
pub use spec::{GraderSpec, GradingSpec};
pub use status::Status;
