//! Where the rows of runs live: one SQLite file per run (the default, `<run dir>/store.sqlite`)
//! or one PostgreSQL database for every run (`--database-url postgres://...`, runs keyed by their
//! id). Both are reached through sqlx's `Any` driver, so every query is one SQL text for both:
//! `$N` placeholders, `ON CONFLICT` upserts, booleans stored as integers, sums cast to `BIGINT`.
//! Each backend has its own migrations folder (`migrations/` for SQLite, `migrations/postgres/`
//! for PostgreSQL) with the same versions. Blobs stay on disk under the run directory either way.

use std::path::Path;
use std::str::FromStr;
use std::sync::Once;

use serde::{Deserialize, Serialize};
use sqlx::AnyPool;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

/// A PostgreSQL connection URL. `Display`, `Debug` and `Serialize` (so the run's stored plan
/// and every log line) show it with its password replaced by `***`; only [`Self::expose`] gives
/// the real one, to the driver.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    /// The URL with its password, for connecting only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the URL carries a password (in its user part or a `password=` parameter).
    pub fn has_password(&self) -> bool {
        reqwest::Url::parse(&self.0).is_ok_and(|u| {
            u.password().is_some()
                || u.query_pairs()
                    .any(|(k, _)| k.eq_ignore_ascii_case("password"))
        })
    }

    /// The URL without its password (`***` instead) and without a `password=` parameter.
    pub fn redacted(&self) -> String {
        let Ok(mut url) = reqwest::Url::parse(&self.0) else {
            return "postgres://(unparseable URL)".into();
        };
        if url.password().is_some() {
            let _ = url.set_password(Some("***"));
        }
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| {
                let v = if k.eq_ignore_ascii_case("password") {
                    "***".to_owned()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        if !pairs.is_empty() {
            url.query_pairs_mut().clear().extend_pairs(pairs);
        }
        url.to_string()
    }
}

impl FromStr for DatabaseUrl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let scheme = s.split_once("://").map(|(scheme, _)| scheme);
        if !matches!(scheme, Some("postgres" | "postgresql")) {
            return Err(
                "not a PostgreSQL URL: write postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE \
                 (or postgres://USER@localhost/DATABASE?host=/socket/dir for a local socket); \
                 without a database URL each run keeps its own SQLite file"
                    .into(),
            );
        }
        reqwest::Url::parse(s).map_err(|e| {
            format!("not a valid URL ({e}); write postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        })?;
        Ok(Self(s.to_owned()))
    }
}

impl std::fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DatabaseUrl({})", self.redacted())
    }
}

impl Serialize for DatabaseUrl {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.redacted())
    }
}

impl<'de> Deserialize<'de> for DatabaseUrl {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Which database a pool talks to (the few places SQL differs ask this).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// One file per run directory.
    Sqlite,
    /// One database for every run.
    Postgres,
}

fn install_drivers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(sqlx::any::install_default_drivers);
}

/// A path as the database part of a `sqlite://` URL (`%`, `?` and `#` escaped).
fn sqlite_url(path: &Path, read_only: bool) -> String {
    let mut p = String::new();
    for c in path.display().to_string().chars() {
        match c {
            '%' => p.push_str("%25"),
            '?' => p.push_str("%3F"),
            '#' => p.push_str("%23"),
            c => p.push(c),
        }
    }
    format!("sqlite://{p}?mode={}", if read_only { "ro" } else { "rwc" })
}

/// Opens the SQLite file at `path` (created when missing unless `read_only`): WAL journal, full
/// sync, a 30 s busy timeout on every connection.
pub async fn connect_sqlite(
    path: &Path,
    read_only: bool,
    max_connections: u32,
) -> Result<AnyPool, sqlx::Error> {
    install_drivers();
    let options = AnyConnectOptions::from_str(&sqlite_url(path, read_only))?;
    AnyPoolOptions::new()
        .max_connections(max_connections)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                let pragmas = if read_only {
                    "PRAGMA busy_timeout = 10000;"
                } else {
                    "PRAGMA busy_timeout = 30000; PRAGMA journal_mode = WAL; \
                     PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;"
                };
                use sqlx::Executor as _;
                conn.execute(pragmas).await.map(|_| ())
            })
        })
        .connect_with(options)
        .await
}

/// Connects to the PostgreSQL database of `url`, creating the database first when it does not
/// exist and `create` is set (a server that refuses says so in the error).
pub async fn connect_postgres(
    url: &DatabaseUrl,
    max_connections: u32,
    create: bool,
) -> Result<AnyPool, sqlx::Error> {
    use sqlx::migrate::MigrateDatabase;
    install_drivers();
    if create && !sqlx::Any::database_exists(url.expose()).await? {
        // Two processes may race to create it: the loser's error is harmless when it exists now.
        if let Err(e) = sqlx::Any::create_database(url.expose()).await
            && !sqlx::Any::database_exists(url.expose()).await?
        {
            return Err(e);
        }
    }
    AnyPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(std::time::Duration::from_secs(30))
        .connect(url.expose())
        .await
}

/// Applies the backend's migrations (idempotent; PostgreSQL serialises concurrent callers).
pub async fn migrate(pool: &AnyPool, backend: Backend) -> Result<(), sqlx::migrate::MigrateError> {
    match backend {
        Backend::Sqlite => sqlx::migrate!("./migrations").run(pool).await,
        Backend::Postgres => sqlx::migrate!("./migrations/postgres").run(pool).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_url_never_shows_its_password() {
        let u: DatabaseUrl = "postgres://rb:s3cret-pw@db.example:5432/results?sslmode=require"
            .parse()
            .expect("url");
        for shown in [
            u.to_string(),
            format!("{u:?}"),
            serde_json::to_string(&u).expect("json"),
        ] {
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("db.example:5432/results"), "{shown}");
        }
        assert!(u.expose().contains("s3cret-pw"));
        let q: DatabaseUrl = "postgres://rb@localhost/r?host=/tmp/pg&password=hunter22"
            .parse()
            .expect("url");
        assert!(!q.to_string().contains("hunter22"), "{q}");
        assert!(q.to_string().contains("host=%2Ftmp%2Fpg"), "{q}");
    }

    #[test]
    fn only_postgres_urls_are_accepted() {
        for bad in ["sqlite://x.db", "results.sqlite", "mysql://a@b/c", ""] {
            let e = bad.parse::<DatabaseUrl>().expect_err(bad);
            assert!(e.contains("postgres://"), "{e}");
        }
        assert!("postgresql://a@b/c".parse::<DatabaseUrl>().is_ok());
    }

    #[test]
    fn sqlite_paths_are_escaped_in_urls() {
        assert_eq!(
            sqlite_url(Path::new("/r/a?b#c%d/store.sqlite"), true),
            "sqlite:///r/a%3Fb%23c%25d/store.sqlite?mode=ro"
        );
    }
}
