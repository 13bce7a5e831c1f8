//! The client side: fetch a card, negotiate the protocol version, call the methods.
//!
//! [`A2aClient::connect`] reads the card (0.3 or 1.0 shape) and picks its JSON-RPC interface:
//! 1.0 preferred (requests carry `A2A-Version: 1.0`), 0.3 when that is all the agent offers
//! (0.3 method names and shapes, no header; see [`crate::v03`]). When the card's URL cannot be
//! connected to, the URL the caller gave is tried instead.
//!
//! Retries: reads (`GetTask`, `ListTasks`, `CancelTask`, the card) are retried a bounded
//! number of times on transport failures and HTTP 502/503/504. A message send is retried
//! only when the agent provably never received it (the connection could not be opened), so
//! an agent never runs the same message twice; after any other failure the caller resumes
//! with `GetTask` / `SubscribeToTask`. An answer from the agent, including any A2A or
//! JSON-RPC error, is never retried. Every read from the agent is bounded in size and time.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::Eventsource as _;
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::card::{AGENT_CARD_PATH, AgentCard};
use crate::error::A2aError;
use crate::jsonrpc::{RpcResponse, request_body};
use crate::methods::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, ListTasksResponse, SendMessageRequest,
    SendMessageResponse, StreamResponse, SubscribeToTaskRequest, method,
};
use crate::types::Task;
use crate::v03;
use crate::version::{Dialect, VERSION_HEADER};

/// Extra HTTP headers sent with every request to one agent (e.g. `Authorization` for a card
/// that declares a security scheme). Values never appear in `Debug` output or logs.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AgentHeaders(Vec<(String, String)>);

impl AgentHeaders {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a header.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.0.push((name.into(), value.into()));
        self
    }

    /// Adds a header.
    pub fn push(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.0.push((name.into(), value.into()));
    }

    /// The header names (values are secret).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(n, _)| n.as_str())
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn apply(&self, mut rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (n, v) in &self.0 {
            rb = rb.header(n.as_str(), v.as_str());
        }
        rb
    }
}

impl std::fmt::Debug for AgentHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(n, _)| (n, "<redacted>")))
            .finish()
    }
}

/// Client settings.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Timeout of one read call (card, `GetTask`, `ListTasks`, `CancelTask`) and of a
    /// `SendMessage` sent without an explicit budget.
    pub timeout: Duration,
    /// Connect timeout.
    pub connect_timeout: Duration,
    /// How many times a transport failure is retried (0 = no retry).
    pub retries: u32,
    /// Delay before the first retry; doubled each time up to `backoff_max`.
    pub backoff_initial: Duration,
    /// Largest delay between retries.
    pub backoff_max: Duration,
    /// Headers sent with every request (card included).
    pub headers: AgentHeaders,
    /// A stream with no event (or keep-alive) for this long is taken as dropped.
    pub stream_idle_timeout: Duration,
    /// Largest response body read (a stream: all its events together).
    pub max_response_bytes: usize,
    /// Hosts besides the one of the URL given to [`A2aClient::connect`] that a card's
    /// JSON-RPC URL may name (lower case). Any other host is refused: a card cannot send the
    /// requests elsewhere.
    pub card_hosts: Vec<String>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retries: 3,
            backoff_initial: Duration::from_millis(200),
            backoff_max: Duration::from_secs(5),
            headers: AgentHeaders::default(),
            stream_idle_timeout: Duration::from_secs(120),
            max_response_bytes: 256 * 1024 * 1024,
            card_hosts: Vec::new(),
        }
    }
}

/// Where the URL a request went to came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlSource {
    /// Given by the caller (the user).
    User,
    /// Named by the agent card fetched from this URL.
    Card { card_url: String },
    /// Given by the caller, tried after the card's URL could not be connected to.
    UserAfterCard {
        card_url: String,
        card_rpc_url: String,
    },
}

impl std::fmt::Display for UrlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UrlSource::User => f.write_str("the URL given for the agent"),
            UrlSource::Card { card_url } => {
                write!(f, "the URL named by the agent card at {card_url}")
            }
            UrlSource::UserAfterCard {
                card_url,
                card_rpc_url,
            } => write!(
                f,
                "the URL given for the agent, tried because {card_rpc_url} (named by the agent card at {card_url}) could not be connected to"
            ),
        }
    }
}

/// What kind of failure a [`ClientError`] is, for callers that map failures to outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The connection could not be opened: the agent provably did not receive the request.
    Unreachable,
    /// The request was sent but no answer came within the time allowed.
    Timeout,
    /// The connection broke after the request was sent; whether the agent got it is unknown.
    Transport,
    /// A fixed refusal: the agent cannot serve this client (no compatible interface, no card,
    /// unsupported operation or version, unknown method or task). Retrying will not help.
    Incompatible,
    /// The agent refused the credentials (HTTP 401/403).
    Unauthorized,
    /// The agent answered with another A2A or JSON-RPC error, or an unexpected HTTP status.
    Agent,
    /// The agent's answer could not be read.
    InvalidResponse,
    /// The client itself could not be set up.
    Local,
}

/// Why a client call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection could not be opened (after the configured retries): the agent did not
    /// receive the request.
    #[error("could not connect to the A2A agent at {url} ({from}; is it running and reachable?)")]
    Unreachable {
        url: String,
        from: UrlSource,
        #[source]
        source: reqwest::Error,
    },
    /// The connection broke after the request was sent.
    #[error("the connection to the A2A agent at {url} ({from}) broke during {method}")]
    Transport {
        url: String,
        from: UrlSource,
        method: String,
        #[source]
        source: reqwest::Error,
    },
    /// No answer within the time allowed.
    #[error("the A2A agent at {url} ({from}) did not answer {method} within {}s", after.as_secs_f64())]
    Timeout {
        url: String,
        from: UrlSource,
        method: String,
        after: Duration,
    },
    /// The agent answered with an HTTP status that is not a JSON-RPC answer.
    #[error("the A2A agent at {url} answered HTTP {status}: {body}")]
    HttpStatus {
        url: String,
        status: u16,
        body: String,
    },
    /// No agent card where one was expected.
    #[error("no A2A agent card at {url} (HTTP {status}; {from}): is this an A2A agent's base URL?")]
    NoCard {
        url: String,
        status: u16,
        from: UrlSource,
    },
    /// The card is not a valid agent card.
    #[error("the agent card at {url} is not valid: {reason}")]
    InvalidCard { url: String, reason: String },
    /// The agent's answer is not a valid JSON-RPC response or does not fit the A2A schema.
    #[error("the A2A agent at {url} sent an invalid response: {reason}")]
    InvalidResponse { url: String, reason: String },
    /// The agent answered with a JSON-RPC or A2A error.
    #[error("the A2A agent answered with an error: {0}")]
    Rpc(#[from] A2aError),
    /// The card has no interface this client can use.
    #[error(
        "the agent card at {url} offers no JSON-RPC interface with protocol version 1.x or 0.3 (offered: {offered}); this client speaks A2A 1.0 and 0.3 over JSON-RPC"
    )]
    NoJsonRpcInterface { url: String, offered: String },
    /// The HTTP client could not be built.
    #[error("could not build the HTTP client: {0}")]
    Build(#[source] reqwest::Error),
}

impl ClientError {
    /// The A2A error the agent answered with, if that is what this is.
    pub fn as_a2a(&self) -> Option<&A2aError> {
        match self {
            ClientError::Rpc(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the agent did not answer (unreachable, broken connection or timeout), as
    /// opposed to answering.
    pub fn is_transport(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::Unreachable | ErrorKind::Transport | ErrorKind::Timeout
        )
    }

    /// Whether this is a fixed refusal that no retry will change.
    pub fn is_incompatible(&self) -> bool {
        self.kind() == ErrorKind::Incompatible
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ClientError::Unreachable { .. } => ErrorKind::Unreachable,
            ClientError::Transport { .. } => ErrorKind::Transport,
            ClientError::Timeout { .. } => ErrorKind::Timeout,
            ClientError::HttpStatus { status, .. } => match status {
                401 | 403 => ErrorKind::Unauthorized,
                404 | 405 | 415 => ErrorKind::Incompatible,
                _ => ErrorKind::Agent,
            },
            ClientError::NoCard { status, .. } => match status {
                401 | 403 => ErrorKind::Unauthorized,
                _ => ErrorKind::Incompatible,
            },
            ClientError::InvalidCard { .. } | ClientError::NoJsonRpcInterface { .. } => {
                ErrorKind::Incompatible
            }
            ClientError::InvalidResponse { .. } => ErrorKind::InvalidResponse,
            ClientError::Rpc(e) => match e {
                A2aError::MethodNotFound(_)
                | A2aError::TaskNotFound(_)
                | A2aError::PushNotificationNotSupported(_)
                | A2aError::UnsupportedOperation(_)
                | A2aError::ContentTypeNotSupported(_)
                | A2aError::ExtendedAgentCardNotConfigured(_)
                | A2aError::ExtensionSupportRequired(_)
                | A2aError::VersionNotSupported(_)
                | A2aError::InvalidRequest(_)
                | A2aError::InvalidParams(_) => ErrorKind::Incompatible,
                _ => ErrorKind::Agent,
            },
            ClientError::Build(_) => ErrorKind::Local,
        }
    }
}

fn http_client(config: &ClientConfig) -> Result<reqwest::Client, ClientError> {
    // No client-wide timeout: each request sets its own (a stream lives as long as the task).
    reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .build()
        .map_err(ClientError::Build)
}

fn retryable_status(status: u16) -> bool {
    matches!(status, 502..=504)
}

/// How a request may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Idempotent: any transport failure or 502/503/504.
    Transport,
    /// Not idempotent: only when the connection could not be opened.
    ConnectOnly,
}

fn classify(
    url: &str,
    method: &str,
    from: &UrlSource,
    timeout: Duration,
    e: reqwest::Error,
) -> ClientError {
    if e.is_connect() {
        ClientError::Unreachable {
            url: url.to_owned(),
            from: from.clone(),
            source: e,
        }
    } else if e.is_timeout() {
        ClientError::Timeout {
            url: url.to_owned(),
            from: from.clone(),
            method: method.to_owned(),
            after: timeout,
        }
    } else {
        ClientError::Transport {
            url: url.to_owned(),
            from: from.clone(),
            method: method.to_owned(),
            source: e,
        }
    }
}

/// Reads a body up to `max` bytes.
async fn read_capped(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<bytes::Bytes, Result<reqwest::Error, usize>> {
    let mut buf = bytes::BytesMut::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if buf.len() + chunk.len() > max {
                    return Err(Err(max));
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(buf.freeze()),
            Err(e) => return Err(Ok(e)),
        }
    }
}

struct Sent {
    status: u16,
    body: bytes::Bytes,
}

/// Sends a request built by `build`, retrying as `retry` allows. Returns the whole answer.
async fn send_with_retries(
    config: &ClientConfig,
    url: &str,
    method: &str,
    from: &UrlSource,
    timeout: Duration,
    retry: Retry,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<Sent, ClientError> {
    let mut delay = config.backoff_initial;
    let mut attempt = 0u32;
    loop {
        let outcome = match build().timeout(timeout).send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                match read_capped(resp, config.max_response_bytes).await {
                    Ok(body) if retryable_status(status) => Err(ClientError::HttpStatus {
                        url: url.to_owned(),
                        status,
                        body: snippet(&body),
                    }),
                    Ok(body) => {
                        return Ok(Sent { status, body });
                    }
                    Err(Ok(e)) => Err(classify(url, method, from, timeout, e)),
                    Err(Err(max)) => {
                        return Err(ClientError::InvalidResponse {
                            url: url.to_owned(),
                            reason: format!("the {method} answer is larger than {max} bytes"),
                        });
                    }
                }
            }
            Err(e) => Err(classify(url, method, from, timeout, e)),
        };
        let err = match outcome {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        let may_retry = match retry {
            Retry::Transport => true,
            Retry::ConnectOnly => err.kind() == ErrorKind::Unreachable,
        };
        if !may_retry || attempt >= config.retries {
            return Err(err);
        }
        attempt += 1;
        tracing::debug!(%url, method, attempt, error = %err, "A2A transport failure; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(config.backoff_max);
    }
}

fn snippet(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    let mut out: String = s.chars().take(300).collect();
    if s.chars().count() > 300 {
        out.push('…');
    }
    out
}

fn card_url(base_url: &str) -> String {
    format!("{}{}", base_url.trim_end_matches('/'), AGENT_CARD_PATH)
}

async fn fetch_card_with(
    http: &reqwest::Client,
    base_url: &str,
    config: &ClientConfig,
) -> Result<AgentCard, ClientError> {
    let url = card_url(base_url);
    let sent = send_with_retries(
        config,
        &url,
        "the agent card",
        &UrlSource::User,
        config.timeout,
        Retry::Transport,
        || {
            config
                .headers
                .apply(http.get(&url))
                .header(VERSION_HEADER, crate::card::PROTOCOL_VERSION)
        },
    )
    .await?;
    if sent.status != 200 {
        return Err(ClientError::NoCard {
            url,
            status: sent.status,
            from: UrlSource::User,
        });
    }
    let value: Value =
        serde_json::from_slice(&sent.body).map_err(|e| ClientError::InvalidCard {
            url: url.clone(),
            reason: format!("not JSON: {e}"),
        })?;
    if !value.is_object() {
        return Err(ClientError::InvalidCard {
            url,
            reason: "not a JSON object".into(),
        });
    }
    serde_json::from_value(v03::card_from_v03(&value)).map_err(|e| ClientError::InvalidCard {
        url,
        reason: e.to_string(),
    })
}

/// Fetches the agent card from `<base_url>/.well-known/agent-card.json` (a 0.3 card is read
/// into the 1.0 shape).
pub async fn fetch_agent_card(
    base_url: &str,
    config: &ClientConfig,
) -> Result<AgentCard, ClientError> {
    let http = http_client(config)?;
    fetch_card_with(&http, base_url, config).await
}

/// Whether a TCP connection to the URL's host and port can be opened (nothing is sent).
async fn can_connect(url: &str, timeout: Duration) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    let (Some(host), Some(port)) = (parsed.host_str(), parsed.port_or_known_default()) else {
        return false;
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    matches!(
        tokio::time::timeout(
            timeout,
            tokio::net::TcpStream::connect((host.as_str(), port))
        )
        .await,
        Ok(Ok(_))
    )
}

/// Refuses a card whose JSON-RPC URL names a host other than `base_url`'s and `allowed`.
fn check_card_host(
    base_url: &str,
    card_rpc_url: &str,
    card_at: &str,
    allowed: &[String],
) -> Result<(), ClientError> {
    let refuse = |reason: String| ClientError::InvalidCard {
        url: card_at.to_owned(),
        reason,
    };
    let host_of = |url: &str| {
        reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    };
    let Some(given) = host_of(base_url) else {
        return Err(refuse(format!("the agent's URL {base_url} names no host")));
    };
    let Some(named) = host_of(card_rpc_url) else {
        return Err(refuse(format!(
            "its JSON-RPC URL {card_rpc_url:?} is not an absolute http(s) URL with a host"
        )));
    };
    if named == given || allowed.iter().any(|h| h.eq_ignore_ascii_case(&named)) {
        return Ok(());
    }
    Err(refuse(format!(
        "its JSON-RPC URL {card_rpc_url} is on host {named}, not on {given} (the host given for the agent); \
         the task is never sent elsewhere unless allowed with --allow-card-host {named}"
    )))
}

/// `origin(base)` + `path(card_url)`: the user's host with the card's path.
fn user_fallback(base_url: &str, card_rpc_url: &str) -> Option<String> {
    let base = reqwest::Url::parse(base_url).ok()?;
    let rpc = reqwest::Url::parse(card_rpc_url).ok()?;
    let mut out = base.clone();
    out.set_path(rpc.path());
    out.set_query(rpc.query());
    let out = out.to_string();
    (out != card_rpc_url).then_some(out)
}

/// A typed A2A JSON-RPC client (1.0 or 0.3, chosen from the card).
#[derive(Debug, Clone)]
pub struct A2aClient {
    http: reqwest::Client,
    rpc_url: String,
    from: UrlSource,
    dialect: Dialect,
    card: Option<AgentCard>,
    config: ClientConfig,
}

impl A2aClient {
    /// Fetches the card at `base_url` and uses its JSON-RPC interface: 1.x preferred, 0.3
    /// otherwise. A relative interface URL (starting with `/`) is taken relative to
    /// `base_url`; when the card's URL cannot be connected to, the same path on `base_url`'s
    /// host is used instead.
    pub async fn connect(base_url: &str, config: ClientConfig) -> Result<Self, ClientError> {
        let http = http_client(&config)?;
        let card = fetch_card_with(&http, base_url, &config).await?;
        let Some((iface, dialect)) = card.negotiate() else {
            return Err(ClientError::NoJsonRpcInterface {
                url: card_url(base_url),
                offered: card.offered(),
            });
        };
        let card_at = card_url(base_url);
        let (rpc_url, from) = if iface.url.starts_with('/') {
            (
                format!("{}{}", base_url.trim_end_matches('/'), iface.url),
                UrlSource::User,
            )
        } else {
            let card_rpc_url = iface.url.clone();
            check_card_host(base_url, &card_rpc_url, &card_at, &config.card_hosts)?;
            match user_fallback(base_url, &card_rpc_url) {
                Some(fallback) if !can_connect(&card_rpc_url, config.connect_timeout).await => {
                    tracing::info!(card_url = %card_rpc_url, %fallback, "the card's URL cannot be connected to; using the given host");
                    (
                        fallback,
                        UrlSource::UserAfterCard {
                            card_url: card_at,
                            card_rpc_url,
                        },
                    )
                }
                _ => (card_rpc_url, UrlSource::Card { card_url: card_at }),
            }
        };
        Ok(A2aClient {
            http,
            rpc_url,
            from,
            dialect,
            card: Some(card),
            config,
        })
    }

    /// A client for a known JSON-RPC 1.0 endpoint, without fetching a card.
    pub fn new(rpc_url: impl Into<String>, config: ClientConfig) -> Result<Self, ClientError> {
        Ok(A2aClient {
            http: http_client(&config)?,
            rpc_url: rpc_url.into(),
            from: UrlSource::User,
            dialect: Dialect::V1_0,
            card: None,
            config,
        })
    }

    /// Speak `dialect` (for [`A2aClient::new`] clients of 0.3 endpoints).
    pub fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Use this card (e.g. one fetched separately): its streaming capability is honoured.
    pub fn with_card(mut self, card: AgentCard) -> Self {
        self.card = Some(card);
        self
    }

    /// The card fetched by [`A2aClient::connect`].
    pub fn card(&self) -> Option<&AgentCard> {
        self.card.as_ref()
    }

    /// The JSON-RPC endpoint this client calls.
    pub fn rpc_url(&self) -> &str {
        &self.rpc_url
    }

    /// Where the endpoint URL came from.
    pub fn url_source(&self) -> &UrlSource {
        &self.from
    }

    /// The protocol version this client speaks to the agent.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Whether the agent's card says it streams.
    pub fn agent_streams(&self) -> bool {
        self.card.as_ref().is_some_and(AgentCard::streams)
    }

    /// `SendMessage`, answered within the configured `timeout`. Sent once; resent only if the
    /// connection could not be opened.
    pub async fn send_message(
        &self,
        req: &SendMessageRequest,
    ) -> Result<SendMessageResponse, ClientError> {
        self.send_message_within(req, self.config.timeout).await
    }

    /// `SendMessage`, waiting up to `budget` for the answer (an agent may ignore
    /// `returnImmediately` and answer only when done: give it its whole wall-clock budget).
    /// Sent once; resent only if the connection could not be opened. On a timeout or a
    /// broken connection the agent may be working on it: find the task (`ListTasks` by
    /// `contextId`) rather than sending again.
    pub async fn send_message_within(
        &self,
        req: &SendMessageRequest,
        budget: Duration,
    ) -> Result<SendMessageResponse, ClientError> {
        self.call_with(method::SEND_MESSAGE, req, budget, Retry::ConnectOnly)
            .await
    }

    /// `GetTask`.
    pub async fn get_task(&self, req: &GetTaskRequest) -> Result<Task, ClientError> {
        self.call(method::GET_TASK, req).await
    }

    /// `CancelTask`.
    pub async fn cancel_task(&self, req: &CancelTaskRequest) -> Result<Task, ClientError> {
        self.call(method::CANCEL_TASK, req).await
    }

    /// `ListTasks`.
    pub async fn list_tasks(
        &self,
        req: &ListTasksRequest,
    ) -> Result<ListTasksResponse, ClientError> {
        self.call(method::LIST_TASKS, req).await
    }

    /// `SendStreamingMessage`: the events as they come (the first is the Task). Sent once;
    /// resent only if the connection could not be opened.
    pub async fn send_streaming_message(
        &self,
        req: &SendMessageRequest,
    ) -> Result<TaskEvents, ClientError> {
        self.send_streaming_message_within(req, self.config.timeout)
            .await
    }

    /// `SendStreamingMessage`, waiting up to `budget` for the stream to start (an agent may
    /// work before it answers at all). Sent once; resent only if the connection could not be
    /// opened.
    pub async fn send_streaming_message_within(
        &self,
        req: &SendMessageRequest,
        budget: Duration,
    ) -> Result<TaskEvents, ClientError> {
        self.open_stream(
            method::SEND_STREAMING_MESSAGE,
            req,
            Retry::ConnectOnly,
            budget,
        )
        .await
    }

    /// `SubscribeToTask` (0.3: `tasks/resubscribe`): the task's events from now on.
    pub async fn subscribe_to_task(
        &self,
        req: &SubscribeToTaskRequest,
    ) -> Result<TaskEvents, ClientError> {
        self.open_stream(
            method::SUBSCRIBE_TO_TASK,
            req,
            Retry::Transport,
            self.config.timeout,
        )
        .await
    }

    /// Calls any (idempotent) method with any params; used by the typed methods. `method`
    /// is the 1.0 name; for a 0.3 agent it is translated.
    pub async fn call<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, ClientError> {
        self.call_with(method, params, self.config.timeout, Retry::Transport)
            .await
    }

    /// The method name and body to send, in the agent's dialect.
    fn encode<P: Serialize>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<(String, Vec<u8>, String), ClientError> {
        let url = &self.rpc_url;
        let params = serde_json::to_value(params).map_err(|e| ClientError::InvalidResponse {
            url: url.clone(),
            reason: format!("request params do not serialize: {e}"),
        })?;
        let (wire_method, params) = match self.dialect {
            Dialect::V1_0 => (method.to_owned(), params),
            Dialect::V0_3 => {
                let (m, p) = v03::request_to_v03(method, &params);
                (m.to_owned(), p)
            }
        };
        let id = uuid::Uuid::new_v4().to_string();
        let body = serde_json::to_vec(&request_body(&id, &wire_method, params)).map_err(|e| {
            ClientError::InvalidResponse {
                url: url.clone(),
                reason: format!("request does not serialize: {e}"),
            }
        })?;
        Ok((id, body, wire_method))
    }

    fn post(&self, body: &[u8], accept: &str) -> reqwest::RequestBuilder {
        let mut rb = self
            .http
            .post(&self.rpc_url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, accept)
            .body(body.to_vec());
        if self.dialect == Dialect::V1_0 {
            rb = rb.header(VERSION_HEADER, self.dialect.header_value());
        }
        self.config.headers.apply(rb)
    }

    /// Reads one JSON-RPC response; `Ok(result)` in 1.0 shape.
    fn read_response(
        &self,
        method: &str,
        id: &str,
        status: u16,
        bytes: &[u8],
    ) -> Result<Value, ClientError> {
        let url = &self.rpc_url;
        let resp: RpcResponse = match serde_json::from_slice(bytes) {
            Ok(r) => r,
            Err(e) if status == 200 => {
                return Err(ClientError::InvalidResponse {
                    url: url.clone(),
                    reason: format!("{method} response is not a JSON-RPC response: {e}"),
                });
            }
            Err(_) => {
                return Err(ClientError::HttpStatus {
                    url: url.clone(),
                    status,
                    body: snippet(bytes),
                });
            }
        };
        if resp.id != Value::String(id.to_owned()) && !resp.id.is_null() {
            tracing::warn!(%url, sent = %id, got = %resp.id, "JSON-RPC response id does not match the request");
        }
        if let Some(err) = resp.error {
            return Err(ClientError::Rpc(A2aError::from(&err)));
        }
        let Some(result) = resp.result else {
            return Err(ClientError::InvalidResponse {
                url: url.clone(),
                reason: format!(
                    "{method} response has neither `result` nor `error` (HTTP {status})"
                ),
            });
        };
        Ok(match self.dialect {
            Dialect::V1_0 => result,
            Dialect::V0_3 => v03::result_from_v03(method, &result),
        })
    }

    async fn call_with<P: Serialize, R: DeserializeOwned>(
        &self,
        method: &str,
        params: &P,
        timeout: Duration,
        retry: Retry,
    ) -> Result<R, ClientError> {
        let (id, body, wire_method) = self.encode(method, params)?;
        let sent = send_with_retries(
            &self.config,
            &self.rpc_url,
            &wire_method,
            &self.from,
            timeout,
            retry,
            || self.post(&body, "application/json"),
        )
        .await?;
        let result = self.read_response(method, &id, sent.status, &sent.body)?;
        serde_json::from_value(result).map_err(|e| ClientError::InvalidResponse {
            url: self.rpc_url.clone(),
            reason: format!("{method} result does not fit the A2A schema: {e}"),
        })
    }

    async fn open_stream<P: Serialize>(
        &self,
        method: &'static str,
        params: &P,
        retry: Retry,
        head_timeout: Duration,
    ) -> Result<TaskEvents, ClientError> {
        let (id, body, wire_method) = self.encode(method, params)?;
        let url = self.rpc_url.clone();
        let mut delay = self.config.backoff_initial;
        let mut attempt = 0u32;
        let resp = loop {
            // Only the wait for the response head is timed here; the events have their own
            // idle timeout.
            let sent =
                tokio::time::timeout(head_timeout, self.post(&body, "text/event-stream").send())
                    .await;
            let err = match sent {
                Ok(Ok(resp)) => break resp,
                Ok(Err(e)) => classify(&url, &wire_method, &self.from, head_timeout, e),
                Err(_) => ClientError::Timeout {
                    url: url.clone(),
                    from: self.from.clone(),
                    method: wire_method.clone(),
                    after: head_timeout,
                },
            };
            let may_retry = match retry {
                Retry::Transport => true,
                Retry::ConnectOnly => err.kind() == ErrorKind::Unreachable,
            };
            if !may_retry || attempt >= self.config.retries {
                return Err(err);
            }
            attempt += 1;
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.config.backoff_max);
        };
        let status = resp.status().as_u16();
        let is_sse = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.starts_with("text/event-stream"));
        if !is_sse {
            // An error (or a non-streaming answer) as one JSON body.
            let bytes = read_capped(resp, self.config.max_response_bytes)
                .await
                .map_err(|e| match e {
                    Ok(e) => classify(&url, &wire_method, &self.from, self.config.timeout, e),
                    Err(max) => ClientError::InvalidResponse {
                        url: url.clone(),
                        reason: format!("the {method} answer is larger than {max} bytes"),
                    },
                })?;
            let result = self.read_response(method, &id, status, &bytes)?;
            // Some agents answer a streaming call with one result: treat it as one event.
            let event = stream_event(method, result, &url)?;
            return Ok(TaskEvents::once(event, url));
        }
        let this = self.clone();
        let max = self.config.max_response_bytes;
        let idle = self.config.stream_idle_timeout;
        // Bytes (events or keep-alive comments) must keep coming: a stream silent for
        // `idle` is taken as dropped. The total is capped.
        let chunks = futures::stream::unfold(
            Some((Box::pin(resp.bytes_stream()), 0usize)),
            move |state| async move {
                let (mut s, seen) = state?;
                match tokio::time::timeout(idle, s.next()).await {
                    Ok(Some(Ok(c))) if seen + c.len() > max => {
                        Some((Err(StreamFault::TooLarge(max)), None))
                    }
                    Ok(Some(Ok(c))) => {
                        let seen = seen + c.len();
                        Some((Ok(c), Some((s, seen))))
                    }
                    Ok(Some(Err(e))) => Some((Err(StreamFault::Http(e)), None)),
                    Ok(None) => None,
                    Err(_) => Some((Err(StreamFault::Idle(idle)), None)),
                }
            },
        );
        let events = chunks.eventsource().map(move |ev| match ev {
            Ok(ev) => {
                // read_response converts a 0.3 event to 1.0.
                let value = this.read_response(method, &id, 200, ev.data.as_bytes())?;
                serde_json::from_value::<StreamResponse>(value).map_err(|e| {
                    ClientError::InvalidResponse {
                        url: this.rpc_url.clone(),
                        reason: format!("{method} event does not fit the A2A schema: {e}"),
                    }
                })
            }
            Err(eventsource_stream::EventStreamError::Transport(StreamFault::Idle(after))) => {
                Err(ClientError::Timeout {
                    url: this.rpc_url.clone(),
                    from: this.from.clone(),
                    method: format!("{method} (stream silent)"),
                    after,
                })
            }
            Err(e) => Err(ClientError::InvalidResponse {
                url: this.rpc_url.clone(),
                reason: format!("the event stream broke: {e}"),
            }),
        });
        Ok(TaskEvents {
            inner: Box::pin(events),
            url,
            done: false,
        })
    }
}

#[derive(Debug)]
enum StreamFault {
    Http(reqwest::Error),
    TooLarge(usize),
    Idle(Duration),
}

impl std::fmt::Display for StreamFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamFault::Http(e) => write!(f, "{e}"),
            StreamFault::TooLarge(max) => write!(f, "more than {max} bytes of events"),
            StreamFault::Idle(d) => write!(f, "silent for {}s", d.as_secs()),
        }
    }
}

impl std::error::Error for StreamFault {}

fn stream_event(method: &str, result: Value, url: &str) -> Result<StreamResponse, ClientError> {
    // read_response converted it already; a plain SendMessage-style `{"task"}` fits too.
    serde_json::from_value::<StreamResponse>(result).map_err(|e| ClientError::InvalidResponse {
        url: url.to_owned(),
        reason: format!("{method} answer does not fit the A2A schema: {e}"),
    })
}

/// The events of a stream. `next` yields `None` when the agent closes the stream; a stream
/// silent (not even a keep-alive) for longer than the idle timeout yields a
/// [`ClientError::Timeout`] and ends.
pub struct TaskEvents {
    inner: Pin<Box<dyn Stream<Item = Result<StreamResponse, ClientError>> + Send>>,
    url: String,
    done: bool,
}

impl std::fmt::Debug for TaskEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskEvents")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl TaskEvents {
    fn once(event: StreamResponse, url: String) -> Self {
        TaskEvents {
            inner: Box::pin(futures::stream::once(async move { Ok(event) })),
            url,
            done: false,
        }
    }

    /// The next event; `None` at the end of the stream (after an error, too).
    pub async fn next(&mut self) -> Option<Result<StreamResponse, ClientError>> {
        if self.done {
            return None;
        }
        let item = self.inner.next().await;
        if !matches!(item, Some(Ok(_))) {
            self.done = true;
        }
        item
    }
}
