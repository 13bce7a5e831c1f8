//! The viewer on a 10,000-trial run: times (first request and median of 7) of the API's trial
//! list and leaderboard, the run page, a trial page and the paired comparison, each printed with
//! its ratio to the budget the viewer's issue sets (API < 200 ms, pages < 500 ms), then
//! `report` in each format streamed from the same store as `green-agent report` writes it
//! (median and range of 3, and how far each raised this process's peak RSS, a lower bound:
//! the allocator reuses what the viewer part freed; `scripts/bench` measures the command's own
//! peak; HTML's budget 2 s), and report.html as the end of a run renders it. Prints; asserts
//! nothing.
//!
//! Runs on a per-run SQLite file, then, when `BENCH_DATABASE_URL` names a PostgreSQL database
//! (`scripts/bench` starts a private server for it), on that database.
//!
//! `cargo bench -p green-agent --bench view_10k` (release) or add `--profile dev` for a quick look.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use green_agent::database::DatabaseUrl;
use green_agent::store::Store;
use green_agent::view::{Results, router};
use tower::ServiceExt;

const TRIALS: usize = 10_000;
const RUN: &str = "bench-10k";

fn grade(i: usize) -> String {
    serde_json::json!({
        "score": (i % 11) as f64 / 10.0, "status": "fail", "passed": false, "pass_threshold": 0.9,
        "dimensions": {"code_correctness": {"weight": 1.0, "score": 0.5, "status": "fail",
            "passed": false, "graders": ["unit tests"]}},
        "graders": [{"name": "unit tests", "kind": "pytest", "dimension": "code_correctness",
            "weight": 1.0, "status": "fail", "score": 0.5, "duration_secs": 1.0, "details": [],
            "tests": (0..20).map(|t| serde_json::json!({"name": format!("test_{t}"),
                "status": if t % 2 == 0 { "pass" } else { "fail" },
                "message": "AssertionError: values differ"})).collect::<Vec<_>>()}]
    })
    .to_string()
}

async fn fill(dir: &std::path::Path, run: &str, db: Option<&DatabaseUrl>) {
    // the schema through the store itself, the rows in one transaction
    Store::open_with(dir, db)
        .await
        .expect("store")
        .close()
        .await;
    let pool = match db {
        Some(url) => green_agent::database::connect_postgres(url, 1, false).await,
        None => {
            green_agent::database::connect_sqlite(&dir.join(green_agent::store::DB_FILE), false, 1)
                .await
        }
    }
    .expect("rw");
    let mut tx = pool.begin().await.expect("tx");
    sqlx::query("INSERT INTO runs (id, created_at, plan, status) VALUES ($1, '2026-01-01T00:00:00Z', $2, 'finished')")
        .bind(run)
        .bind(r#"{"agents": ["a0", "a1", "a2", "a3", "a4"]}"#)
        .execute(&mut *tx)
        .await
        .expect("run");
    for i in 0..TRIALS {
        let id = format!("trial-{i:05}");
        sqlx::query(
            "INSERT INTO trials (run_id, id, task_id, task_kind, task_hash, agent, repeat_index, state, \
             outcome, score, passed, grade_status, dimensions, phases, attempts, started_at, finished_at) \
             VALUES ($1, $2, $3, $4, 'h', $5, $6, 'done', 'completed', $7, 0, 'fail', \
             '{\"code_correctness\": 0.5}', '{\"agent\": 1200, \"grade\": 300}', 1, \
             '2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z')",
        )
        .bind(run)
        .bind(&id)
        .bind(format!("task-{}", i / 50))
        .bind(format!("kind-{}", i % 7))
        .bind(format!("a{}", i % 5))
        .bind((i / 5 % 10) as i64)
        .bind((i % 11) as f64 / 10.0)
        .execute(&mut *tx)
        .await
        .expect("trial");
        sqlx::query("INSERT INTO grades (run_id, trial_id, score, status, report) VALUES ($1, $2, 0.5, 'fail', $3)")
            .bind(run)
            .bind(&id)
            .bind(grade(i))
            .execute(&mut *tx)
            .await
            .expect("grade");
        sqlx::query("INSERT INTO usage (run_id, trial_id, input_tokens, output_tokens, requests, cost_usd) VALUES ($1, $2, 1000, 100, 3, 0.01)")
            .bind(run)
            .bind(&id)
            .execute(&mut *tx)
            .await
            .expect("usage");
    }
    sqlx::query("INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, NULL, '2026-01-01T00:02:00Z', 'run_finished', '{}')")
        .bind(run)
        .execute(&mut *tx)
        .await
        .expect("event");
    tx.commit().await.expect("commit");
    if db.is_some() {
        // as autovacuum would soon after a bulk load: planner statistics for the new rows
        sqlx::query("ANALYZE")
            .execute(&pool)
            .await
            .expect("analyze");
    }
    pool.close().await;
}

/// (first request, median of the 7): the first reads the store, later ones of the dashboard's
/// trial-wide views hit the viewer's per-run caches (rows, leaderboard, comparison, the run
/// page's plots: valid until the run's next event).
async fn time(results: &Arc<Results>, uri: &str) -> (Duration, Duration) {
    let mut samples = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        let resp = router(results.clone())
            .oneshot(Request::get(uri).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        assert!(resp.status().is_success(), "{uri}: {}", resp.status());
        axum::body::to_bytes(resp.into_body(), 64 * 1024 * 1024)
            .await
            .expect("body");
        samples.push(start.elapsed());
    }
    let first = samples[0];
    samples.sort();
    (first, samples[samples.len() / 2])
}

#[tokio::main]
async fn main() {
    bench("SQLite (one file per run)", None).await;
    match std::env::var("BENCH_DATABASE_URL") {
        Ok(url) if !url.trim().is_empty() => {
            let db: DatabaseUrl = url.parse().expect("BENCH_DATABASE_URL");
            bench(&format!("PostgreSQL ({db})"), Some(db)).await;
        }
        _ => println!(
            "\n(BENCH_DATABASE_URL not set: PostgreSQL not measured; scripts/bench sets it)"
        ),
    }
}

async fn bench(backend: &str, db: Option<DatabaseUrl>) {
    println!("\n== {backend}");
    let root = tempfile::tempdir().expect("tempdir");
    // a fresh id per bench run: a shared database keeps earlier ones
    let run_id = format!("{RUN}-{}", std::process::id());
    let run = run_id.as_str();
    let started = Instant::now();
    fill(&root.path().join(run), run, db.as_ref()).await;
    println!(
        "filled a {TRIALS}-trial run in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let direct = Results::with_database(root.path(), &[], db.clone()).expect("results");
    let started = Instant::now();
    let rows = direct.trial_rows(run).await.expect("rows");
    let read = started.elapsed().as_secs_f64() * 1000.0;
    let started = Instant::now();
    let table = green_agent::presentation::summary::summarize(&rows);
    let summarised = started.elapsed().as_secs_f64() * 1000.0;
    // the same query alone (rows fetched as the driver gives them, not converted)
    let pool = match db.as_ref() {
        Some(url) => green_agent::database::connect_postgres(url, 1, false).await,
        None => {
            green_agent::database::connect_sqlite(
                &root.path().join(run).join(green_agent::store::DB_FILE),
                true,
                1,
            )
            .await
        }
    }
    .expect("pool");
    let started = Instant::now();
    let raw = sqlx::query(
        "SELECT t.*, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, \
         u.requests, u.cost_usd FROM trials t LEFT JOIN usage u ON u.run_id = t.run_id AND \
         u.trial_id = t.id WHERE t.run_id = $1 ORDER BY t.task_id, t.agent, t.repeat_index",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .expect("query");
    let queried = started.elapsed().as_secs_f64() * 1000.0;
    pool.close().await;
    println!(
        "(reading {} trials: {read:.1} ms, of which the query alone {queried:.1} ms for {} rows; \
         summarising them into {} rows: {summarised:.1} ms)",
        rows.len(),
        raw.len(),
        table.len(),
    );
    // a fresh viewer: the first request of each trial-wide view reads the store
    let results = Arc::new(Results::with_database(root.path(), &[], db.clone()).expect("results"));
    for (what, uri, budget_ms) in [
        (
            "API trial list (page of 100, filtered, sorted)",
            format!("/api/runs/{run}/trials?agent=a1&sort=score&order=desc&per_page=100"),
            Some(200.0),
        ),
        (
            "API leaderboard",
            format!("/api/runs/{run}/leaderboard"),
            Some(200.0),
        ),
        ("API run list", "/api/runs".to_owned(), Some(200.0)),
        (
            "run page (HTML, plots, first 100 trials)",
            format!("/runs/{run}"),
            Some(500.0),
        ),
        (
            "trial page (HTML)",
            format!("/runs/{run}/trials/trial-04242"),
            Some(500.0),
        ),
        (
            "paired comparison (5 agents, 10 pairs, 10k resamples each)",
            format!("/api/runs/{run}/compare"),
            None,
        ),
    ] {
        let (first, median) = time(&results, &uri).await;
        let (first, median) = (first.as_secs_f64() * 1000.0, median.as_secs_f64() * 1000.0);
        match budget_ms {
            Some(b) => println!(
                "{what:<60} first {first:>8.1} ms ({:.2} of {b:.0} ms)   median {median:>8.1} ms ({:.2})",
                first / b,
                median / b
            ),
            None => println!("{what:<60} first {first:>8.1} ms   median {median:>8.1} ms"),
        }
    }
    drop(results);
    // `green-agent view` warms its newest runs at startup; a request after that finds them
    let warmed = Arc::new(Results::with_database(root.path(), &[], db.clone()).expect("results"));
    let started = Instant::now();
    green_agent::view::warm(warmed.clone()).await;
    println!(
        "startup warm-up of a fresh viewer (run list, leaderboard, run page): {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    for (what, uri, b) in [
        (
            "  then API leaderboard",
            format!("/api/runs/{run}/leaderboard"),
            200.0,
        ),
        (
            "  then run page (HTML, plots, first 100 trials)",
            format!("/runs/{run}"),
            500.0,
        ),
    ] {
        let (first, median) = time(&warmed, &uri).await;
        let (first, median) = (first.as_secs_f64() * 1000.0, median.as_secs_f64() * 1000.0);
        println!(
            "{what:<60} first {first:>8.1} ms ({:.2} of {b:.0} ms)   median {median:>8.1} ms ({:.2})",
            first / b,
            median / b
        );
    }
    drop(warmed);
    // the static reports from the same store, as `green-agent report` writes them (streamed),
    // and the HTML as the end of a run writes it (loaded, then rendered)
    let store = Store::open_existing_with(&root.path().join(run), run, db.as_ref())
        .await
        .expect("store");
    for format in [
        green_agent::report::Format::named("html").expect("a format"),
        green_agent::report::Format::named("json").expect("a format"),
        green_agent::report::Format::named("md").expect("a format"),
        green_agent::report::Format::named("csv").expect("a format"),
    ] {
        let mut samples = Vec::new();
        let mut size = 0;
        let mut peak = 0.0f64;
        for _ in 0..3 {
            let mut out = Counting(0);
            let base = reset_peak_rss();
            let started = Instant::now();
            green_agent::report::write_report(&store, run, format, &mut out)
                .await
                .expect("report");
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
            peak = peak.max(peak_rss_mib().map_or(0.0, |p| p - base.unwrap_or(0.0)));
            size = out.0;
        }
        samples.sort_by(f64::total_cmp);
        let name = format!("report --format {} (streamed)", format.extension());
        println!(
            "{name:<60} median {:>8.1} ms, range {:.1}–{:.1} ({:.2} of 2000 ms; {:.1} MiB; this process's peak RSS +{peak:.0} MiB)",
            samples[1],
            samples[0],
            samples[2],
            samples[1] / 2000.0,
            size as f64 / 1_048_576.0,
        );
    }
    let started = Instant::now();
    let data = green_agent::report::ReportData::load(&store, run)
        .await
        .expect("report data");
    let loaded = started.elapsed().as_secs_f64() * 1000.0;
    let started = Instant::now();
    let html = data.render(green_agent::report::Format::named("html").expect("a format"));
    let rendered = started.elapsed().as_secs_f64() * 1000.0;
    println!(
        "{:<60} load {loaded:>8.1} ms + render {rendered:>8.1} ms ({:.1} MiB)",
        "report.html at the end of a run (loaded, then rendered)",
        html.len() as f64 / 1_048_576.0
    );
    store.close().await;
}

/// A writer that only counts bytes.
struct Counting(usize);

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A `/proc/self/status` field in MiB.
fn status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Resets the process's peak RSS to its current RSS (Linux: `5` into `/proc/self/clear_refs`)
/// and returns that RSS, MiB.
fn reset_peak_rss() -> Option<f64> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    status_mib("VmRSS:")
}

/// The process's peak RSS since the last reset, MiB.
fn peak_rss_mib() -> Option<f64> {
    status_mib("VmHWM:")
}
