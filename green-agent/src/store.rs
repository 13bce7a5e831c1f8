//! The results store of one run: its rows (runs, trials, events, grades, usage, artifacts) in
//! the run's own SQLite file or in a shared PostgreSQL database ([`crate::database`]), plus
//! content-addressed blobs in the run directory (`<run dir>/blobs/<aa>/<sha256>`). Every write is
//! atomic: rows in transactions, files written to a temp file and renamed into place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sqlx::AnyPool;
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::database::{Backend, DatabaseUrl};

pub use crate::model::{ArtifactRef, Outcome, PlannedTrial, TrialResult, Usage};
pub use attempts::{AgentPlace, AttemptKind, AttemptRow, RegradeStart};

mod attempts;

/// File name of the database inside a run directory.
pub const DB_FILE: &str = "store.sqlite";
/// The lock file beside [`DB_FILE`] that serialises migrations across processes.
const MIGRATION_LOCK: &str = "store.migrate.lock";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("results store {at}: {source}")]
    Db {
        /// The SQLite file, or the PostgreSQL URL without its password.
        at: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("results store migration failed at {at}: {source}")]
    Migrate {
        at: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    #[error("results store file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("run `{0}` not found in the results store (is --results-dir right?)")]
    RunNotFound(String),
    #[error("corrupt JSON in the results store ({what}): {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

/// A trial as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRow {
    pub planned: PlannedTrial,
    pub state: String,
    pub result: Option<TrialResult>,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub id: String,
    pub created_at: String,
    pub finished_at: Option<String>,
    pub plan: serde_json::Value,
    pub status: String,
}

/// One event of a run's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRow {
    pub seq: i64,
    pub trial_id: Option<String>,
    pub at: String,
    pub kind: String,
    pub data: serde_json::Value,
}

/// The store of one run directory.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    dir: PathBuf,
    /// Where the rows are, for errors: the SQLite file or the redacted PostgreSQL URL.
    at: String,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Holds the exclusive lock of `dir`'s migration lock file until dropped (waits for another
/// process holding it; the kernel releases it if that process dies).
async fn lock_migrations(dir: &Path) -> Result<std::fs::File, StoreError> {
    let path = dir.join(MIGRATION_LOCK);
    let io = |source| StoreError::Io {
        path: path.clone(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    tokio::task::spawn_blocking(move || file.lock().map(|()| file))
        .await
        .map_err(|join| io(std::io::Error::other(join)))?
        .map_err(io)
}

impl Store {
    /// Opens (creating if needed) the store in `dir`, its rows in `dir`'s own SQLite file, and
    /// applies migrations.
    pub async fn open(dir: &Path) -> Result<Self, StoreError> {
        Self::open_with(dir, None).await
    }

    /// Opens (creating if needed) the store of the run directory `dir`: its rows in the shared
    /// PostgreSQL database of `database` when given (the database is created when missing),
    /// else in `dir`'s own SQLite file; applies migrations.
    pub async fn open_with(dir: &Path, database: Option<&DatabaseUrl>) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir.join("blobs")).map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        // Temporary files of a writer killed mid-write (reports, records) go now.
        sweep_temp_files(dir);
        let (at, backend) = match database {
            Some(url) => (url.to_string(), Backend::Postgres),
            None => (dir.join(DB_FILE).display().to_string(), Backend::Sqlite),
        };
        let db = |source| StoreError::Db {
            at: at.clone(),
            source,
        };
        // Two processes opening a new SQLite store at once (a run creating it, a `report` or a
        // viewer polling it) would both run the migrations: the loser fails on `CREATE TABLE`.
        // PostgreSQL serialises migrations itself; SQLite's are serialised by a file lock.
        let migrating = match database {
            Some(_) => None,
            None => Some(lock_migrations(dir).await?),
        };
        let pool = match database {
            Some(url) => crate::database::connect_postgres(url, 4, true).await,
            None => crate::database::connect_sqlite(&dir.join(DB_FILE), false, 4).await,
        }
        .map_err(db)?;
        crate::database::migrate(&pool, backend)
            .await
            .map_err(|source| StoreError::Migrate {
                at: at.clone(),
                source,
            })?;
        drop(migrating);
        Ok(Self {
            pool,
            dir: dir.to_path_buf(),
            at,
        })
    }

    /// Opens an existing store read-write; fails clearly when there is none.
    pub async fn open_existing(dir: &Path, run_id: &str) -> Result<Self, StoreError> {
        Self::open_existing_with(dir, run_id, None).await
    }

    /// [`Self::open_with`] for a run that must exist already (in `database` when given, else in
    /// `dir`'s SQLite file); fails clearly when it does not.
    pub async fn open_existing_with(
        dir: &Path,
        run_id: &str,
        database: Option<&DatabaseUrl>,
    ) -> Result<Self, StoreError> {
        if database.is_none() && !dir.join(DB_FILE).is_file() {
            return Err(StoreError::RunNotFound(run_id.to_owned()));
        }
        let store = Self::open_with(dir, database).await?;
        if database.is_some() {
            // fails with RunNotFound when the shared database has no such run
            if let Err(e) = store.run(run_id).await {
                store.close().await;
                return Err(e);
            }
        }
        Ok(store)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn db(&self, source: sqlx::Error) -> StoreError {
        StoreError::Db {
            at: self.at.clone(),
            source,
        }
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Records a new run and its planned trials (existing trials are kept untouched).
    pub async fn create_run(
        &self,
        run_id: &str,
        plan: &serde_json::Value,
        trials: &[PlannedTrial],
    ) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.db(e))?;
        sqlx::query(
            "INSERT INTO runs (id, created_at, plan) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(run_id)
        .bind(now())
        .bind(plan.to_string())
        .execute(&mut *tx)
        .await
        .map_err(|e| self.db(e))?;
        for t in trials {
            sqlx::query(
                "INSERT INTO trials (run_id, id, task_id, task_kind, task_hash, agent, repeat_index) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
            )
            .bind(run_id)
            .bind(&t.id)
            .bind(&t.task_id)
            .bind(&t.task_kind)
            .bind(&t.task_hash)
            .bind(&t.agent)
            .bind(i64::from(t.repeat_index))
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        }
        sqlx::query("INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, NULL, $2, 'run_planned', $3)")
            .bind(run_id)
            .bind(now())
            .bind(serde_json::json!({ "trials": trials.len() }).to_string())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        tx.commit().await.map_err(|e| self.db(e))
    }

    pub async fn run(&self, run_id: &str) -> Result<RunRow, StoreError> {
        let row =
            sqlx::query("SELECT id, created_at, finished_at, plan, status FROM runs WHERE id = $1")
                .bind(run_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(|e| self.db(e))?
                .ok_or_else(|| StoreError::RunNotFound(run_id.to_owned()))?;
        let plan: String = row.get("plan");
        Ok(RunRow {
            id: row.get("id"),
            created_at: row.get("created_at"),
            finished_at: row.get("finished_at"),
            plan: serde_json::from_str(&plan).map_err(|source| StoreError::Json {
                what: "runs.plan".into(),
                source,
            })?,
            status: row.get("status"),
        })
    }

    /// Marks trials left `running` by a dead process as `pending` again (a trial only counts
    /// once it is `done`; what its open attempt left is taken over through `attempts`).
    pub async fn requeue_interrupted(&self, run_id: &str) -> Result<u64, StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.db(e))?;
        let n = sqlx::query(
            "UPDATE trials SET state = 'pending' WHERE run_id = $1 AND state = 'running'",
        )
        .bind(run_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.db(e))?
        .rows_affected();
        sqlx::query("UPDATE runs SET status = 'running', finished_at = NULL WHERE id = $1")
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        sqlx::query("INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, NULL, $2, 'run_resumed', $3)")
            .bind(run_id)
            .bind(now())
            .bind(serde_json::json!({ "requeued": n }).to_string())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        tx.commit().await.map_err(|e| self.db(e))?;
        Ok(n)
    }

    pub async fn mark_running(&self, run_id: &str, trial_id: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.db(e))?;
        sqlx::query("UPDATE trials SET state = 'running', started_at = $1 WHERE run_id = $2 AND id = $3 AND state != 'done'")
            .bind(now())
            .bind(run_id)
            .bind(trial_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        sqlx::query("INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, $2, $3, 'trial_started', '{}')")
            .bind(run_id)
            .bind(trial_id)
            .bind(now())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        tx.commit().await.map_err(|e| self.db(e))
    }

    /// Appends an event to the run's log.
    pub async fn event(
        &self,
        run_id: &str,
        trial_id: Option<&str>,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(run_id)
        .bind(trial_id)
        .bind(now())
        .bind(kind)
        .bind(data.to_string())
        .execute(&self.pool)
        .await
        .map_err(|e| self.db(e))?;
        Ok(())
    }

    /// Records a finished trial: its row, grade, usage, artifacts and an event, in one transaction.
    pub async fn finish_trial(
        &self,
        run_id: &str,
        trial_id: &str,
        result: &TrialResult,
    ) -> Result<(), StoreError> {
        let json = |v: &dyn erased::ToJson| v.to_json();
        let mut tx = self.pool.begin().await.map_err(|e| self.db(e))?;
        sqlx::query(
            "UPDATE trials SET state = 'done', outcome = $1, exit_code = $2, score = $3, passed = $4, \
             grade_status = $5, dimensions = $6, flags = $7, phases = $8, attempts = $9, error = $10, \
             isolated = $11, finished_at = $12 WHERE run_id = $13 AND id = $14",
        )
        .bind(result.outcome.as_str())
        .bind(result.exit_code)
        .bind(result.score)
        .bind(i64::from(result.passed))
        .bind(result.grade_status.as_deref())
        .bind(json(&result.dimensions))
        .bind(json(&result.flags))
        .bind(json(&result.phases))
        .bind(i64::from(result.attempts))
        .bind(result.error.as_deref())
        .bind(i64::from(result.isolated))
        .bind(now())
        .bind(run_id)
        .bind(trial_id)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.db(e))?;
        if let Some(report) = &result.grade_report {
            sqlx::query("INSERT INTO grades (run_id, trial_id, score, status, report) VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (run_id, trial_id) DO UPDATE SET score = excluded.score, \
                 status = excluded.status, report = excluded.report")
                .bind(run_id)
                .bind(trial_id)
                .bind(result.score)
                .bind(result.grade_status.as_deref().unwrap_or("unknown"))
                .bind(report.to_string())
                .execute(&mut *tx)
                .await
                .map_err(|e| self.db(e))?;
        }
        let u = &result.usage;
        sqlx::query(
            "INSERT INTO usage (run_id, trial_id, input_tokens, output_tokens, \
             cache_read_tokens, cache_write_tokens, requests, cost_usd) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (run_id, trial_id) DO UPDATE SET input_tokens = excluded.input_tokens, \
             output_tokens = excluded.output_tokens, cache_read_tokens = excluded.cache_read_tokens, \
             cache_write_tokens = excluded.cache_write_tokens, requests = excluded.requests, \
             cost_usd = excluded.cost_usd",
        )
        .bind(run_id)
        .bind(trial_id)
        .bind(i64::try_from(u.input_tokens).unwrap_or(i64::MAX))
        .bind(i64::try_from(u.output_tokens).unwrap_or(i64::MAX))
        .bind(i64::try_from(u.cache_read_tokens).unwrap_or(i64::MAX))
        .bind(i64::try_from(u.cache_write_tokens).unwrap_or(i64::MAX))
        .bind(i64::try_from(u.requests).unwrap_or(i64::MAX))
        .bind(u.cost_usd)
        .execute(&mut *tx)
        .await
        .map_err(|e| self.db(e))?;
        sqlx::query("DELETE FROM artifacts WHERE run_id = $1 AND trial_id = $2")
            .bind(run_id)
            .bind(trial_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        for a in &result.artifacts {
            sqlx::query(
                "INSERT INTO artifacts (run_id, trial_id, name, sha256, size, media_type) VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (run_id, trial_id, name) DO UPDATE SET sha256 = excluded.sha256, \
                 size = excluded.size, media_type = excluded.media_type",
            )
            .bind(run_id)
            .bind(trial_id)
            .bind(&a.name)
            .bind(&a.sha256)
            .bind(i64::try_from(a.size).unwrap_or(i64::MAX))
            .bind(a.media_type.as_deref())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        }
        sqlx::query("INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, $2, $3, 'trial_finished', $4)")
            .bind(run_id)
            .bind(trial_id)
            .bind(now())
            .bind(
                serde_json::json!({
                    "outcome": result.outcome.as_str(),
                    "score": result.score,
                    "exit_code": result.exit_code,
                    "flags": result.flags,
                })
                .to_string(),
            )
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        tx.commit().await.map_err(|e| self.db(e))
    }

    pub async fn finish_run(&self, run_id: &str, status: &str) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.db(e))?;
        sqlx::query("UPDATE runs SET status = $1, finished_at = $2 WHERE id = $3")
            .bind(status)
            .bind(now())
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
        let data = serde_json::json!({ "status": status }).to_string();
        // A run that ends again as it ended before, no trial finished since (a resume of a
        // finished run, one killed while writing its reports): one `run_finished`, not two.
        let repeated: i64 = sqlx::query(
            "SELECT CAST(COUNT(*) AS BIGINT) AS n FROM events WHERE run_id = $1 AND kind = 'run_finished' AND data = $2 \
             AND seq > (SELECT CAST(COALESCE(MAX(seq), 0) AS BIGINT) FROM events WHERE run_id = $1 AND kind = 'trial_finished')",
        )
        .bind(run_id)
        .bind(&data)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| self.db(e))?
        .get("n");
        if repeated == 0 {
            sqlx::query("INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, NULL, $2, 'run_finished', $3)")
                .bind(run_id)
                .bind(now())
                .bind(&data)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.db(e))?;
        }
        tx.commit().await.map_err(|e| self.db(e))
    }

    /// Every trial of the run, ordered by task, agent and repeat (with grade reports and
    /// artifacts).
    pub async fn trials(&self, run_id: &str) -> Result<Vec<TrialRow>, StoreError> {
        let mut out = Vec::new();
        self.for_each_trial(run_id, true, |t| {
            out.push(t);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Every trial of the run in [`Store::trials`]' order, handed to `each` one at a time
    /// (memory stays bounded whatever the run's size). Without `details` a finished trial
    /// carries neither its grade report nor its artifacts (what summaries, Markdown and CSV
    /// need): one query. With `details` it carries both: the ordered ids first, then per page
    /// of ids one joined query (grade reports) and one artifacts query, so the big columns are
    /// never sorted or held for the whole run. Portable SQL (SQLite and PostgreSQL).
    pub async fn for_each_trial<F>(
        &self,
        run_id: &str,
        details: bool,
        mut each: F,
    ) -> Result<(), StoreError>
    where
        F: FnMut(TrialRow) -> Result<(), StoreError>,
    {
        use futures::TryStreamExt;
        const ORDER: &str = "ORDER BY t.task_id, t.agent, t.repeat_index, t.id";
        if !details {
            let sql = format!("{TRIAL_SELECT} {TRIAL_FROM} WHERE t.run_id = $1 {ORDER}");
            let mut rows = sqlx::query(&sql).bind(run_id).fetch(&self.pool);
            while let Some(row) = rows.try_next().await.map_err(|e| self.db(e))? {
                each(trial_row(&row, false)?)?;
            }
            return Ok(());
        }
        let ids: Vec<String> = sqlx::query(&format!(
            "SELECT t.id FROM trials t WHERE t.run_id = $1 {ORDER}"
        ))
        .bind(run_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.db(e))?
        .iter()
        .map(|r| r.get::<String, _>("id"))
        .collect();
        self.for_each_trial_of(run_id, &ids, each).await
    }

    /// The trials `ids` of the run in that order, each with its grade report and artifacts,
    /// handed to `each` one at a time: per page of ids one joined query (grade reports) and
    /// one artifacts query, so memory holds one page, never the run. An id the run does not
    /// have is skipped.
    pub async fn for_each_trial_of<F>(
        &self,
        run_id: &str,
        ids: &[String],
        mut each: F,
    ) -> Result<(), StoreError>
    where
        F: FnMut(TrialRow) -> Result<(), StoreError>,
    {
        const PAGE: usize = 200;
        for page in ids.chunks(PAGE) {
            let marks = (0..page.len())
                .map(|i| format!("${}", i + 2))
                .collect::<Vec<_>>()
                .join(",");
            let sql = format!(
                "{TRIAL_SELECT}, g.report {TRIAL_FROM} LEFT JOIN grades g ON g.run_id = t.run_id AND g.trial_id = t.id \
                 WHERE t.run_id = $1 AND t.id IN ({marks})"
            );
            let mut q = sqlx::query(&sql).bind(run_id);
            for id in page {
                q = q.bind(id);
            }
            let rows = q.fetch_all(&self.pool).await.map_err(|e| self.db(e))?;
            let sql = format!(
                "SELECT trial_id, name, sha256, size, media_type FROM artifacts \
                 WHERE run_id = $1 AND trial_id IN ({marks}) ORDER BY trial_id, name"
            );
            let mut q = sqlx::query(&sql).bind(run_id);
            for id in page {
                q = q.bind(id);
            }
            let mut artifacts: std::collections::HashMap<String, Vec<ArtifactRef>> =
                std::collections::HashMap::new();
            for r in q.fetch_all(&self.pool).await.map_err(|e| self.db(e))? {
                artifacts
                    .entry(r.get("trial_id"))
                    .or_default()
                    .push(artifact_of(&r));
            }
            let mut by_id: std::collections::HashMap<String, TrialRow> = rows
                .iter()
                .map(|r| trial_row(r, true).map(|t| (t.planned.id.clone(), t)))
                .collect::<Result<_, _>>()?;
            for id in page {
                if let Some(mut t) = by_id.remove(id) {
                    if let Some(result) = t.result.as_mut() {
                        result.artifacts = artifacts.remove(id).unwrap_or_default();
                    }
                    each(t)?;
                }
            }
        }
        Ok(())
    }

    pub async fn artifacts(
        &self,
        run_id: &str,
        trial_id: &str,
    ) -> Result<Vec<ArtifactRef>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, sha256, size, media_type FROM artifacts WHERE run_id = $1 AND trial_id = $2 ORDER BY name",
        )
        .bind(run_id)
        .bind(trial_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.db(e))?;
        Ok(rows.iter().map(artifact_of).collect())
    }

    pub async fn events(
        &self,
        run_id: &str,
        trial_id: Option<&str>,
    ) -> Result<Vec<EventRow>, StoreError> {
        let rows = match trial_id {
            Some(t) => sqlx::query("SELECT seq, trial_id, at, kind, data FROM events WHERE run_id = $1 AND trial_id = $2 ORDER BY seq")
                .bind(run_id)
                .bind(t)
                .fetch_all(&self.pool)
                .await,
            None => sqlx::query("SELECT seq, trial_id, at, kind, data FROM events WHERE run_id = $1 ORDER BY seq")
                .bind(run_id)
                .fetch_all(&self.pool)
                .await,
        }
        .map_err(|e| self.db(e))?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let data: String = r.get("data");
                EventRow {
                    seq: r.get("seq"),
                    trial_id: r.get("trial_id"),
                    at: r.get("at"),
                    kind: r.get("kind"),
                    data: serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data)),
                }
            })
            .collect())
    }

    /// The judge verdict stored under `key` for this run (JSON), if any.
    pub async fn judge_verdict(
        &self,
        run_id: &str,
        key: &str,
    ) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar(
            "SELECT verdict FROM judge_verdicts WHERE run_id = $1 AND cache_key = $2",
        )
        .bind(run_id)
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| self.db(e))
    }

    /// Stores an accepted judge verdict (JSON) under `key`; the first one stored is kept.
    pub async fn put_judge_verdict(
        &self,
        run_id: &str,
        key: &str,
        model: &str,
        score: f64,
        verdict: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO judge_verdicts (run_id, cache_key, model, score, verdict, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, cache_key) DO NOTHING",
        )
        .bind(run_id)
        .bind(key)
        .bind(model)
        .bind(score)
        .bind(verdict)
        .bind(now())
        .execute(&self.pool)
        .await
        .map_err(|e| self.db(e))?;
        Ok(())
    }

    /// How many judge verdicts the run has stored.
    pub async fn judge_verdict_count(&self, run_id: &str) -> Result<u64, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM judge_verdicts WHERE run_id = $1",
        )
        .bind(run_id)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.db(e))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Path of the blob with this digest.
    pub fn blob_path(&self, sha256: &str) -> PathBuf {
        let prefix = sha256.get(..2).unwrap_or("00");
        self.dir.join("blobs").join(prefix).join(sha256)
    }

    /// Stores bytes content-addressed (temp file + rename; a no-op when already present).
    pub fn put_blob(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let sha = hex::encode(Sha256::digest(bytes));
        let path = self.blob_path(&sha);
        if path.is_file() {
            return Ok(sha);
        }
        let io = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let parent = path.parent().unwrap_or(&self.dir);
        std::fs::create_dir_all(parent).map_err(io)?;
        write_atomic(&path, bytes).map_err(io)?;
        Ok(sha)
    }

    pub fn get_blob(&self, sha256: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.blob_path(sha256);
        std::fs::read(&path).map_err(|source| StoreError::Io { path, source })
    }
}

/// The columns of a trial row joined with its usage.
const TRIAL_SELECT: &str = "SELECT t.*, u.input_tokens, u.output_tokens, u.cache_read_tokens, \
     u.cache_write_tokens, u.requests, u.cost_usd";
const TRIAL_FROM: &str =
    "FROM trials t LEFT JOIN usage u ON u.run_id = t.run_id AND u.trial_id = t.id";

/// A `trials` row joined with its usage (and, with `details`, its `report` column; the
/// artifacts are added by the caller).
fn trial_row(row: &AnyRow, details: bool) -> Result<TrialRow, StoreError> {
    let planned = planned_of(row);
    let state: String = row.get("state");
    let result = if state == "done" {
        let dimensions = parse_col(row, "dimensions")?;
        let flags = parse_col(row, "flags")?;
        let phases = parse_col(row, "phases")?;
        let mut result = result_of(row, dimensions, flags, phases);
        if details {
            let report: Option<String> = row.get("report");
            result.grade_report = report.and_then(|r| serde_json::from_str(&r).ok());
        }
        Some(result)
    } else {
        None
    };
    Ok(TrialRow {
        planned,
        state,
        result,
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
    })
}

/// A non-negative count column (0 when NULL).
/// The planned trial of a `trials` row.
pub(crate) fn planned_of(row: &AnyRow) -> PlannedTrial {
    PlannedTrial {
        id: row.get("id"),
        task_id: row.get("task_id"),
        task_kind: row.get("task_kind"),
        task_hash: row.get("task_hash"),
        agent: row.get("agent"),
        repeat_index: u32::try_from(row.get::<i64, _>("repeat_index")).unwrap_or(0),
    }
}

/// The result of a finished `trials` row joined with its `usage` row (the JSON columns are
/// parsed by the caller, strictly or leniently; no grade report, no artifacts).
pub(crate) fn result_of(
    row: &AnyRow,
    dimensions: BTreeMap<String, f64>,
    flags: Vec<String>,
    phases: BTreeMap<String, u64>,
) -> TrialResult {
    TrialResult {
        outcome: row
            .get::<Option<String>, _>("outcome")
            .and_then(|o| Outcome::parse(&o))
            .unwrap_or(Outcome::InfraError),
        exit_code: row.get("exit_code"),
        score: row.get("score"),
        passed: flag(row, "passed"),
        grade_status: row.get("grade_status"),
        dimensions,
        flags,
        phases,
        attempts: u32::try_from(row.get::<i64, _>("attempts")).unwrap_or(0),
        error: row.get("error"),
        isolated: flag(row, "isolated"),
        grade_report: None,
        usage: Usage {
            input_tokens: count(row, "input_tokens"),
            output_tokens: count(row, "output_tokens"),
            cache_read_tokens: count(row, "cache_read_tokens"),
            cache_write_tokens: count(row, "cache_write_tokens"),
            requests: count(row, "requests"),
            cost_usd: row.get::<Option<f64>, _>("cost_usd").unwrap_or(0.0),
        },
        artifacts: Vec::new(),
    }
}

fn artifact_of(r: &AnyRow) -> ArtifactRef {
    ArtifactRef {
        name: r.get("name"),
        sha256: r.get("sha256"),
        size: u64::try_from(r.get::<i64, _>("size")).unwrap_or(0),
        media_type: r.get("media_type"),
    }
}

/// An integer boolean column (NULL is false).
pub(crate) fn flag(row: &AnyRow, col: &str) -> bool {
    row.get::<Option<i64>, _>(col).is_some_and(|v| v != 0)
}

fn count(row: &AnyRow, col: &str) -> u64 {
    u64::try_from(row.get::<Option<i64>, _>(col).unwrap_or(0)).unwrap_or(0)
}

fn parse_col<T: serde::de::DeserializeOwned>(row: &AnyRow, col: &str) -> Result<T, StoreError> {
    let s: String = row.get(col);
    serde_json::from_str(&s).map_err(|source| StoreError::Json {
        what: format!("trials.{col}"),
        source,
    })
}

/// What [`write_atomic`]'s temporary files are called until renamed.
pub const TEMP_PREFIX: &str = ".rb-tmp-";

/// How old a temporary file must be to be swept (younger ones may be another writer's).
const TEMP_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// Removes what [`write_atomic`] left in `dir` when its process was killed mid-write (and the
/// `.tmpXXXXXX` files of versions before [`TEMP_PREFIX`]): files of that name older than a
/// minute. Returns how many were removed.
pub fn sweep_temp_files(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let legacy = name.len() == 10 && name.starts_with(".tmp");
        if !(name.starts_with(TEMP_PREFIX) || legacy) {
            continue;
        }
        let old = e
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| m.modified().ok())
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= TEMP_AGE);
        if old && std::fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Writes a file atomically: a temp file in the same directory, fsynced, then renamed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let parent = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(parent)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

mod erased {
    pub trait ToJson {
        fn to_json(&self) -> String;
    }
    impl<T: serde::Serialize> ToJson for T {
        fn to_json(&self) -> String {
            serde_json::to_string(self).unwrap_or_else(|_| "null".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(id: &str) -> PlannedTrial {
        PlannedTrial {
            id: id.into(),
            task_id: "t1".into(),
            task_kind: "python".into(),
            task_hash: "h".into(),
            agent: "oracle".into(),
            repeat_index: 0,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn stores_opened_at_once_on_a_new_directory_all_migrate_cleanly() {
        // What a run creating its store and a `report`/viewer polling it do at the same moment
        // (each its own pool, as in separate processes).
        for round in 0..5 {
            let dir = tempfile::tempdir().expect("tempdir");
            let opens = (0..6).map(|_| {
                let dir = dir.path().to_path_buf();
                tokio::spawn(async move { Store::open(&dir).await })
            });
            for (i, open) in futures::future::join_all(opens)
                .await
                .into_iter()
                .enumerate()
            {
                let store = open
                    .expect("join")
                    .unwrap_or_else(|e| panic!("round {round}, open {i}: {e:#?}"));
                store.close().await;
            }
            let store = Store::open(dir.path()).await.expect("reopen");
            store
                .create_run("r", &serde_json::json!({}), &[planned("a")])
                .await
                .expect("usable");
        }
    }

    #[tokio::test]
    async fn a_finished_trial_round_trips_and_survives_reopen() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("open");
        store
            .create_run(
                "r1",
                &serde_json::json!({"agents": ["oracle"]}),
                &[planned("a"), planned("b")],
            )
            .await
            .expect("create");
        store.mark_running("r1", "a").await.expect("running");
        store.mark_running("r1", "b").await.expect("running");
        let sha = store.put_blob(b"hello").expect("blob");
        assert_eq!(store.get_blob(&sha).expect("get"), b"hello");
        let result = TrialResult {
            outcome: Outcome::Completed,
            exit_code: Some(0),
            score: Some(1.0),
            passed: true,
            grade_status: Some("ok".into()),
            dimensions: [("code_correctness".to_string(), 1.0)].into(),
            flags: vec![],
            phases: [("agent".to_string(), 12)].into(),
            attempts: 1,
            error: None,
            isolated: true,
            grade_report: Some(serde_json::json!({"score": 1.0})),
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
                cache_read_tokens: 5,
                cache_write_tokens: 6,
                requests: 1,
                cost_usd: 0.5,
            },
            artifacts: vec![ArtifactRef {
                name: "file:x.py".into(),
                sha256: sha,
                size: 5,
                media_type: None,
            }],
        };
        store
            .finish_trial("r1", "a", &result)
            .await
            .expect("finish");
        store.close().await;

        let store = Store::open_existing(dir.path(), "r1")
            .await
            .expect("reopen");
        assert_eq!(store.requeue_interrupted("r1").await.expect("requeue"), 1);
        let trials = store.trials("r1").await.expect("trials");
        assert_eq!(trials.len(), 2);
        assert_eq!(trials[0].state, "done");
        assert_eq!(trials[0].result.as_ref(), Some(&result));
        assert_eq!(trials[1].state, "pending");
        let kinds: Vec<String> = store
            .events("r1", None)
            .await
            .expect("events")
            .into_iter()
            .map(|e| e.kind)
            .collect();
        assert_eq!(
            kinds,
            [
                "run_planned",
                "trial_started",
                "trial_started",
                "trial_finished",
                "run_resumed"
            ]
        );
    }

    #[tokio::test]
    async fn a_missing_run_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Store::open_existing(&dir.path().join("nope"), "nope")
            .await
            .expect_err("missing");
        assert!(err.to_string().contains("run `nope` not found"), "{err}");
    }

    #[tokio::test]
    async fn a_run_ending_again_unchanged_records_one_run_finished() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("open");
        store
            .create_run("r1", &serde_json::json!({}), &[planned("a")])
            .await
            .expect("create");
        store.finish_run("r1", "interrupted").await.expect("end");
        store.finish_run("r1", "finished").await.expect("end");
        // Killed while writing its reports, then resumed: it ends the same way again.
        store.finish_run("r1", "finished").await.expect("end again");
        let ends: Vec<String> = store
            .events("r1", None)
            .await
            .expect("events")
            .into_iter()
            .filter(|e| e.kind == "run_finished")
            .map(|e| e.data["status"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(ends, ["interrupted", "finished"]);
        assert_eq!(store.run("r1").await.expect("run").status, "finished");
    }

    #[test]
    fn temporary_files_of_a_killed_writer_are_swept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = dir.path().join(format!("{TEMP_PREFIX}abc123"));
        let legacy = dir.path().join(".tmpA1b2C3");
        let young = dir.path().join(format!("{TEMP_PREFIX}young1"));
        let report = dir.path().join("report.json");
        for p in [&old, &legacy, &young, &report] {
            std::fs::write(p, "x").expect("write");
        }
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for p in [&old, &legacy, &report] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .and_then(|f| f.set_modified(long_ago))
                .expect("age");
        }
        assert_eq!(sweep_temp_files(dir.path()), 2);
        assert!(!old.exists() && !legacy.exists());
        assert!(young.exists(), "a live writer's file is kept");
        assert!(report.exists());
        write_atomic(&report, b"y").expect("write");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }
}
