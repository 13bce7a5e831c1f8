//! The clock of a trial's phases: each named phase is announced to the observer, runs in a
//! `phase{name}` span and has its duration recorded.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Instant;

use tracing::{Instrument, info_span};

use super::env::RunEnv;
use crate::model::PlannedTrial;

/// Durations of the phases run so far (name → milliseconds).
#[derive(Debug)]
pub(crate) struct PhaseLog<'a> {
    env: &'a RunEnv,
    trial: &'a PlannedTrial,
    times: BTreeMap<String, u64>,
    /// Phases are not announced to the observer (work done ahead of the trial's slot).
    quiet: bool,
}

impl<'a> PhaseLog<'a> {
    pub(crate) fn new(env: &'a RunEnv, trial: &'a PlannedTrial) -> Self {
        Self {
            env,
            trial,
            times: BTreeMap::new(),
            quiet: false,
        }
    }

    /// A log whose phases the observer is not told of.
    pub(crate) fn quiet(env: &'a RunEnv, trial: &'a PlannedTrial) -> Self {
        Self {
            quiet: true,
            ..Self::new(env, trial)
        }
    }

    /// Adds phase times measured elsewhere (work done ahead of the trial's slot).
    pub(crate) fn extend(&mut self, times: BTreeMap<String, u64>) {
        self.times.extend(times);
    }

    /// Runs one phase: observer notice, span, timing.
    pub(crate) async fn run<T>(&mut self, name: &'static str, phase: impl Future<Output = T>) -> T {
        if !self.quiet {
            self.env.observer.phase(self.trial, name);
        }
        let started = Instant::now();
        let out = phase.instrument(info_span!("phase", name)).await;
        let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.times.insert(name.to_owned(), ms);
        out
    }

    /// The durations so far.
    pub(crate) fn times(&self) -> BTreeMap<String, u64> {
        self.times.clone()
    }

    pub(crate) fn into_times(self) -> BTreeMap<String, u64> {
        self.times
    }
}
