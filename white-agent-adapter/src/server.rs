//! The A2A side: [`Adapter`] implements `a2a_protocol::A2aHandler` over the runner. One task
//! runs at a time (one trial per container); finished tasks stay readable. `SendMessage`
//! returns at once with `returnImmediately` (else it waits for the end); `GetTask` never waits
//! on a scan or the agent; `CancelTask` kills the process tree and answers once the task is
//! `CANCELED` (or after 10 s with the task as it is then).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_protocol::{
    A2aError, A2aHandler, AgentCard, AgentSkill, Artifact, CancelTaskRequest, EventStream,
    GetTaskRequest, ListTasksRequest, ListTasksResponse, Message, Metadata, SendMessageRequest,
    SendMessageResponse, ServerConfig, StreamResponse, SubscribeToTaskRequest, Task,
    TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::instruction;
use crate::runner::{self, Outcome, Progress, RunConfig, Verdict};

/// A task and its live parts.
struct Slot {
    task: Task,
    started: Instant,
    progress: Arc<Mutex<Progress>>,
    cancel: watch::Sender<bool>,
    done: watch::Receiver<bool>,
    /// Token of this task's files served by URL (empty: none).
    served_token: String,
}

/// The A2A handler.
#[derive(Clone)]
pub struct Adapter {
    inner: Arc<Inner>,
}

struct Inner {
    config: Arc<RunConfig>,
    tasks: Mutex<BTreeMap<String, Slot>>,
    order: Mutex<Vec<String>>,
    /// Files served by URL: per-task token → workspace-relative path → size when listed.
    served: Mutex<BTreeMap<String, BTreeMap<String, u64>>>,
    /// Origin (`http://host:port`) file URLs are built on: the fixed public URL's, else the
    /// `Host` of the latest request.
    origin: Mutex<String>,
}

/// Where files over the inline caps are served: `GET /files/<token>/<path>`.
pub const FILES_PREFIX: &str = "/files/";

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Adapter {
    pub fn new(config: RunConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                config: Arc::new(config),
                tasks: Mutex::new(BTreeMap::new()),
                order: Mutex::new(Vec::new()),
                served: Mutex::new(BTreeMap::new()),
                origin: Mutex::new("http://127.0.0.1".to_owned()),
            }),
        }
    }
}

impl Adapter {
    /// Accepts a message: a new task, running. Returns its id and its `done` signal.
    fn start_task(
        &self,
        req: SendMessageRequest,
    ) -> Result<(String, watch::Receiver<bool>), A2aError> {
        if let Some(task_id) = &req.message.task_id
            && lock(&self.inner.tasks).contains_key(task_id)
        {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {task_id:?} already exists; this agent runs one instruction per task, send a new message without taskId"
            )));
        }
        let input = instruction::read_message(&req.message)
            .map_err(|err| A2aError::InvalidParams(err.to_string()))?;
        let id = uuid::Uuid::new_v4().to_string();
        let context_id = req
            .message
            .context_id
            .clone()
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let (done_tx, done_rx) = watch::channel(false);
        let progress = Arc::new(Mutex::new(Progress {
            phase: "starting".to_owned(),
            ..Progress::default()
        }));
        {
            let mut tasks = lock(&self.inner.tasks);
            if let Some(busy) = tasks
                .values()
                .find(|slot| !slot.task.status.state.is_terminal())
            {
                return Err(A2aError::UnsupportedOperation(format!(
                    "task {} is still running; this agent runs one task at a time (cancel it or wait)",
                    busy.task.id
                )));
            }
            let mut task = Task::new(id.clone(), context_id.clone(), TaskState::Working);
            let mut message = req.message.clone();
            message.task_id = Some(id.clone());
            message.context_id = Some(context_id.clone());
            task.history.push(message);
            if let Some(green_id) = &input.task_id {
                let mut metadata = Metadata::new();
                metadata.insert("task_id".into(), json!(green_id));
                task.metadata = Some(metadata);
            }
            tasks.insert(
                id.clone(),
                Slot {
                    task,
                    started: Instant::now(),
                    progress: Arc::clone(&progress),
                    cancel: cancel_tx,
                    done: done_rx.clone(),
                    served_token: String::new(),
                },
            );
            lock(&self.inner.order).push(id.clone());
        }
        tracing::info!(task = %id, "task accepted");
        let inner = Arc::clone(&self.inner);
        let run_id = id.clone();
        tokio::spawn(async move {
            let outcome = runner::run(Arc::clone(&inner.config), input, progress, cancel_rx).await;
            inner.finish(&run_id, outcome);
            let _ = done_tx.send(true);
        });
        Ok((id, done_rx))
    }
}

/// How often a stream reports progress while the agent works (also its keep-alive).
const STREAM_TICK: Duration = Duration::from_secs(2);

/// The events of task `id`: the Task, a status update whenever the progress text changes
/// (checked every [`STREAM_TICK`]), and at the end one artifact update per artifact and the
/// final status.
fn events(inner: Arc<Inner>, id: String) -> Result<EventStream, A2aError> {
    let (first, mut done) = {
        let tasks = lock(&inner.tasks);
        let slot = tasks
            .get(&id)
            .ok_or_else(|| A2aError::TaskNotFound(format!("no task {id:?} on this agent")))?;
        (Inner::view(slot, &inner.origin, None), slot.done.clone())
    };
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        let status_text = |t: &Task| t.status.message.as_ref().map(Message::text);
        let mut last = status_text(&first);
        let (task_id, context_id) = (first.id.clone(), first.context_id.clone());
        if tx.send(StreamResponse::Task(first)).await.is_err() {
            return;
        }
        let status = |status: TaskStatus| {
            StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: task_id.clone(),
                context_id: context_id.clone(),
                status,
                metadata: None,
            })
        };
        loop {
            let waited = tokio::time::timeout(STREAM_TICK, done.wait_for(|d| *d))
                .await
                .map(|r| r.is_ok());
            if waited == Ok(false) {
                // The runner is gone without finishing: keep reporting what the task says.
                tokio::time::sleep(STREAM_TICK).await;
            }
            let Ok(task) = inner.get(&id, Some(0)) else {
                return;
            };
            if task.status.state.is_terminal() {
                for artifact in task.artifacts {
                    let ev = StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                        task_id: task_id.clone(),
                        context_id: context_id.clone(),
                        artifact,
                        append: false,
                        last_chunk: true,
                        metadata: None,
                    });
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
                let _ = tx.send(status(task.status)).await;
                return;
            }
            let text = status_text(&task);
            if text != last {
                last = text;
                if tx.send(status(task.status)).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(a2a_protocol::event_stream(rx))
}

impl Inner {
    /// The task as a client sees it now (with a live progress message while working).
    fn view(slot: &Slot, origin: &Mutex<String>, history_length: Option<i32>) -> Task {
        let mut task = slot.task.clone();
        if task.status.state == TaskState::Working {
            let progress = lock(&slot.progress).clone();
            let text = progress.message(slot.started.elapsed());
            task.status = TaskStatus::new(TaskState::Working).with_message(
                Message::agent_text(text)
                    .with_task_id(task.id.clone())
                    .with_context_id(task.context_id.clone()),
            );
        }
        if !slot.served_token.is_empty() {
            let origin = lock(origin).clone();
            for artifact in &mut task.artifacts {
                for part in &mut artifact.parts {
                    if let a2a_protocol::PartContent::Url(url) = &mut part.content
                        && url.starts_with(FILES_PREFIX)
                    {
                        *url = format!("{origin}{url}");
                    }
                }
            }
        }
        if let Some(n) = history_length {
            let keep = usize::try_from(n.max(0)).unwrap_or(0);
            let len = task.history.len();
            task.history.drain(..len.saturating_sub(keep));
        }
        task
    }

    fn get(&self, id: &str, history_length: Option<i32>) -> Result<Task, A2aError> {
        let tasks = lock(&self.tasks);
        let slot = tasks
            .get(id)
            .ok_or_else(|| A2aError::TaskNotFound(format!("no task {id:?} on this agent")))?;
        Ok(Self::view(slot, &self.origin, history_length))
    }

    fn finish(&self, id: &str, mut outcome: Outcome) {
        let mut tasks = lock(&self.tasks);
        let Some(slot) = tasks.get_mut(id) else {
            return;
        };
        let state = match outcome.verdict {
            Verdict::Completed => TaskState::Completed,
            Verdict::Failed => TaskState::Failed,
            Verdict::Canceled => TaskState::Canceled,
        };
        let text = outcome
            .reason
            .clone()
            .unwrap_or_else(|| "completed".to_owned());
        slot.task.status = TaskStatus::new(state).with_message(
            Message::agent_text(text)
                .with_task_id(slot.task.id.clone())
                .with_context_id(slot.task.context_id.clone()),
        );
        let token = uuid::Uuid::new_v4().simple().to_string();
        if let Some(collection) = &outcome.collection
            && !collection.served.is_empty()
        {
            let files = collection
                .served
                .iter()
                .map(|f| (f.path.clone(), f.size))
                .collect();
            lock(&self.served).insert(token.clone(), files);
            slot.served_token.clone_from(&token);
        }
        slot.task.artifacts = artifacts(&mut outcome, self.config.driver.kind.name(), &token);
        let mut metadata = Metadata::new();
        metadata.insert(
            "adapter".to_owned(),
            serde_json::to_value(&outcome.report).unwrap_or(Value::Null),
        );
        if let Some(reason) = &outcome.reason {
            metadata.insert("reason".to_owned(), Value::String(reason.clone()));
        }
        slot.task.metadata = Some(metadata);
    }
}

/// Percent-encodes each `/`-separated segment of a relative path for a URL.
pub fn url_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        for byte in segment.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(byte));
            } else {
                out.push_str(&format!("%{byte:02X}"));
            }
        }
    }
    out
}

/// The task's artifacts: one per returned file (the bytes are moved out of `outcome`), one
/// per file served by URL (a `url` part `/files/<token>/<path>`, made absolute when the task
/// is read; metadata `size`), then `answer`, `trajectory` and `usage`.
pub fn artifacts(outcome: &mut Outcome, agent_name: &str, token: &str) -> Vec<Artifact> {
    let mut out = Vec::new();
    if let Some(collection) = &mut outcome.collection {
        for file in std::mem::take(&mut collection.served) {
            let url = format!("{FILES_PREFIX}{token}/{}", url_path(&file.path));
            let mut part = a2a_protocol::Part::url(
                url,
                Some(file.path.clone()),
                Some(file.media_type.clone()),
            );
            let mut part_meta = Metadata::new();
            part_meta.insert("size".into(), json!(file.size));
            part.metadata = Some(part_meta);
            let mut artifact = Artifact::new(Some(file.path), vec![part]);
            let mut metadata = Metadata::new();
            metadata.insert("kind".into(), json!("file"));
            metadata.insert(
                "change".into(),
                serde_json::to_value(file.kind).unwrap_or(Value::Null),
            );
            metadata.insert("size".into(), json!(file.size));
            artifact.metadata = Some(metadata);
            out.push(artifact);
        }
        for file in std::mem::take(&mut collection.files) {
            let mut artifact = Artifact::file(file.path, file.bytes, file.media_type);
            let mut metadata = Metadata::new();
            metadata.insert("kind".into(), json!("file"));
            metadata.insert(
                "change".into(),
                serde_json::to_value(file.kind).unwrap_or(Value::Null),
            );
            artifact.metadata = Some(metadata);
            out.push(artifact);
        }
    }
    let kind = |name: &str| {
        let mut metadata = Metadata::new();
        metadata.insert("kind".into(), json!(name));
        Some(metadata)
    };
    let mut answer = Artifact::text("answer", outcome.state.answer.clone().unwrap_or_default());
    answer.metadata = kind("answer");
    out.push(answer);
    let trajectory =
        serde_json::to_value(outcome.state.trajectory(agent_name)).unwrap_or(Value::Null);
    let mut trajectory = Artifact::data("trajectory", trajectory);
    trajectory.metadata = kind("trajectory");
    out.push(trajectory);
    let usage = &outcome.state.usage;
    let report = crate::contract::UsageReport {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        cache_read_tokens: usage.cache_read_tokens,
        cache_write_tokens: usage.cache_write_tokens,
        requests: usage.turns,
        cost_usd: usage.cost_usd,
        duration_ms: outcome.report.duration_ms,
    };
    let mut usage = Artifact::data(crate::contract::USAGE_ARTIFACT, report.to_value());
    usage.metadata = kind("usage");
    out.push(usage);
    out
}

#[a2a_protocol::async_trait]
impl A2aHandler for Adapter {
    async fn send_message(&self, req: SendMessageRequest) -> Result<SendMessageResponse, A2aError> {
        let immediate = req.wants_immediate_return();
        let (id, done) = self.start_task(req)?;
        if !immediate {
            let mut done = done;
            let _ = done.wait_for(|done| *done).await;
        }
        Ok(SendMessageResponse::Task(self.inner.get(&id, None)?))
    }

    async fn send_streaming_message(
        &self,
        req: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        let (id, _) = self.start_task(req)?;
        events(Arc::clone(&self.inner), id)
    }

    async fn subscribe_to_task(
        &self,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        let task = self.inner.get(&req.id, Some(0))?;
        if task.status.state.is_terminal() {
            return Err(A2aError::UnsupportedOperation(format!(
                "task {} is already {}; read it with GetTask",
                req.id, task.status.state
            )));
        }
        events(Arc::clone(&self.inner), req.id)
    }

    async fn get_task(&self, req: GetTaskRequest) -> Result<Task, A2aError> {
        self.inner.get(&req.id, req.history_length)
    }

    async fn cancel_task(&self, req: CancelTaskRequest) -> Result<Task, A2aError> {
        let mut done = {
            let tasks = lock(&self.inner.tasks);
            let slot = tasks.get(&req.id).ok_or_else(|| {
                A2aError::TaskNotFound(format!("no task {:?} on this agent", req.id))
            })?;
            if slot.task.status.state.is_terminal() {
                return Err(A2aError::TaskNotCancelable(format!(
                    "task {} is already {}",
                    req.id, slot.task.status.state
                )));
            }
            let _ = slot.cancel.send(true);
            slot.done.clone()
        };
        let _ = tokio::time::timeout(Duration::from_secs(10), done.wait_for(|done| *done)).await;
        self.inner.get(&req.id, None)
    }

    async fn list_tasks(&self, req: ListTasksRequest) -> Result<ListTasksResponse, A2aError> {
        let order = lock(&self.inner.order).clone();
        let tasks = lock(&self.inner.tasks);
        let include_artifacts = req.include_artifacts.unwrap_or(false);
        let out: Vec<Task> = order
            .iter()
            .rev()
            .filter_map(|id| tasks.get(id))
            .filter(|slot| req.admits(&slot.task))
            .map(|slot| {
                let mut task = Inner::view(slot, &self.inner.origin, req.history_length);
                if !include_artifacts {
                    task.artifacts.clear();
                }
                task
            })
            .collect();
        ListTasksResponse::page(out, &req)
    }
}

/// The agent card: one skill (solve a coding task in the workspace), text and files in and out.
pub fn card(driver: &str, public_url: &str) -> AgentCard {
    let mut card = AgentCard::new(
        format!("white-agent-adapter ({driver})"),
        format!(
            "Runs the `{driver}` coding agent on an instruction in its workspace and returns every \
             created or changed file, the answer, an ATIF trajectory and the token usage."
        ),
        env!("CARGO_PKG_VERSION"),
        public_url,
    );
    card.capabilities.streaming = Some(true);
    card.default_input_modes = vec!["text/plain".to_owned(), "application/json".to_owned()];
    card.default_output_modes = vec![
        "text/plain".to_owned(),
        "application/json".to_owned(),
        "application/octet-stream".to_owned(),
    ];
    card.with_skill(AgentSkill {
        id: "solve-task".to_owned(),
        name: "Solve a coding task".to_owned(),
        description:
            "Works on the instruction in the workspace; outputs are returned as artifacts."
                .to_owned(),
        tags: vec!["coding".to_owned(), driver.to_owned()],
        examples: Vec::new(),
        input_modes: Vec::new(),
        output_modes: Vec::new(),
        security_requirements: Vec::new(),
    })
}

/// Where the card says the JSON-RPC endpoint is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicUrl {
    /// Always this URL (`--public-url`).
    Fixed(String),
    /// `http://<Host header>/`: whatever address the client used (a container IP, a published
    /// port, 127.0.0.1), falling back to the given URL when the request has no `Host`.
    FromHost { fallback: String },
}

/// The origin (`scheme://authority`) of an absolute URL.
fn origin_of(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority = rest.split('/').next().unwrap_or(rest);
            format!("{scheme}://{authority}")
        }
        None => url.trim_end_matches('/').to_owned(),
    }
}

/// `GET /files/<token>/<path>`: streams a file this adapter listed as served by URL for the
/// task with that token; anything else (unknown token, unlisted path, a path that became a
/// symlink or left the workspace) is 404.
async fn serve_file(inner: Arc<Inner>, token: String, path: String) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let not_found = || (StatusCode::NOT_FOUND, "no such file\n").into_response();
    let listed = lock(&inner.served)
        .get(&token)
        .is_some_and(|files| files.contains_key(&path));
    if !listed {
        return not_found();
    }
    let root = inner.config.driver.workspace.clone();
    let Ok(full) = crate::workspace::safe_join(&root, &path) else {
        return not_found();
    };
    let checked = tokio::task::spawn_blocking(move || {
        let meta = std::fs::symlink_metadata(&full).ok()?;
        let canonical = std::fs::canonicalize(&full).ok()?;
        let root = std::fs::canonicalize(&root).ok()?;
        (meta.is_file() && canonical.starts_with(&root)).then_some((canonical, meta.len()))
    })
    .await
    .ok()
    .flatten();
    let Some((full, len)) = checked else {
        return not_found();
    };
    // Opened without following a link or blocking on a FIFO swapped in since the check.
    let Ok(Ok(file)) =
        tokio::task::spawn_blocking(move || crate::workspace::open_regular(&full)).await
    else {
        return not_found();
    };
    let file = tokio::fs::File::from_std(file);
    let stream = tokio_util::io::ReaderStream::with_capacity(
        tokio::io::AsyncReadExt::take(file, len),
        256 * 1024,
    );
    (
        [
            (header::CONTENT_TYPE, crate::workspace::media_type(&path)),
            (header::CONTENT_LENGTH, len.to_string()),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}

/// The adapter's HTTP app: the A2A router, with the card's URL filled in per request when
/// [`PublicUrl::FromHost`], and `GET /files/<token>/<path>` for files over the inline caps.
pub fn app(adapter: Adapter, card: AgentCard, public_url: PublicUrl) -> axum::Router {
    let inner = Arc::clone(&adapter.inner);
    let (PublicUrl::Fixed(url) | PublicUrl::FromHost { fallback: url }) = &public_url;
    *lock(&inner.origin) = origin_of(url);
    let a2a = a2a_protocol::router(Arc::new(adapter), card.clone(), ServerConfig::default());
    let files_inner = Arc::clone(&inner);
    let files = axum::Router::new().route(
        "/files/{token}/{*path}",
        axum::routing::get(
            move |axum::extract::Path((token, path)): axum::extract::Path<(String, String)>| {
                serve_file(Arc::clone(&files_inner), token, path)
            },
        ),
    );
    match public_url {
        PublicUrl::Fixed(_) => files.fallback_service(a2a),
        PublicUrl::FromHost { fallback } => {
            let card = Arc::new(card);
            files
                .route(
                    a2a_protocol::AGENT_CARD_PATH,
                    axum::routing::get(move |headers: axum::http::HeaderMap| {
                        let card = Arc::clone(&card);
                        let fallback = fallback.clone();
                        async move {
                            let url = host_of(&headers)
                                .map_or(fallback, |host| format!("http://{host}/"));
                            let mut card = (*card).clone();
                            for interface in &mut card.supported_interfaces {
                                interface.url.clone_from(&url);
                            }
                            axum::Json(a2a_protocol::card_json(&card, None))
                        }
                    }),
                )
                .fallback_service(a2a)
                .layer(axum::middleware::from_fn(
                    move |request: axum::extract::Request, next: axum::middleware::Next| {
                        // File URLs in tasks use the address the client reached us at.
                        if let Some(host) = host_of(request.headers()) {
                            *lock(&inner.origin) = format!("http://{host}");
                        }
                        next.run(request)
                    },
                ))
        }
    }
}

fn host_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(axum::http::header::HOST)
        .and_then(|host| host.to_str().ok())
        .filter(|host| !host.is_empty() && !host.contains('/'))
        .map(str::to_owned)
}

/// Serves `adapter` on `listener` until `shutdown` resolves.
pub async fn serve(
    adapter: Adapter,
    card: AgentCard,
    public_url: PublicUrl,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(adapter, card, public_url))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Binds `addr` (e.g. `0.0.0.0:8700`).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}
