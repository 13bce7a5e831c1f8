//! Report formats rendered from a fixture store (md, json and csv are snapshot-tested; html is
//! checked for being one self-contained file with inline SVG and a section per trial).

use std::collections::BTreeMap;

use green_agent::report::{Format, ReportData};
use green_agent::store::{ArtifactRef, Outcome, PlannedTrial, Store, TrialResult, Usage};

fn planned(task: &str, kind: &str, agent: &str, repeat: u32) -> PlannedTrial {
    PlannedTrial {
        id: green_agent::identity::trial_id(&format!("hash-{task}"), agent, repeat),
        task_id: task.into(),
        task_kind: kind.into(),
        task_hash: format!("hash-{task}"),
        agent: agent.into(),
        repeat_index: repeat,
    }
}

fn result(outcome: Outcome, score: Option<f64>, dims: &[(&str, f64)]) -> TrialResult {
    TrialResult {
        outcome,
        exit_code: match outcome {
            Outcome::Crashed => Some(3),
            Outcome::Completed => Some(0),
            _ => None,
        },
        score,
        passed: score.is_some_and(|s| s >= 0.9),
        grade_status: Some(
            if score.is_some() {
                "ok"
            } else {
                "judge_invalid"
            }
            .into(),
        ),
        dimensions: dims.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        flags: if outcome == Outcome::Timeout {
            vec!["timeout after 5s".into()]
        } else {
            vec![]
        },
        phases: BTreeMap::from([
            ("create".to_string(), 120),
            ("ready".to_string(), 300),
            ("agent".to_string(), 2000),
            ("collect".to_string(), 80),
            ("grade".to_string(), 900),
        ]),
        attempts: 1,
        error: None,
        isolated: true,
        grade_report: Some(serde_json::json!({
            "score": score,
            "graders": [{ "name": "unit tests", "score": score, "details": ["3/4 tests passed"] }]
        })),
        usage: Usage {
            input_tokens: 1000,
            output_tokens: 200,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            requests: 3,
            cost_usd: 0.0125,
        },
        artifacts: vec![],
    }
}

async fn fixture() -> (tempfile::TempDir, ReportData) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path()).await.expect("store");
    let rows = vec![
        (
            planned("prbench-a", "prbench", "oracle", 0),
            Some(result(
                Outcome::Completed,
                Some(1.0),
                &[("code_correctness", 1.0), ("data_accuracy", 1.0)],
            )),
        ),
        (
            planned("prbench-a", "prbench", "cmd:python solve.py", 0),
            Some(result(
                Outcome::Timeout,
                Some(0.4),
                &[("code_correctness", 0.5), ("data_accuracy", 0.35)],
            )),
        ),
        (
            planned("prbench-a", "prbench", "cmd:python solve.py", 1),
            Some(result(
                Outcome::Completed,
                Some(0.9),
                &[("code_correctness", 1.0), ("data_accuracy", 0.85)],
            )),
        ),
        (
            planned("scicode-b", "scicode", "cmd:python solve.py", 0),
            Some(result(
                Outcome::Crashed,
                Some(0.0),
                &[("code_correctness", 0.0)],
            )),
        ),
        (
            planned("scicode-b", "scicode", "cmd:python solve.py", 1),
            Some(result(Outcome::Completed, None, &[])),
        ),
        (planned("scicode-b", "scicode", "oracle", 0), None),
    ];
    let plans: Vec<PlannedTrial> = rows.iter().map(|(p, _)| p.clone()).collect();
    store
        .create_run(
            "fixture-run",
            &serde_json::json!({ "agents": ["oracle", "cmd:python solve.py"] }),
            &plans,
        )
        .await
        .expect("run");
    let sha = store.put_blob(b"def f():\n    return 1\n").expect("blob");
    for (p, r) in &rows {
        if let Some(r) = r {
            let mut r = r.clone();
            r.artifacts.push(ArtifactRef {
                name: "file:solve.py".into(),
                sha256: sha.clone(),
                size: 22,
                media_type: Some("text/x-python".into()),
            });
            store
                .mark_running("fixture-run", &p.id)
                .await
                .expect("running");
            store
                .finish_trial("fixture-run", &p.id, &r)
                .await
                .expect("finish");
        }
    }
    store
        .finish_run("fixture-run", "incomplete")
        .await
        .expect("finish run");
    let mut data = ReportData::load(&store, "fixture-run").await.expect("load");
    // timestamps are the only non-deterministic fields
    data.run.created_at = "2026-01-01T00:00:00.000Z".into();
    data.run.finished_at = Some("2026-01-01T01:00:00.000Z".into());
    for t in &mut data.trials {
        t.started_at = None;
        t.finished_at = None;
    }
    (dir, data)
}

#[tokio::test]
async fn markdown_report() {
    let (_dir, data) = fixture().await;
    insta::assert_snapshot!(data.render(Format::named("md").expect("a format")));
}

#[tokio::test]
async fn json_report() {
    let (_dir, data) = fixture().await;
    let text = data.render(Format::named("json").expect("a format"));
    let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    assert_eq!(v["trials"].as_array().map(Vec::len), Some(6));
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn csv_report() {
    let (_dir, data) = fixture().await;
    let text = data.render(Format::named("csv").expect("a format"));
    let mut rd = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(rd.records().count(), 6);
    insta::assert_snapshot!(text);
}

#[tokio::test]
async fn html_report_is_self_contained() {
    let (_dir, data) = fixture().await;
    let html = data.render(Format::named("html").expect("a format"));
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(
        html.contains("<svg"),
        "inline plots: {}",
        &html[..html.len().min(600)]
    );
    assert!(
        !html.contains("<script src")
            && !html.contains("<link ")
            && !html.contains("http://")
            && !html.contains("https://"),
        "no external resources"
    );
    assert!(
        html.contains("<style>") && html.contains("<script>"),
        "inlined"
    );
    assert_eq!(
        html.matches("<section class=\"trial-section\"").count(),
        6,
        "a section per trial"
    );
    assert_eq!(html.matches("<tr class=\"trial-row").count(), 6);
    // the dashboard's views: run overview plots, leaderboard, comparison, trial pages
    for id in [
        "id=\"score-plot\"",
        "id=\"phase-plot\"",
        "id=\"board-overall\"",
        "id=\"board-kinds\"",
        "id=\"pairs\"",
        "id=\"t1-trial-score\"",
        "id=\"t1-timeline-plot\"",
        "id=\"summary-table\"",
    ] {
        assert!(html.contains(id), "{id} is rendered");
    }
    // (autoescaped: `/` is written `&#x2f;`)
    assert!(
        html.contains("3&#x2f;4 tests passed"),
        "grader details shown"
    );
    assert!(html.contains("Strict mean ± 95% CI") && html.contains("Not graded"));
    assert!(html.contains("strict mean: over every planned trial"));
    // every id is unique (trial sections prefix theirs)
    let mut ids: Vec<&str> = html
        .split(" id=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate ids in the report");
    // a grade is shown as the trial page shows it, never as a dump of keys
    assert!(!html.contains("<dl>"), "no raw key/value dumps");
}

#[tokio::test]
async fn summary_groups_by_agent_and_kind() {
    let (_dir, data) = fixture().await;
    let s = &data.summary;
    assert_eq!(
        s.len(),
        6,
        "four (agent, kind) rows and one all-kinds row per agent"
    );
    let cmd_pr = s
        .iter()
        .find(|r| r.agent == "cmd:python solve.py" && r.task_kind == "prbench")
        .expect("row");
    assert_eq!(cmd_pr.scored, 2);
    assert!((cmd_pr.mean.expect("mean") - 0.65).abs() < 1e-9);
    assert!(cmd_pr.ci95.is_some());
    assert_eq!(cmd_pr.k, 2);
    assert_eq!(cmd_pr.failures.get("timeout"), Some(&1));
    let cmd_sc = s
        .iter()
        .find(|r| r.agent == "cmd:python solve.py" && r.task_kind == "scicode")
        .expect("row");
    assert_eq!(cmd_sc.failures.get("crashed (exit 3)"), Some(&1));
    assert_eq!(cmd_sc.failures.get("judge_invalid"), Some(&1));
    // the judge_invalid trial is left out of the mean, counted as 0 in the strict mean
    assert_eq!((cmd_sc.scored, cmd_sc.excluded), (1, 1));
    assert_eq!(cmd_sc.strict_mean, Some(0.0));
    let oracle_sc = s
        .iter()
        .find(|r| r.agent == "oracle" && r.task_kind == "scicode")
        .expect("row");
    assert_eq!(oracle_sc.failures.get("unfinished"), Some(&1));
    assert_eq!(oracle_sc.mean, None);
    assert_eq!(oracle_sc.strict_mean, Some(0.0));
    assert_eq!(
        oracle_sc.pass_at_k,
        Some(0.0),
        "the unfinished trial is a failed sample"
    );
}

#[tokio::test]
async fn prbench_eval_report_has_each_dimension_with_its_justification() {
    let (_dir, data) = fixture().await;
    let t = data
        .trials
        .iter()
        .find(|t| t.planned.task_kind == "prbench" && t.planned.agent == "oracle")
        .expect("trial");
    let v = green_agent::presentation::prbench::eval_report(t).expect("report");
    assert_eq!(v["overall_score"], 1.0);
    // PRBench's shape: each dimension the trial has, with its score and a justification.
    assert_eq!(v["scores"]["data_accuracy"]["score"], 1.0);
    assert!(v["scores"]["data_accuracy"]["justification"].is_string());
    assert_eq!(v["grading"]["overall_score"], 1.0);
    assert!(v["grading"]["summary"].is_string());
    assert!(
        v["scores"]["methodology"].is_null(),
        "a dimension the trial lacks is absent"
    );
}

/// `report` streams (bounded memory); what it writes is exactly what the in-memory render
/// gives, in every format.
#[tokio::test]
async fn streamed_reports_equal_the_rendered_ones() {
    let (dir, _) = fixture().await;
    let store = Store::open(dir.path()).await.expect("store");
    let data = ReportData::load(&store, "fixture-run").await.expect("load");
    for format in Format::all() {
        let mut streamed = Vec::new();
        green_agent::report::write_report(&store, "fixture-run", format, &mut streamed)
            .await
            .expect("write");
        assert_eq!(
            String::from_utf8(streamed).expect("utf-8"),
            data.render(format),
            "{format:?}"
        );
    }
    // an empty run too
    store
        .create_run("empty-run", &serde_json::json!({}), &[])
        .await
        .expect("run");
    let empty = ReportData::load(&store, "empty-run").await.expect("load");
    for format in Format::all() {
        let mut streamed = Vec::new();
        green_agent::report::write_report(&store, "empty-run", format, &mut streamed)
            .await
            .expect("write");
        assert_eq!(
            String::from_utf8(streamed).expect("utf-8"),
            empty.render(format),
            "{format:?}"
        );
    }
}
