//! The JSON-RPC 2.0 envelope: the request decoder the server runs on every body, and the
//! response encoders.
//!
//! The decoder is a pure function (bytes + version header in, a typed call or a coded error
//! out), so it can be tested directly over many generated inputs.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::{A2aError, ErrorObject};
use crate::methods::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest,
    SubscribeToTaskRequest, method,
};
use crate::types::TaskState;
use crate::v03;
use crate::version::{self, Dialect};

/// A decoded A2A call (always in 1.0 shape, whichever version it came in).
#[derive(Debug, Clone, PartialEq)]
pub enum A2aRequest {
    SendMessage(Box<SendMessageRequest>),
    SendStreamingMessage(Box<SendMessageRequest>),
    GetTask(GetTaskRequest),
    CancelTask(CancelTaskRequest),
    ListTasks(ListTasksRequest),
    SubscribeToTask(SubscribeToTaskRequest),
    /// One of the push-notification config methods (its 1.0 name); the router answers it
    /// from the card.
    PushNotificationConfig(&'static str),
    /// `GetExtendedAgentCard`; the router answers it from the card.
    GetExtendedAgentCard,
}

impl A2aRequest {
    /// The 1.0 method name of this call.
    pub fn method(&self) -> &'static str {
        match self {
            A2aRequest::SendMessage(_) => method::SEND_MESSAGE,
            A2aRequest::SendStreamingMessage(_) => method::SEND_STREAMING_MESSAGE,
            A2aRequest::GetTask(_) => method::GET_TASK,
            A2aRequest::CancelTask(_) => method::CANCEL_TASK,
            A2aRequest::ListTasks(_) => method::LIST_TASKS,
            A2aRequest::SubscribeToTask(_) => method::SUBSCRIBE_TO_TASK,
            A2aRequest::PushNotificationConfig(m) => m,
            A2aRequest::GetExtendedAgentCard => method::GET_EXTENDED_AGENT_CARD,
        }
    }
}

/// A request that could not be decoded: the id to answer with (`null` when unknown) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeError {
    pub id: Value,
    pub error: A2aError,
}

/// A decoded request: its id, call, and the protocol version it was written in (the answer
/// must be written in the same).
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedRequest {
    pub id: Value,
    pub call: A2aRequest,
    pub dialect: Dialect,
}

fn fail(id: &Value, error: A2aError) -> DecodeError {
    DecodeError {
        id: id.clone(),
        error,
    }
}

/// Decodes one HTTP body into an A2A call.
///
/// `version_header` is the value of the `A2A-Version` header; absent means 0.3. 1.0 method
/// names need a 1.x header, 0.3 names (`message/send`, ...) a 0.3 one or none; 0.3 params
/// are converted to 1.0 ([`crate::v03`]). Checks in order: JSON (-32700), a single object
/// (batches and other shapes -32600), `jsonrpc == "2.0"`, the id (string, integer or null),
/// the method (-32601 if unknown), the version (-32009), the params (-32602, including
/// out-of-range `pageSize`/`historyLength`, an unknown `status` and a missing `messageId`).
pub fn decode_request(
    body: &[u8],
    version_header: Option<&str>,
) -> Result<DecodedRequest, DecodeError> {
    let null = Value::Null;
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        fail(
            &null,
            A2aError::Parse(format!("body is not valid JSON: {e}")),
        )
    })?;
    let obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Err(fail(
                &null,
                A2aError::InvalidRequest(
                    "batch requests are not supported; send one request object per HTTP request"
                        .into(),
                ),
            ));
        }
        other => {
            return Err(fail(
                &null,
                A2aError::InvalidRequest(format!(
                    "a request must be a JSON object, got {}",
                    crate::lenient::kind(&other)
                )),
            ));
        }
    };
    let id = match obj.get("id") {
        None | Some(Value::Null) => Value::Null,
        Some(v @ Value::String(_)) => v.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Value::Number(n.clone()),
        Some(other) => {
            return Err(fail(
                &null,
                A2aError::InvalidRequest(format!(
                    "`id` must be a string, an integer or null, got {}",
                    crate::lenient::kind(other)
                )),
            ));
        }
    };
    match obj.get("jsonrpc") {
        Some(Value::String(s)) if s == "2.0" => {}
        _ => {
            return Err(fail(
                &id,
                A2aError::InvalidRequest("`jsonrpc` must be exactly \"2.0\"".into()),
            ));
        }
    }
    let method_name = match obj.get("method") {
        Some(Value::String(m)) if !m.is_empty() => m.as_str(),
        _ => {
            return Err(fail(
                &id,
                A2aError::InvalidRequest("`method` must be a non-empty string".into()),
            ));
        }
    };
    let (name, legacy) = if let Some(v1) = v03::method_from_v03(method_name) {
        (v1, true)
    } else if let Some(v1) = V1_METHODS.iter().find(|m| **m == method_name) {
        (*v1, false)
    } else {
        return Err(fail(
            &id,
            A2aError::MethodNotFound(format!(
                "unknown method {method_name:?}; this agent serves the A2A 1.0 methods (SendMessage, SendStreamingMessage, GetTask, CancelTask, ListTasks, SubscribeToTask, ...) and their 0.3 names (message/send, tasks/get, ...)"
            )),
        ));
    };
    let v = version::effective(version_header);
    let dialect = match Dialect::of(v) {
        Some(d) => d,
        None => {
            return Err(fail(
                &id,
                A2aError::VersionNotSupported(format!(
                    "A2A version {v:?} is not supported; this agent speaks 1.0 ({h}: 1.0) and 0.3 (no {h} header, or {h}: 0.3)",
                    h = version::VERSION_HEADER
                )),
            ));
        }
    };
    match (dialect, legacy) {
        (Dialect::V1_0, true) => {
            return Err(fail(
                &id,
                A2aError::VersionNotSupported(format!(
                    "{method_name} is an A2A 0.3 method but the request says {}: {v}; use the 1.0 name {name}, or send the 0.3 request without the header",
                    version::VERSION_HEADER
                )),
            ));
        }
        (Dialect::V0_3, false) => {
            return Err(fail(
                &id,
                A2aError::VersionNotSupported(format!(
                    "{method_name} is an A2A 1.0 method but the request speaks 0.3 (a missing {h} header means 0.3); send {h}: 1.0",
                    h = version::VERSION_HEADER
                )),
            ));
        }
        _ => {}
    }
    let params = match obj.get("params") {
        None | Some(Value::Null) => Value::Object(Default::default()),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(other) => {
            return Err(fail(
                &id,
                A2aError::InvalidParams(format!(
                    "`params` must be an object, got {}",
                    crate::lenient::kind(other)
                )),
            ));
        }
    };
    if matches!(name, method::SEND_MESSAGE | method::SEND_STREAMING_MESSAGE)
        && let Some(m) = params.get("message")
        && let Err(why) = check_message(m, legacy)
    {
        return Err(fail(
            &id,
            A2aError::InvalidParams(format!("{method_name}: {why}")),
        ));
    }
    let params = if legacy {
        v03::params_from_v03(name, &params)
    } else {
        params
    };
    let call = match name {
        method::SEND_MESSAGE | method::SEND_STREAMING_MESSAGE => {
            let req: SendMessageRequest = params_as(&id, method_name, params)?;
            if req.message.message_id.trim().is_empty() {
                return Err(fail(
                    &id,
                    A2aError::InvalidParams(format!(
                        "{method_name}: `message.messageId` is required (a unique id chosen by the client)"
                    )),
                ));
            }
            check_history(
                &id,
                method_name,
                req.configuration.as_ref().and_then(|c| c.history_length),
            )?;
            if name == method::SEND_MESSAGE {
                A2aRequest::SendMessage(Box::new(req))
            } else {
                A2aRequest::SendStreamingMessage(Box::new(req))
            }
        }
        method::GET_TASK => {
            let req: GetTaskRequest = params_as(&id, method_name, params)?;
            check_history(&id, method_name, req.history_length)?;
            A2aRequest::GetTask(req)
        }
        method::CANCEL_TASK => A2aRequest::CancelTask(params_as(&id, method_name, params)?),
        method::SUBSCRIBE_TO_TASK => {
            A2aRequest::SubscribeToTask(params_as(&id, method_name, params)?)
        }
        method::LIST_TASKS => {
            check_status(&id, method_name, params.get("status"))?;
            let req: ListTasksRequest = params_as(&id, method_name, params)?;
            if let Some(n) = req.page_size
                && !(1..=100).contains(&n)
            {
                return Err(fail(
                    &id,
                    A2aError::InvalidParams(format!(
                        "{method_name}: `pageSize` must be between 1 and 100, got {n}"
                    )),
                ));
            }
            check_history(&id, method_name, req.history_length)?;
            A2aRequest::ListTasks(req)
        }
        method::GET_EXTENDED_AGENT_CARD => A2aRequest::GetExtendedAgentCard,
        push => A2aRequest::PushNotificationConfig(push),
    };
    Ok(DecodedRequest { id, call, dialect })
}

const V1_METHODS: &[&str] = &[
    method::SEND_MESSAGE,
    method::SEND_STREAMING_MESSAGE,
    method::GET_TASK,
    method::LIST_TASKS,
    method::CANCEL_TASK,
    method::SUBSCRIBE_TO_TASK,
    method::CREATE_TASK_PUSH_NOTIFICATION_CONFIG,
    method::GET_TASK_PUSH_NOTIFICATION_CONFIG,
    method::LIST_TASK_PUSH_NOTIFICATION_CONFIGS,
    method::DELETE_TASK_PUSH_NOTIFICATION_CONFIG,
    method::GET_EXTENDED_AGENT_CARD,
];

/// What the spec requires of a sent message that the schema alone does not: a known `role`
/// (`ROLE_USER`/`ROLE_AGENT`; in 0.3 `user`/`agent`) and at least one part, each with exactly
/// one content (`text`, `raw`, `url` or `data`; in 0.3 a known `kind` with its field). The
/// error names the field.
fn check_message(m: &Value, legacy: bool) -> Result<(), String> {
    let Some(m) = m.as_object() else {
        return Err("`message` must be an object".into());
    };
    let role_ok = match m.get("role") {
        Some(Value::String(r)) if legacy => r == "user" || r == "agent",
        Some(Value::String(r)) => r == "ROLE_USER" || r == "ROLE_AGENT",
        Some(Value::Number(n)) if !legacy => matches!(n.as_i64(), Some(1 | 2)),
        _ => false,
    };
    if !role_ok {
        let want = if legacy {
            "\"user\" or \"agent\""
        } else {
            "ROLE_USER or ROLE_AGENT"
        };
        return Err(match m.get("role") {
            None | Some(Value::Null) => format!("`message.role` is required: {want}"),
            Some(other) => format!("`message.role` must be {want}, got {other}"),
        });
    }
    let parts = match m.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        Some(Value::Array(_)) => return Err("`message.parts` must hold at least one part".into()),
        _ => return Err("`message.parts` is required: an array of at least one part".into()),
    };
    for (i, p) in parts.iter().enumerate() {
        let Some(p) = p.as_object() else {
            return Err(format!("`message.parts[{i}]` must be an object"));
        };
        if legacy {
            let field_ok = match p.get("kind").and_then(Value::as_str) {
                Some("text") => p.get("text").is_some_and(Value::is_string),
                Some("file") => p.get("file").is_some_and(|f| {
                    f.get("bytes").is_some_and(Value::is_string)
                        || f.get("uri").is_some_and(Value::is_string)
                }),
                Some("data") => p.get("data").is_some_and(|d| !d.is_null()),
                Some(other) => {
                    return Err(format!(
                        "`message.parts[{i}].kind` must be \"text\", \"file\" or \"data\", got {other:?}"
                    ));
                }
                None => {
                    return Err(format!(
                        "`message.parts[{i}].kind` is required: \"text\", \"file\" or \"data\""
                    ));
                }
            };
            if !field_ok {
                return Err(format!(
                    "`message.parts[{i}]` lacks the content its kind names (text: `text`; file: `file.bytes` or `file.uri`; data: `data`)"
                ));
            }
        } else {
            let contents = ["text", "raw", "url", "data"]
                .iter()
                .filter(|k| p.get(**k).is_some_and(|v| !v.is_null()))
                .count();
            if contents != 1 {
                return Err(format!(
                    "`message.parts[{i}]` must hold exactly one of `text`, `raw`, `url` or `data` (it holds {contents})"
                ));
            }
        }
    }
    Ok(())
}

fn check_history(id: &Value, method: &str, n: Option<i32>) -> Result<(), DecodeError> {
    match n {
        Some(n) if n < 0 => Err(fail(
            id,
            A2aError::InvalidParams(format!(
                "{method}: `historyLength` must be 0 or more (absent means all), got {n}"
            )),
        )),
        _ => Ok(()),
    }
}

fn check_status(id: &Value, method: &str, status: Option<&Value>) -> Result<(), DecodeError> {
    let known = match status {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => {
            s == TaskState::Unspecified.as_wire()
                || TaskState::from_wire(s) != TaskState::Unspecified
        }
        Some(Value::Number(n)) => n
            .as_i64()
            .is_some_and(|n| TaskState::ALL.iter().any(|s| i64::from(s.number()) == n)),
        Some(_) => false,
    };
    if known {
        Ok(())
    } else {
        Err(fail(
            id,
            A2aError::InvalidParams(format!(
                "{method}: unknown `status` {}; use a TaskState name such as TASK_STATE_WORKING",
                status.map(Value::to_string).unwrap_or_default()
            )),
        ))
    }
}

fn params_as<T: DeserializeOwned>(
    id: &Value,
    method: &str,
    params: Value,
) -> Result<T, DecodeError> {
    T::deserialize(params).map_err(|e| {
        fail(
            id,
            A2aError::InvalidParams(format!("{method} params do not fit the A2A schema: {e}")),
        )
    })
}

/// A success response body.
pub fn success_body(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response body (the error carries a `google.rpc.ErrorInfo` detail).
pub fn error_body(id: &Value, error: &A2aError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_error_object()})
}

/// A request body, as the client sends it.
pub fn request_body(id: &str, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A response as the client reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct RpcResponse {
    #[serde(default)]
    pub jsonrpc: Option<String>,
    #[serde(default)]
    pub id: Value,
    #[serde(default)]
    pub result: Option<Value>,
    #[serde(default)]
    pub error: Option<ErrorObject>,
}
