//! `--otlp URL`: one OpenTelemetry span per request, exported over OTLP/HTTP with protobuf
//! bodies, so the client's view of each request sits beside the server's own spans in the
//! same trace (their ids are the request's `traceparent`).
//!
//! Nothing here runs on the request path: a record builder turns each finished record into
//! a span (`span`) and puts it in a bounded queue without waiting, a full queue drops it
//! (counted), and the exporter's own thread posts the queue in batches (`delivery`). A
//! receiver that fails is one warning line; the run goes on and its last lines count what
//! was lost. The run's end flushes the queue, bounded in time.

mod delivery;
mod span;

use std::sync::atomic::Ordering;
use std::sync::{mpsc as std_mpsc, Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use opentelemetry_proto::tonic::trace::v1::Span;
use tokio::sync::{mpsc, oneshot};

use crate::measuring::engine::RecordTap;
use crate::measuring::metrics::RequestRecord;
use delivery::{Counts, Delivery};

/// Spans waiting for the exporter's thread: about 1 KB each, so at most a few MB behind a
/// slow receiver; past that they are dropped and counted.
const QUEUE_SPANS: usize = 8192;
/// The longest the run's end waits for the last spans to be posted.
const FLUSH_LIMIT: Duration = Duration::from_secs(10);

/// `--otlp`'s URL: http or https with a host (the path is the receiver's, usually
/// `/v1/traces`, and is kept as given).
pub fn parse_url(text: &str) -> Result<String, String> {
    match reqwest::Url::parse(text.trim()) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host_str().is_some() => {
            Ok(text.trim().to_string())
        }
        _ => Err("expected an http or https URL, e.g. http://127.0.0.1:4318/v1/traces".into()),
    }
}

/// The exporter of one run: the engine hands it every finished record.
pub struct OtlpExporter {
    queue: mpsc::Sender<Span>,
    counts: Arc<Counts>,
    /// Tells the thread to post what is queued and stop; taken by `finish`.
    flush: Mutex<Option<oneshot::Sender<()>>>,
    /// The thread says it is done.
    done: Mutex<std_mpsc::Receiver<()>>,
    url: String,
}

/// What became of a run's spans.
#[derive(Clone, Debug, PartialEq)]
pub struct OtlpSummary {
    /// The receiver, its credentials hidden.
    pub url: String,
    /// One per finished request.
    pub spans: u64,
    pub exported: u64,
    /// Not queued: the exporter was behind.
    pub dropped: u64,
    /// Posted and not accepted (a failed post, or refused by the receiver).
    pub failed: u64,
    /// Still queued or being posted when the flush limit passed.
    pub unflushed: u64,
    /// Why the first failed post failed (the receiver's HTTP status, a refused
    /// connection, a timeout); `None` when none failed.
    pub first_error: Option<String>,
}

impl OtlpExporter {
    /// Starts the exporter's thread for the receiver at `url`.
    pub fn start(url: &str) -> std::io::Result<Arc<OtlpExporter>> {
        let (queue, rx) = mpsc::channel(QUEUE_SPANS);
        let (flush, flush_rx) = oneshot::channel();
        let (done_tx, done) = std_mpsc::channel();
        let counts = Arc::new(Counts::default());
        let delivery = Delivery {
            url: url.to_string(),
            counts: counts.clone(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name("otlp".into())
            .spawn(move || {
                rt.block_on(delivery.run(rx, flush_rx));
                let _ = done_tx.send(());
            })?;
        Ok(Arc::new(OtlpExporter {
            queue,
            counts,
            flush: Mutex::new(Some(flush)),
            done: Mutex::new(done),
            url: crate::safeguards::redact::string(url.to_string()),
        }))
    }

    /// Posts what is still queued, waiting at most [`FLUSH_LIMIT`]; what became of the
    /// run's spans.
    pub fn finish(&self) -> OtlpSummary {
        if let Some(flush) = self
            .flush
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = flush.send(());
        }
        let done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = done.recv_timeout(FLUSH_LIMIT);
        let c = &self.counts;
        let read = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
        let (queued, exported, failed) = (read(&c.queued), read(&c.exported), read(&c.failed));
        OtlpSummary {
            url: self.url.clone(),
            spans: queued + read(&c.dropped),
            exported,
            dropped: read(&c.dropped),
            failed,
            unflushed: queued.saturating_sub(exported + failed),
            first_error: c.first_error.get().cloned(),
        }
    }
}

impl RecordTap for OtlpExporter {
    fn finished(&self, record: &RequestRecord, phase_started: SystemTime) {
        let Some(span) = span::span(record, phase_started) else {
            return;
        };
        let counter = match self.queue.try_send(span) {
            Ok(()) => &self.counts.queued,
            Err(_) => &self.counts.dropped,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

impl OtlpSummary {
    /// The run's last line about its spans: a warning when any was lost.
    pub fn line(&self) -> String {
        if self.lost() == 0 {
            return format!("otlp: {} spans exported to {}", self.spans, self.url);
        }
        format!(
            "warning: otlp: {} of {} spans exported to {}; {} dropped (the exporter was behind), {} failed, {} not flushed in {}s",
            self.exported,
            self.spans,
            self.url,
            self.dropped,
            self.failed,
            self.unflushed,
            FLUSH_LIMIT.as_secs()
        )
    }

    /// Whether every span reached the receiver.
    pub fn complete(&self) -> bool {
        self.exported == self.spans
    }

    /// Spans that did not reach the receiver, for whatever reason.
    pub fn lost(&self) -> u64 {
        self.spans - self.exported.min(self.spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_http_or_https_with_a_host() {
        assert!(parse_url("http://127.0.0.1:4318/v1/traces").is_ok());
        assert!(parse_url("https://collector.example/v1/traces").is_ok());
        for bad in [
            "127.0.0.1:4318",
            "grpc://h:4317",
            "http://",
            "file:///tmp/x",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    /// A receiver that accepts and never answers holds the exporter's thread in its first
    /// post: the queue fills, and what does not fit is dropped and counted, at once.
    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let stuck = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1/traces", stuck.local_addr().expect("addr"));
        let exporter = OtlpExporter::start(&url).expect("exporter");
        let record: RequestRecord = serde_json::from_value(serde_json::json!({
            "phase": 0, "index": 0, "trace_id": "ab".repeat(16), "span_id": "0c".repeat(8),
            "scheduled_ns": 0, "sent_ns": 0, "end_ns": 1, "chunks": [],
            "input_tokens": 1, "output_tokens": 0, "text_tokens": 0,
        }))
        .expect("a record");
        let offered = QUEUE_SPANS as u64 + 2_000;
        for _ in 0..offered {
            exporter.finished(&record, SystemTime::now());
        }
        let c = &exporter.counts;
        let (queued, dropped) = (
            c.queued.load(Ordering::Relaxed),
            c.dropped.load(Ordering::Relaxed),
        );
        assert_eq!(queued + dropped, offered);
        // At most one batch left the queue for the stuck post.
        assert!(
            dropped >= offered - QUEUE_SPANS as u64 - 512,
            "{dropped} dropped"
        );
        let summary = OtlpSummary {
            url,
            spans: offered,
            exported: 0,
            dropped,
            failed: 0,
            unflushed: queued,
            first_error: None,
        };
        assert!(!summary.complete());
        assert!(summary
            .line()
            .starts_with(&format!("warning: otlp: 0 of {offered} spans")));
    }
}
