//! Every page of a bundled run, crawled in a real headless Chromium: the run assesses every
//! bundled task with `oracle` and `nop` (nop fails each task, so every grader kind the suite
//! has fails once). From the runs list, every link of every page is followed (pages only: not
//! the JSON API or raw artifacts), and each page is checked:
//! - a page that says it lists trials ("N matching") lists them: N > 0 and as many rows (every
//!   leaderboard link, the "(all kinds)" ones included, opens a non-empty list);
//! - nothing overflows the page sideways and no chart label is cut off at the chart's edge;
//! - no Rust debug formatting (`Some(..)`, `ChildExit { .. }`) in what the page shows.
//!
//! Then, for each failing trial, its page names every failing check of every grader and its
//! message, shows each grader note, and says so where a grader recorded nothing. The live feed
//! of the finished run ends and closes, and no report file holds debug formatting either.

mod viewer_support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use e2e_tests::{leftovers, run_green};
use green_agent::presentation::values::debug_leaks;
use serde_json::Value;
use viewer_support::{Browser, start_viewer};

/// Most pages crawled (the bundled run has a few dozen).
const MAX_PAGES: usize = 300;

/// Statuses of a check that passed (or did not fail).
fn passing(status: &str) -> bool {
    matches!(status, "pass" | "passed" | "ok" | "compile_ok" | "skipped")
}

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
    let mut queue = VecDeque::from([format!("{url}/")]);
    let mut seen: BTreeSet<String> = queue.iter().cloned().collect();
    let mut lists = 0;
    while let Some(page) = queue.pop_front() {
        assert!(seen.len() <= MAX_PAGES, "more pages than a bundled run has");
        browser.goto(&page).await;
        let info = browser
            .eval(
                "const m = document.body.innerText.match(/\\((\\d+) matching\\)/); \
                 const svgCut = Array.from(document.querySelectorAll('svg text.label'))\
                   .filter(t => t.getBBox().x < -0.5).map(t => t.textContent); \
                 return { text: document.body.innerText, \
                   links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href), \
                   matching: m ? Number(m[1]) : null, \
                   rows: document.querySelectorAll('table#trials tr.trial-row').length, \
                   overflow: document.documentElement.scrollWidth - document.documentElement.clientWidth, \
                   cut: svgCut };",
            )
            .await;
        let text = info["text"].as_str().unwrap_or_default();
        let leaks = debug_leaks(text);
        assert!(leaks.is_empty(), "{page}: {leaks:?}");
        if let Some(n) = info["matching"].as_u64() {
            lists += 1;
            assert!(n > 0, "{page} lists no trial");
            let rows = info["rows"].as_u64().unwrap_or(0);
            assert_eq!(rows, n.min(100), "{page}: says {n} matching, shows {rows}");
        }
        assert!(
            info["overflow"].as_i64().unwrap_or(0) <= 1,
            "{page} overflows sideways by {}px",
            info["overflow"]
        );
        assert_eq!(info["cut"], serde_json::json!([]), "{page}: labels cut off");
        for link in info["links"].as_array().into_iter().flatten() {
            let Some(link) = link.as_str() else { continue };
            let link = link.split('#').next().unwrap_or(link).to_owned();
            let path = link.strip_prefix(&url).unwrap_or("");
            if !link.starts_with(&url)
                || path.starts_with("/api/")
                || path.starts_with("/assets/")
                || path.contains("/artifacts/")
            {
                continue;
            }
            if seen.insert(link.clone()) {
                queue.push_back(link);
            }
        }
    }
    eprintln!("crawled {} pages ({lists} trial lists)", seen.len());
    assert!(
        lists >= 3,
        "the runs list, the run page and filtered lists were reached"
    );
    assert!(
        seen.iter().any(|p| p.contains("kind=")),
        "the per-kind leaderboard links were followed"
    );

    // every failing trial's page explains the failure with what its graders recorded
    let page: Value = http
        .get(format!("{url}/api/runs/{run_id}/trials?per_page=500"))
        .send()
        .await
        .expect("trials")
        .json()
        .await
        .expect("json");
    let failing: Vec<String> = page["trials"]
        .as_array()
        .expect("trials")
        .iter()
        .filter(|t| t["passed"] == false)
        .filter_map(|t| t["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(failing.len(), 9, "nop fails every bundled task");
    let mut silent = Vec::new();
    let mut checks = 0;
    for id in &failing {
        let grade: Value = http
            .get(format!("{url}/api/runs/{run_id}/trials/{id}/grade"))
            .send()
            .await
            .expect("grade")
            .json()
            .await
            .expect("json");
        browser
            .goto(&format!("{url}/runs/{run_id}/trials/{id}"))
            .await;
        // textContent: closed <details> (long messages) count too
        let shown = browser
            .eval("return document.querySelector('#grading').textContent;")
            .await;
        let shown = shown.as_str().unwrap_or_default();
        let mut explained = false;
        for g in grade["graders"].as_array().into_iter().flatten() {
            if passing(g["status"].as_str().unwrap_or("")) {
                continue;
            }
            let name = g["name"].as_str().unwrap_or_default();
            assert!(shown.contains(name), "{id}: grader {name} not shown");
            for t in g["tests"].as_array().into_iter().flatten() {
                if passing(t["status"].as_str().unwrap_or("")) {
                    continue;
                }
                let test = t["name"].as_str().unwrap_or_default();
                assert!(shown.contains(test), "{id}: failing check {test} not named");
                if let Some(message) = t["message"].as_str() {
                    assert!(
                        shown.contains(message),
                        "{id}: the message of {test} not shown: {message}"
                    );
                }
                checks += 1;
                explained = true;
            }
            for d in g["details"].as_array().into_iter().flatten() {
                let d = d.as_str().unwrap_or_default();
                assert!(shown.contains(d), "{id}: note not shown: {d}");
                explained = true;
            }
            if g["tests"].as_array().is_none_or(Vec::is_empty)
                && g["details"].as_array().is_none_or(Vec::is_empty)
                && g["data"].is_null()
            {
                assert!(
                    shown.contains("recorded no detail"),
                    "{id}: grader {name} recorded nothing and the page does not say so"
                );
                silent.push(format!("{id} ({})", g["kind"].as_str().unwrap_or(name)));
            } else {
                explained = true;
            }
        }
        assert!(
            explained || !silent.is_empty(),
            "{id}: nothing on the page says why it failed"
        );
    }
    eprintln!(
        "{} failing trials: {checks} failing checks named with their messages; graders that recorded nothing: {silent:?}",
        failing.len()
    );
    assert!(checks > 0);

    browser.quit().await;
    viewer.kill_tree();
}
