//! The results store and the viewer's data layer on both backends: each scenario runs once on
//! per-run SQLite files and once on a real PostgreSQL server (a private cluster started by the
//! test, `e2e_tests::postgres`), with the same assertions.

use std::path::Path;

use e2e_tests::postgres::Postgres;
use green_agent::database::DatabaseUrl;
use green_agent::store::{
    ArtifactRef, Outcome, PlannedTrial, Store, StoreError, TrialResult, Usage,
};
use green_agent::view::Results;
use green_agent::view::data::{EventQuery, TrialQuery};
use serde_json::json;

fn planned(id: &str, task: &str, agent: &str, repeat: u32) -> PlannedTrial {
    PlannedTrial {
        id: id.into(),
        task_id: task.into(),
        task_kind: "python".into(),
        task_hash: "h".into(),
        agent: agent.into(),
        repeat_index: repeat,
    }
}

fn result(score: Option<f64>, passed: bool, cost: f64, artifacts: Vec<ArtifactRef>) -> TrialResult {
    TrialResult {
        outcome: if score.is_some() {
            Outcome::Completed
        } else {
            Outcome::InfraError
        },
        exit_code: Some(0),
        score,
        passed,
        grade_status: score.map(|_| "ok".into()),
        dimensions: score
            .map(|s| [("code_correctness".to_string(), s)].into())
            .unwrap_or_default(),
        flags: vec!["a flag".into()],
        phases: [("agent".to_string(), 12), ("grade".to_string(), 3)].into(),
        attempts: 1,
        error: score.is_none().then(|| "docker went away".into()),
        isolated: true,
        grade_report: score.map(|s| json!({"score": s, "graders": []})),
        usage: Usage {
            input_tokens: 3,
            output_tokens: 4,
            cache_read_tokens: 5,
            cache_write_tokens: 6,
            requests: 1,
            cost_usd: cost,
        },
        artifacts,
    }
}

async fn open(root: &Path, run: &str, db: Option<&DatabaseUrl>) -> Store {
    Store::open_with(&root.join(run), db).await.expect("store")
}

/// A run is written, reopened, resumed and read back whole, with its events in order.
async fn round_trip(db: Option<DatabaseUrl>) {
    let root = tempfile::tempdir().expect("tempdir");
    let store = open(root.path(), "r1", db.as_ref()).await;
    store
        .create_run(
            "r1",
            &json!({"agents": ["oracle"]}),
            &[
                planned("a", "t1", "oracle", 0),
                planned("b", "t1", "oracle", 1),
            ],
        )
        .await
        .expect("create");
    // planning again (a resume) keeps what is there
    store
        .create_run(
            "r1",
            &json!({"agents": ["x"]}),
            &[planned("a", "t1", "oracle", 0)],
        )
        .await
        .expect("create again");
    store.mark_running("r1", "a").await.expect("running");
    store.mark_running("r1", "b").await.expect("running");
    let sha = store.put_blob(b"hello").expect("blob");
    let done = result(
        Some(1.0),
        true,
        0.5,
        vec![ArtifactRef {
            name: "file:x.py".into(),
            sha256: sha.clone(),
            size: 5,
            media_type: None,
        }],
    );
    store.finish_trial("r1", "a", &done).await.expect("finish");
    // a second write of the same trial replaces its rows (upserts on both backends)
    store
        .finish_trial("r1", "a", &done)
        .await
        .expect("finish again");
    store.close().await;

    let store = Store::open_existing_with(&root.path().join("r1"), "r1", db.as_ref())
        .await
        .expect("reopen");
    assert_eq!(store.get_blob(&sha).expect("blob"), b"hello");
    assert_eq!(
        store.run("r1").await.expect("run").plan["agents"][0],
        "oracle"
    );
    assert_eq!(store.requeue_interrupted("r1").await.expect("requeue"), 1);
    let trials = store.trials("r1").await.expect("trials");
    assert_eq!(trials.len(), 2);
    assert_eq!(trials[0].state, "done");
    assert_eq!(trials[0].result.as_ref(), Some(&done));
    assert_eq!(trials[1].state, "pending");
    assert_eq!(trials[1].planned.repeat_index, 1);
    let kinds: Vec<String> = store
        .events("r1", None)
        .await
        .expect("events")
        .into_iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(
        kinds,
        [
            "run_planned",
            "run_planned",
            "trial_started",
            "trial_started",
            "trial_finished",
            "trial_finished",
            "run_resumed"
        ]
    );
    assert_eq!(
        store.events("r1", Some("b")).await.expect("events").len(),
        1
    );
    store
        .finish_run("r1", "finished")
        .await
        .expect("finish run");
    assert_eq!(store.run("r1").await.expect("run").status, "finished");
    store.close().await;

    let missing = Store::open_existing_with(&root.path().join("nope"), "nope", db.as_ref())
        .await
        .expect_err("no such run");
    assert!(
        matches!(missing, StoreError::RunNotFound(ref r) if r == "nope"),
        "{missing}"
    );
}

/// Two runs side by side (one database, or two files under one results directory) never mix,
/// and the viewer lists, filters, sorts and pages them the same way on both backends.
async fn two_runs_in_the_viewer(db: Option<DatabaseUrl>) {
    let root = tempfile::tempdir().expect("tempdir");
    for (run, agents) in [("run-a", ["oracle", "nop"]), ("run-b", ["nop", "cmd:x"])] {
        let store = open(root.path(), run, db.as_ref()).await;
        let trials: Vec<PlannedTrial> = (0..6)
            .map(|i| {
                planned(
                    &format!("{run}-{i}"),
                    &format!("task-{}", i % 3),
                    agents[i % 2],
                    (i / 2) as u32,
                )
            })
            .collect();
        store
            .create_run(run, &json!({ "agents": agents }), &trials)
            .await
            .expect("create");
        for (i, t) in trials.iter().enumerate().take(5) {
            store.mark_running(run, &t.id).await.expect("running");
            if i < 4 {
                let score = (i != 3).then_some(i as f64 / 4.0);
                store
                    .finish_trial(run, &t.id, &result(score, i == 2, 0.25, vec![]))
                    .await
                    .expect("finish");
            }
        }
        store.close().await;
    }
    if db.is_some() {
        assert!(
            !root.path().join("run-a").join("store.sqlite").exists(),
            "with a database URL no SQLite file is written"
        );
        assert!(root.path().join("run-a").join("blobs").is_dir());
    }

    let results = Results::with_database(root.path(), &[], db.clone()).expect("results");
    let runs = results.runs().await.expect("runs");
    let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    let a = runs.iter().find(|r| r.id == "run-a").expect("run-a");
    assert_eq!(
        (a.trials, a.done, a.running, a.scored, a.passed, a.tasks),
        (6, 4, 1, 3, 1, 3)
    );
    assert_eq!(a.agents, ["oracle", "nop"]);
    assert!((a.cost_usd - 1.0).abs() < 1e-9, "{}", a.cost_usd);
    assert_eq!((a.input_tokens, a.output_tokens), (12, 16));
    assert!((a.mean_score.expect("mean") - 0.25).abs() < 1e-9);
    assert!(a.last_event > 0);

    // sorted by score, descending: NULL scores last on both backends
    let page = results
        .trials(
            "run-a",
            &TrialQuery {
                sort: Some("score".into()),
                order: Some("desc".into()),
                ..TrialQuery::default()
            },
        )
        .await
        .expect("trials");
    assert_eq!(page.total, 6);
    let scores: Vec<Option<f64>> = page.trials.iter().map(|t| t.score).collect();
    assert_eq!(scores, [Some(0.5), Some(0.25), Some(0.0), None, None, None]);
    // ascending: NULLs first
    let asc = results
        .trials(
            "run-a",
            &TrialQuery {
                sort: Some("score".into()),
                ..TrialQuery::default()
            },
        )
        .await
        .expect("trials");
    assert_eq!(asc.trials[0].score, None);
    assert_eq!(asc.trials[5].score, Some(0.5));
    // filters and pages
    let nop = results
        .trials(
            "run-b",
            &TrialQuery {
                agent: Some("nop".into()),
                status: Some("done".into()),
                per_page: Some(1),
                page: Some(2),
                ..TrialQuery::default()
            },
        )
        .await
        .expect("trials");
    assert_eq!((nop.total, nop.trials.len()), (2, 1));
    assert_eq!(nop.trials[0].agent, "nop");
    assert!(nop.trials[0].id.starts_with("run-b-"));
    let passed = results
        .trials(
            "run-a",
            &TrialQuery {
                outcome: Some("passed".into()),
                ..TrialQuery::default()
            },
        )
        .await
        .expect("trials");
    assert_eq!(passed.total, 1);
    assert_eq!(passed.trials[0].id, "run-a-2");
    let infra = results
        .trials(
            "run-a",
            &TrialQuery {
                outcome: Some("infra_error".into()),
                ..TrialQuery::default()
            },
        )
        .await
        .expect("trials");
    assert_eq!(infra.trials[0].failure.as_deref(), Some("infra_error"));

    // one trial, its grade, events
    let t = results.trial("run-a", "run-a-2").await.expect("trial");
    assert_eq!(
        (t.isolated, t.exit_code, t.requests),
        (Some(true), Some(0), 1)
    );
    assert_eq!(t.flags, ["a flag"]);
    assert_eq!(
        results.grade("run-a", "run-a-2").await.expect("grade"),
        Some(json!({"score": 0.5, "graders": []}))
    );
    assert!(
        results.trial("run-a", "run-b-2").await.is_err(),
        "no mixing"
    );
    let events = results
        .events(
            "run-b",
            &EventQuery {
                trial: Some("run-b-1".into()),
                ..EventQuery::default()
            },
        )
        .await
        .expect("events");
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["trial_started", "trial_finished"]);
    let after = results
        .events(
            "run-b",
            &EventQuery {
                after: Some(events[0].seq),
                ..EventQuery::default()
            },
        )
        .await
        .expect("events");
    assert!(after.iter().all(|e| e.seq > events[0].seq));
    assert_eq!(after[0].seq, events[1].seq);

    // the leaderboard's rows
    let rows = results.trial_rows("run-b").await.expect("rows");
    assert_eq!(rows.len(), 6);
    let board = green_agent::view::api::leaderboard_of("run-b", &rows);
    let json = serde_json::to_value(&board).expect("json");
    assert!(json.to_string().contains("cmd:x"), "{json}");

    // a run named on the command line is found (a folder, or the database)
    let named = Results::with_database(root.path(), &["run-b".into()], db.clone()).expect("named");
    let listed: Vec<String> = named
        .runs()
        .await
        .expect("runs")
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, ["run-b"]);
    let unknown = Results::with_database(root.path(), &["run-z".into()], db.clone());
    let unknown = match unknown {
        Err(e) => e.to_string(),
        Ok(r) => r.runs().await.expect_err("run-z").to_string(),
    };
    assert!(unknown.contains("run-z"), "{unknown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_round_trips_on_sqlite() {
    round_trip(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_round_trips_on_postgres() {
    let pg = Postgres::start().await;
    round_trip(Some(pg.url("rb_round_trip").parse().expect("url"))).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_viewer_reads_two_runs_from_sqlite_files() {
    two_runs_in_the_viewer(None).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_viewer_reads_two_runs_from_postgres() {
    let pg = Postgres::start().await;
    two_runs_in_the_viewer(Some(pg.url("rb_viewer").parse().expect("url"))).await;
}

/// Several processes' worth of stores write one PostgreSQL database at once (each run through
/// its own pool, migrations applied concurrently) without losing a row.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_runs_share_one_postgres_database() {
    let pg = Postgres::start().await;
    let db: DatabaseUrl = pg.url("rb_shared").parse().expect("url");
    let root = tempfile::tempdir().expect("tempdir");
    let mut tasks = Vec::new();
    for r in 0..4 {
        let db = db.clone();
        let dir = root.path().join(format!("run-{r}"));
        tasks.push(tokio::spawn(async move {
            let run = format!("run-{r}");
            let store = Store::open_with(&dir, Some(&db)).await.expect("store");
            let trials: Vec<PlannedTrial> = (0..10)
                .map(|i| planned(&format!("t{i}"), "task", "oracle", i))
                .collect();
            store
                .create_run(&run, &json!({"agents": ["oracle"]}), &trials)
                .await
                .expect("create");
            for t in &trials {
                store.mark_running(&run, &t.id).await.expect("running");
                store
                    .finish_trial(&run, &t.id, &result(Some(1.0), true, 0.1, vec![]))
                    .await
                    .expect("finish");
            }
            store.close().await;
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let results = Results::with_database(root.path(), &[], Some(db)).expect("results");
    let runs = results.runs().await.expect("runs");
    assert_eq!(runs.len(), 4);
    for r in runs {
        assert_eq!((r.trials, r.done, r.passed), (10, 10, 10), "{}", r.id);
    }
    drop(pg);
}
