//! The exporter's own thread: takes spans from the bounded queue, and posts them in
//! batches as OTLP/HTTP protobuf (`ExportTraceServiceRequest`, content type
//! `application/x-protobuf`, <https://opentelemetry.io/docs/specs/otlp/#otlphttp>) on a
//! runtime of its own, so neither encoding nor a slow or dead receiver ever runs on the
//! threads that send and time requests. A failed post is counted and said once on stderr;
//! it is not retried (a benchmark's spans are worth less than its own timing).
//!
//! The receiver's answer is untrusted: a redirect is a failure, never followed (spans go
//! to the URL the user gave, nowhere else), and at most [`MAX_ANSWER`] of its body is
//! read, then the connection is dropped (an endless 200 body once filled the run's
//! memory in 4 s).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::InstrumentationScope;
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use tokio::sync::{mpsc, oneshot};

/// Spans in one post: OTLP receivers take far more; this keeps a body near 1 MB.
const BATCH_SPANS: usize = 512;
/// The longest a span waits in a batch that is not full.
const BATCH_DELAY: Duration = Duration::from_secs(1);
/// One post, connection included.
pub(super) const POST_TIMEOUT: Duration = Duration::from_secs(5);
/// Most of an answer's body read: an `ExportTraceServiceResponse` is a count of rejected
/// spans and an error message, a few bytes.
const MAX_ANSWER: usize = 64 << 10;

/// What became of the spans, counted as it happens.
#[derive(Default)]
pub(super) struct Counts {
    /// Handed to the queue.
    pub(super) queued: AtomicU64,
    /// Not queued: the queue was full.
    pub(super) dropped: AtomicU64,
    /// Accepted by the receiver.
    pub(super) exported: AtomicU64,
    /// In posts that failed, or refused by the receiver (its partial success).
    pub(super) failed: AtomicU64,
    /// A failure was said on stderr.
    warned: AtomicBool,
    /// Why the first post failed, as said on stderr (result.json keeps it).
    pub(super) first_error: std::sync::OnceLock<String>,
}

/// Where the thread posts, and what it counts.
pub(super) struct Delivery {
    pub(super) url: String,
    pub(super) counts: Arc<Counts>,
}

impl Delivery {
    /// Posts what `queue` brings until `flush` is heard (or every sender is gone), then
    /// what is left in the queue; returns when all is posted.
    pub(super) async fn run(
        self,
        mut queue: mpsc::Receiver<Span>,
        mut flush: oneshot::Receiver<()>,
    ) {
        let client = reqwest::Client::builder()
            .timeout(POST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        let http = match client.build() {
            Ok(http) => http,
            Err(e) => return self.warn(&format!("cannot build its HTTP client: {e}")),
        };
        let mut batch = Vec::with_capacity(BATCH_SPANS);
        let mut tick = tokio::time::interval(BATCH_DELAY);
        loop {
            tokio::select! {
                biased;
                _ = &mut flush => break,
                span = queue.recv() => match span {
                    Some(span) => {
                        batch.push(span);
                        if batch.len() < BATCH_SPANS {
                            continue;
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => if batch.is_empty() {
                    continue;
                },
            }
            self.post(&http, std::mem::take(&mut batch)).await;
        }
        while let Ok(span) = queue.try_recv() {
            batch.push(span);
        }
        while !batch.is_empty() {
            let part = batch.drain(..batch.len().min(BATCH_SPANS)).collect();
            self.post(&http, part).await;
        }
    }

    /// One post of `spans`, counted.
    async fn post(&self, http: &reqwest::Client, spans: Vec<Span>) {
        let n = spans.len() as u64;
        let body = request(spans).encode_to_vec();
        let sent = http
            .post(&self.url)
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(body)
            .send()
            .await;
        let refused = match sent {
            Ok(resp) if resp.status().is_success() => match answer(resp).await {
                Ok(body) => rejected(&body).min(n),
                Err(why) => {
                    self.warn(&why);
                    n
                }
            },
            Ok(resp) if resp.status().is_redirection() => {
                let to = resp
                    .headers()
                    .get(http::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .map(|l| crate::safeguards::redact::excerpt(l, 200))
                    .unwrap_or_default();
                self.warn(&format!(
                    "it answered HTTP {} (Location: {to:?}), a redirect, which is not followed: give the receiver's own URL",
                    resp.status()
                ));
                n
            }
            Ok(resp) => {
                self.warn(&format!("it answered HTTP {}", resp.status()));
                n
            }
            Err(e) => {
                let reason = crate::measuring::client::openai::chain(&e);
                let reason = crate::safeguards::redact::string(reason);
                self.warn(&reason);
                n
            }
        };
        let c = &self.counts;
        c.exported.fetch_add(n - refused, Ordering::Relaxed);
        c.failed.fetch_add(refused, Ordering::Relaxed);
    }

    /// The first failure, on one line; the run's last lines count them all.
    fn warn(&self, reason: &str) {
        let _ = self.counts.first_error.set(reason.to_string());
        if !self.counts.warned.swap(true, Ordering::Relaxed) {
            crate::errln!(
                "warning: --otlp: spans not exported to {}: {reason} (the run goes on; its last lines count what was lost)",
                crate::safeguards::redact::string(self.url.clone())
            );
        }
    }
}

/// The body of a successful answer, read up to [`MAX_ANSWER`]: past it the answer is no
/// receiver's, and the response (its connection with it) is dropped unread.
async fn answer(mut resp: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) if body.len() + chunk.len() > MAX_ANSWER => {
                return Err(format!(
                    "its answer's body passed {} KiB (an OTLP receiver answers a few bytes); it was not read further",
                    MAX_ANSWER >> 10
                ))
            }
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => return Ok(body),
            Err(e) => {
                let reason = crate::measuring::client::openai::chain(&e);
                return Err(crate::safeguards::redact::string(reason));
            }
        }
    }
}

/// Spans the receiver refused, as its answer's `partial_success` says (an empty answer
/// took them all).
fn rejected(body: &[u8]) -> u64 {
    ExportTraceServiceResponse::decode(body)
        .ok()
        .and_then(|r| r.partial_success)
        .map_or(0, |p| p.rejected_spans.max(0) as u64)
}

/// `spans` from the `runner` service, in one scope.
fn request(spans: Vec<Span>) -> ExportTraceServiceRequest {
    let version = env!("CARGO_PKG_VERSION");
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![
                    super::span::text("service.name", "runner"),
                    super::span::text("service.version", version),
                ],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "runner".into(),
                    version: version.into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}
