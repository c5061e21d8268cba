//! report.html: one self-contained page (inline CSS and SVG, no script, nothing fetched)
//! with the run's header, thresholds, a table of the phases, the charts with their
//! numbers beside them (latency CDFs, TTFT by request, series over time, the server's
//! gauges, and for a multi-phase run the curves over phases) and each phase's vLLM block.
//! A single-phase run gets every chart a multi-phase one does.

pub mod charts;
mod energy;
pub mod escape;
mod latency;
mod panel;
pub mod repeat;
pub mod series;
mod server_charts;
mod sessions;
mod spec_decode;
mod steady_state;
mod sweep;
mod timeline;

use std::fmt::Write as _;

use self::charts::ChartError;
use self::escape::escape;
use self::panel::push_all;
use self::series::Series;
use super::run_report::RunReport;
use super::table::{columns_with_units, tag_columns, target_columns};
use super::text::render_phase_result;
use super::RunHeader;
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
.panel{display:flex;flex-direction:column;width:560px;margin:0;padding:4px;border:1px solid #e4e4e4}
.panel svg{border:none}table.figures{font-size:12px;margin:4px 0 0 0}table.figures td:first-child{max-width:200px;overflow:hidden;text-overflow:ellipsis}
pre{background:#f8f8f8;padding:10px;font-size:12px;overflow-x:auto;display:inline-block;margin:6px 0}
details summary{cursor:pointer;margin:6px 0}.muted{color:#666;font-size:13px}";

/// report.html, from the report and the series of its requests (read from requests.jsonl).
pub fn render(report: &RunReport, series: &Series) -> Result<String, ChartError> {
    let h = &report.header;
    let phases = report.measured();
    let mut out = page_head(&format!("Benchmark report: {}", h.scenario), h);
    thresholds_table(&mut out, &report.verdicts);
    notes_table(&mut out, &report.shown_notes());
    endings_table(&mut out, &report.endings());

    if phases.len() > 1 {
        out.push_str("<h2>Phases</h2>\n");
        phase_table(&mut out, &phases);
        out.push_str("<div class=\"grid\">\n");
        push_all(&mut out, &sweep::sweep_panels(&phases))?;
        out.push_str("</div>\n");
    } else if !phases.is_empty() {
        out.push_str("<h2>Summary</h2>\n");
        phase_table(&mut out, &phases);
    }
    charts(&mut out, report, series)?;
    sessions::sessions_section(&mut out, &phases)?;
    spec_decode::spec_decode_section(&mut out, report);
    energy::energy_section(&mut out, report);
    steady_state::steady_state_section(&mut out, report);
    tables_and_blocks(&mut out, &phases, &h.targets);
    page_end(&mut out, h);
    Ok(out)
}

/// The page up to its first section: title, description and the run's header table.
fn page_head(title: &str, h: &RunHeader) -> String {
    page_head_with(title, h, header_rows(h))
}

/// The page's head with the header table's `rows` (a series replaces the seed and digest).
fn page_head_with(title: &str, h: &RunHeader, rows: Vec<(&'static str, String)>) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>runner report: {}</title><style>{STYLE}</style></head><body>\n",
        escape(&h.scenario)
    );
    let _ = writeln!(out, "<h1>{}</h1>", escape(title));
    if !h.description.is_empty() {
        let _ = writeln!(out, "<p class=\"muted\">{}</p>", escape(&h.description));
    }
    out.push_str("<table class=\"kv\">\n");
    for (k, v) in rows {
        let _ = writeln!(out, "<tr><th>{k}</th><td>{}</td></tr>", escape(&v));
    }
    out.push_str("</table>\n");
    out
}

/// The runner's version, and the page's end.
fn page_end(out: &mut String, h: &RunHeader) {
    let _ = writeln!(
        out,
        "<p class=\"muted\">runner {}</p>\n</body></html>",
        escape(&h.runner_version)
    );
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
    push_all(out, &latency::latency_panels(series))?;
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
    // The block's peak (vLLM's `max_output_tokens_per_s`) counts 1 s windows.
    let peak_1s = phases
        .iter()
        .map(|s| s.peak_output_throughput)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    push_all(out, &timeline::time_panels(series, &bands, peak_1s))?;
    push_all(out, &server_charts::server_panels(series, &servers))?;
    out.push_str("</div>\n");
    Ok(())
}

/// Each phase's tag and target tables, and each phase's result block.
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

    // Below the charts, as text: the vLLM block a person pastes or diffs.
    if many {
        out.push_str("<h2>Serving benchmark result of each phase</h2>\n");
    } else if !phases.is_empty() {
        out.push_str("<h2>Serving benchmark result</h2>\n");
    }
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

/// The header table's rows: label and value.
fn header_rows(h: &RunHeader) -> Vec<(&'static str, String)> {
    let params = h
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ");
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
    let clock = h
        .virtual_time
        .then(|| ("Clock", super::text::VIRTUAL_CLOCK.to_string()));
    rows.into_iter().chain(clock).collect()
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
    grid_table(out, phases.iter().map(columns_with_units));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
