//! Why each phase ended, when it did not simply send all its requests (its duration, the
//! scenario's stop, the error rate, Ctrl-C): the text report says it under each phase;
//! this is the same in report.md and report.html (result.json has `runner.ended`).

use std::fmt::Write as _;

use super::html_escape::escape;
use super::run_report::ReportPhase;

/// Each phase that ended early: its name and why.
pub fn endings(phases: &[ReportPhase]) -> Vec<(String, String)> {
    phases
        .iter()
        .filter_map(|p| Some((p.summary.name.clone(), p.ended.clone()?)))
        .collect()
}

pub fn render_markdown(endings: &[(String, String)]) -> String {
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

pub fn render_html(out: &mut String, endings: &[(String, String)]) {
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
