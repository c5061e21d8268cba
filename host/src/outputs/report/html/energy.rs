//! report.html's energy section: one table over the measured phases with `--power-metrics`
//! figures (joules, seconds, mean watts, joules per output token, output tokens per joule),
//! and below it each line of what an exporter lacked (`text/energy.rs` has the words).

use std::fmt::Write as _;

use super::escape::escape;
use crate::outputs::report::run_report::RunReport;
use crate::outputs::report::text::energy::{figure, TITLE};

/// The section; nothing when no measured phase has energy figures.
pub(super) fn energy_section(out: &mut String, report: &RunReport) {
    let phases: Vec<_> = report
        .phases
        .iter()
        .filter(|p| !p.warmup)
        .filter_map(|p| Some((&p.summary.name, p.server.as_ref()?.energy.as_ref()?)))
        .collect();
    if phases.is_empty() {
        return;
    }
    let _ = writeln!(out, "<h2>{TITLE}</h2>");
    out.push_str(
        "<table><tr><th>phase</th><th>energy (J)</th><th>over (s)</th><th>mean power (W)</th>\
         <th>output tokens</th><th>J per output token</th><th>output tokens per J</th>\
         <th>from</th></tr>\n",
    );
    let num = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| figure(v, digits));
    for (name, e) in &phases {
        let cells = [
            name.to_string(),
            num(e.joules, 1),
            num(e.seconds, 2),
            num(e.mean_watts, 1),
            e.output_tokens.map_or("-".into(), |t| t.to_string()),
            num(e.joules_per_token, 4),
            num(e.tokens_per_joule, 3),
            e.source.map_or("not measured", |s| s.words()).to_string(),
        ];
        out.push_str("<tr>");
        for cell in cells {
            let _ = write!(out, "<td>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    for (name, e) in &phases {
        for line in &e.missing {
            let _ = writeln!(
                out,
                "<p class=\"muted\">{}: {}</p>",
                escape(name),
                escape(line)
            );
        }
    }
}
