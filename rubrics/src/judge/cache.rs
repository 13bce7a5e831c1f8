//! Where a judge keeps its accepted verdicts: a [`VerdictCache`] keyed by a hash of (API, model,
//! prompt, scale), so a question already answered is never asked again. [`MemoryCache`] lives as
//! long as the judge; the green agent's run store implements the trait so that a run, its
//! `resume` and any re-grading share one cache. Only accepted verdicts are put; failures never
//! are, and the key holds no secret (no API key, no base URL).

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::config::JudgeConfig;
use super::wire::Prompt;
use super::{ScoreScale, Verdict};

/// Why the cache could not be read or written (the judge then asks the model, or goes on
/// without storing: a cache failure never fails a grade).
#[derive(Debug, thiserror::Error)]
#[error("judge verdict cache: {what}")]
pub struct CacheError {
    pub what: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// A store of accepted verdicts, keyed by [`cache_key`].
#[async_trait::async_trait]
pub trait VerdictCache: Send + Sync + std::fmt::Debug {
    /// The verdict stored under `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Verdict>, CacheError>;
    /// Stores an accepted verdict (a verdict already stored under `key` is kept).
    async fn put(&self, key: &str, verdict: &Verdict) -> Result<(), CacheError>;
}

/// The key of one question to one model: SHA-256 over the API, the model, the prompt and the
/// scale, versioned so a change of what is hashed never reuses old entries.
pub fn cache_key(config: &JudgeConfig, prompt: &Prompt, scale: ScoreScale) -> String {
    let mut h = Sha256::new();
    for part in [
        "judge-verdict-v1",
        config.api.as_str(),
        &config.model,
        &prompt.system,
        &prompt.user,
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.update([scale as u8]);
    hex::encode(h.finalize())
}

/// Whether a stored verdict is one the judge could have accepted on this scale (a corrupt or
/// foreign entry is ignored, never turned into a score).
pub fn acceptable(verdict: &Verdict, scale: ScoreScale) -> bool {
    let s = verdict.score;
    s.is_finite()
        && match scale {
            ScoreScale::Binary => s == 0.0 || s == 1.0,
            ScoreScale::Unit => (0.0..=1.0).contains(&s),
        }
}

/// Verdicts kept in memory for the judge's lifetime (the default).
#[derive(Debug, Default)]
pub struct MemoryCache {
    map: Mutex<HashMap<String, Verdict>>,
}

impl MemoryCache {
    /// How many verdicts are stored.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[async_trait::async_trait]
impl VerdictCache for MemoryCache {
    async fn get(&self, key: &str) -> Result<Option<Verdict>, CacheError> {
        Ok(self.map.lock().ok().and_then(|m| m.get(key).cloned()))
    }

    async fn put(&self, key: &str, verdict: &Verdict) -> Result<(), CacheError> {
        if let Ok(mut m) = self.map.lock() {
            m.entry(key.to_owned()).or_insert_with(|| verdict.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(user: &str) -> Prompt {
        Prompt {
            system: "rules".into(),
            user: user.into(),
        }
    }

    #[test]
    fn the_key_depends_on_what_is_asked_and_never_on_the_secret_or_url() {
        let a = JudgeConfig::new("http://127.0.0.1:1/v1", "m");
        let mut b = a.clone();
        b.base_url = "http://user:pw@elsewhere/v1".into();
        b.api_key_env = Some("SOME_KEY".into());
        let k = cache_key(&a, &prompt("q"), ScoreScale::Binary);
        assert_eq!(k, cache_key(&b, &prompt("q"), ScoreScale::Binary));
        assert_ne!(k, cache_key(&a, &prompt("q2"), ScoreScale::Binary));
        assert_ne!(k, cache_key(&a, &prompt("q"), ScoreScale::Unit));
        let mut c = a.clone();
        c.model = "other".into();
        assert_ne!(k, cache_key(&c, &prompt("q"), ScoreScale::Binary));
        assert_eq!(k.len(), 64);
    }

    #[test]
    fn only_scores_the_scale_allows_are_acceptable() {
        let v = |score| Verdict {
            score,
            justification: String::new(),
            attempts: 1,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost_usd: None,
            model: "m".into(),
            votes: Vec::new(),
        };
        assert!(acceptable(&v(1.0), ScoreScale::Binary));
        assert!(!acceptable(&v(0.5), ScoreScale::Binary));
        assert!(acceptable(&v(0.5), ScoreScale::Unit));
        assert!(!acceptable(&v(f64::NAN), ScoreScale::Unit));
        assert!(!acceptable(&v(1.5), ScoreScale::Unit));
    }
}
