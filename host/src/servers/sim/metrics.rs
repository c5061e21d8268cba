//! `/metrics` of the simulated server, in vLLM's names and Prometheus text format (as
//! vLLM's `PrometheusStatLogger` writes them, `vllm/v1/metrics/loggers.py`), so the
//! runner's server-metrics scraping works with no real server: requests running and
//! waiting, KV cache use, preemptions, prefix-cache queries and hits, token counters, and
//! the TTFT, queue-time and end-to-end latency histograms.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::{get, MethodRouter};

/// vLLM's buckets of `vllm:time_to_first_token_seconds`.
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's buckets of its request latency histograms (queue time, end to end).
const LATENCY_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

struct Histogram {
    bounds: &'static [f64],
    /// Non-cumulative counts, one per bound and a last one for +Inf.
    counts: Vec<u64>,
    sum: f64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
        }
    }

    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        let i = self.bounds.partition_point(|b| *b < s);
        self.counts[i] += 1;
        self.sum += s;
    }
}

/// The engine's state as its scheduler last left it, and its counters.
pub struct Counters {
    pub running: usize,
    pub waiting: usize,
    pub kv_used: usize,
    pub kv_total: usize,
    pub preemptions: u64,
    pub prefix_queries: u64,
    pub prefix_hits: u64,
    pub prompt_tokens: u64,
    pub finished: u64,
    ttft: Histogram,
    queue: Histogram,
    e2e: Histogram,
}

/// Shared by the engine, which updates it, and the `/metrics` handler, which reads it.
pub struct SimMetrics {
    counters: Mutex<Counters>,
    /// Tokens generated so far, counted as each step or chunk produces them (as vLLM's
    /// `generation_tokens` counts each step's tokens), not when a request ends: a scrape
    /// taken mid-run sees every token already streamed. Atomic, so a chunk costs no lock.
    generated: AtomicU64,
    /// The `model_name` label, escaped.
    model: String,
    /// `--sim-spec-decode`'s counters (`spec_decode`).
    pub spec: super::spec_decode::SpecMetrics,
}

impl SimMetrics {
    pub fn new(model: &str, kv_total: usize) -> SimMetrics {
        let model = model
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        SimMetrics {
            counters: Mutex::new(Counters {
                running: 0,
                waiting: 0,
                kv_used: 0,
                kv_total,
                preemptions: 0,
                prefix_queries: 0,
                prefix_hits: 0,
                prompt_tokens: 0,
                finished: 0,
                ttft: Histogram::new(TTFT_BUCKETS),
                queue: Histogram::new(LATENCY_BUCKETS),
                e2e: Histogram::new(LATENCY_BUCKETS),
            }),
            generated: AtomicU64::new(0),
            model,
            spec: Default::default(),
        }
    }

    /// Changes the counters under the lock.
    pub fn update(&self, change: impl FnOnce(&mut Counters)) {
        change(&mut self.counters.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn first_token(&self, ttft: Duration) {
        self.update(|c| c.ttft.observe(ttft));
    }

    pub fn admitted(&self, queued: Duration) {
        self.update(|c| c.queue.observe(queued));
    }

    /// `tokens` more were generated.
    pub fn generated(&self, tokens: usize) {
        self.generated.fetch_add(tokens as u64, Ordering::Relaxed);
    }

    /// Tokens generated so far (the power model's `--sim-power` counts them).
    pub fn generated_tokens(&self) -> u64 {
        self.generated.load(Ordering::Relaxed)
    }

    /// A request finished after `e2e`.
    pub fn finished(&self, e2e: Duration) {
        self.update(|c| {
            c.e2e.observe(e2e);
            c.finished += 1;
        });
    }

    /// The exposition, as vLLM writes it.
    pub fn render(&self) -> String {
        let c = self.counters.lock().unwrap_or_else(|e| e.into_inner());
        let labels = format!("engine=\"0\",model_name=\"{}\"", self.model);
        let mut out = String::with_capacity(8192);
        render_gauges(&mut out, &labels, &c);
        let generated = self.generated.load(Ordering::Relaxed);
        render_counters(&mut out, &labels, &c, generated);
        render_histograms(&mut out, &labels, &c);
        self.spec.render(&mut out, &labels);
        out
    }
}

/// The gauges: requests running and waiting, and the KV-cache usage.
fn render_gauges(out: &mut String, labels: &str, c: &Counters) {
    let kv = if c.kv_total == 0 {
        0.0
    } else {
        c.kv_used as f64 / c.kv_total as f64
    };
    let gauges = [
        (
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            c.running as f64,
        ),
        (
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            c.waiting as f64,
        ),
        (
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            kv,
        ),
    ];
    for (name, help, value) in gauges {
        scalar(out, (name, help, "gauge"), labels, value);
    }
}

/// The counters, each as `NAME_total`.
fn render_counters(out: &mut String, labels: &str, c: &Counters, generated: u64) {
    let counters = [
        (
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            c.preemptions,
        ),
        (
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            c.prefix_queries,
        ),
        (
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            c.prefix_hits,
        ),
        (
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            c.prompt_tokens,
        ),
        (
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            generated,
        ),
        (
            "vllm:request_success",
            "Count of successfully processed requests.",
            c.finished,
        ),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        let _ = writeln!(out, "{name}_total{{{labels}}} {}", value as f64);
    }
}

/// The latency histograms: TTFT, queue time and end-to-end latency.
fn render_histograms(out: &mut String, labels: &str, c: &Counters) {
    let histograms = [
        (
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            &c.ttft,
        ),
        (
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            &c.queue,
        ),
        (
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            &c.e2e,
        ),
    ];
    for (name, help, h) in histograms {
        histogram(out, (name, help), labels, h);
    }
}

/// `GET /metrics`: the exposition, with Prometheus's text content type.
pub fn route<S: Clone + Send + Sync + 'static>(metrics: Arc<SimMetrics>) -> MethodRouter<S> {
    get(move || {
        let text = metrics.render();
        async move {
            (
                [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
                text,
            )
                .into_response()
        }
    })
}

fn scalar(out: &mut String, (name, help, kind): (&str, &str, &str), labels: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    let _ = writeln!(out, "{name}{{{labels}}} {value}");
}

fn histogram(out: &mut String, (name, help): (&str, &str), labels: &str, h: &Histogram) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0;
    for (i, count) in h.counts.iter().enumerate() {
        cumulative += count;
        let le = h
            .bounds
            .get(i)
            .map_or("+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels},le=\"{le}\"}} {}",
            cumulative as f64
        );
    }
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", cumulative as f64);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_and_counts_what_happened() {
        let m = SimMetrics::new("sim/\"m\"", 1000);
        m.update(|c| {
            c.running = 3;
            c.waiting = 2;
            c.kv_used = 250;
        });
        m.first_token(Duration::from_millis(30));
        m.first_token(Duration::from_secs(3));
        m.generated(2);
        m.generated(3);
        m.finished(Duration::from_secs(1));
        let text = m.render();
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in {text}"))
                .to_string()
        };
        let labels = r#"engine="0",model_name="sim/\"m\"""#;
        assert_eq!(
            line("vllm:num_requests_running{"),
            format!("vllm:num_requests_running{{{labels}}} 3")
        );
        assert!(line("vllm:kv_cache_usage_perc{").ends_with(" 0.25"));
        assert!(line("vllm:generation_tokens_total{").ends_with(" 5"));
        assert!(line(&format!(
            "vllm:time_to_first_token_seconds_bucket{{{labels},le=\"0.04\"}}"
        ))
        .ends_with(" 1"));
        assert!(line(&format!(
            "vllm:time_to_first_token_seconds_bucket{{{labels},le=\"+Inf\"}}"
        ))
        .ends_with(" 2"));
        assert!(line("vllm:time_to_first_token_seconds_sum{").ends_with(" 3.03"));
    }
}
