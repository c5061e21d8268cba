//! The text extras' per-target table of a run with several `--target`s, like the per-tag
//! one, with the requests each target saw cancelled by the scenario; and the line that
//! counts a phase's cancelled requests.

use std::fmt::Write;

use super::super::table::{aligned_table, target_columns};
use crate::measuring::metrics::PhaseSummary;

/// The text extras' section on targets and cancellations: a phase's requests cancelled by
/// the scenario (when there were any) and its per-target table (with several targets).
pub(super) fn render_text_section(s: &PhaseSummary, urls: &[String]) -> String {
    let mut out = String::new();
    if s.cancelled > 0 {
        let _ = writeln!(
            out,
            "{:<40} {:<10}",
            "Cancelled by the scenario:", s.cancelled
        );
    }
    if !s.targets.is_empty() {
        let _ = writeln!(out, "{:-^50}", "Per-target Metrics");
        out += &aligned_table(s.targets.iter().map(|t| target_columns(t, urls)).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo, RequestRecord};
    use crate::outputs::report::json::target_results;
    use crate::outputs::report::markdown::target_table as render_target_table_markdown;

    fn record(index: u64, target: usize, cancelled: bool) -> RequestRecord {
        serde_json::from_value(serde_json::json!({
            "phase": 0, "index": index, "scheduled_ns": 0, "sent_ns": 0,
            "chunks": [{"t_ns": 2_000_000 + index * 1_000_000, "tokens": 1},
                       {"t_ns": 9_000_000, "tokens": 1}],
            "end_ns": 9_000_000, "input_tokens": 10, "output_tokens": 2, "text_tokens": 2,
            "target": target, "cancelled": cancelled,
        }))
        .expect("a valid record")
    }

    fn phase(records: &[RequestRecord]) -> PhaseSummary {
        let mut acc = PhaseAccumulator::new(&MetricsOptions::default());
        for r in records {
            acc.record(r);
        }
        acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 1_000_000_000,
            max_concurrency: None,
            request_rate: None,
            burstiness: None,
            steady_window: None,
        })
    }

    #[test]
    fn each_target_has_a_row_with_its_url_and_cancellations() {
        let s = phase(&[
            record(0, 0, false),
            record(1, 1, false),
            record(2, 0, true),
            record(3, 1, false),
        ]);
        assert_eq!((s.completed, s.failed, s.cancelled), (3, 0, 1));
        // A cancelled request's TTFT counts, its E2EL does not.
        assert_eq!((s.ttft.count, s.e2el.count), (4, 3));
        let urls = ["http://a".to_string(), "http://b".to_string()];
        let text = render_text_section(&s, &urls);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("Cancelled by the scenario:"), "{text}");
        assert!(lines[0].trim_end().ends_with(" 1"), "{text}");
        let words = |line: &str| {
            line.split_whitespace()
                .take(5)
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            words(lines[2]),
            "target url completed failed cancelled",
            "{text}"
        );
        assert_eq!(words(lines[3]), "0 http://a 1 0 1", "{text}");
        assert_eq!(words(lines[4]), "1 http://b 2 0 0", "{text}");
        let json = target_results(&s, &urls);
        assert_eq!(
            json.iter()
                .map(|t| (t.target, t.completed, t.cancelled))
                .collect::<Vec<_>>(),
            [(0, 1, 1), (1, 2, 0)]
        );
        let md = render_target_table_markdown(&s, &urls);
        assert_eq!(md.lines().count(), 4, "{md}");
    }

    #[test]
    fn one_target_and_no_cancellation_add_nothing() {
        let mut r = record(0, 0, false);
        r.target = None;
        let s = phase(&[r]);
        assert!(s.targets.is_empty());
        assert_eq!(render_text_section(&s, &[]), "");
        assert!(target_results(&s, &[]).is_empty());
    }
}
