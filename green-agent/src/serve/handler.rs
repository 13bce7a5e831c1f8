//! The A2A side of the service: [`Assessor`] implements `a2a_protocol::A2aHandler`. A message
//! is an assessment request: validated (and its participants' cards fetched) before anything
//! runs, answered at once with the task (REJECTED with the reason, or SUBMITTED and running in
//! the background); GetTask / SubscribeToTask follow it, CancelTask stops it.

use std::sync::Arc;
use std::time::Duration;

use a2a_protocol::{
    A2aError, A2aHandler, CancelTaskRequest, EventStream, GetTaskRequest, ListTasksRequest,
    ListTasksResponse, SendMessageRequest, SendMessageResponse, StreamResponse,
    SubscribeToTaskRequest, Task, TaskState,
};
use tokio::sync::broadcast::error::RecvError;

use super::assessment::Service;
use super::registry::Record;
use super::request::{check_reachable, request_json, validate};

/// How long CancelTask waits for the run to stop before answering with the task as it is.
const CANCEL_WAIT: Duration = Duration::from_secs(60);

/// The A2A handler of `green-agent serve`.
#[derive(Debug, Clone)]
pub struct Assessor {
    pub svc: Arc<Service>,
}

impl Assessor {
    /// Validates the request and records the assessment (rejected or submitted). Returns its id
    /// and whether it was accepted; the caller reads or subscribes to the task first and then
    /// [`Self::start`]s it, so the answer always shows the task as recorded (SUBMITTED), not
    /// whatever state the run has reached in between.
    async fn accept(&self, req: SendMessageRequest) -> Result<(String, bool), A2aError> {
        let reg = &self.svc.registry;
        if let Some(task_id) = &req.message.task_id
            && reg.record(task_id).is_some()
        {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {task_id} already exists; each assessment is one message: send a new message without taskId"
            )));
        }
        let id = uuid::Uuid::new_v4().to_string();
        let context_id = req
            .message
            .context_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let mut message = req.message;
        message.task_id = Some(id.clone());
        message.context_id = Some(context_id.clone());
        let checked = match request_json(&message) {
            Ok(value) => match validate(&value, &self.svc.catalog, &self.svc.policy, &self.svc.env)
            {
                Ok(a) => check_reachable(&a, &self.svc.policy).await.map(|()| a),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let (state, status, assessment) = match checked {
            Ok(a) => (
                TaskState::Submitted,
                format!(
                    "accepted: {} trial(s) ({} task(s) × {} participant(s) × {} repeat(s)); waiting for a slot",
                    a.trials(),
                    a.task_ids.len(),
                    a.participants.len(),
                    a.repeats
                ),
                Some(a),
            ),
            Err(e) => {
                tracing::info!(assessment = %id, reason = %e, "request rejected");
                (TaskState::Rejected, format!("rejected: {e}"), None)
            }
        };
        let accepted = assessment.is_some();
        reg.insert(Record {
            id: id.clone(),
            context_id,
            created_at: chrono::Utc::now().to_rfc3339(),
            message,
            assessment,
            run_id: None,
            state,
            status,
            files_token: uuid::Uuid::new_v4().simple().to_string(),
            told: None,
        });
        Ok((id, accepted))
    }

    /// Starts an accepted assessment in the background.
    fn start(&self, id: &str, accepted: bool) {
        if accepted {
            self.svc.spawn(id.to_owned());
        }
    }

    /// The task's events: the task now, then every status and artifact update until a terminal
    /// status (the stream of a terminal task is that task alone).
    fn events(&self, id: &str) -> Result<EventStream, A2aError> {
        let (task, mut rx) = self.svc.registry.subscribe(id)?;
        let (tx, out) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            let done = task.status.state.is_terminal();
            if tx.send(StreamResponse::Task(task)).await.is_err() || done {
                return;
            }
            loop {
                match rx.recv().await {
                    Ok(ev) => {
                        let end = matches!(&ev, StreamResponse::StatusUpdate(s) if s.status.state.is_terminal());
                        if tx.send(ev).await.is_err() || end {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::warn!(skipped = n, "a slow subscriber missed events");
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
        Ok(a2a_protocol::event_stream(out))
    }
}

#[a2a_protocol::async_trait]
impl A2aHandler for Assessor {
    async fn send_message(&self, req: SendMessageRequest) -> Result<SendMessageResponse, A2aError> {
        // An assessment runs for minutes to hours: the task is returned at once, whatever
        // `returnImmediately` says; poll GetTask or subscribe.
        let (id, accepted) = self.accept(req).await?;
        let task = self.svc.registry.task(&id, None);
        self.start(&id, accepted);
        Ok(SendMessageResponse::Task(task?))
    }

    async fn send_streaming_message(
        &self,
        req: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        let (id, accepted) = self.accept(req).await?;
        let events = self.events(&id);
        self.start(&id, accepted);
        events
    }

    async fn subscribe_to_task(
        &self,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        let task = self.svc.registry.task(&req.id, Some(0))?;
        if task.status.state.is_terminal() {
            return Err(A2aError::UnsupportedOperation(format!(
                "assessment {} is already {}; read it with GetTask",
                req.id, task.status.state
            )));
        }
        self.events(&req.id)
    }

    async fn get_task(&self, req: GetTaskRequest) -> Result<Task, A2aError> {
        self.svc.registry.task(&req.id, req.history_length)
    }

    async fn cancel_task(&self, req: CancelTaskRequest) -> Result<Task, A2aError> {
        let reg = &self.svc.registry;
        let (task, mut rx) = reg.subscribe(&req.id)?;
        if task.status.state.is_terminal() {
            return Err(A2aError::TaskNotCancelable(format!(
                "assessment {} is already {}",
                req.id, task.status.state
            )));
        }
        if let Some(token) = reg.cancel_token(&req.id) {
            token.cancel();
        }
        let _ = tokio::time::timeout(CANCEL_WAIT, async {
            loop {
                match rx.recv().await {
                    Ok(StreamResponse::StatusUpdate(s)) if s.status.state.is_terminal() => return,
                    Ok(_) | Err(RecvError::Lagged(_)) => {}
                    Err(RecvError::Closed) => return,
                }
            }
        })
        .await;
        reg.task(&req.id, None)
    }

    async fn list_tasks(&self, req: ListTasksRequest) -> Result<ListTasksResponse, A2aError> {
        let include_artifacts = req.include_artifacts.unwrap_or(false);
        let out: Vec<Task> = self
            .svc
            .registry
            .tasks()
            .into_iter()
            // A status is stamped once per change, so `statusTimestampAfter` leaves an old
            // task out however often it was read.
            .filter(|t| req.admits(t))
            .map(|mut t| {
                if !include_artifacts {
                    t.artifacts.clear();
                }
                if let Some(n) = req.history_length {
                    t.history.truncate(usize::try_from(n.max(0)).unwrap_or(0));
                }
                t
            })
            .collect();
        ListTasksResponse::page(out, &req)
    }
}
