//! report.html's speculative-decoding section: for each measured phase whose server
//! drafted, the text report's lines as a table (`text/spec_decode.rs`).

use std::fmt::Write as _;

use super::escape::escape;
use crate::outputs::report::run_report::RunReport;
use crate::outputs::report::text::spec_decode::{lines, TITLE};

/// The section; nothing when no measured phase's server drafted.
pub(super) fn spec_decode_section(out: &mut String, report: &RunReport) {
    let phases = report.phases.iter().filter(|p| !p.warmup);
    for p in phases {
        let Some(s) = p.server.as_ref().and_then(|s| s.spec_decode.as_ref()) else {
            continue;
        };
        let _ = writeln!(out, "<h2>{TITLE}: {}</h2>", escape(&p.summary.name));
        out.push_str("<table class=\"kv\">\n");
        for (label, value) in lines(s) {
            let _ = writeln!(
                out,
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(label.trim_end_matches(':')),
                escape(&value)
            );
        }
        out.push_str("</table>\n");
    }
}
