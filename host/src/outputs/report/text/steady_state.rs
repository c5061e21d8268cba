//! The "Steady state" section of each capped phase whose requests in flight reached 95 %
//! of the cap (`metrics/steady_state.rs`): the window, how full it held, and the headline
//! figures over it beside the whole phase's, as lines the text, markdown and HTML reports
//! each lay out their own way.

use crate::measuring::metrics::{Distribution, PhaseSummary, SteadyState};

/// The section's title in every format.
pub const TITLE: &str = "Steady state";

/// One line of the section: a label and its value.
type Line = (String, String);

/// `mean / p50 / p99` of a latency, ms.
fn latency(d: &Distribution) -> String {
    format!(
        "{:.2} / {:.2} / {:.2}",
        d.mean,
        d.median,
        super::format::pct(d, 99.0)
    )
}

/// The section's lines: the window's, then each figure over it and over the phase.
pub fn lines(st: &SteadyState, whole: &PhaseSummary) -> Vec<Line> {
    let w = &st.window;
    let mut out: Vec<Line> = vec![
        (
            "Window (s from phase start):".into(),
            format!("{:.3} to {:.3} ({:.3} s)", w.start_s, w.end_s, w.duration_s),
        ),
        (
            "In flight (mean over the window):".into(),
            format!(
                "{:.1} of {} ({:.1} % of the time at >= {})",
                w.mean_concurrency,
                w.cap,
                w.time_at_threshold * 100.0,
                w.threshold_requests
            ),
        ),
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

/// The section in the text report's layout; nothing without a steady state.
pub fn render_section(s: &PhaseSummary) -> String {
    s.steady_state.as_ref().map_or_else(String::new, |st| {
        super::format::lines_section(TITLE, &lines(st, s))
    })
}

/// The section of a phase as report.md gives it: a heading and a table.
pub fn render_markdown(s: &PhaseSummary) -> String {
    s.steady_state.as_ref().map_or_else(String::new, |st| {
        super::format::lines_markdown(TITLE, &s.name, &lines(st, s))
    })
}
