//! report.html's panels of the server's gauges at each scrape (requests running and
//! waiting, KV cache use, prefix-cache hit rate between scrapes), on the timeline of the
//! client's throughput and in-flight charts: the measured phases back to back. Beside
//! each, its mean, median and peak; beside the hit rate, each phase's over the phase.

use super::charts::Chart;
use super::panel::{num, over_points, Figures, Panel};
use super::series::Series;
use crate::servers::server_metrics::{ServerPhase, ServerPoint};

/// The panels, for the measured phases' server metrics in run order (`None` where a
/// phase was not scraped); nothing when no phase was.
pub fn server_panels(series: &Series, servers: &[Option<&ServerPhase>]) -> Vec<Panel> {
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
    let mut charts = vec![(
        "server-queue",
        Chart::new(
            "Server: requests running and waiting",
            "time (s)",
            "requests",
        )
        .line("running", along(|p| p.running, 1.0))
        .line("waiting", along(|p| p.waiting, 1.0)),
    )];
    let kv = along(|p| p.kv_cache_use, 100.0);
    if !kv.is_empty() {
        let chart = Chart::new("Server: KV cache use", "time (s)", "%").line("KV cache %", kv);
        charts.push(("server-kv", chart));
    }
    let mut panels: Vec<Panel> = charts
        .into_iter()
        .map(|(id, mut chart)| {
            chart.markers = markers.clone();
            chart.x_span = Some((0.0, series.span_s()));
            let figures = over_points(&chart);
            Panel::new(id, chart, figures)
        })
        .collect();
    let hits = along(|p| p.prefix_cache_hit_rate, 100.0);
    if !hits.is_empty() {
        let mut chart = Chart::new(
            "Server: prefix-cache hit rate between scrapes",
            "time (s)",
            "% of prompt tokens",
        )
        .line("hit rate %", hits);
        chart.markers = markers;
        chart.x_span = Some((0.0, series.span_s()));
        panels.push(Panel::new(
            "server-hit-rate",
            chart,
            hit_rates(series, servers),
        ));
    }
    panels
}

/// Each scraped phase's hit rate over the whole phase, %.
fn hit_rates(series: &Series, servers: &[Option<&ServerPhase>]) -> Figures {
    let mut f = Figures::new(&["phase", "hit rate over the phase (%)"]);
    for (s, (_, name)) in servers.iter().zip(&series.boundaries) {
        if let Some(s) = s {
            let rate = s
                .prefix_cache_hit_rate
                .map_or("-".into(), |r| num(100.0 * r));
            f = f.row(vec![name.clone(), rate]);
        }
    }
    f
}
