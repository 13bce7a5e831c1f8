//! `green-agent serve`: the green agent as an A2A service (1.0 and 0.3 on one URL). Clients
//! send assessment requests in AgentBeats' form and follow them as A2A tasks; each one is an
//! ordinary run in the results directory.
//!
//! | module | job |
//! |---|---|
//! | `request` | the request's JSON, strict validation against the configured suites and policy, participant cards |
//! | `card` | the agent card: a skill per suite, roles and config keys, the bearer scheme |
//! | `registry` | the assessments: persisted records (task id ↔ run id), live artifacts, subscribers, the queue |
//! | `assessment` | one assessment: queue slot, plan → prepare → execute, progress, result |
//! | `results` | trial and result artifacts from the store (through `summary` and `report`) |
//! | `handler` | the `A2aHandler` over the registry |
//!
//! This file: the command's flags, the HTTP app (bearer check, report files) and startup.

mod assessment;
mod card;
mod handler;
mod registry;
mod request;
mod results;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio_util::sync::CancellationToken;

pub use assessment::{Service, plan};
pub use card::card;
pub use handler::Assessor;
pub use registry::{Record, Registry, records_file};
pub use request::{Assessment, Catalog, Policy, RequestError, request_json, validate};
pub use results::result_data;

use crate::config::Settings;

/// Environment variable holding the service's API token (never a flag or a file).
pub const TOKEN_ENV: &str = "RB_SERVE_TOKEN";

/// Hosted agent kinds a request may name when the operator allows them.
pub static HOSTED_KINDS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(crate::agents::hosted_kinds);

struct AppState {
    svc: Arc<Service>,
    token: Option<String>,
}

/// Whether `a` and `b` are equal, in time independent of where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks the bearer token on everything but the agent card; keeps the origin for file URLs.
async fn guard(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let public_card =
        request.method() == Method::GET && request.uri().path() == a2a_protocol::AGENT_CARD_PATH;
    if let Some(token) = &state.token
        && !public_card
    {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !same_secret(given.trim().as_bytes(), token.as_bytes()) {
            let body = serde_json::json!({
                "jsonrpc": "2.0",
                "id": null,
                "error": {
                    "code": -32600,
                    "message": "unauthorized: this service needs `Authorization: Bearer <token>` (its card's securitySchemes.bearer)",
                },
            });
            return (
                StatusCode::UNAUTHORIZED,
                [
                    (header::WWW_AUTHENTICATE, "Bearer"),
                    (header::CONTENT_TYPE, "application/json"),
                ],
                body.to_string(),
            )
                .into_response();
        }
    }
    if !state.svc.origin_fixed
        && let Some(host) = host_of(request.headers())
    {
        *state.svc.origin.lock().unwrap_or_else(|e| e.into_inner()) = format!("http://{host}");
    }
    next.run(request).await
}

fn host_of(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic() && b != b'/'))
        .map(str::to_owned)
}

/// `GET /files/<token>/<name>`: a report file of the assessment with that token.
async fn serve_file(
    State(state): State<Arc<AppState>>,
    Path((token, name)): Path<(String, String)>,
) -> Response {
    let not_found = || (StatusCode::NOT_FOUND, "no such file\n").into_response();
    let Some(media) = crate::report::Format::all()
        .find(|f| f.file_name() == name)
        .map(|f| f.media_type())
    else {
        return not_found();
    };
    let Some(run_id) = state
        .svc
        .registry
        .by_files_token(&token)
        .and_then(|r| r.run_id)
    else {
        return not_found();
    };
    let path = crate::run::run_dir(&state.svc.results_dir(), &run_id).join(name);
    match tokio::fs::read(&path).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, media)], bytes).into_response(),
        Err(_) => not_found(),
    }
}

/// The service's HTTP app: the A2A router, the report files, the bearer check.
pub fn app(
    svc: Arc<Service>,
    card: a2a_protocol::AgentCard,
    token: Option<String>,
    max_request_bytes: usize,
) -> axum::Router {
    let state = Arc::new(AppState {
        svc: Arc::clone(&svc),
        token,
    });
    let a2a = a2a_protocol::router(
        Arc::new(Assessor { svc }),
        card,
        a2a_protocol::ServerConfig {
            max_request_bytes,
            rpc_path: "/".into(),
        },
    );
    axum::Router::new()
        .route("/files/{token}/{name}", axum::routing::get(serve_file))
        .with_state(Arc::clone(&state))
        .fallback_service(a2a)
        .layer(axum::middleware::from_fn_with_state(state, guard))
}

/// Runs the service until SIGINT/SIGTERM; returns the exit code.
pub async fn command(
    args: crate::config::ServeSettings,
    settings: Settings,
    env: BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let token = env.get(TOKEN_ENV).filter(|t| !t.is_empty()).cloned();
    if !args.bind.ip().is_loopback() && token.is_none() {
        bail!(
            "--bind {} is not a loopback address: the service then needs an API token; export {TOKEN_ENV}=<a long random secret> (clients send `Authorization: Bearer <it>`), or bind 127.0.0.1",
            args.bind
        );
    }
    if let Some(t) = &token
        && t.len() < 16
    {
        bail!("{TOKEN_ENV} is shorter than 16 characters; use a long random secret");
    }
    for h in &args.allow_hosted {
        if !HOSTED_KINDS.contains(&h.as_str()) {
            bail!(
                "--allow-hosted: unknown hosted agent `{h}` (known: {})",
                HOSTED_KINDS.join(", ")
            );
        }
    }
    let catalog = Catalog::load(&args.tasks).map_err(anyhow::Error::msg)?;
    let trial_slots = args.max_trials_running.unwrap_or(settings.concurrency);
    if trial_slots == 0 || args.max_running == 0 {
        bail!("--max-trials-running and --max-running must be at least 1");
    }
    let policy = Policy {
        hosted: args.allow_hosted.iter().cloned().collect(),
        allowed_urls: args.allow_participant.clone(),
        max_concurrency: settings.concurrency,
        max_trials: args.max_trials,
        ..Policy::default()
    };
    std::fs::create_dir_all(&settings.results_dir)
        .with_context(|| format!("creating {}", settings.results_dir.display()))?;
    // One service per results folder (its records live there), held until the process ends.
    let _service = crate::ownership::claim_service(&settings.results_dir)?;
    let registry = Arc::new(
        Registry::open(&settings.results_dir, args.max_running).map_err(anyhow::Error::msg)?,
    );
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("binding {} (--bind)", args.bind))?;
    let addr = listener.local_addr()?;
    let card = card(&catalog, &policy, token.is_some());
    let svc = Arc::new(Service {
        registry: Arc::clone(&registry),
        catalog,
        policy,
        settings,
        env,
        origin: Mutex::new(
            args.public_url
                .clone()
                .unwrap_or_else(|| format!("http://{addr}")),
        ),
        origin_fixed: args.public_url.is_some(),
        inline_report_bytes: args.inline_report_bytes,
        shutdown: CancellationToken::new(),
        tracker: tokio_util::task::TaskTracker::new(),
        trial_slots: Arc::new(tokio::sync::Semaphore::new(trial_slots)),
    });
    let app = app(Arc::clone(&svc), card, token, args.max_request_bytes);
    let unfinished = registry.unfinished();
    for record in &unfinished {
        tracing::info!(assessment = %record.id, run = ?record.run_id, "resuming an unfinished assessment");
        svc.spawn(record.id.clone());
    }
    println!("listening on http://{addr}/");
    println!(
        "agent card: http://{addr}{}; {} unfinished assessment(s) resumed",
        a2a_protocol::AGENT_CARD_PATH,
        unfinished.len()
    );
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let server = axum::serve(listener, app);
    let code = tokio::select! {
        served = server => {
            served.context("serving")?;
            0
        }
        _ = sigint.recv() => 130,
        _ = sigterm.recv() => 143,
    };
    // Runs stop on the same signal (each run's reaper removes its containers and records it
    // interrupted); queued assessments stay queued. Both resume at the next start.
    svc.shutdown.cancel();
    svc.tracker.close();
    if tokio::time::timeout(Duration::from_secs(60), svc.tracker.wait())
        .await
        .is_err()
    {
        eprintln!(
            "some assessments did not stop within 60 s; leftovers are reaped at the next start"
        );
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
        assert!(!same_secret(b"", b"a"));
    }
}
