//! report.md and phases.md: the result as markdown, the vLLM block fenced as the GPUStack
//! report shows it, then the scenario's notes, each phase's tag table, how phases ended,
//! the servers' metrics and the per-target tables.

use std::fmt::Write as _;

use super::run_report::RunReport;
use super::sessions::{overflow_notes, session_rows, turn_columns};
use super::table::{columns_with_units, markdown_table, tag_columns, target_columns};
use super::text::{render_header, render_phase_result, server_lines};
use crate::measuring::metrics::{PhaseSummary, SessionsSummary};
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
    for s in &measured {
        if let Some(sessions) = &s.sessions {
            md += &format!("\n## Sessions: {}\n{}", s.name, session_tables(sessions));
        }
    }
    md += &endings(&report.endings());
    for s in &measured {
        md += &super::text::steady_state::render_markdown(s);
    }
    let servers = report.phases.iter().filter(|p| !p.warmup);
    for (p, server) in servers.filter_map(|p| Some((p, p.server.as_ref()?))) {
        if server.samples > 0 {
            md += &format!(
                "\n## Server metrics: {}\n{}",
                p.summary.name,
                server_table(server, &p.summary)
            );
        }
        md += &super::text::spec_decode::render_markdown(&p.summary.name, server);
        md += &super::text::energy::render_markdown(&p.summary.name, server);
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
    markdown_table(phases.iter().map(columns_with_units).collect())
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

/// A phase's session figures as a table of rows, then TTFT by turn index (report.md gives
/// them their heading).
fn session_tables(s: &SessionsSummary) -> String {
    let mut out = String::from("\n| metric | value |\n|---|---|\n");
    for (label, value) in session_rows(s) {
        let _ = writeln!(out, "| {} | {value} |", label.trim_end_matches(':'));
    }
    for note in overflow_notes(s) {
        let _ = write!(out, "\n{note}\n");
    }
    if !s.turns.is_empty() {
        out += "\n### TTFT by turn index\n\n";
        out += &markdown_table(s.turns.iter().map(turn_columns).collect());
    }
    out
}

/// The per-target table in markdown (nothing with one target).
pub(super) fn target_table(s: &PhaseSummary, urls: &[String]) -> String {
    markdown_table(s.targets.iter().map(|t| target_columns(t, urls)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The two sessions of three turns of `metrics::sessions`'s tests.
    const SESSIONS_MD: &str = "
| metric | value |
|---|---|
| Sessions | 2 |
| Root sessions | 1 |
| Child sessions | 1 |
| Session requests | 6 |
| Mean session duration (s) | 0.82 |
| Median session duration (s) | 0.82 |
| P99 session duration (s) | 1.15 |
| Mean requests per session | 3.00 |
| Max requests per session | 3 |
| Tool calls | 3 |
| Mean tool calls per session | 1.50 |
| Max tool calls per session | 3 |
| Answers with tool calls | 2 |
| Tool-call tokens | 21 |
| Mean time to first tool call (ms) | 5.00 |
| P99 time to first tool call (ms) | 5.00 |
| Total tool wait (s) | 0.40 |
| Mean tool wait per session (s) | 0.20 |
| Total think time (s) | 1.00 |
| Mean think time per session (s) | 0.50 |

### TTFT by turn index

| turn | requests | mean TTFT ms | P50 TTFT ms | P99 TTFT ms | mean input tokens |
|---|---|---|---|---|---|
| 0 | 2 | 20.00 | 20.00 | 29.80 | 100.00 |
| 1 | 2 | 30.00 | 30.00 | 39.80 | 250.00 |
| 2 | 2 | 40.00 | 40.00 | 49.80 | 400.00 |
";

    #[test]
    fn session_tables_golden() {
        let s = crate::measuring::metrics::sessions::tests::example();
        assert_eq!(session_tables(&s), SESSIONS_MD);
    }
}
