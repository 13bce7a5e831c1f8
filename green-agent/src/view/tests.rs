//! The viewer driven in-process (no socket): a store written through the store's own API, read
//! back through the router.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::{Results, router};
use crate::model::{ArtifactRef, Outcome, PlannedTrial, TrialResult, Usage};
use crate::store::Store;

const RUN: &str = "r-view";

fn planned(id: &str, task: &str, agent: &str) -> PlannedTrial {
    PlannedTrial {
        id: id.into(),
        task_id: task.into(),
        task_kind: "prbench".into(),
        task_hash: "h".into(),
        agent: agent.into(),
        repeat_index: 0,
    }
}

fn grade(score: f64, passed: bool) -> Value {
    json!({
        "score": score, "status": if passed { "pass" } else { "fail" }, "passed": passed,
        "pass_threshold": 0.9,
        "dimensions": {"data_accuracy": {"weight": 1.0, "score": score, "status": "fail",
            "passed": passed, "graders": ["figure 1 data", "unit tests"]}},
        "graders": [
            {"name": "unit tests", "kind": "pytest", "dimension": "data_accuracy", "weight": 1.0,
             "status": "fail", "score": 0.0, "duration_secs": 0.5, "details": [],
             "tests": [{"name": "test_model::test_growth_rate", "status": "fail",
                        "message": "AssertionError: 0.7 != 0.5"}]},
            {"name": "figure 1 data", "kind": "csv", "dimension": "data_accuracy", "weight": 1.0,
             "status": "fail", "score": 0.5, "duration_secs": 0.1, "tests": [],
             "details": ["column N: 1/2 values match"],
             "data": {"score": 0.5, "columns": [{"name": "N", "present": true, "compared": 2,
                 "matched": 1, "max_abs_err": 1.25, "max_rel_err": 0.2, "score": 0.5}],
                 "missing_columns": [], "extra_columns": [], "expected_rows": 2,
                 "actual_rows": 2, "interpolated_rows": 0, "total_misses": 1,
                 "misses": [{"column": "N", "row": 1, "x": 0.5, "expected": 6.330229776,
                             "actual": 7.58, "abs_err": 1.25, "rel_err": 0.2}]}},
            {"name": "votes", "kind": "judge", "dimension": "data_accuracy", "weight": 0.0,
             "status": "pass", "score": 1.0, "duration_secs": 0.1, "tests": [], "details": [],
             "data": {"score": 1.0, "justification": "The method matches the paper.",
                      "model": "panel", "attempts": 1, "prompt_tokens": 1, "completion_tokens": 1,
                      "votes": [{"model": "judge-a", "score": 1.0, "text": "Sound method.", "attempts": 1}]}}
        ]
    })
}

async fn fixture() -> (tempfile::TempDir, Store, Arc<Results>) {
    let root = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&root.path().join(RUN)).await.expect("store");
    store
        .create_run(
            RUN,
            &json!({"agents": ["oracle", "cmd:wrong"]}),
            &[
                planned("t-ok", "prbench-logistic-growth", "oracle"),
                planned("t-bad", "prbench-logistic-growth", "cmd:wrong"),
                planned("t-run", "other-task", "cmd:wrong"),
            ],
        )
        .await
        .expect("create");
    for t in ["t-ok", "t-bad", "t-run"] {
        store.mark_running(RUN, t).await.expect("running");
    }
    let file = store
        .put_blob(b"<script>alert('agent')</script>0123456789")
        .expect("blob");
    let trajectory = store
        .put_blob(
            json!({"schema_version": "ATIF-v1.4", "agent": {"name": "cmd", "version": "1"},
                "steps": [
                    {"step_id": 1, "source": "user", "message": "Reproduce figure 1."},
                    {"step_id": 2, "source": "agent", "message": "<b>writing</b> the CSV",
                     "tool_calls": [{"tool_call_id": "c1", "function_name": "Bash",
                                     "arguments": {"command": "python3 reproduce.py"}}],
                     "observation": {"results": [{"source_call_id": "c1", "content": "done"}]},
                     "metrics": {"prompt_tokens": 120, "completion_tokens": 30}}]})
            .to_string()
            .as_bytes(),
        )
        .expect("blob");
    let result = |score: f64, passed: bool, artifacts: Vec<ArtifactRef>| TrialResult {
        outcome: Outcome::Completed,
        exit_code: Some(0),
        score: Some(score),
        passed,
        grade_status: Some(if passed { "pass" } else { "fail" }.into()),
        dimensions: [("data_accuracy".to_string(), score)].into(),
        flags: vec![],
        phases: [("agent".to_string(), 1200), ("grade".to_string(), 300)].into(),
        attempts: 1,
        error: None,
        isolated: true,
        grade_report: Some(grade(score, passed)),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 10,
            cache_read_tokens: 7,
            cache_write_tokens: 0,
            requests: 2,
            cost_usd: 0.25,
        },
        artifacts,
    };
    store
        .finish_trial(RUN, "t-ok", &result(1.0, true, vec![]))
        .await
        .expect("finish");
    store
        .finish_trial(
            RUN,
            "t-bad",
            &result(
                0.5,
                false,
                vec![
                    ArtifactRef {
                        name: "file:results/page.html".into(),
                        sha256: file,
                        size: 41,
                        media_type: Some("text/html".into()),
                    },
                    ArtifactRef {
                        name: "trajectory".into(),
                        sha256: trajectory,
                        size: 10,
                        media_type: Some("application/json".into()),
                    },
                ],
            ),
        )
        .await
        .expect("finish");
    let results = Arc::new(Results::new(root.path(), &[]).expect("results"));
    (root, store, results)
}

async fn get(results: &Arc<Results>, uri: &str) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    get_with(
        results,
        Request::get(uri).body(Body::empty()).expect("request"),
    )
    .await
}

async fn get_with(
    results: &Arc<Results>,
    req: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let resp = router(results.clone())
        .oneshot(req)
        .await
        .expect("infallible");
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = axum::body::to_bytes(resp.into_body(), 16 * 1024 * 1024)
        .await
        .expect("body");
    (status, headers, body.to_vec())
}

async fn json_of(results: &Arc<Results>, uri: &str) -> Value {
    let (status, _, body) = get(results, uri).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{uri}: {}",
        String::from_utf8_lossy(&body)
    );
    serde_json::from_slice(&body).expect("json")
}

#[tokio::test]
async fn runs_and_trials_are_listed_filtered_sorted_and_paginated() {
    let (_root, _store, results) = fixture().await;
    let runs = json_of(&results, "/api/runs").await;
    assert_eq!(runs[0]["id"], RUN);
    assert_eq!(runs[0]["trials"], 3);
    assert_eq!(runs[0]["done"], 2);
    assert_eq!(runs[0]["running"], 1);
    assert_eq!(runs[0]["cost_usd"], 0.5);

    let page = json_of(&results, &format!("/api/runs/{RUN}/trials?agent=cmd:wrong")).await;
    assert_eq!(page["total"], 2);
    let page = json_of(&results, &format!("/api/runs/{RUN}/trials?outcome=passed")).await;
    assert_eq!(page["total"], 1);
    assert_eq!(page["trials"][0]["id"], "t-ok");
    let page = json_of(
        &results,
        &format!("/api/runs/{RUN}/trials?status=done&sort=score&order=desc&per_page=1&page=2"),
    )
    .await;
    assert_eq!(page["total"], 2);
    assert_eq!(page["trials"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        page["trials"][0]["id"], "t-bad",
        "second by score, descending"
    );

    let (status, _, body) = get(&results, &format!("/api/runs/{RUN}/trials?sort=evil;drop")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("unknown sort"));
    let (status, _, _) = get(&results, "/api/runs/nope/trials").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = get(&results, &format!("/api/runs/{RUN}/trials/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn grade_events_and_leaderboard_come_back() {
    let (_root, _store, results) = fixture().await;
    let g = json_of(&results, &format!("/api/runs/{RUN}/trials/t-bad/grade")).await;
    assert_eq!(g["graders"][1]["data"]["misses"][0]["actual"], 7.58);
    let detail = json_of(&results, &format!("/api/runs/{RUN}/trials/t-bad")).await;
    assert_eq!(detail["artifacts"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        detail["failure"],
        Value::Null,
        "a plain fail is the score speaking"
    );

    let events = json_of(&results, &format!("/api/runs/{RUN}/events?limit=2")).await;
    assert_eq!(events.as_array().map(Vec::len), Some(2));
    let after = events[1]["seq"].as_i64().expect("seq");
    let rest = json_of(&results, &format!("/api/runs/{RUN}/events?after={after}")).await;
    assert!(
        rest.as_array()
            .is_some_and(|e| e.iter().all(|e| e["seq"].as_i64() > Some(after)))
    );
    let finished = json_of(&results, &format!("/api/runs/{RUN}/events?trial=t-ok")).await;
    assert!(
        finished
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["kind"] == "trial_finished"))
    );

    let board = json_of(&results, &format!("/api/runs/{RUN}/leaderboard")).await;
    let overall = board["overall"].as_array().expect("overall");
    assert_eq!(overall[0]["agent"], "oracle", "best mean first");
    assert_eq!(overall[0]["mean"], 1.0);
    assert_eq!(overall[1]["agent"], "cmd:wrong");
    assert_eq!(overall[1]["failures"]["unfinished"], 1);
    assert!(board["by_kind"].as_array().is_some_and(|r| r.len() == 2));
}

#[tokio::test]
async fn artifacts_honour_ranges_and_are_served_inert() {
    let (_root, _store, results) = fixture().await;
    let uri = format!("/api/runs/{RUN}/trials/t-bad/artifacts/file:results/page.html");
    let (status, headers, body) = get(&results, &uri).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.len(), 41);
    let ct = headers[header::CONTENT_TYPE].to_str().expect("ascii");
    assert!(
        ct.starts_with("text/plain"),
        "agent HTML is never served as HTML: {ct}"
    );
    assert!(
        headers[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .is_ok_and(|v| v.contains("sandbox"))
    );

    let req = Request::get(&uri)
        .header(header::RANGE, "bytes=31-")
        .body(Body::empty())
        .expect("request");
    let (status, headers, body) = get_with(&results, req).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(body, b"0123456789");
    assert_eq!(headers[header::CONTENT_RANGE], "bytes 31-40/41");

    let (status, _, _) = get(
        &results,
        &format!("/api/runs/{RUN}/trials/t-bad/artifacts/file:../../store.sqlite"),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "only recorded artifacts are served"
    );
}

#[tokio::test]
async fn the_live_feed_streams_new_events() {
    let (_root, store, results) = fixture().await;
    let last = json_of(&results, &format!("/api/runs/{RUN}")).await["last_event"]
        .as_i64()
        .expect("last");
    let resp = router(results.clone())
        .oneshot(
            Request::get(format!("/api/runs/{RUN}/events/stream?after={last}"))
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(resp.status(), StatusCode::OK);
    assert!(
        resp.headers()[header::CONTENT_TYPE]
            .to_str()
            .is_ok_and(|v| v.starts_with("text/event-stream"))
    );
    let mut body = resp.into_body().into_data_stream();
    store
        .event(RUN, Some("t-run"), "trial_finished", &json!({"score": 0.0}))
        .await
        .expect("event");
    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while !seen.contains("\n\n") {
            let chunk = body.next().await.expect("stream open").expect("chunk");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .expect("an event arrives within 10 s");
    assert!(seen.contains("event: trial_finished"), "{seen}");
    assert!(seen.contains(&format!("id: {}", last + 1)), "{seen}");
    assert!(seen.contains("\"trial_id\":\"t-run\""), "{seen}");
}

#[tokio::test]
async fn pages_render_the_grading_breakdown_and_escape_agent_text() {
    let (_root, _store, results) = fixture().await;
    for uri in [
        "/".to_owned(),
        format!("/runs/{RUN}"),
        format!("/runs/{RUN}/leaderboard"),
    ] {
        let (status, _, body) = get(&results, &uri).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{uri}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (status, _, body) = get(&results, &format!("/runs/{RUN}/trials/t-bad")).await;
    let html = String::from_utf8(body).expect("utf-8");
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("test_model::test_growth_rate"));
    assert!(html.contains("AssertionError: 0.7 != 0.5"));
    assert!(
        html.contains("7.58") && html.contains("6.330229776"),
        "CSV mismatch cells"
    );
    assert!(html.contains("Sound method.") && html.contains("The method matches the paper."));
    assert!(html.contains("Reproduce figure 1."), "the instruction");
    assert!(html.contains("python3 reproduce.py"), "a tool call");
    assert!(!html.contains("<script>alert"), "agent text is escaped");
    assert!(!html.contains("<b>writing</b>"), "agent text is escaped");
    assert!(html.contains("&lt;b&gt;writing&lt;&#x2f;b&gt;"));
    let (status, _, _) = get(&results, &format!("/runs/{RUN}/trials/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn agents_are_compared_in_pairs() {
    let (_root, _store, results) = fixture().await;
    let pairs = json_of(&results, &format!("/api/runs/{RUN}/compare")).await;
    assert_eq!(pairs.as_array().map(Vec::len), Some(1));
    assert_eq!(pairs[0]["a"], "oracle");
    assert_eq!(pairs[0]["b"], "cmd:wrong");
    assert_eq!(pairs[0]["tasks"], 1);
    assert_eq!(pairs[0]["mean_diff"], 0.5);
    assert_eq!(pairs[0]["mcnemar"]["a_better"], 1);
    let (status, _, body) = get(
        &results,
        &format!("/api/runs/{RUN}/compare?agents=oracle,ghost"),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).contains("ghost"));
    let cross = json_of(&results, &format!("/api/compare?runs={RUN}")).await;
    assert_eq!(cross, pairs, "one run across runs is that run");
    let board = json_of(&results, "/api/leaderboard").await;
    assert_eq!(board["run"], RUN);
    assert_eq!(board["overall"].as_array().map(Vec::len), Some(2));
    for uri in ["/leaderboard", "/compare"] {
        let (status, _, body) = get(&results, uri).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{uri}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (status, _, _) = get(&results, "/api/leaderboard?runs=nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, body) = get(
        &results,
        &format!("/runs/{RUN}/compare?agents=oracle,cmd:wrong"),
    )
    .await;
    let html = String::from_utf8(body).expect("utf-8");
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("diff-plot-1") && html.contains("pair-row"));
}

#[tokio::test]
async fn cached_trial_rows_follow_the_run() {
    let (_root, store, results) = fixture().await;
    let before = json_of(&results, &format!("/api/runs/{RUN}/leaderboard")).await;
    let cmd = |b: &Value| {
        b["overall"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["agent"] == "cmd:wrong").cloned())
            .expect("cmd row")
    };
    assert_eq!(cmd(&before)["finished"], 1);
    let run_page = |html: Vec<u8>| String::from_utf8(html).expect("utf-8");
    let (_, _, page) = get(&results, &format!("/runs/{RUN}")).await;
    assert!(
        !run_page(page).contains(r#">timeout</span></td><td class="num">1</td>"#),
        "no timeout yet"
    );
    let mut result = TrialResult {
        outcome: Outcome::Timeout,
        exit_code: None,
        score: Some(0.0),
        passed: false,
        grade_status: Some("fail".into()),
        dimensions: Default::default(),
        flags: vec![],
        phases: Default::default(),
        attempts: 1,
        error: None,
        isolated: true,
        grade_report: None,
        usage: Usage::default(),
        artifacts: vec![],
    };
    result.flags.push("late".into());
    store
        .finish_trial(RUN, "t-run", &result)
        .await
        .expect("finish");
    let after = json_of(&results, &format!("/api/runs/{RUN}/leaderboard")).await;
    assert_eq!(cmd(&after)["finished"], 2, "the new trial is seen");
    assert_eq!(cmd(&after)["failures"]["timeout"], 1);
    // the run page's cached failures by cause follow too
    let (_, _, page) = get(&results, &format!("/runs/{RUN}")).await;
    assert!(
        run_page(page).contains(r#">timeout</span></td><td class="num">1</td>"#),
        "the run page shows the new failure"
    );
}

#[tokio::test]
async fn a_store_from_before_the_cache_token_columns_still_reads() {
    let (root, store, _) = fixture().await;
    store.close().await;
    let path = root.path().join(RUN).join(crate::store::DB_FILE);
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("rw");
    for col in ["cache_read_tokens", "cache_write_tokens"] {
        sqlx::query(&format!("ALTER TABLE usage DROP COLUMN {col}"))
            .execute(&pool)
            .await
            .expect("drop column");
    }
    pool.close().await;
    let results = Arc::new(Results::new(root.path(), &[]).expect("results"));
    let page = json_of(&results, &format!("/api/runs/{RUN}/trials?status=done")).await;
    assert_eq!(page["total"], 2);
    let board = json_of(&results, &format!("/api/runs/{RUN}/leaderboard")).await;
    assert_eq!(board["overall"][0]["input_tokens"], 100);
}

#[test]
fn the_openapi_document_is_stable() {
    use utoipa::OpenApi;
    insta::assert_json_snapshot!("openapi", super::api::ApiDoc::openapi());
}

/// The live feed of a running run stays open; once the run is over it sends every event, then
/// one `end` event naming the status, and closes (a client reading to the end returns).
#[tokio::test]
async fn the_live_feed_of_a_finished_run_ends_and_closes() {
    let (_root, store, results) = fixture().await;
    let uri = format!("/api/runs/{RUN}/events/stream");
    let open = tokio::time::timeout(std::time::Duration::from_secs(2), get(&results, &uri)).await;
    assert!(open.is_err(), "the feed of a running run stays open");
    store.finish_run(RUN, "finished").await.expect("finish");
    let (status, headers, body) =
        tokio::time::timeout(std::time::Duration::from_secs(10), get(&results, &uri))
            .await
            .expect("the feed of a finished run closes");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/event-stream");
    let body = String::from_utf8(body).expect("utf-8");
    assert!(body.contains("event: trial_finished"), "{body}");
    let end = body.find("event: end").expect("an end event");
    assert!(
        body[end..].contains(r#"data: {"status":"finished"}"#),
        "{body}"
    );
    assert!(
        !body[end..].contains("id:"),
        "the end event comes after every event: {body}"
    );
}
