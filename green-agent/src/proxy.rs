//! The model proxy a run shares: started once, each model agent's trial registered with it
//! (a per-trial dummy token), its usage counted there.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use crate::model::Usage;

/// The model proxy of a run.
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<model_proxy::RunningProxy>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("addr", &self.inner.addr())
            .finish()
    }
}

/// How long a call of an agent left running may wait for its trial's re-registration.
const EXPECT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

impl Proxy {
    /// Starts the proxy on all interfaces at `port` (0 = any): agent networks reach it through
    /// their gateway, fenced by the sandbox's firewall rules to this port alone.
    /// With `max_cost_per_run`, the proxy refuses every call once the run has spent that much.
    pub async fn start(
        port: u16,
        config: Option<&Path>,
        max_cost_per_run: Option<f64>,
    ) -> Result<Self, String> {
        let bind = SocketAddr::from(([0, 0, 0, 0], port));
        let config = match config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                model_proxy::ProxyConfig::from_toml(&text)
                    .map_err(|e| format!("{} is invalid: {e}", path.display()))?
            }
            None => model_proxy::ProxyConfig::default(),
        };
        let running = model_proxy::ModelProxy::start(config, bind)
            .await
            .map_err(|e| e.to_string())?;
        if max_cost_per_run.is_some() {
            running.set_run_budget(model_proxy::RunBudget {
                max_cost_usd: max_cost_per_run,
                max_tokens: None,
            });
        }
        Ok(Self {
            inner: Arc::new(running),
        })
    }

    pub fn port(&self) -> u16 {
        self.inner.addr().port()
    }

    /// Registers an attempt of a trial with its budget; returns its dummy token: a new one, or
    /// `reuse` (the token a reattached agent holds from before a restart of the green agent).
    pub fn register(
        &self,
        trial_id: &str,
        budget: model_proxy::Budget,
        reuse: Option<&str>,
    ) -> Result<String, String> {
        self.inner
            .register_trial_with(
                trial_id,
                model_proxy::TrialOptions {
                    budget,
                    reuse_token: reuse.map(str::to_owned),
                    ..Default::default()
                },
            )
            .map(|t| t.as_str().to_owned())
            .map_err(|e| e.to_string())
    }

    /// Announces the tokens of agents left running by a dead green agent of this run: their
    /// calls wait for the trials' re-registration (bounded) instead of being refused.
    pub fn expect(&self, tokens: &[String]) {
        self.inner.expect_tokens(tokens, EXPECT_WAIT);
    }

    /// Ends an attempt: its token stops working (a retry registers the trial afresh).
    pub fn unregister(&self, trial_id: &str) {
        let _ = self.inner.unregister_trial(trial_id);
    }

    /// Why the trial's model calls are refused, if a budget (the trial's or the run's) is
    /// spent.
    pub fn trial_budget_spent(&self, trial_id: &str) -> Option<String> {
        let u = self.inner.usage(trial_id)?;
        u.budget_exhausted.then(|| {
            u.exhausted_reason
                .unwrap_or_else(|| "the model budget is spent".into())
        })
    }

    /// Why the run stops, if its cost cap is spent.
    pub fn run_budget_spent(&self) -> Option<String> {
        let u = self.inner.run_usage();
        u.budget_exhausted.then(|| {
            u.exhausted_reason
                .unwrap_or_else(|| "the run's cost cap is spent".into())
        })
    }

    pub fn usage(&self, trial_id: &str) -> Option<Usage> {
        self.inner.usage(trial_id).map(|u| Usage {
            input_tokens: u.tokens.input_tokens,
            output_tokens: u.tokens.output_tokens,
            cache_read_tokens: u.tokens.cache_read_tokens,
            cache_write_tokens: u.tokens.cache_write_tokens,
            requests: u.requests,
            cost_usd: u.cost_usd,
        })
    }
}
