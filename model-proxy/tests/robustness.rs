//! Bad input gets the right wire-format error and the proxy stays up; budgets end a trial.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use model_proxy::{Budget, RunningProxy, Script, TrialToken};
use serde_json::{Value, json};

fn scripts() -> BTreeMap<String, Script> {
    let mut m = BTreeMap::new();
    m.insert(
        "two-calls".to_string(),
        Script::from_toml(
            r#"
            [[steps]]
            run = "ls"
            usage = { input_tokens = 120, output_tokens = 10 }
            [[steps]]
            text = "done"
            usage = { input_tokens = 130, output_tokens = 5 }
            "#,
        )
        .expect("script"),
    );
    m
}

/// A proxy over an unused upstream with the `two-calls` script, and trial `t` under `budget`.
async fn setup(budget: Budget) -> (Upstream, RunningProxy, TrialToken) {
    let up = unused_upstream().await;
    let proxy = proxy_to(&up.url(), scripts()).await;
    let token = proxy.register_trial("t", budget).expect("register");
    (up, proxy, token)
}

#[tokio::test]
async fn bad_input_gets_wire_format_errors_and_the_proxy_stays_up() {
    let (up, proxy, token) = setup(Budget::default()).await;
    let base = proxy.base_url();
    let c = client();

    // Unknown token, per format.
    let r = post(
        &base,
        "/v1/messages",
        "rb-trial-unknown",
        &json!({"model":"mock","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.expect("json")["error"]["type"],
        "authentication_error"
    );
    let r = post(
        &base,
        "/v1/responses",
        "rb-trial-unknown",
        &json!({"model":"mock","input":[]}),
    )
    .await;
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.expect("json")["error"]["code"],
        "invalid_api_key"
    );
    let r = c
        .post(format!("{base}/v1/chat/completions"))
        .json(&json!({"model":"mock"}))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401, "no token at all");
    // A stray x-api-key next to the right bearer token still finds the trial.
    let r = c
        .post(format!("{base}/v1/messages"))
        .header("x-api-key", "junk")
        .bearer_auth(token.as_str())
        .json(&json!({"model":"mock","messages":[]}))
        .send()
        .await
        .expect("send");
    assert_eq!(
        r.status(),
        200,
        "bearer token accepted (Claude Code's ANTHROPIC_AUTH_TOKEN style)"
    );
    let _ = r.text().await;

    // Unknown model, per format.
    let r = post(
        &base,
        "/v1/messages",
        token.as_str(),
        &json!({"model":"no-such-model","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 404);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "not_found_error");
    assert!(error_message(&v).contains("no-such-model"), "{v}");
    let r = post(
        &base,
        "/v1/responses",
        token.as_str(),
        &json!({"model":"scripted:nope","input":[]}),
    )
    .await;
    assert_eq!(r.status(), 404);
    assert_eq!(
        r.json::<Value>().await.expect("json")["error"]["code"],
        "model_not_found"
    );
    let r = post(
        &base,
        "/v1/chat/completions",
        token.as_str(),
        &json!({"model":"dead-1","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 404, "a route to an unconfigured provider");

    // Malformed requests.
    for (path, body) in [
        ("/v1/messages", "{not json"),
        ("/v1/responses", "[1,2]"),
        ("/v1/chat/completions", "{\"messages\":[]}"),
    ] {
        let r = c
            .post(format!("{base}{path}"))
            .bearer_auth(token.as_str())
            .header("x-api-key", token.as_str())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 400, "{path} {body}");
        let v: Value = r.json().await.expect("json");
        if path == "/v1/messages" {
            assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        } else {
            assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
            assert!(v["error"]["message"].is_string());
        }
    }
    // A model of the wrong dialect.
    let r = post(
        &base,
        "/v1/responses",
        token.as_str(),
        &json!({"model":"claude-x","input":[]}),
    )
    .await;
    assert_eq!(r.status(), 400);
    // An unknown endpoint.
    let r = c
        .post(format!("{base}/v1/embeddings"))
        .bearer_auth(token.as_str())
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 404);

    assert!(up.received().is_empty(), "nothing bad reached the provider");
    let usage = proxy.usage("t").expect("usage");
    assert_eq!(
        usage.requests,
        1,
        "only the mock call was admitted: {:#?}",
        proxy.calls("t")
    );
    assert!(usage.errors >= 7, "{usage:?}");
    let seqs: Vec<u64> = proxy.calls("t").iter().map(|c| c.seq).collect();
    assert_eq!(
        seqs,
        (0..seqs.len() as u64).collect::<Vec<_>>(),
        "call log numbered in order"
    );

    // Still up and serving.
    let r = post(&base, "/v1/messages", token.as_str(), &json!({"model":"mock","messages":[{"role":"user","content":"hi"}],"tools":[{"name":"x","input_schema":{}}]})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.json::<Value>().await.expect("json")["content"][0]["text"],
        "This is the mock model."
    );
}

#[tokio::test]
async fn unregistered_trial_token_stops_working() {
    let (_up, proxy, token) = setup(Budget::default()).await;
    assert!(
        proxy.register_trial("t", Budget::default()).is_err(),
        "duplicate trial ids are refused"
    );
    let final_usage = proxy.unregister_trial("t").expect("was registered");
    assert_eq!(final_usage.trial_id, "t");
    let r = post(
        &proxy.base_url(),
        "/v1/messages",
        token.as_str(),
        &json!({"model":"mock","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 401);
}

fn tool_req(step_results: usize) -> Value {
    let mut messages = vec![json!({"role":"user","content":"go"})];
    for i in 0..step_results {
        messages.push(json!({"role":"assistant","content":[{"type":"tool_use","id":format!("t{i}"),"name":"Bash","input":{}}]}));
        messages.push(json!({"role":"user","content":[{"type":"tool_result","tool_use_id":format!("t{i}"),"content":"ok"}]}));
    }
    json!({"model":"scripted:two-calls","messages":messages,"max_tokens":100,
           "tools":[{"name":"Bash","input_schema":{"properties":{"command":{}},"required":["command"]}}]})
}

#[tokio::test]
async fn request_budget_refuses_with_the_wire_format_quota_error() {
    let (_up, proxy, token) = setup(Budget {
        max_requests: Some(2),
        ..Default::default()
    })
    .await;
    let base = proxy.base_url();
    for _ in 0..2 {
        let r = post(&base, "/v1/messages", token.as_str(), &tool_req(0)).await;
        assert_eq!(r.status(), 200);
    }
    let r = post(&base, "/v1/messages", token.as_str(), &tool_req(0)).await;
    assert_eq!(r.status(), 402);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["type"], "billing_error");
    assert!(error_message(&v).contains("budget"), "{v}");
    let usage = proxy.usage("t").expect("usage");
    assert!(usage.budget_exhausted);
    assert_eq!(usage.requests, 2);
    assert!(
        usage
            .exhausted_reason
            .unwrap_or_default()
            .contains("request budget")
    );
}

#[tokio::test]
async fn token_budget_refuses_the_call_that_would_cross_it() {
    let (_up, proxy, token) = setup(Budget {
        max_tokens: Some(200),
        ..Default::default()
    })
    .await;
    let base = proxy.base_url();
    let r = post(&base, "/v1/responses", token.as_str(), &json!({"model":"scripted:two-calls","input":[],"tools":[{"type":"function","name":"exec_command","parameters":{"properties":{"cmd":{}}}}]})).await;
    assert_eq!(r.status(), 200);
    assert!(
        !proxy.usage("t").expect("usage").budget_exhausted,
        "130 of 200 tokens"
    );
    // The script's next turn costs 130 tokens: 130 + 130 > 200, so it is never served.
    let r = post(&base, "/v1/responses", token.as_str(), &json!({"model":"scripted:two-calls","input":[],"tools":[{"type":"function","name":"exec_command","parameters":{}}]})).await;
    assert_eq!(
        r.status(),
        429,
        "the call that would cross the line is refused"
    );
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["code"], "insufficient_quota");
    assert!(error_message(&v).contains("worst case"), "{v}");
    let usage = proxy.usage("t").expect("usage");
    assert!(usage.budget_exhausted, "{usage:?}");
    assert_eq!(usage.tokens.total(), 130);
    let r = post(
        &base,
        "/v1/chat/completions",
        token.as_str(),
        &json!({"model":"scripted:two-calls","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 429);
}

#[tokio::test]
async fn cost_budget_uses_the_price_table() {
    // claude-* costs $3 / $15 per Mtok in the test config: 1M input tokens = $3.
    let up = Upstream::start(Arc::new(|_r: &Received| {
        Reply::json(200, &json!({"type":"message","content":[],"usage":{"input_tokens":1_000_000,"output_tokens":0}}))
    }))
    .await;
    let proxy = proxy_to(&up.url(), scripts()).await;
    let token = proxy
        .register_trial(
            "t",
            Budget {
                max_cost_usd: Some(5.0),
                ..Default::default()
            },
        )
        .expect("register");
    let base = proxy.base_url();
    let r = post(
        &base,
        "/v1/messages",
        token.as_str(),
        &json!({"model":"claude-x","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let u = proxy.usage("t").expect("usage");
    assert!(
        (u.cost_usd - 3.0).abs() < 1e-9 && !u.budget_exhausted,
        "{u:?}"
    );
    assert!((u.per_model["claude-x"].cost_usd - 3.0).abs() < 1e-9);
    let _ = post(
        &base,
        "/v1/messages",
        token.as_str(),
        &json!({"model":"claude-x","messages":[]}),
    )
    .await;
    let u = proxy.usage("t").expect("usage");
    assert!(
        u.budget_exhausted && (u.cost_usd - 6.0).abs() < 1e-9,
        "{u:?}"
    );
    let r = post(
        &base,
        "/v1/messages",
        token.as_str(),
        &json!({"model":"claude-x","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 402);
    assert_eq!(
        up.received().len(),
        2,
        "the refused call never reached the provider"
    );
}

#[tokio::test]
async fn models_and_count_tokens_endpoints() {
    let (_up, proxy, token) = setup(Budget::default()).await;
    let base = proxy.base_url();
    let c = client();
    let v: Value = c
        .get(format!("{base}/v1/models"))
        .bearer_auth(token.as_str())
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(v["object"], "list");
    assert!(
        ids.contains(&"mock") && ids.contains(&"scripted:two-calls"),
        "{ids:?}"
    );
    let v: Value = c
        .get(format!("{base}/v1/models"))
        .header("x-api-key", token.as_str())
        .header("anthropic-version", "2023-06-01")
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(v["data"][0]["type"], "model");
    let r = c
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .expect("send");
    assert_eq!(r.status(), 401);
    let body = json!({"model":"scripted:two-calls","messages":[{"role":"user","content":"hello"}]});
    let r = post(&base, "/v1/messages/count_tokens", token.as_str(), &body).await;
    assert_eq!(r.status(), 200);
    let n = r.json::<Value>().await.expect("json")["input_tokens"]
        .as_u64()
        .expect("count");
    assert_eq!(n as usize, body.to_string().len().div_ceil(4));
    assert_eq!(
        proxy.usage("t").expect("usage").requests,
        0,
        "counting tokens is not a model call"
    );
}

#[tokio::test]
async fn call_log_is_written_per_trial_as_jsonl() {
    let dir = tempfile::tempdir().expect("dir");
    let mut config = model_proxy::ProxyConfig {
        scripts: scripts(),
        call_log_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    config.providers.clear();
    let proxy = model_proxy::ModelProxy::start(config, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("start");
    let token = proxy
        .register_trial("trial/1", Budget::default())
        .expect("register");
    let base = proxy.base_url();
    let _ = post(&base, "/v1/messages", token.as_str(), &tool_req(0))
        .await
        .text()
        .await;
    let _ = post(
        &base,
        "/v1/messages",
        token.as_str(),
        &json!({"model":"nope","messages":[]}),
    )
    .await
    .text()
    .await;
    let text = std::fs::read_to_string(dir.path().join("trial_1.calls.jsonl")).expect("call log");
    let logged: Vec<model_proxy::CallRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert_eq!(logged, proxy.calls("trial/1"));
    assert_eq!(logged.len(), 2);
    assert_eq!(logged[0].tokens.input_tokens, 120);
    assert_eq!(logged[1].status, 404);
    assert!(logged[1].error.as_deref().unwrap_or("").contains("nope"));
}

#[tokio::test]
async fn config_with_inline_scripts_parses_from_toml() {
    let cfg = model_proxy::ProxyConfig::from_toml(
        r#"
        log_bodies = true
        [[routes]]
        model = "my-model"
        provider = "openai"
        [prices."gpt-5*"]
        input_per_mtok = 1.25
        output_per_mtok = 10.0
        [scripts.hello]
        chunk_chars = 4
        [[scripts.hello.steps]]
        write_file = { path = "a.txt", content = "x" }
        [[scripts.hello.steps]]
        text = "done"
        "#,
    )
    .expect("config");
    assert_eq!(cfg.scripts["hello"].steps.len(), 2);
    assert_eq!(
        cfg.price("gpt-5-mini").map(|p| p.output_per_mtok),
        Some(10.0)
    );
    assert!(cfg.routes.iter().any(|r| r.model == "my-model"));
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("s.json");
    std::fs::write(&path, r#"{"steps":[{"run":"ls"},{"text":"ok"}]}"#).expect("write");
    assert_eq!(Script::from_path(&path).expect("script").steps.len(), 2);
    std::fs::write(&path, r#"{"steps":[{}]}"#).expect("write");
    assert!(
        Script::from_path(&path)
            .expect_err("empty step")
            .to_string()
            .contains("step 0")
    );
}

#[tokio::test]
async fn oversized_body_is_refused_with_a_wire_format_error() {
    let config = model_proxy::ProxyConfig {
        scripts: scripts(),
        max_body_bytes: 1024,
        ..Default::default()
    };
    let proxy = model_proxy::ModelProxy::start(config, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("start");
    let token = proxy
        .register_trial("t", Budget::default())
        .expect("register");
    let big = "x".repeat(4096);
    let r = post(
        &proxy.base_url(),
        "/v1/messages",
        token.as_str(),
        &json!({"model":"mock","messages":[{"role":"user","content":big}]}),
    )
    .await;
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(error_message(&v).contains("1024"), "{v}");
    let r = post(
        &proxy.base_url(),
        "/v1/messages",
        token.as_str(),
        &json!({"model":"mock","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 200, "still serving");
    let ip: std::net::IpAddr = "10.1.2.3".parse().expect("ip");
    assert_eq!(
        proxy.base_url_at(ip),
        format!("http://10.1.2.3:{}", proxy.addr().port())
    );
}

#[tokio::test]
async fn concurrent_trials_are_counted_apart() {
    let up = unused_upstream().await;
    let proxy = proxy_to(&up.url(), scripts()).await;
    let a = proxy.register_trial("a", Budget::default()).expect("a");
    let b = proxy.register_trial("b", Budget::default()).expect("b");
    let base = proxy.base_url();
    let mut tasks = Vec::new();
    for i in 0..10 {
        let token = if i % 3 == 0 {
            b.as_str().to_string()
        } else {
            a.as_str().to_string()
        };
        let base = base.clone();
        tasks.push(tokio::spawn(async move {
            let mut req = tool_req(0);
            req["stream"] = json!(i % 2 == 0);
            post(&base, "/v1/messages", &token, &req)
                .await
                .text()
                .await
                .expect("body")
        }));
    }
    for t in tasks {
        assert!(!t.await.expect("join").is_empty());
    }
    let ua = proxy.usage("a").expect("a");
    let ub = proxy.usage("b").expect("b");
    assert_eq!((ua.requests, ub.requests), (6, 4));
    assert_eq!(ua.tokens.input_tokens, 6 * 120);
    assert_eq!(ub.tokens.output_tokens, 4 * 10);
    assert_eq!(proxy.calls("a").len(), 6);
}
