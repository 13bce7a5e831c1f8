//! What the client promises: a message reaches the agent once (a slow agent is waited for,
//! never re-sent; a send is repeated only when the connection could not be opened), failures
//! are told apart (timeout, unreachable, incompatible) and name where the URL came from, the
//! card's URL falls back to the given one, 0.3-only agents are spoken to in 0.3, headers reach
//! the agent but never the logs, and a dropped stream is resumed by polling.

#![allow(clippy::unwrap_used)]

mod common;

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use a2a_protocol::exchange::{self, RunEnd, RunOptions};
use a2a_protocol::{
    A2aClient, A2aError, A2aHandler, AgentCard, AgentHeaders, Artifact, CancelTaskRequest,
    ClientConfig, ClientError, Dialect, ErrorKind, EventStream, GetTaskRequest, ListTasksRequest,
    ListTasksResponse, Message, SendMessageRequest, SendMessageResponse, ServerConfig,
    StreamResponse, SubscribeToTaskRequest, Task, TaskState, UrlSource, async_trait, router,
};
use serde_json::json;

/// A configurable agent: how long `SendMessage` blocks (ignoring `returnImmediately`), whether
/// it refuses `SendMessage` (streaming only), whether its stream drops after the Task.
#[derive(Default)]
struct Scripted {
    sends: AtomicUsize,
    block: Duration,
    streaming_only: bool,
    drop_stream: bool,
    /// Start the stream with a status update instead of the Task (not per spec, seen in
    /// the wild).
    update_first: bool,
    tasks: Mutex<Vec<Task>>,
    started: Mutex<Option<Instant>>,
}

impl Scripted {
    fn finished_task(id: &str) -> Task {
        let mut t = Task::new(id, "ctx", TaskState::Completed);
        t.artifacts
            .push(Artifact::file("out.csv", common::CSV, "text/csv"));
        t
    }

    /// The task: WORKING for 600 ms after the send, COMPLETED after.
    fn current(&self, id: &str) -> Result<Task, A2aError> {
        if !self.tasks.lock().unwrap().iter().any(|t| t.id == id) {
            return Err(A2aError::TaskNotFound(id.to_owned()));
        }
        let started = self.started.lock().unwrap().unwrap();
        Ok(if started.elapsed() > Duration::from_millis(600) {
            Self::finished_task(id)
        } else {
            Task::new(id, "ctx", TaskState::Working)
        })
    }
}

#[async_trait]
impl A2aHandler for Scripted {
    async fn send_message(
        &self,
        _req: SendMessageRequest,
    ) -> Result<SendMessageResponse, A2aError> {
        if self.streaming_only {
            return Err(A2aError::UnsupportedOperation(
                "this agent only serves SendStreamingMessage".into(),
            ));
        }
        self.sends.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.block).await;
        Ok(SendMessageResponse::Task(Self::finished_task("t-blocking")))
    }
    async fn get_task(&self, req: GetTaskRequest) -> Result<Task, A2aError> {
        self.current(&req.id)
    }
    async fn cancel_task(&self, req: CancelTaskRequest) -> Result<Task, A2aError> {
        Err(A2aError::TaskNotFound(req.id))
    }
    async fn list_tasks(&self, _req: ListTasksRequest) -> Result<ListTasksResponse, A2aError> {
        Ok(ListTasksResponse::default())
    }
    async fn send_streaming_message(
        &self,
        _req: SendMessageRequest,
    ) -> Result<EventStream, A2aError> {
        self.sends.fetch_add(1, Ordering::SeqCst);
        *self.started.lock().unwrap() = Some(Instant::now());
        let task = Task::new("t-stream", "ctx", TaskState::Working);
        self.tasks.lock().unwrap().push(task.clone());
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let drop_stream = self.drop_stream;
        let first = if self.update_first {
            StreamResponse::StatusUpdate(a2a_protocol::TaskStatusUpdateEvent {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                status: task.status.clone(),
                metadata: None,
            })
        } else {
            StreamResponse::Task(task)
        };
        tokio::spawn(async move {
            let _ = tx.send(first).await;
            if drop_stream {
                return;
            }
            tokio::time::sleep(Duration::from_millis(700)).await;
            let done = Scripted::finished_task("t-stream");
            let _ = tx.send(StreamResponse::Task(done)).await;
        });
        Ok(a2a_protocol::event_stream(rx))
    }
    async fn subscribe_to_task(
        &self,
        req: SubscribeToTaskRequest,
    ) -> Result<EventStream, A2aError> {
        Err(A2aError::UnsupportedOperation(format!(
            "no resubscription to {} here",
            req.id
        )))
    }
}

async fn serve_with(
    agent: Arc<Scripted>,
    card: AgentCard,
) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = router(agent, card, ServerConfig::default());
    let h = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (base, h)
}

fn card(streaming: bool) -> AgentCard {
    let mut c = AgentCard::new("scripted", "test agent", "0.1.0", "/");
    c.capabilities.streaming = Some(streaming);
    c
}

fn quick() -> ClientConfig {
    ClientConfig {
        timeout: Duration::from_millis(800),
        retries: 2,
        backoff_initial: Duration::from_millis(20),
        backoff_max: Duration::from_millis(50),
        ..ClientConfig::default()
    }
}

fn opts(streaming: bool) -> RunOptions {
    RunOptions {
        budget: Duration::from_secs(20),
        streaming,
        poll_initial: Duration::from_millis(50),
        poll_max: Duration::from_millis(100),
        history_length: None,
    }
}

fn go_on(_: exchange::Observed<'_>) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_blocking_agent_is_waited_for_and_runs_once() {
    let agent = Arc::new(Scripted {
        block: Duration::from_secs(3),
        ..Scripted::default()
    });
    let (base, _h) = serve_with(Arc::clone(&agent), card(false)).await;
    // The client's read timeout (0.8 s) is far below the agent's 3 s; the budget decides.
    let client = A2aClient::connect(&base, quick()).await.unwrap();
    let msg = SendMessageRequest::new(Message::user_text("work long"));
    let (end, _) = exchange::run(&client, msg, &opts(true), &mut go_on)
        .await
        .unwrap();
    let RunEnd::Task(task) = end else {
        panic!("{end:?}")
    };
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(agent.sends.load(Ordering::SeqCst), 1, "the agent ran once");

    // A plain send that times out is reported as a timeout and is not re-sent.
    let err = client
        .send_message(&SendMessageRequest::new(Message::user_text("again")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("did not answer message/send") || text.contains("did not answer SendMessage"),
        "{text}"
    );
    assert!(!text.contains("could not"), "{text}");
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(
        agent.sends.load(Ordering::SeqCst),
        2,
        "no resend after a timeout"
    );
}

/// Accepts connections, reads a request, and closes without answering.
async fn black_hole() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut buf = vec![0u8; 65536];
                let _ = sock.read(&mut buf).await;
                drop(sock);
            });
        }
    });
    (base, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_is_retried_only_when_the_agent_never_got_it() {
    // Connection refused: the agent provably never got it; retried, then Unreachable.
    let client = A2aClient::new("http://127.0.0.1:1/", quick()).unwrap();
    let err = client
        .send_message(&SendMessageRequest::new(Message::user_text("x")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unreachable, "{err:?}");
    assert!(
        err.to_string().contains("the URL given for the agent"),
        "{err}"
    );

    // Received, then the connection dropped: not re-sent (the agent may be working on it)...
    let (base, seen) = black_hole().await;
    let client = A2aClient::new(format!("{base}/"), quick()).unwrap();
    let err = client
        .send_message(&SendMessageRequest::new(Message::user_text("x")))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Transport, "{err:?}");
    assert_eq!(seen.load(Ordering::SeqCst), 1, "the send went out once");
    // ... while a read is retried.
    let _ = client
        .get_task(&GetTaskRequest::new("t"))
        .await
        .unwrap_err();
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1 + 3,
        "GetTask: 1 try + 2 retries"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_only_agent_is_streamed_to() {
    let agent = Arc::new(Scripted {
        streaming_only: true,
        ..Scripted::default()
    });
    let (base, _h) = serve_with(Arc::clone(&agent), card(true)).await;
    let client = A2aClient::connect(&base, quick()).await.unwrap();
    let msg = SendMessageRequest::new(Message::user_text("stream it"));
    let (end, stats) = exchange::run(&client, msg.clone(), &opts(true), &mut go_on)
        .await
        .unwrap();
    assert!(stats.streamed);
    let RunEnd::Task(task) = end else {
        panic!("{end:?}")
    };
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(task.artifacts[0].parts[0].as_raw(), Some(common::CSV));
    // Without streaming the refusal is a fixed one, not a transport failure.
    let err = exchange::run(&client, msg, &opts(false), &mut go_on)
        .await
        .unwrap_err();
    assert!(err.is_incompatible(), "{err:?}");
    assert!(
        err.to_string().contains("only serves SendStreamingMessage"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_is_followed_by_polling() {
    let agent = Arc::new(Scripted {
        drop_stream: true,
        ..Scripted::default()
    });
    let (base, _h) = serve_with(Arc::clone(&agent), card(true)).await;
    let client = A2aClient::connect(&base, quick()).await.unwrap();
    let msg = SendMessageRequest::new(Message::user_text("stream it"));
    let (end, stats) = exchange::run(&client, msg, &opts(true), &mut go_on)
        .await
        .unwrap();
    let RunEnd::Task(task) = end else {
        panic!("{end:?}")
    };
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(stats.dropped_streams, 1, "{stats:?}");
    assert!(stats.polls >= 1, "{stats:?}");
    assert_eq!(agent.sends.load(Ordering::SeqCst), 1, "never re-sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_slow_to_start_is_waited_for_and_runs_once() {
    let agent = Arc::new(Scripted {
        block: Duration::from_secs(2),
        ..Scripted::default()
    });
    let (base, _h) = serve_with(Arc::clone(&agent), card(true)).await;
    // The read timeout (0.8 s) is below the 2 s the agent takes to start its stream.
    let client = A2aClient::connect(&base, quick()).await.unwrap();
    let msg = SendMessageRequest::new(Message::user_text("stream it"));
    let (end, stats) = exchange::run(&client, msg, &opts(true), &mut go_on)
        .await
        .unwrap();
    assert!(stats.streamed);
    let RunEnd::Task(task) = end else {
        panic!("{end:?}")
    };
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(agent.sends.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_starting_with_a_status_update_is_followed() {
    let agent = Arc::new(Scripted {
        update_first: true,
        ..Scripted::default()
    });
    let (base, _h) = serve_with(Arc::clone(&agent), card(true)).await;
    let client = A2aClient::connect(&base, quick()).await.unwrap();
    let msg = SendMessageRequest::new(Message::user_text("stream it"));
    let (end, stats) = exchange::run(&client, msg, &opts(true), &mut go_on)
        .await
        .unwrap();
    let RunEnd::Task(task) = end else {
        panic!("{end:?}")
    };
    assert_eq!(task.id, "t-stream");
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(stats.polls, 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cards_url_falls_back_to_the_given_one() {
    let agent = Arc::new(Scripted::default());
    // The card names an address nobody listens on (as agents behind NAT or in containers do).
    let card = AgentCard::new("scripted", "test agent", "0.1.0", "http://127.0.0.1:1/");
    let (base, _h) = serve_with(agent, card).await;
    let client = A2aClient::connect(&base, quick()).await.unwrap();
    assert_eq!(client.rpc_url(), format!("{base}/"));
    assert!(matches!(
        client.url_source(),
        UrlSource::UserAfterCard { .. }
    ));
    let err = client
        .get_task(&GetTaskRequest::new("nope"))
        .await
        .unwrap_err();
    assert_eq!(err.as_a2a().map(A2aError::code), Some(-32001), "{err:?}");
}

/// Serves `card` (any JSON) at the well-known path, and our router's RPC at `/`.
async fn serve_raw_card(card: serde_json::Value, headers_seen: Arc<Mutex<Vec<String>>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let card = serde_json::from_str::<serde_json::Value>(&card.to_string().replace("BASE", &base))
        .unwrap();
    let rpc = router(
        Arc::new(common::TestAgent::default()),
        common::test_card(),
        ServerConfig::default(),
    );
    let app = axum::Router::new()
        .route(
            a2a_protocol::AGENT_CARD_PATH,
            axum::routing::get(move || {
                let card = card.clone();
                async move { axum::Json(card) }
            }),
        )
        .fallback_service(rpc)
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let seen = Arc::clone(&headers_seen);
                async move {
                    if req.method() != axum::http::Method::POST {
                        return next.run(req).await;
                    }
                    let auth = req
                        .headers()
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    let version = req
                        .headers()
                        .get("a2a-version")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("-")
                        .to_owned();
                    seen.lock().unwrap().push(format!("{auth}|{version}"));
                    next.run(req).await
                }
            },
        ));
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    base
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_03_only_agent_is_spoken_to_in_03_with_the_given_headers() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = serve_raw_card(
        json!({
            "name": "legacy", "description": "0.3 agent", "version": "1", "url": "BASE/",
            "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC",
            "capabilities": {"streaming": false}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": [],
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "security": [{"bearer": []}],
        }),
        Arc::clone(&seen),
    )
    .await;
    let config = ClientConfig {
        headers: AgentHeaders::new().with("Authorization", "Bearer s3cret-token"),
        ..quick()
    };
    assert!(
        !format!("{config:?}").contains("s3cret"),
        "headers are redacted in Debug"
    );
    let client = A2aClient::connect(&base, config).await.unwrap();
    assert_eq!(client.dialect(), Dialect::V0_3);
    assert_eq!(client.card().unwrap().security_schemes.len(), 1);
    let (end, _) = exchange::run(
        &client,
        SendMessageRequest::new(Message::user_text("produce the outputs")),
        &opts(false),
        &mut go_on,
    )
    .await
    .unwrap();
    let RunEnd::Task(task) = end else {
        panic!("{end:?}")
    };
    assert_eq!(task.state(), TaskState::Completed);
    assert_eq!(
        task.artifact("results.csv").unwrap().parts[0].as_raw(),
        Some(common::CSV)
    );
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    // Every RPC carried the header, and no A2A-Version (0.3 is the version of no header).
    assert!(
        seen.iter().all(|s| s == "Bearer s3cret-token|-"),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_refusals_are_incompatible_and_say_what_was_offered() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let base = serve_raw_card(
        json!({
            "name": "grpc-only", "description": "", "version": "1",
            "supportedInterfaces": [{"url": "BASE/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": [],
        }),
        seen,
    )
    .await;
    let err = A2aClient::connect(&base, quick()).await.unwrap_err();
    assert!(err.is_incompatible(), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("GRPC 1.0 at http://"), "{text}");
    assert!(text.contains("1.x or 0.3"), "{text}");

    // No card at all (HTTP 404): incompatible, and the message says whose URL it was.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let other = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, axum::Router::new()).await.unwrap();
    });
    let err = A2aClient::connect(&other, quick()).await.unwrap_err();
    assert!(
        matches!(err, ClientError::NoCard { status: 404, .. }),
        "{err:?}"
    );
    assert!(err.is_incompatible());
    assert!(
        err.to_string().contains("the URL given for the agent"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_cannot_send_the_task_to_another_host() {
    let agent = Arc::new(Scripted::default());
    // Served at 127.0.0.1; the card names another host.
    let card = AgentCard::new("scripted", "test agent", "0.1.0", "http://localhost:1/");
    let (base, _h) = serve_with(Arc::clone(&agent), card).await;
    let err = A2aClient::connect(&base, quick()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Incompatible, "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("is on host localhost, not on 127.0.0.1")
            && text.contains("--allow-card-host localhost"),
        "{text}"
    );
    // Allowed explicitly: the named host is used (here nobody listens there, so the given
    // host with the card's path is the fallback, as for any card URL).
    let allowed = ClientConfig {
        card_hosts: vec!["localhost".into()],
        ..quick()
    };
    let client = A2aClient::connect(&base, allowed).await.unwrap();
    assert!(matches!(
        client.url_source(),
        UrlSource::UserAfterCard { .. }
    ));
    // A URL that names no host at all is refused too.
    let card = AgentCard::new("scripted", "test agent", "0.1.0", "mailto:someone");
    let (base, _h2) = serve_with(agent, card).await;
    let err = A2aClient::connect(&base, quick()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Incompatible, "{err:?}");
}
