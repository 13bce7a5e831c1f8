//! The dashboard's pages, rendered on the server from the embedded minijinja templates
//! (`presentation/templates/`, autoescaped): runs list, run page (live), leaderboard, trial page.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use minijinja::{Value, context};
use serde::Serialize;

use super::data::{MAX_INLINE_BYTES, Results, TrialQuery, ViewError};
use crate::presentation::plots;
use crate::presentation::templates;
use crate::presentation::trial_view::{Bodies, Body, Inputs, Links, Workspace, trial_view};

/// Most bytes of a trajectory parsed for the trial page.
const MAX_TRAJECTORY_BYTES: u64 = 8 * 1024 * 1024;

fn render(name: &str, ctx: Value) -> Response {
    match templates::render(name, ctx) {
        Ok(html) => Html(html).into_response(),
        Err(e) => {
            tracing::error!(template = name, error = %format!("{e:#}"), "render failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("rendering {name} failed: {e}"),
            )
                .into_response()
        }
    }
}

/// A page for an error (not found, bad filter, unreadable store).
#[derive(Debug)]
pub struct PageError(ViewError);

impl From<ViewError> for PageError {
    fn from(e: ViewError) -> Self {
        Self(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            ViewError::RunNotFound(_)
            | ViewError::TrialNotFound { .. }
            | ViewError::ArtifactNotFound { .. } => StatusCode::NOT_FOUND,
            ViewError::BadRequest(_) => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut resp = render(
            "error.html",
            context! { status => status.as_u16(), message => self.0.to_string() },
        );
        *resp.status_mut() = status;
        resp
    }
}

type St = State<Arc<Results>>;
type Page = Result<Response, PageError>;

/// `/`: every run.
pub async fn runs_page(State(r): St) -> Page {
    let runs = r.runs().await?;
    Ok(render(
        "runs.html",
        context! { runs, results_dir => r.dir().display().to_string() },
    ))
}

/// What the run page shows of all of a run's trials (kept until the run's next event).
#[derive(Debug, Serialize)]
struct RunWide {
    failures: Vec<crate::presentation::summary::FailureCount>,
    agents: std::collections::BTreeSet<String>,
    tasks: std::collections::BTreeSet<String>,
    kinds: std::collections::BTreeSet<String>,
    score_plot: Option<plots::BandChart>,
    phase_plot: Option<plots::BandChart>,
}

impl RunWide {
    fn of(rows: &[crate::store::TrialRow]) -> Self {
        let (mut agents, mut tasks, mut kinds) = (
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        );
        for t in rows {
            agents.insert(t.planned.agent.clone());
            tasks.insert(t.planned.task_id.clone());
            kinds.insert(t.planned.task_kind.clone());
        }
        Self {
            failures: crate::presentation::summary::failures_by_cause(rows),
            agents,
            tasks,
            kinds,
            score_plot: plots::score_distribution(rows),
            phase_plot: plots::phase_times(rows),
        }
    }
}

/// Computes what the run page shows of all of a run's trials, ahead of its first request.
pub async fn warm(results: &Results, run: &str) -> Result<(), ViewError> {
    results
        .derived(run, "run page", |rows| Ok(RunWide::of(rows)))
        .await
        .map(drop)
}

/// `/runs/{run}`: progress, failures by cause, cost so far, trials (filtered), plots; live.
pub async fn run_page(State(r): St, Path(run): Path<String>, Query(q): Query<TrialQuery>) -> Page {
    let info = r.run(&run).await?;
    let page = r.trials(&run, &q).await?;
    let wide = r
        .derived(&run, "run page", |rows| Ok(RunWide::of(rows)))
        .await?;
    let pages = (page.total.max(1) + i64::from(page.per_page) - 1) / i64::from(page.per_page);
    Ok(render(
        "run.html",
        context! {
            run => info,
            page,
            pages,
            q => context! {
                task => q.task, kind => q.kind, agent => q.agent, outcome => q.outcome,
                status => q.status, sort => q.sort, order => q.order,
            },
            failures => &wide.failures,
            agents => &wide.agents,
            tasks => &wide.tasks,
            kinds => &wide.kinds,
            score_plot => &wide.score_plot,
            phase_plot => &wide.phase_plot,
        },
    ))
}

/// `/runs/{run}/leaderboard`.
pub async fn leaderboard_page(State(r): St, Path(run): Path<String>) -> Page {
    let info = r.run(&run).await?;
    let board = super::api::leaderboard(&r, &run).await?;
    let dims = board.dimensions();
    Ok(render(
        "leaderboard.html",
        context! { run => info, board => &*board, dims, ci_plot => board.ci_plot() },
    ))
}

/// `/runs/{run}/compare?agents=A,B`: paired comparison of agents.
pub async fn compare_page(
    State(r): St,
    Path(run): Path<String>,
    Query(q): Query<super::api::CompareQuery>,
) -> Page {
    let info = r.run(&run).await?;
    let (known, pairs) = super::api::comparison(&r, &run, q.agents.as_deref()).await?;
    let charts: Vec<_> = pairs.iter().map(plots::paired_diffs).collect();
    let mut selected: Vec<&str> = Vec::new();
    for p in &pairs {
        for a in [p.a.as_str(), p.b.as_str()] {
            if !selected.contains(&a) {
                selected.push(a);
            }
        }
    }
    Ok(render(
        "compare.html",
        context! { run => info, known, selected, pairs, charts, resamples => crate::presentation::compare::RESAMPLES },
    ))
}

/// `/leaderboard?runs=A,B`: one leaderboard over several runs (default every run).
pub async fn cross_leaderboard_page(State(r): St, Query(q): Query<super::api::RunsQuery>) -> Page {
    let (ids, rows) = super::data::rows_of_runs(&r, &q.run_ids()).await?;
    let board = super::api::leaderboard_of(&ids.join(","), &rows);
    let dims = board.dimensions();
    Ok(render(
        "leaderboard.html",
        context! { runs => ids, board, dims, ci_plot => board.ci_plot() },
    ))
}

/// `/compare?runs=A,B&agents=X,Y`: paired comparison over several runs (default every run).
pub async fn cross_compare_page(State(r): St, Query(q): Query<super::api::RunsQuery>) -> Page {
    let (ids, rows) = super::data::rows_of_runs(&r, &q.run_ids()).await?;
    let order = super::api::agent_order(&r, &ids).await?;
    let (known, pairs) = super::api::compare_rows(&rows, &order, q.agents.as_deref())?;
    let charts: Vec<_> = pairs.iter().map(plots::paired_diffs).collect();
    let mut selected: Vec<&str> = Vec::new();
    for p in &pairs {
        for a in [p.a.as_str(), p.b.as_str()] {
            if !selected.contains(&a) {
                selected.push(a);
            }
        }
    }
    Ok(render(
        "compare.html",
        context! { runs => ids, runs_param => q.runs, known, selected, pairs, charts, resamples => crate::presentation::compare::RESAMPLES },
    ))
}

/// `/runs/{run}/trials/{trial}`: everything about one trial: every artifact's first bytes
/// (linked to the raw file), the agent's files against the task's workspace.
pub async fn trial_page(State(r): St, Path((run, trial)): Path<(String, String)>) -> Page {
    let info = r.run(&run).await?;
    let detail = r.trial(&run, &trial).await?;
    let grade = r.grade(&run, &trial).await?;
    let mut bodies = Bodies::new();
    for a in &detail.artifacts {
        let max = if a.name == "trajectory" {
            MAX_TRAJECTORY_BYTES
        } else {
            MAX_INLINE_BYTES
        };
        let (bytes, cut) = r.artifact_head(&run, &trial, &a.name, max).await?;
        bodies.insert(a.name.clone(), Body { bytes, cut });
    }
    let task_dir = super::workspace::task_folder(&r.plan(&run).await?, &detail.summary.task_id);
    let workspace = task_dir
        .as_deref()
        .map(|task| super::workspace::TaskWorkspace {
            task,
            max: MAX_INLINE_BYTES,
        });
    let inputs = Inputs {
        bodies: &bodies,
        links: Links::Viewer {
            run: &run,
            trial: &trial,
        },
        workspace: workspace.as_ref().map(|w| w as &dyn Workspace),
    };
    let view = trial_view(detail, grade, &inputs);
    Ok(render(
        "trial.html",
        context! { run => info, p => "", ..Value::from_serialize(&view) },
    ))
}

fn asset(body: &'static str, mime: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(mime)),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            ),
        ],
        body,
    )
        .into_response()
}

pub async fn style() -> Response {
    asset(templates::STYLE, "text/css; charset=utf-8")
}

pub async fn script() -> Response {
    asset(templates::SCRIPT, "text/javascript; charset=utf-8")
}

/// The dashboard routes.
pub fn routes() -> axum::Router<Arc<Results>> {
    use axum::routing::get;
    axum::Router::new()
        .route("/", get(runs_page))
        .route("/runs/{run}", get(run_page))
        .route("/runs/{run}/leaderboard", get(leaderboard_page))
        .route("/runs/{run}/compare", get(compare_page))
        .route("/leaderboard", get(cross_leaderboard_page))
        .route("/compare", get(cross_compare_page))
        .route("/runs/{run}/trials/{trial}", get(trial_page))
        .route("/assets/style.css", get(style))
        .route("/assets/live.js", get(script))
}
