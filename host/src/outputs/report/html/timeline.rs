//! report.html's panels over time, the measured phases back to back: output tokens and
//! requests completed per second, requests in flight and send lateness, each phase's
//! start ruled and its steady-state window shaded, with each line's mean, median and peak
//! beside it.

use super::charts::Chart;
use super::panel::{num, over_points, Figures, Panel};
use super::series::Series;

/// Bins of the requests-per-second line, about.
const REQUEST_BINS: usize = 20;

/// The panels; `bands`: each phase's steady-state window on the timeline, seconds;
/// `peak_1s`: the phases' peak output throughput over 1 s windows (the text's and the
/// block's), shown under the chart's own peak so the two say what each is.
pub fn time_panels(series: &Series, bands: &[(f64, f64)], peak_1s: Option<f64>) -> Vec<Panel> {
    let over = |values: &[f64]| -> Vec<(f64, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(b, v)| (series.time_of(b), *v))
            .collect()
    };
    let binned = format!("time (s), {} s bins", short_secs(series.bin_s));
    // Completions are few per bin (a 0.05 s bin holds one request or none): counted over
    // wider bins, else the line is spikes.
    let k = series.completions.len().div_ceil(REQUEST_BINS).max(1);
    let wide = |values: &[f64]| -> Vec<(f64, f64)> {
        values
            .chunks(k)
            .enumerate()
            .map(|(i, c)| {
                let t = (i * k) as f64 * series.bin_s + c.len() as f64 * series.bin_s / 2.0;
                (t, c.iter().sum::<f64>() / c.len() as f64)
            })
            .collect()
    };
    let wide_label = format!("time (s), {} s bins", short_secs(series.bin_s * k as f64));
    let late = |pick: fn((f64, f64)) -> f64| -> Vec<(f64, f64)> {
        series
            .lateness
            .iter()
            .enumerate()
            .filter_map(|(b, v)| v.map(|v| (series.time_of(b), pick(v))))
            .collect()
    };
    let wide_s = series.bin_s * k as f64;
    let charts = [
        (
            "output-throughput",
            Chart::new("Output token throughput", &binned, "tok/s")
                .line("output tok/s", over(&series.throughput)),
        ),
        (
            "request-throughput",
            Chart::new("Requests completed per second", &wide_label, "req/s")
                .line("completed req/s", wide(&series.completions)),
        ),
        (
            "in-flight",
            Chart::new("Requests in flight", "time (s)", "requests (mean over bin)")
                .line("in flight", over(&series.concurrency)),
        ),
        (
            "send-lateness",
            Chart::new(
                "Send lateness (sent - scheduled)",
                "time of sending (s)",
                "ms",
            )
            .line("max", late(|v| v.1))
            .line("mean", late(|v| v.0)),
        ),
    ];
    let markers: Vec<f64> = series.boundaries.iter().map(|b| b.0).collect();
    charts
        .into_iter()
        .map(|(id, mut chart)| {
            chart.markers = markers.clone();
            chart.bands = bands.to_vec();
            chart.x_span = Some((0.0, series.span_s()));
            // Each peak names its window: a bin's peak is higher than a 1 s window's.
            let bin = if id == "request-throughput" {
                wide_s
            } else {
                series.bin_s
            };
            let peak_1s = peak_1s.filter(|_| id == "output-throughput");
            let figures = peaks_named(&chart, bin, peak_1s);
            Panel::new(id, chart, figures)
        })
        .collect()
}

/// The chart's figures with its peak column naming the bin it is over, and `peak_1s`
/// (the text's peak, over 1 s windows) as a row of its own where given.
fn peaks_named(chart: &Chart, bin_s: f64, peak_1s: Option<f64>) -> Figures {
    let mut figures = over_points(chart);
    figures.head[3] = format!("peak ({} s bin)", short_secs(bin_s));
    if let Some(peak) = peak_1s {
        let label = "over 1 s windows (Peak output token throughput)";
        let row = vec![label.to_string(), String::new(), String::new(), num(peak)];
        figures = figures.row(row);
    }
    figures
}

fn short_secs(s: f64) -> String {
    let t = format!("{s:.3}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_widths_are_short() {
        assert_eq!(short_secs(0.01), "0.01");
        assert_eq!(short_secs(2.0), "2");
    }
}
