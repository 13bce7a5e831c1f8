//! What the crawls of a finished run share (the bundled run in `viewer_crawl.rs`, the run with
//! failures of every grader kind in `failures.rs`): every page of the viewer, followed link by
//! link in a headless Chromium, and what a failing trial's page and its `report.html` section
//! must say, taken from the stored grade report.

use std::collections::{BTreeSet, VecDeque};
use std::path::Path;
use std::time::Duration;

use green_agent::presentation::values::debug_leaks;
use serde_json::Value;

use super::Browser;

/// Most pages crawled (a test run has a few dozen).
const MAX_PAGES: usize = 300;

/// What a crawl reached.
#[derive(Debug, Default)]
pub struct Crawled {
    /// Every page visited (URLs without fragment).
    pub pages: BTreeSet<String>,
    /// Every other link checked (JSON API, raw artifacts, assets).
    pub other_links: BTreeSet<String>,
    /// Pages saying "(N matching)": lists of trials.
    pub lists: usize,
}

/// From the runs list, every link of every page: each page and each other link of the viewer
/// answers with a success (no 404); pages are followed (not the JSON API, assets or raw
/// artifacts) and each is checked:
/// - a page that says it lists trials ("N matching") lists them: N > 0 and as many rows;
/// - nothing overflows the page sideways and no chart label is cut off at the chart's edge;
/// - no Rust debug formatting (`Some(..)`, `ChildExit { .. }`) in what the page shows.
pub async fn crawl(browser: &Browser, http: &reqwest::Client, url: &str) -> Crawled {
    let mut queue = VecDeque::from([format!("{url}/")]);
    let mut seen: BTreeSet<String> = queue.iter().cloned().collect();
    let mut other = BTreeSet::new();
    let mut lists = 0;
    while let Some(page) = queue.pop_front() {
        assert!(seen.len() <= MAX_PAGES, "more pages than a test run has");
        assert_resolves(http, &page).await;
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
            if !link.starts_with(url) {
                continue;
            }
            let path = link.strip_prefix(url).unwrap_or("");
            if path.starts_with("/api/")
                || path.starts_with("/assets/")
                || path.contains("/artifacts/")
            {
                if other.insert(link.clone()) {
                    assert_resolves(http, &link).await;
                }
                continue;
            }
            if seen.insert(link.clone()) {
                queue.push_back(link);
            }
        }
    }
    Crawled {
        pages: seen,
        other_links: other,
        lists,
    }
}

/// `link` answers with a success status (read to its end, within a minute).
async fn assert_resolves(http: &reqwest::Client, link: &str) {
    let resp = tokio::time::timeout(Duration::from_secs(60), async {
        let r = http.get(link).send().await?;
        let status = r.status();
        r.bytes().await.map(|_| status)
    })
    .await
    .unwrap_or_else(|_| panic!("{link} did not answer within a minute"))
    .unwrap_or_else(|e| panic!("{link}: {e}"));
    assert!(resp.is_success(), "{link} answers {resp}");
}

/// Statuses of a check that passed (or did not fail).
pub fn passing(status: &str) -> bool {
    matches!(status, "pass" | "passed" | "ok" | "compile_ok" | "skipped")
}

/// A text as a browser's `textContent` gives it back from an HTML page: line ends as `\n`;
/// a `<pre>`'s leading newline is dropped by the parser, so the ends are trimmed.
fn as_shown(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .trim()
        .to_owned()
}

/// How a failing trial's page explained it.
#[derive(Debug, Default)]
pub struct Explained {
    /// Failing checks named with their messages.
    pub checks: usize,
    /// Graders that recorded nothing (the page says so), as `kind`.
    pub silent: Vec<String>,
}

/// `shown` (the text of a trial's grading section) names every failing grader of `grade` (a
/// stored grade report), every failing check of each and its message, and each grader note;
/// a failing grader that recorded nothing is said to have recorded nothing; and no debug
/// formatting is in it.
pub fn assert_explains(what: &str, shown: &str, grade: &Value) -> Explained {
    let shown = shown.replace("\r\n", "\n");
    // the whole section, folded notes and long messages included: no debug formatting
    let leaks = debug_leaks(&shown);
    assert!(leaks.is_empty(), "{what}: {leaks:?}");
    let mut out = Explained::default();
    let mut explained = false;
    let graders = grade["graders"].as_array().cloned().unwrap_or_default();
    for g in &graders {
        if passing(g["status"].as_str().unwrap_or("")) {
            continue;
        }
        let name = g["name"].as_str().unwrap_or_default();
        assert!(shown.contains(name), "{what}: grader {name} not shown");
        for t in g["tests"].as_array().into_iter().flatten() {
            if passing(t["status"].as_str().unwrap_or("")) {
                continue;
            }
            let test = t["name"].as_str().unwrap_or_default();
            assert!(
                shown.contains(test),
                "{what}: failing check {test} not named"
            );
            if let Some(message) = t["message"].as_str() {
                let message = as_shown(message);
                assert!(
                    shown.contains(&message),
                    "{what}: the message of {test} not shown: {message}"
                );
            }
            out.checks += 1;
            explained = true;
        }
        for d in g["details"].as_array().into_iter().flatten() {
            let d = as_shown(d.as_str().unwrap_or_default());
            assert!(shown.contains(&d), "{what}: note not shown: {d}");
            explained = true;
        }
        if g["tests"].as_array().is_none_or(Vec::is_empty)
            && g["details"].as_array().is_none_or(Vec::is_empty)
            && g["data"].is_null()
        {
            assert!(
                shown.contains("recorded no detail"),
                "{what}: grader {name} recorded nothing and the page does not say so"
            );
            out.silent
                .push(g["kind"].as_str().unwrap_or(name).to_owned());
        } else {
            explained = true;
        }
    }
    assert!(
        explained || !out.silent.is_empty(),
        "{what}: nothing on the page says why it failed"
    );
    out
}

/// Every failing trial of `run_id` (`passed` false, from the viewer's API): its trial page's
/// grading section explains it ([`assert_explains`], against the grade report the API gives
/// from the store). Returns the failing trials' ids, with their grading sections' text, and
/// what the pages explained in all.
pub async fn viewer_explains_failures(
    browser: &Browser,
    http: &reqwest::Client,
    url: &str,
    run_id: &str,
) -> (Vec<(String, String)>, Explained) {
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
    let mut all = Explained::default();
    let mut shown_texts = Vec::new();
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
        let shown = shown.as_str().unwrap_or_default().to_owned();
        let e = assert_explains(&format!("viewer, trial {id}"), &shown, &grade);
        all.checks += e.checks;
        all.silent
            .extend(e.silent.into_iter().map(|k| format!("{id} ({k})")));
        shown_texts.push((id.clone(), shown));
    }
    (shown_texts, all)
}

/// `report.html` of a run, opened from its file in the browser: each failing trial of
/// `report_json` (the run's `report.json`: its stored grade reports) has a section whose
/// grading part explains it ([`assert_explains`]); every link inside the report goes to an
/// element of the report (it is one file: no link leaves it, no anchor dangles); no debug
/// formatting in what it shows. Returns the failing trials' grading texts.
pub async fn report_explains_failures(
    browser: &Browser,
    report_html: &Path,
    report_json: &Value,
) -> (Vec<(String, String)>, Explained) {
    browser
        .goto(&format!("file://{}", report_html.display()))
        .await;
    let links = browser
        .eval(
            "return Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'));",
        )
        .await;
    let mut anchors = 0;
    for href in links.as_array().into_iter().flatten() {
        let href = href.as_str().unwrap_or_default();
        let id = href
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("report.html links out of itself: {href}"));
        if id.is_empty() {
            continue; // the trajectory's expand/collapse toggles
        }
        let found = browser
            .eval(&format!(
                "return document.getElementById({}) !== null;",
                serde_json::json!(id)
            ))
            .await;
        assert_eq!(found, Value::Bool(true), "report.html: #{id} goes nowhere");
        anchors += 1;
    }
    assert!(anchors > 0, "report.html links its trials' sections");
    let text = browser.eval("return document.body.innerText;").await;
    let leaks = debug_leaks(text.as_str().unwrap_or_default());
    assert!(leaks.is_empty(), "report.html: {leaks:?}");

    let mut all = Explained::default();
    let mut shown_texts = Vec::new();
    for t in report_json["trials"].as_array().expect("trials") {
        if t["passed"] != false {
            continue;
        }
        let id = t["id"].as_str().expect("trial id");
        // the section's grading part: `t<index>-grading` inside `trial-<id>`
        let shown = browser
            .eval(&format!(
                "const s = document.getElementById({}); \
                 const g = s && s.querySelector('section[id$=\"-grading\"]'); \
                 return g ? g.textContent : null;",
                serde_json::json!(format!("trial-{id}"))
            ))
            .await;
        let shown = shown
            .as_str()
            .unwrap_or_else(|| panic!("report.html: no section with a grading part for {id}"))
            .to_owned();
        let e = assert_explains(&format!("report.html, trial {id}"), &shown, &t["grade"]);
        all.checks += e.checks;
        all.silent
            .extend(e.silent.into_iter().map(|k| format!("{id} ({k})")));
        shown_texts.push((id.to_owned(), shown));
    }
    (shown_texts, all)
}
