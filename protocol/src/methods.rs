//! Request and response objects of the A2A methods this crate serves.

use chrono::{DateTime, Utc};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::lenient::{i32_or_default, null_default, opt_i32};
use crate::types::{Artifact, Message, Metadata, Task, TaskState, TaskStatus};

fn is_empty<T>(v: &[T]) -> bool {
    v.is_empty()
}

/// JSON-RPC method names of the A2A 1.0 binding.
pub mod method {
    pub const SEND_MESSAGE: &str = "SendMessage";
    pub const SEND_STREAMING_MESSAGE: &str = "SendStreamingMessage";
    pub const GET_TASK: &str = "GetTask";
    pub const LIST_TASKS: &str = "ListTasks";
    pub const CANCEL_TASK: &str = "CancelTask";
    pub const SUBSCRIBE_TO_TASK: &str = "SubscribeToTask";
    pub const CREATE_TASK_PUSH_NOTIFICATION_CONFIG: &str = "CreateTaskPushNotificationConfig";
    pub const GET_TASK_PUSH_NOTIFICATION_CONFIG: &str = "GetTaskPushNotificationConfig";
    pub const LIST_TASK_PUSH_NOTIFICATION_CONFIGS: &str = "ListTaskPushNotificationConfigs";
    pub const DELETE_TASK_PUSH_NOTIFICATION_CONFIG: &str = "DeleteTaskPushNotificationConfig";
    pub const GET_EXTENDED_AGENT_CARD: &str = "GetExtendedAgentCard";

    /// The A2A 0.3 method names, served on the same endpoint (see [`crate::v03`]).
    pub mod v03 {
        pub const SEND_MESSAGE: &str = "message/send";
        pub const SEND_STREAMING_MESSAGE: &str = "message/stream";
        pub const GET_TASK: &str = "tasks/get";
        pub const LIST_TASKS: &str = "tasks/list";
        pub const CANCEL_TASK: &str = "tasks/cancel";
        pub const RESUBSCRIBE: &str = "tasks/resubscribe";
        pub const SET_PUSH_CONFIG: &str = "tasks/pushNotificationConfig/set";
        pub const GET_PUSH_CONFIG: &str = "tasks/pushNotificationConfig/get";
        pub const LIST_PUSH_CONFIGS: &str = "tasks/pushNotificationConfig/list";
        pub const DELETE_PUSH_CONFIG: &str = "tasks/pushNotificationConfig/delete";
        pub const GET_EXTENDED_CARD: &str = "agent/getAuthenticatedExtendedCard";
    }

    /// Every 0.3 method name.
    pub const LEGACY_0_3: &[&str] = &[
        v03::SEND_MESSAGE,
        v03::SEND_STREAMING_MESSAGE,
        v03::GET_TASK,
        v03::LIST_TASKS,
        v03::CANCEL_TASK,
        v03::RESUBSCRIBE,
        v03::SET_PUSH_CONFIG,
        v03::GET_PUSH_CONFIG,
        v03::LIST_PUSH_CONFIGS,
        v03::DELETE_PUSH_CONFIG,
        v03::GET_EXTENDED_CARD,
    ];
}

/// Authentication details for push notifications.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    #[serde(default, deserialize_with = "null_default")]
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// A push-notification target (carried, never acted on: this crate sends no notifications).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, deserialize_with = "null_default")]
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

fn redacted(v: &Option<String>) -> Option<&'static str> {
    v.as_ref().map(|_| "<redacted>")
}

impl std::fmt::Debug for AuthenticationInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthenticationInfo")
            .field("scheme", &self.scheme)
            .field("credentials", &redacted(&self.credentials))
            .finish()
    }
}

impl std::fmt::Debug for TaskPushNotificationConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskPushNotificationConfig")
            .field("tenant", &self.tenant)
            .field("id", &self.id)
            .field("task_id", &self.task_id)
            .field("url", &self.url)
            .field("token", &redacted(&self.token))
            .field("authentication", &self.authentication)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_filters_admit_by_context_state_and_status_stamp() {
        let mut t = Task::new("t", "ctx", TaskState::Completed);
        let at = t.status.timestamp.expect("stamped");
        let req = |f: fn(&mut ListTasksRequest)| {
            let mut r = ListTasksRequest::default();
            f(&mut r);
            r
        };
        assert!(ListTasksRequest::default().admits(&t));
        assert!(!req(|r| r.context_id = Some("other".into())).admits(&t));
        assert!(!req(|r| r.status = Some(TaskState::Working)).admits(&t));
        assert!(req(|r| r.status = Some(TaskState::Unspecified)).admits(&t));
        let mut after = ListTasksRequest {
            status_timestamp_after: Some(at),
            ..ListTasksRequest::default()
        };
        assert!(after.admits(&t), "stamped at the cut: admitted");
        after.status_timestamp_after = Some(at + chrono::Duration::milliseconds(1));
        assert!(!after.admits(&t), "stamped before the cut: left out");
        t.status.timestamp = None;
        assert!(!after.admits(&t), "no stamp: left out");
    }

    #[test]
    fn debug_redacts_secrets() {
        let c = TaskPushNotificationConfig {
            tenant: None,
            id: None,
            task_id: None,
            url: "https://x".into(),
            token: Some("tok-secret".into()),
            authentication: Some(AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: Some("cred-secret".into()),
            }),
        };
        let s = format!("{c:?}");
        assert!(
            !s.contains("tok-secret") && !s.contains("cred-secret"),
            "{s}"
        );
        assert!(s.contains("<redacted>"));
    }
}

/// How the agent should handle a `SendMessage`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "is_empty"
    )]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    #[serde(
        default,
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    /// Answer at once with the task (the client then polls `GetTask`) instead of waiting for
    /// a terminal or interrupted state.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "crate::lenient::is_false"
    )]
    pub return_immediately: bool,
}

/// `SendMessage` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl SendMessageRequest {
    /// A request carrying `message`, without configuration.
    pub fn new(message: Message) -> Self {
        SendMessageRequest {
            tenant: None,
            message,
            configuration: None,
            metadata: None,
        }
    }

    /// Asks the agent to answer at once (polling mode).
    pub fn return_immediately(mut self) -> Self {
        self.configuration
            .get_or_insert_with(SendMessageConfiguration::default)
            .return_immediately = true;
        self
    }

    /// Whether the client asked for an immediate answer.
    pub fn wants_immediate_return(&self) -> bool {
        self.configuration
            .as_ref()
            .is_some_and(|c| c.return_immediately)
    }
}

/// `SendMessage` result: `{"task": …}` or `{"message": …}`.
#[derive(Debug, Clone, PartialEq)]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

impl SendMessageResponse {
    /// The task, if the agent answered with one.
    pub fn into_task(self) -> Option<Task> {
        match self {
            SendMessageResponse::Task(t) => Some(t),
            SendMessageResponse::Message(_) => None,
        }
    }
}

impl Serialize for SendMessageResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        enum Out<'a> {
            Task(&'a Task),
            Message(&'a Message),
        }
        match self {
            SendMessageResponse::Task(t) => Out::Task(t).serialize(s),
            SendMessageResponse::Message(m) => Out::Message(m).serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for SendMessageResponse {
    /// Reads `{"task": …}` or `{"message": …}`; leniently also a bare Task or Message (0.3).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut v = Value::deserialize(d)?;
        let Some(obj) = v.as_object_mut() else {
            return Err(D::Error::custom("SendMessage result must be an object"));
        };
        let task = obj.remove("task").filter(|t| !t.is_null());
        let message = obj.remove("message").filter(|m| !m.is_null());
        match (task, message) {
            (Some(t), None) => serde_json::from_value(t)
                .map(Self::Task)
                .map_err(D::Error::custom),
            (None, Some(m)) => serde_json::from_value(m)
                .map(Self::Message)
                .map_err(D::Error::custom),
            (Some(_), Some(_)) => Err(D::Error::custom(
                "SendMessage result has both `task` and `message`",
            )),
            (None, None) => {
                if obj.contains_key("status") {
                    serde_json::from_value(v)
                        .map(Self::Task)
                        .map_err(D::Error::custom)
                } else if obj.contains_key("role") || obj.contains_key("parts") {
                    serde_json::from_value(v)
                        .map(Self::Message)
                        .map_err(D::Error::custom)
                } else {
                    Err(D::Error::custom(
                        "SendMessage result has neither `task` nor `message`",
                    ))
                }
            }
        }
    }
}

/// `GetTask` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    /// How many of the most recent history messages to return; absent means all.
    #[serde(
        default,
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
}

impl GetTaskRequest {
    /// Get task `id` with its full history.
    pub fn new(id: impl Into<String>) -> Self {
        GetTaskRequest {
            tenant: None,
            id: id.into(),
            history_length: None,
        }
    }
}

/// `CancelTask` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl CancelTaskRequest {
    /// Cancel task `id`.
    pub fn new(id: impl Into<String>) -> Self {
        CancelTaskRequest {
            tenant: None,
            id: id.into(),
            metadata: None,
        }
    }
}

/// `ListTasks` params (all filters optional).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    #[serde(
        default,
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub page_size: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    #[serde(
        default,
        deserialize_with = "opt_i32",
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_timestamp_after: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_artifacts: Option<bool>,
}

impl ListTasksRequest {
    /// Whether `task` passes this request's filters: its context, its state (`Unspecified`
    /// filters nothing) and `statusTimestampAfter` (a status stamped at or after it; a status
    /// without a stamp is left out).
    pub fn admits(&self, task: &Task) -> bool {
        self.context_id
            .as_ref()
            .is_none_or(|c| &task.context_id == c)
            && self
                .status
                .is_none_or(|s| s == TaskState::Unspecified || task.status.state == s)
            && self
                .status_timestamp_after
                .is_none_or(|after| task.status.timestamp.is_some_and(|at| at >= after))
    }
}

/// `ListTasks` result.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    #[serde(default, deserialize_with = "null_default")]
    pub tasks: Vec<Task>,
    /// Empty when there is no further page.
    #[serde(default, deserialize_with = "null_default")]
    pub next_page_token: String,
    #[serde(default, deserialize_with = "i32_or_default")]
    pub page_size: i32,
    #[serde(default, deserialize_with = "i32_or_default")]
    pub total_size: i32,
}

impl ListTasksResponse {
    /// The page of `tasks` (filtered and ordered by the server) that `req` asks for. A page
    /// token is the offset of its page as issued in `nextPageToken` (`offset-N`); any other
    /// token is `InvalidParams`. `pageSize` is clamped to 1-100 (default 50).
    pub fn page(mut tasks: Vec<Task>, req: &ListTasksRequest) -> Result<Self, crate::A2aError> {
        let total = tasks.len();
        let offset = match req.page_token.as_deref().filter(|t| !t.is_empty()) {
            None => 0,
            Some(token) => token
                .strip_prefix("offset-")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| *n > 0 && *n < total)
                .ok_or_else(|| {
                    crate::A2aError::InvalidParams(format!(
                        "pageToken {token:?} was not issued here; use a nextPageToken from a previous ListTasks, or none"
                    ))
                })?,
        };
        let size = usize::try_from(req.page_size.unwrap_or(50).clamp(1, 100)).unwrap_or(50);
        tasks.drain(..offset);
        tasks.truncate(size);
        let next = offset + tasks.len();
        Ok(Self {
            page_size: i32::try_from(tasks.len()).unwrap_or(i32::MAX),
            total_size: i32::try_from(total).unwrap_or(i32::MAX),
            tasks,
            next_page_token: if next < total {
                format!("offset-{next}")
            } else {
                String::new()
            },
        })
    }
}

/// `SubscribeToTask` params (0.3: `tasks/resubscribe`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeToTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
}

impl SubscribeToTaskRequest {
    /// Subscribe to task `id`.
    pub fn new(id: impl Into<String>) -> Self {
        SubscribeToTaskRequest {
            tenant: None,
            id: id.into(),
        }
    }
}

/// A change of a task's status, sent on a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    #[serde(default, deserialize_with = "null_default")]
    pub task_id: String,
    #[serde(default, deserialize_with = "null_default")]
    pub context_id: String,
    #[serde(default, deserialize_with = "null_default")]
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// A new or extended artifact, sent on a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(default, deserialize_with = "null_default")]
    pub task_id: String,
    #[serde(default, deserialize_with = "null_default")]
    pub context_id: String,
    pub artifact: Artifact,
    /// Append these parts to the artifact of the same id sent before.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "crate::lenient::is_false"
    )]
    pub append: bool,
    /// The last chunk of this artifact.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "crate::lenient::is_false"
    )]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// One event of `SendStreamingMessage` / `SubscribeToTask`: exactly one of the four.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// Applies this event to `task` (the task the stream is about): a Task replaces it, a
    /// status update sets the status, an artifact update adds or extends an artifact.
    /// Messages leave the task as it is.
    pub fn apply_to(&self, task: &mut Task) {
        match self {
            StreamResponse::Task(t) => *task = t.clone(),
            StreamResponse::Message(_) => {}
            StreamResponse::StatusUpdate(u) => task.status = u.status.clone(),
            StreamResponse::ArtifactUpdate(u) => {
                let existing = task
                    .artifacts
                    .iter_mut()
                    .find(|a| a.artifact_id == u.artifact.artifact_id);
                match existing {
                    Some(a) if u.append => a.parts.extend(u.artifact.parts.iter().cloned()),
                    Some(a) => *a = u.artifact.clone(),
                    None => task.artifacts.push(u.artifact.clone()),
                }
            }
        }
    }
}
