//! One model call, as four steps: parse (read the agent's body, bounded in size and time) →
//! admit (route the model, check the wire format, charge the budget) → forward (script, replay
//! or provider) → account (the usage tap settles the call when the body ends).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::budget::{Ledger, Refused, Reservation};
use crate::calllog::{CallLog, CallRecord};
use crate::record::request_hash;
use crate::routing::{Provider, Routes, Target};
use crate::scripted;
use crate::tap::{CallMeta, Sinks, Tap, tapped};
use crate::trials::TrialState;
use crate::upstream::{Outgoing, ProviderResponse, Upstream, bytes_stream};
use crate::wire::{
    ErrorKind, TokenCounts, WireFormat, error_body, max_output_tokens, set_max_output_tokens,
};

/// The owners a call needs: each step takes only its own.
#[derive(Debug)]
pub(crate) struct Owners {
    pub(crate) routes: Routes,
    pub(crate) upstream: Upstream,
    pub(crate) sinks: Sinks,
    /// Largest request body read from an agent.
    pub(crate) max_body_bytes: usize,
    /// Longest time an agent may take to send its request body.
    pub(crate) body_timeout: Duration,
    /// The output cap reserved for (and sent upstream with) a request that sets none.
    pub(crate) output_cap_when_unset: u64,
}

/// What the agent sent besides the body.
pub(crate) struct Incoming {
    pub(crate) headers: HeaderMap,
    pub(crate) uri: Uri,
}

/// The call being served: whose, in which dialect, since when.
pub(crate) struct Call {
    pub(crate) trial: Arc<TrialState>,
    pub(crate) format: WireFormat,
    pub(crate) count_tokens: bool,
    started: Instant,
    started_unix_ms: u64,
}

/// A request the proxy answers itself with a wire-format error.
struct Refusal {
    kind: ErrorKind,
    message: String,
    model: String,
    streamed: bool,
}

impl Refusal {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            model: "-".into(),
            streamed: false,
        }
    }

    fn of(parsed: &Parsed, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            model: parsed.model.clone(),
            streamed: parsed.stream,
        }
    }
}

/// The agent's request, parsed.
struct Parsed {
    raw: Bytes,
    json: Value,
    model: String,
    stream: bool,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) fn json_response(status: u16, body: &Value) -> Response {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn wire_error(format: WireFormat, kind: ErrorKind, message: &str) -> Response {
    let (status, body) = error_body(format, kind, message);
    json_response(status, &body)
}

impl Call {
    pub(crate) fn new(trial: Arc<TrialState>, format: WireFormat, count_tokens: bool) -> Self {
        Self {
            trial,
            format,
            count_tokens,
            started: Instant::now(),
            started_unix_ms: now_ms(),
        }
    }

    /// Answers with a wire-format error, counted and logged as a refused call.
    fn refuse(&self, log: &CallLog, r: Refusal) -> Response {
        self.trial.meter.count_error();
        tracing::warn!(model = %r.model, kind = ?r.kind, message = %r.message, "refused model call");
        let (status, body) = error_body(self.format, r.kind, &r.message);
        let busy = r.kind == ErrorKind::Busy;
        log.push(
            &self.trial.calls,
            CallRecord {
                seq: 0, // assigned in log order
                trial_id: self.trial.id.clone(),
                wire: self.format,
                model: r.model,
                provider: "-".into(),
                status,
                streamed: r.streamed,
                tokens: TokenCounts::default(),
                cost_usd: 0.0,
                started_unix_ms: self.started_unix_ms,
                duration_ms: self.started.elapsed().as_millis() as u64,
                client_disconnected: false,
                error: Some(r.message),
            },
        );
        let mut response = json_response(status, &body);
        if busy {
            // What the providers send with a rate-limit error: the CLIs wait, then retry.
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// Serves one authenticated call.
pub(crate) async fn serve(
    owners: Arc<Owners>,
    call: Call,
    incoming: Incoming,
    body: Body,
) -> Response {
    match serve_steps(&owners, &call, incoming, body).await {
        Ok(response) => response,
        Err(refusal) => call.refuse(&owners.sinks.log, refusal),
    }
}

async fn serve_steps(
    owners: &Arc<Owners>,
    call: &Call,
    incoming: Incoming,
    body: Body,
) -> Result<Response, Refusal> {
    let parsed = parse(owners, body).await?;
    if owners.sinks.log_bodies {
        tracing::debug!(path = %incoming.uri, headers = ?redacted_headers(&incoming.headers), body = %String::from_utf8_lossy(&parsed.raw), "model request");
    }
    let target = route(&owners.routes, call, &parsed)?;
    if call.count_tokens {
        return Ok(count_tokens(&owners.upstream, call, &incoming, &parsed, &target).await);
    }
    let ledger = &owners.sinks.ledger;
    let (turn, worst) = worst_case(owners, call, &parsed, &target);
    let seq = admit(ledger, call, &parsed, &worst)?;
    let response = match forward(owners, call, &incoming, &parsed, &target, turn).await {
        Ok(r) => r,
        Err(refusal) => {
            call.trial.meter.release(ledger, &worst);
            return Err(refusal);
        }
    };
    let meta = CallMeta {
        seq,
        held: worst,
        format: call.format,
        hash: request_hash(call.format, &parsed.json),
        model: parsed.model,
        provider: target.label(),
        request: parsed.json,
        streamed: parsed.stream,
        started: call.started,
        started_unix_ms: call.started_unix_ms,
    };
    Ok(account(owners, call, meta, response))
}

/// Step 1: reads the body (bounded in size and time) and finds the model and streaming flag.
async fn parse(owners: &Owners, body: Body) -> Result<Parsed, Refusal> {
    let limit = owners.max_body_bytes;
    let raw =
        match tokio::time::timeout(owners.body_timeout, axum::body::to_bytes(body, limit)).await {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => {
                return Err(Refusal::new(
                    ErrorKind::BadRequest,
                    format!("cannot read the request body (limit {limit} bytes): {e}"),
                ));
            }
            Err(_) => {
                return Err(Refusal::new(
                    ErrorKind::BadRequest,
                    format!(
                        "the request body did not arrive within {} s",
                        owners.body_timeout.as_secs()
                    ),
                ));
            }
        };
    let json: Value = match serde_json::from_slice(&raw) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return Err(Refusal::new(
                ErrorKind::BadRequest,
                "the request body must be a JSON object",
            ));
        }
        Err(e) => {
            return Err(Refusal::new(
                ErrorKind::BadRequest,
                format!("the request body is not valid JSON: {e}"),
            ));
        }
    };
    let Some(model) = json.get("model").and_then(Value::as_str).map(String::from) else {
        return Err(Refusal::new(
            ErrorKind::BadRequest,
            "the request has no \"model\" string",
        ));
    };
    let stream = json.get("stream").and_then(Value::as_bool).unwrap_or(false);
    Ok(Parsed {
        raw,
        json,
        model,
        stream,
    })
}

/// Step 2a: where the request goes, refusing a provider that does not speak the agent's API.
fn route(routes: &Routes, call: &Call, parsed: &Parsed) -> Result<Target, Refusal> {
    let target = routes
        .route(
            &call.trial.options,
            call.trial.replay.is_some(),
            &parsed.model,
        )
        .map_err(|(kind, message)| Refusal::of(parsed, kind, message))?;
    if let Target::Upstream(p) = &target
        && !p.speaks(call.format)
    {
        return Err(Refusal::of(
            parsed,
            ErrorKind::BadRequest,
            format!(
                "model {:?} is served by provider {:?}, which does not speak this API; use its own endpoint",
                parsed.model, p.name
            ),
        ));
    }
    Ok(target)
}

/// Step 2b: the most the call can cost: a script's turn exactly (planned here, so it is
/// returned for `forward`), otherwise every request byte as an input token (a byte-level
/// tokenizer never makes more tokens than bytes) billed at the dearest input rate, plus the
/// request's output cap, or [`Owners::output_cap_when_unset`] when it sets none (that cap is
/// then sent upstream, so the provider cannot exceed it).
fn worst_case(
    owners: &Owners,
    call: &Call,
    parsed: &Parsed,
    target: &Target,
) -> (Option<scripted::Turn>, Reservation) {
    let ledger = &owners.sinks.ledger;
    if let Target::Script { name, script } = target {
        let turn = scripted::plan_turn(script, name, call.format, &parsed.json);
        let tokens = TokenCounts {
            input_tokens: turn.usage.input_tokens,
            output_tokens: turn.usage.output_tokens,
            ..Default::default()
        };
        let worst = Reservation {
            tokens: tokens.total(),
            cost_usd: ledger.cost(&parsed.model, &tokens).unwrap_or(0.0),
        };
        return (Some(turn), worst);
    }
    let cap = max_output_tokens(call.format, &parsed.json).unwrap_or(owners.output_cap_when_unset);
    let worst = ledger.worst_case(&parsed.model, parsed.raw.len() as u64, cap);
    (None, worst)
}

/// Step 2c: holds the call's worst case on the trial's and the run's budgets.
fn admit(
    ledger: &Ledger,
    call: &Call,
    parsed: &Parsed,
    worst: &Reservation,
) -> Result<u64, Refusal> {
    call.trial
        .meter
        .admit(ledger, worst)
        .map_err(|refused| match refused {
            Refused::Exhausted(reason) => Refusal::of(
                parsed,
                ErrorKind::BudgetExhausted,
                format!("{reason}; the trial's model budget is exhausted"),
            ),
            Refused::Busy(reason) => Refusal::of(parsed, ErrorKind::Busy, reason),
        })
}

/// Step 3: the answer from the script, the replay log or the provider.
async fn forward(
    owners: &Owners,
    call: &Call,
    incoming: &Incoming,
    parsed: &Parsed,
    target: &Target,
    turn: Option<scripted::Turn>,
) -> Result<ProviderResponse, Refusal> {
    let upstream = &owners.upstream;
    match target {
        Target::Script { name, script } => {
            let turn = turn
                .unwrap_or_else(|| scripted::plan_turn(script, name, call.format, &parsed.json));
            let r = scripted::render(call.format, &parsed.model, &turn, parsed.stream);
            Ok(ProviderResponse {
                status: 200,
                headers: vec![(
                    http::header::CONTENT_TYPE,
                    HeaderValue::from_static(r.content_type),
                )],
                body: bytes_stream(r.chunks),
            })
        }
        Target::Replay => {
            let hash = request_hash(call.format, &parsed.json);
            match call.trial.replay_take(call.format, &hash) {
                Some(recorded) => Ok(ProviderResponse {
                    status: recorded.status,
                    headers: recorded.response_headers(),
                    body: bytes_stream(recorded.chunks().into_iter().map(Bytes::from).collect()),
                }),
                None => Err(Refusal::of(
                    parsed,
                    ErrorKind::Unavailable,
                    "the replay recording has no call left for this request",
                )),
            }
        }
        Target::Upstream(provider) => {
            let mut body = parsed.json.clone();
            if max_output_tokens(call.format, &body).is_none() {
                // The cap the call was admitted with binds the provider too.
                set_max_output_tokens(call.format, &mut body, owners.output_cap_when_unset);
            }
            if call.format == WireFormat::OpenAiChat
                && parsed.stream
                && body.get("stream_options").is_none()
            {
                // So the proxy can count tokens of streamed chat completions.
                body["stream_options"] = json!({"include_usage": true});
            }
            let out = Outgoing {
                format: call.format,
                uri: &incoming.uri,
                headers: &incoming.headers,
                body: &body,
            };
            upstream
                .forward(provider, &out)
                .await
                .map_err(|message| Refusal::of(parsed, ErrorKind::Upstream, message))
        }
    }
}

/// Step 4: streams the answer to the agent through the usage tap, which settles the call.
fn account(owners: &Owners, call: &Call, meta: CallMeta, resp: ProviderResponse) -> Response {
    let status = resp.status;
    let mut builder =
        Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY));
    for (k, v) in &resp.headers {
        builder = builder.header(k, v);
    }
    let headers = resp
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let tap = Tap::new(
        owners.sinks.clone(),
        call.trial.clone(),
        meta,
        status,
        headers,
        owners.upstream.redactor().stream(),
    );
    builder
        .body(Body::from_stream(tapped(resp.body, tap)))
        .unwrap_or_else(|e| {
            wire_error(
                call.format,
                ErrorKind::Upstream,
                &format!("cannot build the response: {e}"),
            )
        })
}

/// `count_tokens`: forwarded to an Anthropic provider, otherwise a deterministic estimate.
async fn count_tokens(
    upstream: &Upstream,
    call: &Call,
    incoming: &Incoming,
    parsed: &Parsed,
    target: &Target,
) -> Response {
    let Target::Upstream(provider @ Provider { .. }) = target else {
        // The script, replay and mismatched providers: 1 token per 4 bytes.
        return json_response(200, &json!({"input_tokens": parsed.raw.len().div_ceil(4)}));
    };
    if provider.kind != crate::config::ProviderKind::Anthropic {
        return json_response(200, &json!({"input_tokens": parsed.raw.len().div_ceil(4)}));
    }
    let out = Outgoing {
        format: call.format,
        uri: &incoming.uri,
        headers: &incoming.headers,
        body: &parsed.json,
    };
    match upstream.forward(provider, &out).await {
        Ok(r) => {
            let mut body = Vec::new();
            let mut s = r.body;
            while let Some(Ok(c)) = s.next().await {
                body.extend_from_slice(&c);
            }
            let body = upstream.redactor().redact(&body);
            let mut resp = Response::new(Body::from(body));
            *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY);
            for (k, v) in r.headers {
                resp.headers_mut().insert(k, v);
            }
            resp
        }
        Err(m) => wire_error(call.format, ErrorKind::Upstream, &m),
    }
}

fn redacted_headers(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(k, v)| {
            let sensitive = matches!(k.as_str(), "authorization" | "x-api-key");
            (
                k.to_string(),
                if sensitive {
                    "[redacted]".into()
                } else {
                    v.to_str().unwrap_or("?").to_string()
                },
            )
        })
        .collect()
}
