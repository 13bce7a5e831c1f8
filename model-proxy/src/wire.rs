//! The three wire formats: what a request names, how an error looks, where usage is reported.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// An API dialect the proxy serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// Anthropic Messages (`POST /v1/messages`).
    AnthropicMessages,
    /// OpenAI Responses (`POST /v1/responses`).
    OpenAiResponses,
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    OpenAiChat,
}

impl WireFormat {
    /// The upstream path (below the provider's base URL) for this format.
    pub fn path(self) -> &'static str {
        match self {
            Self::AnthropicMessages => "/v1/messages",
            Self::OpenAiResponses => "/v1/responses",
            Self::OpenAiChat => "/v1/chat/completions",
        }
    }
}

/// The kind of an error the proxy reports, mapped onto each format's status and type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Unknown or missing trial token.
    Unauthorized,
    /// The request body is not valid for this API.
    BadRequest,
    /// The model name routes nowhere.
    UnknownModel,
    /// The trial spent its token, cost or request budget, or what is left cannot pay for this
    /// call's worst case.
    BudgetExhausted,
    /// The call's worst case fits the budget, but not beside the calls still running: a
    /// rate-limit error (429), which the CLIs retry after a pause.
    Busy,
    /// The provider could not be reached or answered nonsense.
    Upstream,
    /// The proxy cannot serve this and retrying will not help (provider key not configured,
    /// replay log exhausted): 400, so clients stop instead of retrying.
    Unavailable,
}

/// Renders an error in the wire format's own shape: `(status, body)`.
pub fn error_body(format: WireFormat, kind: ErrorKind, message: &str) -> (u16, Value) {
    match format {
        WireFormat::AnthropicMessages => {
            let (status, ty) = match kind {
                ErrorKind::Unauthorized => (401, "authentication_error"),
                ErrorKind::BadRequest => (400, "invalid_request_error"),
                ErrorKind::UnknownModel => (404, "not_found_error"),
                ErrorKind::BudgetExhausted => (402, "billing_error"),
                ErrorKind::Busy => (429, "rate_limit_error"),
                ErrorKind::Upstream => (502, "api_error"),
                // 400, not 503: clients retry 5xx for minutes, and this will not heal by itself.
                ErrorKind::Unavailable => (400, "invalid_request_error"),
            };
            (
                status,
                json!({"type": "error", "error": {"type": ty, "message": message}}),
            )
        }
        WireFormat::OpenAiResponses | WireFormat::OpenAiChat => {
            let (status, ty, code) = match kind {
                ErrorKind::Unauthorized => (401, "invalid_request_error", "invalid_api_key"),
                ErrorKind::BadRequest => (400, "invalid_request_error", "invalid_request"),
                ErrorKind::UnknownModel => (404, "invalid_request_error", "model_not_found"),
                ErrorKind::BudgetExhausted => (429, "insufficient_quota", "insufficient_quota"),
                ErrorKind::Busy => (429, "requests", "rate_limit_exceeded"),
                ErrorKind::Upstream => (502, "server_error", "upstream_error"),
                ErrorKind::Unavailable => (400, "invalid_request_error", "proxy_unavailable"),
            };
            (
                status,
                json!({"error": {"message": message, "type": ty, "param": null, "code": code}}),
            )
        }
    }
}

/// The request field that bounds a call's output tokens in this format.
fn output_cap_field(format: WireFormat, req: &Value) -> &'static str {
    match format {
        WireFormat::AnthropicMessages => "max_tokens",
        WireFormat::OpenAiResponses => "max_output_tokens",
        WireFormat::OpenAiChat if req.get("max_tokens").is_some() => "max_tokens",
        WireFormat::OpenAiChat => "max_completion_tokens",
    }
}

/// The most output tokens the request allows (`max_tokens`, `max_output_tokens`,
/// `max_completion_tokens`), `None` when it sets none (or not as a whole number).
pub fn max_output_tokens(format: WireFormat, req: &Value) -> Option<u64> {
    let v = req.get(output_cap_field(format, req))?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0 && f.fract() == 0.0)
            .map(|f| f as u64)
    })
}

/// Sets the request's output cap to `n` tokens (the field of its format).
pub fn set_max_output_tokens(format: WireFormat, req: &mut Value, n: u64) {
    let field = output_cap_field(format, req);
    if let Some(o) = req.as_object_mut() {
        o.insert(field.to_string(), json!(n));
    }
}

/// Token counts of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Prompt tokens (not counting cache reads/writes for Anthropic).
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Tokens written to the prompt cache.
    pub cache_write_tokens: u64,
}

impl TokenCounts {
    /// Every token billed.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// Adds another count.
    pub fn add(&mut self, o: &TokenCounts) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_read_tokens += o.cache_read_tokens;
        self.cache_write_tokens += o.cache_write_tokens;
    }
}

fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

/// Applies a usage object (any of the three formats) to `counts`. Later reports of the same
/// field overwrite earlier ones (streams report cumulative figures).
fn apply_usage(format: WireFormat, usage: &Value, counts: &mut TokenCounts) {
    match format {
        WireFormat::AnthropicMessages => {
            if let Some(x) = u(usage, "input_tokens") {
                counts.input_tokens = x;
            }
            if let Some(x) = u(usage, "output_tokens") {
                counts.output_tokens = x;
            }
            if let Some(x) = u(usage, "cache_read_input_tokens") {
                counts.cache_read_tokens = x;
            }
            if let Some(x) = u(usage, "cache_creation_input_tokens") {
                counts.cache_write_tokens = x;
            }
        }
        WireFormat::OpenAiResponses => {
            let cached = usage
                .get("input_tokens_details")
                .and_then(|d| u(d, "cached_tokens"))
                .unwrap_or(0);
            if let Some(x) = u(usage, "input_tokens") {
                counts.input_tokens = x.saturating_sub(cached);
                counts.cache_read_tokens = cached;
            }
            if let Some(x) = u(usage, "output_tokens") {
                counts.output_tokens = x;
            }
        }
        WireFormat::OpenAiChat => {
            let cached = usage
                .get("prompt_tokens_details")
                .and_then(|d| u(d, "cached_tokens"))
                .unwrap_or(0);
            if let Some(x) = u(usage, "prompt_tokens") {
                counts.input_tokens = x.saturating_sub(cached);
                counts.cache_read_tokens = cached;
            }
            if let Some(x) = u(usage, "completion_tokens") {
                counts.output_tokens = x;
            }
        }
    }
}

/// Reads usage out of a whole (non-streamed) JSON response body.
pub fn usage_from_json(format: WireFormat, body: &Value) -> Option<TokenCounts> {
    let usage = body.get("usage").filter(|u| u.is_object())?;
    let mut c = TokenCounts::default();
    apply_usage(format, usage, &mut c);
    Some(c)
}

/// Reads usage out of one SSE event's data, updating `counts`; returns true if it saw usage.
pub fn usage_from_event(format: WireFormat, data: &Value, counts: &mut TokenCounts) -> bool {
    let usage = match format {
        WireFormat::AnthropicMessages => match data.get("type").and_then(Value::as_str) {
            Some("message_start") => data.get("message").and_then(|m| m.get("usage")),
            Some("message_delta") => data.get("usage"),
            _ => None,
        },
        WireFormat::OpenAiResponses => match data.get("type").and_then(Value::as_str) {
            Some("response.completed" | "response.incomplete" | "response.failed") => {
                data.get("response").and_then(|r| r.get("usage"))
            }
            _ => None,
        },
        WireFormat::OpenAiChat => data.get("usage"),
    };
    match usage.filter(|u| u.is_object()) {
        Some(usage) => {
            apply_usage(format, usage, counts);
            true
        }
        None => false,
    }
}

/// Incremental SSE parser: feed bytes, get complete events' `data` payloads.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    data: String,
}

impl SseParser {
    /// Feeds bytes; returns the data of every event completed by them.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() {
                    out.push(std::mem::take(&mut self.data));
                }
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
        }
        out
    }
}

/// Reads usage from a complete response body (SSE stream or JSON).
pub fn usage_from_bytes(format: WireFormat, body: &[u8]) -> Option<TokenCounts> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return usage_from_json(format, &v);
    }
    let mut p = SseParser::default();
    let mut events = p.push(body);
    events.extend(p.push(b"\n\n"));
    let mut counts = TokenCounts::default();
    let mut seen = false;
    for e in events {
        if let Ok(v) = serde_json::from_str::<Value>(&e) {
            seen |= usage_from_event(format, &v, &mut counts);
        }
    }
    seen.then_some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_stream_usage_takes_final_output_count() {
        let body = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":7}}\n\n";
        let c = usage_from_bytes(WireFormat::AnthropicMessages, body);
        assert_eq!(
            c,
            Some(TokenCounts {
                input_tokens: 12,
                output_tokens: 7,
                ..Default::default()
            })
        );
    }

    #[test]
    fn chat_json_usage_splits_cached_tokens() {
        let v = json!({"usage": {"prompt_tokens": 10, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}});
        let c = usage_from_json(WireFormat::OpenAiChat, &v);
        assert_eq!(
            c,
            Some(TokenCounts {
                input_tokens: 6,
                output_tokens: 3,
                cache_read_tokens: 4,
                cache_write_tokens: 0
            })
        );
    }

    #[test]
    fn error_bodies_per_format() {
        let kinds = [
            ErrorKind::Unauthorized,
            ErrorKind::BadRequest,
            ErrorKind::UnknownModel,
            ErrorKind::BudgetExhausted,
            ErrorKind::Upstream,
            ErrorKind::Unavailable,
        ];
        let all: Vec<Value> = [WireFormat::AnthropicMessages, WireFormat::OpenAiResponses]
            .into_iter()
            .flat_map(|f| {
                kinds.iter().map(move |k| {
                    let (status, body) = error_body(f, *k, "message");
                    json!({"format": f, "kind": format!("{k:?}"), "status": status, "body": body})
                })
            })
            .collect();
        insta::assert_json_snapshot!(all);
        // Chat Completions errors look exactly like Responses errors.
        for k in kinds {
            assert_eq!(
                error_body(WireFormat::OpenAiChat, k, "m"),
                error_body(WireFormat::OpenAiResponses, k, "m")
            );
        }
    }

    #[test]
    fn sse_parser_handles_split_lines_and_crlf() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: x\r\ndata: {\"a\"").is_empty());
        assert_eq!(
            p.push(b":1}\r\n\r\ndata: 2\n\n"),
            vec!["{\"a\":1}".to_string(), "2".to_string()]
        );
    }
}
