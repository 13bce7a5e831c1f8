//! The live terminal view: an overall bar and one line per running trial (indicatif).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::presentation::summary::failure_cause;
use crate::store::{PlannedTrial, TrialResult};
use crate::trial::Observer;

/// Progress bars on stderr (hidden when stderr is not a terminal).
#[derive(Debug)]
pub struct Live {
    multi: MultiProgress,
    overall: ProgressBar,
    lines: Mutex<HashMap<String, ProgressBar>>,
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
        Self {
            multi,
            overall,
            lines: Mutex::new(HashMap::new()),
        }
    }

    pub fn finish(&self) {
        self.overall.finish_with_message("done");
        let _ = self.multi.clear();
    }

    fn label(t: &PlannedTrial) -> String {
        format!("{} · {} · #{}", t.task_id, t.agent, t.repeat_index)
    }
}

impl Observer for Live {
    fn phase(&self, trial: &PlannedTrial, phase: &str) {
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
        bar.set_message(format!("{} — {phase}", Self::label(trial)));
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
        let score = result.score.map_or("–".to_owned(), |s| format!("{s:.2}"));
        let cause = failure_cause(result)
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        let _ = self
            .multi
            .println(format!("  {} → score {score}{cause}", Self::label(trial)));
        self.overall.inc(1);
    }

    /// Printed above the bars, or plainly on stderr when they are hidden (not a terminal).
    fn note(&self, text: &str) {
        if self.multi.is_hidden() {
            eprintln!("{text}");
        } else {
            let _ = self.multi.println(text);
        }
    }
}
