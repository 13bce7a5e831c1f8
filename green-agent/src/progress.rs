//! A run's progress on stderr: on a terminal, an overall bar with counts, mean so far, cost so
//! far and the time left, and one line per running trial (indicatif); otherwise (CI logs,
//! pipes) a plain line per finished trial, and a status line when 30 s pass without one.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::presentation::summary::failure_cause;
use crate::store::{PlannedTrial, TrialResult};
use crate::trial::Observer;

/// How long the plain output stays silent before it prints a status line.
pub const QUIET_LIMIT: Duration = Duration::from_secs(30);

/// The run's progress: bars on a terminal, lines elsewhere.
#[derive(Debug)]
pub enum Progress {
    Bars(Live),
    Lines(Lines),
}

impl Progress {
    /// Bars when stderr is a terminal, else lines on stderr.
    pub fn on_stderr(total: u64, already_done: u64) -> Self {
        if std::io::stderr().is_terminal() {
            Self::Bars(Live::new(total, already_done))
        } else {
            Self::Lines(Lines::new(total, already_done, Box::new(std::io::stderr())))
        }
    }

    pub fn finish(&self) {
        match self {
            Self::Bars(b) => b.finish(),
            Self::Lines(l) => l.finish(),
        }
    }
}

impl Observer for Progress {
    fn phase(&self, trial: &PlannedTrial, phase: &str) {
        match self {
            Self::Bars(b) => b.phase(trial, phase),
            Self::Lines(l) => l.phase(),
        }
    }

    fn finished(&self, trial: &PlannedTrial, result: &TrialResult) {
        match self {
            Self::Bars(b) => b.finished(trial, result),
            Self::Lines(l) => l.finished(trial, result),
        }
    }

    fn note(&self, text: &str) {
        match self {
            Self::Bars(b) => b.note(text),
            Self::Lines(l) => l.print(text),
        }
    }
}

/// What has finished so far: counts, the mean score, the cost and the time left.
#[derive(Debug, Clone)]
struct Tally {
    total: u64,
    /// Finished before this process started (a resume).
    done_before: u64,
    done: u64,
    scored: u64,
    score_sum: f64,
    cost_usd: f64,
    started: Instant,
    /// When this process's first trial began a phase: the pace is counted from there, so a
    /// wait before any trial could start (images still building) does not inflate it.
    first_phase: Option<Instant>,
}

impl Tally {
    fn new(total: u64, done_before: u64) -> Self {
        Self {
            total,
            done_before,
            done: done_before,
            scored: 0,
            score_sum: 0.0,
            cost_usd: 0.0,
            started: Instant::now(),
            first_phase: None,
        }
    }

    /// A trial began a phase at `now`.
    fn phase_began(&mut self, now: Instant) {
        self.first_phase.get_or_insert(now);
    }

    fn add(&mut self, result: &TrialResult) {
        self.done += 1;
        if let Some(s) = result.score {
            self.scored += 1;
            self.score_sum += s;
        }
        self.cost_usd += result.usage.cost_usd;
    }

    /// The time left at this process's pace so far, counted from its first trial's first phase
    /// (`None` until a trial has finished here).
    fn eta(&self, now: Instant) -> Option<Duration> {
        let finished_here = self.done.saturating_sub(self.done_before);
        if finished_here == 0 {
            return None;
        }
        let left = self.total.saturating_sub(self.done);
        let since = self.first_phase.unwrap_or(self.started);
        let per = now.duration_since(since).as_secs_f64() / finished_here as f64;
        Some(Duration::from_secs_f64(per * left as f64))
    }

    /// `mean 0.75 (12 scored) · $0.42 · ~6m left`.
    fn summary(&self, now: Instant) -> String {
        let mean = if self.scored == 0 {
            "no score yet".to_owned()
        } else {
            format!(
                "mean {:.2} ({} scored)",
                self.score_sum / self.scored as f64,
                self.scored
            )
        };
        let left = match self.eta(now) {
            _ if self.done >= self.total => String::new(),
            Some(d) => format!(" · ~{} left", short(d)),
            None => String::new(),
        };
        format!("{mean} · ${:.2}{left}", self.cost_usd)
    }

    /// `12/40 trials, 2m 5s: mean ... `.
    fn status(&self, now: Instant) -> String {
        format!(
            "{}/{} trials, {}: {}",
            self.done,
            self.total,
            short(now.duration_since(self.started)),
            self.summary(now)
        )
    }
}

/// A duration to the second (`2m 5s`).
fn short(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// The trial in words: `task · agent · #repeat`.
fn label(t: &PlannedTrial) -> String {
    format!("{} · {} · #{}", t.task_id, t.agent, t.repeat_index)
}

/// `score 1.00` or `score – (cause)`.
fn outcome(result: &TrialResult) -> String {
    let score = result.score.map_or("–".to_owned(), |s| format!("{s:.2}"));
    let cause = failure_cause(result)
        .map(|c| format!(" ({c})"))
        .unwrap_or_default();
    format!("score {score}{cause}")
}

/// Progress bars on stderr.
#[derive(Debug)]
pub struct Live {
    multi: MultiProgress,
    overall: ProgressBar,
    lines: Mutex<HashMap<String, ProgressBar>>,
    tally: Mutex<Tally>,
}

impl Live {
    pub fn new(total: u64, already_done: u64) -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let overall = multi.add(ProgressBar::new(total));
        overall.set_style(
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} trials {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        overall.set_position(already_done);
        // The time left shows once the first trial has finished: the bar's own rate would
        // count a resume's earlier trials as done in no time.
        overall.enable_steady_tick(Duration::from_secs(1));
        Self {
            multi,
            overall,
            lines: Mutex::new(HashMap::new()),
            tally: Mutex::new(Tally::new(total, already_done)),
        }
    }

    pub fn finish(&self) {
        self.overall.finish_with_message("done");
        let _ = self.multi.clear();
    }
}

impl Observer for Live {
    fn phase(&self, trial: &PlannedTrial, phase: &str) {
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .phase_began(Instant::now());
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let bar = lines.entry(trial.id.clone()).or_insert_with(|| {
            let b = self.multi.add(ProgressBar::new_spinner());
            b.set_style(
                ProgressStyle::with_template("  {spinner} {elapsed:>4} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        bar.set_message(format!("{} — {phase}", label(trial)));
    }

    fn finished(&self, trial: &PlannedTrial, result: &TrialResult) {
        if let Some(b) = self
            .lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&trial.id)
        {
            b.finish_and_clear();
            self.multi.remove(&b);
        }
        let _ = self
            .multi
            .println(format!("  {} → {}", label(trial), outcome(result)));
        let summary = {
            let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
            tally.add(result);
            tally.summary(Instant::now())
        };
        self.overall.set_message(summary);
        self.overall.inc(1);
    }

    /// Printed above the bars, or plainly on stderr when they are hidden.
    fn note(&self, text: &str) {
        if self.multi.is_hidden() {
            eprintln!("{text}");
        } else {
            let _ = self.multi.println(text);
        }
    }
}

/// Plain progress lines (no terminal): one per finished trial, a status line after 30 s of
/// silence.
#[derive(Debug)]
pub struct Lines {
    shared: Arc<LinesShared>,
    stop: tokio_util::sync::CancellationToken,
}

struct LinesShared {
    tally: Mutex<Tally>,
    out: Mutex<Box<dyn Write + Send>>,
    last: Mutex<Instant>,
}

impl std::fmt::Debug for LinesShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinesShared").finish_non_exhaustive()
    }
}

impl LinesShared {
    fn print(&self, text: &str) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    fn status(&self) -> String {
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .status(Instant::now())
    }
}

impl Lines {
    /// Lines written to `out`; the 30 s status lines need a Tokio runtime (without one, only
    /// the per-trial lines are written).
    pub fn new(total: u64, already_done: u64, out: Box<dyn Write + Send>) -> Self {
        Self::with_quiet_limit(total, already_done, out, QUIET_LIMIT)
    }

    fn with_quiet_limit(
        total: u64,
        already_done: u64,
        out: Box<dyn Write + Send>,
        quiet: Duration,
    ) -> Self {
        let shared = Arc::new(LinesShared {
            tally: Mutex::new(Tally::new(total, already_done)),
            out: Mutex::new(out),
            last: Mutex::new(Instant::now()),
        });
        let stop = tokio_util::sync::CancellationToken::new();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (shared, stop) = (Arc::clone(&shared), stop.clone());
            rt.spawn(async move {
                loop {
                    let since = shared
                        .last
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .elapsed();
                    let wait = quiet.saturating_sub(since).max(Duration::from_millis(10));
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                    let since = shared
                        .last
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .elapsed();
                    if since >= quiet {
                        let line = shared.status();
                        shared.print(&line);
                    }
                }
            });
        }
        Self { shared, stop }
    }

    fn phase(&self) {
        self.shared
            .tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .phase_began(Instant::now());
    }

    fn finished(&self, trial: &PlannedTrial, result: &TrialResult) {
        let status = {
            let mut tally = self.shared.tally.lock().unwrap_or_else(|e| e.into_inner());
            tally.add(result);
            tally.status(Instant::now())
        };
        self.shared.print(&format!(
            "{status} | {} → {}",
            label(trial),
            outcome(result)
        ));
    }

    fn print(&self, text: &str) {
        self.shared.print(text);
    }

    pub fn finish(&self) {
        self.stop.cancel();
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer tests read back.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Buffer {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().expect("lock").clone()).expect("utf-8")
        }
    }

    fn trial(task: &str) -> PlannedTrial {
        PlannedTrial {
            id: format!("{task}-oracle-0"),
            task_id: task.to_owned(),
            task_kind: "generic".into(),
            task_hash: String::new(),
            agent: "oracle".into(),
            repeat_index: 0,
        }
    }

    fn result(score: Option<f64>, cost: f64) -> TrialResult {
        TrialResult {
            outcome: crate::model::Outcome::Completed,
            exit_code: Some(0),
            score,
            passed: score == Some(1.0),
            grade_status: Some("ok".into()),
            dimensions: Default::default(),
            flags: Vec::new(),
            phases: Default::default(),
            attempts: 1,
            error: None,
            isolated: true,
            grade_report: None,
            usage: crate::model::Usage {
                cost_usd: cost,
                ..Default::default()
            },
            artifacts: Vec::new(),
        }
    }

    #[tokio::test]
    async fn without_a_terminal_each_finished_trial_is_a_line_with_counts_mean_and_cost() {
        let out = Buffer::default();
        let lines = Lines::new(4, 1, Box::new(out.clone()));
        lines.finished(&trial("a"), &result(Some(1.0), 0.25));
        lines.finished(&trial("b"), &result(Some(0.5), 0.5));
        lines.finish();
        let text = out.text();
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got.len(), 2, "{text}");
        assert!(got[0].starts_with("2/4 trials, "), "{text}");
        assert!(
            got[0].contains("mean 1.00 (1 scored) · $0.25 · ~"),
            "{text}"
        );
        assert!(got[0].ends_with("| a · oracle · #0 → score 1.00"), "{text}");
        assert!(got[1].starts_with("3/4 trials, "), "{text}");
        assert!(
            got[1].contains("mean 0.75 (2 scored) · $0.75 · ~"),
            "{text}"
        );
        assert!(got[1].contains(" left | b · oracle · #0"), "{text}");
    }

    #[tokio::test]
    async fn without_a_terminal_a_quiet_run_prints_a_status_line_after_the_quiet_limit() {
        let out = Buffer::default();
        let quiet = Duration::from_secs(1);
        let lines = Lines::with_quiet_limit(2, 0, Box::new(out.clone()), quiet);
        assert_eq!(out.text(), "", "nothing at first");
        let deadline = Instant::now() + Duration::from_secs(30);
        while out.text().is_empty() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let text = out.text();
        let first = text.lines().next().expect("a status line");
        assert!(first.starts_with("0/2 trials, "), "{text}");
        assert!(first.ends_with("no score yet · $0.00"), "{text}");
        lines.finish();
    }

    #[test]
    fn the_time_left_comes_from_this_process_pace() {
        let mut t = Tally::new(10, 4);
        let start = t.started;
        assert_eq!(
            t.eta(start + Duration::from_secs(5)),
            None,
            "none finished here yet"
        );
        t.add(&result(None, 0.0));
        t.add(&result(None, 0.0));
        // two trials in 60 s: 4 left take 120 s
        assert_eq!(
            t.eta(start + Duration::from_secs(60)),
            Some(Duration::from_secs(120))
        );
        assert!(
            t.summary(start + Duration::from_secs(60))
                .ends_with("~2m left")
        );
    }

    #[test]
    fn the_pace_ignores_the_wait_before_the_first_trial_began() {
        let mut t = Tally::new(4, 0);
        let start = t.started;
        // images built for 200 s; then one trial took 10 s
        t.phase_began(start + Duration::from_secs(200));
        t.phase_began(start + Duration::from_secs(205));
        t.add(&result(Some(1.0), 0.0));
        assert_eq!(
            t.eta(start + Duration::from_secs(210)),
            Some(Duration::from_secs(30)),
            "3 left at 10 s each, not at 210 s each"
        );
    }
}
