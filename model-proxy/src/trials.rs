//! Trials: the registry of trial tokens, and what the proxy keeps per trial (options, meter,
//! call list, recording, replay log).
//!
//! Lifecycle: [`crate::RunningProxy::register_trial`] (or `_with`) → the agent's calls →
//! [`crate::RunningProxy::unregister_trial`] (the token stops working; the final usage is
//! returned). The same trial id may be registered again after it was unregistered (a retried
//! trial gets a fresh token, a fresh meter and a fresh call list; the run ledger keeps counting).

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::budget::{Budget, Meter, lock};
use crate::calllog::TrialCalls;
use crate::record::{Recorder, ReplayLog, ReplayMatch};

/// Everything about a trial besides its id.
#[derive(Debug, Clone, Default)]
pub struct TrialOptions {
    /// Limits.
    pub budget: Budget,
    /// Route every request of this trial to this provider, whatever model it names
    /// (`scripted:<script>`, `mock`, or a provider name such as `anthropic`).
    pub provider_override: Option<String>,
    /// Record the trial's traffic (request + raw response bytes) to this JSONL file.
    pub record_to: Option<PathBuf>,
    /// Answer the trial from this recording instead of any provider.
    pub replay_from: Option<PathBuf>,
    /// How recorded calls are matched to requests during replay.
    pub replay_match: ReplayMatch,
    /// Register under this token instead of a new one: the token an agent still holds after
    /// the process that registered it died (a resumed run re-registers the trials it
    /// reattaches to). Must be a token this proxy could have issued (`rb-trial-<uuid>`).
    pub reuse_token: Option<String>,
}

/// The dummy credential an agent uses: `rb-trial-<uuid>`. It identifies the trial and is worth
/// nothing outside this proxy.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TrialToken(String);

impl TrialToken {
    fn generate() -> Self {
        Self(format!("rb-trial-{}", uuid::Uuid::new_v4()))
    }

    /// A token issued earlier (by this proxy or a predecessor), if it has the issued form.
    pub(crate) fn reused(text: &str) -> Option<Self> {
        let uuid = text.strip_prefix("rb-trial-")?;
        uuid::Uuid::parse_str(uuid).ok()?;
        Some(Self(text.to_owned()))
    }

    /// The token text, to put in the agent's environment.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TrialToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not a provider secret, but it still grants model access through the proxy.
        write!(
            f,
            "TrialToken(rb-trial-…{})",
            &self.0[self.0.len().saturating_sub(4)..]
        )
    }
}

/// What the proxy keeps for one registered trial.
#[derive(Debug)]
pub(crate) struct TrialState {
    pub(crate) id: String,
    pub(crate) options: TrialOptions,
    pub(crate) meter: Meter,
    pub(crate) calls: TrialCalls,
    pub(crate) recorder: Option<Recorder>,
    pub(crate) replay: Option<Mutex<ReplayLog>>,
}

impl TrialState {
    pub(crate) fn new(
        id: &str,
        options: TrialOptions,
        recorder: Option<Recorder>,
        replay: Option<ReplayLog>,
    ) -> Self {
        Self {
            id: id.to_string(),
            meter: Meter::new(id, options.budget),
            options,
            calls: TrialCalls::default(),
            recorder,
            replay: replay.map(Mutex::new),
        }
    }

    /// Takes the recorded answer for a request from the trial's replay log.
    pub(crate) fn replay_take(
        &self,
        wire: crate::wire::WireFormat,
        hash: &str,
    ) -> Option<crate::record::RecordedCall> {
        self.replay.as_ref().and_then(|r| lock(r).take(wire, hash))
    }
}

/// All registered trials, by token and by id.
#[derive(Debug, Default)]
pub(crate) struct Trials {
    inner: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    by_token: HashMap<String, Arc<TrialState>>,
    by_id: HashMap<String, String>,
    /// Tokens announced before their trials are registered again (a resumed run's agents
    /// that kept calling while their green agent restarted), with when to stop waiting.
    expected: HashMap<String, std::time::Instant>,
}

impl Trials {
    /// Registers a trial under `token` (a new one when `None`); `None` when the id, or the
    /// token, is registered already.
    pub(crate) fn insert(
        &self,
        state: TrialState,
        token: Option<TrialToken>,
    ) -> Option<TrialToken> {
        let mut r = lock(&self.inner);
        if r.by_id.contains_key(&state.id) {
            return None;
        }
        let token = token.unwrap_or_else(TrialToken::generate);
        if r.by_token.contains_key(&token.0) {
            return None;
        }
        r.by_id.insert(state.id.clone(), token.0.clone());
        r.by_token.insert(token.0.clone(), Arc::new(state));
        Some(token)
    }

    pub(crate) fn by_token(&self, token: &str) -> Option<Arc<TrialState>> {
        lock(&self.inner).by_token.get(token).cloned()
    }

    /// Announces tokens whose trials will be registered within `wait`.
    pub(crate) fn expect(&self, tokens: &[String], wait: std::time::Duration) {
        let until = std::time::Instant::now() + wait;
        let mut r = lock(&self.inner);
        for t in tokens {
            r.expected.insert(t.clone(), until);
        }
    }

    /// Until when a request holding `token` may wait for its trial's registration (`None`:
    /// not expected, or no longer).
    pub(crate) fn expected_until(&self, token: &str) -> Option<std::time::Instant> {
        let mut r = lock(&self.inner);
        let until = *r.expected.get(token)?;
        if until <= std::time::Instant::now() {
            r.expected.remove(token);
            return None;
        }
        Some(until)
    }

    pub(crate) fn by_id(&self, id: &str) -> Option<Arc<TrialState>> {
        let r = lock(&self.inner);
        let token = r.by_id.get(id)?;
        r.by_token.get(token).cloned()
    }

    pub(crate) fn remove(&self, id: &str) -> Option<Arc<TrialState>> {
        let mut r = lock(&self.inner);
        let token = r.by_id.remove(id)?;
        r.by_token.remove(&token)
    }

    /// Removes the registration of `id` only if it is still the one holding `token` (a later
    /// re-registration of the same id is left alone).
    fn remove_if(&self, id: &str, token: &TrialToken) -> bool {
        let mut r = lock(&self.inner);
        if r.by_id.get(id) != Some(&token.0) {
            return false;
        }
        r.by_id.remove(id);
        r.by_token.remove(&token.0);
        true
    }
}

/// A registered trial that unregisters itself when dropped (see
/// [`crate::RunningProxy::lease_trial`]): hold it for the attempt; every way out of the
/// attempt, errors and panics included, frees the trial id for a retry.
#[derive(Debug)]
pub struct TrialLease {
    trials: Arc<Trials>,
    state: Arc<TrialState>,
    token: TrialToken,
    released: bool,
}

impl TrialLease {
    pub(crate) fn new(trials: Arc<Trials>, token: TrialToken) -> Option<Self> {
        let state = trials.by_token(token.as_str())?;
        Some(Self {
            trials,
            state,
            token,
            released: false,
        })
    }

    /// The trial's token, for the agent's environment.
    pub fn token(&self) -> &TrialToken {
        &self.token
    }

    /// The trial id.
    pub fn trial_id(&self) -> &str {
        &self.state.id
    }

    /// The trial's usage so far (also readable after [`TrialLease::finish`] began).
    pub fn usage(&self) -> crate::budget::TrialUsage {
        self.state.meter.usage()
    }

    /// The trial's call log so far.
    pub fn calls(&self) -> Vec<crate::calllog::CallRecord> {
        self.state.calls.snapshot()
    }

    /// Unregisters the trial (its token stops working) and returns its final usage.
    pub fn finish(mut self) -> crate::budget::TrialUsage {
        self.release();
        self.state.meter.usage()
    }

    fn release(&mut self) {
        if !self.released {
            self.released = true;
            self.trials.remove_if(&self.state.id, &self.token);
        }
    }
}

impl Drop for TrialLease {
    fn drop(&mut self) {
        self.release();
    }
}
