//! A phase's session figures as labelled rows and per-turn columns, which the text,
//! markdown and HTML reports each lay out in their own way; shown only for a phase whose
//! requests named a session.

use crate::measuring::metrics::sessions::{SessionsSummary, TurnTtft, MAX_SESSIONS, MAX_TURNS};
use crate::measuring::metrics::Distribution;

/// Two decimals, as the text report's `{:<10.2}` rows.
fn f2(x: f64) -> String {
    format!("{x:.2}")
}

fn pct(d: &Distribution, p: f64) -> f64 {
    d.percentile(p).unwrap_or(0.0)
}

/// The session rows: (label with its colon, value). Labels never start like a vLLM label
/// ("Mean time to first tool call", not "Mean TTFT ..."), so parsers of the vLLM block
/// are not confused.
pub(crate) fn session_rows(s: &SessionsSummary) -> Vec<(String, String)> {
    let mut rows: Vec<(&str, String)> = vec![
        ("Sessions:", s.sessions.to_string()),
        ("Root sessions:", s.root_sessions.to_string()),
        ("Child sessions:", s.child_sessions.to_string()),
        ("Session requests:", s.requests.to_string()),
    ];
    if s.failed > 0 {
        rows.push(("Failed session requests:", s.failed.to_string()));
    }
    let secs = |ms: f64| f2(ms / 1e3);
    rows.extend([
        ("Mean session duration (s):", secs(s.duration.mean)),
        ("Median session duration (s):", secs(pct(&s.duration, 50.0))),
        ("P99 session duration (s):", secs(pct(&s.duration, 99.0))),
        (
            "Mean requests per session:",
            f2(s.requests_per_session.mean),
        ),
        (
            "Max requests per session:",
            (s.requests_per_session.max as u64).to_string(),
        ),
        ("Tool calls:", s.tool_calls.to_string()),
        (
            "Mean tool calls per session:",
            f2(s.tool_calls_per_session.mean),
        ),
        (
            "Max tool calls per session:",
            (s.tool_calls_per_session.max as u64).to_string(),
        ),
        ("Answers with tool calls:", s.tool_call_requests.to_string()),
        ("Tool-call tokens:", s.tool_call_tokens.to_string()),
    ]);
    let first = &s.time_to_first_tool_call;
    if first.count > 0 {
        rows.push(("Mean time to first tool call (ms):", f2(first.mean)));
        rows.push(("P99 time to first tool call (ms):", f2(pct(first, 99.0))));
    }
    rows.extend([
        ("Total tool wait (s):", secs(s.tool_wait_ms.total)),
        ("Mean tool wait per session (s):", secs(s.tool_wait_ms.mean)),
        ("Total think time (s):", secs(s.think_ms.total)),
        ("Mean think time per session (s):", secs(s.think_ms.mean)),
    ]);
    if let Some(share) = s.mean_cache_hit_share {
        rows.push(("Mean prefix-cache hit share (%):", f2(share * 100.0)));
    }
    rows.into_iter()
        .map(|(label, value)| (label.to_string(), value))
        .collect()
}

/// Column title and value of one turn index's row.
pub(crate) fn turn_columns(t: &TurnTtft) -> Vec<(&'static str, String)> {
    vec![
        ("turn", t.turn.to_string()),
        ("requests", t.requests.to_string()),
        ("mean TTFT ms", f2(t.ttft.mean)),
        ("P50 TTFT ms", f2(pct(&t.ttft, 50.0))),
        ("P99 TTFT ms", f2(pct(&t.ttft, 99.0))),
        ("mean input tokens", f2(t.mean_input_tokens)),
    ]
}

/// What the caps left out, in one sentence each; none below the caps.
pub(crate) fn overflow_notes(s: &SessionsSummary) -> Vec<String> {
    let mut out = Vec::new();
    if s.overflow_requests > 0 {
        out.push(format!(
            "{} requests of {} sessions past the first {MAX_SESSIONS} are left out of the per-session figures.",
            s.overflow_requests, s.overflow_sessions
        ));
    }
    if s.overflow_turn_requests > 0 {
        out.push(format!(
            "{} requests at turn {MAX_TURNS} or later are left out of TTFT by turn.",
            s.overflow_turn_requests
        ));
    }
    out
}
