//! The "Energy" section of each phase whose run was given `--power-metrics`: the energy
//! used, mean power, joules per output token and output tokens per joule (the figures of
//! `servers/server_metrics/energy.rs`), as lines the text, markdown and HTML reports each
//! lay out their own way. What an exporter lacked is one line each.

use crate::servers::server_metrics::energy::EnergyPhase;
use crate::servers::server_metrics::ServerPhase;

/// The section's title in every format.
pub const TITLE: &str = "Energy";

/// One line of the section: a label and its value.
type Line = (String, String);

/// What a figure shows where the exporter's numbers made it no number (a `NaN` or an
/// infinite reading): result.json writes such a figure as null.
pub const NOT_A_NUMBER: &str = "n/a (the exporter's readings give no number)";

/// `v` with `digits` decimals, or [`NOT_A_NUMBER`] where it is not finite.
pub fn figure(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        NOT_A_NUMBER.into()
    }
}

/// The section's lines.
pub fn lines(e: &EnergyPhase) -> Vec<Line> {
    let mut out: Vec<Line> = Vec::new();
    match (e.source, e.joules, e.seconds) {
        (Some(source), Some(joules), Some(seconds)) => {
            out.push(("Energy from:".into(), source.words().into()));
            let used = if joules.is_finite() && seconds.is_finite() {
                format!("{joules:.1} over {seconds:.2} s")
            } else {
                NOT_A_NUMBER.into()
            };
            out.push(("Energy used (J):".into(), used));
            if let Some(w) = e.mean_watts {
                out.push(("Mean power (W):".into(), figure(w, 1)));
            }
        }
        _ => out.push(("Energy used:".into(), "not measured".into())),
    }
    if let Some(tokens) = e.output_tokens {
        out.push((
            "Output tokens (client, successful):".into(),
            tokens.to_string(),
        ));
    }
    if let Some(j) = e.joules_per_token {
        out.push(("Joules per output token:".into(), figure(j, 4)));
    }
    if let Some(t) = e.tokens_per_joule {
        out.push(("Output tokens per joule:".into(), figure(t, 3)));
    }
    for line in &e.missing {
        out.push(("Missing:".into(), line.clone()));
    }
    out
}

/// The section in the text report's layout (a 50-wide ruler, labels in 40 columns);
/// nothing without `--power-metrics`.
pub fn render_section(server: &ServerPhase) -> String {
    server.energy.as_ref().map_or_else(String::new, |e| {
        super::format::lines_section(TITLE, &lines(e))
    })
}

/// The section of phase `name` as report.md gives it: a heading and a table.
pub fn render_markdown(name: &str, server: &ServerPhase) -> String {
    server.energy.as_ref().map_or_else(String::new, |e| {
        super::format::lines_markdown(TITLE, name, &lines(e))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::servers::server_metrics::energy::EnergySource;

    fn measured() -> EnergyPhase {
        let mut e = EnergyPhase {
            exporters: 1,
            scrapes: 4,
            source: Some(EnergySource::Counter),
            joules: Some(1200.0),
            seconds: Some(4.0),
            mean_watts: Some(300.0),
            output_tokens: None,
            joules_per_token: None,
            tokens_per_joule: None,
            missing: Vec::new(),
        };
        e.count_tokens(6000);
        e
    }

    #[test]
    fn a_measured_phase_reads_in_joules_watts_and_tokens() {
        let server = ServerPhase {
            energy: Some(measured()),
            ..ServerPhase::default()
        };
        let text = render_section(&server);
        assert!(text.starts_with("--------------------- Energy ---------------------\n"));
        for want in [
            "Energy from:                             energy counter\n",
            "Energy used (J):                         1200.0 over 4.00 s\n",
            "Mean power (W):                          300.0\n",
            "Output tokens (client, successful):      6000\n",
            "Joules per output token:                 0.2000\n",
            "Output tokens per joule:                 5.000\n",
        ] {
            assert!(text.contains(want), "{want}\n{text}");
        }
        let md = render_markdown("p|1", &server);
        assert!(md.contains("## Energy: p|1\n"), "{md}");
        assert!(md.contains("| Joules per output token | 0.2000 |"), "{md}");
        assert_eq!(render_section(&ServerPhase::default()), "");
        assert_eq!(render_markdown("p", &ServerPhase::default()), "");
    }

    /// A hostile exporter's `NaN` (or infinite) counter: result.json writes null, and the
    /// report says n/a instead of printing `NaN`.
    #[test]
    fn a_counter_that_is_no_number_reads_n_a() {
        let mut e = EnergyPhase {
            joules: Some(f64::NAN),
            mean_watts: Some(f64::INFINITY),
            ..measured()
        };
        e.count_tokens(6000);
        let server = ServerPhase {
            energy: Some(e),
            ..ServerPhase::default()
        };
        let text = format!(
            "{}{}",
            render_section(&server),
            render_markdown("p", &server)
        );
        assert!(!text.contains("NaN") && !text.contains("inf"), "{text}");
        assert!(
            text.contains("Energy used (J):                         n/a (the exporter's readings give no number)\n"),
            "{text}"
        );
        assert!(text.contains("| Mean power (W) | n/a"), "{text}");
    }

    #[test]
    fn an_exporter_without_counters_is_one_line() {
        let e = EnergyPhase {
            source: None,
            joules: None,
            seconds: None,
            mean_watts: None,
            joules_per_token: None,
            tokens_per_joule: None,
            missing: vec!["http://x/metrics has no energy counter".into()],
            ..measured()
        };
        let lines = lines(&e);
        assert_eq!(lines[0], ("Energy used:".into(), "not measured".into()));
        let missing: Vec<_> = lines.iter().filter(|l| l.0 == "Missing:").collect();
        assert_eq!(missing.len(), 1);
    }
}
