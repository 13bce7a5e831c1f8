//! Golden files of every wire object (insta snapshots in `tests/snapshots/`), round trips,
//! lenient reading, and a strict ProtoJSON check of every golden object by the official SDK.

// Test harness: runs the official Python SDK (clippy.toml bans spawning elsewhere).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use a2a_protocol::card::{
    AgentCardSignature, AgentExtension, ApiKeySecurityScheme, HttpAuthSecurityScheme,
    MutualTlsSecurityScheme, OAuth2SecurityScheme, OAuthFlow, OAuthFlows,
    OpenIdConnectSecurityScheme, StringList,
};
use a2a_protocol::jsonrpc::{error_body, request_body, success_body};
use a2a_protocol::methods::{AuthenticationInfo, TaskPushNotificationConfig};
use a2a_protocol::{
    A2aError, AgentCapabilities, AgentCard, AgentInterface, AgentProvider, AgentSkill, Artifact,
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, Message, Metadata,
    Part, Role, SecurityRequirement, SecurityScheme, SendMessageConfiguration, SendMessageRequest,
    SendMessageResponse, Task, TaskState, TaskStatus,
};
use chrono::{DateTime, TimeZone, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn ts() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap() + chrono::Duration::milliseconds(678)
}

fn meta(k: &str, v: Value) -> Metadata {
    let mut m = Metadata::new();
    m.insert(k.to_owned(), v);
    m
}

fn user_message() -> Message {
    Message {
        message_id: "msg-1".into(),
        context_id: Some("ctx-1".into()),
        task_id: Some("task-1".into()),
        role: Role::User,
        parts: vec![
            Part::text("Implement the solver."),
            Part::data(
                json!({"task_id": "scicode-1", "expected_outputs": ["solver.py"], "constraints": {"timeout_s": 600}}),
            ),
        ],
        metadata: Some(meta("source", json!("green-agent"))),
        extensions: vec!["https://example.org/ext/v1".into()],
        reference_task_ids: vec!["task-0".into()],
    }
}

fn parts() -> Vec<(&'static str, Part)> {
    vec![
        (
            "part_text",
            Part::text("hello").with_media_type("text/plain"),
        ),
        (
            "part_raw",
            Part::raw(
                b"x,y\n1,2\n".to_vec(),
                Some("results.csv".into()),
                Some("text/csv".into()),
            ),
        ),
        (
            "part_url",
            Part::url(
                "https://files.example.org/big.bin",
                Some("big.bin".into()),
                Some("application/octet-stream".into()),
            ),
        ),
        (
            "part_data",
            Part::data(json!({"rows": 2, "ok": true, "list": [1, "a", null]}))
                .with_metadata(meta("note", json!("x"))),
        ),
    ]
}

fn task() -> Task {
    let mut status_msg = Message::agent_text("done");
    status_msg.message_id = "msg-2".into();
    Task {
        id: "task-1".into(),
        context_id: "ctx-1".into(),
        status: TaskStatus {
            state: TaskState::Completed,
            message: Some(status_msg),
            timestamp: Some(ts()),
        },
        artifacts: vec![
            Artifact {
                artifact_id: "art-1".into(),
                name: Some("answer".into()),
                description: Some("the final answer".into()),
                parts: vec![Part::text("42")],
                metadata: None,
                extensions: Vec::new(),
            },
            Artifact {
                artifact_id: "art-2".into(),
                name: Some("results.csv".into()),
                description: None,
                parts: vec![Part::raw(
                    b"x,y\n1,2\n".to_vec(),
                    Some("results.csv".into()),
                    Some("text/csv".into()),
                )],
                metadata: Some(meta("path", json!("out/results.csv"))),
                extensions: Vec::new(),
            },
        ],
        history: vec![user_message()],
        metadata: Some(meta("trial", json!(3))),
    }
}

fn scopes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn card() -> AgentCard {
    let mut schemes = BTreeMap::new();
    schemes.insert(
        "apiKey".to_owned(),
        SecurityScheme::ApiKeySecurityScheme(ApiKeySecurityScheme {
            description: Some("key in a header".into()),
            location: "header".into(),
            name: "X-API-Key".into(),
        }),
    );
    schemes.insert(
        "bearer".to_owned(),
        SecurityScheme::HttpAuthSecurityScheme(HttpAuthSecurityScheme {
            description: None,
            scheme: "Bearer".into(),
            bearer_format: Some("JWT".into()),
        }),
    );
    schemes.insert(
        "oauth".to_owned(),
        SecurityScheme::Oauth2SecurityScheme(OAuth2SecurityScheme {
            description: None,
            flows: OAuthFlows::AuthorizationCode(OAuthFlow {
                authorization_url: Some("https://auth.example.org/authorize".into()),
                token_url: Some("https://auth.example.org/token".into()),
                scopes: scopes(&[("read", "read tasks")]),
                pkce_required: true,
                ..OAuthFlow::default()
            }),
            oauth2_metadata_url: Some(
                "https://auth.example.org/.well-known/oauth-authorization-server".into(),
            ),
        }),
    );
    schemes.insert(
        "machine".to_owned(),
        SecurityScheme::Oauth2SecurityScheme(OAuth2SecurityScheme {
            description: None,
            flows: OAuthFlows::ClientCredentials(OAuthFlow {
                token_url: Some("https://auth.example.org/token".into()),
                scopes: scopes(&[("run", "run tasks")]),
                ..OAuthFlow::default()
            }),
            oauth2_metadata_url: None,
        }),
    );
    schemes.insert(
        "device".to_owned(),
        SecurityScheme::Oauth2SecurityScheme(OAuth2SecurityScheme {
            description: None,
            flows: OAuthFlows::DeviceCode(OAuthFlow {
                device_authorization_url: Some("https://auth.example.org/device".into()),
                token_url: Some("https://auth.example.org/token".into()),
                scopes: scopes(&[]),
                ..OAuthFlow::default()
            }),
            oauth2_metadata_url: None,
        }),
    );
    schemes.insert(
        "oidc".to_owned(),
        SecurityScheme::OpenIdConnectSecurityScheme(OpenIdConnectSecurityScheme {
            description: None,
            open_id_connect_url: "https://auth.example.org/.well-known/openid-configuration".into(),
        }),
    );
    schemes.insert(
        "mtls".to_owned(),
        SecurityScheme::MtlsSecurityScheme(MutualTlsSecurityScheme {
            description: Some("client certificate".into()),
        }),
    );
    let mut req = BTreeMap::new();
    req.insert("bearer".to_owned(), StringList::default());
    req.insert(
        "oauth".to_owned(),
        StringList {
            list: vec!["read".into()],
        },
    );
    let mut skill = AgentSkill::new(
        "solve",
        "Solve",
        "Solves research coding tasks",
        vec!["science".into(), "code".into()],
    );
    skill.examples = vec!["Implement eq. 3 of the paper".into()];
    skill.input_modes = vec!["text/plain".into(), "application/json".into()];
    skill.output_modes = vec!["text/plain".into()];
    skill.security_requirements = vec![SecurityRequirement {
        schemes: req.clone(),
    }];
    AgentCard {
        name: "white-agent".into(),
        description: "A coding agent under test".into(),
        supported_interfaces: vec![
            AgentInterface::jsonrpc("http://10.0.0.2:8700/"),
            AgentInterface {
                url: "http://10.0.0.2:8700/t1".into(),
                protocol_binding: "JSONRPC".into(),
                tenant: Some("t1".into()),
                protocol_version: "1.0".into(),
            },
        ],
        provider: Some(AgentProvider {
            url: "https://example.org".into(),
            organization: "Example Lab".into(),
        }),
        version: "1.2.3".into(),
        documentation_url: Some("https://example.org/docs".into()),
        capabilities: AgentCapabilities {
            streaming: Some(false),
            push_notifications: Some(false),
            extensions: vec![AgentExtension {
                uri: "https://example.org/ext/v1".into(),
                description: Some("an extension".into()),
                required: true,
                params: Some(meta("level", json!(2))),
            }],
            extended_agent_card: Some(false),
        },
        security_schemes: schemes,
        security_requirements: vec![SecurityRequirement { schemes: req }],
        default_input_modes: vec!["text/plain".into()],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills: vec![skill],
        signatures: vec![AgentCardSignature {
            protected: "eyJhbGciOiJFUzI1NiJ9".into(),
            signature: "c2lnbmF0dXJl".into(),
            header: Some(meta("kid", json!("key-1"))),
        }],
        icon_url: Some("https://example.org/icon.png".into()),
    }
}

fn push_config() -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        tenant: None,
        id: Some("cfg-1".into()),
        task_id: Some("task-1".into()),
        url: "https://client.example.org/notify".into(),
        token: Some("opaque".into()),
        authentication: Some(AuthenticationInfo {
            scheme: "Bearer".into(),
            credentials: Some("secret".into()),
        }),
    }
}

fn send_request() -> SendMessageRequest {
    SendMessageRequest {
        tenant: None,
        message: user_message(),
        configuration: Some(SendMessageConfiguration {
            accepted_output_modes: vec!["text/plain".into(), "application/json".into()],
            task_push_notification_config: Some(push_config()),
            history_length: Some(5),
            return_immediately: true,
        }),
        metadata: Some(meta("run", json!("r-1"))),
    }
}

fn list_request() -> ListTasksRequest {
    ListTasksRequest {
        tenant: Some("t1".into()),
        context_id: Some("ctx-1".into()),
        status: Some(TaskState::Working),
        page_size: Some(20),
        page_token: Some("page-2".into()),
        history_length: Some(0),
        status_timestamp_after: Some(ts()),
        include_artifacts: Some(true),
    }
}

fn list_response() -> ListTasksResponse {
    ListTasksResponse {
        tasks: vec![task()],
        next_page_token: "page-3".into(),
        page_size: 20,
        total_size: 41,
    }
}

fn every_error() -> Vec<A2aError> {
    vec![
        A2aError::Parse("body is not valid JSON".into()),
        A2aError::InvalidRequest("`jsonrpc` must be exactly \"2.0\"".into()),
        A2aError::MethodNotFound("unknown method".into()),
        A2aError::InvalidParams("missing field `id`".into()),
        A2aError::Internal("the agent failed".into()),
        A2aError::TaskNotFound("no task \"t\"".into()),
        A2aError::TaskNotCancelable("task \"t\" is already TASK_STATE_COMPLETED".into()),
        A2aError::PushNotificationNotSupported("push notifications are not supported".into()),
        A2aError::UnsupportedOperation("streaming is not supported".into()),
        A2aError::ContentTypeNotSupported("image/png".into()),
        A2aError::InvalidAgentResponse("bad".into()),
        A2aError::ExtendedAgentCardNotConfigured("no extended card".into()),
        A2aError::ExtensionSupportRequired("https://example.org/ext/v1".into()),
        A2aError::VersionNotSupported("A2A version \"0.3\" is not supported".into()),
    ]
}

/// Snapshots `value`, checks it reads back to itself, and returns its JSON.
fn golden<T>(name: &str, value: &T) -> Value
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_value(value).unwrap();
    insta::assert_json_snapshot!(name, json);
    let back: T = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(&back, value, "{name} does not round-trip");
    json
}

/// Every golden object with the proto message type the SDK must parse it as.
fn all_goldens() -> Vec<(String, &'static str, Value)> {
    let mut out = Vec::new();
    for (name, part) in parts() {
        out.push((name.to_owned(), "Part", golden(name, &part)));
    }
    out.push((
        "message".into(),
        "Message",
        golden("message", &user_message()),
    ));
    out.push((
        "task_status".into(),
        "TaskStatus",
        golden("task_status", &task().status),
    ));
    out.push((
        "artifact".into(),
        "Artifact",
        golden("artifact", &task().artifacts[1]),
    ));
    out.push(("task".into(), "Task", golden("task", &task())));
    out.push((
        "agent_card".into(),
        "AgentCard",
        golden("agent_card", &card()),
    ));
    out.push((
        "agent_interface".into(),
        "AgentInterface",
        golden(
            "agent_interface",
            &AgentInterface::jsonrpc("http://127.0.0.1:8700/"),
        ),
    ));
    out.push((
        "agent_card_minimal".into(),
        "AgentCard",
        golden(
            "agent_card_minimal",
            &AgentCard::new("a", "b", "0.1.0", "http://127.0.0.1:8700/"),
        ),
    ));
    out.push((
        "push_config".into(),
        "TaskPushNotificationConfig",
        golden("push_config", &push_config()),
    ));
    out.push((
        "send_message_request".into(),
        "SendMessageRequest",
        golden("send_message_request", &send_request()),
    ));
    out.push((
        "send_message_response_task".into(),
        "SendMessageResponse",
        golden(
            "send_message_response_task",
            &SendMessageResponse::Task(task()),
        ),
    ));
    out.push((
        "send_message_response_message".into(),
        "SendMessageResponse",
        golden(
            "send_message_response_message",
            &SendMessageResponse::Message(user_message()),
        ),
    ));
    out.push((
        "get_task_request".into(),
        "GetTaskRequest",
        golden(
            "get_task_request",
            &GetTaskRequest {
                tenant: None,
                id: "task-1".into(),
                history_length: Some(2),
            },
        ),
    ));
    out.push((
        "cancel_task_request".into(),
        "CancelTaskRequest",
        golden(
            "cancel_task_request",
            &CancelTaskRequest {
                tenant: None,
                id: "task-1".into(),
                metadata: Some(meta("reason", json!("timeout"))),
            },
        ),
    ));
    out.push((
        "list_tasks_request".into(),
        "ListTasksRequest",
        golden("list_tasks_request", &list_request()),
    ));
    out.push((
        "list_tasks_request_empty".into(),
        "ListTasksRequest",
        golden("list_tasks_request_empty", &ListTasksRequest::default()),
    ));
    out.push((
        "list_tasks_response".into(),
        "ListTasksResponse",
        golden("list_tasks_response", &list_response()),
    ));
    out
}

#[test]
fn golden_wire_objects() {
    let all = all_goldens();
    assert!(all.len() >= 20);
}

#[test]
fn golden_enums() {
    let states: Vec<_> = TaskState::ALL.iter().map(|s| json!(s)).collect();
    insta::assert_json_snapshot!("task_states", states);
    let roles: Vec<_> = Role::ALL.iter().map(|r| json!(r)).collect();
    insta::assert_json_snapshot!("roles", roles);
    for s in TaskState::ALL {
        assert_eq!(
            serde_json::from_value::<TaskState>(json!(s.as_wire())).unwrap(),
            *s
        );
        assert_eq!(
            serde_json::from_value::<TaskState>(json!(s.number())).unwrap(),
            *s
        );
    }
}

#[test]
fn golden_envelopes_and_errors() {
    let errors: Vec<Value> = every_error()
        .iter()
        .map(|e| error_body(&json!(1), e))
        .collect();
    insta::assert_json_snapshot!("error_responses", errors);
    let codes: Vec<i64> = every_error().iter().map(A2aError::code).collect();
    assert_eq!(
        codes,
        vec![
            -32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006,
            -32007, -32008, -32009
        ]
    );
    for e in every_error() {
        let obj = e.to_error_object();
        assert_eq!(A2aError::from(&obj), e);
    }
    insta::assert_json_snapshot!(
        "request_envelope",
        request_body(
            "req-1",
            "GetTask",
            serde_json::to_value(GetTaskRequest::new("task-1")).unwrap()
        )
    );
    insta::assert_json_snapshot!(
        "success_envelope",
        success_body(
            &json!("req-1"),
            serde_json::to_value(SendMessageResponse::Task(Task {
                status: TaskStatus {
                    state: TaskState::Submitted,
                    message: None,
                    timestamp: Some(ts())
                },
                ..Task::new("task-1", "ctx-1", TaskState::Submitted)
            }))
            .unwrap()
        )
    );
}

#[test]
fn reads_leniently() {
    // 0.3 enum strings, unknown fields, nulls, omitted fields, numbers as strings, 0.3 file parts.
    let t: Task = serde_json::from_value(json!({
        "kind": "task",
        "id": "t",
        "contextId": null,
        "status": {"state": "input-required", "extra": 1},
        "artifacts": [{"artifactId": "a", "parts": [
            {"kind": "text", "text": "hi"},
            {"kind": "file", "file": {"bytes": "aGk=", "name": "a.txt", "mimeType": "text/plain"}},
            {"kind": "file", "file": {"uri": "https://x/y"}},
            {"kind": "data", "data": {"k": 1}}
        ]}],
        "history": [{"messageId": "m", "role": "user", "parts": []}],
        "somethingNew": {"nested": true}
    }))
    .unwrap();
    assert_eq!(t.state(), TaskState::InputRequired);
    assert_eq!(t.context_id, "");
    assert_eq!(t.history[0].role, Role::User);
    let parts = &t.artifacts[0].parts;
    assert_eq!(parts[0].as_text(), Some("hi"));
    assert_eq!(parts[1].as_raw(), Some(&b"hi"[..]));
    assert_eq!(parts[1].filename.as_deref(), Some("a.txt"));
    assert_eq!(parts[1].media_type.as_deref(), Some("text/plain"));
    assert_eq!(parts[2].as_url(), Some("https://x/y"));
    assert_eq!(parts[3].as_data(), Some(&json!({"k": 1})));

    for (s, want) in [
        ("working", TaskState::Working),
        ("canceled", TaskState::Canceled),
        ("TASK_STATE_REJECTED", TaskState::Rejected),
        ("auth-required", TaskState::AuthRequired),
        ("who-knows", TaskState::Unspecified),
    ] {
        assert_eq!(
            serde_json::from_value::<TaskState>(json!(s)).unwrap(),
            want,
            "{s}"
        );
    }
    assert_eq!(
        serde_json::from_value::<Role>(json!("agent")).unwrap(),
        Role::Agent
    );
    assert_eq!(
        serde_json::from_value::<Role>(json!(2)).unwrap(),
        Role::Agent
    );

    let g: GetTaskRequest =
        serde_json::from_value(json!({"id": "t", "historyLength": "3"})).unwrap();
    assert_eq!(g.history_length, Some(3));
    let l: ListTasksResponse = serde_json::from_value(json!({"tasks": []})).unwrap();
    assert_eq!(l.total_size, 0);
    // URL-safe, unpadded base64 is read too.
    let p: Part = serde_json::from_value(json!({"raw": "-_8"})).unwrap();
    assert_eq!(p.as_raw(), Some(&[0xfb, 0xff][..]));
    // A bare 0.3-style task as a SendMessage result.
    let r: SendMessageResponse = serde_json::from_value(
        json!({"id": "t", "status": {"state": "submitted"}, "kind": "task"}),
    )
    .unwrap();
    assert_eq!(r.into_task().unwrap().state(), TaskState::Submitted);
}

#[test]
fn rejects_what_cannot_be_read() {
    for bad in [
        json!({}),
        json!({"text": "a", "raw": "aGk="}),
        json!({"raw": "***"}),
        json!({"file": {"bytes": "aGk=", "uri": "x"}}),
    ] {
        assert!(
            serde_json::from_value::<Part>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    assert!(
        serde_json::from_value::<SendMessageResponse>(
            json!({"task": {"id": "t"}, "message": {"messageId": "m"}})
        )
        .is_err()
    );
    assert!(
        serde_json::from_value::<GetTaskRequest>(json!({"id": "t", "historyLength": 1.5})).is_err()
    );
}

/// The official SDK parses every golden object strictly (unknown fields are errors) as its
/// proto type, and writes it back to the same JSON (modulo the SDK's number representation).
#[test]
fn sdk_parses_every_golden_strictly() {
    let python = common::venv_python();
    let items: Vec<Value> = all_goldens()
        .into_iter()
        .map(|(name, ty, json)| json!({"name": name, "type": ty, "json": json}))
        .collect();
    let mut child = Command::new(python)
        .arg(common::interop_script("proto_check.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(&items).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "proto_check failed:\n{stdout}\n{stderr}"
    );
    let report: Vec<Value> = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report.len(), items.len());
    let mut failures = Vec::new();
    for (item, r) in items.iter().zip(&report) {
        if r["ok"] != true {
            failures.push(format!("{}: {}", item["name"], r["error"]));
            continue;
        }
        if !same_json(&item["json"], &r["back"]) {
            failures.push(format!(
                "{}: SDK wrote back\n{}\nwe wrote\n{}",
                item["name"], r["back"], item["json"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// JSON equality where numbers compare as f64 (protobuf's Value stores every number as a
/// double), timestamps compare as instants, and an empty list or map equals an absent field
/// (ProtoJSON writers may omit empty repeated fields; we write required ones even when empty).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::String(x), Value::String(y)) => {
            x == y
                || matches!((DateTime::parse_from_rfc3339(x), DateTime::parse_from_rfc3339(y)), (Ok(p), Ok(q)) if p == q)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            let empty = |v: &Value| {
                matches!(v, Value::Array(a) if a.is_empty())
                    || matches!(v, Value::Object(o) if o.is_empty())
            };
            x.iter()
                .all(|(k, v)| y.get(k).map_or_else(|| empty(v), |w| same_json(v, w)))
                && y.iter().all(|(k, w)| x.contains_key(k) || empty(w))
        }
        _ => a == b,
    }
}

/// A served card carries its security in both versions' forms: the official 0.3 SDK reads
/// every scheme (by its `type`) and the requirements (`security`), the 1.0 SDK reads the
/// one-key scheme objects and `securityRequirements`, and our reader gets back exactly the
/// card's 1.0 security (1.0 → served → 1.0 is lossless).
#[test]
fn served_card_security_is_read_by_both_sdk_versions() {
    let original = card();
    let served = a2a_protocol::server::card_json(&original, Some("agent.example:8700"));
    // 0.3's form beside 1.0's.
    let schemes = served["securitySchemes"].as_object().unwrap();
    assert_eq!(schemes["bearer"]["type"], "http");
    assert_eq!(schemes["bearer"]["scheme"], "Bearer");
    assert_eq!(schemes["bearer"]["bearerFormat"], "JWT");
    assert_eq!(schemes["apiKey"]["type"], "apiKey");
    assert_eq!(schemes["apiKey"]["in"], "header");
    assert_eq!(schemes["oidc"]["type"], "openIdConnect");
    assert_eq!(schemes["mtls"]["type"], "mutualTLS");
    assert_eq!(schemes["oauth"]["type"], "oauth2");
    assert_eq!(
        schemes["oauth"]["flows"]["authorizationCode"]["tokenUrl"],
        "https://auth.example.org/token"
    );
    assert_eq!(
        served["skills"][0]["security"],
        json!([{"bearer": [], "oauth": ["read"]}])
    );
    // Our reader: the same security as the card's.
    let back: AgentCard =
        serde_json::from_value(a2a_protocol::v03::card_from_v03(&served)).unwrap();
    assert_eq!(back.security_schemes, original.security_schemes);
    assert_eq!(back.security_requirements, original.security_requirements);
    assert_eq!(
        back.skills[0].security_requirements,
        original.skills[0].security_requirements
    );
    // The official SDKs, 0.3 and 1.x, each read the card with every scheme.
    let check03 = r#"
import json, sys
from a2a.types import AgentCard
card = AgentCard.model_validate(json.load(sys.stdin))
print(json.dumps({"schemes": sorted((k, v.root.type) for k, v in (card.security_schemes or {}).items()),
                  "skill_security": card.skills[0].security}))
"#;
    let check1 = r#"
import json, sys
from google.protobuf.json_format import ParseDict
from a2a.types import AgentCard
card = ParseDict(json.load(sys.stdin), AgentCard(), ignore_unknown_fields=True)
print(json.dumps({"schemes": sorted((k, v.WhichOneof("scheme")) for k, v in card.security_schemes.items())}))
"#;
    let run = |python: std::path::PathBuf, script: &str| -> Value {
        let mut child = Command::new(python)
            .args(["-c", script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(served.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let v03 = run(common::venv03_python(), check03);
    assert_eq!(
        v03["schemes"],
        json!([
            ["apiKey", "apiKey"],
            ["bearer", "http"],
            ["device", "oauth2"],
            ["machine", "oauth2"],
            ["mtls", "mutualTLS"],
            ["oauth", "oauth2"],
            ["oidc", "openIdConnect"]
        ]),
        "{v03}"
    );
    assert_eq!(
        v03["skill_security"],
        json!([{"bearer": [], "oauth": ["read"]}])
    );
    let v1 = run(common::venv_python(), check1);
    assert_eq!(
        v1["schemes"],
        json!([
            ["apiKey", "api_key_security_scheme"],
            ["bearer", "http_auth_security_scheme"],
            ["device", "oauth2_security_scheme"],
            ["machine", "oauth2_security_scheme"],
            ["mtls", "mtls_security_scheme"],
            ["oauth", "oauth2_security_scheme"],
            ["oidc", "open_id_connect_security_scheme"]
        ]),
        "{v1}"
    );
}
