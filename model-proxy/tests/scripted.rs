//! The scripted mock model in each wire format: tool-call shapes per CLI, streamed deltas that
//! reassemble to the arguments, usage in the final event, deterministic bodies (snapshots), and
//! record → replay byte for byte.

mod common;

use std::collections::BTreeMap;

use common::*;
use model_proxy::{Budget, ReplayMatch, Script, TrialOptions};
use serde_json::{Value, json};

const CONTENT: &str = "import sys\nprint('it\\'s', sys.argv)\n";

fn scripts() -> BTreeMap<String, Script> {
    let mut m = BTreeMap::new();
    m.insert(
        "demo".to_string(),
        Script::from_json(&json!({
            "chunk_chars": 7,
            "steps": [
                {"text": "Writing the file.", "write_file": {"path": "src/run.py", "content": CONTENT},
                 "usage": {"input_tokens": 321, "output_tokens": 54}},
                {"run": "python3 src/run.py", "usage": {"input_tokens": 400, "output_tokens": 11}},
                {"text": "All done.", "usage": {"input_tokens": 450, "output_tokens": 3}}
            ]
        }).to_string())
        .expect("script"),
    );
    m
}

async fn setup() -> (Upstream, model_proxy::RunningProxy, String) {
    let up = unused_upstream().await;
    let proxy = proxy_to(&up.url(), scripts()).await;
    let token = proxy
        .register_trial("t", Budget::default())
        .expect("register")
        .as_str()
        .to_string();
    (up, proxy, token)
}

fn claude_req(stream: bool) -> Value {
    json!({"model": "scripted:demo", "stream": stream, "max_tokens": 1000,
    "system": [{"type": "text", "text": "Primary working directory: /work/ws\nPlatform: linux"}],
    "messages": [{"role": "user", "content": "go"}],
    "tools": [
        {"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}, "required": ["file_path", "content"]}},
        {"name": "Bash", "input_schema": {"properties": {"command": {}, "timeout": {}}, "required": ["command"]}}
    ]})
}

fn codex_req(stream: bool, patch_tool: bool) -> Value {
    let mut tools = vec![
        json!({"type": "function", "name": "exec_command", "parameters": {"properties": {"cmd": {}}, "required": ["cmd"]}}),
    ];
    if patch_tool {
        tools.push(json!({"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}));
    }
    json!({"model": "scripted:demo", "stream": stream, "tools": tools,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<cwd>/work/ws</cwd>"}]}]})
}

fn opencode_req(stream: bool, tool_results: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "go"})];
    for i in 0..tool_results {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{i}"), "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "ok"}));
    }
    json!({"model": "scripted:demo", "stream": stream, "messages": messages,
    "tools": [
        {"type": "function", "function": {"name": "write", "parameters": {"properties": {"filePath": {}, "content": {}}, "required": ["filePath", "content"]}}},
        {"type": "function", "function": {"name": "bash", "parameters": {"properties": {"command": {}, "description": {}}, "required": ["command", "description"]}}}
    ]})
}

async fn body(proxy: &model_proxy::RunningProxy, path: &str, token: &str, req: &Value) -> String {
    let r = post(&proxy.base_url(), path, token, req).await;
    assert_eq!(r.status(), 200);
    r.text().await.expect("body")
}

fn assert_pieces(deltas: &[String], chunk: usize) {
    assert!(
        deltas.len() > 1,
        "arguments are streamed in several deltas: {deltas:?}"
    );
    assert!(
        deltas
            .iter()
            .all(|d| d.chars().count() <= chunk && !d.is_empty()),
        "{deltas:?}"
    );
}

#[tokio::test]
async fn anthropic_stream_for_claude_code() {
    let (_up, proxy, token) = setup().await;
    let text = body(&proxy, "/v1/messages", &token, &claude_req(true)).await;
    insta::assert_snapshot!("anthropic_stream_write", text);
    let events = sse_events(&text);
    for (name, data) in &events {
        assert_eq!(
            name.as_deref(),
            data["type"].as_str(),
            "event name matches its type"
        );
    }
    assert_eq!(
        events.first().and_then(|e| e.0.clone()).as_deref(),
        Some("message_start")
    );
    assert_eq!(
        events.last().and_then(|e| e.0.clone()).as_deref(),
        Some("message_stop")
    );
    let deltas: Vec<String> = events
        .iter()
        .filter(|(_, d)| d["delta"]["type"] == "input_json_delta")
        .map(|(_, d)| {
            d["delta"]["partial_json"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_pieces(&deltas, 7);
    let args: Value = serde_json::from_str(&deltas.concat()).expect("deltas reassemble to JSON");
    assert_eq!(
        args,
        json!({"file_path": "/work/ws/src/run.py", "content": CONTENT})
    );
    let start = &events[0].1;
    assert_eq!(start["message"]["usage"]["input_tokens"], 321);
    let delta = events
        .iter()
        .find(|(n, _)| n.as_deref() == Some("message_delta"))
        .expect("message_delta");
    assert_eq!(delta.1["usage"]["output_tokens"], 54);
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");

    let whole: Value =
        serde_json::from_str(&body(&proxy, "/v1/messages", &token, &claude_req(false)).await)
            .expect("json");
    insta::assert_json_snapshot!("anthropic_json_write", whole);
    assert_eq!(whole["content"][1]["input"], args);
}

#[tokio::test]
async fn responses_stream_for_codex_shell_and_patch() {
    let (_up, proxy, token) = setup().await;
    // Without apply_patch: the file is written through exec_command.
    let text = body(&proxy, "/v1/responses", &token, &codex_req(true, false)).await;
    insta::assert_snapshot!("responses_stream_exec_command", text);
    let events = sse_events(&text);
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|(_, d)| d["sequence_number"].as_u64())
        .collect();
    assert_eq!(
        seqs,
        (0..events.len() as u64).collect::<Vec<_>>(),
        "sequence numbers count up"
    );
    let deltas: Vec<String> = events
        .iter()
        .filter(|(n, _)| n.as_deref() == Some("response.function_call_arguments.delta"))
        .map(|(_, d)| d["delta"].as_str().unwrap_or("").to_string())
        .collect();
    assert_pieces(&deltas, 7);
    let done = events
        .iter()
        .find(|(n, _)| n.as_deref() == Some("response.function_call_arguments.done"))
        .expect("done");
    assert_eq!(done.1["arguments"].as_str(), Some(deltas.concat().as_str()));
    let args: Value = serde_json::from_str(&deltas.concat()).expect("json");
    assert_eq!(
        args["cmd"],
        "printf '%s' 'import sys\nprint('\\''it\\'\\''s'\\'', sys.argv)\n' > 'src/run.py'"
    );
    let (last, completed) = events.last().expect("events");
    assert_eq!(last.as_deref(), Some("response.completed"));
    assert_eq!(completed["response"]["usage"]["input_tokens"], 321);
    assert_eq!(completed["response"]["usage"]["output_tokens"], 54);
    assert_eq!(completed["response"]["output"][1]["type"], "function_call");

    // With the apply_patch custom tool: a freeform patch, streamed as custom tool input deltas.
    let text = body(&proxy, "/v1/responses", &token, &codex_req(true, true)).await;
    let events = sse_events(&text);
    let patch: String = events
        .iter()
        .filter(|(n, _)| n.as_deref() == Some("response.custom_tool_call_input.delta"))
        .map(|(_, d)| d["delta"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        patch,
        "*** Begin Patch\n*** Add File: src/run.py\n+import sys\n+print('it\\'s', sys.argv)\n*** End Patch\n"
    );

    // After one tool output, step 2 runs the script.
    let mut req = codex_req(false, false);
    req["input"]
        .as_array_mut()
        .expect("input")
        .push(json!({"type": "function_call_output", "call_id": "c", "output": "ok"}));
    let whole: Value =
        serde_json::from_str(&body(&proxy, "/v1/responses", &token, &req).await).expect("json");
    assert_eq!(whole["output"][0]["type"], "function_call");
    assert_eq!(
        whole["output"][0]["arguments"],
        json!({"cmd": "python3 src/run.py"}).to_string()
    );
    assert_eq!(whole["usage"]["total_tokens"], 411);
}

#[tokio::test]
async fn chat_stream_for_opencode() {
    let (_up, proxy, token) = setup().await;
    let text = body(
        &proxy,
        "/v1/chat/completions",
        &token,
        &opencode_req(true, 0),
    )
    .await;
    insta::assert_snapshot!("chat_stream_write", text);
    let events = sse_events(&text);
    assert_eq!(
        events.last().map(|e| e.1.clone()),
        Some(Value::String("[DONE]".into()))
    );
    let usage_chunk = &events[events.len() - 2].1;
    assert_eq!(
        usage_chunk["usage"],
        json!({"prompt_tokens": 321, "completion_tokens": 54, "total_tokens": 375})
    );
    let deltas: Vec<String> = events
        .iter()
        .filter_map(|(_, d)| {
            d["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                .as_str()
                .map(String::from)
        })
        .filter(|s| !s.is_empty())
        .collect();
    assert_pieces(&deltas, 7);
    let args: Value = serde_json::from_str(&deltas.concat()).expect("json");
    assert_eq!(args, json!({"filePath": "src/run.py", "content": CONTENT}));
    assert!(
        events
            .iter()
            .any(|(_, d)| d["choices"][0]["finish_reason"] == "tool_calls")
    );

    let whole: Value = serde_json::from_str(
        &body(
            &proxy,
            "/v1/chat/completions",
            &token,
            &opencode_req(false, 1),
        )
        .await,
    )
    .expect("json");
    let call = &whole["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "bash");
    assert_eq!(
        call["arguments"],
        json!({"command": "python3 src/run.py", "description": "scripted step"}).to_string()
    );
    let whole: Value = serde_json::from_str(
        &body(
            &proxy,
            "/v1/chat/completions",
            &token,
            &opencode_req(false, 2),
        )
        .await,
    )
    .expect("json");
    assert_eq!(whole["choices"][0]["message"]["content"], "All done.");
    assert_eq!(whole["choices"][0]["finish_reason"], "stop");

    let usage = proxy.usage("t").expect("usage");
    assert_eq!(
        usage.tokens,
        scripts()["demo"].expected_usage(),
        "one pass through the script = its totals"
    );
    assert_eq!(usage.per_model["scripted:demo"].requests, 3);
}

#[tokio::test]
async fn recorded_traffic_replays_byte_for_byte_without_a_provider() {
    let dir = tempfile::tempdir().expect("dir");
    let rec_path = dir.path().join("trial.jsonl");
    let (_up, proxy, _token) = setup().await;
    let rec_token = proxy
        .register_trial_with(
            "rec",
            TrialOptions {
                record_to: Some(rec_path.clone()),
                ..Default::default()
            },
        )
        .expect("register");
    let requests = vec![
        ("/v1/messages", claude_req(true)),
        ("/v1/responses", codex_req(true, true)),
        ("/v1/chat/completions", opencode_req(false, 2)),
    ];
    let mut originals = Vec::new();
    for (path, req) in &requests {
        originals.push(body(&proxy, path, rec_token.as_str(), req).await);
    }
    let recorded = model_proxy::load_recording(&rec_path).expect("recording");
    assert_eq!(recorded.len(), 3);
    assert!(
        recorded[0].chunks().len() > 5,
        "stream chunks are kept one by one"
    );

    // A second proxy with no scripts and no providers at all.
    let empty = proxy_to("http://127.0.0.1:9", BTreeMap::new()).await;
    let replay_token = empty
        .register_trial_with(
            "replay",
            TrialOptions {
                replay_from: Some(rec_path.clone()),
                replay_match: ReplayMatch::Hash,
                ..Default::default()
            },
        )
        .expect("register");
    // Out of order: hash matching finds each.
    for i in [2usize, 0, 1] {
        let (path, req) = &requests[i];
        let replayed = body(&empty, path, replay_token.as_str(), req).await;
        assert_eq!(
            replayed, originals[i],
            "replay of call {i} is byte for byte"
        );
    }
    assert_eq!(
        empty.usage("replay").expect("usage").tokens,
        proxy.usage("rec").expect("usage").tokens
    );
    // Nothing left to replay: a wire-format error, not a hang.
    let r = post(
        &empty.base_url(),
        "/v1/messages",
        replay_token.as_str(),
        &claude_req(true),
    )
    .await;
    assert_eq!(
        r.status(),
        400,
        "not retryable: a replay that ran out will not heal"
    );
    assert_eq!(r.json::<Value>().await.expect("json")["type"], "error");

    // Order mode: a changed request (new session id) still gets the next recorded answer.
    let ordered = empty
        .register_trial_with(
            "ordered",
            TrialOptions {
                replay_from: Some(rec_path),
                replay_match: ReplayMatch::Order,
                ..Default::default()
            },
        )
        .expect("register");
    let mut changed = claude_req(true);
    changed["metadata"] = json!({"user_id": "another-session"});
    assert_eq!(
        body(&empty, "/v1/messages", ordered.as_str(), &changed).await,
        originals[0]
    );
}

/// A resumed run re-registers a trial under the token its agent still holds: a second proxy
/// (the first one's process is gone) answers that token, refuses a token of another form,
/// and a token registered already cannot be taken by a second trial.
#[tokio::test]
async fn a_trial_is_re_registered_under_the_token_its_agent_holds() {
    let (up, first, token) = setup().await;
    drop(first);
    let second = proxy_to(&up.url(), scripts()).await;
    let options = |t: &str| TrialOptions {
        reuse_token: Some(t.to_owned()),
        ..Default::default()
    };
    let again = second
        .register_trial_with("t", options(&token))
        .expect("re-register");
    assert_eq!(again.as_str(), token);
    let answer = body(&second, "/v1/messages", &token, &claude_req(false)).await;
    assert!(answer.contains("tool_use"), "{answer}");
    assert_eq!(second.usage("t").expect("usage").requests, 1);
    let bogus = second.register_trial_with("u", options("sk-ant-not-ours"));
    assert!(bogus.is_err(), "only rb-trial-<uuid> tokens are reused");
    let taken = second.register_trial_with("v", options(&token));
    assert!(taken.is_err(), "one token, one trial");
}

#[tokio::test]
async fn a_call_with_an_announced_token_waits_for_its_trials_registration() {
    let (up, first, token) = setup().await;
    drop(first);
    // The restarted proxy: the token is announced, its trial not registered yet.
    let second = std::sync::Arc::new(proxy_to(&up.url(), scripts()).await);
    second.expect_tokens(
        std::slice::from_ref(&token),
        std::time::Duration::from_secs(30),
    );
    let base = second.base_url();
    let early = {
        let (base, token) = (base.clone(), token.clone());
        tokio::spawn(async move {
            let r = post(&base, "/v1/messages", &token, &claude_req(false)).await;
            (r.status(), r.text().await.expect("body"))
        })
    };
    // A token nobody announced is refused at once.
    let stranger = post(
        &base,
        "/v1/messages",
        "rb-trial-00000000-0000-0000-0000-000000000000",
        &claude_req(false),
    )
    .await;
    assert_eq!(stranger.status(), 401);
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert!(!early.is_finished(), "the announced call waits");
    second
        .register_trial_with(
            "t",
            TrialOptions {
                reuse_token: Some(token.clone()),
                ..Default::default()
            },
        )
        .expect("re-register");
    let (status, text) = early.await.expect("the waiting call");
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("tool_use"),
        "answered once registered: {text}"
    );
    assert_eq!(second.usage("t").expect("usage").requests, 1);
}

#[tokio::test]
async fn an_announced_token_whose_trial_never_comes_is_refused_at_the_deadline() {
    let (up, first, token) = setup().await;
    drop(first);
    let second = proxy_to(&up.url(), scripts()).await;
    second.expect_tokens(
        std::slice::from_ref(&token),
        std::time::Duration::from_millis(500),
    );
    let started = std::time::Instant::now();
    let r = post(
        &second.base_url(),
        "/v1/messages",
        &token,
        &claude_req(false),
    )
    .await;
    assert_eq!(r.status(), 401);
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(400),
        "it waited for the announced registration first"
    );
}
