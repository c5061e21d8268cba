//! `--live-metrics ADDR`: the run's own figures at `http://ADDR/metrics` while it goes on,
//! in the Prometheus text format (0.0.4, written by the Prometheus project's
//! `prometheus-client` crate), so a Prometheus or Grafana can scrape the benchmark itself.
//!
//! Names are result.json's, prefixed `runner_`, with the phase's name as the `phase`
//! label: the counters of the running phase (`runner_sent_total`,
//! `runner_completed_total`, `runner_failed_total`, `runner_total_output_tokens_total`)
//! and gauges over its last seconds (`engine::WINDOW`): `runner_request_throughput`,
//! `runner_output_throughput`, and `runner_median_<key>_ms` / `runner_p99_<key>_ms` for
//! TTFT, ITL, E2EL, send lateness and client delay (the `<stat>_<key>_ms` names of
//! `--threshold`).
//!
//! Loopback addresses only: the run's figures are for the machine that runs it, and an
//! open port on a benchmark host is nobody's intent. Bounded, so a slow or hostile
//! scraper cannot hurt the run: served on a thread with a runtime of its own (never the
//! engine's), at most [`MAX_CONNECTIONS`] connections at once, each answered once and
//! closed, or dropped after [`CONNECTION_LIMIT`]; the engine's figures are read at most
//! once per [`super::progress::TICK`] however often it is scraped.
//!
//! Nor can idle or slow clients starve a scrape: connections are taken from the kernel's
//! queue as they come, and one that finds every slot taken sheds the oldest connection
//! still sending its request's headers (1,000 idle connections from a local process
//! once held all the slots, and the queue behind them, for a whole run).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::encoding::{prometheus_text, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{oneshot, Semaphore};

use super::progress::TICK;
use crate::measuring::engine::{LiveView, WindowQuantiles, WindowStats};
use crate::workloads::scenario::Snapshot;

/// Connections open at once; a new one past them sheds the oldest still sending its
/// headers (enough that a scrape, whose request comes at once, is read before newer
/// connections shed it).
const MAX_CONNECTIONS: usize = 16;
/// The longest a connection may take, request and answer together.
const CONNECTION_LIMIT: Duration = Duration::from_secs(5);
/// The longest a client may take to send its request's headers.
const HEADER_LIMIT: Duration = Duration::from_secs(2);

/// `--live-metrics`'s value: a socket address on loopback.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = s
        .parse()
        .map_err(|_| format!("expected a loopback IP:PORT such as 127.0.0.1:9464, got `{s}`"))?;
    if !addr.ip().is_loopback() && !is_mapped_loopback(addr.ip()) {
        return Err(format!(
            "`{s}` is not a loopback address: the run's metrics are served on 127.0.0.1 or [::1] only"
        ));
    }
    Ok(addr)
}

fn is_mapped_loopback(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()))
}

#[derive(Debug, thiserror::Error)]
pub enum LiveMetricsError {
    #[error("--live-metrics {0}: the address is in use (another process listens there); pick another port")]
    InUse(SocketAddr),
    #[error("--live-metrics {0}: cannot listen there: {1}")]
    Listen(SocketAddr, std::io::Error),
}

/// The running server; dropping it stops it.
pub struct LiveMetrics {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl LiveMetrics {
    /// Listens on `addr` now (so a port in use is an error before the run), then serves
    /// `live`'s figures until dropped.
    pub fn start(addr: SocketAddr, live: LiveView) -> Result<LiveMetrics, LiveMetricsError> {
        let listen = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::AddrInUse => LiveMetricsError::InUse(addr),
            _ => LiveMetricsError::Listen(addr, e),
        };
        let listener = std::net::TcpListener::bind(addr).map_err(listen)?;
        listener.set_nonblocking(true).map_err(listen)?;
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("live-metrics".into())
            .spawn(move || serve(listener, live, stopped))
            .map_err(listen)?;
        Ok(LiveMetrics {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for LiveMetrics {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The text last rendered, and when: scrapes within a [`TICK`] of it get it again.
struct Cached {
    live: LiveView,
    text: Option<(Instant, Bytes)>,
}

impl Cached {
    fn text(&mut self) -> Bytes {
        if let Some((at, text)) = &self.text {
            if at.elapsed() < TICK {
                return text.clone();
            }
        }
        let text = Bytes::from(match self.live.phase_spec() {
            Some(spec) => render(&spec.name, &self.live.snapshot(), &self.live.window()),
            None => String::new(),
        });
        self.text = Some((Instant::now(), text.clone()));
        text
    }
}

fn serve(listener: std::net::TcpListener, live: LiveView, stopped: oneshot::Receiver<()>) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        let cached = Arc::new(Mutex::new(Cached { live, text: None }));
        tokio::select! {
            _ = stopped => {}
            _ = accept(listener, cached) => {}
        }
    });
}

/// The connections that have not yet sent their request's headers, oldest first, each
/// with the sender that sheds it.
type Waiting = Arc<Mutex<VecDeque<(u64, oneshot::Sender<()>)>>>;

fn waiting(w: &Waiting) -> std::sync::MutexGuard<'_, VecDeque<(u64, oneshot::Sender<()>)>> {
    w.lock().unwrap_or_else(|e| e.into_inner())
}

async fn accept(listener: tokio::net::TcpListener, cached: Arc<Mutex<Cached>>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let shed_list = Waiting::default();
    for id in 0u64.. {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors, say: wait instead of spinning on the error.
            Err(_) => {
                tokio::time::sleep(TICK).await;
                continue;
            }
        };
        if slots.available_permits() == 0 {
            if let Some((_, shed)) = waiting(&shed_list).pop_front() {
                let _ = shed.send(());
            }
        }
        // Waits only while every connection is being answered (each within its limit).
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (shed, rx) = oneshot::channel();
        waiting(&shed_list).push_back((id, shed));
        let shed = Shed {
            id,
            list: shed_list.clone(),
            rx,
        };
        tokio::spawn(connection(stream, cached.clone(), shed, slot));
        // Lets the connections read what has come before the next is taken.
        tokio::task::yield_now().await;
    }
}

/// A connection's place on the list of those that can be shed.
struct Shed {
    id: u64,
    list: Waiting,
    /// Hears when it is shed.
    rx: oneshot::Receiver<()>,
}

/// Serves one connection until it is answered, past its limits, or shed; a request's
/// headers take it off the list of connections that can be shed.
async fn connection(
    stream: tokio::net::TcpStream,
    cached: Arc<Mutex<Cached>>,
    shed: Shed,
    slot: tokio::sync::OwnedSemaphorePermit,
) {
    let (id, list) = (shed.id, shed.list.clone());
    let service = hyper::service::service_fn(move |req| {
        waiting(&list).retain(|(i, _)| *i != id);
        let answer = respond(&req, &cached);
        async move { Ok::<_, std::convert::Infallible>(answer) }
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_LIMIT)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = tokio::time::timeout(CONNECTION_LIMIT, connection) => {}
        // Shed (a dropped sender is no shedding: the request's headers came).
        Ok(()) = shed.rx => {}
    }
    waiting(&shed.list).retain(|(i, _)| *i != id);
    drop(slot);
}

fn respond<B>(req: &Request<B>, cached: &Mutex<Cached>) -> Response<Full<Bytes>> {
    let (status, body) = if req.uri().path() != "/metrics" {
        (
            StatusCode::NOT_FOUND,
            Bytes::from_static(b"not found: try /metrics\n"),
        )
    } else if req.method() != hyper::Method::GET && req.method() != hyper::Method::HEAD {
        (StatusCode::METHOD_NOT_ALLOWED, Bytes::new())
    } else {
        let text = cached.lock().unwrap_or_else(|e| e.into_inner()).text();
        (StatusCode::OK, text)
    };
    let mut answer = Response::new(Full::new(body));
    *answer.status_mut() = status;
    answer.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(prometheus_text::CONTENT_TYPE),
    );
    answer
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: String,
}

/// The exposition text of the running phase `phase`: its counters `s` and its window `w`.
pub fn render(phase: &str, s: &Snapshot, w: &WindowStats) -> String {
    let label = PhaseLabel {
        phase: phase.to_string(),
    };
    let mut registry = Registry::with_prefix("runner");
    let counters = [
        ("sent", "Requests sent in the phase", s.sent),
        (
            "completed",
            "Requests of the phase that succeeded",
            s.completed,
        ),
        ("failed", "Requests of the phase that failed", s.failed),
        (
            "total_output_tokens",
            "Output tokens of the phase's successful requests",
            s.output_tokens,
        ),
    ];
    for (name, help, value) in counters {
        let family = Family::<PhaseLabel, Counter>::default();
        family.get_or_create(&label).inc_by(value);
        registry.register(name, help, family);
    }
    let mut gauge = |name: String, help: String, value: f64| {
        let family = Family::<PhaseLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        family.get_or_create(&label).set(value);
        registry.register(name, help, family);
    };
    let over = format!("over the phase's last {:.1} s", w.span_s);
    gauge(
        "window_seconds".into(),
        "The seconds the window gauges cover".into(),
        w.span_s,
    );
    gauge(
        "request_throughput".into(),
        format!("Requests completed per second {over}"),
        w.request_throughput,
    );
    gauge(
        "output_throughput".into(),
        format!("Output tokens per second {over}"),
        w.output_throughput,
    );
    let latencies = [
        ("ttft", "TTFT", w.ttft),
        ("itl", "inter-token latency", w.itl),
        ("e2el", "end-to-end latency", w.e2el),
        ("send_lateness", "send lateness", w.send_lateness),
        ("client_delay", "client delay", w.client_delay),
    ];
    for (key, words, q) in latencies {
        let Some(WindowQuantiles { p50_ms, p99_ms }) = q else {
            continue;
        };
        gauge(
            format!("median_{key}_ms"),
            format!("Median {words} {over}, ms"),
            p50_ms,
        );
        gauge(
            format!("p99_{key}_ms"),
            format!("P99 {words} {over}, ms"),
            p99_ms,
        );
    }
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_text::encode(&mut out, &registry);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_taken() {
        assert!(parse_addr("127.0.0.1:9464").is_ok());
        assert!(parse_addr("[::1]:9464").is_ok());
        assert!(parse_addr("[::ffff:127.0.0.1]:9464").is_ok());
        let refused = parse_addr("0.0.0.0:9464").unwrap_err();
        assert!(refused.contains("not a loopback address"), "{refused}");
        assert!(parse_addr("192.168.1.4:80").is_err());
        assert!(parse_addr("localhost").is_err());
    }

    #[test]
    fn the_text_names_result_json_figures_with_the_phase_label() {
        let s = Snapshot {
            sent: 12,
            completed: 10,
            failed: 1,
            output_tokens: 1280,
            ..Snapshot::default()
        };
        let w = WindowStats {
            span_s: 5.0,
            request_throughput: 2.0,
            ttft: Some(WindowQuantiles {
                p50_ms: 48.0,
                p99_ms: 90.5,
            }),
            ..WindowStats::default()
        };
        let text = render("main", &s, &w);
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("parses");
        let value = |name: &str| {
            let sample = scrape.samples.iter().find(|x| x.metric == name);
            match sample.map(|x| (&x.value, x.labels.get("phase"))) {
                Some((
                    prometheus_parse::Value::Counter(v)
                    | prometheus_parse::Value::Gauge(v)
                    | prometheus_parse::Value::Untyped(v),
                    Some("main"),
                )) => Some(*v),
                _ => None,
            }
        };
        assert_eq!(value("runner_sent_total"), Some(12.0), "{text}");
        assert_eq!(value("runner_completed_total"), Some(10.0));
        assert_eq!(value("runner_total_output_tokens_total"), Some(1280.0));
        assert_eq!(value("runner_p99_ttft_ms"), Some(90.5));
        assert_eq!(value("runner_request_throughput"), Some(2.0));
        // No ITL in the window: no series, rather than a zero that looks measured.
        assert_eq!(value("runner_p99_itl_ms"), None);
        // A phase's name is the scenario's: escaped, never a broken line.
        let odd = render("a \"b\"\nc", &s, &w);
        assert!(
            odd.contains(r#"runner_sent_total{phase="a \"b\"\nc"} 12"#),
            "{odd}"
        );
    }
}
