//! report.html's latency panels: the CDFs of TTFT, TPOT, ITL and E2EL (steps, one line
//! per tag or else per phase, the axis cut at p99.9 when an outlier would stretch it) and
//! TTFT by request over send time, each with its percentiles beside it.

use hdrhistogram::Histogram;

use super::charts::Chart;
use super::panel::{num, Figures, Panel};
use super::series::{cdf, quantile_ms, PhaseLatencies, Series};

/// Picks one latency histogram of a phase.
type Pick = fn(&PhaseLatencies) -> &Histogram<u64>;

/// Where a CDF chart's x axis ends: one slow outlier must not squeeze every other request
/// into the left edge (a single 1,000 ms ITL did).
const CLIP_QUANTILE: f64 = 0.999;

/// The CDF panels, then TTFT by request.
pub fn latency_panels(series: &Series) -> Vec<Panel> {
    let metrics: [(&str, Pick); 4] = [
        ("TTFT", |p| &p.ttft),
        ("TPOT", |p| &p.tpot),
        ("ITL", |p| &p.itl),
        ("E2EL", |p| &p.e2el),
    ];
    // One line per tag (a 70/30 mix of short and long prompts is two curves, not one
    // bimodal one), else one per phase.
    let lines = if series.tags.is_empty() {
        &series.phases
    } else {
        &series.tags
    };
    let mut panels: Vec<Panel> = metrics
        .iter()
        .map(|&(name, get)| {
            Panel::new(
                &format!("{}-cdf", name.to_lowercase()),
                cdf_chart(name, lines, get),
                percentiles(lines, get),
            )
        })
        .collect();
    panels.push(ttft_by_request(series));
    panels
}

/// One CDF chart; its x axis ends at the largest p99.9 of its lines, and its title says
/// so where that cut any line short.
fn cdf_chart(name: &str, lines: &[PhaseLatencies], get: Pick) -> Chart {
    let clip = lines
        .iter()
        .filter_map(|p| quantile_ms(get(p), CLIP_QUANTILE))
        .reduce(f64::max);
    let max = lines
        .iter()
        .map(|p| get(p).max() as f64 / 1e3)
        .reduce(f64::max);
    let clipped = matches!((clip, max), (Some(c), Some(m)) if m > c);
    let title = match clip.filter(|_| clipped) {
        Some(c) => format!("{name} CDF (axis cut at p99.9, {c:.1} ms)"),
        None => format!("{name} CDF"),
    };
    let mut chart = Chart::new(&title, &format!("{name} (ms)"), "fraction of requests ≤ x");
    if name == "ITL" {
        chart.y_label = "fraction of chunk gaps ≤ x".into();
    }
    chart.x_max = clip.filter(|_| clipped);
    for p in lines {
        chart = chart.line(&p.name, cdf(get(p)));
    }
    chart
}

/// Each line's count, mean, median, p90, p99 and maximum, ms: the maximum is there even
/// where the axis was cut before it.
fn percentiles(lines: &[PhaseLatencies], get: Pick) -> Figures {
    let mut f = Figures::new(&["ms", "n", "mean", "p50", "p90", "p99", "max"]);
    for p in lines {
        let h = get(p);
        if h.is_empty() {
            continue;
        }
        let q = |q: f64| quantile_ms(h, q).map_or("-".into(), num);
        f = f.row(vec![
            p.name.clone(),
            h.len().to_string(),
            num(h.mean() / 1e3),
            q(0.5),
            q(0.9),
            q(0.99),
            num(h.max() as f64 / 1e3),
        ]);
    }
    f
}

/// Each request's TTFT at the time it was sent: a queue building up reads as a rising
/// cloud, a slow phase as a band apart. Beside it, the TTFT percentiles of each phase.
fn ttft_by_request(series: &Series) -> Panel {
    let mut chart = Chart::new("TTFT by request", "time of sending (s)", "TTFT (ms)")
        .line("request", series.ttft_by_request.clone());
    chart.scatter = true;
    chart.x_span = Some((0.0, series.span_s()));
    chart.markers = series.boundaries.iter().map(|b| b.0).collect();
    let mut figures = percentiles(&series.phases, |p| &p.ttft);
    if series.ttft_by_request.len()
        < series.phases.iter().map(|p| p.ttft.len()).sum::<u64>() as usize
    {
        figures.head[0] = format!("ms ({} dots drawn)", series.ttft_by_request.len());
    }
    Panel::new("ttft-by-request", chart, figures)
}
