//! Budgets under bursts: many parallel calls against a trial's cap and against the run's cap.
//! A call is admitted only when its worst case fits beside the calls still running, so the
//! counted cost never passes the cap (and never by more than one call's worst case).

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use futures::StreamExt;
use model_proxy::{Budget, BudgetScope, Price, RunBudget, RunningProxy};
use serde_json::{Value, json};

const CALLS: usize = 40;

/// An upstream that bills every call its full output cap (1 token at $1 per token in the
/// proxy's price table), answering after a pause so the calls overlap; streamed when asked.
async fn slow_dollar_upstream() -> Upstream {
    Upstream::start(Arc::new(|r: &Received| {
        let out = r.body["max_tokens"].as_u64().unwrap_or(0);
        let streamed = r.body["stream"].as_bool().unwrap_or(false);
        let (content_type, text) = if streamed {
            (
                "text/event-stream",
                format!(
                    "event: message_start\ndata: {}\n\nevent: message_delta\ndata: {}\n\nevent: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n",
                    json!({"type":"message_start","message":{"type":"message","content":[],"usage":{"input_tokens":0,"output_tokens":0}}}),
                    json!({"type":"message_delta","delta":{},"usage":{"output_tokens":out}}),
                ),
            )
        } else {
            (
                "application/json",
                json!({"type":"message","content":[],"usage":{"input_tokens":0,"output_tokens":out}})
                    .to_string(),
            )
        };
        let body = futures::stream::once(async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok(Bytes::from(text))
        })
        .boxed();
        Reply {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body,
        }
    }))
    .await
}

async fn dollar_proxy(up: &Upstream) -> RunningProxy {
    proxy_with(&up.url(), Default::default(), |c| {
        c.prices.insert(
            "claude-dollar".into(),
            Price {
                input_per_mtok: 0.0,
                output_per_mtok: 1_000_000.0,
                ..Default::default()
            },
        );
    })
    .await
}

/// Sends one $1 call (streamed every other time); its status and error type.
async fn dollar_call(base: String, token: String, i: usize) -> (u16, String) {
    let body = json!({"model":"claude-dollar","max_tokens":1,"stream": i % 2 == 1,"messages":[]});
    let r = post(&base, "/v1/messages", &token, &body).await;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let ty = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["type"].as_str().map(String::from))
        .unwrap_or_default();
    (status, ty)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_calls_never_overrun_the_trial_cost_cap() {
    let up = slow_dollar_upstream().await;
    let proxy = dollar_proxy(&up).await;
    let base = proxy.base_url();
    let token = proxy
        .register_trial(
            "t",
            Budget {
                max_cost_usd: Some(1.0),
                ..Default::default()
            },
        )
        .expect("register");
    let calls: Vec<_> = (0..CALLS)
        .map(|i| tokio::spawn(dollar_call(base.clone(), token.as_str().to_string(), i)))
        .collect();
    let mut served = 0;
    for c in calls {
        let (status, ty) = c.await.expect("call");
        match status {
            200 => served += 1,
            // Held by the running call (retry later) or the budget cannot pay for it.
            429 => assert_eq!(ty, "rate_limit_error"),
            402 => assert_eq!(ty, "billing_error"),
            other => panic!("unexpected status {other} ({ty})"),
        }
    }
    let u = proxy.usage("t").expect("usage");
    assert_eq!(served, 1, "one $1 call fits a $1 cap: {u:?}");
    assert!(
        u.cost_usd <= 1.0 + 1e-9,
        "counted ${} over a $1 cap",
        u.cost_usd
    );
    assert_eq!(
        up.received().len(),
        1,
        "refused calls never reach the provider"
    );
    // Spent: the next call is refused with the quota error, and the trial is marked.
    let (status, ty) = dollar_call(base.clone(), token.as_str().to_string(), 0).await;
    assert_eq!((status, ty.as_str()), (402, "billing_error"));
    let u = proxy.usage("t").expect("usage");
    assert!(u.budget_exhausted);
    assert_eq!(u.exhausted_by, Some(BudgetScope::Trial));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn parallel_trials_never_overrun_the_run_cost_cap() {
    let up = slow_dollar_upstream().await;
    let proxy = dollar_proxy(&up).await;
    let base = proxy.base_url();
    proxy.set_run_budget(RunBudget {
        max_cost_usd: Some(5.0),
        max_tokens: None,
    });
    let tokens: Vec<String> = (0..CALLS)
        .map(|i| {
            proxy
                .register_trial(&format!("t{i}"), Budget::default())
                .expect("register")
                .as_str()
                .to_string()
        })
        .collect();
    // Two rounds: the second comes while nothing is held, and the run is spent after it.
    for _ in 0..2 {
        let calls: Vec<_> = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| tokio::spawn(dollar_call(base.clone(), t.clone(), i)))
            .collect();
        for c in calls {
            let (status, _) = c.await.expect("call");
            assert!(matches!(status, 200 | 402 | 429), "{status}");
        }
        let run = proxy.run_usage();
        assert!(
            run.cost_usd <= 5.0 + 1e-9,
            "counted ${} over a $5 run cap",
            run.cost_usd
        );
    }
    let run = proxy.run_usage();
    assert!((run.cost_usd - 5.0).abs() < 1e-9, "{run:?}");
    assert_eq!(run.requests, 5);
    assert!(run.budget_exhausted, "{run:?}");
    assert_eq!(up.received().len(), 5);
}

#[tokio::test]
async fn a_request_without_an_output_cap_is_reserved_and_sent_with_the_configured_one() {
    let up = slow_dollar_upstream().await;
    let proxy = proxy_with(&up.url(), Default::default(), |c| {
        c.max_output_tokens_when_unset = 1000;
    })
    .await;
    let base = proxy.base_url();
    let token = proxy
        .register_trial(
            "t",
            Budget {
                max_tokens: Some(900),
                ..Default::default()
            },
        )
        .expect("register");
    // Chat Completions without max_tokens: 1000 output tokens + its bytes > 900.
    let r = post(
        &base,
        "/v1/chat/completions",
        token.as_str(),
        &json!({"model":"gpt-x","messages":[]}),
    )
    .await;
    assert_eq!(r.status(), 429);
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["error"]["code"], "insufficient_quota");
    assert!(error_message(&v).contains("worst case"), "{v}");
    assert!(up.received().is_empty());

    let token = proxy
        .register_trial("u", Budget::default())
        .expect("register");
    let r = post(
        &base,
        "/v1/responses",
        token.as_str(),
        &json!({"model":"gpt-x","input":"hi"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let sent = up.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].body["max_output_tokens"], 1000,
        "{:?}",
        sent[0].body
    );
}
