//! A resume takes up the agents a killed run left before it starts anything new, within
//! seconds, and never has more trials at work than `--concurrency` (reattached ones count).
//!
//! Real waits: 4 trials of an agent that sleeps 15 s, `--concurrency 2`. The green agent is
//! SIGKILLed once 2 agents are at work (their first model call made); `resume` follows. From
//! the attempts table (timestamps written by the resumed process) the test reads: when each
//! left agent was reattached (seconds after the resume started), that every attempt the resume
//! started afresh began after both reattachments, and how many attempts of the resume were
//! open at once (each holds one of the `--concurrency` slots while it is open).

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use e2e_tests::{
    counting_proxy_config, leftovers, model_call_command, proxy_calls, spawn_green, write_task,
};
use green_agent::store::{AttemptRow, Store};

const TESTS: &str = r#"import os

WS = os.environ.get("WORKSPACE", "/workspace")


def test_done():
    assert open(os.path.join(WS, "out.txt")).read().strip() == "done"
"#;

/// Seconds since the epoch of a stored timestamp (`YYYY-MM-DDTHH:MM:SS.mmmZ`, UTC).
fn epoch_secs(stamp: &str) -> f64 {
    let (date, time) = stamp.trim_end_matches('Z').split_once('T').expect("a T");
    let d: Vec<i64> = date.split('-').map(|p| p.parse().expect("date")).collect();
    let (y, m, day) = (d[0], d[1], d[2]);
    // days from the civil date (proleptic Gregorian), 1970-01-01 = 0
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let t: Vec<f64> = time.split(':').map(|p| p.parse().expect("time")).collect();
    days as f64 * 86_400.0 + t[0] * 3600.0 + t[1] * 60.0 + t[2]
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

/// The largest number of `intervals` open at one time (an end before a start at equal times).
fn most_at_once(intervals: &[(f64, f64)]) -> usize {
    let mut edges: Vec<(f64, i32)> = intervals
        .iter()
        .flat_map(|&(a, b)| [(a, 1), (b, -1)])
        .collect();
    edges.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    let (mut open, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        open += step;
        most = most.max(open);
    }
    usize::try_from(most).unwrap_or(0)
}

#[test]
fn at_most_counts_overlaps() {
    assert_eq!(most_at_once(&[(0.0, 1.0), (1.0, 2.0)]), 1);
    assert_eq!(most_at_once(&[(0.0, 3.0), (1.0, 2.0), (1.5, 4.0)]), 3);
    assert_eq!(epoch_secs("1970-01-02T00:00:01.500Z"), 86_401.5);
    assert_eq!(epoch_secs("2000-03-01T00:00:00.000Z"), 951_868_800.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_reattaches_left_agents_first_within_seconds_and_keeps_the_concurrency() {
    let tasks = tempfile::tempdir().expect("tempdir");
    write_task(
        tasks.path(),
        "sleepy",
        "Write `done` to out.txt.\n",
        TESTS,
        "echo done > out.txt",
        "python",
    );
    let calls_dir = tasks.path().join("calls");
    std::fs::create_dir_all(&calls_dir).expect("calls dir");
    let proxy = tasks.path().join("proxy.toml");
    std::fs::write(&proxy, counting_proxy_config(&calls_dir, "hello")).expect("proxy config");
    let call = model_call_command("hello");
    let agent = format!("cmd:{call} && sleep 15 && echo done > out.txt");
    let results = tempfile::tempdir().expect("tempdir");
    let results_s = results.path().display().to_string();
    let run_id = format!("e2e-resume-order-{}", std::process::id());
    let run_dir = results.path().join(&run_id);
    let mut child = spawn_green(
        &[
            "run",
            "--tasks",
            &tasks.path().join("sleepy").display().to_string(),
            "--agent",
            &agent,
            "--repeats",
            "4",
            "--concurrency",
            "2",
            "--proxy-config",
            &proxy.display().to_string(),
            "--poll-interval",
            "200ms",
            "--run-id",
            &run_id,
            "--results-dir",
            &results_s,
        ],
        &BTreeMap::new(),
    );
    // Two agents accepted their task and made their first call: kill the green agent.
    let started = Instant::now();
    let left: Vec<String> = loop {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the agents did not start: {}",
            child.stderr_tail()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
        if !run_dir.join(green_agent::store::DB_FILE).is_file() {
            continue;
        }
        let Ok(store) = Store::open_existing(&run_dir, &run_id).await else {
            continue;
        };
        let trials = store.trials(&run_id).await.unwrap_or_default();
        let mut ready = Vec::new();
        for t in &trials {
            let attempts = store
                .attempts(&run_id, &t.planned.id)
                .await
                .unwrap_or_default();
            if attempts.iter().any(|a| a.a2a_task_id.is_some())
                && !proxy_calls(&calls_dir, &t.planned.id).is_empty()
            {
                ready.push(t.planned.id.clone());
            }
        }
        store.close().await;
        if ready.len() == 2 {
            break ready;
        }
    };
    child.kill_tree();
    let _ = child.wait().await;

    let resumed_at = now_secs();
    let mut resume = spawn_green(
        &["resume", &run_id, "--results-dir", &results_s],
        &BTreeMap::new(),
    );
    let resume_pid = resume.pid();
    let exit = tokio::time::timeout(Duration::from_secs(600), async {
        while resume.next_stdout_line().await.is_some() {}
        resume.wait().await
    })
    .await
    .expect("the resume finishes");
    assert!(exit.success(), "resume: {}", resume.stderr_tail());

    let store = Store::open_existing(&run_dir, &run_id)
        .await
        .expect("store");
    assert_eq!(store.run(&run_id).await.expect("run").status, "finished");
    let trials = store.trials(&run_id).await.expect("trials");
    assert_eq!(trials.len(), 4);
    let mut by_resume: Vec<AttemptRow> = Vec::new();
    for t in &trials {
        let id = &t.planned.id;
        let r = t.result.as_ref().expect("done");
        assert_eq!(r.score, Some(1.0), "{id}: {r:?}");
        let attempts = store.attempts(&run_id, id).await.expect("attempts");
        assert_eq!(r.attempts as usize, attempts.len(), "{id}: {attempts:#?}");
        // Every agent was started once: one task per trial, one first call per trial.
        assert_eq!(proxy_calls(&calls_dir, id).len(), 1, "{id} ran once");
        by_resume.extend(attempts.into_iter().filter(|a| a.pid == resume_pid));
    }
    store.close().await;
    eprintln!("{by_resume:#?}");
    let reattached: Vec<&AttemptRow> = by_resume
        .iter()
        .filter(|a| a.kind == "reattached")
        .collect();
    let fresh: Vec<&AttemptRow> = by_resume.iter().filter(|a| a.kind == "fresh").collect();
    let mut taken_up: Vec<&str> = reattached.iter().map(|a| a.trial_id.as_str()).collect();
    taken_up.sort_unstable();
    let mut want: Vec<&str> = left.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(taken_up, want, "both left agents were reattached");
    assert_eq!(fresh.len(), 2, "the two trials never started run fresh");
    // Within seconds of the resume's start (the store opened, the proxy's port taken again).
    let latest_reattach = reattached
        .iter()
        .map(|a| epoch_secs(&a.started_at))
        .fold(f64::MIN, f64::max);
    let delay = latest_reattach - resumed_at;
    eprintln!("left agents reattached {delay:.1} s after the resume started");
    assert!(
        delay < 30.0,
        "reattached {delay:.1} s after the resume began"
    );
    // Nothing new before both are reattached.
    for f in &fresh {
        assert!(
            epoch_secs(&f.started_at) >= latest_reattach,
            "{} started fresh before the left agents were reattached: {by_resume:#?}",
            f.trial_id
        );
    }
    // Never more than --concurrency attempts at work at once (reattached ones count).
    let intervals: Vec<(f64, f64)> = by_resume
        .iter()
        .map(|a| {
            let end = a.ended_at.as_deref().expect("every attempt ended");
            (epoch_secs(&a.started_at), epoch_secs(end))
        })
        .collect();
    assert!(
        most_at_once(&intervals) <= 2,
        "more than 2 trials at work at once: {by_resume:#?}"
    );
    assert_eq!(leftovers(&run_id).await, 0, "nothing of the run is left");
}
