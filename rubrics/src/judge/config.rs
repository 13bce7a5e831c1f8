//! How to reach one judge model: its wire format, address, key variable, limits and price.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The HTTP API a judge model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeApi {
    /// OpenAI-compatible `POST {base}/chat/completions` (hosted APIs, vLLM, Ollama), bearer key.
    #[default]
    ChatCompletions,
    /// Anthropic `POST {base}/messages`, `x-api-key` and `anthropic-version` headers.
    AnthropicMessages,
}

impl JudgeApi {
    /// The provider's public base URL, used when none is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            JudgeApi::ChatCompletions => "https://api.openai.com/v1",
            JudgeApi::AnthropicMessages => "https://api.anthropic.com/v1",
        }
    }

    /// The environment variable conventionally holding the provider's key.
    pub fn default_key_env(self) -> &'static str {
        match self {
            JudgeApi::ChatCompletions => "OPENAI_API_KEY",
            JudgeApi::AnthropicMessages => "ANTHROPIC_API_KEY",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JudgeApi::ChatCompletions => "chat_completions",
            JudgeApi::AnthropicMessages => "anthropic_messages",
        }
    }
}

impl fmt::Display for JudgeApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `openai`/`chat_completions` or `anthropic`/`anthropic_messages` (flags, environment).
impl FromStr for JudgeApi {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "openai" | "chat_completions" | "chat" => Ok(JudgeApi::ChatCompletions),
            "anthropic" | "anthropic_messages" | "messages" => Ok(JudgeApi::AnthropicMessages),
            other => Err(format!(
                "unknown judge API {other:?}: use `openai` (chat completions) or `anthropic` (messages)"
            )),
        }
    }
}

/// Dollars per million tokens, for counting what the judge costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
}

impl Price {
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input_usd_per_mtok
            + output_tokens as f64 * self.output_usd_per_mtok)
            / 1e6
    }
}

/// Where and how to reach one judge model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeConfig {
    #[serde(default)]
    pub api: JudgeApi,
    /// Base URL up to the version, e.g. `https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1` or `https://api.anthropic.com/v1`; empty: the API's own.
    #[serde(default)]
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key (never the key itself).
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Retries after a 429, a 5xx (Anthropic's 529 included) or a transport error.
    #[serde(default = "default_retries")]
    pub max_retries: u32,
    /// Retries after an answer that breaks the JSON protocol.
    #[serde(default = "default_invalid_retries")]
    pub max_invalid_retries: u32,
    /// First backoff delay; doubles per retry (capped at 30 s).
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
    /// Bytes of each agent file shown to the judge.
    #[serde(default = "default_file_cap")]
    pub max_file_bytes: usize,
    /// Chat Completions: ask for `response_format: json_object` (disable for servers that
    /// reject it). The Messages API has no such switch; the answer is checked either way.
    #[serde(default = "yes")]
    pub json_mode: bool,
    /// Largest answer requested (`max_tokens`, required by the Messages API).
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
    /// Token prices; without them costs are not counted (tokens always are).
    #[serde(default)]
    pub price: Option<Price>,
}

fn default_timeout() -> u64 {
    120
}
fn default_retries() -> u32 {
    3
}
fn default_invalid_retries() -> u32 {
    1
}
fn default_backoff() -> u64 {
    500
}
fn default_file_cap() -> usize {
    32 * 1024
}
fn default_max_tokens() -> u32 {
    1024
}
fn yes() -> bool {
    true
}

impl JudgeConfig {
    /// An OpenAI-compatible judge at `base_url`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api: JudgeApi::ChatCompletions,
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            timeout_secs: default_timeout(),
            max_retries: default_retries(),
            max_invalid_retries: default_invalid_retries(),
            backoff_ms: default_backoff(),
            max_file_bytes: default_file_cap(),
            json_mode: true,
            max_tokens: default_max_tokens(),
            price: None,
        }
    }

    /// The base URL requests go to (the API's public one when none is configured).
    pub fn effective_base_url(&self) -> &str {
        if self.base_url.trim().is_empty() {
            self.api.default_base_url()
        } else {
            &self.base_url
        }
    }

    /// A judge speaking `api` at `base_url`.
    pub fn for_api(api: JudgeApi, base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            api,
            ..Self::new(base_url, model)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_names_parse_and_round_trip() {
        for (text, api) in [
            ("openai", JudgeApi::ChatCompletions),
            ("chat-completions", JudgeApi::ChatCompletions),
            ("Anthropic", JudgeApi::AnthropicMessages),
            ("anthropic_messages", JudgeApi::AnthropicMessages),
        ] {
            assert_eq!(text.parse::<JudgeApi>(), Ok(api), "{text}");
            assert_eq!(api.as_str().parse::<JudgeApi>(), Ok(api));
        }
        let e = "gemini".parse::<JudgeApi>().expect_err("unknown");
        assert!(e.contains("gemini") && e.contains("anthropic"), "{e}");
    }

    #[test]
    fn toml_config_defaults_and_strictness() {
        let c: JudgeConfig = toml::from_str(
            "api = \"anthropic_messages\"\nbase_url = \"https://api.anthropic.com/v1\"\nmodel = \"m\"\nprice = { input_usd_per_mtok = 3.0, output_usd_per_mtok = 15.0 }\n",
        )
        .expect("parses");
        assert_eq!(c.api, JudgeApi::AnthropicMessages);
        let bare: JudgeConfig =
            toml::from_str("api = \"anthropic_messages\"\nmodel = \"m\"\n").expect("parses");
        assert_eq!(bare.effective_base_url(), "https://api.anthropic.com/v1");
        assert_eq!((c.max_tokens, c.max_retries), (1024, 3));
        let p = c.price.expect("price");
        assert!((p.cost(1_000_000, 100_000) - 4.5).abs() < 1e-12);
        let e = toml::from_str::<JudgeConfig>("base_url = \"x\"\nmodel = \"m\"\ntemprature = 0\n")
            .expect_err("typo");
        assert!(e.to_string().contains("temprature"), "{e}");
    }
}
