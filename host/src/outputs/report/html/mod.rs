//! report.html: one self-contained page (inline CSS and SVG, no script, nothing fetched)
//! with the run's header, thresholds, the vLLM summary of each phase, latency CDFs, time
//! series, and for a multi-phase run the curves over phases.

pub mod charts;
mod energy;
pub mod escape;
pub mod series;
mod server_charts;
mod sessions;
mod spec_decode;
mod steady_state;

use std::fmt::Write as _;

use hdrhistogram::Histogram;

use self::charts::{Chart, ChartError, XScale};
use self::escape::escape;
use self::series::{cdf, quantile_ms, PhaseLatencies, Series};
use super::run_report::RunReport;
use super::table::{columns, tag_columns, target_columns};
use super::text::render_phase_result;
use super::RunHeader;
use crate::measuring::metrics::catalogue::percentile_word;
use crate::measuring::metrics::{PhaseSummary, TagSummary};
use crate::measuring::thresholds::Verdict;
use crate::servers::server_metrics::ServerPhase;
use crate::workloads::scenario::NoteValue;

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:1200px;color:#222;padding:0 16px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left;white-space:nowrap}
.kv td{text-align:left}.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
.grid{display:flex;flex-wrap:wrap;gap:12px}.grid svg{border:1px solid #eee}
pre{background:#f8f8f8;padding:10px;font-size:12px;overflow-x:auto;display:inline-block;margin:6px 0}
details summary{cursor:pointer;margin:6px 0}.muted{color:#666;font-size:13px}";

/// report.html, from the report and the series of its requests (read from requests.jsonl).
pub fn render(report: &RunReport, series: &Series) -> Result<String, ChartError> {
    let h = &report.header;
    let phases = report.measured();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>runner report: {}</title><style>{STYLE}</style></head><body>\n",
        escape(&h.scenario)
    );
    let _ = writeln!(out, "<h1>Benchmark report: {}</h1>", escape(&h.scenario));
    if !h.description.is_empty() {
        let _ = writeln!(out, "<p class=\"muted\">{}</p>", escape(&h.description));
    }
    header_table(&mut out, h);
    thresholds_table(&mut out, &report.verdicts);
    notes_table(&mut out, &report.shown_notes());
    endings_table(&mut out, &report.endings());

    let many = phases.len() > 1;
    if many {
        out.push_str("<h2>Phases</h2>\n");
        phase_table(&mut out, &phases);
        out.push_str("<div class=\"grid\">\n");
        for chart in sweep_charts(&phases) {
            out.push_str(&chart.to_svg()?);
        }
        out.push_str("</div>\n");
    } else if let Some(s) = phases.first() {
        out.push_str("<h2>Summary</h2>\n");
        summary_block(&mut out, s);
    }
    charts(&mut out, report, series)?;
    sessions::sessions_section(&mut out, &phases)?;
    spec_decode::spec_decode_section(&mut out, report);
    energy::energy_section(&mut out, report);
    steady_state::steady_state_section(&mut out, report);
    tables_and_blocks(&mut out, &phases, &h.targets);
    let _ = writeln!(
        out,
        "<p class=\"muted\">runner {}</p>\n</body></html>",
        escape(&h.runner_version)
    );
    Ok(out)
}

/// The latency CDFs, then the series over time (the requests', the servers').
fn charts(out: &mut String, report: &RunReport, series: &Series) -> Result<(), ChartError> {
    let many = report.many_phases();
    let servers: Vec<Option<&ServerPhase>> = report
        .phases
        .iter()
        .filter(|p| !p.warmup)
        .map(|p| p.server.as_ref())
        .collect();

    out.push_str("<h2>Latency distributions</h2>\n<div class=\"grid\">\n");
    for chart in cdf_charts(series) {
        out.push_str(&chart.to_svg()?);
    }
    out.push_str("</div>\n<h2>Over time</h2>\n");
    if many {
        out.push_str(
            "<p class=\"muted\">Phases back to back; dark grey rules mark where each begins.</p>\n",
        );
    }
    let phases = report.measured();
    let bands = steady_state::bands(&phases, &series.boundaries);
    if !bands.is_empty() {
        out.push_str(
            "<p class=\"muted\">Shaded: each phase's steady-state window (requests in flight at 95 % of its cap or more, or the window its scenario named).</p>\n",
        );
    }
    out.push_str("<div class=\"grid\">\n");
    for chart in time_charts(series, &bands) {
        out.push_str(&chart.to_svg()?);
    }
    for chart in server_charts::server_charts(series, &servers) {
        out.push_str(&chart.to_svg()?);
    }
    out.push_str("</div>\n");
    Ok(())
}

/// Each phase's tag and target tables, and with several phases each one's result block.
fn tables_and_blocks(out: &mut String, phases: &[PhaseSummary], urls: &[String]) {
    let many = phases.len() > 1;
    for s in phases.iter().filter(|s| !s.tags.is_empty()) {
        let _ = writeln!(out, "<h2>Per-tag metrics: {}</h2>", escape(&s.name));
        tag_table(out, &s.tags);
    }
    for s in phases.iter().filter(|s| !s.targets.is_empty()) {
        let _ = writeln!(out, "<h2>Per-target metrics: {}</h2>", escape(&s.name));
        let rows = s.targets.iter();
        grid_table(out, rows.map(|t| target_columns(t, urls)));
    }

    if many {
        out.push_str("<h2>Serving benchmark result of each phase</h2>\n");
        for (i, s) in phases.iter().enumerate() {
            let _ = writeln!(
                out,
                "<details{}><summary>{}</summary>",
                if i == 0 { " open" } else { "" },
                escape(&s.name)
            );
            summary_block(out, s);
            out.push_str("</details>\n");
        }
    }
}

/// Why each phase ended, when it did not simply send all its requests.
fn endings_table(out: &mut String, endings: &[(String, String)]) {
    if endings.is_empty() {
        return;
    }
    out.push_str(
        "<h2>How phases ended</h2>\n<table class=\"kv\"><tr><th>phase</th><th>ended</th></tr>\n",
    );
    for (phase, why) in endings {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(phase),
            escape(why)
        );
    }
    out.push_str("</table>\n");
}

fn header_table(out: &mut String, h: &RunHeader) {
    let params = h
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
    out.push_str("<table class=\"kv\">\n");
    let rows = [
        ("Parameters", params),
        ("Seed", h.seed.to_string()),
        ("Target", h.target.clone()),
        ("Model", h.model.clone()),
        ("API", h.api.clone()),
        ("Tokenizer", h.tokenizer.clone()),
        (
            "Request digest",
            h.request_digest
                .as_deref()
                .map_or_else(String::new, |d| format!("sha256:{d}")),
        ),
    ];
    for (k, v) in rows {
        let _ = writeln!(out, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
    }
    out.push_str("</table>\n");
}

fn thresholds_table(out: &mut String, verdicts: &[Verdict]) {
    if verdicts.is_empty() {
        return;
    }
    let failed = verdicts.iter().filter(|v| !v.pass).count();
    let _ = writeln!(
        out,
        "<h2>Thresholds: <span class=\"{}\">{}</span></h2>",
        if failed == 0 { "pass" } else { "fail" },
        if failed == 0 {
            "all passed".to_string()
        } else {
            format!("{failed} of {} failed", verdicts.len())
        }
    );
    out.push_str(
        "<table><tr><th>threshold</th><th>phase</th><th>value</th><th>verdict</th></tr>\n",
    );
    for v in verdicts {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
            escape(&v.threshold),
            escape(&v.phase),
            escape(&v.value_text()),
            if v.pass { "pass" } else { "fail" },
            if v.pass { "pass" } else { "FAIL" }
        );
    }
    out.push_str("</table>\n");
}

/// The scenario's `note`s, under the name report.md gives them.
fn notes_table(out: &mut String, notes: &[(String, NoteValue)]) {
    if notes.is_empty() {
        return;
    }
    out.push_str("<h2>Scenario result</h2>\n<table class=\"kv\">\n");
    for (key, value) in notes {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(key),
            escape(&value.to_string())
        );
    }
    out.push_str("</table>\n");
}

fn tag_table(out: &mut String, tags: &[TagSummary]) {
    grid_table(out, tags.iter().map(tag_columns));
}

fn phase_table(out: &mut String, phases: &[PhaseSummary]) {
    grid_table(out, phases.iter().map(|s| columns(s).to_vec()));
}

/// A table of rows of (column title, value), titled by the first row's column titles.
fn grid_table(out: &mut String, rows: impl Iterator<Item = Vec<(&'static str, String)>>) {
    let mut rows = rows.peekable();
    let Some(first) = rows.peek() else {
        return;
    };
    out.push_str("<table><tr>");
    for (title, _) in first {
        // Spaces instead of underscores let the long titles wrap.
        let _ = write!(out, "<th>{}</th>", title.replace('_', " "));
    }
    out.push_str("</tr>\n");
    for row in rows {
        out.push_str("<tr>");
        for (_, value) in row {
            let _ = write!(out, "<td>{}</td>", escape(&value));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

fn summary_block(out: &mut String, s: &PhaseSummary) {
    let text = render_phase_result(s);
    let _ = writeln!(out, "<pre>{}</pre>", escape(&text));
}

/// Output throughput and TTFT against the number of prompts, or the rate when every phase
/// has its own configured rate (vllm-sweep-results.txt).
fn sweep_charts(phases: &[PhaseSummary]) -> Vec<Chart> {
    let rates: Vec<f64> = phases
        .iter()
        .filter_map(|s| s.request_rate.filter(|r| r.is_finite() && *r > 0.0))
        .collect();
    let by_rate = rates.len() == phases.len() && {
        let mut r = rates.clone();
        r.sort_by(f64::total_cmp);
        r.dedup();
        r.len() == rates.len()
    };
    let (x_label, xs): (&str, Vec<f64>) = if by_rate {
        ("request rate (req/s)", rates)
    } else {
        (
            "number of prompts",
            phases
                .iter()
                .map(|s| (s.completed + s.failed) as f64)
                .collect(),
        )
    };
    let positive = xs.iter().all(|x| *x > 0.0);
    let (lo, hi) = xs.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(*x), hi.max(*x))
    });
    let scale = if positive && hi / lo >= 8.0 {
        XScale::Log2
    } else {
        XScale::Linear
    };
    let along = |f: &dyn Fn(&PhaseSummary) -> Option<f64>| -> Vec<(f64, f64)> {
        xs.iter()
            .zip(phases)
            .filter_map(|(x, s)| f(s).map(|y| (*x, y)))
            .collect()
    };
    let mut throughput = Chart::new("Output token throughput over phases", x_label, "tok/s")
        .line("output tok/s", along(&|s| Some(s.output_throughput)));
    let tail = phases
        .iter()
        .all(|s| s.ttft.percentile(99.0).is_some())
        .then_some(99.0);
    let mut ttft = Chart::new("TTFT over phases", x_label, "ms")
        .line("mean TTFT", along(&|s| Some(s.ttft.mean)))
        .line("median TTFT", along(&|s| Some(s.ttft.median)));
    if let Some(p) = tail {
        ttft = ttft.line(
            &format!("P{} TTFT", percentile_word(p)),
            along(&|s| s.ttft.percentile(p)),
        );
    }
    for c in [&mut throughput, &mut ttft] {
        c.x_scale = scale;
        c.dots = true;
    }
    vec![throughput, ttft]
}

/// Picks one latency histogram of a phase.
type Pick = fn(&PhaseLatencies) -> &Histogram<u64>;

/// The CDF charts; each x axis ends at the largest p99.9 of its lines, and its title says
/// so where that cut any line short.
fn cdf_charts(series: &Series) -> Vec<Chart> {
    let metrics: [(&str, Pick); 4] = [
        ("TTFT", |p| &p.ttft),
        ("TPOT", |p| &p.tpot),
        ("ITL", |p| &p.itl),
        ("E2EL", |p| &p.e2el),
    ];
    metrics
        .iter()
        .map(|(name, get)| {
            // One line per tag (a 70/30 mix of short and long prompts is two curves, not
            // one bimodal one), else one per phase.
            let lines = if series.tags.is_empty() {
                &series.phases
            } else {
                &series.tags
            };
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
            if *name == "ITL" {
                chart.y_label = "fraction of chunk gaps ≤ x".into();
            }
            chart.x_max = clip.filter(|_| clipped);
            for p in lines {
                chart = chart.line(&p.name, cdf(get(p)));
            }
            chart
        })
        .collect()
}

/// Where a CDF chart's x axis ends: one slow outlier must not squeeze every other request
/// into the left edge (a single 1,000 ms ITL did).
const CLIP_QUANTILE: f64 = 0.999;

/// The charts over time; each phase's steady-state window is shaded (`bands`: on the
/// timeline, in seconds).
fn time_charts(series: &Series, bands: &[(f64, f64)]) -> Vec<Chart> {
    let markers: Vec<f64> = series.boundaries.iter().map(|b| b.0).collect();
    let over = |values: &[f64]| -> Vec<(f64, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(b, v)| (series.time_of(b), *v))
            .collect()
    };
    let width = format!("{} s bins", short_secs(series.bin_s));
    let mut charts = vec![
        Chart::new(
            "Output token throughput",
            &format!("time (s), {width}"),
            "tok/s",
        )
        .line("output tok/s", over(&series.throughput)),
        Chart::new("Requests in flight", "time (s)", "requests (mean over bin)")
            .line("in flight", over(&series.concurrency)),
    ];
    let late = |pick: fn((f64, f64)) -> f64| -> Vec<(f64, f64)> {
        series
            .lateness
            .iter()
            .enumerate()
            .filter_map(|(b, v)| v.map(|v| (series.time_of(b), pick(v))))
            .collect()
    };
    charts.push(
        Chart::new(
            "Send lateness (sent - scheduled)",
            "time of sending (s)",
            "ms",
        )
        .line("max", late(|v| v.1))
        .line("mean", late(|v| v.0)),
    );
    for c in &mut charts {
        c.markers = markers.clone();
        c.bands = bands.to_vec();
    }
    charts
}

fn short_secs(s: f64) -> String {
    let t = format!("{s:.3}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(short_secs(0.01), "0.01");
        assert_eq!(short_secs(2.0), "2");
    }
}
