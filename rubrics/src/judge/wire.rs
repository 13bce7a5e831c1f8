//! The two wire formats a judge speaks: request bodies, headers and answer parsing for
//! OpenAI-compatible Chat Completions and Anthropic Messages. No policy: retries, caching and
//! voting live elsewhere.

use serde::Deserialize;
use serde_json::{Value, json};

use super::ScoreScale;
use super::config::{JudgeApi, JudgeConfig};
use crate::report::cap_text;

/// `anthropic-version` sent with every Messages request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The text of one judge call: our rules (system) and the question with its fenced data (user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

/// The endpoint a request goes to.
pub fn endpoint(config: &JudgeConfig) -> String {
    let base = config.effective_base_url().trim_end_matches('/');
    match config.api {
        JudgeApi::ChatCompletions => format!("{base}/chat/completions"),
        JudgeApi::AnthropicMessages => format!("{base}/messages"),
    }
}

/// The JSON body of a request.
pub fn request_body(config: &JudgeConfig, prompt: &Prompt) -> Value {
    match config.api {
        JudgeApi::ChatCompletions => {
            let mut body = json!({
                "model": config.model,
                "messages": [
                    {"role": "system", "content": prompt.system},
                    {"role": "user", "content": prompt.user},
                ],
                "temperature": 0,
                "max_tokens": config.max_tokens,
            });
            if config.json_mode {
                body["response_format"] = json!({"type": "json_object"});
            }
            body
        }
        JudgeApi::AnthropicMessages => json!({
            "model": config.model,
            "max_tokens": config.max_tokens,
            "temperature": 0,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
        }),
    }
}

/// Adds the API's authentication and version headers.
pub fn authorize(
    api: JudgeApi,
    request: reqwest::RequestBuilder,
    key: Option<&str>,
) -> reqwest::RequestBuilder {
    match api {
        JudgeApi::ChatCompletions => match key {
            Some(k) => request.bearer_auth(k),
            None => request,
        },
        JudgeApi::AnthropicMessages => {
            let request = request.header("anthropic-version", ANTHROPIC_VERSION);
            match key {
                Some(k) => request.header("x-api-key", k),
                None => request,
            }
        }
    }
}

/// A judge's answer, accepted by the protocol.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub score: f64,
    pub justification: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Deserialize)]
struct ChatResponse {
    choices: Vec<ChatChoice>,
    #[serde(default)]
    usage: Option<ChatUsage>,
}
#[derive(Deserialize)]
struct ChatChoice {
    message: ChatMessage,
}
#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
}
#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

#[derive(Deserialize)]
struct MessagesResponse {
    content: Vec<MessagesBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<MessagesUsage>,
}
#[derive(Deserialize)]
struct MessagesBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}
#[derive(Deserialize)]
struct MessagesUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// The answer's text and (input, output) tokens, read from a successful response body.
fn content(api: JudgeApi, body: &str) -> Result<(String, u64, u64), String> {
    match api {
        JudgeApi::ChatCompletions => {
            let resp: ChatResponse =
                serde_json::from_str(body).map_err(|e| format!("not a chat completion: {e}"))?;
            let (i, o) = resp
                .usage
                .map_or((0, 0), |u| (u.prompt_tokens, u.completion_tokens));
            let text = resp
                .choices
                .into_iter()
                .next()
                .and_then(|c| c.message.content)
                .ok_or("the answer has no message content")?;
            Ok((text, i, o))
        }
        JudgeApi::AnthropicMessages => {
            let resp: MessagesResponse = serde_json::from_str(body)
                .map_err(|e| format!("not a Messages API response: {e}"))?;
            let (i, o) = resp
                .usage
                .map_or((0, 0), |u| (u.input_tokens, u.output_tokens));
            if resp.stop_reason.as_deref() == Some("max_tokens") {
                return Err("the answer was cut at max_tokens".into());
            }
            let text: String = resp
                .content
                .into_iter()
                .filter(|b| b.kind == "text")
                .filter_map(|b| b.text)
                .collect();
            if text.is_empty() {
                return Err("the answer has no text block".into());
            }
            Ok((text, i, o))
        }
    }
}

/// Parses a successful response body of `api` into an [`Answer`], checking our protocol: one
/// JSON object with exactly `score` (on `scale`) and `justification`.
pub fn parse_answer(api: JudgeApi, body: &str, scale: ScoreScale) -> Result<Answer, String> {
    let (text, input_tokens, output_tokens) = content(api, body)?;
    let (score, justification) = parse_verdict(&text, scale)?;
    Ok(Answer {
        score,
        justification,
        input_tokens,
        output_tokens,
    })
}

/// The protocol check on the answer's text.
fn parse_verdict(content: &str, scale: ScoreScale) -> Result<(f64, String), String> {
    let text = content.trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(text)
        .trim();
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("the answer is not strict JSON: {e}"))?;
    let obj = v.as_object().ok_or("the answer is not a JSON object")?;
    if let Some(k) = obj.keys().find(|k| *k != "score" && *k != "justification") {
        return Err(format!("unexpected key {k:?} in the answer"));
    }
    let score = obj
        .get("score")
        .and_then(Value::as_f64)
        .ok_or("`score` is missing or not a number")?;
    let justification = obj
        .get("justification")
        .and_then(Value::as_str)
        .ok_or("`justification` is missing or not a string")?
        .to_owned();
    let ok = match scale {
        ScoreScale::Binary => score == 0.0 || score == 1.0,
        ScoreScale::Unit => (0.0..=1.0).contains(&score),
    };
    if !ok {
        return Err(format!("score {score} is outside the allowed scale"));
    }
    Ok((score, cap_text(&justification, 4000)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(content: &str) -> String {
        json!({"choices": [{"message": {"role": "assistant", "content": content}}],
               "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
        .to_string()
    }

    fn messages(content: &str) -> String {
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
               "content": [{"type": "text", "text": content}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 12, "output_tokens": 7}})
        .to_string()
    }

    #[test]
    fn answer_parsing_table_for_both_apis() {
        let cases: &[(&str, ScoreScale, Option<f64>)] = &[
            (
                r#"{"score": 1, "justification": "ok"}"#,
                ScoreScale::Binary,
                Some(1.0),
            ),
            (
                r#"{"score": 0, "justification": "no"}"#,
                ScoreScale::Binary,
                Some(0.0),
            ),
            (
                "```json\n{\"score\": 1, \"justification\": \"ok\"}\n```",
                ScoreScale::Binary,
                Some(1.0),
            ),
            (
                r#"{"score": 0.5, "justification": "half"}"#,
                ScoreScale::Binary,
                None,
            ),
            (
                r#"{"score": 0.5, "justification": "half"}"#,
                ScoreScale::Unit,
                Some(0.5),
            ),
            (
                r#"{"score": 1.5, "justification": "x"}"#,
                ScoreScale::Unit,
                None,
            ),
            (
                r#"{"score": "1", "justification": "x"}"#,
                ScoreScale::Binary,
                None,
            ),
            (r#"{"score": 1}"#, ScoreScale::Binary, None),
            (
                r#"{"score": 1, "justification": "x", "bonus": 2}"#,
                ScoreScale::Binary,
                None,
            ),
            ("The score is 1.", ScoreScale::Binary, None),
            ("", ScoreScale::Binary, None),
        ];
        for (text, scale, want) in cases {
            let got = parse_answer(JudgeApi::ChatCompletions, &chat(text), *scale)
                .ok()
                .map(|a| a.score);
            assert_eq!(got, *want, "chat: {text}");
            let got = parse_answer(JudgeApi::AnthropicMessages, &messages(text), *scale)
                .ok()
                .map(|a| a.score);
            assert_eq!(got, *want, "messages: {text}");
        }
    }

    #[test]
    fn usage_is_read_from_each_api() {
        let a = parse_answer(
            JudgeApi::ChatCompletions,
            &chat(r#"{"score": 1, "justification": "ok"}"#),
            ScoreScale::Binary,
        )
        .expect("ok");
        assert_eq!((a.input_tokens, a.output_tokens), (10, 5));
        let a = parse_answer(
            JudgeApi::AnthropicMessages,
            &messages(r#"{"score": 1, "justification": "ok"}"#),
            ScoreScale::Binary,
        )
        .expect("ok");
        assert_eq!((a.input_tokens, a.output_tokens), (12, 7));
    }

    #[test]
    fn malformed_bodies_name_the_api() {
        for api in [JudgeApi::ChatCompletions, JudgeApi::AnthropicMessages] {
            assert!(parse_answer(api, "not json", ScoreScale::Unit).is_err());
        }
        assert!(
            parse_answer(
                JudgeApi::ChatCompletions,
                r#"{"choices": []}"#,
                ScoreScale::Unit
            )
            .expect_err("empty")
            .contains("no message content")
        );
        // A chat completion is not a Messages response, and the other way round.
        let e = parse_answer(
            JudgeApi::AnthropicMessages,
            &chat(r#"{"score": 1, "justification": "ok"}"#),
            ScoreScale::Binary,
        )
        .expect_err("wrong API");
        assert!(e.contains("Messages API"), "{e}");
        // Thinking blocks are skipped; a cut answer is invalid.
        let thinking = json!({"content": [{"type": "thinking", "thinking": "hmm"},
                                          {"type": "text", "text": "{\"score\": 0, \"justification\": \"no\"}"}],
                              "stop_reason": "end_turn"})
        .to_string();
        assert_eq!(
            parse_answer(JudgeApi::AnthropicMessages, &thinking, ScoreScale::Binary)
                .expect("text block")
                .score,
            0.0
        );
        let cut = json!({"content": [{"type": "text", "text": "{\"score\": 1, \"justif"}],
                         "stop_reason": "max_tokens"})
        .to_string();
        let e =
            parse_answer(JudgeApi::AnthropicMessages, &cut, ScoreScale::Binary).expect_err("cut");
        assert!(e.contains("max_tokens"), "{e}");
    }

    #[test]
    fn request_bodies_per_api() {
        let prompt = Prompt {
            system: "RULES".into(),
            user: "QUESTION".into(),
        };
        let mut c = JudgeConfig::new("http://127.0.0.1:9/v1/", "judge-m");
        insta::assert_json_snapshot!("chat_completions_body", request_body(&c, &prompt));
        assert_eq!(endpoint(&c), "http://127.0.0.1:9/v1/chat/completions");
        c.api = JudgeApi::AnthropicMessages;
        insta::assert_json_snapshot!("anthropic_messages_body", request_body(&c, &prompt));
        assert_eq!(endpoint(&c), "http://127.0.0.1:9/v1/messages");
    }
}
