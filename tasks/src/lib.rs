//! Tasks: the `task.toml` format, its strict loader, the wall between what agents see and what
//! only graders see, and importers from the benchmarks' own layouts.
//!
//! - [`load_task`] / [`load_suite`]: validate task folders (every error names file, line, field).
//! - [`Task::agent_view`]: the only thing agent-side code gets; it cannot name a held-out path.
//! - [`Task::held_out`]: grading containers only. [`Task::oracle_solution`]: the oracle only.
//! - [`import`]: SciCode, PRBench, PaperBench, SciCoQA, Harbor and MMSiCode importers.

mod error;
pub mod import;
mod instruction;
mod load;
mod paths;
pub mod spec;
mod suite;
mod task;
pub mod turns;

pub use error::{Location, SuiteError, TaskError};
pub use load::{TASK_FILE, load_task, load_task_collecting};
pub use spec::{Constraints, Environment, NetworkAccess, TaskKind};
pub use suite::load_suite;
/// `[metadata]` key of the notes an importer leaves (see [`Task::notes`]).
pub const IMPORT_NOTES_KEY: &str = "import_notes";

pub use task::{
    AgentView, HeldOut, OracleSolution, SOLVE_SCRIPT, Stage, Task, Workspace, WorkspaceFile,
};
pub use turns::Turns;
