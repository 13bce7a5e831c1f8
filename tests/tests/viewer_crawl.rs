//! Every page of a bundled run, crawled in a real headless Chromium: the run assesses every
//! bundled task with `oracle` and `nop` (nop fails each task, so every grader kind the suite
//! has fails once). From the runs list, every link of every page is followed (pages only: not
//! the JSON API or raw artifacts, whose links must answer too), and each page is checked
//! (`viewer_support::crawl`, which `failures.rs` runs over a run with failures of every
//! grader kind):
//! - a page that says it lists trials ("N matching") lists them: N > 0 and as many rows (every
//!   leaderboard link, the "(all kinds)" ones included, opens a non-empty list);
//! - nothing overflows the page sideways and no chart label is cut off at the chart's edge;
//! - no Rust debug formatting (`Some(..)`, `ChildExit { .. }`) in what the page shows.
//!
//! Then, for each failing trial, its page and its section of `report.html` name every failing
//! check of every grader and its message, show each grader note, and say so where a grader
//! recorded nothing. The live feed of the finished run ends and closes, and no report file
//! holds debug formatting either.

mod viewer_support;

use std::collections::BTreeMap;
use std::time::Duration;

use e2e_tests::{leftovers, run_green};
use green_agent::presentation::values::debug_leaks;
use viewer_support::crawl::{crawl, report_explains_failures, viewer_explains_failures};
use viewer_support::{Browser, start_viewer};

#[tokio::test(flavor = "multi_thread")]
async fn a_crawl_of_a_bundled_run_finds_no_empty_list_and_every_failure_explained() {
    let results = tempfile::tempdir().expect("tempdir");
    let run_id = format!("e2e-crawl-{}", std::process::id());
    let out = run_green(
        &[
            "run",
            "--tasks",
            "tasks/examples",
            "--agents",
            "oracle,nop",
            "--concurrency",
            "2",
            "--run-id",
            &run_id,
            "--results-dir",
            &results.path().display().to_string(),
        ],
        &BTreeMap::new(),
        Duration::from_secs(1800),
    )
    .await;
    out.assert_success();
    assert_eq!(leftovers(&run_id).await, 0, "the run cleaned up");
    // the terminal's messages and every report format: no debug formatting
    for (what, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            debug_leaks(text).is_empty(),
            "{what}: {:?}",
            debug_leaks(text)
        );
    }
    let dir = results.path().join(&run_id);
    for f in green_agent::report::Format::all() {
        let text = std::fs::read_to_string(dir.join(f.file_name())).expect("report");
        let leaks = debug_leaks(&text);
        assert!(leaks.is_empty(), "{}: {leaks:?}", f.file_name());
    }

    let (viewer, url) = start_viewer(results.path()).await;
    let http = reqwest::Client::new();

    // the live feed of a finished run: every event, then `end`, then the stream closes
    let feed = tokio::time::timeout(
        Duration::from_secs(30),
        http.get(format!("{url}/api/runs/{run_id}/events/stream"))
            .send()
            .await
            .expect("feed")
            .text(),
    )
    .await
    .expect("the feed of a finished run closes")
    .expect("feed body");
    assert!(feed.contains("event: run_finished"), "{feed}");
    assert!(
        feed.trim_end().ends_with(r#"data: {"status":"finished"}"#),
        "{feed}"
    );

    let browser = Browser::start().await;
    let crawled = crawl(&browser, &http, &url).await;
    eprintln!(
        "crawled {} pages ({} trial lists), {} other links resolved",
        crawled.pages.len(),
        crawled.lists,
        crawled.other_links.len()
    );
    assert!(
        crawled.lists >= 3,
        "the runs list, the run page and filtered lists were reached"
    );
    assert!(
        crawled.pages.iter().any(|p| p.contains("kind=")),
        "the per-kind leaderboard links were followed"
    );

    // every failing trial's page explains the failure with what its graders recorded
    let (failing, explained) = viewer_explains_failures(&browser, &http, &url, &run_id).await;
    assert_eq!(failing.len(), 9, "nop fails every bundled task");
    eprintln!(
        "{} failing trials: {} failing checks named with their messages; graders that recorded nothing: {:?}",
        failing.len(),
        explained.checks,
        explained.silent
    );
    assert!(explained.checks > 0);
    // and so does each one's section of report.html
    let (sections, _) = report_explains_failures(
        &browser,
        &dir.join("report.html"),
        &e2e_tests::report_json(results.path(), &run_id),
    )
    .await;
    assert_eq!(sections.len(), 9, "a section per failing trial");

    browser.quit().await;
    viewer.kill_tree();
}
