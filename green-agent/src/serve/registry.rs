//! The service's assessments: each A2A task with its record (persisted in
//! `<results_dir>/serve/assessments.json`, written atomically on every state change: the A2A
//! task id ↔ run id mapping survives a restart), its live state (artifacts so far, progress,
//! subscribers) and the queue in front of the global limit of running assessments.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use a2a_protocol::{
    A2aError, Artifact, Message, Metadata, StreamResponse, Task, TaskArtifactUpdateEvent,
    TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::request::Assessment;
use crate::store::write_atomic;

/// What is persisted of an assessment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub id: String,
    pub context_id: String,
    pub created_at: String,
    /// The request message as received.
    pub message: Message,
    /// The validated request (`None`: rejected).
    pub assessment: Option<Assessment>,
    /// The run in the results directory, once it is created.
    pub run_id: Option<String>,
    pub state: TaskState,
    /// The latest status text.
    pub status: String,
    /// The secret part of the URLs of this assessment's report files.
    pub files_token: String,
    /// The status as last told (built once per change: its message id and timestamp stay
    /// the same on every read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub told: Option<TaskStatus>,
}

/// An assessment while the service runs.
#[derive(Debug)]
struct Entry {
    record: Record,
    artifacts: Vec<Artifact>,
    events: broadcast::Sender<StreamResponse>,
    cancel: CancellationToken,
}

#[derive(Debug, Default)]
struct Inner {
    order: Vec<String>,
    entries: BTreeMap<String, Entry>,
    /// Assessments waiting for a slot, first first.
    queue: VecDeque<String>,
}

impl Inner {
    /// Appends an assessment (no events, no artifacts yet, not cancelled).
    fn add(&mut self, mut record: Record) {
        if record.told.is_none() {
            record.told = Some(status_of(&record));
        }
        self.order.push(record.id.clone());
        self.entries.insert(
            record.id.clone(),
            Entry {
                record,
                artifacts: Vec::new(),
                events: broadcast::channel(1024).0,
                cancel: CancellationToken::new(),
            },
        );
    }
}

/// Every assessment of the service.
#[derive(Debug)]
pub struct Registry {
    file: PathBuf,
    inner: Mutex<Inner>,
    /// Slots of assessments running at once.
    pub slots: Arc<tokio::sync::Semaphore>,
    pub max_running: usize,
}

fn lock(m: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Where the service keeps its records under the results directory.
pub fn records_file(results_dir: &Path) -> PathBuf {
    results_dir.join("serve").join("assessments.json")
}

fn status_of(record: &Record) -> TaskStatus {
    TaskStatus::new(record.state).with_message(
        Message::agent_text(record.status.clone())
            .with_task_id(record.id.clone())
            .with_context_id(record.context_id.clone()),
    )
}

impl Registry {
    /// Opens the records of an earlier service in `results_dir` (none: empty).
    pub fn open(results_dir: &Path, max_running: usize) -> Result<Self, String> {
        let file = records_file(results_dir);
        if let Some(dir) = file.parent() {
            crate::store::sweep_temp_files(dir);
        }
        let records: Vec<Record> = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                format!(
                    "{} is not readable ({e}); move it away to start with no assessments",
                    file.display()
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(format!("{}: {e}", file.display())),
        };
        let mut inner = Inner::default();
        for record in records {
            inner.add(record);
        }
        Ok(Self {
            file,
            inner: Mutex::new(inner),
            slots: Arc::new(tokio::sync::Semaphore::new(max_running.max(1))),
            max_running: max_running.max(1),
        })
    }

    fn save(&self, inner: &Inner) {
        let records: Vec<&Record> = inner
            .order
            .iter()
            .filter_map(|id| inner.entries.get(id))
            .map(|e| &e.record)
            .collect();
        let written = serde_json::to_vec_pretty(&records)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                if let Some(dir) = self.file.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                write_atomic(&self.file, &bytes)
            });
        if let Err(e) = written {
            tracing::error!(file = %self.file.display(), error = %e, "could not persist the assessments");
        }
    }

    /// Records a new assessment (persisted at once).
    pub fn insert(&self, record: Record) {
        let mut inner = lock(&self.inner);
        inner.add(record);
        self.save(&inner);
    }

    /// Records not in a terminal state (to resume after a restart).
    pub fn unfinished(&self) -> Vec<Record> {
        let inner = lock(&self.inner);
        inner
            .order
            .iter()
            .filter_map(|id| inner.entries.get(id))
            .filter(|e| !e.record.state.is_terminal())
            .map(|e| e.record.clone())
            .collect()
    }

    pub fn record(&self, id: &str) -> Option<Record> {
        lock(&self.inner).entries.get(id).map(|e| e.record.clone())
    }

    pub fn cancel_token(&self, id: &str) -> Option<CancellationToken> {
        lock(&self.inner).entries.get(id).map(|e| e.cancel.clone())
    }

    /// The record of the assessment whose report files carry this token.
    pub fn by_files_token(&self, token: &str) -> Option<Record> {
        lock(&self.inner)
            .entries
            .values()
            .find(|e| !e.record.files_token.is_empty() && e.record.files_token == token)
            .map(|e| e.record.clone())
    }

    /// Sets the run id (persisted).
    pub fn set_run(&self, id: &str, run_id: &str) {
        let mut inner = lock(&self.inner);
        if let Some(e) = inner.entries.get_mut(id) {
            e.record.run_id = Some(run_id.to_owned());
        }
        self.save(&inner);
    }

    /// Sets the status and tells every subscriber; a state change is persisted.
    pub fn set_status(&self, id: &str, state: TaskState, text: impl Into<String>) {
        let mut inner = lock(&self.inner);
        let Some(e) = inner.entries.get_mut(id) else {
            return;
        };
        if e.record.state.is_terminal() {
            return;
        }
        let changed = e.record.state != state;
        e.record.state = state;
        e.record.status = text.into();
        let status = status_of(&e.record);
        e.record.told = Some(status.clone());
        let event = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: e.record.id.clone(),
            context_id: e.record.context_id.clone(),
            status,
            metadata: None,
        });
        let _ = e.events.send(event);
        if changed {
            self.save(&inner);
        }
    }

    /// Adds an artifact and tells every subscriber.
    pub fn add_artifact(&self, id: &str, artifact: Artifact) {
        let mut inner = lock(&self.inner);
        let Some(e) = inner.entries.get_mut(id) else {
            return;
        };
        let event = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: e.record.id.clone(),
            context_id: e.record.context_id.clone(),
            artifact: artifact.clone(),
            append: false,
            last_chunk: true,
            metadata: None,
        });
        e.artifacts.push(artifact);
        let _ = e.events.send(event);
    }

    /// Replaces the artifacts without events (rebuilt from the store after a restart).
    pub fn set_artifacts(&self, id: &str, artifacts: Vec<Artifact>) {
        if let Some(e) = lock(&self.inner).entries.get_mut(id) {
            e.artifacts = artifacts;
        }
    }

    fn view(e: &Entry, history_length: Option<i32>) -> Task {
        let r = &e.record;
        let mut task = Task::new(r.id.clone(), r.context_id.clone(), r.state);
        task.status = r.told.clone().unwrap_or_else(|| status_of(r));
        task.artifacts = e.artifacts.clone();
        task.history = vec![r.message.clone()];
        if let Some(n) = history_length {
            task.history
                .truncate(usize::try_from(n.max(0)).unwrap_or(0));
        }
        let mut metadata = Metadata::new();
        if let Some(run) = &r.run_id {
            metadata.insert("run_id".into(), Value::String(run.clone()));
        }
        task.metadata = Some(metadata);
        task
    }

    /// The task as a client sees it.
    pub fn task(&self, id: &str, history_length: Option<i32>) -> Result<Task, A2aError> {
        let inner = lock(&self.inner);
        inner
            .entries
            .get(id)
            .map(|e| Self::view(e, history_length))
            .ok_or_else(|| A2aError::TaskNotFound(format!("no assessment {id:?} on this service")))
    }

    /// The task now and a receiver of every later event (taken together: nothing is missed).
    pub fn subscribe(
        &self,
        id: &str,
    ) -> Result<(Task, broadcast::Receiver<StreamResponse>), A2aError> {
        let inner = lock(&self.inner);
        let e = inner.entries.get(id).ok_or_else(|| {
            A2aError::TaskNotFound(format!("no assessment {id:?} on this service"))
        })?;
        Ok((Self::view(e, None), e.events.subscribe()))
    }

    /// Every task, newest first.
    pub fn tasks(&self) -> Vec<Task> {
        let inner = lock(&self.inner);
        inner
            .order
            .iter()
            .rev()
            .filter_map(|id| inner.entries.get(id))
            .map(|e| Self::view(e, None))
            .collect()
    }

    /// Puts an assessment at the end of the queue and tells it its position.
    pub fn enqueue(&self, id: &str) {
        lock(&self.inner).queue.push_back(id.to_owned());
        self.announce_queue();
    }

    /// Takes an assessment out of the queue and tells the others their new positions.
    pub fn dequeue(&self, id: &str) {
        lock(&self.inner).queue.retain(|q| q != id);
        self.announce_queue();
    }

    fn announce_queue(&self) {
        let queued: Vec<String> = lock(&self.inner).queue.iter().cloned().collect();
        let total = queued.len();
        for (i, id) in queued.iter().enumerate() {
            self.set_status(
                id,
                TaskState::Submitted,
                format!(
                    "queued: position {} of {total} (this service runs {} assessment(s) at once)",
                    i + 1,
                    self.max_running
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> Record {
        Record {
            id: id.into(),
            context_id: "c".into(),
            created_at: "now".into(),
            message: Message::user_text("{}"),
            assessment: None,
            run_id: None,
            state: TaskState::Submitted,
            status: "accepted".into(),
            files_token: "t".into(),
            told: None,
        }
    }

    #[test]
    fn records_survive_a_restart_and_terminal_states_stick() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = Registry::open(dir.path(), 1).expect("open");
        reg.insert(record("a"));
        reg.insert(record("b"));
        reg.set_run("a", "run-1");
        reg.set_status("a", TaskState::Working, "1/2 trials done");
        reg.set_status("b", TaskState::Canceled, "canceled");
        reg.set_status("b", TaskState::Working, "too late");
        let again = Registry::open(dir.path(), 1).expect("reopen");
        let a = again.record("a").expect("a");
        assert_eq!(a.run_id.as_deref(), Some("run-1"));
        assert_eq!(a.state, TaskState::Working);
        assert_eq!(again.record("b").expect("b").state, TaskState::Canceled);
        let unfinished: Vec<String> = again.unfinished().into_iter().map(|r| r.id).collect();
        assert_eq!(unfinished, ["a"]);
        assert!(again.task("nope", None).is_err());
    }

    #[test]
    fn queue_positions_are_announced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = Registry::open(dir.path(), 1).expect("open");
        reg.insert(record("a"));
        reg.insert(record("b"));
        reg.enqueue("a");
        reg.enqueue("b");
        assert!(
            reg.record("b")
                .expect("b")
                .status
                .contains("position 2 of 2")
        );
        reg.dequeue("a");
        assert!(
            reg.record("b")
                .expect("b")
                .status
                .contains("position 1 of 1")
        );
    }

    #[test]
    fn a_status_is_built_once_per_change_and_kept_across_reads_and_restarts() {
        let dir = tempfile::tempdir().expect("tempdir");
        let reg = Registry::open(dir.path(), 1).expect("open");
        reg.insert(record("a"));
        let first = reg.task("a", None).expect("a").status;
        std::thread::sleep(std::time::Duration::from_millis(5));
        let again = reg.task("a", None).expect("a").status;
        assert_eq!(first, again, "reading does not rebuild the status");
        reg.set_status("a", TaskState::Completed, "done");
        let done = reg.task("a", None).expect("a").status;
        assert_ne!(done, first, "a change is a new status");
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(reg.task("a", None).expect("a").status, done);
        let reopened = Registry::open(dir.path(), 1).expect("reopen");
        assert_eq!(
            reopened.task("a", None).expect("a").status,
            done,
            "the finished task's status (message id, timestamp) survives a restart"
        );
    }
}
