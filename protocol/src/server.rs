//! The server side: the trait an agent implements and the axum router that serves it.
//!
//! `POST <rpc_path>` takes one JSON-RPC request in A2A 1.0 or 0.3 (see [`crate::v03`]; the
//! handler always sees 1.0 objects and its results are written back in the request's
//! version); every JSON-RPC answer, error or not, is sent with HTTP 200. Streaming methods
//! answer `text/event-stream`, one JSON-RPC response per event, the first event being the
//! Task. `GET /.well-known/agent-card.json` serves the card, valid for both versions.

use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde_json::Value;

use crate::card::{AGENT_CARD_PATH, AgentCard};
use crate::error::A2aError;
use crate::jsonrpc::{A2aRequest, DecodedRequest, decode_request, error_body, success_body};
use crate::methods::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest,
};
use crate::types::Task;
use crate::v03;
use crate::version::{Dialect, VERSION_HEADER};

/// The events of a stream, in order; the first is the Task. The stream ends after the task
/// reaches a terminal or interrupted state.
pub type EventStream = Pin<Box<dyn Stream<Item = StreamResponse> + Send>>;

/// An [`EventStream`] of what is sent on `rx` (the stream ends when every sender is dropped):
/// a handler can produce its events from a spawned task.
pub fn event_stream(rx: tokio::sync::mpsc::Receiver<StreamResponse>) -> EventStream {
    Box::pin(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|ev| (ev, rx))
    }))
}

/// What an agent implements. Errors are answered to the client with their A2A code.
#[async_trait]
pub trait A2aHandler: Send + Sync + 'static {
    /// `SendMessage`. With `configuration.returnImmediately` the agent should answer with the
    /// task at once (e.g. in state submitted/working) and let the client poll.
    async fn send_message(&self, req: SendMessageRequest) -> Result<SendMessageResponse, A2aError>;
    /// `GetTask`. Unknown id: [`A2aError::TaskNotFound`].
    async fn get_task(&self, req: GetTaskRequest) -> Result<Task, A2aError>;
    /// `CancelTask`. Unknown id: `TaskNotFound`; already terminal: `TaskNotCancelable`.
    async fn cancel_task(&self, req: CancelTaskRequest) -> Result<Task, A2aError>;
    /// `ListTasks`.
    async fn list_tasks(&self, req: ListTasksRequest) -> Result<ListTasksResponse, A2aError>;
    /// `SendStreamingMessage`: only called when the card says `capabilities.streaming: true`.
    async fn send_streaming_message(
        &self,
        _req: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        Err(A2aError::UnsupportedOperation(
            "SendStreamingMessage is not implemented by this agent".into(),
        ))
    }
    /// `SubscribeToTask`: only called when the card says `capabilities.streaming: true`.
    /// Unknown id: `TaskNotFound`; terminal task: `UnsupportedOperation`.
    async fn subscribe_to_task(
        &self,
        _req: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        Err(A2aError::UnsupportedOperation(
            "SubscribeToTask is not implemented by this agent".into(),
        ))
    }
}

/// Default cap on a request body: 16 MiB (big files travel as `url` parts).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest accepted request body; larger ones are answered -32600 (HTTP 200).
    pub max_request_bytes: usize,
    /// Path of the JSON-RPC endpoint (default `/`).
    pub rpc_path: String,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            rpc_path: "/".to_owned(),
        }
    }
}

struct AppState {
    handler: Arc<dyn A2aHandler>,
    card: AgentCard,
    max_request_bytes: usize,
}

/// An axum router serving the agent card and the JSON-RPC endpoint. Merge it into a bigger
/// router to add routes, or serve it as is with `axum::serve`.
pub fn router(handler: Arc<dyn A2aHandler>, card: AgentCard, config: ServerConfig) -> Router {
    let state = Arc::new(AppState {
        handler,
        card,
        max_request_bytes: config.max_request_bytes,
    });
    let rpc_path = if config.rpc_path.starts_with('/') {
        config.rpc_path
    } else {
        format!("/{}", config.rpc_path)
    };
    Router::new()
        .route(AGENT_CARD_PATH, get(serve_card))
        .route(&rpc_path, post(serve_rpc))
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// The card as served: interface URLs written as a path (`"/"`) made absolute from `host`
/// (the request's `Host` header), so an agent need not know the address it is reached at
/// (inside a container, say) and every client still sees absolute URLs; then 0.3's fields
/// added beside 1.0's ([`v03::card_add_v03`]) since the router answers both versions.
pub fn card_json(card: &AgentCard, host: Option<&str>) -> Value {
    let mut card = serde_json::to_value(card).unwrap_or_else(|e| {
        tracing::error!(error = %e, "agent card does not serialize; serving an empty object");
        Value::Object(Default::default())
    });
    let host = host.filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()));
    if let (Some(host), Some(ifaces)) = (
        host,
        card.get_mut("supportedInterfaces")
            .and_then(Value::as_array_mut),
    ) {
        for iface in ifaces {
            if let Some(url) = iface.get_mut("url")
                && let Some(path) = url.as_str().filter(|u| u.starts_with('/'))
            {
                *url = Value::String(format!("http://{host}{path}"));
            }
        }
    }
    v03::card_add_v03(&mut card);
    card
}

async fn serve_card(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    json_response(StatusCode::OK, &card_json(&state.card, host))
}

fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "response does not serialize");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "response does not serialize",
            )
                .into_response()
        }
    }
}

async fn serve_rpc(State(state): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let null = Value::Null;
    let bytes = match axum::body::to_bytes(body, state.max_request_bytes).await {
        Ok(b) => b,
        Err(e) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            let err = if too_large {
                A2aError::InvalidRequest(format!(
                    "payload too large: the limit is {} bytes; send big files as `url` parts",
                    state.max_request_bytes
                ))
            } else {
                A2aError::InvalidRequest(format!("could not read the request body: {e}"))
            };
            tracing::warn!(error = %err, "rejected request body");
            return json_response(StatusCode::OK, &error_body(&null, &err));
        }
    };
    let version = headers
        .get(VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let decoded = match decode_request(&bytes, version.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            tracing::debug!(code = e.error.code(), error = %e.error, "rejected request");
            return json_response(StatusCode::OK, &error_body(&e.id, &e.error));
        }
    };
    let DecodedRequest { id, call, dialect } = decoded;
    let method = call.method();
    if let Err(err) = check_against_card(&state.card, &call, dialect) {
        return json_response(StatusCode::OK, &error_body(&id, &err));
    }
    let handler = state.handler.clone();
    // Run the handler in its own task so that a panic in agent code becomes -32603, not a
    // dropped connection.
    let outcome = tokio::spawn(async move { dispatch(handler.as_ref(), call).await }).await;
    let body = match outcome {
        Ok(Ok(Answer::Value(result))) => success_body(&id, to_dialect(dialect, method, &result)),
        Ok(Ok(Answer::Stream(events))) => return sse(id, dialect, method, events),
        Ok(Err(err)) => error_body(&id, &err),
        Err(join) => {
            tracing::error!(error = %join, "A2A handler panicked");
            error_body(
                &id,
                &A2aError::Internal("the agent failed while handling the request".into()),
            )
        }
    };
    json_response(StatusCode::OK, &body)
}

fn to_dialect(dialect: Dialect, method: &str, result: &Value) -> Value {
    match dialect {
        Dialect::V1_0 => result.clone(),
        Dialect::V0_3 => v03::result_to_v03(method, result),
    }
}

/// How often a quiet stream sends a keep-alive comment: under the 5 s read timeout of httpx's
/// default client (what the official Python a2a-sdk uses), so a stream whose agent works for
/// minutes between events is not taken as dead.
pub const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(3);

/// The stream as server-sent events: one JSON-RPC success response per event (comments keep
/// the connection alive while the agent is quiet).
fn sse(id: Value, dialect: Dialect, method: &'static str, events: EventStream) -> Response {
    let events = events.map(move |ev| {
        let body = match serde_json::to_value(&ev) {
            Ok(v) => success_body(&id, to_dialect(dialect, method, &v)),
            Err(e) => error_body(
                &id,
                &A2aError::Internal(format!("stream event does not serialize: {e}")),
            ),
        };
        Event::default()
            .json_data(body)
            .map_err(|e| std::io::Error::other(e.to_string()))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// Answers what the card rules out without asking the handler: streaming when the card says
/// it does not stream (-32004), a push-notification config when it has none (-32003), the
/// extended card when it has none (-32004 in 1.0, spec §3.3.4; -32007 in 0.3).
fn check_against_card(
    card: &AgentCard,
    call: &A2aRequest,
    dialect: Dialect,
) -> Result<(), A2aError> {
    let push = card.capabilities.push_notifications == Some(true);
    match call {
        A2aRequest::SendStreamingMessage(_) | A2aRequest::SubscribeToTask(_) if !card.streams() => {
            Err(A2aError::UnsupportedOperation(format!(
                "{}: this agent does not stream (its card says capabilities.streaming: false); use SendMessage and poll GetTask",
                call.method()
            )))
        }
        A2aRequest::SendMessage(r) | A2aRequest::SendStreamingMessage(r)
            if !push
                && r.configuration
                    .as_ref()
                    .is_some_and(|c| c.task_push_notification_config.is_some()) =>
        {
            Err(A2aError::PushNotificationNotSupported(
                "this agent sends no push notifications (its card says capabilities.pushNotifications: false); send the message without a push-notification config and poll GetTask".into(),
            ))
        }
        A2aRequest::PushNotificationConfig(m) if !push => {
            Err(A2aError::PushNotificationNotSupported(format!(
                "{m}: push notifications are not supported by this agent; poll GetTask"
            )))
        }
        A2aRequest::PushNotificationConfig(m) => Err(A2aError::UnsupportedOperation(format!(
            "{m} is not implemented by this server"
        ))),
        A2aRequest::GetExtendedAgentCard => {
            let msg = "this agent has no extended card (its card says capabilities.extendedAgentCard: false); read /.well-known/agent-card.json";
            Err(match dialect {
                Dialect::V1_0 => A2aError::UnsupportedOperation(msg.into()),
                Dialect::V0_3 => A2aError::ExtendedAgentCardNotConfigured(msg.into()),
            })
        }
        _ => Ok(()),
    }
}

enum Answer {
    Value(Value),
    Stream(EventStream),
}

fn to_value<T: Serialize>(v: &T) -> Result<Answer, A2aError> {
    serde_json::to_value(v)
        .map(Answer::Value)
        .map_err(|e| A2aError::Internal(format!("result does not serialize: {e}")))
}

async fn dispatch(handler: &dyn A2aHandler, call: A2aRequest) -> Result<Answer, A2aError> {
    match call {
        A2aRequest::SendMessage(r) => to_value(&handler.send_message(*r).await?),
        A2aRequest::GetTask(r) => to_value(&handler.get_task(r).await?),
        A2aRequest::CancelTask(r) => to_value(&handler.cancel_task(r).await?),
        A2aRequest::ListTasks(r) => to_value(&handler.list_tasks(r).await?),
        A2aRequest::SendStreamingMessage(r) => {
            Ok(Answer::Stream(handler.send_streaming_message(*r).await?))
        }
        A2aRequest::SubscribeToTask(r) => Ok(Answer::Stream(handler.subscribe_to_task(r).await?)),
        // Answered from the card before dispatch.
        A2aRequest::PushNotificationConfig(_) | A2aRequest::GetExtendedAgentCard => Err(
            A2aError::UnsupportedOperation("not served by this agent".into()),
        ),
    }
}
