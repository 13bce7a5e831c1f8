//! `green-agent view` in a real headless Chromium: a run of two bundled tasks with `oracle`,
//! `nop` and a `cmd:` agent that submits wrong figure data, then runs list → leaderboard → run
//! page → a trial page, asserting on the rendered DOM (score, failing test name, a CSV mismatch
//! cell, a trajectory step), then the paired comparison page, saving a screenshot of each page under
//! `target/viewer-screenshots/`. Once with per-run SQLite files, once with the run's rows in a
//! real PostgreSQL server (`RB_DATABASE_URL` for both the run and the viewer).

mod viewer_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::postgres::Postgres;
use e2e_tests::{leftovers, run_green};
use viewer_support::{Browser, screenshot_dir, start_viewer_with};

/// Writes the figure's grid (t = 0, 0.5, ..., 20) with N wrong everywhere but t = 0.
const WRONG_DATA: &str = "cmd:python3 -c \"import os; os.makedirs('results', exist_ok=True); \
open('results/logistic.csv', 'w').write('t,N\\n' + ''.join('%s,%s\\n' % (i / 2, 5 + i / 2) for i in range(41)))\"";

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_reads_why_each_agent_scored_what_it_scored() {
    browse(BTreeMap::new(), "browser").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_browser_reads_a_run_stored_in_postgres() {
    let pg = Postgres::start().await;
    let env = BTreeMap::from([("RB_DATABASE_URL".to_owned(), pg.url("rb_viewer_browser"))]);
    browse(env, "browser-postgres").await;
    drop(pg);
}

async fn browse(env: BTreeMap<String, String>, label: &str) {
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-{label}-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            "tasks/examples/generic-csv-stats,tasks/examples/prbench-logistic-growth",
            "--agents",
            "oracle,nop",
            "--agent",
            WRONG_DATA,
            "--concurrency",
            "3",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &env,
        Duration::from_secs(1200),
    )
    .await;
    out.assert_success();
    assert_eq!(leftovers(&run_id).await, 0, "the run cleaned up");
    assert_eq!(
        results
            .path()
            .join(&run_id)
            .join(green_agent::store::DB_FILE)
            .is_file(),
        env.is_empty(),
        "with a database URL the rows are only in the database"
    );

    let (viewer, url) = start_viewer_with(results.path(), &env).await;
    let shots = screenshot_dir(label);
    let browser = Browser::start().await;

    // runs list
    browser.goto(&format!("{url}/")).await;
    let html = browser.html().await;
    assert!(html.contains(&run_id), "the run is listed");
    assert_eq!(
        browser.text("tr.run-row td:nth-child(4) .small").await,
        "6/6"
    );
    browser.screenshot(&shots.join("1-runs.png")).await;

    // run page
    browser.click("a.run-link").await;
    assert!(browser.url().await.ends_with(&format!("/runs/{run_id}")));
    let rows = browser
        .eval("return document.querySelectorAll('tr.trial-row').length;")
        .await;
    assert_eq!(rows, 6);
    // The run ended before the page was rendered: its live feed only says so and closes; the
    // rows are never swapped under the reader (a click on a row being replaced is lost).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        browser
            .eval("return Number(document.getElementById('live').dataset.updates || 0);")
            .await,
        0,
        "a finished run's page is not fetched again"
    );
    assert!(
        browser.html().await.contains("id=\"score-plot\""),
        "the score plot is drawn"
    );
    browser.screenshot(&shots.join("2-run.png")).await;

    // leaderboard
    browser.click("#nav-leaderboard").await;
    let oracle = browser
        .text("#board-overall tr[data-agent='oracle'] td.mean")
        .await;
    assert_eq!(
        oracle, "1.00",
        "the oracle's mean score, no interval over two trials"
    );
    let nop = browser
        .text("#board-overall tr[data-agent='nop'] td.mean")
        .await;
    assert_eq!(nop, "0.00", "{nop}");
    browser.screenshot(&shots.join("3-leaderboard.png")).await;

    // the wrong-data agent's prbench trial, reached from its leaderboard row
    browser
        .click("#board-kinds tr[data-agent^='cmd:'][data-kind='prbench'] td:nth-child(2) a")
        .await;
    let here = browser.url().await;
    assert!(
        here.contains("agent=cmd") && here.contains("kind=prbench"),
        "{here}"
    );
    assert_eq!(
        browser
            .eval("return document.querySelectorAll('tr.trial-row').length;")
            .await,
        1
    );
    browser.click("tr.trial-row a.trial-link").await;
    assert!(
        browser
            .text("h1")
            .await
            .starts_with("prbench-logistic-growth")
    );
    let score: f64 = browser
        .text("#trial-score")
        .await
        .parse()
        .expect("a numeric score");
    assert!(score < 1.0, "wrong data does not score full marks: {score}");
    let html = browser.html().await;
    // a failing test, by name
    let failing = browser
        .eval(
            "return Array.from(document.querySelectorAll('tr.test.st-fail td.test-name'))\
             .map(e => e.innerText);",
        )
        .await;
    assert!(
        failing.as_array().is_some_and(|a| a
            .iter()
            .any(|t| t.as_str().is_some_and(|t| t.contains("test_")))),
        "a failing test is named: {failing}"
    );
    // a CSV mismatch cell: t = 0.5, expected 6.330229776, submitted 5.5
    let miss = browser
        .eval(
            "const r = Array.from(document.querySelectorAll('table.csv-mismatch tr.miss'))\
             .find(tr => tr.cells[2].innerText === '0.5'); \
             return r ? [r.cells[3].innerText, r.cells[4].innerText] : null;",
        )
        .await;
    assert_eq!(miss, serde_json::json!(["6.330229776", "5.5"]), "{html}");
    // a trajectory step: the instruction as the agent received it
    let step = browser.text("li.step summary .chip.src").await;
    assert_eq!(step, "user");
    assert!(
        browser.text("#instruction pre").await.contains("logistic"),
        "the instruction is shown"
    );
    assert_eq!(
        browser.text("#files details.file summary .badge").await,
        "new file",
        "the CSV the agent wrote is new to the task's workspace"
    );
    browser.screenshot(&shots.join("4-trial.png")).await;

    // the paired comparison of the run's agents, from the navigation bar
    browser.click("#nav-compare").await;
    let pairs = browser
        .eval("return document.querySelectorAll('tr.pair-row').length;")
        .await;
    assert_eq!(pairs, 3, "three agents, three pairs");
    let first = browser.text("tr.pair-row td.diff").await;
    assert_eq!(first, "1.00", "oracle − nop on every task");
    assert!(browser.html().await.contains("id=\"diff-plot-1\""));
    browser.screenshot(&shots.join("5-compare.png")).await;

    browser.quit().await;
    viewer.kill_tree();
    for name in [
        "1-runs.png",
        "2-run.png",
        "3-leaderboard.png",
        "4-trial.png",
    ] {
        let size = std::fs::metadata(shots.join(name)).map_or(0, |m| m.len());
        assert!(size > 10_000, "{name} is a real screenshot ({size} bytes)");
    }
}
