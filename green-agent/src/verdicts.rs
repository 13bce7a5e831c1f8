//! The run's store as the judge's verdict cache ([`rubrics::judge::VerdictCache`]): a run, its
//! `resume` and any re-grade of its trials share the accepted verdicts in `judge_verdicts`, so no
//! judge is asked the same question twice. Failures are never stored (the judge only puts
//! accepted verdicts).

use async_trait::async_trait;
use rubrics::judge::{CacheError, Verdict, VerdictCache};

use crate::store::{Store, StoreError};

/// The accepted verdicts of one run.
#[derive(Debug, Clone)]
pub struct RunVerdicts {
    store: Store,
    run_id: String,
}

impl RunVerdicts {
    pub fn new(store: Store, run_id: &str) -> Self {
        Self {
            store,
            run_id: run_id.to_owned(),
        }
    }
}

fn cache_error(what: &str, e: StoreError) -> CacheError {
    CacheError {
        what: what.to_owned(),
        source: Some(Box::new(e)),
    }
}

#[async_trait]
impl VerdictCache for RunVerdicts {
    async fn get(&self, key: &str) -> Result<Option<Verdict>, CacheError> {
        let Some(json) = self
            .store
            .judge_verdict(&self.run_id, key)
            .await
            .map_err(|e| cache_error("reading a verdict", e))?
        else {
            return Ok(None);
        };
        serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| CacheError {
                what: "a stored verdict is not valid JSON".into(),
                source: Some(Box::new(e)),
            })
    }

    async fn put(&self, key: &str, verdict: &Verdict) -> Result<(), CacheError> {
        let json = serde_json::to_string(verdict).map_err(|e| CacheError {
            what: "encoding a verdict".into(),
            source: Some(Box::new(e)),
        })?;
        self.store
            .put_judge_verdict(&self.run_id, key, &verdict.model, verdict.score, &json)
            .await
            .map_err(|e| cache_error("storing a verdict", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(score: f64) -> Verdict {
        Verdict {
            score,
            justification: "named the integrator".into(),
            attempts: 2,
            prompt_tokens: 40,
            completion_tokens: 8,
            cost_usd: Some(5.6e-5),
            model: "judge-m".into(),
            votes: Vec::new(),
        }
    }

    #[tokio::test]
    async fn verdicts_survive_reopening_the_store_and_stay_per_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("open");
        let cache = RunVerdicts::new(store.clone(), "r1");
        assert_eq!(cache.get("k").await.expect("get"), None);
        cache.put("k", &verdict(1.0)).await.expect("put");
        // The first accepted verdict is kept.
        cache.put("k", &verdict(0.0)).await.expect("put again");
        store.close().await;

        let store = Store::open(dir.path()).await.expect("reopen");
        let cache = RunVerdicts::new(store.clone(), "r1");
        assert_eq!(cache.get("k").await.expect("get"), Some(verdict(1.0)));
        assert_eq!(store.judge_verdict_count("r1").await.expect("count"), 1);
        let other = RunVerdicts::new(store.clone(), "r2");
        assert_eq!(other.get("k").await.expect("get"), None);
    }

    #[tokio::test]
    async fn a_corrupt_row_is_an_error_not_a_verdict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("open");
        store
            .put_judge_verdict("r1", "k", "m", 1.0, "{not json")
            .await
            .expect("put");
        let err = RunVerdicts::new(store, "r1")
            .get("k")
            .await
            .expect_err("corrupt");
        assert!(err.to_string().contains("not valid JSON"), "{err}");
    }
}
