//! A run page open in headless Chromium follows a live run: `green-agent view` is started on an
//! empty results directory, a run begins (one trial at a time, agents that take a few seconds),
//! and the page that was opened while nothing had finished updates in place (Server-Sent
//! Events, no reload) until every trial is done and the run is finished. Once with per-run
//! SQLite files, once with the rows in a real PostgreSQL server (the viewer started before the
//! run has created its database).

mod viewer_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::postgres::Postgres;
use e2e_tests::{leftovers, spawn_green};
use serde_json::Value;
use viewer_support::{Browser, screenshot_dir, start_viewer_with};

#[tokio::test(flavor = "multi_thread")]
async fn a_run_page_updates_as_trials_finish() {
    follow_a_live_run(BTreeMap::new(), "live").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_page_updates_as_trials_finish_on_postgres() {
    let pg = Postgres::start().await;
    let env = BTreeMap::from([("RB_DATABASE_URL".to_owned(), pg.url("rb_viewer_live"))]);
    follow_a_live_run(env, "live-postgres").await;
    drop(pg);
}

async fn follow_a_live_run(env: BTreeMap<String, String>, label: &str) {
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-viewer-{label}-{}", std::process::id());
    let (viewer, url) = start_viewer_with(results.path(), &env).await;
    let shots = screenshot_dir(label);

    let mut run = spawn_green(
        &[
            "run",
            "--tasks",
            "tasks/examples/generic-csv-stats,tasks/examples/harbor-primes",
            "--agents",
            "nop",
            "--agent",
            "cmd:sleep 4",
            "--concurrency",
            "1",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &env,
    );

    // wait until the viewer sees the run, before its first trial finishes
    let http = reqwest::Client::new();
    let api = format!("{url}/api/runs/{run_id}");
    let first = tokio::time::timeout(Duration::from_secs(300), async {
        loop {
            if let Ok(r) = http.get(&api).send().await
                && r.status().is_success()
                && let Ok(v) = r.json::<Value>().await
            {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "the run never appeared; green-agent:\n{}",
            run.stderr_tail()
        )
    });
    assert_eq!(first["trials"], 4);

    let browser = Browser::start().await;
    browser.goto(&format!("{url}/runs/{run_id}")).await;
    let done_at_load: i64 = browser
        .text("#progress")
        .await
        .split('/')
        .next()
        .and_then(|d| d.trim().parse().ok())
        .expect("progress N / M");
    assert!(
        done_at_load < 4,
        "the page was opened mid-run ({done_at_load} done)"
    );
    // a marker that a reload would wipe out
    browser
        .eval("window.__no_reload = 'still here'; return true;")
        .await;
    browser.screenshot(&shots.join("1-started.png")).await;

    browser
        .wait_until(
            "const p = document.getElementById('progress'); \
             return !!p && p.innerText.trim() === '4 / 4' \
                 && document.getElementById('run-status').innerText === 'finished';",
            Duration::from_secs(600),
        )
        .await;
    let exit = tokio::time::timeout(Duration::from_secs(120), run.wait())
        .await
        .expect("the run exits");
    assert!(exit.success(), "run failed: {}", run.stderr_tail());

    assert_eq!(
        browser.eval("return window.__no_reload || null;").await,
        "still here",
        "the page updated in place, without a reload"
    );
    let updates: i64 = browser
        .eval("return Number(document.getElementById('live').dataset.updates || 0);")
        .await
        .as_i64()
        .unwrap_or(0);
    assert!(
        updates >= 1,
        "the live region was refreshed by the event feed ({updates} times)"
    );
    let rows = browser
        .eval("return Array.from(document.querySelectorAll('tr.trial-row td:nth-child(5)')).map(e => e.innerText);")
        .await;
    assert_eq!(
        rows,
        serde_json::json!(["done", "done", "done", "done"]),
        "every trial row shows done"
    );
    browser.screenshot(&shots.join("2-finished.png")).await;

    browser.quit().await;
    viewer.kill_tree();
    assert_eq!(leftovers(&run_id).await, 0, "the run cleaned up");
}
