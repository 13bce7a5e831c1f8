//! The usage tap: watches each response on its way to the agent (scrubbing keys, bounding its
//! size), then settles the call: usage and budgets, call log, recording.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::budget::{Ledger, Reservation};
use crate::calllog::{CallLog, CallRecord};
use crate::record::RecordedCall;
use crate::secret::StreamRedactor;
use crate::trials::TrialState;
use crate::upstream::BodyStream;
use crate::wire::{TokenCounts, WireFormat, usage_from_bytes};

/// Where a settled call goes.
#[derive(Debug, Clone)]
pub(crate) struct Sinks {
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) log: Arc<CallLog>,
    pub(crate) log_bodies: bool,
    /// Largest response body passed to the agent; the stream is cut with an error beyond it.
    pub(crate) max_response_bytes: usize,
}

/// The facts of one admitted call.
#[derive(Debug)]
pub(crate) struct CallMeta {
    pub(crate) seq: u64,
    /// The worst case held on the budgets since admission, given back when the call settles.
    pub(crate) held: Reservation,
    pub(crate) format: WireFormat,
    pub(crate) model: String,
    pub(crate) provider: String,
    pub(crate) request: Value,
    pub(crate) hash: String,
    pub(crate) streamed: bool,
    pub(crate) started: Instant,
    pub(crate) started_unix_ms: u64,
}

/// Watches a response body on its way out: redacts secrets, keeps the bytes for usage and
/// recording, and settles the call when the body ends or the agent hangs up.
pub(crate) struct Tap {
    sinks: Sinks,
    trial: Arc<TrialState>,
    meta: CallMeta,
    status: u16,
    headers: Vec<(String, String)>,
    chunks: Vec<Bytes>,
    size: usize,
    redactor: StreamRedactor,
    finished: bool,
}

impl Tap {
    pub(crate) fn new(
        sinks: Sinks,
        trial: Arc<TrialState>,
        meta: CallMeta,
        status: u16,
        headers: Vec<(String, String)>,
        redactor: StreamRedactor,
    ) -> Self {
        Self {
            sinks,
            trial,
            meta,
            status,
            headers,
            chunks: Vec::new(),
            size: 0,
            redactor,
            finished: false,
        }
    }

    fn settle(&mut self, disconnected: bool, error: Option<String>) {
        if self.finished {
            return;
        }
        self.finished = true;
        let m = &self.meta;
        let body: Vec<u8> = self.chunks.iter().flat_map(|c| c.iter().copied()).collect();
        let tokens = if (200..300).contains(&self.status) {
            usage_from_bytes(m.format, &body).unwrap_or_default()
        } else {
            TokenCounts::default()
        };
        let cost = self
            .trial
            .meter
            .settle(&self.sinks.ledger, &m.held, &m.model, &tokens);
        if !(200..300).contains(&self.status) {
            self.trial.meter.count_error();
        }
        if self.sinks.log_bodies {
            tracing::debug!(trial_id = %self.trial.id, body = %String::from_utf8_lossy(&body), "model response");
        }
        tracing::info!(
            trial_id = %self.trial.id, seq = m.seq, model = %m.model, provider = %m.provider, status = self.status,
            input_tokens = tokens.input_tokens, output_tokens = tokens.output_tokens,
            disconnected, "model call"
        );
        if let Some(rec) = &self.trial.recorder {
            rec.append(&RecordedCall {
                seq: m.seq,
                wire: m.format,
                model: m.model.clone(),
                request_sha256: m.hash.clone(),
                request: m.request.clone(),
                status: self.status,
                content_type: self
                    .headers
                    .iter()
                    .find(|(k, _)| k == "content-type")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default(),
                headers: self.headers.clone(),
                chunks_b64: RecordedCall::encode_chunks(&self.chunks),
            });
        }
        let record = CallRecord {
            seq: m.seq,
            trial_id: self.trial.id.clone(),
            wire: m.format,
            model: m.model.clone(),
            provider: m.provider.clone(),
            status: self.status,
            streamed: m.streamed,
            tokens,
            cost_usd: cost.unwrap_or(0.0),
            started_unix_ms: m.started_unix_ms,
            duration_ms: m.started.elapsed().as_millis() as u64,
            client_disconnected: disconnected,
            error,
        };
        self.sinks.log.push(&self.trial.calls, record);
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.settle(
            true,
            Some("the agent disconnected before the response ended".into()),
        );
    }
}

pub(crate) fn tapped(
    inner: BodyStream,
    tap: Tap,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures::stream::unfold(Some((inner, tap)), |st| async move {
        let (mut inner, mut tap) = st?;
        loop {
            match inner.next().await {
                Some(Ok(chunk)) => {
                    tap.size += chunk.len();
                    if tap.size > tap.sinks.max_response_bytes {
                        let msg = format!(
                            "the provider's answer is larger than the proxy's limit of {} bytes (max_response_bytes)",
                            tap.sinks.max_response_bytes
                        );
                        tap.settle(false, Some(msg.clone()));
                        return Some((Err(std::io::Error::other(msg)), None));
                    }
                    let out = Bytes::from(tap.redactor.push(&chunk));
                    if out.is_empty() {
                        continue;
                    }
                    tap.chunks.push(out.clone());
                    return Some((Ok(out), Some((inner, tap))));
                }
                Some(Err(e)) => {
                    let msg = format!("the provider stream broke: {e}");
                    tap.settle(false, Some(msg));
                    return Some((Err(e), None));
                }
                None => {
                    let rest = tap.redactor.finish();
                    if !rest.is_empty() {
                        tap.chunks.push(Bytes::from(rest.clone()));
                    }
                    tap.settle(false, None);
                    if rest.is_empty() {
                        return None;
                    }
                    // Bytes held back at the very end (a partial secret prefix that never completed).
                    return Some((Ok(Bytes::from(rest)), None));
                }
            }
        }
    })
}
