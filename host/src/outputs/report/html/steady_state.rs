//! report.html's steady-state section: for each measured phase with a steady-state
//! window, a table of the window and the figures over it beside the phase's
//! (`text/steady_state.rs` has the words).

use std::fmt::Write as _;

use super::escape::escape;
use crate::measuring::metrics::PhaseSummary;
use crate::outputs::report::run_report::RunReport;
use crate::outputs::report::text::steady_state::{lines, TITLE};

/// The section; nothing when no measured phase has a steady state.
pub(super) fn steady_state_section(out: &mut String, report: &RunReport) {
    let phases: Vec<_> = report
        .phases
        .iter()
        .filter(|p| !p.warmup)
        .filter_map(|p| Some((&p.summary, p.summary.steady_state.as_ref()?)))
        .collect();
    if phases.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>{TITLE}</h2>");
    for (summary, st) in phases {
        let _ = writeln!(
            out,
            "<h3>{}</h3>\n<table><tr><th>metric</th><th>value</th></tr>",
            escape(&summary.name)
        );
        for (label, value) in lines(st, summary) {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(label.trim_end_matches(':')),
                escape(&value)
            );
        }
        out.push_str("</table>\n");
    }
}

/// Each measured phase's steady-state window on the time charts' timeline: its start
/// there (`boundaries`, in the order of `phases`) plus the window's bounds.
pub(super) fn bands(phases: &[PhaseSummary], boundaries: &[(f64, String)]) -> Vec<(f64, f64)> {
    phases
        .iter()
        .zip(boundaries)
        .filter_map(|(s, (start, _))| {
            let w = &s.steady_state.as_ref()?.window;
            Some((start + w.start_s, start + w.end_s))
        })
        .collect()
}
