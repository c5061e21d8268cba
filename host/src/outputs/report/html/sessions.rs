//! report.html's sessions section, for the phases whose requests named a session: each
//! one's session table and TTFT by turn index as a table, and one chart of the mean and
//! P99 TTFT per turn index (does TTFT grow with the context a session carries?).

use std::fmt::Write as _;

use super::charts::{Chart, ChartError};
use super::escape::escape;
use super::grid_table;
use crate::measuring::metrics::PhaseSummary;
use crate::outputs::report::sessions::{overflow_notes, session_rows, turn_columns};

/// The chart's title, as the page shows it.
pub const TTFT_BY_TURN: &str = "TTFT by turn index";

/// The section; nothing when no phase had sessions.
pub(super) fn sessions_section(
    out: &mut String,
    phases: &[PhaseSummary],
) -> Result<(), ChartError> {
    let with: Vec<&PhaseSummary> = phases.iter().filter(|s| s.sessions.is_some()).collect();
    if with.is_empty() {
        return Ok(());
    }
    out.push_str("<h2>Sessions</h2>\n<div class=\"grid\">\n");
    out.push_str(&ttft_by_turn(&with).to_svg()?);
    out.push_str("</div>\n");
    for s in with {
        let Some(sessions) = &s.sessions else {
            continue;
        };
        if phases.len() > 1 {
            let _ = writeln!(out, "<h2>Sessions: {}</h2>", escape(&s.name));
        }
        out.push_str("<table class=\"kv\">\n");
        for (label, value) in session_rows(sessions) {
            let _ = writeln!(
                out,
                "<tr><th>{}</th><td>{}</td></tr>",
                escape(label.trim_end_matches(':')),
                escape(&value)
            );
        }
        out.push_str("</table>\n");
        for note in overflow_notes(sessions) {
            let _ = writeln!(out, "<p class=\"muted\">{}</p>", escape(&note));
        }
        out.push_str("<p class=\"muted\">TTFT by turn index</p>\n");
        grid_table(out, sessions.turns.iter().map(turn_columns));
    }
    Ok(())
}

/// Mean and P99 TTFT against the turn index, one pair of lines per session phase.
fn ttft_by_turn(phases: &[&PhaseSummary]) -> Chart {
    let mut chart = Chart::new(
        TTFT_BY_TURN,
        "turn index (requests the session sent before)",
        "ms",
    );
    for s in phases {
        let Some(sessions) = &s.sessions else {
            continue;
        };
        let name = |what: &str| {
            if phases.len() > 1 {
                format!("{}: {what}", s.name)
            } else {
                what.to_string()
            }
        };
        let at = |f: &dyn Fn(&crate::measuring::metrics::Distribution) -> f64| {
            sessions
                .turns
                .iter()
                .map(|t| (f64::from(t.turn), f(&t.ttft)))
                .collect()
        };
        chart = chart.line(&name("mean TTFT"), at(&|d| d.mean)).line(
            &name("P99 TTFT"),
            at(&|d| d.percentile(99.0).unwrap_or(0.0)),
        );
    }
    chart.dots = true;
    chart.x_integers = true;
    chart
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_phase_has_its_table_and_chart_and_others_nothing() {
        let acc = crate::measuring::metrics::PhaseAccumulator::new(&Default::default());
        let mut s = acc.summarize(&crate::measuring::metrics::PhaseInfo {
            name: "main".into(),
            duration_ns: 1,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
            steady_window: None,
        });
        let mut out = String::new();
        sessions_section(&mut out, std::slice::from_ref(&s)).unwrap();
        assert_eq!(out, "");
        s.sessions = Some(crate::measuring::metrics::sessions::tests::example());
        sessions_section(&mut out, &[s]).unwrap();
        assert_eq!(out.matches("<svg").count(), 1);
        assert!(out.contains(TTFT_BY_TURN));
        for text in ["mean TTFT", "P99 TTFT", "<th>Sessions</th><td>2</td>"] {
            assert!(out.contains(text), "{text}: {out}");
        }
        assert!(out.contains("<th>Total tool wait (s)</th><td>0.40</td>"));
        // The turn table: one row per turn index under its titles.
        assert!(out.contains("<th>mean TTFT ms</th>"));
        assert!(out.contains("<tr><td>2</td><td>2</td><td>40.00</td><td>40.00</td><td>49.80</td><td>400.00</td></tr>"));
    }

    /// Issue 58: the turn index axis had ticks at 0.5, 1.5: a turn index is a count.
    #[test]
    fn the_turn_index_axis_is_labelled_at_whole_numbers_only() {
        let acc = crate::measuring::metrics::PhaseAccumulator::new(&Default::default());
        let mut s = acc.summarize(&crate::measuring::metrics::PhaseInfo {
            name: "main".into(),
            duration_ns: 1,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
            steady_window: None,
        });
        s.sessions = Some(crate::measuring::metrics::sessions::tests::example());
        let svg = ttft_by_turn(&[&s]).to_svg().expect("svg");
        let labels: Vec<&str> = svg
            .split("</text>")
            .filter_map(|t| t.rsplit('>').next())
            .map(str::trim)
            .collect();
        let turns = ["0", "1", "2"];
        for t in turns {
            assert!(labels.contains(&t), "no tick {t}: {labels:?}");
        }
        for half in ["0.5", "1.5"] {
            assert!(!labels.contains(&half), "tick {half}: {labels:?}");
        }
    }
}
