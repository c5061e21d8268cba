use super::*;
use crate::measuring::metrics::{MetricsOptions, PhaseAccumulator, PhaseInfo, PhaseState};

const MS: u64 = 1_000_000;

/// A session's request: sent at `sent_ms`, its first chunk `ttft_ms` later, ending 10 ms
/// after that, with `tool_calls` calls (the first 5 ms after send) and the wait before it.
fn turn(
    session: &str,
    turn: u32,
    sent_ms: u64,
    ttft_ms: u64,
    input_tokens: u64,
    tool_calls: u32,
    wait: Option<(u64, bool)>,
) -> RequestRecord {
    let first = sent_ms + ttft_ms;
    serde_json::from_value(serde_json::json!({
        "phase": 0, "index": 0, "scheduled_ns": sent_ms * MS, "sent_ns": sent_ms * MS,
        "chunks": [{"t_ns": first * MS, "tokens": 1}, {"t_ns": (first + 10) * MS, "tokens": 2}],
        "end_ns": (first + 10) * MS, "input_tokens": input_tokens, "output_tokens": 3,
        "text_tokens": 3,
        "tool_calls": tool_calls,
        "first_tool_call_ns": (tool_calls > 0).then_some((sent_ms + 5) * MS),
        "tool_call_tokens": u64::from(tool_calls) * 7,
        "session": session, "session_step": turn, "turn": turn,
        "wait_ns": wait.map(|w| w.0 * MS), "tool_wait": wait.is_some_and(|w| w.1),
    }))
    .expect("a valid record")
}

/// Two sessions of three turns: "1" (TTFT 10, 20, 30 ms; two tool waits of 100 and
/// 300 ms) and "1/sub" (TTFT 30, 40, 50 ms; one think time of 1000 ms).
fn two_sessions() -> Vec<RequestRecord> {
    vec![
        turn("1", 0, 0, 10, 100, 2, None),
        turn("1/sub", 0, 5, 30, 100, 0, None),
        turn("1", 1, 120, 20, 200, 1, Some((100, true))),
        turn("1/sub", 1, 1045, 40, 300, 0, Some((1000, false))),
        turn("1", 2, 450, 30, 300, 0, Some((300, true))),
        turn("1/sub", 2, 1100, 50, 500, 0, Some((5, false))),
    ]
}

fn summary(records: &[RequestRecord]) -> Option<SessionsSummary> {
    let mut stats = SessionStats::default();
    for r in records {
        stats.record(r);
    }
    stats.summarize()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn two_sessions_of_three_turns_add_up_exactly() {
    let s = summary(&two_sessions()).expect("sessions");
    assert_eq!((s.sessions, s.root_sessions, s.child_sessions), (2, 1, 1));
    assert_eq!((s.requests, s.failed), (6, 0));
    // "1": 0 to 450 + 30 + 10 = 490 ms; "1/sub": 5 to 1100 + 50 + 10 = 1160, 1155 ms.
    assert_eq!(
        (s.duration.count, s.duration.min, s.duration.max),
        (2, 490.0, 1155.0)
    );
    assert!(close(s.duration.mean, 822.5));
    assert_eq!(s.duration.percentile(50.0), Some(822.5));
    assert!(close(
        s.duration.percentile(99.0).unwrap(),
        490.0 + 0.99 * 665.0
    ));
    let r = s.requests_per_session;
    assert_eq!((r.total, r.mean, r.max), (6.0, 3.0, 3.0));
    let t = s.tool_calls_per_session;
    assert_eq!((t.total, t.mean, t.max), (3.0, 1.5, 3.0));
    assert_eq!((s.tool_wait_ms.total, s.tool_wait_ms.mean), (400.0, 200.0));
    assert_eq!((s.think_ms.total, s.think_ms.mean), (1005.0, 502.5));
    assert_eq!(
        (s.tool_call_requests, s.tool_calls, s.tool_call_tokens),
        (2, 3, 21)
    );
    let first = &s.time_to_first_tool_call;
    assert_eq!((first.count, first.mean, first.max), (2, 5.0, 5.0));
    // No server reported cached tokens.
    assert_eq!((s.cache_sessions, s.mean_cache_hit_share), (0, None));
    // TTFT by turn: 10 and 30, 20 and 40, 30 and 50 ms; prompts grow with the turn.
    let rows: Vec<(u32, u64, f64, f64, f64)> = s
        .turns
        .iter()
        .map(|t| {
            let p50 = t.ttft.percentile(50.0).unwrap();
            (t.turn, t.requests, t.ttft.mean, p50, t.mean_input_tokens)
        })
        .collect();
    assert_eq!(
        rows,
        [
            (0, 2, 20.0, 20.0, 100.0),
            (1, 2, 30.0, 30.0, 250.0),
            (2, 2, 40.0, 40.0, 400.0)
        ]
    );
    assert!(close(s.turns[2].ttft.percentile(99.0).unwrap(), 49.8));
    assert_eq!(
        (
            s.overflow_sessions,
            s.overflow_requests,
            s.overflow_turn_requests
        ),
        (0, 0, 0)
    );
}

#[test]
fn a_phase_without_sessions_has_no_session_summary() {
    let mut plain = turn("1", 0, 0, 10, 100, 0, None);
    plain.session = Default::default();
    assert_eq!(summary(&[plain.clone()]), None);
    let mut acc = PhaseAccumulator::new(&MetricsOptions::default());
    acc.record(&plain);
    assert!(acc.state().sessions.is_empty());
    // Left out of shard.json, so a shard of a session-less phase reads as before.
    let json = serde_json::to_value(acc.state()).unwrap();
    assert!(json.get("sessions").is_none());
    let info = PhaseInfo {
        name: "main".into(),
        duration_ns: MS,
        max_concurrency: None,
        request_rate: None,
        burstiness: None,
        steady_window: None,
    };
    let summary = acc.summarize(&info);
    assert_eq!(summary.sessions, None);
    assert!(serde_json::to_value(&summary)
        .unwrap()
        .get("sessions")
        .is_none());
}

#[test]
fn the_prefix_cache_hit_share_is_per_session_where_the_server_reported_it() {
    let mut records = two_sessions();
    // "1": 50 of 100, then 150 of 200 prompt tokens cached (2/3), its last turn unreported;
    // "1/sub": none of 100 cached, then nothing reported. Mean of 2/3 and 0.
    for (i, cached) in [(0, 50), (2, 150), (1, 0)] {
        records[i].answer.cached_prompt_tokens = Some(cached);
    }
    let s = summary(&records).unwrap();
    assert_eq!(s.cache_sessions, 2);
    assert!(close(s.mean_cache_hit_share.unwrap(), 1.0 / 3.0));
    // A count past the prompt is held to the prompt.
    records[0].answer.cached_prompt_tokens = Some(1_000);
    let s = summary(&records).unwrap();
    assert!(close(
        s.mean_cache_hit_share.unwrap(),
        (250.0 / 300.0) / 2.0
    ));
}

#[test]
fn failed_requests_count_as_turns_but_not_for_ttft() {
    let mut records = two_sessions();
    records[4].error = Some(crate::measuring::metrics::RequestError {
        kind: crate::measuring::metrics::ErrorKind::Http5xx,
        message: "503".into(),
    });
    let s = summary(&records).unwrap();
    assert_eq!((s.requests, s.failed), (6, 1));
    let last = &s.turns[2];
    assert_eq!((last.requests, last.completed, last.ttft.count), (2, 1, 1));
    assert_eq!((last.ttft.mean, last.mean_input_tokens), (50.0, 500.0));
}

#[test]
fn sessions_and_turns_past_the_caps_are_counted_not_kept() {
    let mut stats = SessionStats::default();
    for i in 0..MAX_SESSIONS + 3 {
        stats.record(&turn(&i.to_string(), 0, 0, 10, 1, 0, None));
    }
    // The three late sessions' second turns join the overflow too.
    stats.record(&turn(&MAX_SESSIONS.to_string(), 1, 30, 10, 1, 0, None));
    stats.record(&turn("0", MAX_TURNS, 40, 10, 1, 0, None));
    let s = stats.summarize().unwrap();
    assert_eq!(s.sessions, MAX_SESSIONS as u64);
    assert_eq!((s.overflow_sessions, s.overflow_requests), (3, 4));
    assert_eq!(s.overflow_turn_requests, 1);
    assert_eq!(s.requests, MAX_SESSIONS as u64 + 5);
    assert_eq!(s.turns.len(), 2);
    assert_eq!(s.requests_per_session.max, 2.0);
}

/// The records split by session between `shards` accumulators, as `--shard` splits them.
fn merged(records: &[RequestRecord], shards: usize) -> SessionsSummary {
    let opts = MetricsOptions::default();
    let mut parts: Vec<PhaseAccumulator> =
        (0..shards).map(|_| PhaseAccumulator::new(&opts)).collect();
    for r in records {
        let id = r.session.session.as_deref().unwrap_or_default();
        let root: usize = id.split('/').next().unwrap().parse().unwrap();
        parts[root % shards].record(r);
    }
    let mut whole = PhaseAccumulator::new(&opts);
    for p in &parts {
        // Through shard.json, as `runner merge` reads it.
        let json = serde_json::to_string(&p.state()).unwrap();
        let state: PhaseState = serde_json::from_str(&json).unwrap();
        let acc = PhaseAccumulator::from_state(&opts, &state).unwrap();
        whole.merge(&acc).unwrap();
    }
    let info = PhaseInfo {
        name: "main".into(),
        duration_ns: 10_000 * MS,
        max_concurrency: None,
        request_rate: None,
        steady_window: None,
        burstiness: None,
    };
    whole.summarize(&info).sessions.expect("sessions")
}

/// `s` with each standard deviation to 9 decimals of a ms: Chan's pairwise update of a
/// merge and Welford's recurrence of one process may part in the last bits.
fn rounded_std(mut s: SessionsSummary) -> SessionsSummary {
    let round = |d: &mut Distribution| d.std = (d.std * 1e9).round() / 1e9;
    round(&mut s.duration);
    round(&mut s.time_to_first_tool_call);
    for t in &mut s.turns {
        round(&mut t.ttft);
    }
    s
}

#[test]
fn two_halves_merged_are_the_whole() {
    let mut records = Vec::new();
    for root in 0..40u64 {
        for t in 0..(root % 7 + 1) as u32 {
            let sent = root * 3 + u64::from(t) * 500;
            let id = if root % 5 == 0 {
                format!("{root}/child")
            } else {
                root.to_string()
            };
            let tools = (root + u64::from(t)) as u32 % 3;
            let wait = (t > 0).then_some((u64::from(t) * 40 + root, root % 2 == 0));
            let ttft = 5 + root % 11 + u64::from(t) * 3;
            records.push(turn(&id, t, sent, ttft, 50 * u64::from(t + 1), tools, wait));
        }
    }
    let whole = rounded_std(summary(&records).unwrap());
    assert_eq!(rounded_std(merged(&records, 2)), whole);
    assert_eq!(rounded_std(merged(&records, 4)), whole);
    assert_eq!(whole.sessions, 40);
    assert_eq!(whole.child_sessions, 8);
}

#[test]
fn a_shard_written_before_sessions_merges() {
    let opts = MetricsOptions::default();
    let mut acc = PhaseAccumulator::new(&opts);
    let mut plain = turn("1", 0, 0, 10, 100, 0, None);
    plain.session = Default::default();
    acc.record(&plain);
    let mut json = serde_json::to_value(acc.state()).unwrap();
    json.as_object_mut().unwrap().remove("sessions");
    let state: PhaseState = serde_json::from_value(json).unwrap();
    let old = PhaseAccumulator::from_state(&opts, &state).unwrap();
    let mut with_sessions = PhaseAccumulator::new(&opts);
    for r in two_sessions() {
        with_sessions.record(&r);
    }
    with_sessions.merge(&old).unwrap();
    let info = PhaseInfo {
        name: "main".into(),
        duration_ns: MS,
        max_concurrency: None,
        steady_window: None,
        request_rate: None,
        burstiness: None,
    };
    let s = with_sessions.summarize(&info);
    assert_eq!(s.completed, 7);
    assert_eq!(s.sessions, summary(&two_sessions()));
}

#[test]
fn a_state_with_more_sessions_than_a_run_keeps_is_refused() {
    let mut state = SessionStats::default();
    state.record(&two_sessions()[0]);
    let mut s = state.state();
    s.sessions = vec![s.sessions[0].clone(); MAX_SESSIONS + 1];
    assert_eq!(
        SessionStats::from_state(&s).unwrap_err().to_string(),
        "`sessions.sessions` holds 65537, more than the 65536 one run keeps"
    );
}

/// The summary of [`two_sessions`], for the reports' golden tests.
pub(crate) fn example() -> SessionsSummary {
    summary(&two_sessions()).expect("sessions")
}
