//! A2A 0.3 ⇄ 1.0: the one module that knows 0.3's wire shapes.
//!
//! The rest of the crate speaks 1.0 only; the server converts 0.3 requests to 1.0 before the
//! handler sees them and 1.0 results to 0.3 after, and the client does the reverse. Every
//! conversion is JSON → JSON, so the typed readers (lenient) and writers (strict) of
//! [`crate::types`] stay the single definition of each object.
//!
//! 0.3 differences handled here: method names (`message/send`, ...); a `kind` discriminator on
//! parts (`text`/`file`/`data`), messages, tasks and stream events (`status-update`,
//! `artifact-update`); lowercase enum values (`user`, `input-required`, `unknown`); a `file`
//! object (`bytes`|`uri`, `name`, `mimeType`) where 1.0 has `raw`|`url` + `filename` +
//! `mediaType`; bare Task/Message results where 1.0 wraps them (`{"task": …}`); `blocking`
//! where 1.0 has `returnImmediately`; a `final` flag on status updates; the card's `url`,
//! `preferredTransport`, `protocolVersion`, `additionalInterfaces`, `security` and
//! OpenAPI-style `securitySchemes` (a served card carries both forms of its security: 0.3's
//! fields beside each 1.0 one-key scheme object, `security` beside `securityRequirements`).
//!
//! What 0.3 cannot carry (dropped on the way to 0.3): `filename`/`mediaType` of text and data
//! parts, a data part whose value is not an object (wrapped as `{"value": …}`), the role
//! `ROLE_UNSPECIFIED` (written as `agent`), a task's `tenant`.

use serde_json::{Map, Value, json};

use crate::methods::method;
use crate::types::{Role, TaskState};
use crate::version::V0_3_CARD_VERSION;

type Obj = Map<String, Value>;

fn obj(v: &Value) -> Obj {
    v.as_object().cloned().unwrap_or_default()
}

fn map_array(v: Option<&Value>, f: impl Fn(&Value) -> Value) -> Option<Value> {
    v.and_then(Value::as_array)
        .map(|a| Value::Array(a.iter().map(f).collect()))
}

/// The 0.3 spelling of a task state.
pub fn state_to_v03(state: TaskState) -> &'static str {
    match state {
        TaskState::Unspecified => "unknown",
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired => "input-required",
        TaskState::Rejected => "rejected",
        TaskState::AuthRequired => "auth-required",
    }
}

fn state_str(v: Option<&Value>) -> TaskState {
    match v {
        Some(Value::String(s)) => TaskState::from_wire(s),
        Some(Value::Number(n)) => n.as_i64().map(TaskState::from_number).unwrap_or_default(),
        _ => TaskState::Unspecified,
    }
}

fn role_str(v: Option<&Value>) -> Role {
    match v {
        Some(Value::String(s)) => Role::from_wire(s),
        Some(Value::Number(n)) => n.as_i64().map(Role::from_number).unwrap_or_default(),
        _ => Role::Unspecified,
    }
}

// ---------------------------------------------------------------------------------------
// 1.0 → 0.3

/// A 1.0 part as a 0.3 `TextPart` / `FilePart` / `DataPart`.
pub fn part_to_v03(p: &Value) -> Value {
    let mut out = Obj::new();
    let name = p.get("filename").filter(|v| v.is_string());
    let mime = p.get("mediaType").filter(|v| v.is_string());
    if let Some(t) = p.get("text") {
        out.insert("kind".into(), json!("text"));
        out.insert("text".into(), t.clone());
    } else if p.get("raw").is_some() || p.get("url").is_some() {
        let mut file = Obj::new();
        if let Some(b) = p.get("raw") {
            file.insert("bytes".into(), b.clone());
        } else if let Some(u) = p.get("url") {
            file.insert("uri".into(), u.clone());
        }
        if let Some(n) = name {
            file.insert("name".into(), n.clone());
        }
        if let Some(m) = mime {
            file.insert("mimeType".into(), m.clone());
        }
        out.insert("kind".into(), json!("file"));
        out.insert("file".into(), Value::Object(file));
    } else {
        let data = match p.get("data") {
            Some(d @ Value::Object(_)) => d.clone(),
            Some(other) => json!({ "value": other }),
            None => json!({}),
        };
        out.insert("kind".into(), json!("data"));
        out.insert("data".into(), data);
    }
    if let Some(m) = p.get("metadata").filter(|m| m.is_object()) {
        out.insert("metadata".into(), m.clone());
    }
    Value::Object(out)
}

/// A 1.0 message as a 0.3 message.
pub fn message_to_v03(m: &Value) -> Value {
    let mut out = obj(m);
    out.insert("kind".into(), json!("message"));
    let role = match role_str(m.get("role")) {
        Role::User => "user",
        Role::Agent | Role::Unspecified => "agent",
    };
    out.insert("role".into(), json!(role));
    out.insert(
        "parts".into(),
        map_array(m.get("parts"), part_to_v03).unwrap_or_else(|| json!([])),
    );
    out.entry("messageId").or_insert_with(|| json!(""));
    Value::Object(out)
}

/// A 1.0 task status as a 0.3 one.
pub fn status_to_v03(s: &Value) -> Value {
    let mut out = obj(s);
    out.insert(
        "state".into(),
        json!(state_to_v03(state_str(s.get("state")))),
    );
    if let Some(m) = s.get("message").filter(|m| m.is_object()) {
        out.insert("message".into(), message_to_v03(m));
    }
    Value::Object(out)
}

/// A 1.0 artifact as a 0.3 one.
pub fn artifact_to_v03(a: &Value) -> Value {
    let mut out = obj(a);
    out.insert(
        "parts".into(),
        map_array(a.get("parts"), part_to_v03).unwrap_or_else(|| json!([])),
    );
    out.entry("artifactId").or_insert_with(|| json!(""));
    Value::Object(out)
}

/// A 1.0 task as a 0.3 task.
pub fn task_to_v03(t: &Value) -> Value {
    let mut out = obj(t);
    out.remove("tenant");
    out.insert("kind".into(), json!("task"));
    out.entry("contextId").or_insert_with(|| json!(""));
    out.entry("id").or_insert_with(|| json!(""));
    out.insert(
        "status".into(),
        status_to_v03(t.get("status").unwrap_or(&json!({}))),
    );
    if let Some(a) = map_array(t.get("artifacts"), artifact_to_v03) {
        out.insert("artifacts".into(), a);
    }
    if let Some(h) = map_array(t.get("history"), message_to_v03) {
        out.insert("history".into(), h);
    }
    Value::Object(out)
}

/// A 1.0 `SendMessage` result (`{"task"}` / `{"message"}`) as the bare 0.3 object.
pub fn send_result_to_v03(r: &Value) -> Value {
    if let Some(t) = r.get("task") {
        task_to_v03(t)
    } else if let Some(m) = r.get("message") {
        message_to_v03(m)
    } else {
        r.clone()
    }
}

/// A 1.0 `StreamResponse` as the bare 0.3 event.
pub fn stream_event_to_v03(e: &Value) -> Value {
    if let Some(u) = e.get("statusUpdate") {
        let mut out = obj(u);
        let state = state_str(u.get("status").and_then(|s| s.get("state")));
        out.insert("kind".into(), json!("status-update"));
        out.insert(
            "status".into(),
            status_to_v03(u.get("status").unwrap_or(&json!({}))),
        );
        out.insert(
            "final".into(),
            json!(state.is_terminal() || state.is_interrupted()),
        );
        out.entry("taskId").or_insert_with(|| json!(""));
        out.entry("contextId").or_insert_with(|| json!(""));
        Value::Object(out)
    } else if let Some(u) = e.get("artifactUpdate") {
        let mut out = obj(u);
        out.insert("kind".into(), json!("artifact-update"));
        out.insert(
            "artifact".into(),
            artifact_to_v03(u.get("artifact").unwrap_or(&json!({}))),
        );
        out.entry("taskId").or_insert_with(|| json!(""));
        out.entry("contextId").or_insert_with(|| json!(""));
        Value::Object(out)
    } else {
        send_result_to_v03(e)
    }
}

/// A 1.0 `ListTasks` result with its tasks in 0.3 shape.
pub fn list_result_to_v03(r: &Value) -> Value {
    let mut out = obj(r);
    if let Some(t) = map_array(r.get("tasks"), task_to_v03) {
        out.insert("tasks".into(), t);
    }
    Value::Object(out)
}

/// A 1.0 result of `method` (a 1.0 method name) in 0.3 shape.
pub fn result_to_v03(method_v1: &str, result: &Value) -> Value {
    match method_v1 {
        method::SEND_MESSAGE => send_result_to_v03(result),
        method::GET_TASK | method::CANCEL_TASK => task_to_v03(result),
        method::LIST_TASKS => list_result_to_v03(result),
        method::SEND_STREAMING_MESSAGE | method::SUBSCRIBE_TO_TASK => stream_event_to_v03(result),
        _ => result.clone(),
    }
}

fn push_config_to_v03(c: &Value) -> Value {
    let mut out = obj(c);
    out.remove("taskId");
    out.remove("tenant");
    if let Some(a) = c.get("authentication") {
        let scheme = a.get("scheme").cloned().unwrap_or_else(|| json!(""));
        let mut auth = Obj::new();
        auth.insert("schemes".into(), json!([scheme]));
        if let Some(cr) = a.get("credentials") {
            auth.insert("credentials".into(), cr.clone());
        }
        out.insert("authentication".into(), Value::Object(auth));
    }
    Value::Object(out)
}

/// A 1.0 request (method name and params) as the 0.3 request a 0.3 agent expects.
pub fn request_to_v03(method_v1: &str, params: &Value) -> (&'static str, Value) {
    use method::v03;
    let mut p = obj(params);
    p.remove("tenant");
    let name = match method_v1 {
        method::SEND_MESSAGE | method::SEND_STREAMING_MESSAGE => {
            if let Some(m) = params.get("message") {
                p.insert("message".into(), message_to_v03(m));
            }
            if let Some(c) = params.get("configuration").filter(|c| c.is_object()) {
                let mut conf = obj(c);
                let immediate = conf
                    .remove("returnImmediately")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false);
                conf.insert("blocking".into(), json!(!immediate));
                if let Some(push) = conf.remove("taskPushNotificationConfig") {
                    conf.insert("pushNotificationConfig".into(), push_config_to_v03(&push));
                }
                p.insert("configuration".into(), Value::Object(conf));
            }
            if method_v1 == method::SEND_MESSAGE {
                v03::SEND_MESSAGE
            } else {
                v03::SEND_STREAMING_MESSAGE
            }
        }
        method::GET_TASK => v03::GET_TASK,
        method::CANCEL_TASK => v03::CANCEL_TASK,
        method::SUBSCRIBE_TO_TASK => v03::RESUBSCRIBE,
        method::LIST_TASKS => {
            if let Some(s) = params.get("status") {
                p.insert("status".into(), json!(state_to_v03(state_str(Some(s)))));
            }
            v03::LIST_TASKS
        }
        method::CREATE_TASK_PUSH_NOTIFICATION_CONFIG => v03::SET_PUSH_CONFIG,
        method::GET_TASK_PUSH_NOTIFICATION_CONFIG => v03::GET_PUSH_CONFIG,
        method::LIST_TASK_PUSH_NOTIFICATION_CONFIGS => v03::LIST_PUSH_CONFIGS,
        method::DELETE_TASK_PUSH_NOTIFICATION_CONFIG => v03::DELETE_PUSH_CONFIG,
        _ => v03::GET_EXTENDED_CARD,
    };
    (name, Value::Object(p))
}

/// Adds 0.3's connection fields to a served 1.0 card (whose interface URLs are absolute by
/// now), so one card is valid for both versions: a 0.3 JSON-RPC interface beside each 1.0
/// one at the same URL, and `url`, `preferredTransport`, `protocolVersion`,
/// `additionalInterfaces`, `supportsAuthenticatedExtendedCard` at the top.
pub fn card_add_v03(card: &mut Value) {
    let Some(c) = card.as_object_mut() else {
        return;
    };
    let ifaces: Vec<Value> = c
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut all = Vec::with_capacity(ifaces.len() * 2);
    let mut extra = Vec::new();
    let mut main: Option<(Value, Value)> = None;
    for i in &ifaces {
        all.push(i.clone());
        let url = i.get("url").cloned().unwrap_or_else(|| json!(""));
        let binding = i
            .get("protocolBinding")
            .cloned()
            .unwrap_or_else(|| json!(""));
        let v1 = i
            .get("protocolVersion")
            .and_then(Value::as_str)
            .is_some_and(crate::version::is_supported);
        if v1 {
            let mut legacy = obj(i);
            legacy.insert("protocolVersion".into(), json!(V0_3_CARD_VERSION));
            let legacy = Value::Object(legacy);
            if !ifaces.contains(&legacy) {
                all.push(legacy);
            }
        }
        if main.is_none() {
            main = Some((url.clone(), binding.clone()));
        }
        let entry = json!({"url": url, "transport": binding});
        if !extra.contains(&entry) {
            extra.push(entry);
        }
    }
    c.insert("supportedInterfaces".into(), Value::Array(all));
    if let Some((url, transport)) = main {
        c.insert("url".into(), url);
        c.insert("preferredTransport".into(), transport);
        c.insert("additionalInterfaces".into(), Value::Array(extra));
    }
    c.insert("protocolVersion".into(), json!(V0_3_CARD_VERSION));
    let extended = c
        .get("capabilities")
        .and_then(|cap| cap.get("extendedAgentCard"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    c.insert("supportsAuthenticatedExtendedCard".into(), json!(extended));
    add_v03_security(c);
}

/// The 1.0 one-key scheme objects, by their 0.3 `type`.
const SCHEME_KINDS: [(&str, &str); 5] = [
    ("apiKeySecurityScheme", "apiKey"),
    ("httpAuthSecurityScheme", "http"),
    ("oauth2SecurityScheme", "oauth2"),
    ("openIdConnectSecurityScheme", "openIdConnect"),
    ("mtlsSecurityScheme", "mutualTLS"),
];

/// Writes 0.3's security beside 1.0's, so a 0.3 client can read (and meet) it: each
/// `securitySchemes` entry also gets the OpenAPI-style fields 0.3 reads (`type`, `in` for an
/// API key's location, the rest as they are; 1.0 readers ignore them, and 0.3 readers the
/// one-key object), and `securityRequirements` (card and skills) is also written as 0.3's
/// `security` (`[{name: [scopes]}]`).
fn add_v03_security(c: &mut Obj) {
    if let Some(Value::Object(schemes)) = c.get_mut("securitySchemes") {
        for scheme in schemes.values_mut() {
            let Some(s) = scheme.as_object_mut() else {
                continue;
            };
            let Some((key, kind)) = SCHEME_KINDS.iter().find(|(k, _)| s.contains_key(*k)) else {
                continue;
            };
            let mut flat = obj(&s[*key]);
            if let Some(loc) = flat.remove("location") {
                flat.insert("in".into(), loc);
            }
            flat.insert("type".into(), json!(kind));
            for (k, v) in flat {
                s.entry(k).or_insert(v);
            }
        }
    }
    if let Some(req) = c.get("securityRequirements") {
        let sec = requirements_to_v03(req);
        c.entry("security").or_insert(sec);
    }
    if let Some(Value::Array(skills)) = c.get_mut("skills") {
        for skill in skills.iter_mut() {
            if let Some(s) = skill.as_object_mut()
                && let Some(req) = s.get("securityRequirements")
            {
                let sec = requirements_to_v03(req);
                s.entry("security").or_insert(sec);
            }
        }
    }
}

/// 1.0's `[{"schemes": {name: {"list": [scopes]}}}]` as 0.3's `[{name: [scopes]}]`.
fn requirements_to_v03(req: &Value) -> Value {
    let list = req.as_array().cloned().unwrap_or_default();
    Value::Array(
        list.iter()
            .map(|r| {
                let out: Obj = r
                    .get("schemes")
                    .map(obj)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, scopes)| {
                        let scopes = scopes.get("list").cloned().unwrap_or_else(|| json!([]));
                        (name, scopes)
                    })
                    .collect();
                Value::Object(out)
            })
            .collect(),
    )
}

// ---------------------------------------------------------------------------------------
// 0.3 → 1.0

/// A 0.3 part (or an already-1.0 one) in 1.0 shape.
pub fn part_from_v03(p: &Value) -> Value {
    let mut out = obj(p);
    let kind = out.remove("kind");
    if let Some(Value::Object(file)) = out.remove("file") {
        if let Some(b) = file.get("bytes") {
            out.insert("raw".into(), b.clone());
        }
        if let Some(u) = file.get("uri") {
            out.insert("url".into(), u.clone());
        }
        if let Some(n) = file.get("name").filter(|n| !n.is_null()) {
            out.insert("filename".into(), n.clone());
        }
        if let Some(m) = file.get("mimeType").filter(|m| !m.is_null()) {
            out.insert("mediaType".into(), m.clone());
        }
    } else if kind.as_ref().and_then(Value::as_str) == Some("data") && !out.contains_key("data") {
        out.insert("data".into(), json!({}));
    }
    Value::Object(out)
}

/// A 0.3 message in 1.0 shape.
pub fn message_from_v03(m: &Value) -> Value {
    let mut out = obj(m);
    out.remove("kind");
    if let Some(r) = m.get("role") {
        out.insert("role".into(), json!(role_str(Some(r)).as_wire()));
    }
    if let Some(p) = map_array(m.get("parts"), part_from_v03) {
        out.insert("parts".into(), p);
    }
    Value::Object(out)
}

/// A 0.3 status in 1.0 shape.
pub fn status_from_v03(s: &Value) -> Value {
    let mut out = obj(s);
    if let Some(st) = s.get("state") {
        out.insert("state".into(), json!(state_str(Some(st)).as_wire()));
    }
    if let Some(m) = s.get("message").filter(|m| m.is_object()) {
        out.insert("message".into(), message_from_v03(m));
    }
    Value::Object(out)
}

/// A 0.3 artifact in 1.0 shape.
pub fn artifact_from_v03(a: &Value) -> Value {
    let mut out = obj(a);
    if let Some(p) = map_array(a.get("parts"), part_from_v03) {
        out.insert("parts".into(), p);
    }
    Value::Object(out)
}

/// A 0.3 task in 1.0 shape.
pub fn task_from_v03(t: &Value) -> Value {
    let mut out = obj(t);
    out.remove("kind");
    if let Some(s) = t.get("status").filter(|s| s.is_object()) {
        out.insert("status".into(), status_from_v03(s));
    }
    if let Some(a) = map_array(t.get("artifacts"), artifact_from_v03) {
        out.insert("artifacts".into(), a);
    }
    if let Some(h) = map_array(t.get("history"), message_from_v03) {
        out.insert("history".into(), h);
    }
    Value::Object(out)
}

fn kind_of(v: &Value) -> Option<&str> {
    v.get("kind").and_then(Value::as_str)
}

/// A 0.3 `message/send` result (a bare Task or Message) as the 1.0 `{"task"}`/`{"message"}`.
pub fn send_result_from_v03(r: &Value) -> Value {
    match kind_of(r) {
        Some("task") => json!({ "task": task_from_v03(r) }),
        Some("message") => json!({ "message": message_from_v03(r) }),
        _ if r.get("task").is_some() || r.get("message").is_some() => r.clone(),
        _ if r.get("status").is_some() => json!({ "task": task_from_v03(r) }),
        _ if r.get("role").is_some() || r.get("parts").is_some() => {
            json!({ "message": message_from_v03(r) })
        }
        _ => r.clone(),
    }
}

/// A 0.3 stream event as a 1.0 `StreamResponse`.
pub fn stream_event_from_v03(e: &Value) -> Value {
    match kind_of(e) {
        Some("status-update") => {
            let mut u = obj(e);
            u.remove("kind");
            u.remove("final");
            if let Some(s) = e.get("status") {
                u.insert("status".into(), status_from_v03(s));
            }
            json!({ "statusUpdate": u })
        }
        Some("artifact-update") => {
            let mut u = obj(e);
            u.remove("kind");
            if let Some(a) = e.get("artifact") {
                u.insert("artifact".into(), artifact_from_v03(a));
            }
            json!({ "artifactUpdate": u })
        }
        _ => send_result_from_v03(e),
    }
}

/// A 0.3 result of `method_v1` (the 1.0 name of the call) in 1.0 shape.
pub fn result_from_v03(method_v1: &str, result: &Value) -> Value {
    match method_v1 {
        method::SEND_MESSAGE => send_result_from_v03(result),
        method::GET_TASK | method::CANCEL_TASK => task_from_v03(result),
        method::LIST_TASKS => {
            let mut out = obj(result);
            if let Some(t) = map_array(result.get("tasks"), task_from_v03) {
                out.insert("tasks".into(), t);
            }
            Value::Object(out)
        }
        method::SEND_STREAMING_MESSAGE | method::SUBSCRIBE_TO_TASK => stream_event_from_v03(result),
        _ => result.clone(),
    }
}

/// The 1.0 name of a 0.3 method.
pub fn method_from_v03(name: &str) -> Option<&'static str> {
    use method::v03;
    Some(match name {
        v03::SEND_MESSAGE => method::SEND_MESSAGE,
        v03::SEND_STREAMING_MESSAGE => method::SEND_STREAMING_MESSAGE,
        v03::GET_TASK => method::GET_TASK,
        v03::LIST_TASKS => method::LIST_TASKS,
        v03::CANCEL_TASK => method::CANCEL_TASK,
        v03::RESUBSCRIBE => method::SUBSCRIBE_TO_TASK,
        v03::SET_PUSH_CONFIG => method::CREATE_TASK_PUSH_NOTIFICATION_CONFIG,
        v03::GET_PUSH_CONFIG => method::GET_TASK_PUSH_NOTIFICATION_CONFIG,
        v03::LIST_PUSH_CONFIGS => method::LIST_TASK_PUSH_NOTIFICATION_CONFIGS,
        v03::DELETE_PUSH_CONFIG => method::DELETE_TASK_PUSH_NOTIFICATION_CONFIG,
        v03::GET_EXTENDED_CARD => method::GET_EXTENDED_AGENT_CARD,
        _ => return None,
    })
}

fn push_config_from_v03(c: &Value) -> Value {
    let mut out = obj(c);
    if let Some(a) = c.get("authentication") {
        let scheme = a
            .get("schemes")
            .and_then(Value::as_array)
            .and_then(|s| s.first())
            .cloned()
            .unwrap_or_else(|| json!(""));
        let mut auth = Obj::new();
        auth.insert("scheme".into(), scheme);
        if let Some(cr) = a.get("credentials") {
            auth.insert("credentials".into(), cr.clone());
        }
        out.insert("authentication".into(), Value::Object(auth));
    }
    Value::Object(out)
}

/// The params of a 0.3 request (by its 1.0 method name) in 1.0 shape. Params that are not an
/// object are passed through for the typed reader to reject.
pub fn params_from_v03(method_v1: &str, params: &Value) -> Value {
    let Some(src) = params.as_object() else {
        return params.clone();
    };
    let mut p = src.clone();
    match method_v1 {
        method::SEND_MESSAGE | method::SEND_STREAMING_MESSAGE => {
            if let Some(m) = src.get("message").filter(|m| m.is_object()) {
                p.insert("message".into(), message_from_v03(m));
            }
            if let Some(c) = src.get("configuration").filter(|c| c.is_object()) {
                let mut conf = obj(c);
                let blocking = conf.remove("blocking");
                if blocking.as_ref().and_then(Value::as_bool) == Some(false) {
                    conf.insert("returnImmediately".into(), json!(true));
                }
                if let Some(push) = conf.remove("pushNotificationConfig")
                    && !push.is_null()
                {
                    conf.insert(
                        "taskPushNotificationConfig".into(),
                        push_config_from_v03(&push),
                    );
                }
                p.insert("configuration".into(), Value::Object(conf));
            }
        }
        // 1.0's GetTask and SubscribeToTask carry no metadata.
        method::GET_TASK | method::SUBSCRIBE_TO_TASK => {
            p.remove("metadata");
        }
        method::LIST_TASKS => {
            if let Some(Value::String(s)) = src.get("status") {
                let state = TaskState::from_wire(s);
                if state != TaskState::Unspecified {
                    p.insert("status".into(), json!(state.as_wire()));
                }
            }
        }
        _ => {}
    }
    Value::Object(p)
}

/// A card in 1.0 shape, whichever version it was written for: a 0.3 card's `url`,
/// `preferredTransport`, `protocolVersion` and `additionalInterfaces` become
/// `supportedInterfaces` (when it has none), `security` becomes `securityRequirements`,
/// OpenAPI-style `securitySchemes` become 1.0's one-key objects, and
/// `supportsAuthenticatedExtendedCard` becomes `capabilities.extendedAgentCard`.
pub fn card_from_v03(card: &Value) -> Value {
    let mut c = obj(card);
    let has_ifaces = c
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let url = c.remove("url");
    let transport = c.remove("preferredTransport");
    let version = c.remove("protocolVersion");
    let additional = c.remove("additionalInterfaces");
    if !has_ifaces && let Some(url) = url.filter(Value::is_string) {
        let version = version
            .filter(Value::is_string)
            .unwrap_or_else(|| json!(V0_3_CARD_VERSION));
        let mut ifaces = vec![json!({
            "url": url,
            "protocolBinding": transport.filter(Value::is_string).unwrap_or_else(|| json!("JSONRPC")),
            "protocolVersion": version,
        })];
        for i in additional
            .as_ref()
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let entry = json!({
                "url": i.get("url").cloned().unwrap_or_else(|| json!("")),
                "protocolBinding": i.get("transport").cloned().unwrap_or_else(|| json!("")),
                "protocolVersion": version,
            });
            if !ifaces.contains(&entry) {
                ifaces.push(entry);
            }
        }
        c.insert("supportedInterfaces".into(), Value::Array(ifaces));
    }
    if let Some(ext) = c.remove("supportsAuthenticatedExtendedCard")
        && ext.as_bool() == Some(true)
    {
        let caps = c.entry("capabilities").or_insert_with(|| json!({}));
        if let Some(caps) = caps.as_object_mut() {
            caps.entry("extendedAgentCard").or_insert(json!(true));
        }
    }
    if let Some(sec) = c.remove("security")
        && !c.contains_key("securityRequirements")
    {
        c.insert("securityRequirements".into(), requirements_from_v03(&sec));
    }
    if let Some(Value::Array(skills)) = c.get_mut("skills") {
        for s in skills.iter_mut() {
            if let Some(s) = s.as_object_mut()
                && let Some(sec) = s.remove("security")
                && !s.contains_key("securityRequirements")
            {
                s.insert("securityRequirements".into(), requirements_from_v03(&sec));
            }
        }
    }
    if let Some(Value::Object(schemes)) = c.get_mut("securitySchemes") {
        for scheme in schemes.values_mut() {
            *scheme = scheme_from_v03(scheme);
        }
    }
    Value::Object(c)
}

fn requirements_from_v03(sec: &Value) -> Value {
    let list = sec.as_array().cloned().unwrap_or_default();
    Value::Array(
        list.iter()
            .map(|req| {
                let schemes: Obj = obj(req)
                    .into_iter()
                    .map(|(name, scopes)| (name, json!({ "list": scopes })))
                    .collect();
                json!({ "schemes": schemes })
            })
            .collect(),
    )
}

fn scheme_from_v03(scheme: &Value) -> Value {
    let mut s = obj(scheme);
    // A scheme written in both forms (as our cards are): the 1.0 object is the scheme.
    if let Some((key, _)) = SCHEME_KINDS.iter().find(|(k, _)| s.contains_key(*k)) {
        let inner = s.remove(*key).unwrap_or_else(|| json!({}));
        return json!({ *key: inner });
    }
    let Some(Value::String(kind)) = s.remove("type") else {
        return scheme.clone();
    };
    let key = match kind.as_str() {
        "apiKey" => {
            if let Some(loc) = s.remove("in") {
                s.insert("location".into(), loc);
            }
            "apiKeySecurityScheme"
        }
        "http" => "httpAuthSecurityScheme",
        "oauth2" => "oauth2SecurityScheme",
        "openIdConnect" => "openIdConnectSecurityScheme",
        "mutualTLS" => "mtlsSecurityScheme",
        _ => return scheme.clone(),
    };
    json!({ key: s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_part_both_ways() {
        let v1 = json!({"raw": "eDE=", "filename": "a.csv", "mediaType": "text/csv"});
        let v03 = part_to_v03(&v1);
        assert_eq!(
            v03,
            json!({"kind": "file", "file": {"bytes": "eDE=", "name": "a.csv", "mimeType": "text/csv"}})
        );
        assert_eq!(part_from_v03(&v03), v1);
    }

    #[test]
    fn status_update_gets_final() {
        let e = json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_INPUT_REQUIRED"}}});
        let v = stream_event_to_v03(&e);
        assert_eq!(v["kind"], "status-update");
        assert_eq!(v["final"], true);
        assert_eq!(v["status"]["state"], "input-required");
        assert_eq!(stream_event_from_v03(&v), e);
    }

    #[test]
    fn legacy_card_becomes_v1() {
        let card = json!({
            "name": "x", "url": "http://a/rpc", "protocolVersion": "0.3.0",
            "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": "http://a/rpc", "transport": "JSONRPC"}, {"url": "http://a/grpc", "transport": "GRPC"}],
            "security": [{"bearer": []}],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}, "key": {"type": "apiKey", "in": "header", "name": "X-Key"}},
            "supportsAuthenticatedExtendedCard": true,
        });
        let v = card_from_v03(&card);
        assert_eq!(
            v["supportedInterfaces"],
            json!([
                {"url": "http://a/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0"},
                {"url": "http://a/grpc", "protocolBinding": "GRPC", "protocolVersion": "0.3.0"},
            ])
        );
        assert_eq!(
            v["securityRequirements"],
            json!([{"schemes": {"bearer": {"list": []}}}])
        );
        assert_eq!(
            v["securitySchemes"]["bearer"],
            json!({"httpAuthSecurityScheme": {"scheme": "bearer"}})
        );
        assert_eq!(
            v["securitySchemes"]["key"],
            json!({"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}})
        );
        assert_eq!(v["capabilities"]["extendedAgentCard"], true);
        let parsed: crate::AgentCard = serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.security_schemes.len(), 2);
    }
}
