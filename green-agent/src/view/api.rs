//! The viewer's JSON API under `/api`: runs, trials (filtered, sorted, paginated), a trial's grade
//! report, artifacts (with HTTP range requests), events, leaderboards and a live SSE feed of a
//! run's events. Documented by the OpenAPI document [`ApiDoc`] served at `/api/openapi.json`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Serialize;
use tower::ServiceExt;
use utoipa::{OpenApi, ToSchema};

use super::data::{
    Artifact, Event, EventQuery, Results, RunInfo, TrialDetail, TrialPage, TrialQuery, ViewError,
};

/// How often the live feed looks for new events.
pub const POLL_INTERVAL: Duration = Duration::from_millis(500);

/// The OpenAPI document of the viewer's API.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "research-bench results API",
        description = "Read-only access to every run in a results directory."
    ),
    paths(
        list_runs,
        get_run,
        list_trials,
        get_trial,
        get_grade,
        get_artifact,
        list_events,
        stream_events,
        get_leaderboard,
        get_compare,
        get_cross_leaderboard,
        get_cross_compare
    ),
    components(schemas(
        RunInfo,
        TrialPage,
        super::data::TrialSummary,
        TrialDetail,
        Artifact,
        Event,
        LeaderRow,
        Leaderboard,
        crate::presentation::compare::PairComparison,
        crate::presentation::compare::TaskDiff,
        crate::presentation::compare::SignTest,
        ApiError
    ))
)]
pub struct ApiDoc;

/// An error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiError {
    pub error: String,
}

impl IntoResponse for ViewError {
    fn into_response(self) -> Response {
        let status = match &self {
            ViewError::RunNotFound(_)
            | ViewError::TrialNotFound { .. }
            | ViewError::ArtifactNotFound { .. } => StatusCode::NOT_FOUND,
            ViewError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ViewError::Db { .. } | ViewError::Io { .. } => {
                tracing::warn!(error = %self, "viewer read failed");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        (
            status,
            Json(ApiError {
                error: self.to_string(),
            }),
        )
            .into_response()
    }
}

pub use crate::presentation::leaderboard::{LeaderRow, Leaderboard, leaderboard_of};

/// Builds a leaderboard from a run's trials (once per state of the run: kept until its next
/// event).
pub async fn leaderboard(results: &Results, run: &str) -> Result<Arc<Leaderboard>, ViewError> {
    results
        .derived(run, "leaderboard", |rows| Ok(leaderboard_of(run, rows)))
        .await
}

/// Which runs (and agents) a cross-run view covers.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RunsQuery {
    /// Comma-separated run ids (default: every run).
    pub runs: Option<String>,
    /// Comma-separated agent specs to compare (default: every agent).
    pub agents: Option<String>,
}

impl RunsQuery {
    pub fn run_ids(&self) -> Vec<String> {
        self.runs
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// One leaderboard over the trials of several runs together (`run` = the run ids, comma-joined).
#[utoipa::path(get, path = "/api/leaderboard", params(RunsQuery),
    responses((status = 200, body = Leaderboard), (status = 404, body = ApiError)))]
pub async fn get_cross_leaderboard(
    State(r): St,
    Query(q): Query<RunsQuery>,
) -> Result<Json<Leaderboard>, ViewError> {
    let (ids, rows) = super::data::rows_of_runs(&r, &q.run_ids()).await?;
    Ok(Json(leaderboard_of(&ids.join(","), &rows)))
}

/// Paired comparison of agents over several runs together: a task's score for an agent is its
/// mean over every run and repeat; pass/fail pairs match (task, repeat), several runs' trials of
/// the same (task, repeat) pairing in run order.
#[utoipa::path(get, path = "/api/compare", params(RunsQuery),
    responses((status = 200, body = [crate::presentation::compare::PairComparison]), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
pub async fn get_cross_compare(
    State(r): St,
    Query(q): Query<RunsQuery>,
) -> Result<Json<Vec<crate::presentation::compare::PairComparison>>, ViewError> {
    let (ids, rows) = super::data::rows_of_runs(&r, &q.run_ids()).await?;
    let order = agent_order(&r, &ids).await?;
    Ok(Json(compare_rows(&rows, &order, q.agents.as_deref())?.1))
}

/// The agents the runs' plans name, in order (first run first).
pub async fn agent_order(results: &Results, runs: &[String]) -> Result<Vec<String>, ViewError> {
    let mut order: Vec<String> = Vec::new();
    for id in runs {
        for a in results.plan_agents(id).await? {
            if !order.contains(&a) {
                order.push(a);
            }
        }
    }
    Ok(order)
}

/// [`crate::presentation::compare::compare_rows`], an unknown agent a bad request.
pub fn compare_rows(
    rows: &[crate::store::TrialRow],
    order: &[String],
    agents: Option<&str>,
) -> Result<
    (
        Vec<String>,
        Vec<crate::presentation::compare::PairComparison>,
    ),
    ViewError,
> {
    crate::presentation::compare::compare_rows(rows, order, agents).map_err(ViewError::BadRequest)
}

type St = State<Arc<Results>>;

/// Every run in the results directory, newest first.
#[utoipa::path(get, path = "/api/runs", responses((status = 200, body = [RunInfo])))]
pub async fn list_runs(State(r): St) -> Result<Json<Vec<RunInfo>>, ViewError> {
    Ok(Json(r.runs().await?))
}

/// One run with its progress counts.
#[utoipa::path(get, path = "/api/runs/{run}", params(("run" = String, Path, description = "Run id")),
    responses((status = 200, body = RunInfo), (status = 404, body = ApiError)))]
pub async fn get_run(State(r): St, Path(run): Path<String>) -> Result<Json<RunInfo>, ViewError> {
    Ok(Json(r.run(&run).await?))
}

/// A page of a run's trials, filtered and sorted.
#[utoipa::path(get, path = "/api/runs/{run}/trials",
    params(("run" = String, Path, description = "Run id"), TrialQuery),
    responses((status = 200, body = TrialPage), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
pub async fn list_trials(
    State(r): St,
    Path(run): Path<String>,
    Query(q): Query<TrialQuery>,
) -> Result<Json<TrialPage>, ViewError> {
    Ok(Json(r.trials(&run, &q).await?))
}

/// One trial: outcome, score, phases, usage and its artifact list.
#[utoipa::path(get, path = "/api/runs/{run}/trials/{trial}",
    params(("run" = String, Path, description = "Run id"), ("trial" = String, Path, description = "Trial id")),
    responses((status = 200, body = TrialDetail), (status = 404, body = ApiError)))]
pub async fn get_trial(
    State(r): St,
    Path((run, trial)): Path<(String, String)>,
) -> Result<Json<TrialDetail>, ViewError> {
    Ok(Json(r.trial(&run, &trial).await?))
}

/// A trial's grade report (dimensions, graders, tests, structured findings); 404 when ungraded.
#[utoipa::path(get, path = "/api/runs/{run}/trials/{trial}/grade",
    params(("run" = String, Path, description = "Run id"), ("trial" = String, Path, description = "Trial id")),
    responses((status = 200, description = "The rubrics grade report", body = Object), (status = 404, body = ApiError)))]
pub async fn get_grade(
    State(r): St,
    Path((run, trial)): Path<(String, String)>,
) -> Result<Response, ViewError> {
    // 404 for an unknown trial, `null` for one not graded (yet)
    r.trial(&run, &trial).await?;
    Ok(Json(r.grade(&run, &trial).await?).into_response())
}

/// An artifact's bytes (`Range` requests honoured). Agent-written content is served inert: never
/// as HTML or script, always with a sandboxing content security policy.
#[utoipa::path(get, path = "/api/runs/{run}/trials/{trial}/artifacts/{name}",
    params(("run" = String, Path, description = "Run id"), ("trial" = String, Path, description = "Trial id"),
        ("name" = String, Path, description = "Artifact name (`file:<path>`, `trajectory`, `agent_log`, ...)")),
    responses((status = 200, description = "The bytes"), (status = 206, description = "A range of the bytes"),
        (status = 404, body = ApiError)))]
pub async fn get_artifact(
    State(r): St,
    Path((run, trial, name)): Path<(String, String, String)>,
    req: Request,
) -> Result<Response, ViewError> {
    let (a, path) = r.artifact(&run, &trial, &name).await?;
    let mime = inert_mime(&a);
    let served = tower_http::services::ServeFile::new_with_mime(&path, &mime)
        .oneshot(req)
        .await;
    let mut resp = match served {
        Ok(resp) => resp.map(Body::new),
        Err(never) => match never {},
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(resp)
}

/// The media type an artifact is served as: raster images and JSON as themselves, everything
/// else as plain text (never HTML, SVG or script, whatever the agent named it).
pub fn inert_mime(a: &Artifact) -> mime_guess::mime::Mime {
    use mime_guess::mime;
    let declared = a
        .media_type
        .as_deref()
        .and_then(|m| m.parse::<mime::Mime>().ok())
        .or_else(|| {
            let path = a.name.strip_prefix("file:").unwrap_or(&a.name);
            mime_guess::from_path(path).first()
        });
    match declared {
        Some(m)
            if m.type_() == mime::IMAGE
                && matches!(m.subtype().as_str(), "png" | "jpeg" | "gif" | "webp") =>
        {
            m
        }
        Some(m) if m.essence_str() == "application/json" => mime::APPLICATION_JSON,
        _ => mime::TEXT_PLAIN_UTF_8,
    }
}

/// A run's events after a sequence number, oldest first (at most 1000 per request).
#[utoipa::path(get, path = "/api/runs/{run}/events",
    params(("run" = String, Path, description = "Run id"), EventQuery),
    responses((status = 200, body = [Event]), (status = 404, body = ApiError)))]
pub async fn list_events(
    State(r): St,
    Path(run): Path<String>,
    Query(q): Query<EventQuery>,
) -> Result<Json<Vec<Event>>, ViewError> {
    Ok(Json(r.events(&run, &q).await?))
}

/// Live feed of a run's events (Server-Sent Events: `id` = sequence number, `event` = kind,
/// `data` = the event as JSON). Starts after `after` or the `Last-Event-ID` header.
#[utoipa::path(get, path = "/api/runs/{run}/events/stream",
    params(("run" = String, Path, description = "Run id"), EventQuery),
    responses((status = 200, description = "text/event-stream of events"), (status = 404, body = ApiError)))]
pub async fn stream_events(
    State(r): St,
    Path(run): Path<String>,
    Query(q): Query<EventQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ViewError> {
    r.run(&run).await?;
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .or(q.after)
        .unwrap_or(0);
    Ok(Sse::new(event_stream(r, run, q.trial, after)).keep_alive(KeepAlive::default()))
}

/// The name of the live feed's last event: the run is no longer running (its data: the run's
/// status); the feed closes after it.
pub const END_EVENT: &str = "end";

/// Polls the run's events table and yields every new event once, in order; once the run is
/// not running and every event was sent, one [`END_EVENT`] and the end of the stream.
fn event_stream(
    results: Arc<Results>,
    run: String,
    trial: Option<String>,
    after: i64,
) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures::stream::unfold(Some(after), move |state| {
        let results = results.clone();
        let run = run.clone();
        let trial = trial.clone();
        async move {
            let mut last = state?;
            loop {
                // the status before the events: a run seen finished has no event after them
                let status = results.run_status(&run).await;
                let q = EventQuery {
                    after: Some(last),
                    trial: trial.clone(),
                    limit: None,
                };
                match results.events(&run, &q).await {
                    Ok(batch) if !batch.is_empty() => {
                        last = batch.last().map_or(last, |e| e.seq);
                        let events = batch.iter().map(feed_event).collect::<Vec<_>>();
                        return Some((events, Some(last)));
                    }
                    Ok(_) => match status {
                        Ok(status) if status != RUNNING => {
                            let end = SseEvent::default()
                                .event(END_EVENT)
                                .data(serde_json::json!({ "status": status }).to_string());
                            return Some((vec![end], None));
                        }
                        Ok(_) => {}
                        Err(e) => tracing::debug!(error = %e, "run status poll failed; retrying"),
                    },
                    Err(e) => tracing::debug!(error = %e, "event poll failed; retrying"),
                }
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        }
    })
    .flat_map(futures::stream::iter)
    .map(Ok)
}

/// The status of a run still going.
const RUNNING: &str = "running";

fn feed_event(e: &Event) -> SseEvent {
    SseEvent::default()
        .id(e.seq.to_string())
        .event(e.kind.clone())
        .data(serde_json::to_string(e).unwrap_or_else(|_| "{}".into()))
}

/// A run's leaderboard: agent × task kind, mean ± 95% CI, pass@k, callback rate, cost, tokens.
#[utoipa::path(get, path = "/api/runs/{run}/leaderboard",
    params(("run" = String, Path, description = "Run id")),
    responses((status = 200, body = Leaderboard), (status = 404, body = ApiError)))]
pub async fn get_leaderboard(
    State(r): St,
    Path(run): Path<String>,
) -> Result<Json<Leaderboard>, ViewError> {
    Ok(Json(Leaderboard::clone(&*leaderboard(&r, &run).await?)))
}

/// Which agents to compare.
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CompareQuery {
    /// Comma-separated agent specs (default: every agent of the run; every pair is compared).
    pub agents: Option<String>,
}

/// Paired comparison of a run's agents.
pub async fn comparison(
    results: &Results,
    run: &str,
    agents: Option<&str>,
) -> Result<
    (
        Vec<String>,
        Vec<crate::presentation::compare::PairComparison>,
    ),
    ViewError,
> {
    // the run's agents in the order the run named them, then any other agent with trials
    let order = results.plan_agents(run).await?;
    let key = format!("compare?agents={}", agents.unwrap_or(""));
    let made = results
        .derived(run, &key, |rows| compare_rows(rows, &order, agents))
        .await?;
    Ok((*made).clone())
}

/// Paired comparison of agents on the run's tasks: per-task differences with a bootstrap CI,
/// sign test, McNemar's exact test on pass/fail, Holm-corrected over pairs.
#[utoipa::path(get, path = "/api/runs/{run}/compare",
    params(("run" = String, Path, description = "Run id"), CompareQuery),
    responses((status = 200, body = [crate::presentation::compare::PairComparison]), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
pub async fn get_compare(
    State(r): St,
    Path(run): Path<String>,
    Query(q): Query<CompareQuery>,
) -> Result<Json<Vec<crate::presentation::compare::PairComparison>>, ViewError> {
    Ok(Json(comparison(&r, &run, q.agents.as_deref()).await?.1))
}

/// The OpenAPI document.
pub async fn openapi() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// The `/api` routes.
pub fn routes() -> axum::Router<Arc<Results>> {
    use axum::routing::get;
    axum::Router::new()
        .route("/api/openapi.json", get(openapi))
        .route("/api/runs", get(list_runs))
        .route("/api/runs/{run}", get(get_run))
        .route("/api/runs/{run}/trials", get(list_trials))
        .route("/api/runs/{run}/trials/{trial}", get(get_trial))
        .route("/api/runs/{run}/trials/{trial}/grade", get(get_grade))
        .route(
            "/api/runs/{run}/trials/{trial}/artifacts/{*name}",
            get(get_artifact),
        )
        .route("/api/runs/{run}/events", get(list_events))
        .route("/api/runs/{run}/events/stream", get(stream_events))
        .route("/api/runs/{run}/leaderboard", get(get_leaderboard))
        .route("/api/runs/{run}/compare", get(get_compare))
        .route("/api/leaderboard", get(get_cross_leaderboard))
        .route("/api/compare", get(get_cross_compare))
}
