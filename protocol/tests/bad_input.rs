//! Bad input over HTTP: every case gets its JSON-RPC/A2A code with HTTP 200, promptly, and
//! the server keeps serving afterwards.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use a2a_protocol::ServerConfig;
use serde_json::{Value, json};

struct Case {
    name: &'static str,
    version: Option<&'static str>,
    body: Vec<u8>,
    code: i64,
    /// The id the error must echo (`null` when the request could not be read that far).
    id: Value,
}

fn case(
    name: &'static str,
    version: Option<&'static str>,
    body: impl Into<Vec<u8>>,
    code: i64,
    id: Value,
) -> Case {
    Case {
        name,
        version,
        body: body.into(),
        code,
        id,
    }
}

fn req(id: Value, method: &str, params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .unwrap()
}

const V1: Option<&str> = Some("1.0");
const MAX: usize = 4096;

fn cases() -> Vec<Case> {
    let good_msg =
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}});
    vec![
        case(
            "malformed JSON",
            V1,
            r#"{"jsonrpc": "2.0", "id": 1, "method": "#,
            -32700,
            Value::Null,
        ),
        case("empty body", V1, "", -32700, Value::Null),
        case(
            "deeply nested JSON",
            V1,
            "[".repeat(3000),
            -32700,
            Value::Null,
        ),
        case("not UTF-8", V1, vec![0xff, 0xfe, 0x00], -32700, Value::Null),
        case(
            "wrong jsonrpc",
            V1,
            serde_json::to_vec(
                &json!({"jsonrpc": "1.0", "id": 7, "method": "GetTask", "params": {"id": "t"}}),
            )
            .unwrap(),
            -32600,
            json!(7),
        ),
        case(
            "missing jsonrpc",
            V1,
            serde_json::to_vec(&json!({"id": 7, "method": "GetTask", "params": {"id": "t"}}))
                .unwrap(),
            -32600,
            json!(7),
        ),
        case(
            "batch",
            V1,
            serde_json::to_vec(
                &json!([{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}]),
            )
            .unwrap(),
            -32600,
            Value::Null,
        ),
        case("scalar body", V1, "42", -32600, Value::Null),
        case(
            "id is a boolean",
            V1,
            serde_json::to_vec(
                &json!({"jsonrpc": "2.0", "id": true, "method": "GetTask", "params": {"id": "t"}}),
            )
            .unwrap(),
            -32600,
            Value::Null,
        ),
        case(
            "missing method",
            V1,
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": "a"})).unwrap(),
            -32600,
            json!("a"),
        ),
        case(
            "unknown method",
            V1,
            req(json!(3), "Frobnicate", json!({})),
            -32601,
            json!(3),
        ),
        case(
            "missing version header",
            None,
            req(json!(4), "GetTask", json!({"id": "t"})),
            -32009,
            json!(4),
        ),
        case(
            "version header 0.3",
            Some("0.3"),
            req(json!(5), "SendMessage", good_msg.clone()),
            -32009,
            json!(5),
        ),
        case(
            "version header 2.0",
            Some("2.0"),
            req(json!(6), "GetTask", json!({"id": "t"})),
            -32009,
            json!(6),
        ),
        case(
            "version header garbage",
            Some("one"),
            req(json!(6), "GetTask", json!({"id": "t"})),
            -32009,
            json!(6),
        ),
        case(
            "0.3 method name",
            V1,
            req(json!(8), "tasks/get", json!({"id": "t"})),
            -32009,
            json!(8),
        ),
        case(
            "params not an object",
            V1,
            req(json!(9), "GetTask", json!(["t"])),
            -32602,
            json!(9),
        ),
        case(
            "id of wrong type",
            V1,
            req(json!(10), "GetTask", json!({"id": 5})),
            -32602,
            json!(10),
        ),
        case(
            "missing required id",
            V1,
            req(json!(11), "CancelTask", json!({})),
            -32602,
            json!(11),
        ),
        case(
            "historyLength not a number",
            V1,
            req(
                json!(12),
                "GetTask",
                json!({"id": "t", "historyLength": "many"}),
            ),
            -32602,
            json!(12),
        ),
        case(
            "missing message",
            V1,
            req(json!(13), "SendMessage", json!({})),
            -32602,
            json!(13),
        ),
        case(
            "part with two contents",
            V1,
            req(
                json!(14),
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "url": "http://x"}]}}),
            ),
            -32602,
            json!(14),
        ),
        case(
            "part with bad base64",
            V1,
            req(
                json!(15),
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "!!!"}]}}),
            ),
            -32602,
            json!(15),
        ),
        case(
            "oversized body",
            V1,
            req(
                json!(16),
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x".repeat(MAX * 2)}]}}),
            ),
            -32600,
            Value::Null,
        ),
        case(
            "unknown task id (get)",
            V1,
            req(json!(17), "GetTask", json!({"id": "no-such-task"})),
            -32001,
            json!(17),
        ),
        case(
            "unknown task id (cancel)",
            V1,
            req(json!("c"), "CancelTask", json!({"id": "no-such-task"})),
            -32001,
            json!("c"),
        ),
        case(
            "streaming not supported",
            V1,
            req(json!(18), "SendStreamingMessage", good_msg.clone()),
            -32004,
            json!(18),
        ),
        case(
            "push notifications not supported",
            V1,
            req(
                json!(19),
                "CreateTaskPushNotificationConfig",
                json!({"taskId": "t", "url": "http://x"}),
            ),
            -32003,
            json!(19),
        ),
        // Conformance (issue 14, item 7): out-of-range and unknown values are -32602.
        case(
            "ListTasks pageSize 0",
            V1,
            req(json!(30), "ListTasks", json!({"pageSize": 0})),
            -32602,
            json!(30),
        ),
        case(
            "ListTasks pageSize -1",
            V1,
            req(json!(31), "ListTasks", json!({"pageSize": -1})),
            -32602,
            json!(31),
        ),
        case(
            "ListTasks pageSize 101",
            V1,
            req(json!(32), "ListTasks", json!({"pageSize": 101})),
            -32602,
            json!(32),
        ),
        case(
            "ListTasks historyLength -1",
            V1,
            req(json!(33), "ListTasks", json!({"historyLength": -1})),
            -32602,
            json!(33),
        ),
        case(
            "ListTasks unknown status",
            V1,
            req(
                json!(34),
                "ListTasks",
                json!({"status": "TASK_STATE_SLEEPING"}),
            ),
            -32602,
            json!(34),
        ),
        case(
            "GetTask historyLength -1",
            V1,
            req(
                json!(35),
                "GetTask",
                json!({"id": "t", "historyLength": -1}),
            ),
            -32602,
            json!(35),
        ),
        case(
            "message without messageId",
            V1,
            req(
                json!(36),
                "SendMessage",
                json!({"message": {"role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
            ),
            -32602,
            json!(36),
        ),
        case(
            "0.3 message without messageId",
            None,
            req(
                json!(37),
                "message/send",
                json!({"message": {"kind": "message", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}),
            ),
            -32602,
            json!(37),
        ),
        case(
            "extended card where the card has none (spec 3.3.4)",
            V1,
            req(json!(38), "GetExtendedAgentCard", json!({})),
            -32004,
            json!(38),
        ),
        case(
            "0.3 extended card where the card has none",
            None,
            req(json!(39), "agent/getAuthenticatedExtendedCard", json!({})),
            -32007,
            json!(39),
        ),
        case(
            "push config on SendMessage where the card has none",
            V1,
            req(
                json!(40),
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
                       "configuration": {"taskPushNotificationConfig": {"url": "https://example.org/hook"}}}),
            ),
            -32003,
            json!(40),
        ),
        case(
            "0.3 push config on message/send where the card has none",
            None,
            req(
                json!(41),
                "message/send",
                json!({"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]},
                       "configuration": {"pushNotificationConfig": {"url": "https://example.org/hook"}}}),
            ),
            -32003,
            json!(41),
        ),
        case(
            "0.3 streaming where the card says no streaming",
            None,
            req(
                json!(42),
                "message/stream",
                json!({"message": {"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}}),
            ),
            -32004,
            json!(42),
        ),
        case(
            "1.0 method without the version header (means 0.3)",
            None,
            req(json!(43), "SendMessage", good_msg.clone()),
            -32009,
            json!(43),
        ),
        case(
            "0.3 unknown task",
            None,
            req(json!(44), "tasks/get", json!({"id": "no-such-task"})),
            -32001,
            json!(44),
        ),
        case(
            "handler-level invalid params",
            V1,
            req(
                json!(20),
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
            ),
            -32602,
            json!(20),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_gets_its_code() {
    let server = common::serve(ServerConfig {
        max_request_bytes: MAX,
        ..ServerConfig::default()
    })
    .await;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let url = format!("{}/", server.base_url);
    let cases = cases();
    assert!(cases.len() >= 25);
    let mut failures = Vec::new();
    for c in &cases {
        let mut rb = http
            .post(&url)
            .header("content-type", "application/json")
            .body(c.body.clone());
        if let Some(v) = c.version {
            rb = rb.header("A2A-Version", v);
        }
        let resp = rb
            .send()
            .await
            .unwrap_or_else(|e| panic!("{}: no answer: {e}", c.name));
        let status = resp.status().as_u16();
        let body: Value = resp
            .json()
            .await
            .unwrap_or_else(|e| panic!("{}: answer is not JSON: {e}", c.name));
        let err = &body["error"];
        let ok = status == 200
            && body["jsonrpc"] == "2.0"
            && body.get("result").is_none()
            && err["code"] == json!(c.code)
            && err["message"].as_str().is_some_and(|m| !m.is_empty())
            && err["data"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
            && err["data"][0]["domain"] == "a2a-protocol.org"
            && err["data"][0]["reason"]
                .as_str()
                .is_some_and(|r| !r.is_empty())
            && body["id"] == c.id;
        if !ok {
            failures.push(format!(
                "{}: want code {} id {}, got HTTP {status} {body}",
                c.name, c.code, c.id
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "failing cases:\n{}",
        failures.join("\n")
    );

    // The server still serves good requests after all that.
    let resp: Value = http
        .post(&url)
        .header("A2A-Version", "1.0")
        .body(req(json!(99), "ListTasks", json!({})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(resp["id"], 99);
    assert!(resp["result"]["tasks"].is_array(), "{resp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn card_is_served_and_parses() {
    let server = common::serve(ServerConfig::default()).await;
    let card =
        a2a_protocol::fetch_agent_card(&server.base_url, &a2a_protocol::ClientConfig::default())
            .await
            .unwrap();
    assert_eq!(card.name, "rust-test-agent");
    let iface = card.jsonrpc_interface().unwrap();
    // The card names the interface as "/"; the server made it absolute from the Host header.
    assert_eq!(iface.url, format!("{}/", server.base_url));
    assert_eq!(iface.protocol_binding, "JSONRPC");
    assert_eq!(iface.protocol_version, "1.0");
    assert_eq!(card.capabilities.streaming, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_does_not_retry_a2a_errors_but_retries_transport() {
    use a2a_protocol::{A2aClient, A2aError, ClientConfig, ClientError, GetTaskRequest};
    let server = common::serve(ServerConfig::default()).await;
    let config = ClientConfig {
        retries: 2,
        backoff_initial: Duration::from_millis(10),
        ..ClientConfig::default()
    };
    let client = A2aClient::connect(&server.base_url, config.clone())
        .await
        .unwrap();
    let start = std::time::Instant::now();
    let err = client
        .get_task(&GetTaskRequest::new("nope"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Rpc(A2aError::TaskNotFound(_))),
        "{err:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(2));

    // A port nobody listens on: transport error after the bounded retries.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}/", dead.local_addr().unwrap());
    drop(dead);
    let client = A2aClient::new(dead_url, config).unwrap();
    let start = std::time::Instant::now();
    let err = client
        .get_task(&GetTaskRequest::new("x"))
        .await
        .unwrap_err();
    assert!(err.is_transport(), "{err:?}");
    // Two retries with 10 ms then 20 ms of backoff.
    assert!(
        start.elapsed() >= Duration::from_millis(30),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_messages_are_refused_naming_the_field() {
    let server = common::serve(ServerConfig::default()).await;
    let http = reqwest::Client::new();
    let url = format!("{}/", server.base_url);
    let v1 = |message: Value| {
        (
            V1,
            req(json!(1), "SendMessage", json!({"message": message})),
        )
    };
    let v03 = |message: Value| {
        (
            None,
            req(json!(1), "message/send", json!({"message": message})),
        )
    };
    let cases = [
        (
            v1(json!({"messageId": "m", "parts": [{"text": "hi"}]})),
            "`message.role` is required",
        ),
        (
            v1(json!({"messageId": "m", "role": "ROLE_BOSS", "parts": [{"text": "hi"}]})),
            "`message.role` must be ROLE_USER or ROLE_AGENT",
        ),
        (
            v1(json!({"messageId": "m", "role": "ROLE_USER", "parts": []})),
            "`message.parts` must hold at least one part",
        ),
        (
            v1(json!({"messageId": "m", "role": "ROLE_USER"})),
            "`message.parts` is required",
        ),
        (
            v1(json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"filename": "x"}]})),
            "`message.parts[0]` must hold exactly one of",
        ),
        (
            v1(
                json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "url": "http://x/"}]}),
            ),
            "`message.parts[0]` must hold exactly one of",
        ),
        (
            v03(
                json!({"kind": "message", "messageId": "m", "parts": [{"kind": "text", "text": "hi"}]}),
            ),
            "`message.role` is required",
        ),
        (
            v03(
                json!({"kind": "message", "messageId": "m", "role": "boss", "parts": [{"kind": "text", "text": "hi"}]}),
            ),
            "`message.role` must be \"user\" or \"agent\"",
        ),
        (
            v03(
                json!({"kind": "message", "messageId": "m", "role": "user", "parts": [{"text": "hi"}]}),
            ),
            "`message.parts[0].kind` is required",
        ),
        (
            v03(
                json!({"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "video", "text": "hi"}]}),
            ),
            "`message.parts[0].kind` must be",
        ),
        (
            v03(
                json!({"kind": "message", "messageId": "m", "role": "user", "parts": [{"kind": "file", "file": {}}]}),
            ),
            "lacks the content its kind names",
        ),
        (
            v03(json!({"kind": "message", "messageId": "m", "role": "user", "parts": []})),
            "`message.parts` must hold at least one part",
        ),
    ];
    for ((version, body), want) in cases {
        let mut rb = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone());
        if let Some(v) = version {
            rb = rb.header("A2A-Version", v);
        }
        let resp: Value = rb.send().await.unwrap().json().await.unwrap();
        let shown = String::from_utf8_lossy(&body);
        assert_eq!(resp["error"]["code"], -32602, "{shown}: {resp}");
        assert!(
            resp["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(want)),
            "{shown}: want {want:?}, got {resp}"
        );
    }
    // Well-formed messages of both versions still go through.
    for (version, body) in [
        v1(json!({"messageId": "ok1", "role": "ROLE_USER", "parts": [{"text": "hi"}]})),
        v03(
            json!({"kind": "message", "messageId": "ok2", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}),
        ),
    ] {
        let mut rb = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body);
        if let Some(v) = version {
            rb = rb.header("A2A-Version", v);
        }
        let resp: Value = rb.send().await.unwrap().json().await.unwrap();
        assert!(resp.get("error").is_none(), "{resp}");
    }
}
