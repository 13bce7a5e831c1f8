//! Bad assessment requests to `green-agent serve`, table-driven: each gets a clear, specific
//! answer (a REJECTED task whose status names what is wrong, or the JSON-RPC / HTTP error of
//! the binding) before anything runs; and the bearer token on a non-loopback bind.

mod serve_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::run_green;
use serde_json::{Value, json};
use serve_support::{rpc, start_serve, status_text, suite, uuid};

/// A request as the message's text part (so malformed JSON can be sent too).
fn text_message(text: &str) -> Value {
    json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "parts": [{"text": text}]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_requests_are_rejected_with_what_is_wrong() {
    let tasks = suite();
    let results = tempfile::tempdir().expect("tempdir");
    let (_serve, url) = start_serve(
        tasks.path(),
        results.path(),
        &["--max-request-bytes", "8192"],
        &BTreeMap::new(),
    )
    .await;
    // A closed port: nothing listens on 127.0.0.1:9 here.
    let unreachable = "http://127.0.0.1:9/";
    let ok =
        |config: Value| json!({"participants": {"agent": "nop"}, "config": config}).to_string();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "malformed JSON",
            "{participants: agent}".into(),
            "the text part is not JSON",
        ),
        (
            "unknown config key",
            ok(json!({"colour": "green"})),
            "unknown field `colour`",
        ),
        (
            "unknown top-level key",
            json!({"participants": {"agent": "nop"}, "settings": {}}).to_string(),
            "unknown field `settings`",
        ),
        (
            "missing roles",
            json!({"participants": {}, "config": {}}).to_string(),
            "no participants",
        ),
        (
            "unreachable participant",
            json!({"participants": {"agent": unreachable}}).to_string(),
            "participant `agent` is unreachable",
        ),
        (
            "a path instead of a suite",
            ok(json!({"tasks": [tasks.path().display().to_string()]})),
            "looks like a path",
        ),
        (
            "an unknown suite",
            ok(json!({"tasks": "all-of-them"})),
            "neither a suite of this service (e2e)",
        ),
        (
            "a hosted agent the operator does not allow",
            json!({"participants": {"agent": "claude-code:model=m"}}).to_string(),
            "the hosted agent `claude-code` is not allowed by this service (allowed: nop, oracle)",
        ),
        (
            "a participant that is neither URL nor agent",
            json!({"participants": {"agent": "my laptop"}}).to_string(),
            "participant `agent`: unknown agent",
        ),
        (
            "shard index without count",
            ok(json!({"shard_index": 1})),
            "num_shards and shard_index go together",
        ),
        (
            "concurrency over the service's limit",
            ok(json!({"concurrency": 64})),
            "config.concurrency must be between 1 and 2",
        ),
    ];
    for (what, text, expected) in &cases {
        for v1 in [true, false] {
            let (method, params) = if v1 {
                ("SendMessage", text_message(text))
            } else {
                (
                    "message/send",
                    json!({"message": {"kind": "message", "messageId": uuid(), "role": "user",
                        "parts": [{"kind": "text", "text": text}]}}),
                )
            };
            let (http, body) = rpc(&url, v1, method, params, None).await;
            assert_eq!(http, 200, "{what}: {body}");
            let task = if v1 {
                body["result"]["task"].clone()
            } else {
                body["result"].clone()
            };
            let state = task["status"]["state"].as_str().unwrap_or_default();
            let wanted = if v1 {
                "TASK_STATE_REJECTED"
            } else {
                "rejected"
            };
            assert_eq!(state, wanted, "{what} (v1: {v1}): {body}");
            let message = status_text(&task);
            assert!(
                message.contains(expected),
                "{what}: the status says {message:?}, expected it to contain {expected:?}"
            );
            // A rejected assessment stays readable by id.
            let (_, again) = rpc(&url, true, "GetTask", json!({"id": task["id"]}), None).await;
            assert_eq!(
                again["result"]["status"]["state"], "TASK_STATE_REJECTED",
                "{what}"
            );
        }
    }
    // A body over the cap is the binding's error (-32600), not a task.
    let big = "x".repeat(9000);
    let (http, body) = rpc(&url, true, "SendMessage", text_message(&big), None).await;
    assert_eq!(http, 200);
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("payload too large: the limit is 8192 bytes")),
        "{body}"
    );
    // Nothing ran: the results folder holds only the service's records.
    let entries: Vec<String> = std::fs::read_dir(results.path())
        .expect("results")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(entries, ["serve"], "no run was created");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_non_loopback_bind_needs_a_token_and_requests_without_it_get_401() {
    let tasks = suite();
    let results = tempfile::tempdir().expect("tempdir");
    let suite_arg = format!("e2e={}", tasks.path().display());
    let results_arg = results.path().display().to_string();
    // No token: the service refuses to start, saying how to fix it.
    let refused = run_green(
        &[
            "serve",
            "--bind",
            "0.0.0.0:0",
            "--tasks",
            &suite_arg,
            "--results-dir",
            &results_arg,
        ],
        &BTreeMap::from([("RB_SERVE_TOKEN".to_owned(), String::new())]),
        Duration::from_secs(60),
    )
    .await;
    assert!(!refused.exit.success(), "{refused:?}");
    assert!(
        refused.stderr.contains("not a loopback address")
            && refused.stderr.contains("RB_SERVE_TOKEN"),
        "{}",
        refused.stderr
    );

    let token = "e2e-serve-token-0123456789abcdef";
    let env = BTreeMap::from([("RB_SERVE_TOKEN".to_owned(), token.to_owned())]);
    let (_serve, url) = start_serve(
        tasks.path(),
        results.path(),
        &["--allow-participant", "http://127.0.0.1:1"],
        &env,
    )
    .await;
    // The card is public and declares the bearer scheme.
    let card: Value = reqwest::get(format!("{url}/.well-known/agent-card.json"))
        .await
        .expect("card")
        .json()
        .await
        .expect("card json");
    assert_eq!(
        card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "bearer",
        "{card}"
    );
    let params = json!({"id": "no-such-task"});
    for (bearer, expected) in [
        (None, 401),
        (Some("wrong-token-wrong-token-wrong"), 401),
        (Some(token), 200),
    ] {
        let (http, body) = rpc(&url, true, "GetTask", params.clone(), bearer).await;
        assert_eq!(http, expected, "{bearer:?}: {body}");
        if expected == 401 {
            assert_eq!(body["error"]["code"], -32600, "{body}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Authorization: Bearer")),
                "{body}"
            );
        } else {
            assert_eq!(body["error"]["code"], -32001, "task not found: {body}");
        }
    }
    // Participant URLs outside the allow-list are rejected (the token admits the request).
    let request = json!({"participants": {"agent": "http://127.0.0.1:10/"}}).to_string();
    let (http, body) = rpc(
        &url,
        true,
        "SendMessage",
        text_message(&request),
        Some(token),
    )
    .await;
    assert_eq!(http, 200, "{body}");
    let task = &body["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_REJECTED", "{body}");
    assert!(
        status_text(task)
            .contains("is not allowed by this service (allowed URL prefixes: http://127.0.0.1:1)"),
        "{body}"
    );
}
