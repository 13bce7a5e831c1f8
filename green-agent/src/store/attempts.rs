//! The `attempts` table: every attempt of a trial across processes (how it started, where its
//! agent is, the A2A task id once the agent accepted the task, how it ended). A resumed run
//! reads the open attempts a dead process left to reattach to their agents.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{Store, StoreError, now};

/// How an attempt started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptKind {
    /// A new agent was started (or an external agent sent the task).
    Fresh,
    /// The agent a dead process left running was taken over.
    Reattached,
    /// `resume --regrade`: the outputs an earlier attempt collected, graded again (no agent).
    Regrade,
}

impl AttemptKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptKind::Fresh => "fresh",
            AttemptKind::Reattached => "reattached",
            AttemptKind::Regrade => "regrade",
        }
    }
}

/// Where an attempt's agent is (what a resumed run needs to reattach).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentPlace {
    /// The hosted agent's container id.
    pub container: Option<String>,
    /// The external agent's URL.
    pub agent_url: Option<String>,
    /// The model proxy's dummy token for the trial (never a provider key).
    pub proxy_token: Option<String>,
    /// The model proxy's port the agent was told.
    pub proxy_port: Option<u16>,
}

/// An attempt as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRow {
    pub trial_id: String,
    pub attempt: u32,
    pub kind: String,
    pub started_at: String,
    pub pid: u32,
    pub place: AgentPlace,
    pub a2a_task_id: Option<String>,
    /// How the agent ended, once it did (collected by a resumed run without driving it).
    pub driven: Option<serde_json::Value>,
    /// What collection produced, once it did (graded by a resumed run without the agent).
    pub collected: Option<serde_json::Value>,
    pub ended_at: Option<String>,
    /// `finished`, `infra_error`, `incompatible`, `agent_gone`, `abandoned` (`None`: open).
    pub ended: Option<String>,
    pub detail: Option<String>,
}

/// One trial to grade again: what it had, and the attempt whose collected outputs are graded.
#[derive(Debug, Clone)]
pub struct RegradeStart {
    pub trial_id: String,
    /// The attempt whose `collected` outputs are graded again.
    pub from_attempt: u32,
    /// Its `collected` value (copied into the regrade's attempt).
    pub collected: serde_json::Value,
    /// The trial's result as it was (kept in the `trial_regrade` event; `None` for a regrade
    /// taken up again after a crash, whose first start kept it).
    pub previous: Option<serde_json::Value>,
}

/// The columns of an attempt written after it began (a fixed list: never a name from outside).
#[derive(Debug, Clone, Copy)]
enum Column {
    A2aTaskId,
    Driven,
    Collected,
}

impl Column {
    fn name(self) -> &'static str {
        match self {
            Column::A2aTaskId => "a2a_task_id",
            Column::Driven => "driven",
            Column::Collected => "collected",
        }
    }
}

fn row_of(r: &sqlx::any::AnyRow) -> AttemptRow {
    AttemptRow {
        trial_id: r.get("trial_id"),
        attempt: u32::try_from(r.get::<i64, _>("attempt")).unwrap_or(0),
        kind: r.get("kind"),
        started_at: r.get("started_at"),
        pid: u32::try_from(r.get::<i64, _>("pid")).unwrap_or(0),
        place: AgentPlace {
            container: r.get("container"),
            agent_url: r.get("agent_url"),
            proxy_token: r.get("proxy_token"),
            proxy_port: r
                .get::<Option<i64>, _>("proxy_port")
                .and_then(|p| u16::try_from(p).ok()),
        },
        a2a_task_id: r.get("a2a_task_id"),
        driven: r
            .get::<Option<String>, _>("driven")
            .and_then(|c| serde_json::from_str(&c).ok()),
        collected: r
            .get::<Option<String>, _>("collected")
            .and_then(|c| serde_json::from_str(&c).ok()),
        ended_at: r.get("ended_at"),
        ended: r.get("ended"),
        detail: r.get("detail"),
    }
}

impl Store {
    /// Records a new attempt of a trial (numbered after every earlier one); returns its number.
    pub async fn begin_attempt(
        &self,
        run_id: &str,
        trial_id: &str,
        kind: AttemptKind,
        place: &AgentPlace,
    ) -> Result<u32, StoreError> {
        // One statement: numbering and insert under one write lock (a read-then-write
        // transaction could fail at once with SQLITE_BUSY when another connection writes).
        let next: i64 = sqlx::query(
            "INSERT INTO attempts (run_id, trial_id, attempt, kind, started_at, pid, container, \
             agent_url, proxy_token, proxy_port) \
             SELECT $1, $2, COALESCE(MAX(attempt), 0) + 1, $3, $4, $5, $6, $7, $8, $9 \
             FROM attempts WHERE run_id = $10 AND trial_id = $11 RETURNING attempt",
        )
        .bind(run_id)
        .bind(trial_id)
        .bind(kind.as_str())
        .bind(now())
        .bind(i64::from(std::process::id()))
        .bind(place.container.as_deref())
        .bind(place.agent_url.as_deref())
        .bind(place.proxy_token.as_deref())
        .bind(place.proxy_port.map(i64::from))
        .bind(run_id)
        .bind(trial_id)
        .fetch_one(&self.pool)
        .await
        .map_err(|e| self.db(e))?
        .get("attempt");
        Ok(u32::try_from(next).unwrap_or(u32::MAX))
    }

    /// Starts a regrade of `trials`, all or none (one transaction): per trial, the previous
    /// result is kept in a `trial_regrade` event, an open attempt of kind `regrade` holding
    /// the outputs to grade is recorded, and the trial is `pending` again. A resumed run
    /// grades such an open attempt's outputs without any agent (see `trial::reattach`); a
    /// process killed meanwhile leaves them open for the next resume. Returns the attempts'
    /// numbers.
    pub async fn begin_regrade(
        &self,
        run_id: &str,
        trials: &[RegradeStart],
    ) -> Result<Vec<u32>, StoreError> {
        let mut tx = self.pool.begin().await.map_err(|e| self.db(e))?;
        let mut numbers = Vec::with_capacity(trials.len());
        for t in trials {
            let next: i64 = sqlx::query(
                "INSERT INTO attempts (run_id, trial_id, attempt, kind, started_at, pid, collected) \
                 SELECT $1, $2, COALESCE(MAX(attempt), 0) + 1, $3, $4, $5, $6 \
                 FROM attempts WHERE run_id = $7 AND trial_id = $8 RETURNING attempt",
            )
            .bind(run_id)
            .bind(&t.trial_id)
            .bind(AttemptKind::Regrade.as_str())
            .bind(now())
            .bind(i64::from(std::process::id()))
            .bind(t.collected.to_string())
            .bind(run_id)
            .bind(&t.trial_id)
            .fetch_one(&mut *tx)
            .await
            .map_err(|e| self.db(e))?
            .get("attempt");
            let number = u32::try_from(next).unwrap_or(u32::MAX);
            let data = serde_json::json!({
                "attempt": number,
                "from_attempt": t.from_attempt,
                "previous": t.previous,
            });
            sqlx::query(
                "INSERT INTO events (run_id, trial_id, at, kind, data) VALUES ($1, $2, $3, 'trial_regrade', $4)",
            )
            .bind(run_id)
            .bind(&t.trial_id)
            .bind(now())
            .bind(data.to_string())
            .execute(&mut *tx)
            .await
            .map_err(|e| self.db(e))?;
            sqlx::query("UPDATE trials SET state = 'pending' WHERE run_id = $1 AND id = $2")
                .bind(run_id)
                .bind(&t.trial_id)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.db(e))?;
            numbers.push(number);
        }
        tx.commit().await.map_err(|e| self.db(e))?;
        Ok(numbers)
    }

    /// Records the A2A task id of an attempt (the agent accepted the task).
    pub async fn attempt_task(
        &self,
        run_id: &str,
        trial_id: &str,
        attempt: u32,
        a2a_task_id: &str,
    ) -> Result<(), StoreError> {
        self.set_attempt(Column::A2aTaskId, run_id, trial_id, attempt, a2a_task_id)
            .await
    }

    /// Records how an attempt's agent ended (before collection starts).
    pub async fn attempt_driven(
        &self,
        run_id: &str,
        trial_id: &str,
        attempt: u32,
        driven: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.set_attempt(
            Column::Driven,
            run_id,
            trial_id,
            attempt,
            &driven.to_string(),
        )
        .await
    }

    /// Records what an attempt collected (before grading starts).
    pub async fn attempt_collected(
        &self,
        run_id: &str,
        trial_id: &str,
        attempt: u32,
        collected: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.set_attempt(
            Column::Collected,
            run_id,
            trial_id,
            attempt,
            &collected.to_string(),
        )
        .await
    }

    /// Sets one text column of an attempt.
    async fn set_attempt(
        &self,
        column: Column,
        run_id: &str,
        trial_id: &str,
        attempt: u32,
        value: &str,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE attempts SET {} = $1 WHERE run_id = $2 AND trial_id = $3 AND attempt = $4",
            column.name()
        );
        sqlx::query(&sql)
            .bind(value)
            .bind(run_id)
            .bind(trial_id)
            .bind(i64::from(attempt))
            .execute(&self.pool)
            .await
            .map_err(|e| self.db(e))?;
        Ok(())
    }

    /// Closes an attempt: how it ended, and why.
    pub async fn end_attempt(
        &self,
        run_id: &str,
        trial_id: &str,
        attempt: u32,
        ended: &str,
        detail: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE attempts SET ended_at = $1, ended = $2, detail = $3 \
             WHERE run_id = $4 AND trial_id = $5 AND attempt = $6 AND ended_at IS NULL",
        )
        .bind(now())
        .bind(ended)
        .bind(detail)
        .bind(run_id)
        .bind(trial_id)
        .bind(i64::from(attempt))
        .execute(&self.pool)
        .await
        .map_err(|e| self.db(e))?;
        Ok(())
    }

    /// The attempts left open (by a process that died) of trials not done, ordered by trial
    /// and attempt.
    pub async fn open_attempts(&self, run_id: &str) -> Result<Vec<AttemptRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT a.* FROM attempts a JOIN trials t ON t.run_id = a.run_id AND t.id = a.trial_id \
             WHERE a.run_id = $1 AND a.ended_at IS NULL AND t.state != 'done' \
             ORDER BY a.trial_id, a.attempt",
        )
        .bind(run_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.db(e))?;
        Ok(rows.iter().map(row_of).collect())
    }

    /// Every attempt of a trial, in order.
    pub async fn attempts(
        &self,
        run_id: &str,
        trial_id: &str,
    ) -> Result<Vec<AttemptRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT * FROM attempts WHERE run_id = $1 AND trial_id = $2 ORDER BY attempt",
        )
        .bind(run_id)
        .bind(trial_id)
        .fetch_all(&self.pool)
        .await
        .map_err(|e| self.db(e))?;
        Ok(rows.iter().map(row_of).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PlannedTrial;

    #[tokio::test]
    async fn attempts_are_numbered_across_processes_and_open_ones_found() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).await.expect("open");
        let planned = |id: &str| PlannedTrial {
            id: id.into(),
            task_id: "t".into(),
            task_kind: "generic".into(),
            task_hash: "h".into(),
            agent: "nop".into(),
            repeat_index: 0,
        };
        store
            .create_run("r", &serde_json::json!({}), &[planned("a"), planned("b")])
            .await
            .expect("run");
        let place = AgentPlace {
            container: Some("c1".into()),
            proxy_token: Some("rb-trial-x".into()),
            proxy_port: Some(4000),
            ..AgentPlace::default()
        };
        let n = store
            .begin_attempt("r", "a", AttemptKind::Fresh, &place)
            .await
            .expect("begin");
        assert_eq!(n, 1);
        store
            .attempt_task("r", "a", 1, "task-1")
            .await
            .expect("task");
        store
            .begin_attempt("r", "b", AttemptKind::Fresh, &AgentPlace::default())
            .await
            .expect("begin b");
        store
            .end_attempt("r", "b", 1, "infra_error", Some("boom"))
            .await
            .expect("end b");
        let open = store.open_attempts("r").await.expect("open");
        assert_eq!(open.len(), 1, "b's attempt is closed: {open:?}");
        assert_eq!(open[0].trial_id, "a");
        assert_eq!(open[0].a2a_task_id.as_deref(), Some("task-1"));
        assert_eq!(open[0].place, place);
        assert_eq!(open[0].collected, None);
        store
            .attempt_driven("r", "a", 1, &serde_json::json!({"outcome": "completed"}))
            .await
            .expect("driven");
        let m = store
            .begin_attempt("r", "a", AttemptKind::Reattached, &place)
            .await
            .expect("again");
        assert_eq!(m, 2);
        store
            .attempt_collected("r", "a", 2, &serde_json::json!({"staged": []}))
            .await
            .expect("collected");
        store
            .end_attempt("r", "a", 1, "abandoned", None)
            .await
            .expect("abandon");
        let open = store.open_attempts("r").await.expect("open");
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].attempt, 2);
        assert_eq!(open[0].collected, Some(serde_json::json!({"staged": []})));
        let all = store.attempts("r", "a").await.expect("all");
        assert_eq!(all[0].ended.as_deref(), Some("abandoned"));
        assert_eq!(
            all[0].driven,
            Some(serde_json::json!({"outcome": "completed"}))
        );
        assert_eq!(all[1].kind, "reattached");
    }
}
