//! The viewer's read-only data layer: every run folder under a results directory, read in place
//! (each run's `store.sqlite` opened read-only, its content-addressed blobs beside it), and, given
//! a database URL, every run of that shared PostgreSQL database (blobs still in the run folders).
//! Nothing here writes; every query is bounded (pages, event batches, a cap on trials per
//! leaderboard).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use sqlx::AnyPool;
use sqlx::Row;
use sqlx::any::AnyRow;
use utoipa::{IntoParams, ToSchema};

use crate::database::DatabaseUrl;
use crate::model::Outcome;
use crate::store::{DB_FILE, TrialRow};

pub use crate::presentation::totals::RunInfo;
pub use crate::presentation::trials::{
    Artifact, TrialDetail, TrialSummary, detail_of_row, summary_of_ref,
};

/// Most trials one page lists.
pub const MAX_PAGE: u32 = 500;
/// Most events one request returns.
pub const MAX_EVENTS: u32 = 1000;
/// Most trials a leaderboard reads (a bigger run is summarised over its first this many).
pub const MAX_LEADERBOARD_TRIALS: i64 = 200_000;
/// Most bytes of an artifact shown inline in a page (the whole file stays downloadable).
pub const MAX_INLINE_BYTES: u64 = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("run `{0}` not found under the results directory (is --results-dir right?)")]
    RunNotFound(String),
    #[error("trial `{trial}` not found in run `{run}`")]
    TrialNotFound { run: String, trial: String },
    #[error("artifact `{name}` not found for trial `{trial}`")]
    ArtifactNotFound { trial: String, name: String },
    #[error("bad request: {0}")]
    BadRequest(String),
    #[error("results store {at}: {source}")]
    Db {
        /// The SQLite file, or the database URL without its password.
        at: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One page of a run's trials.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TrialPage {
    /// Trials matching the filters (all pages).
    pub total: i64,
    pub page: u32,
    pub per_page: u32,
    pub trials: Vec<TrialSummary>,
}

/// One event of a run's log.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Event {
    pub seq: i64,
    pub trial_id: Option<String>,
    pub at: String,
    pub kind: String,
    #[schema(value_type = Object)]
    pub data: serde_json::Value,
}

/// Filters, order and page of a trial listing.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TrialQuery {
    /// Exact task id.
    pub task: Option<String>,
    /// Exact task kind.
    pub kind: Option<String>,
    /// Exact agent spec.
    pub agent: Option<String>,
    /// Outcome (`completed`, `failed`, `crashed`, `timeout`, `inactive`, `infra_error`), or
    /// `passed` / `not_passed`.
    pub outcome: Option<String>,
    /// Trial state: `pending`, `running`, `done`.
    pub status: Option<String>,
    /// `task` (default), `agent`, `kind`, `score`, `cost`, `started`, `finished`.
    pub sort: Option<String>,
    /// `asc` (default) or `desc`.
    pub order: Option<String>,
    /// 1-based page (default 1).
    pub page: Option<u32>,
    /// Trials per page (default 100, at most 500).
    pub per_page: Option<u32>,
}

/// Events after a sequence number.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventQuery {
    /// Only events with a greater sequence number (default 0).
    pub after: Option<i64>,
    /// Only this trial's events.
    pub trial: Option<String>,
    /// At most this many (default and maximum 1000).
    pub limit: Option<u32>,
}

/// A run's trials as read when its last event had this sequence number.
type Versioned = (i64, Arc<Vec<TrialRow>>);

/// (run id, view key) → (the run's last event, what the view computed from its trials then).
type Derived = BTreeMap<(String, String), (i64, Arc<dyn std::any::Any + Send + Sync>)>;

/// Most views' results kept (keys come from query strings: the cache is bounded).
const MAX_DERIVED: usize = 256;

/// Where a visible run's rows are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// Its own SQLite file in this run folder.
    Folder(PathBuf),
    /// The shared PostgreSQL database (its blobs under `<results dir>/<run id>/`).
    Shared,
}

/// An opened run: the pool its rows are read from and what its queries need.
#[derive(Debug, Clone)]
struct Source {
    pool: AnyPool,
    /// The run id as stored (a folder's name may differ from the id inside its store).
    id: String,
    /// The run directory (its blobs).
    dir: PathBuf,
    /// The SQLite file or the redacted database URL, for errors.
    at: String,
    /// The usage columns to select (stores written before the cache-token migration lack
    /// those columns; they read as 0).
    ucols: &'static str,
}

impl Source {
    fn db(&self) -> impl Fn(sqlx::Error) -> ViewError + '_ {
        |source| ViewError::Db {
            at: self.at.clone(),
            source,
        }
    }
}

const USAGE_COLS: &str = "u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.requests, u.cost_usd";
const USAGE_COLS_V1: &str = "u.input_tokens, u.output_tokens, 0 AS cache_read_tokens, 0 AS cache_write_tokens, u.requests, u.cost_usd";

/// Every run under a results directory (or the runs named), read in place, and, given a
/// database URL, every run of that shared PostgreSQL database.
#[derive(Debug)]
pub struct Results {
    dir: PathBuf,
    /// Run id → its folder, when the viewer was started on named runs.
    named: Option<BTreeMap<String, PathBuf>>,
    /// Named runs not found as folders, looked up in the shared database.
    named_shared: Vec<String>,
    /// The shared database, when given, and its pool once opened.
    database: Option<DatabaseUrl>,
    shared: tokio::sync::OnceCell<AnyPool>,
    /// Run id → its opened source.
    sources: Mutex<BTreeMap<String, Source>>,
    /// Run id → (its last event's sequence number, its trials then). The store writes every
    /// change of a trial in one transaction with an event, so a new last event is exactly when
    /// the cached rows may be stale.
    rows: Mutex<BTreeMap<String, Versioned>>,
    /// What trial-wide views (leaderboard, comparison) computed from those rows, under the
    /// same rule.
    derived: Mutex<Derived>,
    /// Run id → the lock a read of its trials holds: requests arriving together (a dashboard
    /// opening its views, the startup warm-up) wait for one read instead of each reading.
    reading: Mutex<BTreeMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Results {
    /// `runs` are run ids under `dir` or paths of run folders; empty means every run in `dir`.
    pub fn new(dir: &Path, runs: &[String]) -> Result<Self, ViewError> {
        Self::with_database(dir, runs, None)
    }

    /// [`Self::new`] plus every run of the shared PostgreSQL database `database` (a named run
    /// not found as a folder is looked up there; the database wins when both have an id).
    pub fn with_database(
        dir: &Path,
        runs: &[String],
        database: Option<DatabaseUrl>,
    ) -> Result<Self, ViewError> {
        let mut named_shared = Vec::new();
        let named = if runs.is_empty() {
            None
        } else {
            let mut m = BTreeMap::new();
            for r in runs {
                let as_path = PathBuf::from(r);
                let folder = if as_path.join(DB_FILE).is_file() {
                    as_path
                } else if dir.join(r).join(DB_FILE).is_file() {
                    dir.join(r)
                } else if database.is_some() {
                    named_shared.push(r.clone());
                    continue;
                } else {
                    return Err(ViewError::RunNotFound(r.clone()));
                };
                let id = folder
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| r.clone());
                m.insert(id, folder);
            }
            Some(m)
        };
        Ok(Self {
            dir: dir.to_path_buf(),
            named,
            named_shared,
            database,
            shared: tokio::sync::OnceCell::new(),
            sources: Mutex::new(BTreeMap::new()),
            rows: Mutex::new(BTreeMap::new()),
            derived: Mutex::new(BTreeMap::new()),
            reading: Mutex::new(BTreeMap::new()),
        })
    }

    /// The results directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The shared database's pool (opened on first use; never created or migrated here).
    async fn shared_pool(&self) -> Result<Option<&AnyPool>, ViewError> {
        let Some(url) = &self.database else {
            return Ok(None);
        };
        self.shared
            .get_or_try_init(|| crate::database::connect_postgres(url, 4, false))
            .await
            .map(Some)
            .map_err(|source| ViewError::Db {
                at: url.to_string(),
                source,
            })
    }

    /// Run id → where it is, for every run visible now (new runs appear without a restart).
    pub async fn run_ids(&self) -> Result<BTreeMap<String, Location>, ViewError> {
        let mut out: BTreeMap<String, Location> = BTreeMap::new();
        match &self.named {
            Some(named) => {
                out.extend(
                    named
                        .iter()
                        .map(|(id, dir)| (id.clone(), Location::Folder(dir.clone()))),
                );
            }
            None => {
                let entries = match std::fs::read_dir(&self.dir) {
                    Ok(e) => Some(e),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(source) => {
                        return Err(ViewError::Io {
                            path: self.dir.clone(),
                            source,
                        });
                    }
                };
                for entry in entries.into_iter().flatten().flatten() {
                    let path = entry.path();
                    if path.join(DB_FILE).is_file() {
                        out.insert(
                            entry.file_name().to_string_lossy().into_owned(),
                            Location::Folder(path),
                        );
                    }
                }
            }
        }
        if let Some(pool) = self.shared_pool().await? {
            let at = self.database.as_ref().map(ToString::to_string);
            let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM runs ORDER BY id")
                .fetch_all(pool)
                .await
                .map_err(|source| ViewError::Db {
                    at: at.unwrap_or_default(),
                    source,
                })?;
            for id in ids {
                if self.named.is_none() || self.named_shared.contains(&id) {
                    out.insert(id, Location::Shared);
                }
            }
            if let Some(missing) = self.named_shared.iter().find(|r| !out.contains_key(*r)) {
                return Err(ViewError::RunNotFound(missing.clone()));
            }
        }
        Ok(out)
    }

    /// The run's source (opened once: a SQLite file read-only, or the shared pool).
    async fn source(&self, run: &str) -> Result<Source, ViewError> {
        if let Some(s) = self.sources.lock().ok().and_then(|m| m.get(run).cloned()) {
            return Ok(s);
        }
        let location = self
            .run_ids()
            .await?
            .remove(run)
            .ok_or_else(|| ViewError::RunNotFound(run.to_owned()))?;
        let source = match location {
            Location::Shared => {
                let pool = self
                    .shared_pool()
                    .await?
                    .cloned()
                    .ok_or_else(|| ViewError::RunNotFound(run.to_owned()))?;
                Source {
                    pool,
                    id: run.to_owned(),
                    dir: self.dir.join(run),
                    at: self
                        .database
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default(),
                    ucols: USAGE_COLS,
                }
            }
            Location::Folder(dir) => {
                let path = dir.join(DB_FILE);
                let at = path.display().to_string();
                let db = |source| ViewError::Db {
                    at: at.clone(),
                    source,
                };
                let pool = crate::database::connect_sqlite(&path, true, 2)
                    .await
                    .map_err(db)?;
                let has_cache: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM pragma_table_info('usage') WHERE name = 'cache_read_tokens'",
                )
                .fetch_one(&pool)
                .await
                .map_err(db)?;
                // the id inside the store (normally the folder's name)
                let id = sqlx::query_scalar::<_, String>(
                    "SELECT id FROM runs ORDER BY id = $1 DESC LIMIT 1",
                )
                .bind(run)
                .fetch_optional(&pool)
                .await
                .map_err(db)?
                .unwrap_or_else(|| run.to_owned());
                Source {
                    pool,
                    id,
                    dir,
                    at,
                    ucols: if has_cache > 0 {
                        USAGE_COLS
                    } else {
                        USAGE_COLS_V1
                    },
                }
            }
        };
        if let Ok(mut m) = self.sources.lock() {
            m.insert(run.to_owned(), source.clone());
        }
        Ok(source)
    }

    /// Every run, newest first.
    pub async fn runs(&self) -> Result<Vec<RunInfo>, ViewError> {
        let mut out = Vec::new();
        for id in self.run_ids().await?.keys() {
            match self.run(id).await {
                Ok(r) => out.push(r),
                // a folder being created right now, or not a store at all: skip, say why
                Err(e) => tracing::warn!(run = %id, error = %e, "skipping an unreadable run"),
            }
        }
        out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    /// One run with its counts.
    pub async fn run(&self, run: &str) -> Result<RunInfo, ViewError> {
        let src = self.source(run).await?;
        let db = src.db();
        let row =
            sqlx::query("SELECT id, created_at, finished_at, status, plan FROM runs WHERE id = $1")
                .bind(&src.id)
                .fetch_optional(&src.pool)
                .await
                .map_err(&db)?
                .ok_or_else(|| ViewError::RunNotFound(run.to_owned()))?;
        let plan: String = row.get("plan");
        let head = crate::store::RunRow {
            id: run.to_owned(),
            created_at: row.get("created_at"),
            finished_at: row.get("finished_at"),
            status: row.get("status"),
            plan: serde_json::from_str(&plan).unwrap_or_default(),
        };
        let last_event: Option<i64> =
            sqlx::query_scalar("SELECT max(seq) FROM events WHERE run_id = $1")
                .bind(&src.id)
                .fetch_one(&src.pool)
                .await
                .map_err(&db)?;
        let last_event = last_event.unwrap_or(0);
        // the totals are the presentation's, from the trial rows (read once per event)
        let rows = self.rows_at(run, &src, last_event).await?;
        Ok(RunInfo {
            last_event,
            ..RunInfo::of_rows(&head, &rows)
        })
    }

    /// The run's status (`running`, `finished`, ...), read fresh.
    pub async fn run_status(&self, run: &str) -> Result<String, ViewError> {
        let src = self.source(run).await?;
        sqlx::query_scalar::<_, String>("SELECT status FROM runs WHERE id = $1")
            .bind(&src.id)
            .fetch_optional(&src.pool)
            .await
            .map_err(src.db())?
            .ok_or_else(|| ViewError::RunNotFound(run.to_owned()))
    }

    /// The run's plan as stored (task paths, agents, settings).
    pub async fn plan(&self, run: &str) -> Result<serde_json::Value, ViewError> {
        let src = self.source(run).await?;
        let plan: Option<String> = sqlx::query_scalar("SELECT plan FROM runs WHERE id = $1")
            .bind(&src.id)
            .fetch_optional(&src.pool)
            .await
            .map_err(src.db())?;
        Ok(plan
            .and_then(|p| serde_json::from_str(&p).ok())
            .unwrap_or_default())
    }

    /// The agents the run's plan names, in its order.
    pub async fn plan_agents(&self, run: &str) -> Result<Vec<String>, ViewError> {
        Ok(agents_of(&self.plan(run).await?))
    }

    /// One page of a run's trials, filtered and sorted.
    pub async fn trials(&self, run: &str, q: &TrialQuery) -> Result<TrialPage, ViewError> {
        let src = self.source(run).await?;
        let mut filters = String::from("t.run_id = $1");
        let mut binds: Vec<String> = vec![src.id.clone()];
        for (col, val) in [
            ("t.task_id", &q.task),
            ("t.task_kind", &q.kind),
            ("t.agent", &q.agent),
            ("t.state", &q.status),
        ] {
            if let Some(v) = val.as_deref().filter(|v| !v.is_empty()) {
                binds.push(v.to_owned());
                filters.push_str(&format!(" AND {col} = ${}", binds.len()));
            }
        }
        match q.outcome.as_deref().filter(|v| !v.is_empty()) {
            None => {}
            Some("passed") => filters.push_str(" AND t.passed = 1"),
            Some("not_passed") => {
                filters.push_str(" AND t.state = 'done' AND coalesce(t.passed, 0) = 0")
            }
            Some(o) if Outcome::parse(o).is_some() => {
                binds.push(o.to_owned());
                filters.push_str(&format!(" AND t.outcome = ${}", binds.len()));
            }
            Some(o) => {
                return Err(ViewError::BadRequest(format!(
                    "unknown outcome `{o}` (completed, failed, crashed, timeout, inactive, infra_error, passed, not_passed)"
                )));
            }
        }
        let sort = match q.sort.as_deref().unwrap_or("task") {
            "task" => "t.task_id",
            "agent" => "t.agent",
            "kind" => "t.task_kind",
            "score" => "t.score",
            "cost" => "u.cost_usd",
            "started" => "t.started_at",
            "finished" => "t.finished_at",
            other => {
                return Err(ViewError::BadRequest(format!(
                    "unknown sort `{other}` (task, agent, kind, score, cost, started, finished)"
                )));
            }
        };
        // NULLs sort as the smallest value on both backends (SQLite's own rule)
        let order = match q.order.as_deref().unwrap_or("asc") {
            "asc" => "ASC NULLS FIRST",
            "desc" => "DESC NULLS LAST",
            other => {
                return Err(ViewError::BadRequest(format!(
                    "unknown order `{other}` (asc, desc)"
                )));
            }
        };
        let per_page = q.per_page.unwrap_or(100).clamp(1, MAX_PAGE);
        let page = q.page.unwrap_or(1).max(1);
        let from = "FROM trials t LEFT JOIN usage u ON u.run_id = t.run_id AND u.trial_id = t.id";
        let count_sql = format!("SELECT count(*) {from} WHERE {filters}");
        let mut count = sqlx::query_scalar::<_, i64>(&count_sql);
        for b in &binds {
            count = count.bind(b);
        }
        let total = count.fetch_one(&src.pool).await.map_err(src.db())?;
        let (limit, offset) = (binds.len() + 1, binds.len() + 2);
        let list_sql = format!(
            "SELECT t.*, {ucols} {from} WHERE {filters} \
             ORDER BY {sort} {order}, t.task_id, t.agent, t.repeat_index LIMIT ${limit} OFFSET ${offset}",
            ucols = src.ucols
        );
        let mut list = sqlx::query(&list_sql);
        for b in &binds {
            list = list.bind(b);
        }
        let rows = list
            .bind(i64::from(per_page))
            .bind(i64::from(page - 1) * i64::from(per_page))
            .fetch_all(&src.pool)
            .await
            .map_err(src.db())?;
        Ok(TrialPage {
            total,
            page,
            per_page,
            trials: rows.iter().map(summary_of).collect(),
        })
    }

    /// One trial (with its artifact list).
    pub async fn trial(&self, run: &str, trial: &str) -> Result<TrialDetail, ViewError> {
        let src = self.source(run).await?;
        let db = src.db();
        let sql = format!(
            "SELECT t.*, {} \
             FROM trials t LEFT JOIN usage u ON u.run_id = t.run_id AND u.trial_id = t.id \
             WHERE t.run_id = $1 AND t.id = $2",
            src.ucols
        );
        let row = sqlx::query(&sql)
            .bind(&src.id)
            .bind(trial)
            .fetch_optional(&src.pool)
            .await
            .map_err(&db)?
            .ok_or_else(|| ViewError::TrialNotFound {
                run: run.to_owned(),
                trial: trial.to_owned(),
            })?;
        let artifacts = sqlx::query(
            "SELECT name, sha256, size, media_type FROM artifacts WHERE run_id = $1 AND trial_id = $2 ORDER BY name",
        )
        .bind(&src.id)
        .bind(trial)
        .fetch_all(&src.pool)
        .await
        .map_err(&db)?
        .into_iter()
        .map(|r| Artifact {
            name: r.get("name"),
            sha256: r.get("sha256"),
            size: r.get::<i64, _>("size").max(0) as u64,
            media_type: r.get("media_type"),
        })
        .collect();
        Ok(TrialDetail {
            summary: summary_of(&row),
            task_hash: row.get("task_hash"),
            dimensions: json_col(&row, "dimensions"),
            flags: json_col(&row, "flags"),
            attempts: u32::try_from(row.get::<i64, _>("attempts")).unwrap_or(0),
            error: row.get("error"),
            isolated: row.get::<Option<i64>, _>("isolated").map(|v| v != 0),
            exit_code: row.get("exit_code"),
            requests: row.get::<Option<i64>, _>("requests").unwrap_or(0),
            artifacts,
        })
    }

    /// A trial's grade report (the `rubrics::GradeReport` as stored), if it was graded.
    pub async fn grade(
        &self,
        run: &str,
        trial: &str,
    ) -> Result<Option<serde_json::Value>, ViewError> {
        let src = self.source(run).await?;
        let report: Option<String> =
            sqlx::query_scalar("SELECT report FROM grades WHERE run_id = $1 AND trial_id = $2")
                .bind(&src.id)
                .bind(trial)
                .fetch_optional(&src.pool)
                .await
                .map_err(src.db())?;
        Ok(report.map(|r| serde_json::from_str(&r).unwrap_or(serde_json::Value::String(r))))
    }

    /// The blob holding a trial's artifact, with its record.
    pub async fn artifact(
        &self,
        run: &str,
        trial: &str,
        name: &str,
    ) -> Result<(Artifact, PathBuf), ViewError> {
        let detail = self.trial(run, trial).await?;
        let a = detail
            .artifacts
            .into_iter()
            .find(|a| a.name == name)
            .ok_or_else(|| ViewError::ArtifactNotFound {
                trial: trial.to_owned(),
                name: name.to_owned(),
            })?;
        if a.sha256.len() < 2 || !a.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ViewError::ArtifactNotFound {
                trial: trial.to_owned(),
                name: name.to_owned(),
            });
        }
        let path = self
            .source(run)
            .await?
            .dir
            .join("blobs")
            .join(&a.sha256[..2])
            .join(&a.sha256);
        Ok((a, path))
    }

    /// The first `max` bytes of an artifact (and whether it was cut).
    pub async fn artifact_head(
        &self,
        run: &str,
        trial: &str,
        name: &str,
        max: u64,
    ) -> Result<(Vec<u8>, bool), ViewError> {
        use tokio::io::AsyncReadExt;
        let (a, path) = self.artifact(run, trial, name).await?;
        let file = tokio::fs::File::open(&path)
            .await
            .map_err(|source| ViewError::Io {
                path: path.clone(),
                source,
            })?;
        let mut buf = Vec::new();
        file.take(max)
            .read_to_end(&mut buf)
            .await
            .map_err(|source| ViewError::Io { path, source })?;
        Ok((buf, a.size > max))
    }

    /// A run's events after `after`, oldest first, at most `limit` (bounded by [`MAX_EVENTS`]).
    pub async fn events(&self, run: &str, q: &EventQuery) -> Result<Vec<Event>, ViewError> {
        let src = self.source(run).await?;
        let limit = i64::from(q.limit.unwrap_or(MAX_EVENTS).clamp(1, MAX_EVENTS));
        let rows = sqlx::query(
            "SELECT seq, trial_id, at, kind, data FROM events \
             WHERE run_id = $1 AND seq > $2 AND ($3 IS NULL OR trial_id = $3) ORDER BY seq LIMIT $4",
        )
        .bind(&src.id)
        .bind(q.after.unwrap_or(0))
        .bind(q.trial.as_deref())
        .bind(limit)
        .fetch_all(&src.pool)
        .await
        .map_err(src.db())?;
        Ok(rows
            .into_iter()
            .map(|r| {
                let data: String = r.get("data");
                Event {
                    seq: r.get("seq"),
                    trial_id: r.get("trial_id"),
                    at: r.get("at"),
                    kind: r.get("kind"),
                    data: serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data)),
                }
            })
            .collect())
    }

    /// The sequence number of the run's last event (0: none): every change of a trial is
    /// written with an event, so the rows read at one version stay valid while it holds.
    async fn version(&self, src: &Source) -> Result<i64, ViewError> {
        Ok(
            sqlx::query_scalar::<_, Option<i64>>("SELECT max(seq) FROM events WHERE run_id = $1")
                .bind(&src.id)
                .fetch_one(&src.pool)
                .await
                .map_err(src.db())?
                .unwrap_or(0),
        )
    }

    /// Every trial of a run (up to [`MAX_LEADERBOARD_TRIALS`]) as the summary module takes them;
    /// read again only when the run has a new event.
    pub async fn trial_rows(&self, run: &str) -> Result<Arc<Vec<TrialRow>>, ViewError> {
        let src = self.source(run).await?;
        let version = self.version(&src).await?;
        self.rows_at(run, &src, version).await
    }

    /// What `make` computes from a run's trials, computed once per `key` (the view and its
    /// parameters) and kept until the run has a new event: a leaderboard or a comparison is
    /// not summarised again for every request of a finished run.
    pub async fn derived<T, F>(&self, run: &str, key: &str, make: F) -> Result<Arc<T>, ViewError>
    where
        T: Send + Sync + 'static,
        F: FnOnce(&[TrialRow]) -> Result<T, ViewError>,
    {
        let src = self.source(run).await?;
        let version = self.version(&src).await?;
        let k = (run.to_owned(), key.to_owned());
        let hit = self
            .derived
            .lock()
            .ok()
            .and_then(|m| m.get(&k).cloned())
            .filter(|(v, _)| *v == version)
            .and_then(|(_, d)| d.downcast::<T>().ok());
        if let Some(hit) = hit {
            return Ok(hit);
        }
        let rows = self.rows_at(run, &src, version).await?;
        let made = Arc::new(make(&rows)?);
        if let Ok(mut m) = self.derived.lock() {
            m.retain(|(r, _), (v, _)| r != run || *v == version);
            if m.len() >= MAX_DERIVED {
                m.clear();
            }
            m.insert(k, (version, made.clone()));
        }
        Ok(made)
    }

    /// The run's trials as read at `version` (from the cache when they were).
    async fn rows_at(
        &self,
        run: &str,
        src: &Source,
        version: i64,
    ) -> Result<Arc<Vec<TrialRow>>, ViewError> {
        let cached = || {
            self.rows
                .lock()
                .ok()
                .and_then(|m| m.get(run).cloned())
                .filter(|(v, _)| *v == version)
                .map(|(_, rows)| rows)
        };
        if let Some(rows) = cached() {
            return Ok(rows);
        }
        let lock = self
            .reading
            .lock()
            .map(|mut m| m.entry(run.to_owned()).or_default().clone())
            .unwrap_or_default();
        let _reading = lock.lock().await;
        if let Some(rows) = cached() {
            return Ok(rows);
        }
        let sql = format!(
            "SELECT t.*, {} \
             FROM trials t LEFT JOIN usage u ON u.run_id = t.run_id AND u.trial_id = t.id \
             WHERE t.run_id = $1 ORDER BY t.task_id, t.agent, t.repeat_index LIMIT $2",
            src.ucols
        );
        let rows = sqlx::query(&sql)
            .bind(&src.id)
            .bind(MAX_LEADERBOARD_TRIALS)
            .fetch_all(&src.pool)
            .await
            .map_err(src.db())?;
        let rows = Arc::new(rows.iter().map(trial_row_of).collect::<Vec<_>>());
        if let Ok(mut m) = self.rows.lock() {
            m.insert(run.to_owned(), (version, rows.clone()));
        }
        Ok(rows)
    }
}

/// The agents a run's plan names, in its order.
fn agents_of(plan: &serde_json::Value) -> Vec<String> {
    plan["agents"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn json_col<T: serde::de::DeserializeOwned + Default>(row: &AnyRow, col: &str) -> T {
    row.try_get::<Option<String>, _>(col)
        .ok()
        .flatten()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default()
}

/// The trials of several runs together (every run when `runs` is empty), bounded by
/// [`MAX_LEADERBOARD_TRIALS`] in all; returns the run ids read.
pub async fn rows_of_runs(
    results: &Results,
    runs: &[String],
) -> Result<(Vec<String>, Vec<TrialRow>), ViewError> {
    let ids: Vec<String> = if runs.is_empty() {
        results.run_ids().await?.into_keys().collect()
    } else {
        runs.to_vec()
    };
    let mut out = Vec::new();
    for id in &ids {
        let rows = results.trial_rows(id).await?;
        let room = usize::try_from(MAX_LEADERBOARD_TRIALS).unwrap_or(usize::MAX) - out.len();
        out.extend(rows.iter().take(room).cloned());
    }
    Ok((ids, out))
}

/// A stored trial row as the domain's [`TrialRow`] (without grade report or artifacts).
fn trial_row_of(row: &AnyRow) -> TrialRow {
    let planned = crate::store::planned_of(row);
    let state: String = row.get("state");
    let result = (state == "done").then(|| {
        crate::store::result_of(
            row,
            json_col(row, "dimensions"),
            json_col(row, "flags"),
            json_col(row, "phases"),
        )
    });
    TrialRow {
        planned,
        state,
        result,
        started_at: row.get("started_at"),
        finished_at: row.get("finished_at"),
    }
}

fn summary_of(row: &AnyRow) -> TrialSummary {
    summary_of_ref(&trial_row_of(row))
}
