//! The host's side of the **sandbox runner** (the `http` transport): a small stdlib Python
//! server (`runner.py`) that runs as root in each swarm sandbox's container, starts the
//! sandbox's own command as the sandbox user, and serves over HTTP what [`crate::Sandbox`]
//! needs: files in (a tar), execs, files out (a tar, checked here by the same code as Docker's
//! archive stream), the main command's exit, output and stop.
//!
//! Every request carries the sandbox's token (a Swarm secret, root-only in the container) and
//! goes through the network's relay (the runner accepts no other peer). Every answer read here
//! is bounded in size and time.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;

use crate::docker::archive::{extract_stream, spool_items};
use crate::runner::{ExecAnswer, ExecBody, SMALL_ANSWER};
use crate::spec_check::{check_sandbox_path, validate_env_names};
use crate::{CopiedOut, CopyIn, EscapingLinks, ExecOutcome, ExecRequest, SandboxError};

/// Where the runner program is mounted in the container (root-only, 0400).
pub(super) const RUNNER_PATH: &str = "/run/rb-runner.py";

/// The token's file under `/run/secrets` (root-only, 0400).
pub(super) const TOKEN_FILE: &str = "rb-runner-token";

/// The port the runner listens on in the container (the relay forwards the host to it).
pub const RUNNER_PORT: u16 = 8799;

/// Largest upload the runner accepts (one copy-in's tar).
pub(super) const MAX_UPLOAD: u64 = 16 * 1024 * 1024 * 1024;

/// How long a connection to the runner may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a short request (health, exit, logs) may take.
const SHORT: Duration = Duration::from_secs(60);

/// How long a copy may take (as long as the docker backend allows an upload).
const COPY: Duration = Duration::from_secs(30 * 60);

/// Time given to an exec past its own deadline (spawn, the kill, the answer).
const EXEC_MARGIN: Duration = Duration::from_secs(60);

/// How long the runner may take to answer after its task runs.
const READY: Duration = Duration::from_secs(60);

/// The longest wait for the main command asked of the runner in one request (under the
/// runner's own bound).
const WAIT_SLICE: Duration = Duration::from_secs(20);
const _: () = assert!(WAIT_SLICE.as_secs() < crate::runner::MAX_WAIT.as_secs());

type Body = BoxBody<Bytes, std::io::Error>;

/// A client of one sandbox's runner.
#[derive(Clone)]
pub(super) struct Runner {
    address: SocketAddr,
    token: String,
    service: String,
}

impl std::fmt::Debug for Runner {
    // The token is a secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("address", &self.address)
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

/// The runner's answer to a start.
#[derive(Debug, Deserialize)]
struct StartAnswer {
    started: bool,
}

/// What the runner says of itself.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct Health {
    /// Whether everything it starts runs with `no_new_privs`.
    pub(super) nnp: bool,
    /// The sandbox user's `(uid, gid)` as file owners (Docker's archive semantics).
    pub(super) uid: u32,
    pub(super) gid: u32,
}

#[derive(Deserialize)]
struct ExitAnswer {
    exit: Option<i64>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
}

/// A fresh random token (256 bits from the kernel), hex.
pub(super) fn new_token() -> Result<String, SandboxError> {
    use std::io::Read;
    let mut raw = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(|source| SandboxError::Io {
            path: "/dev/urandom".into(),
            source,
        })?;
    Ok(hex::encode(raw))
}

/// `s` percent-encoded for a query value.
fn encode_query(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn full(data: Vec<u8>) -> Body {
    Full::new(Bytes::from(data))
        .map_err(|never| match never {})
        .boxed()
}

impl Runner {
    pub(super) fn new(address: SocketAddr, token: String, service: String) -> Self {
        Self {
            address,
            token,
            service,
        }
    }

    fn error(
        &self,
        operation: &'static str,
        detail: impl Into<String>,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> SandboxError {
        SandboxError::Runner {
            service: self.service.clone(),
            operation,
            detail: detail.into(),
            source,
        }
    }

    /// Sends one request on a fresh connection; the answer's head within `timeout`.
    async fn send(
        &self,
        operation: &'static str,
        method: Method,
        path: &str,
        body: Body,
        length: Option<u64>,
        timeout: Duration,
    ) -> Result<Response<Incoming>, SandboxError> {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, "rb-runner")
            .header(
                hyper::header::AUTHORIZATION,
                format!("Bearer {}", self.token),
            );
        if let Some(length) = length {
            builder = builder.header(hyper::header::CONTENT_LENGTH, length);
        }
        let request = builder
            .body(body)
            .map_err(|e| self.error(operation, "building the request failed", Some(e.into())))?;
        let exchange = async {
            let stream = tokio::time::timeout(
                CONNECT_TIMEOUT,
                tokio::net::TcpStream::connect(self.address),
            )
            .await
            .map_err(|_| self.error(operation, "connecting timed out", None))?
            .map_err(|e| {
                self.error(
                    operation,
                    format!("connecting to {} failed", self.address),
                    Some(e.into()),
                )
            })?;
            let (mut sender, connection) =
                hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                    .await
                    .map_err(|e| self.error(operation, "HTTP handshake failed", Some(e.into())))?;
            tokio::spawn(async move {
                // Ends with the answer's body (or an error the request reports).
                let _ = connection.await;
            });
            sender
                .send_request(request)
                .await
                .map_err(|e| self.error(operation, "the request failed", Some(e.into())))
        };
        let response = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| {
                self.error(
                    operation,
                    format!("no answer within {} s", timeout.as_secs()),
                    None,
                )
            })??;
        Ok(response)
    }

    /// The body of an answer, at most `cap` bytes, within `timeout`.
    async fn read_body(
        &self,
        operation: &'static str,
        response: Response<Incoming>,
        cap: usize,
        timeout: Duration,
    ) -> Result<Vec<u8>, SandboxError> {
        let read = async {
            let mut stream = response.into_body().into_data_stream();
            let mut out = Vec::new();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|e| {
                    self.error(operation, "reading the answer failed", Some(e.into()))
                })?;
                if out.len() + chunk.len() > cap {
                    return Err(self.error(
                        operation,
                        format!("the answer is over {cap} bytes"),
                        None,
                    ));
                }
                out.extend_from_slice(&chunk);
            }
            Ok(out)
        };
        tokio::time::timeout(timeout, read)
            .await
            .map_err(|_| self.error(operation, "the answer did not end in time", None))?
    }

    /// An error answer as an error (`404` as [`SandboxError::NotFound`] of `path`, if given).
    async fn refused(
        &self,
        operation: &'static str,
        response: Response<Incoming>,
        not_found: Option<&str>,
    ) -> SandboxError {
        let status = response.status();
        if status == StatusCode::NOT_FOUND
            && let Some(path) = not_found
        {
            return SandboxError::NotFound {
                path: path.to_string(),
            };
        }
        let detail = match self
            .read_body(operation, response, SMALL_ANSWER, SHORT)
            .await
        {
            Ok(body) => serde_json::from_slice::<ErrorAnswer>(&body)
                .map(|e| e.error)
                .unwrap_or_else(|_| String::from_utf8_lossy(&body).into_owned()),
            Err(e) => e.to_string(),
        };
        self.error(operation, format!("HTTP {status}: {detail}"), None)
    }

    /// A request whose answer is small JSON.
    async fn json<T: for<'de> Deserialize<'de>>(
        &self,
        operation: &'static str,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        timeout: Duration,
        cap: usize,
    ) -> Result<T, SandboxError> {
        let (body, length) = match body {
            Some(b) => {
                let n = b.len() as u64;
                (full(b), Some(n))
            }
            None => (empty(), None),
        };
        let began = Instant::now();
        let response = self
            .send(operation, method, path, body, length, timeout)
            .await?;
        if !response.status().is_success() {
            return Err(self.refused(operation, response, None).await);
        }
        let left = timeout.saturating_sub(began.elapsed()).max(SHORT);
        let raw = self.read_body(operation, response, cap, left).await?;
        serde_json::from_slice(&raw)
            .map_err(|e| self.error(operation, "unreadable answer", Some(e.into())))
    }

    /// The runner's health, once it answers (retried while its task starts).
    pub(super) async fn ready(&self) -> Result<Health, SandboxError> {
        let began = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            match self
                .json::<Health>("health", Method::GET, "/health", None, SHORT, SMALL_ANSWER)
                .await
            {
                Ok(h) => return Ok(h),
                Err(e) if began.elapsed() > READY => return Err(e),
                Err(e) => {
                    tracing::trace!(service = %self.service, error = %e, "runner not answering yet");
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }

    /// Uploads `items` (see [`crate::Sandbox::copy_in_many`]) as one tar extracted at `/`;
    /// missing ancestors get `parents` (root when `None`).
    pub(super) async fn copy_in(
        &self,
        items: Vec<CopyIn>,
        default_owner: (u32, u32),
        parents: Option<(u32, u32)>,
    ) -> Result<(), SandboxError> {
        for item in &items {
            check_sandbox_path(&item.sandbox_path)?;
        }
        let spool = tokio::task::spawn_blocking(move || spool_items(&items, default_owner))
            .await
            .map_err(|e| SandboxError::Io {
                path: std::env::temp_dir(),
                source: std::io::Error::other(e),
            })??;
        let length = spool
            .metadata()
            .map_err(|source| SandboxError::Io {
                path: std::env::temp_dir(),
                source,
            })?
            .len();
        let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(spool))
            .map(|chunk| chunk.map(Frame::data));
        let body = BodyExt::boxed(StreamBody::new(stream));
        let path = match parents {
            Some((uid, gid)) => format!("/files?parents={uid}:{gid}"),
            None => "/files".to_string(),
        };
        let response = self
            .send("copy in", Method::PUT, &path, body, Some(length), COPY)
            .await?;
        if !response.status().is_success() {
            return Err(self.refused("copy in", response, None).await);
        }
        self.read_body("copy in", response, SMALL_ANSWER, SHORT)
            .await
            .map(drop)
    }

    /// Runs `request` as `user` in `workdir` (defaults already applied).
    pub(super) async fn exec(
        &self,
        request: &ExecRequest,
        user: &str,
        workdir: &str,
    ) -> Result<ExecOutcome, SandboxError> {
        if request.argv.is_empty() {
            return Err(SandboxError::InvalidSpec("exec argv is empty".into()));
        }
        validate_env_names(request.env.keys())?;
        let timeout = request.capped_timeout();
        let body = serde_json::to_vec(&ExecBody::new(request, user, workdir))
            .map_err(|e| self.error("exec", "encoding the request failed", Some(e.into())))?;
        // Two hex-encoded capped streams and the rest of the answer.
        let cap = request
            .output_cap
            .saturating_mul(4)
            .saturating_add(SMALL_ANSWER);
        let answer: ExecAnswer = self
            .json(
                "exec",
                Method::POST,
                "/exec",
                Some(body),
                timeout.saturating_add(EXEC_MARGIN),
                cap,
            )
            .await?;
        answer
            .into_outcome(false)
            .map_err(|e| self.error("exec", "unreadable output", Some(e.into())))
    }

    /// Copies `sandbox_path` out to `host_dest` (the checks of the docker backend's copy-out).
    pub(super) async fn copy_out(
        &self,
        sandbox_path: &str,
        host_dest: &Path,
        max_bytes: u64,
        links: EscapingLinks,
    ) -> Result<CopiedOut, SandboxError> {
        check_sandbox_path(sandbox_path)?;
        if sandbox_path == "/" {
            return Err(SandboxError::InvalidSpec(
                "copy-out of the whole filesystem is not supported; name a directory".into(),
            ));
        }
        let path = format!("/files?path={}", encode_query(sandbox_path));
        let response = self
            .send("copy out", Method::GET, &path, empty(), None, SHORT)
            .await?;
        if !response.status().is_success() {
            return Err(self.refused("copy out", response, Some(sandbox_path)).await);
        }
        let stream = response.into_body().into_data_stream();
        let copy = extract_stream(stream, sandbox_path, host_dest, max_bytes, links);
        let (extracted, stream_error) = tokio::time::timeout(COPY, copy).await.map_err(|_| {
            self.error(
                "copy out",
                format!("not done within {} s", COPY.as_secs()),
                None,
            )
        })?;
        match (extracted, stream_error) {
            // A refusal or the cap stops the download: that is the answer.
            (Err(e), _) => Err(e),
            (Ok(_), Some(e)) => {
                Err(self.error("copy out", "the tar stream broke off", Some(e.into())))
            }
            (Ok(copied), None) => Ok(copied),
        }
    }

    /// The main command's exit code, waiting for it up to `wait` (at most [`WAIT_SLICE`]).
    pub(super) async fn main_exit(&self, wait: Duration) -> Result<Option<i64>, SandboxError> {
        let wait = wait.min(WAIT_SLICE);
        let path = format!("/main?wait={}", wait.as_secs());
        let answer: ExitAnswer = self
            .json(
                "main exit",
                Method::GET,
                &path,
                None,
                wait + SHORT,
                SMALL_ANSWER,
            )
            .await?;
        Ok(answer.exit)
    }

    /// Waits for the main command's exit.
    pub(super) async fn wait_exit(&self) -> Result<i64, SandboxError> {
        loop {
            if let Some(code) = self.main_exit(WAIT_SLICE).await? {
                return Ok(code);
            }
        }
    }

    /// Starts the main command of a runner started with `--hold` (once; later calls do
    /// nothing). Fails when the sandbox was stopped before its command started.
    pub(super) async fn start(&self) -> Result<(), SandboxError> {
        let answer: StartAnswer = self
            .json(
                "start",
                Method::POST,
                "/start",
                Some(b"{}".to_vec()),
                SHORT,
                SMALL_ANSWER,
            )
            .await?;
        if answer.started {
            Ok(())
        } else {
            Err(self.error(
                "start",
                "the sandbox was stopped before its command started",
                None,
            ))
        }
    }

    /// SIGTERM to the main command, SIGKILL to its whole tree after `grace`.
    pub(super) async fn stop(&self, grace: Duration) -> Result<(), SandboxError> {
        let grace = grace.min(Duration::from_secs(24 * 3600));
        let body = serde_json::to_vec(&serde_json::json!({
            "grace_ms": u64::try_from(grace.as_millis()).unwrap_or(u64::MAX)
        }))
        .map_err(|e| self.error("stop", "encoding the request failed", Some(e.into())))?;
        let _: ExitAnswer = self
            .json(
                "stop",
                Method::POST,
                "/stop",
                Some(body),
                grace + SHORT,
                SMALL_ANSWER,
            )
            .await?;
        Ok(())
    }

    /// The main command's most recent output (at most `max_bytes`).
    pub(super) async fn logs(&self, max_bytes: usize) -> Result<String, SandboxError> {
        let path = format!("/logs?max={max_bytes}");
        let response = self
            .send("logs", Method::GET, &path, empty(), None, SHORT)
            .await?;
        if !response.status().is_success() {
            return Err(self.refused("logs", response, None).await);
        }
        let raw = self
            .read_body("logs", response, max_bytes.saturating_add(1), SHORT)
            .await?;
        Ok(String::from_utf8_lossy(&raw).into_owned())
    }

    /// Sends a bare request head (`token`: the right one, or `None` for a wrong one) and
    /// returns the answer's status line, or what ended the exchange. For tests of what the
    /// runner refuses.
    pub(super) async fn probe(
        &self,
        method: &str,
        path: &str,
        right_token: bool,
        declared_length: Option<u64>,
    ) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let token = if right_token {
            self.token.clone()
        } else {
            "0".repeat(self.token.len())
        };
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: rb-runner\r\nAuthorization: Bearer {token}\r\n"
        );
        if let Some(n) = declared_length {
            head.push_str(&format!("Content-Length: {n}\r\n"));
        }
        head.push_str("\r\n");
        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(self.address).await?;
            stream.write_all(head.as_bytes()).await?;
            let mut answer = vec![0u8; 512];
            let n = stream.read(&mut answer).await?;
            answer.truncate(n);
            Ok::<_, std::io::Error>(answer)
        };
        match tokio::time::timeout(SHORT, exchange).await {
            Ok(Ok(answer)) => String::from_utf8_lossy(&answer)
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            Ok(Err(e)) => format!("error: {e}"),
            Err(_) => "error: timed out".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode_query("/work/a b&c=d"), "/work/a%20b%26c%3Dd");
        assert_eq!(encode_query("/x/ü"), "/x/%C3%BC");
    }

    #[test]
    fn tokens_are_fresh_256_bit_hex() {
        let a = new_token().expect("token");
        let b = new_token().expect("token");
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
