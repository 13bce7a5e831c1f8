//! Judge-based graders end to end: files read from a real grading container, a scripted local
//! judge (127.0.0.1), PaperBench roots recomputed by us.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::routing::post;
use common::Grading;
use rubrics::Status;
use rubrics::judge::{Judge, JudgeConfig};
use serde_json::{Value, json};

type Seen = Arc<Mutex<Vec<String>>>;

/// A deterministic stand-in judge: for a flag requirement ("... named 'N.txt' ... contents
/// '0x…'") it answers 1 when the fenced data holds that file with that content; discrepancy
/// questions get 1; criteria questions get a malformed answer.
async fn judge(State(seen): State<Seen>, Json(body): Json<Value>) -> Json<Value> {
    let user = body["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    seen.lock().expect("lock").push(user.clone());
    let content = if let Some(start) = user.find("contents '") {
        let flag = &user[start + 10..start + 20];
        let name_at = user.find("named '").map(|i| i + 7).unwrap_or(0);
        let name = &user[name_at..user[name_at..].find('\'').map_or(name_at, |e| name_at + e)];
        let needle = format!("AGENT FILE {name:?} (untrusted data):\n<<<BEGIN ");
        let ok = user
            .find(&needle)
            .is_some_and(|i| user[i..].lines().nth(2).is_some_and(|l| l.trim() == flag));
        json!({"score": if ok { 1 } else { 0 }, "justification": format!("{name} checked")})
            .to_string()
    } else if user.contains("REFERENCE") {
        json!({"score": 1, "justification": "same discrepancy"}).to_string()
    } else {
        "Looks fine to me!".to_owned()
    };
    Json(
        json!({"choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}),
    )
}

async fn mock() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(judge))
        .with_state(seen.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(l, app).await.expect("serve") });
    (format!("http://{addr}/v1"), seen)
}

#[tokio::test]
async fn shared_data_paperbench_discrepancy_and_invalid_judge() {
    let shared = bench_data::path("paperbench/fixtures");
    let rubric = std::fs::read(shared.join("hex_flags.json")).expect("fixture");
    let gold = |i: u32| {
        std::fs::read(shared.join(format!("submissions/hex_flags/gold/{i}.txt")))
            .expect("gold flag")
    };
    let (f1, f2, f4, f5) = (gold(1), gold(2), gold(4), gold(5));
    let g = Grading::new(
        "python",
        &[
            ("1.txt", &f1),
            ("2.txt", &f2),
            ("3.txt", b"0xdeadbeef"),
            ("4.txt", &f4),
            ("5.txt", &f5),
            (
                "report.md",
                b"The code divides by N where the paper uses N-1 (stats.py line 12).",
            ),
        ],
        &[
            ("rubric.json", &rubric),
            (
                "discrepancy.txt",
                b"Variance normalised by N in code, N-1 in the paper.",
            ),
            ("criteria.md", b"The report is precise."),
        ],
    )
    .await;
    let (base, seen) = mock().await;
    let mut cfg = JudgeConfig::new(base, "mock-judge");
    cfg.backoff_ms = 10;
    let judge = Judge::with_key(cfg, None).expect("judge");
    let report = g
        .grade(
            r#"
            [dimensions]
            code_correctness = 0.5
            data_accuracy = 0.5
            [[graders]]
            name = "flags"
            dimension = "code_correctness"
            check = { kind = "paperbench_tree", hidden_rubric = "rubric.json", categories = ["Code Development"] }
            [[graders]]
            name = "discrepancy"
            dimension = "data_accuracy"
            check = { kind = "discrepancy", output = "report.md", hidden_reference = "discrepancy.txt" }
            "#,
            Some(&judge),
            Duration::from_secs(300),
        )
        .await;
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
    let flags = &report.graders[0];
    if flags.score != Some(0.8) {
        let seen = seen.lock().expect("lock");
        println!("FIRST PROMPT:\n{}", seen.first().expect("prompt"));
    }
    assert_eq!(flags.tests.len(), 5);
    assert!(
        (flags.score.expect("scored") - 0.8).abs() < 1e-12,
        "{flags:?}"
    );
    assert_eq!(
        flags
            .tests
            .iter()
            .filter(|t| t.status == Status::Fail)
            .count(),
        1
    );
    assert_eq!(report.graders[1].score, Some(1.0));
    assert!((report.score.expect("score") - 0.9).abs() < 1e-12);
    {
        let seen = seen.lock().expect("lock");
        let last = seen.last().expect("a prompt");
        assert!(last.contains("Variance normalised by N"), "reference shown");
        assert!(last.contains("<<<BEGIN DATA-"), "report fenced");
        assert!(
            !seen.iter().any(|p| p.contains("criteria.md")),
            "held-out paths never shown"
        );
    }

    // A judge that breaks the protocol: judge_invalid, the grade has no score (never a 0).
    let report = g
        .grade(
            r#"
            [[graders]]
            name = "precision"
            dimension = "methodology"
            check = { kind = "judge", hidden_criteria = "criteria.md", outputs = ["report.md"] }
            "#,
            Some(&judge),
            Duration::from_secs(300),
        )
        .await;
    g.remove().await;
    let r = &report.graders[0];
    assert_eq!((r.status, r.score), (Status::JudgeInvalid, None));
    assert_eq!(report.score, None);
    assert_eq!(report.status, Status::JudgeInvalid);
}

/// The report as JSON without the `attempts` fields (0 for a verdict served from the cache).
fn without_attempts(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.remove("attempts");
                m.remove("duration_secs");
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

#[tokio::test]
async fn shared_data_regrading_with_cached_verdicts_asks_nothing_and_gives_the_identical_grade() {
    let shared = bench_data::path("paperbench/fixtures");
    let rubric = std::fs::read(shared.join("hex_flags.json")).expect("fixture");
    let gold = |i: u32| {
        std::fs::read(shared.join(format!("submissions/hex_flags/gold/{i}.txt")))
            .expect("gold flag")
    };
    let (f1, f2, f4) = (gold(1), gold(2), gold(4));
    let g = Grading::new(
        "python",
        &[
            ("1.txt", &f1),
            ("2.txt", &f2),
            ("3.txt", b"0xdeadbeef"),
            ("4.txt", &f4),
            (
                "report.md",
                b"The code divides by N where the paper uses N-1.",
            ),
        ],
        &[
            ("rubric.json", &rubric),
            (
                "discrepancy.txt",
                b"Variance normalised by N in code, N-1 in the paper.",
            ),
        ],
    )
    .await;
    let spec = r#"
        [dimensions]
        code_correctness = 0.5
        data_accuracy = 0.5
        [[graders]]
        name = "flags"
        dimension = "code_correctness"
        check = { kind = "paperbench_tree", hidden_rubric = "rubric.json", categories = ["Code Development"] }
        [[graders]]
        name = "discrepancy"
        dimension = "data_accuracy"
        check = { kind = "discrepancy", output = "report.md", hidden_reference = "discrepancy.txt" }
        "#;
    let (base, seen) = mock().await;
    // One cache shared by two judges built separately, as a run and its resume share the store.
    let cache: Arc<dyn rubrics::judge::VerdictCache> =
        Arc::new(rubrics::judge::MemoryCache::default());
    let build = || {
        let mut cfg = JudgeConfig::new(base.clone(), "mock-judge");
        cfg.backoff_ms = 10;
        Judge::with_key(cfg, None)
            .expect("judge")
            .with_cache(cache.clone())
    };
    let first = g
        .grade(spec, Some(&build()), Duration::from_secs(300))
        .await;
    let asked = seen.lock().expect("lock").len();
    assert!(asked >= 2, "the leaves and the discrepancy asked: {asked}");
    let again = g
        .grade(spec, Some(&build()), Duration::from_secs(300))
        .await;
    g.remove().await;
    assert_eq!(
        seen.lock().expect("lock").len(),
        asked,
        "a re-grade asks the judge nothing"
    );
    assert!(first.score.is_some(), "{first:?}");
    assert_eq!(first.score, again.score);
    assert_eq!(first.status, again.status);
    assert_eq!(first.dimensions, again.dimensions);
    assert_eq!(
        without_attempts(serde_json::to_value(&first).expect("json")),
        without_attempts(serde_json::to_value(&again).expect("json")),
        "the same grade, verdict for verdict"
    );
    let cached = serde_json::to_value(&again.graders[1]).expect("json");
    assert_eq!(
        cached["data"]["attempts"], 0,
        "served from the cache: {cached}"
    );
}
