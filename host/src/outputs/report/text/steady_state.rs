//! The "Steady state" section of each capped phase whose requests in flight reached 95 %
//! of the cap, or of a phase whose scenario named its window (`metrics/steady_state.rs`):
//! the window, which rule chose it, how full it held, and the headline figures over it
//! beside the whole phase's, as lines the text, markdown and HTML reports each lay out
//! their own way.

use crate::measuring::metrics::steady_state::{threshold_requests, WindowRule, THRESHOLD};
use crate::measuring::metrics::{Distribution, PhaseSummary, SteadyState, SteadyWindow};

/// The section's title in every format.
pub const TITLE: &str = "Steady state";

/// One line of the section: a label and its value.
type Line = (String, String);

/// `mean / p50 / p99` of a latency, ms. The window's distributions always hold p99; the
/// phase's hold the percentiles `--percentiles` asked for, so without 99 its p99 is `-`.
fn latency(d: &Distribution) -> String {
    let p99 = d
        .percentile(99.0)
        .map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    format!("{:.2} / {:.2} / {p99}", d.mean, d.median)
}

/// Which rule chose the window, in words.
fn rule(w: &SteadyWindow) -> String {
    match w.rule {
        WindowRule::Plateau => format!(
            "plateau (in flight >= {:.0} % of the cap)",
            w.threshold * 100.0
        ),
        WindowRule::Named => "named by the scenario (steady_window)".into(),
    }
}

/// How full the window held: against the cap when the phase has one.
fn in_flight(w: &SteadyWindow) -> String {
    match (w.cap, w.threshold_requests, w.time_at_threshold) {
        (Some(cap), Some(n), Some(at)) => format!(
            "{:.1} of {cap} ({:.1} % of the time at >= {n})",
            w.mean_concurrency,
            at * 100.0
        ),
        _ => format!("{:.1} (no cap; peak {})", w.mean_concurrency, w.peak),
    }
}

/// The section's lines: the window's, then each figure over it and over the phase.
pub fn lines(st: &SteadyState, whole: &PhaseSummary) -> Vec<Line> {
    let w = &st.window;
    let mut out: Vec<Line> = vec![
        (
            "Window (s from phase start):".into(),
            format!("{:.3} to {:.3} ({:.3} s)", w.start_s, w.end_s, w.duration_s),
        ),
        ("Window chosen by:".into(), rule(w)),
        ("In flight (mean over the window):".into(), in_flight(w)),
        (
            "Requests sent / completed in window:".into(),
            format!("{} / {}", w.requests_sent, w.requests_completed),
        ),
    ];
    let pair = |window: f64, phase: f64| format!("{window:.2} (phase {phase:.2})");
    out.push((
        "Request throughput (req/s):".into(),
        pair(st.request_throughput, whole.request_throughput),
    ));
    out.push((
        "Output token throughput (tok/s):".into(),
        pair(st.output_throughput, whole.output_throughput),
    ));
    out.push((
        "Total token throughput (tok/s):".into(),
        pair(st.total_token_throughput, whole.total_token_throughput),
    ));
    for (name, d, phase) in [
        ("TTFT", &st.ttft, &whole.ttft),
        ("TPOT", &st.tpot, &whole.tpot),
        ("E2EL", &st.e2el, &whole.e2el),
    ] {
        out.push((
            format!("{name} mean/p50/p99 (ms):"),
            format!("{} (phase {})", latency(d), latency(phase)),
        ));
    }
    out
}

/// Why a capped phase has no window, in words: the plateau rule applies to it, so a report
/// that left the section out would go quiet about it (issue 58). `None` for a phase with a
/// window, and for one without a cap, whose report never had the section.
pub fn missing(s: &PhaseSummary) -> Option<String> {
    let cap = s.max_concurrency.filter(|c| *c > 0)?;
    if s.steady_state.is_some() {
        return None;
    }
    let needed = threshold_requests(cap);
    let why = if s.completed + s.failed + s.cancelled == 0 {
        "no request finished".to_string()
    } else if s.peak_concurrency < needed as f64 {
        format!(
            "requests in flight peaked at {:.0}, never {:.0} % of the cap {cap} ({needed}); \
             more requests or a lower max_concurrency would fill it",
            s.peak_concurrency,
            THRESHOLD * 100.0
        )
    } else {
        format!(
            "requests in flight reached {:.0} % of the cap {cap} but held no window there",
            THRESHOLD * 100.0
        )
    };
    Some(format!("no steady-state window: {why}"))
}

/// The section in the text report's layout; for a capped phase without a window, a line
/// saying why; nothing for another phase.
pub fn render_section(s: &PhaseSummary) -> String {
    match (&s.steady_state, missing(s)) {
        (Some(st), _) => super::format::lines_section(TITLE, &lines(st, s)),
        (None, Some(why)) => format!("{why}\n"),
        (None, None) => String::new(),
    }
}

/// The section of a phase as report.md gives it: a heading and a table (or the line
/// saying why there is no window).
pub fn render_markdown(s: &PhaseSummary) -> String {
    match (&s.steady_state, missing(s)) {
        (Some(st), _) => super::format::lines_markdown(TITLE, &s.name, &lines(st, s)),
        (None, Some(why)) => format!("\n## {TITLE}: {}\n\n{why}\n", s.name),
        (None, None) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measuring::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo, RequestRecord};

    const MS: u64 = 1_000_000;

    /// Request `i` of a phase capped at 4: sent in groups of four every 200 ms, its first
    /// token `i + 1` ms after its send, its last 150 ms after it.
    fn record(i: u64) -> RequestRecord {
        let sent = (i / 4) * 200 * MS + (i % 4) * MS;
        let (first, last) = (sent + (i + 1) * MS, sent + 150 * MS);
        serde_json::from_value(serde_json::json!({
            "phase": 0, "index": i, "scheduled_ns": sent, "sent_ns": sent,
            "first_byte_ns": first, "end_ns": last,
            "chunks": [{"t_ns": first, "tokens": 1}, {"t_ns": last, "tokens": 9}],
            "input_tokens": 10, "output_tokens": 10, "text_tokens": 10,
        }))
        .expect("a record")
    }

    /// With `--percentiles 50,90` the window's p99 is its own p99 (not its median: the
    /// bug of 5c6a4c9), and the phase's, which was not asked for, is `-` (not 0).
    #[test]
    fn without_p99_asked_the_line_reads_the_windows_p99_and_no_phase_p99() {
        let opts = MetricsOptions {
            percentiles: vec![50.0, 90.0],
            goodput: None,
        };
        let mut acc = PhaseAccumulator::new(&opts);
        for i in 0..100 {
            acc.record(&record(i));
        }
        let s = acc.summarize(&PhaseInfo {
            name: "main".into(),
            duration_ns: 5_000 * MS,
            max_concurrency: Some(4),
            request_rate: None,
            burstiness: None,
            steady_window: None,
        });
        let st = s.steady_state.as_ref().expect("a steady state");
        // Requests 3..=99 were sent in the window: TTFT 4 to 100 ms.
        assert_eq!(st.window.requests_sent, 97);
        let p99 = st.ttft.percentile(99.0).expect("the window's p99");
        assert!(p99 > 95.0 && st.ttft.median < 60.0, "{:?}", st.ttft);
        let ttft = lines(st, &s)
            .into_iter()
            .find(|(label, _)| label.starts_with("TTFT"))
            .expect("a TTFT line")
            .1;
        assert_eq!(
            ttft,
            format!(
                "{:.2} / {:.2} / {p99:.2} (phase {:.2} / {:.2} / -)",
                st.ttft.mean, st.ttft.median, s.ttft.mean, s.ttft.median
            )
        );
        assert!(render_section(&s).contains("plateau (in flight >= 95 % of the cap)"));
    }

    /// Issue 58: `throughput.rhai -p requests=100` (cap 512) printed no steady-state
    /// block at all; it says there is no window and why.
    #[test]
    fn a_capped_phase_that_never_filled_says_why_it_has_no_window() {
        let opts = MetricsOptions {
            percentiles: vec![50.0, 99.0],
            goodput: None,
        };
        let mut acc = PhaseAccumulator::new(&opts);
        for i in 0..100 {
            acc.record(&record(i));
        }
        let mut info = PhaseInfo {
            name: "main".into(),
            duration_ns: 5_000 * MS,
            max_concurrency: Some(512),
            request_rate: None,
            burstiness: None,
            steady_window: None,
        };
        let s = acc.summarize(&info);
        assert!(s.steady_state.is_none());
        let text = render_section(&s);
        assert_eq!(
            text,
            "no steady-state window: requests in flight peaked at 4, never 95 % of the cap \
             512 (487); more requests or a lower max_concurrency would fill it\n"
        );
        assert!(render_markdown(&s).contains("## Steady state: main\n\nno steady-state window"));
        info.max_concurrency = None;
        assert_eq!(render_section(&acc.summarize(&info)), "", "no cap, no rule");
    }
}
