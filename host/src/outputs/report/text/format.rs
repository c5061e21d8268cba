//! The row and ruler helpers of the console reports, in `vllm bench serve`'s layout (see
//! `text.rs`). Kept apart from `text.rs`, which renders whole blocks from the sections of
//! `embeddings.rs`, `endpoints.rs` and `targets.rs`, so those sections can use the same
//! rows without importing the module that imports them.

use std::fmt::Display;
use std::fmt::Write as _;

use crate::measuring::metrics::catalogue::{self as metric, percentile_word, Latency, Scalar};
use crate::measuring::metrics::{Distribution, PhaseSummary};
use crate::safeguards::display::escape_control;

const WIDTH: usize = 50;

pub(super) fn title(out: &mut String, s: &str) {
    let _ = writeln!(out, "{s:=^WIDTH$}");
}

pub(super) fn section(out: &mut String, s: &str) {
    let _ = writeln!(out, "{s:-^WIDTH$}");
}

pub(super) fn footer(out: &mut String, c: char) {
    out.extend(std::iter::repeat_n(c, WIDTH));
    out.push('\n');
}

/// `"{:<40} {:<10}"`: integers and strings.
/// A section of label/value lines in the text layout: a 50-wide ruler with `title`,
/// labels in 40 columns.
pub(super) fn lines_section(title: &str, lines: &[(String, String)]) -> String {
    let mut out = format!("{:-^50}\n", format!(" {title} "));
    for (label, value) in lines {
        let _ = writeln!(out, "{label:<40} {value}");
    }
    out
}

/// The same lines as report.md gives them for phase `name`: a heading and a table, `|`
/// escaped.
pub(super) fn lines_markdown(title: &str, name: &str, lines: &[(String, String)]) -> String {
    let mut out = format!("\n## {title}: {name}\n\n| metric | value |\n|---|---|\n");
    for (label, value) in lines {
        let label = label.trim_end_matches(':').replace('|', "\\|");
        let _ = writeln!(out, "| {label} | {} |", value.replace('|', "\\|"));
    }
    out
}

pub(super) fn row(out: &mut String, label: &str, value: impl Display) {
    let _ = writeln!(out, "{label:<40} {value:<10}");
}

/// `"{:<40} {:<10.2f}"`: floats. (Rust and Python both round the exact binary value, ties
/// to even, so the digits agree.)
pub(super) fn row_f(out: &mut String, label: &str, value: f64) {
    let _ = writeln!(out, "{label:<40} {value:<10.2}");
}

/// `"{:<40} {:<10.3f}"`: a delay of microseconds, which two decimals of ms would read as 0.
pub(super) fn row_f3(out: &mut String, label: &str, value: f64) {
    let _ = writeln!(out, "{label:<40} {value:<10.3}");
}

/// Value of percentile `p` in `d`; a percentile the accumulator was not asked for reads 0.
pub(super) fn pct(d: &Distribution, p: f64) -> f64 {
    d.percentile(p).unwrap_or(0.0)
}

/// `Label:` of a catalogued scalar, with its value in a `{:<10}` (counts) or `{:<10.2}`
/// (everything else) field.
pub(super) fn metric_row(out: &mut String, m: &Scalar, s: &PhaseSummary) {
    let label = format!("{}:", m.label);
    let value = (m.value)(s).unwrap_or(0.0);
    if m.unit.is_count() {
        row(out, &label, value as u64);
    } else {
        row_f(out, &label, value);
    }
}

/// A catalogued latency's section: its title as a `-` ruler, then `Mean X (ms):`,
/// `Median X (ms):` and `P{p} X (ms):` rows (or mean, P99 and max; or median, P99 and
/// max to the microsecond).
pub(super) fn latency_section(out: &mut String, m: &Latency, s: &PhaseSummary) {
    let (d, short) = ((m.distribution)(s), m.short);
    section(out, m.title);
    match m.rows {
        metric::TextRows::MeanMedianPercentiles => {
            row_f(out, &format!("Mean {short} (ms):"), d.mean);
            row_f(out, &format!("Median {short} (ms):"), d.median);
            for &p in &s.percentiles {
                row_f(
                    out,
                    &format!("P{} {short} (ms):", percentile_word(p)),
                    pct(d, p),
                );
            }
        }
        metric::TextRows::MeanP99Max => {
            row_f(out, &format!("Mean {short} (ms):"), d.mean);
            row_f(out, &format!("P99 {short} (ms):"), pct(d, 99.0));
            row_f(out, &format!("Max {short} (ms):"), d.max);
        }
        metric::TextRows::MedianP99Max => {
            row_f3(out, &format!("Median {short} (ms):"), d.median);
            row_f3(out, &format!("P99 {short} (ms):"), pct(d, 99.0));
            row_f3(out, &format!("Max {short} (ms):"), d.max);
        }
    }
}

/// `text` on one line, at most `max` characters, its control characters escaped (a
/// server's message may carry terminal escape sequences).
pub(super) fn one_line(text: &str, max: usize) -> String {
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = escape_control(&words).into_owned();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max).collect();
    cut.push('…');
    cut
}

/// Our rows after a vLLM block that only a runner has: requests sent a second time (none
/// in vLLM, whose client never sends one again), then the failures by kind with the first
/// message of each, in the server's words.
pub(super) fn retried_and_failures(out: &mut String, s: &PhaseSummary) {
    if s.retried > 0 {
        row(out, "Retried requests:", s.retried);
    }
    if s.failures_by_kind.is_empty() {
        return;
    }
    section(out, "Failed Requests by Kind");
    for f in &s.failures_by_kind {
        row(out, &format!("Failed ({}):", f.kind.label()), f.count);
    }
    out.push_str("First message of each kind:\n");
    for f in &s.failures_by_kind {
        let _ = writeln!(
            out,
            "  {}: {}",
            f.kind.label(),
            one_line(&f.first_message, 160)
        );
    }
}
