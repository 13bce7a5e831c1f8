//! Proxy configuration: providers, routes, prices. Secrets come from the environment only.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::scripted::Script;

/// What kind of API a real provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Anthropic Messages (`x-api-key` auth).
    Anthropic,
    /// OpenAI Responses and Chat Completions (`Authorization: Bearer` auth).
    Openai,
}

/// One real upstream provider.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// Anthropic or OpenAI dialect.
    pub kind: ProviderKind,
    /// Base URL without the `/v1/...` path, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    /// Environment variable holding the API key (read once at start; never stored in config).
    pub api_key_env: String,
}

/// Maps model names to providers: the first route whose pattern matches wins.
///
/// A pattern is an exact model name, or a prefix ending in `*` (`claude-*`). The provider is a
/// key of [`ProxyConfig::providers`], `scripted:<script>` (a script in [`ProxyConfig::scripts`]),
/// `scripted` (the script named by the model, `scripted:<name>`) or `mock` (the built-in script).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Route {
    /// Model pattern.
    pub model: String,
    /// Provider name.
    pub provider: String,
}

/// Price of a model in USD per million tokens.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Price {
    /// Prompt tokens.
    pub input_per_mtok: f64,
    /// Completion tokens.
    pub output_per_mtok: f64,
    /// Cache reads (defaults to 0).
    #[serde(default)]
    pub cache_read_per_mtok: f64,
    /// Cache writes (defaults to 0).
    #[serde(default)]
    pub cache_write_per_mtok: f64,
}

/// The whole proxy configuration (TOML-deserializable).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct ProxyConfig {
    /// Real providers by name (`anthropic`, `openai`, ...).
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Model → provider routes, tried in order after the built-in ones (`scripted:*`, `mock`).
    pub routes: Vec<Route>,
    /// Price table: exact model name or `prefix*` → price.
    pub prices: BTreeMap<String, Price>,
    /// Scripts for the scripted mock model, by name.
    pub scripts: BTreeMap<String, Script>,
    /// Directory for per-trial call logs (`<trial>.calls.jsonl`); none → in memory only.
    pub call_log_dir: Option<PathBuf>,
    /// Log request and response bodies at `debug` level (for capturing CLI request shapes).
    pub log_bodies: bool,
    /// Upstream connect timeout, seconds.
    pub connect_timeout_secs: u64,
    /// Upstream whole-request timeout, seconds (long: streams can run for minutes).
    pub request_timeout_secs: u64,
    /// Largest accepted request body, bytes.
    pub max_body_bytes: usize,
    /// Longest time an agent may take to send its request body, seconds.
    pub request_body_timeout_secs: u64,
    /// Longest silence while reading from a provider (between bytes), seconds.
    pub upstream_idle_timeout_secs: u64,
    /// Largest response body passed from a provider to an agent, bytes; the stream is cut
    /// with an error beyond it.
    pub max_response_bytes: usize,
    /// Largest provider body the proxy reads whole (error bodies, non-streamed answers), bytes.
    pub max_upstream_body_bytes: usize,
    /// Output cap (tokens) of a request that sets none (`max_tokens`, `max_output_tokens`,
    /// `max_completion_tokens`): a call's worst case is reserved on its budgets with it, and
    /// it is sent to the provider so the answer cannot be longer.
    pub max_output_tokens_when_unset: u64,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        let mut providers = BTreeMap::new();
        providers.insert(
            "anthropic".into(),
            ProviderConfig {
                kind: ProviderKind::Anthropic,
                base_url: "https://api.anthropic.com".into(),
                api_key_env: "ANTHROPIC_API_KEY".into(),
            },
        );
        providers.insert(
            "openai".into(),
            ProviderConfig {
                kind: ProviderKind::Openai,
                base_url: "https://api.openai.com".into(),
                api_key_env: "OPENAI_API_KEY".into(),
            },
        );
        let routes = vec![
            Route {
                model: "claude-*".into(),
                provider: "anthropic".into(),
            },
            Route {
                model: "gpt-*".into(),
                provider: "openai".into(),
            },
            Route {
                model: "o1*".into(),
                provider: "openai".into(),
            },
            Route {
                model: "o3*".into(),
                provider: "openai".into(),
            },
            Route {
                model: "o4*".into(),
                provider: "openai".into(),
            },
            Route {
                model: "codex-*".into(),
                provider: "openai".into(),
            },
        ];
        Self {
            providers,
            routes,
            prices: BTreeMap::new(),
            scripts: BTreeMap::new(),
            call_log_dir: None,
            log_bodies: false,
            connect_timeout_secs: 10,
            request_timeout_secs: 900,
            max_body_bytes: 32 * 1024 * 1024,
            request_body_timeout_secs: 60,
            upstream_idle_timeout_secs: 300,
            max_response_bytes: 64 * 1024 * 1024,
            max_upstream_body_bytes: 16 * 1024 * 1024,
            max_output_tokens_when_unset: 32_000,
        }
    }
}

impl ProxyConfig {
    /// Parses a TOML configuration.
    pub fn from_toml(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }

    /// The price of a model: exact entry first, then the longest matching `prefix*`.
    pub fn price(&self, model: &str) -> Option<Price> {
        price_of(&self.prices, model)
    }
}

/// The price of a model in a price table: exact entry first, then the longest matching `prefix*`.
pub(crate) fn price_of(prices: &BTreeMap<String, Price>, model: &str) -> Option<Price> {
    if let Some(p) = prices.get(model) {
        return Some(*p);
    }
    prices
        .iter()
        .filter_map(|(k, p)| {
            k.strip_suffix('*')
                .filter(|pre| model.starts_with(pre))
                .map(|pre| (pre.len(), *p))
        })
        .max_by_key(|(n, _)| *n)
        .map(|(_, p)| p)
}

/// True when `pattern` (exact or `prefix*`) matches `model`.
pub(crate) fn pattern_matches(pattern: &str, model: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => model.starts_with(prefix),
        None => pattern == model,
    }
}

impl Price {
    /// Cost in USD of the given counts.
    pub fn cost(&self, c: &crate::wire::TokenCounts) -> f64 {
        (c.input_tokens as f64 * self.input_per_mtok
            + c.output_tokens as f64 * self.output_per_mtok
            + c.cache_read_tokens as f64 * self.cache_read_per_mtok
            + c.cache_write_tokens as f64 * self.cache_write_per_mtok)
            / 1_000_000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_prefers_exact_then_longest_prefix() {
        let cfg = ProxyConfig::from_toml(
            r#"
            [prices."claude-*"]
            input_per_mtok = 1.0
            output_per_mtok = 2.0
            [prices."claude-sonnet-*"]
            input_per_mtok = 3.0
            output_per_mtok = 15.0
            "#,
        )
        .expect("valid toml");
        assert_eq!(
            cfg.price("claude-sonnet-4").map(|p| p.input_per_mtok),
            Some(3.0)
        );
        assert_eq!(
            cfg.price("claude-haiku").map(|p| p.input_per_mtok),
            Some(1.0)
        );
        assert!(cfg.price("gpt-5").is_none());
        // defaults survive a partial file
        assert!(cfg.providers.contains_key("anthropic"));
    }
}
