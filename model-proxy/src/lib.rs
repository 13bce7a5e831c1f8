//! # model-proxy
//!
//! Every agent's model traffic goes through one place. The proxy speaks Anthropic Messages
//! (`POST /v1/messages`, `/v1/messages/count_tokens`), OpenAI Responses (`POST /v1/responses`)
//! and OpenAI Chat Completions (`POST /v1/chat/completions`), streamed (SSE) or not, plus
//! `GET /v1/models`. Each trial gets a dummy token (`rb-trial-<uuid>`, sent as `x-api-key` or
//! `Authorization: Bearer`) that identifies it; real provider keys live only here, read from the
//! environment into [`Secret`]s that never print.
//!
//! Per trial it counts tokens and cost (per model, price table in [`ProxyConfig::prices`]),
//! enforces [`Budget`]s (a spent budget answers with the wire format's quota error — Anthropic
//! `402 billing_error`, OpenAI `429 insufficient_quota` — and sets
//! [`TrialUsage::budget_exhausted`]), logs every call ([`CallRecord`], tracing, optional JSONL),
//! and can record a trial's traffic and replay it byte for byte ([`TrialOptions::record_to`],
//! [`TrialOptions::replay_from`]).
//!
//! ## Trial lifecycle and budgets
//!
//! ```text
//! proxy.set_run_budget(RunBudget { max_cost_usd: Some(20.0), max_tokens: None });  // optional
//! let token = proxy.register_trial(id, Budget { max_tokens, max_cost_usd, max_requests })?;
//!     // or register_trial_with(id, TrialOptions { budget, provider_override, record_to, .. })
//! ... the agent calls the proxy with `token` ...
//! proxy.usage(id)        // Some(TrialUsage): budget_exhausted, exhausted_by (Trial | Run)
//! proxy.run_usage()      // RunUsage: totals over every trial ever registered, budget_exhausted
//! let last = proxy.unregister_trial(id);   // token dead at once; Some(final TrialUsage)
//! proxy.register_trial(id, budget)?;       // a retry of the same trial: fresh token and meter
//!
//! let lease = proxy.lease_trial(id, options)?;  // or: a lease that unregisters when dropped
//! lease.token(); lease.usage(); let last = lease.finish();
//! ```
//! Registering an id that is still registered is [`ProxyError::DuplicateTrial`]; always
//! unregister a trial when its attempt ends (also on failure) so a retry can register again.
//! Per-trial budgets are part of registration; the run budget can be set (or raised) at any
//! time. A spent budget (either) refuses the trial's next call with the quota error, so the CLIs
//! stop; the trial's [`TrialUsage::exhausted_by`] says which budget. Costs and tokens are
//! reserved: a call is admitted only when its worst case (request bytes as input tokens plus
//! its output cap, [`ProxyConfig::max_output_tokens_when_unset`] when it sets none) fits what
//! both budgets have left beside the calls still running, and settled with its real usage
//! when its answer ends; a call kept out only by running ones gets a 429 rate-limit error. Calls still streaming when
//! a trial is unregistered finish and count towards the run.
//!
//! ## Inside
//!
//! One narrow owner per concern, none importing another's: `routing` (model → script, replay or
//! provider, with the keys), `upstream` (HTTP client, forwarding, scrubbing keys from what comes
//! back, see [`secret`]), `calllog` (call records), `budget` (per-trial meters, run ledger, prices),
//! `trials` (the token registry). `call` serves one request as parse → admit → forward →
//! account, and `tap` settles it when the body has gone to the agent. Every body read is bounded:
//! the agent's request by [`ProxyConfig::max_body_bytes`] and
//! [`ProxyConfig::request_body_timeout_secs`], a provider's by
//! [`ProxyConfig::max_response_bytes`] (streamed), [`ProxyConfig::max_upstream_body_bytes`]
//! (buffered: error and non-streamed bodies), [`ProxyConfig::upstream_idle_timeout_secs`] and
//! [`ProxyConfig::request_timeout_secs`].
//!
//! Routing: `mock` → a built-in one-line script; `scripted:<name>` → the script `<name>` from
//! [`ProxyConfig::scripts`] (see [`scripted`]); otherwise the first matching [`Route`]
//! (`claude-*` → `anthropic`, `gpt-*` → `openai`, ...). [`TrialOptions::provider_override`]
//! sends all of a trial's requests to one provider whatever model the CLI names.
//!
//! ## Pointing the real CLIs at the proxy (verified by `tests/real_cli.rs`)
//!
//! Claude Code (`claude` 2.1.330 from the `claude-agent-sdk` wheel), run in the agent's working
//! directory with stdin `/dev/null`:
//! ```text
//! env HOME=<fresh dir> ANTHROPIC_BASE_URL=http://<proxy> ANTHROPIC_API_KEY=<trial token>
//!     IS_SANDBOX=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1
//!     DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1
//!   claude -p "<instruction>" --model <model> --output-format stream-json --verbose
//!     --dangerously-skip-permissions
//! ```
//! It sends only `POST /v1/messages?beta=true` (streamed, `x-api-key`), with tools
//! `Write {file_path (absolute), content}` and `Bash {command}`; any `--model` string is accepted
//! (an unknown one only prints `[claude-code:unrecognized_model]` on stderr). `IS_SANDBOX=1` lets
//! `--dangerously-skip-permissions` run as root. A spent budget (402 `billing_error`) ends the
//! run at once: exit 1, final `result` event with `is_error: true`, `api_error_status: 402`.
//!
//! Codex (`codex` 0.163 from `openai-codex-cli-bin`), with `CODEX_HOME=<fresh dir>` holding:
//! ```toml
//! model = "<model>"               # "gpt-5.5" (in codex's bundled catalog) → apply_patch offered
//! model_provider = "rbproxy"
//! check_for_update_on_startup = false
//! [analytics]
//! enabled = false
//! [model_providers.rbproxy]
//! name = "research-bench proxy"
//! base_url = "http://<proxy>/v1"
//! env_key = "RB_PROXY_TOKEN"      # the variable holding the trial token
//! wire_api = "responses"
//! request_max_retries = 0
//! stream_max_retries = 0
//! ```
//! then `RB_PROXY_TOKEN=<trial token> codex exec --json --dangerously-bypass-approvals-and-sandbox
//! --skip-git-repo-check "<instruction>"` with stdin `/dev/null` (it still prints "Reading
//! additional input from stdin..."). It sends only `POST /v1/responses` (streamed, bearer auth)
//! with the function tool `exec_command {cmd}`, plus the freeform custom tool `apply_patch` when
//! the model slug is in its bundled catalog (`gpt-5.5`); for other slugs it warns "Model metadata
//! ... not found" and offers no `apply_patch`. A spent budget (429 `insufficient_quota`) ends
//! the run at once: exit 1, `turn.failed` "Quota exceeded".
//!
//! Neither CLI needs the internet when run like this; each scripted run takes 1–3 s.

pub mod budget;
mod call;
pub mod calllog;
pub mod config;
pub mod error;
pub mod record;
mod routing;
pub mod scripted;
pub mod secret;
mod server;
mod tap;
pub mod trials;
mod upstream;
pub mod wire;

pub use budget::{Budget, BudgetScope, ModelUsage, RunBudget, RunUsage, TrialUsage};
pub use calllog::CallRecord;
pub use config::{Price, ProviderConfig, ProviderKind, ProxyConfig, Route};
pub use error::ProxyError;
pub use record::{RecordedCall, ReplayMatch, load_recording, request_hash};
pub use scripted::{Script, Step, StepUsage, WriteFile};
pub use secret::Secret;
pub use server::{ModelProxy, RunningProxy};
pub use trials::{TrialLease, TrialOptions, TrialToken};
pub use wire::{TokenCounts, WireFormat};
