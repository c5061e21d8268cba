//! The lines of the live panel under the progress bar: the running phase over the last
//! few seconds (req/s, output tok/s, TTFT, ITL and E2EL p50/p99, send lateness and client
//! delay) and, when the server's metrics are scraped, its requests running and waiting,
//! KV cache use and prefix-cache hit rate. Pure text from the engine's window and the
//! latest scrape; `progress` draws it.

use std::collections::VecDeque;
use std::time::Instant;

use crate::measuring::engine::{WindowQuantiles, WindowStats, WINDOW};
use crate::servers::server_metrics::known::{self, Meaning};
use crate::servers::server_metrics::readings;
use crate::workloads::scenario::ServerValues;

/// Most scrapes kept for the hit rate: a tick of 200 ms fills a 5 s window with 25.
const MAX_SAMPLES: usize = 64;

/// What the panel shows of the server; each `None` where its metrics lack it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerGauges {
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// 0 to 1.
    pub kv_cache_use: Option<f64>,
    /// Over the last [`WINDOW`], 0 to 1.
    pub prefix_cache_hit_rate: Option<f64>,
}

/// The server's known counters over the last [`WINDOW`], so the panel's hit rate is the
/// window's, like its latencies, not the server's since it started.
#[derive(Default)]
pub struct ServerHistory {
    samples: VecDeque<(Instant, Vec<(&'static str, f64)>)>,
}

impl ServerHistory {
    /// The gauges of the latest scrape, `values`, read at `now`; `None` when the server's
    /// metrics are not scraped.
    pub fn gauges(&mut self, values: &ServerValues, now: Instant) -> Option<ServerGauges> {
        if values.is_empty() {
            return None;
        }
        let level = |meaning: Meaning| {
            let k = known::first_of(meaning, |n| values.iter().any(|v| v.0 == n))?;
            values.iter().find(|v| v.0 == k.name).map(|v| v.1)
        };
        let counters = values
            .iter()
            .filter_map(|(name, v)| known::lookup(name).map(|k| (k.name, *v)))
            .collect();
        while self.samples.len() >= MAX_SAMPLES
            || self
                .samples
                .front()
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) > WINDOW)
        {
            self.samples.pop_front();
        }
        self.samples.push_back((now, counters));
        Some(ServerGauges {
            running: level(Meaning::Running),
            waiting: level(Meaning::Waiting),
            kv_cache_use: level(Meaning::KvCacheUse),
            prefix_cache_hit_rate: self
                .hit_rate()
                .or_else(|| level(Meaning::PrefixCacheHitRate)),
        })
    }

    /// The hit rate between the oldest and the newest sample, in the engine's own terms.
    fn hit_rate(&self) -> Option<f64> {
        let ((_, first), (_, last)) = (self.samples.front()?, self.samples.back()?);
        let increases: Vec<(&str, f64)> = last
            .iter()
            .map(|&(name, now)| {
                let was = first.iter().find(|c| c.0 == name).map_or(0.0, |c| c.1);
                // A restart in between: everything since it.
                (name, if now >= was { now - was } else { now })
            })
            .collect();
        readings::prefix_cache_hit_rate(&increases)
    }
}

/// The panel's lines (no line over 80 columns).
pub fn lines(w: &WindowStats, server: Option<&ServerGauges>) -> Vec<String> {
    let mut out = vec![
        format!(
            "  last {:.1}s: {:.1} req/s, {:.0} tok/s out | ok {} failed {}",
            w.span_s, w.request_throughput, w.output_throughput, w.completed, w.failed
        ),
        format!(
            "  TTFT {} | ITL {} | E2EL {} ms",
            quantiles(w.ttft),
            quantiles(w.itl),
            quantiles(w.e2el)
        ),
    ];
    let mut clock = format!("  send lateness {}", quantiles(w.send_lateness));
    if let Some(delay) = w.client_delay {
        clock += &format!(" | client delay {}", quantiles(Some(delay)));
    }
    out.push(clock + " ms");
    if let Some(s) = server {
        out.push(server_line(s));
    }
    out
}

fn server_line(s: &ServerGauges) -> String {
    let count = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.0}"));
    let percent =
        |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{:.1}%", v * 100.0));
    format!(
        "  server: running {} waiting {} | KV cache {} | prefix-cache hits {}",
        count(s.running),
        count(s.waiting),
        percent(s.kv_cache_use),
        percent(s.prefix_cache_hit_rate)
    )
}

/// `p50 48.1 p99 90.2`, or `-` when the window has none.
fn quantiles(q: Option<WindowQuantiles>) -> String {
    q.map_or_else(
        || "-".to_string(),
        |q| format!("p50 {} p99 {}", ms(q.p50_ms), ms(q.p99_ms)),
    )
}

/// Three significant figures or so: 0.482, 48.1, 912.
fn ms(v: f64) -> String {
    match v {
        v if v < 1.0 => format!("{v:.3}"),
        v if v < 10.0 => format!("{v:.2}"),
        v if v < 100.0 => format!("{v:.1}"),
        v => format!("{v:.0}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn vllm(running: f64, queries: f64, hits: f64) -> ServerValues {
        vec![
            ("vllm:num_requests_running".into(), running),
            ("vllm:num_requests_waiting".into(), 2.0),
            ("vllm:kv_cache_usage_perc".into(), 0.123),
            ("vllm:prefix_cache_queries_total".into(), queries),
            ("vllm:prefix_cache_hits_total".into(), hits),
            ("something_else".into(), 7.0),
        ]
    }

    #[test]
    fn the_server_line_has_the_window_hit_rate() {
        let t0 = Instant::now();
        let mut h = ServerHistory::default();
        assert_eq!(h.gauges(&vec![], t0), None);
        // Since start: 1000 queries, none hit; then 100 more, 60 hits.
        h.gauges(&vllm(3.0, 1000.0, 0.0), t0);
        let g = h
            .gauges(&vllm(10.0, 1100.0, 60.0), t0 + Duration::from_secs(2))
            .expect("scraped");
        assert_eq!(g.running, Some(10.0));
        assert_eq!(g.prefix_cache_hit_rate, Some(0.6));
        assert_eq!(
            server_line(&g),
            "  server: running 10 waiting 2 | KV cache 12.3% | prefix-cache hits 60.0%"
        );
        // Six seconds on, the first sample has left the window: 100 queries, no hit.
        let g = h
            .gauges(&vllm(1.0, 1200.0, 60.0), t0 + Duration::from_secs(6))
            .expect("scraped");
        assert_eq!(g.prefix_cache_hit_rate, Some(0.0));
    }

    #[test]
    fn the_lines_show_each_latency_or_a_dash() {
        let q = |p50_ms, p99_ms| Some(WindowQuantiles { p50_ms, p99_ms });
        let w = WindowStats {
            span_s: 4.8,
            completed: 40,
            failed: 1,
            output_tokens: 4000,
            request_throughput: 8.33,
            output_throughput: 833.3,
            ttft: q(48.14, 90.2),
            itl: q(8.0, 9.12),
            e2el: q(300.4, 1320.0),
            send_lateness: q(0.2, 0.45),
            client_delay: None,
        };
        assert_eq!(
            lines(&w, None),
            [
                "  last 4.8s: 8.3 req/s, 833 tok/s out | ok 40 failed 1",
                "  TTFT p50 48.1 p99 90.2 | ITL p50 8.00 p99 9.12 | E2EL p50 300 p99 1320 ms",
                "  send lateness p50 0.200 p99 0.450 ms",
            ]
        );
        let empty = lines(&WindowStats::default(), Some(&ServerGauges::default()));
        assert_eq!(empty[1], "  TTFT - | ITL - | E2EL - ms");
        assert!(lines(&w, None).iter().all(|l| l.chars().count() <= 80));
    }
}
