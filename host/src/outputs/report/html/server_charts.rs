//! report.html's charts of the server's main gauges (requests running and waiting, KV
//! cache use) at each scrape, on the timeline of the client's throughput and in-flight
//! charts: the measured phases back to back.

use super::charts::Chart;
use super::series::Series;
use crate::servers::server_metrics::{ServerPhase, ServerPoint};

/// The charts, for the measured phases' server metrics in run order (`None` where a
/// phase was not scraped); nothing when no phase was.
pub fn server_charts(series: &Series, servers: &[Option<&ServerPhase>]) -> Vec<Chart> {
    if servers.iter().all(Option::is_none) {
        return Vec::new();
    }
    let along = |pick: fn(&ServerPoint) -> Option<f64>, scale: f64| -> Vec<(f64, f64)> {
        let phases = servers.iter().zip(&series.boundaries);
        phases
            .filter_map(|(s, (offset, _))| Some((s.as_ref()?, *offset)))
            .flat_map(|(s, offset)| {
                s.series
                    .iter()
                    .filter(|p| p.t_s >= 0.0)
                    .filter_map(move |p| Some((offset + p.t_s, pick(p)? * scale)))
            })
            .collect()
    };
    let markers: Vec<f64> = series.boundaries.iter().map(|b| b.0).collect();
    let mut queue = Chart::new(
        "Server: requests running and waiting",
        "time (s)",
        "requests",
    )
    .line("running", along(|p| p.running, 1.0))
    .line("waiting", along(|p| p.waiting, 1.0));
    queue.markers = markers.clone();
    let kv = along(|p| p.kv_cache_use, 100.0);
    let mut charts = vec![queue];
    if !kv.is_empty() {
        let mut chart = Chart::new("Server: KV cache use", "time (s)", "%").line("KV cache", kv);
        chart.markers = markers;
        charts.push(chart);
    }
    charts
}
