//! report.md and phases.md: the result as markdown, the vLLM block fenced as the GPUStack
//! report shows it, then the scenario's notes, each phase's tag table, how phases ended,
//! the servers' metrics and the per-target tables.

use std::fmt::Write as _;

use super::run_report::RunReport;
use super::table::{columns, markdown_table, tag_columns, target_columns};
use super::text::{render_header, render_phase_result, server_lines};
use crate::measuring::metrics::PhaseSummary;
use crate::servers::server_metrics::ServerPhase;
use crate::workloads::scenario::NoteValue;

/// report.md: the result, the scenario's notes and each phase's tag table. Servers'
/// messages and scenarios' names reach it: control characters are escaped (line breaks
/// kept), as on the terminal.
pub fn render_markdown(report: &RunReport) -> String {
    let measured = report.measured();
    let mut md = result(report, &measured);
    md += &notes(&report.shown_notes());
    for s in measured.iter().filter(|s| !s.tags.is_empty()) {
        md += &format!(
            "\n## Per-tag metrics: {}\n\n{}",
            s.name,
            markdown_table(s.tags.iter().map(tag_columns).collect())
        );
    }
    md += &endings(&report.endings());
    let servers = report.phases.iter().filter(|p| !p.warmup);
    for (p, server) in servers.filter_map(|p| Some((p, p.server.as_ref()?))) {
        md += &format!(
            "\n## Server metrics: {}\n{}",
            p.summary.name,
            server_table(server, &p.summary)
        );
    }
    for s in measured.iter().filter(|s| !s.targets.is_empty()) {
        md += &format!(
            "\n## Per-target metrics: {}\n\n{}",
            s.name,
            target_table(s, &report.header.targets)
        );
    }
    crate::safeguards::display::escape_control_multiline(&md).into_owned()
}

/// phases.md: the table over the measured phases.
pub fn render_phases(report: &RunReport) -> String {
    phase_table(&report.measured())
}

fn phase_table(phases: &[PhaseSummary]) -> String {
    markdown_table(phases.iter().map(|s| columns(s).to_vec()).collect())
}

/// Header, thresholds, the phase table, and each phase's result as the text report has it
/// (see [`render_phase_result`]) in a fenced block.
fn result(report: &RunReport, phases: &[PhaseSummary]) -> String {
    let header = &report.header;
    let mut out = format!("# Benchmark result: {}\n\n", header.scenario);
    out.push_str("```\n");
    out.push_str(&render_header(header));
    out.push_str("```\n\n");
    out += &thresholds(report);
    if phases.len() > 1 {
        out.push_str("## Phases\n\n");
        out.push_str(&phase_table(phases));
        out.push('\n');
    }
    for s in phases {
        if phases.len() > 1 {
            let _ = writeln!(out, "## {}\n", s.name);
        }
        out.push_str("```\n");
        out.push_str(&render_phase_result(s));
        out.push_str("```\n\n");
    }
    out
}

fn thresholds(report: &RunReport) -> String {
    let mut out = String::new();
    if report.verdicts.is_empty() {
        return out;
    }
    out.push_str("## Thresholds\n\n| threshold | phase | value | verdict |\n|---|---|---|---|\n");
    for v in &report.verdicts {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            v.threshold,
            v.phase.replace('|', "\\|"),
            v.value_text(),
            if v.pass { "pass" } else { "**FAIL**" }
        );
    }
    out.push('\n');
    out
}

/// The scenario's `note`s as a markdown table (nothing when it reported none).
fn notes(notes: &[(String, NoteValue)]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## Scenario result\n\n| key | value |\n|---|---|\n");
    for (key, value) in notes {
        let cell = |t: &str| crate::safeguards::display::escape_control(t).replace('|', "\\|");
        out += &format!("| {} | {} |\n", cell(key), cell(&value.to_string()));
    }
    out
}

/// Why each phase ended, when it did not simply send all its requests.
fn endings(endings: &[(String, String)]) -> String {
    if endings.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n## How phases ended\n\n| phase | ended |\n|---|---|\n");
    for (phase, why) in endings {
        let _ = writeln!(
            out,
            "| {} | {} |",
            phase.replace('|', "\\|"),
            why.replace('|', "\\|")
        );
    }
    out
}

/// A phase's server metrics as a markdown table (report.md gives it its heading).
fn server_table(server: &ServerPhase, client: &PhaseSummary) -> String {
    let mut out = String::from("\n| metric | value |\n|---|---|\n");
    for (label, value) in server_lines(server, client) {
        let label = label.trim_end_matches(':').replace('|', "\\|");
        let _ = writeln!(out, "| {label} | {} |", value.replace('|', "\\|"));
    }
    out
}

/// The per-target table in markdown (nothing with one target).
pub(super) fn target_table(s: &PhaseSummary, urls: &[String]) -> String {
    markdown_table(s.targets.iter().map(|t| target_columns(t, urls)).collect())
}
