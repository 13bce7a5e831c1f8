//! A private PostgreSQL server for a test: Debian's `postgresql` binaries (installed by
//! `scripts/bootstrap-tests`), `initdb` into a temporary folder (as the `postgres` user when the tests
//! run as root: the server refuses root), listening only on a unix socket in that folder (no TCP
//! port, so parallel tests never collide). The server is killed and its folder removed when the
//! value is dropped. There is no skip path: a server that cannot start fails the test.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sandbox::child::{ChildSpec, SupervisedChild};

/// The port in the socket's file name (`.s.PGSQL.5432`); no TCP listener is opened.
const PORT: &str = "5432";

/// A running private PostgreSQL server.
#[derive(Debug)]
pub struct Postgres {
    // dropped first: the server dies before its folder is removed
    server: SupervisedChild,
    dir: tempfile::TempDir,
}

/// The newest `/usr/lib/postgresql/<version>/bin` holding the server binaries.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, b)| b).unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server binaries are not installed (no /usr/lib/postgresql/*/bin/initdb): \
             run scripts/bootstrap-tests, which installs Debian's postgresql"
        )
    })
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// `program args` as the `postgres` user when we are root, else as ourselves.
fn spec(program: &Path, args: &[String], cwd: &Path) -> ChildSpec {
    let env = [("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), ("LC_ALL", "C")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let (program, args) = if is_root() {
        let mut a = vec![
            "-u".to_owned(),
            "postgres".to_owned(),
            "--".to_owned(),
            program.display().to_string(),
        ];
        a.extend_from_slice(args);
        ("runuser".to_owned(), a)
    } else {
        (program.display().to_string(), args.to_vec())
    };
    ChildSpec {
        program,
        args,
        env,
        clear_env: true,
        cwd: cwd.to_path_buf(),
        limits: None,
    }
}

async fn run_to_end(spec: ChildSpec, what: &str) -> (bool, String) {
    let mut child = SupervisedChild::spawn(spec)
        .unwrap_or_else(|e| panic!("{what} could not start: {e} (is runuser installed?)"));
    let mut out = String::new();
    let exit = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = child.next_stdout_line().await {
            out.push_str(&line);
            out.push('\n');
        }
        child.wait().await
    })
    .await
    .unwrap_or_else(|_| panic!("{what} did not finish in 120 s"));
    (exit.success(), format!("{out}{}", child.stderr_tail()))
}

impl Postgres {
    /// Creates a cluster in a fresh temporary folder and starts its server; panics (naming the
    /// cause) when that fails.
    pub async fn start() -> Self {
        let bin = bin_dir();
        let dir = tempfile::Builder::new()
            .prefix("rb-pg-")
            .tempdir()
            .expect("a temporary folder");
        if is_root() {
            let user = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .unwrap_or_else(|| {
                    panic!(
                        "no `postgres` user: run scripts/bootstrap-tests (Debian's postgresql creates it)"
                    )
                });
            nix::unistd::chown(dir.path(), Some(user.uid), Some(user.gid))
                .expect("chown the cluster folder to postgres");
        }
        let data = dir.path().join("data");
        let (ok, log) = run_to_end(
            spec(
                &bin.join("initdb"),
                &[
                    "-D".into(),
                    data.display().to_string(),
                    "-U".into(),
                    "postgres".into(),
                    "--auth=trust".into(),
                    "--encoding=UTF8".into(),
                    "--locale=C".into(),
                    "--no-sync".into(),
                ],
                dir.path(),
            ),
            "initdb",
        )
        .await;
        assert!(ok, "initdb failed:\n{log}");
        let server = SupervisedChild::spawn(spec(
            &bin.join("postgres"),
            &[
                "-D".into(),
                data.display().to_string(),
                "-k".into(),
                dir.path().display().to_string(),
                "-p".into(),
                PORT.into(),
                "-c".into(),
                "listen_addresses=".into(),
                "-c".into(),
                "fsync=off".into(),
                "-c".into(),
                "max_connections=100".into(),
            ],
            dir.path(),
        ))
        .expect("the PostgreSQL server starts");
        let mut pg = Self { server, dir };
        pg.wait_ready(&bin).await;
        pg
    }

    async fn wait_ready(&mut self, bin: &Path) {
        let started = Instant::now();
        loop {
            if let Some(exit) = self.server.try_exit() {
                panic!(
                    "the PostgreSQL server exited ({exit:?}):\n{}",
                    self.server.stderr_tail()
                );
            }
            let (ok, _) = run_to_end(
                spec(
                    &bin.join("pg_isready"),
                    &[
                        "-h".into(),
                        self.socket_dir().display().to_string(),
                        "-p".into(),
                        PORT.into(),
                    ],
                    self.dir.path(),
                ),
                "pg_isready",
            )
            .await;
            if ok {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the PostgreSQL server was not ready within 60 s:\n{}",
                self.server.stderr_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The folder holding the server's socket.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of database `db` on this server (the green agent creates it when missing).
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://postgres@localhost:{PORT}/{db}?host={}",
            self.socket_dir().display()
        )
    }

    /// The server's stderr so far (for failure messages).
    pub fn log(&self) -> String {
        self.server.stderr_tail()
    }
}
