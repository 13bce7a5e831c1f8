//! The HTTP server: start/stop, trials, auth, budgets, and one handler per endpoint.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::budget::{Budget, Ledger, RunBudget, RunUsage, TrialUsage};
use crate::call::{Call, Incoming, Owners, json_response, wire_error};
use crate::calllog::{CallLog, CallRecord};
use crate::config::ProxyConfig;
use crate::error::ProxyError;
use crate::record::{Recorder, ReplayLog, load_recording};
use crate::routing::Routes;
use crate::secret::{Redactor, Secret};
use crate::tap::Sinks;
use crate::trials::{TrialLease, TrialOptions, TrialState, TrialToken, Trials};
use crate::upstream::{Upstream, client};
use crate::wire::{ErrorKind, WireFormat, error_body};

/// What the request handlers share: the call owners, and the trial registry.
struct Shared {
    owners: Arc<Owners>,
    trials: Arc<Trials>,
}

/// The proxy (see the crate docs).
#[derive(Debug)]
pub struct ModelProxy;

impl ModelProxy {
    /// Binds `bind` (port 0 picks a free port) and serves until [`RunningProxy::shutdown`].
    /// Provider keys are read from the environment variables the config names.
    pub async fn start(config: ProxyConfig, bind: SocketAddr) -> Result<RunningProxy, ProxyError> {
        let mut keys = HashMap::new();
        for (name, p) in &config.providers {
            match Secret::from_env(&p.api_key_env) {
                Some(k) => {
                    keys.insert(name.clone(), k);
                }
                None => {
                    tracing::info!(provider = %name, env = %p.api_key_env, "no API key in the environment; this provider will refuse requests")
                }
            }
        }
        Self::start_with_keys(config, bind, keys).await
    }

    /// Like [`ModelProxy::start`], with the provider keys (provider name → key) given by the
    /// caller, who read them from its environment. Providers without a key refuse requests.
    pub async fn start_with_keys(
        config: ProxyConfig,
        bind: SocketAddr,
        keys: HashMap<String, Secret>,
    ) -> Result<RunningProxy, ProxyError> {
        for (name, s) in &config.scripts {
            s.validate()
                .map_err(|e| ProxyError::Config(format!("script {name}: {e}")))?;
        }
        if let Some(unknown) = keys.keys().find(|k| !config.providers.contains_key(*k)) {
            return Err(ProxyError::Config(format!(
                "a key was given for provider {unknown:?}, which the configuration does not define"
            )));
        }
        let secrets: Vec<Secret> = keys.values().cloned().collect();
        let client = client(
            Duration::from_secs(config.connect_timeout_secs),
            Duration::from_secs(config.upstream_idle_timeout_secs),
            Duration::from_secs(config.request_timeout_secs),
        )
        .map_err(ProxyError::Client)?;
        let ledger = Arc::new(Ledger::new(config.prices.clone()));
        let owners = Arc::new(Owners {
            routes: Routes::new(&config, keys),
            upstream: Upstream::new(
                client,
                Redactor::new(&secrets),
                config.max_upstream_body_bytes,
            ),
            sinks: Sinks {
                ledger: ledger.clone(),
                log: Arc::new(CallLog::new(config.call_log_dir.clone())),
                log_bodies: config.log_bodies,
                max_response_bytes: config.max_response_bytes,
            },
            max_body_bytes: config.max_body_bytes,
            body_timeout: Duration::from_secs(config.request_body_timeout_secs),
            output_cap_when_unset: config.max_output_tokens_when_unset,
        });
        let trials = Arc::new(Trials::default());
        let state = Arc::new(Shared {
            owners,
            trials: trials.clone(),
        });
        let listener = tokio::net::TcpListener::bind(bind)
            .await
            .map_err(|source| ProxyError::Bind { addr: bind, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ProxyError::Bind { addr: bind, source })?;
        let app = router(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "model proxy server stopped with an error");
            }
        });
        tracing::info!(%addr, "model proxy listening");
        Ok(RunningProxy {
            addr,
            trials,
            ledger,
            shutdown: Some(tx),
            task: Some(task),
        })
    }
}

/// A started proxy. Dropping it stops the server too.
pub struct RunningProxy {
    addr: SocketAddr,
    trials: Arc<Trials>,
    ledger: Arc<Ledger>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for RunningProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningProxy")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl RunningProxy {
    /// Listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`: the base URL for Anthropic clients; OpenAI clients want `<this>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://<ip>:<port>`: the base URL as reached through another address of this host, e.g.
    /// the gateway of a container network when the proxy is bound to `0.0.0.0`.
    pub fn base_url_at(&self, ip: std::net::IpAddr) -> String {
        format!("http://{}", SocketAddr::new(ip, self.addr.port()))
    }

    /// Announces the tokens of trials about to be registered again (with
    /// [`TrialOptions::reuse_token`]): a call holding one of them waits up to `wait` for its
    /// trial's registration instead of being refused at once. A resumed run calls this as it
    /// starts listening, since agents left running call as soon as the port answers.
    pub fn expect_tokens(&self, tokens: &[String], wait: std::time::Duration) {
        self.trials.expect(tokens, wait);
    }

    /// Registers a trial with a budget; returns its token.
    ///
    /// Fails with [`ProxyError::DuplicateTrial`] while the id is registered; after
    /// [`RunningProxy::unregister_trial`] the same id can be registered again (a retry).
    pub fn register_trial(&self, trial_id: &str, budget: Budget) -> Result<TrialToken, ProxyError> {
        self.register_trial_with(
            trial_id,
            TrialOptions {
                budget,
                ..Default::default()
            },
        )
    }

    /// Registers a trial with options (budget, provider override, record, replay, a token to
    /// reuse).
    pub fn register_trial_with(
        &self,
        trial_id: &str,
        options: TrialOptions,
    ) -> Result<TrialToken, ProxyError> {
        let recorder = options
            .record_to
            .as_deref()
            .map(Recorder::create)
            .transpose()?;
        let replay = match &options.replay_from {
            Some(p) => Some(ReplayLog::new(load_recording(p)?, options.replay_match)),
            None => None,
        };
        let reused = match options.reuse_token.as_deref() {
            Some(t) => Some(TrialToken::reused(t).ok_or_else(|| {
                ProxyError::Config(format!(
                    "trial {trial_id}: the token to reuse is not one this proxy issues (rb-trial-<uuid>)"
                ))
            })?),
            None => None,
        };
        let state = TrialState::new(trial_id, options, recorder, replay);
        let token = self
            .trials
            .insert(state, reused)
            .ok_or_else(|| ProxyError::DuplicateTrial(trial_id.to_string()))?;
        self.ledger.count_trial();
        Ok(token)
    }

    /// The trial's usage so far (`None` when it is not registered). Its
    /// [`TrialUsage::budget_exhausted`] and [`TrialUsage::exhausted_by`] say whether a budget
    /// (the trial's or the run's) stopped it.
    pub fn usage(&self, trial_id: &str) -> Option<TrialUsage> {
        self.trials.by_id(trial_id).map(|t| t.meter.usage())
    }

    /// The trial's call log so far.
    pub fn calls(&self, trial_id: &str) -> Vec<CallRecord> {
        self.trials
            .by_id(trial_id)
            .map(|t| t.calls.snapshot())
            .unwrap_or_default()
    }

    /// Registers a trial and returns a lease that unregisters it when finished or dropped
    /// (the safe form for retries: no attempt can leave its id registered).
    pub fn lease_trial(
        &self,
        trial_id: &str,
        options: TrialOptions,
    ) -> Result<TrialLease, ProxyError> {
        let token = self.register_trial_with(trial_id, options)?;
        TrialLease::new(self.trials.clone(), token)
            .ok_or_else(|| ProxyError::DuplicateTrial(trial_id.to_string()))
    }

    /// Forgets a trial (its token stops working at once) and returns its final usage; `None`
    /// when it was not registered. Calls still streaming finish and count towards the run.
    pub fn unregister_trial(&self, trial_id: &str) -> Option<TrialUsage> {
        self.trials.remove(trial_id).map(|t| t.meter.usage())
    }

    /// Sets (or replaces) the run-wide budget. Once the run has spent it, every trial's next
    /// model call is refused with the quota error and the trial's usage says
    /// `exhausted_by: Some(BudgetScope::Run)`.
    pub fn set_run_budget(&self, budget: RunBudget) {
        self.ledger.set_budget(budget);
    }

    /// The run's usage so far: totals over every trial ever registered (also unregistered
    /// ones), and whether the run budget is spent. Cheap; call it as often as needed.
    pub fn run_usage(&self) -> RunUsage {
        self.ledger.usage()
    }

    /// Stops accepting connections and waits for in-flight requests to end.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

fn router(state: Arc<Shared>) -> Router {
    let messages = |s: State<Arc<Shared>>, h: HeaderMap, u: Uri, b: Body| {
        handle(s, h, u, b, WireFormat::AnthropicMessages, false)
    };
    let count = |s: State<Arc<Shared>>, h: HeaderMap, u: Uri, b: Body| {
        handle(s, h, u, b, WireFormat::AnthropicMessages, true)
    };
    let responses = |s: State<Arc<Shared>>, h: HeaderMap, u: Uri, b: Body| {
        handle(s, h, u, b, WireFormat::OpenAiResponses, false)
    };
    let chat = |s: State<Arc<Shared>>, h: HeaderMap, u: Uri, b: Body| {
        handle(s, h, u, b, WireFormat::OpenAiChat, false)
    };
    Router::new()
        .route("/v1/messages", post(messages))
        .route("/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count))
        .route("/v1/responses", post(responses))
        .route("/responses", post(responses))
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .fallback(not_found)
        // The call pipeline reads the body itself, bounded in size and time.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

/// The trial a request belongs to, waiting (bounded) when its token is one announced by
/// [`RunningProxy::expect_tokens`] and its trial is not registered yet.
async fn trial_of_waiting(trials: &Trials, headers: &HeaderMap) -> Option<Arc<TrialState>> {
    if let Some(t) = trial_of(trials, headers) {
        return Some(t);
    }
    let until = presented_tokens(headers)
        .into_iter()
        .find_map(|t| trials.expected_until(t))?;
    while std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if let Some(t) = trial_of(trials, headers) {
            return Some(t);
        }
    }
    None
}

/// The tokens a request presents: its `x-api-key`, then its `Authorization: Bearer` token.
fn presented_tokens(headers: &HeaderMap) -> Vec<&str> {
    let api_key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| {
            a.strip_prefix("Bearer ")
                .or_else(|| a.strip_prefix("bearer "))
        })
        .map(str::trim);
    [api_key, bearer].into_iter().flatten().collect()
}

/// The trial a request belongs to: its `x-api-key`, or else its `Authorization: Bearer` token.
fn trial_of(trials: &Trials, headers: &HeaderMap) -> Option<Arc<TrialState>> {
    presented_tokens(headers)
        .into_iter()
        .find_map(|t| trials.by_token(t))
}

async fn not_found(uri: Uri) -> Response {
    let (status, body) = error_body(
        WireFormat::OpenAiChat,
        ErrorKind::UnknownModel,
        &format!(
            "no such endpoint {}: the proxy serves POST /v1/messages, /v1/responses, /v1/chat/completions and GET /v1/models",
            uri.path()
        ),
    );
    json_response(status, &body)
}

async fn models(State(state): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let anthropic = headers.contains_key("anthropic-version");
    let format = if anthropic {
        WireFormat::AnthropicMessages
    } else {
        WireFormat::OpenAiChat
    };
    if trial_of(&state.trials, &headers).is_none() {
        return wire_error(
            format,
            ErrorKind::Unauthorized,
            "unknown trial token: use the token the platform gave this trial",
        );
    }
    let ids = state.owners.routes.model_ids();
    let body = if anthropic {
        let data: Vec<Value> = ids.iter().map(|id| json!({"type": "model", "id": id, "display_name": id, "created_at": "1970-01-01T00:00:00Z"})).collect();
        json!({"data": data, "has_more": false, "first_id": ids.first(), "last_id": ids.last()})
    } else {
        let data: Vec<Value> = ids.iter().map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "research-bench"})).collect();
        json!({"object": "list", "data": data})
    };
    json_response(200, &body)
}

async fn handle(
    State(state): State<Arc<Shared>>,
    headers: HeaderMap,
    uri: Uri,
    body: Body,
    format: WireFormat,
    count_tokens: bool,
) -> Response {
    let Some(trial) = trial_of_waiting(&state.trials, &headers).await else {
        tracing::warn!(path = %uri.path(), "request with an unknown or missing trial token");
        return wire_error(
            format,
            ErrorKind::Unauthorized,
            "unknown trial token: use the token the platform gave this trial",
        );
    };
    let span = tracing::info_span!("model_call", trial_id = %trial.id, wire = ?format);
    let call = Call::new(trial, format, count_tokens);
    crate::call::serve(state.owners.clone(), call, Incoming { headers, uri }, body)
        .instrument(span)
        .await
}
