//! LLM judge: OpenAI-compatible Chat Completions (hosted APIs, vLLM, Ollama) and Anthropic
//! Messages, one model or a panel with a majority vote.
//!
//! Used only where no deterministic check can decide: PaperBench leaves, SciCoQA discrepancy
//! matching and free-form `judge` criteria. The protocol is ours: the judge must answer a strict
//! JSON object `{"score": …, "justification": "…"}`; anything else is `judge_invalid` (after a
//! bounded retry), never a 0. Agent-written text is fenced with a delimiter that does not occur
//! in it, size-capped, and declared to be data, so an agent file cannot rewrite the protocol.
//! API keys come from environment variables named in the config and are never logged.
//!
//! Modules: [`config`] (one model's address, API, limits, price), [`wire`] (the two HTTP
//! formats), [`prompt`] (fencing), [`prompts`] (our questions), [`client`] (one model: retries),
//! [`cache`] (accepted verdicts, in memory or in the run's store), [`vote`] (a panel's verdict).

pub mod cache;
pub mod client;
pub mod config;
pub mod prompt;
pub mod prompts;
pub mod vote;
pub mod wire;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use cache::{CacheError, MemoryCache, VerdictCache};
pub use client::JudgeClient;
pub use config::{JudgeApi, JudgeConfig, Price};
pub use wire::{Prompt, parse_answer};

use crate::status::Status;

/// Why a judge could not be built.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error("judge API key variable {0} is not set; export it or remove `api_key_env`")]
    MissingKey(String),
    #[error("judge base URL {0:?} is not an http(s) URL")]
    BadUrl(String),
    #[error("the judge's model name is empty")]
    NoModel,
    #[error("a judge panel needs at least one judge")]
    EmptyPanel,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// How strict the score is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreScale {
    /// 0 or 1.
    Binary,
    /// Any number in [0, 1].
    Unit,
}

/// An accepted answer: one judge's, or a panel's majority.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub score: f64,
    pub justification: String,
    /// HTTP attempts made (retries included; 0 when served from the cache).
    pub attempts: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Dollars, when the judge's price is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The judge model (`panel` for a panel's verdict).
    #[serde(default)]
    pub model: String,
    /// Each member's vote (panels of two or more).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<Vote>,
}

/// A judge that could not give a verdict: an infrastructure status, never a score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeFailure {
    /// `judge_invalid` (answered, but not by the protocol), `judge_unavailable` (unreachable,
    /// timed out, refused) or `judge_split` (a panel without a majority).
    pub status: Status,
    pub reason: String,
    /// The last raw answer (capped), for the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    pub attempts: u32,
    #[serde(default)]
    pub model: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub votes: Vec<Vote>,
}

/// One panel member's answer, as shown in reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Vote {
    pub model: String,
    /// The member's score (`None` when it failed).
    pub score: Option<f64>,
    /// The member's failure status (`None` when it answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    /// Its justification, or why it failed.
    pub text: String,
    pub attempts: u32,
}

impl Vote {
    fn from_result(r: &Result<Verdict, JudgeFailure>) -> Self {
        match r {
            Ok(v) => Vote {
                model: v.model.clone(),
                score: Some(v.score),
                status: None,
                text: v.justification.clone(),
                attempts: v.attempts,
            },
            Err(f) => Vote {
                model: f.model.clone(),
                score: None,
                status: Some(f.status),
                text: f.reason.clone(),
                attempts: f.attempts,
            },
        }
    }
}

/// A piece of agent-written text shown to the judge.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFile {
    pub name: String,
    pub content: String,
}

/// A question for the judge.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeRequest {
    /// What to decide (written by us or the task author; trusted).
    pub instruction: String,
    /// Reference material (held-out; trusted).
    pub reference: Option<String>,
    /// Agent-written material (untrusted data).
    pub files: Vec<AgentFile>,
    pub scale: ScoreScale,
}

/// The judge graders ask: one model, or a panel asked concurrently whose verdict is the
/// majority's (see [`vote`]).
#[derive(Debug)]
pub struct Judge {
    members: Vec<JudgeClient>,
}

impl Judge {
    /// One judge, its key read from `config.api_key_env` when set.
    pub fn new(config: JudgeConfig) -> Result<Self, JudgeError> {
        Self::of(vec![JudgeClient::new(config)?])
    }

    /// One judge with an explicit key (tests, or a key from a secret store).
    pub fn with_key(config: JudgeConfig, api_key: Option<String>) -> Result<Self, JudgeError> {
        Self::of(vec![JudgeClient::with_key(config, api_key)?])
    }

    /// A panel, each key read from its config's `api_key_env`.
    pub fn panel(configs: Vec<JudgeConfig>) -> Result<Self, JudgeError> {
        Self::of(
            configs
                .into_iter()
                .map(JudgeClient::new)
                .collect::<Result<_, _>>()?,
        )
    }

    /// A panel of built clients.
    pub fn of(members: Vec<JudgeClient>) -> Result<Self, JudgeError> {
        if members.is_empty() {
            return Err(JudgeError::EmptyPanel);
        }
        Ok(Self { members })
    }

    /// Every member keeps its accepted verdicts in `cache` (each under its own key: API, model,
    /// prompt), e.g. the run's store, so a resumed run or a re-grade never asks twice.
    pub fn with_cache(self, cache: Arc<dyn VerdictCache>) -> Self {
        Self {
            members: self
                .members
                .into_iter()
                .map(|m| m.with_cache(cache.clone()))
                .collect(),
        }
    }

    /// The most bytes of one agent file any member is shown (how much graders read).
    pub fn max_file_bytes(&self) -> usize {
        self.members
            .iter()
            .map(|m| m.config().max_file_bytes)
            .max()
            .unwrap_or(0)
    }

    /// Asks every member concurrently and combines their answers (a single judge's answer is
    /// returned as it is).
    pub async fn ask(&self, req: &JudgeRequest) -> Result<Verdict, JudgeFailure> {
        let asks = self.members.iter().map(|m| async move {
            let p = prompt::build(req, m.config().max_file_bytes);
            m.ask(&p, req.scale).await
        });
        vote::majority(req.scale, futures::future::join_all(asks).await)
    }
}
