//! One judge model over HTTP: bounded retries with backoff, `Retry-After`, the protocol check and
//! a [`VerdictCache`] of accepted verdicts keyed by a hash of (API, model, prompt, scale).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::cache::{self, MemoryCache, VerdictCache};
use super::config::JudgeConfig;
use super::wire::{self, Prompt};
use super::{JudgeError, JudgeFailure, ScoreScale, Verdict};
use crate::report::cap_text;
use crate::status::Status;

/// A configured judge model.
pub struct JudgeClient {
    config: JudgeConfig,
    api_key: Option<String>,
    http: reqwest::Client,
    cache: Arc<dyn VerdictCache>,
}

impl fmt::Debug for JudgeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JudgeClient")
            .field("config", &self.config)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl JudgeClient {
    /// Builds a client, reading the key from `config.api_key_env` when set.
    pub fn new(config: JudgeConfig) -> Result<Self, JudgeError> {
        let key = match &config.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| JudgeError::MissingKey(var.clone()))?),
            None => None,
        };
        Self::with_key(config, key)
    }

    /// Builds a client with an explicit key (tests, or a key from a secret store).
    pub fn with_key(config: JudgeConfig, api_key: Option<String>) -> Result<Self, JudgeError> {
        let base = config.effective_base_url();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(JudgeError::BadUrl(config.base_url.clone()));
        }
        if config.model.trim().is_empty() {
            return Err(JudgeError::NoModel);
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(config.timeout_secs.max(1)))
            .build()
            .map_err(JudgeError::Client)?;
        Ok(Self {
            config,
            api_key,
            http,
            cache: Arc::new(MemoryCache::default()),
        })
    }

    /// Keeps accepted verdicts in `cache` instead of this client's own memory.
    pub fn with_cache(mut self, cache: Arc<dyn VerdictCache>) -> Self {
        self.cache = cache;
        self
    }

    pub fn config(&self) -> &JudgeConfig {
        &self.config
    }

    /// Asks this model. Failures are never cached; accepted verdicts are (a verdict served
    /// from the cache has `attempts == 0`). A cache that cannot be read or written is logged and
    /// bypassed: the model is asked, the grade goes on.
    pub async fn ask(&self, prompt: &Prompt, scale: ScoreScale) -> Result<Verdict, JudgeFailure> {
        let key = cache::cache_key(&self.config, prompt, scale);
        match self.cache.get(&key).await {
            Ok(Some(v)) if cache::acceptable(&v, scale) => {
                tracing::debug!(model = %self.config.model, "judge verdict served from the cache");
                return Ok(Verdict { attempts: 0, ..v });
            }
            Ok(Some(_)) => {
                tracing::warn!(model = %self.config.model, "ignoring a cached verdict outside the scale")
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(model = %self.config.model, error = %e, "judge cache unreadable; asking the model")
            }
        }
        let verdict = self.ask_uncached(prompt, scale).await?;
        if let Err(e) = self.cache.put(&key, &verdict).await {
            tracing::warn!(model = %self.config.model, error = %e, "could not store the judge's verdict");
        }
        Ok(verdict)
    }

    fn failure(
        &self,
        status: Status,
        reason: String,
        raw: Option<String>,
        attempts: u32,
    ) -> JudgeFailure {
        JudgeFailure {
            status,
            reason,
            raw,
            attempts,
            model: self.config.model.clone(),
            votes: Vec::new(),
        }
    }

    async fn ask_uncached(
        &self,
        prompt: &Prompt,
        scale: ScoreScale,
    ) -> Result<Verdict, JudgeFailure> {
        let api = self.config.api;
        let body = wire::request_body(&self.config, prompt);
        let url = wire::endpoint(&self.config);
        let mut attempts = 0u32;
        let mut transport_failures = 0u32;
        let mut invalid = 0u32;
        loop {
            attempts += 1;
            let request = wire::authorize(
                api,
                self.http.post(&url).json(&body),
                self.api_key.as_deref(),
            );
            let (retry_after, reason) = match request.send().await {
                Err(e) => (None, format!("request failed: {}", redact_err(e))),
                Ok(resp) => {
                    let status = resp.status();
                    if status.is_success() {
                        // An answer that cannot be read is a transport failure (retried below).
                        match resp.text().await {
                            Err(e) => (
                                None,
                                format!("reading the answer failed: {}", redact_err(e)),
                            ),
                            Ok(text) => match wire::parse_answer(api, &text, scale) {
                                Ok(a) => {
                                    return Ok(Verdict {
                                        score: a.score,
                                        justification: a.justification,
                                        attempts,
                                        prompt_tokens: a.input_tokens,
                                        completion_tokens: a.output_tokens,
                                        cost_usd: self
                                            .config
                                            .price
                                            .map(|p| p.cost(a.input_tokens, a.output_tokens)),
                                        model: self.config.model.clone(),
                                        votes: Vec::new(),
                                    });
                                }
                                Err(reason) => {
                                    invalid += 1;
                                    tracing::warn!(model = %self.config.model, attempts, %reason, "judge answer broke the protocol");
                                    if invalid > self.config.max_invalid_retries {
                                        return Err(self.failure(
                                            Status::JudgeInvalid,
                                            reason,
                                            Some(cap_text(&text, 2000)),
                                            attempts,
                                        ));
                                    }
                                    continue;
                                }
                            },
                        }
                    } else {
                        let retry_after = resp
                            .headers()
                            .get(reqwest::header::RETRY_AFTER)
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.trim().parse::<u64>().ok());
                        let text = resp.text().await.unwrap_or_default();
                        let reason = format!("HTTP {status}: {}", cap_text(&text, 300));
                        // 429 and 5xx (Anthropic's 529 "overloaded" included) are transient.
                        if !(status.as_u16() == 429 || status.is_server_error()) {
                            return Err(self.failure(
                                Status::JudgeUnavailable,
                                reason,
                                None,
                                attempts,
                            ));
                        }
                        (retry_after, reason)
                    }
                }
            };
            transport_failures += 1;
            tracing::warn!(model = %self.config.model, attempts, %reason, "judge call failed");
            if transport_failures > self.config.max_retries {
                return Err(self.failure(
                    Status::JudgeUnavailable,
                    format!("gave up after {attempts} attempts: {reason}"),
                    None,
                    attempts,
                ));
            }
            self.backoff(transport_failures, retry_after).await;
        }
    }

    /// Exponential backoff from `backoff_ms`, at least `Retry-After`, at most 30 s.
    async fn backoff(&self, failures: u32, retry_after_secs: Option<u64>) {
        let backoff = self
            .config
            .backoff_ms
            .saturating_mul(1 << (failures.saturating_sub(1)).min(16))
            .min(30_000);
        let wait =
            retry_after_secs.map_or(backoff, |s| s.saturating_mul(1000).min(30_000).max(backoff));
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }
}

/// reqwest errors can carry the URL; ours holds no secret, but keep only the kind.
fn redact_err(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "cannot connect".into()
    } else {
        e.without_url().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_never_in_debug_output() {
        let c = JudgeClient::with_key(
            JudgeConfig::new("http://127.0.0.1:1/v1", "m"),
            Some("sk-SECRET-123".into()),
        )
        .expect("builds");
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("SECRET"), "{dbg}");
        assert!(dbg.contains("redacted"));
    }

    #[test]
    fn bad_configs_are_clear_errors() {
        let mut c = JudgeConfig::new("http://127.0.0.1:1/v1", "m");
        c.api_key_env = Some("RUBRICS_TEST_SURELY_UNSET_KEY".into());
        let e = JudgeClient::new(c).expect_err("unset");
        assert!(e.to_string().contains("RUBRICS_TEST_SURELY_UNSET_KEY"));
        assert!(JudgeClient::with_key(JudgeConfig::new("ftp://x", "m"), None).is_err());
        let e = JudgeClient::with_key(JudgeConfig::new("http://x/v1", " "), None)
            .expect_err("no model");
        assert!(e.to_string().contains("model"), "{e}");
    }
}
