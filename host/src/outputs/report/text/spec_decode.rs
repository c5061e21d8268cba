//! The "Speculative decoding" section of each phase whose server drafted: acceptance rate,
//! mean acceptance length and per-position acceptance (the definitions are vLLM's, see
//! `servers/server_metrics/spec_decode.rs`), as lines the text, markdown and HTML reports
//! each lay out their own way.

use crate::servers::server_metrics::{ServerPhase, SpecDecode, SpecDecodeSource};

/// The section's title in every format.
pub const TITLE: &str = "Speculative decoding";

/// One line of the section: a label and its value.
type Line = (String, String);

/// The section's lines.
pub fn lines(s: &SpecDecode) -> Vec<Line> {
    let pct = |v: f64| format!("{:.1} %", v * 100.0);
    let mut out: Vec<Line> = Vec::new();
    if let (Some(drafts), Some(tokens), Some(accepted)) =
        (s.drafts, s.draft_tokens, s.accepted_tokens)
    {
        out.push(("Drafts:".into(), format!("{drafts:.0}")));
        let value = format!("{tokens:.0} ({accepted:.0})");
        out.push(("Draft tokens (accepted):".into(), value));
    }
    if let Some(rate) = s.acceptance_rate {
        out.push(("Acceptance rate:".into(), pct(rate)));
    }
    if let Some(length) = s.mean_acceptance_length {
        out.push((
            "Mean acceptance length (tokens/step):".into(),
            format!("{length:.2}"),
        ));
    }
    if !s.per_position.is_empty() {
        let shares: Vec<String> = s.per_position.iter().map(|&v| pct(v)).collect();
        out.push(("Acceptance per position:".into(), shares.join(" / ")));
    }
    if s.source == SpecDecodeSource::Gauges {
        out.push((
            "From:".into(),
            "the server's gauges, mean over the phase's scrapes".into(),
        ));
    }
    out
}

/// The section in the text report's layout (a 50-wide ruler, labels in 40 columns);
/// nothing when the server did not draft in the phase.
pub fn render_section(server: &ServerPhase) -> String {
    server.spec_decode.as_ref().map_or_else(String::new, |s| {
        super::format::lines_section(TITLE, &lines(s))
    })
}

/// The section of phase `name` as report.md gives it: a heading and a table.
pub fn render_markdown(name: &str, server: &ServerPhase) -> String {
    server.spec_decode.as_ref().map_or_else(String::new, |s| {
        super::format::lines_markdown(TITLE, name, &lines(s))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vllm() -> SpecDecode {
        SpecDecode {
            source: SpecDecodeSource::Counters,
            drafts: Some(1000.0),
            draft_tokens: Some(3000.0),
            accepted_tokens: Some(1472.0),
            acceptance_rate: Some(1472.0 / 3000.0),
            mean_acceptance_length: Some(2.472),
            per_position: vec![0.8, 0.48, 0.192],
        }
    }

    #[test]
    fn the_text_section_names_every_figure() {
        let server = ServerPhase {
            spec_decode: Some(vllm()),
            ..ServerPhase::default()
        };
        let text = render_section(&server);
        let want = "\
-------------- Speculative decoding --------------
Drafts:                                  1000
Draft tokens (accepted):                 3000 (1472)
Acceptance rate:                         49.1 %
Mean acceptance length (tokens/step):    2.47
Acceptance per position:                 80.0 % / 48.0 % / 19.2 %
";
        assert_eq!(text, want);
        let md = render_markdown("main", &server);
        assert!(md.starts_with("\n## Speculative decoding: main\n"), "{md}");
        assert!(md.contains("| Acceptance rate | 49.1 % |"), "{md}");
        assert_eq!(render_section(&ServerPhase::default()), "");
        assert_eq!(render_markdown("main", &ServerPhase::default()), "");
    }

    #[test]
    fn gauges_say_where_they_come_from_and_show_no_counts() {
        let s = SpecDecode {
            source: SpecDecodeSource::Gauges,
            drafts: None,
            draft_tokens: None,
            accepted_tokens: None,
            acceptance_rate: None,
            mean_acceptance_length: Some(2.9),
            per_position: Vec::new(),
        };
        let labels: Vec<String> = lines(&s).into_iter().map(|(l, _)| l).collect();
        assert_eq!(labels, ["Mean acceptance length (tokens/step):", "From:"]);
    }
}
